/*
 * test_rounding.c - the documented arithmetic at its edges, on 2 ranks (one IEEE
 * operation per element, so the result is the same in any order):
 *  - a table of f16 / bf16 sums and products with hand-written answers: ties to
 *    even, results that overflow to infinity, subnormal results, x + -x = +0;
 *  - random f16, bf16, f32 and f64 values over the whole exponent range (subnormals
 *    and overflow included) through allreduce, reduce (both roots), reduce_scatter,
 *    scan and bucketed, with every op, staged and direct, compared bit for bit with
 *    the reference (f32 accumulation, one rounding to nearest even on store).
 */
#include <stdlib.h>

#include "itest.h"

struct edge {
    int dtype, op;
    uint16_t a, b, want; /* rank 0's value, rank 1's value, the result */
    const char *what;
};

static const struct edge edges[] = {
    {NEXAR_F16, NEXAR_SUM, 0x7bff, 0x4c00, 0x7c00, "65504 + 16 = 65520: tie, to even = inf"},
    {NEXAR_F16, NEXAR_SUM, 0x7bff, 0x4800, 0x7bff, "65504 + 8 stays 65504"},
    {NEXAR_F16, NEXAR_SUM, 0xfbff, 0xcc00, 0xfc00, "-65504 - 16 = -inf"},
    {NEXAR_F16, NEXAR_SUM, 0x3c00, 0x1000, 0x3c00, "1 + 2^-11: tie, to even = 1"},
    {NEXAR_F16, NEXAR_SUM, 0x3c01, 0x1000, 0x3c02, "(1 + 2^-10) + 2^-11: tie, to even"},
    {NEXAR_F16, NEXAR_SUM, 0x0001, 0x0001, 0x0002, "2^-24 + 2^-24 (subnormals)"},
    {NEXAR_F16, NEXAR_SUM, 0x03ff, 0x0001, 0x0400, "largest subnormal + 2^-24 = smallest normal"},
    {NEXAR_F16, NEXAR_SUM, 0x3c00, 0xbc00, 0x0000, "1 + -1 = +0"},
    {NEXAR_F16, NEXAR_PROD, 0x0c00, 0x0800, 0x0000, "2^-12 * 2^-13 = 2^-25: tie, to even = 0"},
    {NEXAR_F16, NEXAR_PROD, 0x0e00, 0x0800, 0x0001, "1.5*2^-12 * 2^-13 = 0.75*2^-24 -> 2^-24"},
    {NEXAR_F16, NEXAR_PROD, 0x0e00, 0x0c00, 0x0002, "1.5*2^-12 * 2^-12 = 1.5*2^-24: tie, to even"},
    {NEXAR_F16, NEXAR_PROD, 0x5bff, 0x5c00, 0x7bff, "255.875 * 256 = 65504 exactly"},
    {NEXAR_F16, NEXAR_PROD, 0x5c00, 0x5c00, 0x7c00, "256 * 256 overflows to inf"},
    {NEXAR_F16, NEXAR_PROD, 0xbc00, 0x0001, 0x8001, "-1 * 2^-24"},
    {NEXAR_BF16, NEXAR_SUM, 0x3f80, 0x3b80, 0x3f80, "1 + 2^-8: tie, to even = 1"},
    {NEXAR_BF16, NEXAR_SUM, 0x3f81, 0x3b80, 0x3f82, "(1 + 2^-7) + 2^-8: tie, to even"},
    {NEXAR_BF16, NEXAR_SUM, 0x7f7f, 0x7f7f, 0x7f80, "max + max overflows to inf"},
    {NEXAR_BF16, NEXAR_SUM, 0x7f7f, 0x7b00, 0x7f80, "max + half an ulp: tie, to even = inf"},
    {NEXAR_BF16, NEXAR_PROD, 0x3fc0, 0x3fc0, 0x4010, "1.5 * 1.5 = 2.25"},
    {NEXAR_BF16, NEXAR_PROD, 0x3f81, 0x3f81, 0x3f82, "(1 + 2^-7)^2 rounds down"},
    {NEXAR_BF16, NEXAR_PROD, 0x0080, 0x3f00, 0x0040, "2^-126 * 0.5 = 2^-127 (subnormal)"},
};
#define NEDGES (sizeof(edges) / sizeof(edges[0]))

static int edge_table(nexar_comm_t *w, int me)
{
    int fails = 0;
    for (size_t i = 0; i < NEDGES; i++) {
        const struct edge *e = &edges[i];
        uint16_t v = me == 0 ? e->a : e->b, ref;
        const void *in[2] = {&e->a, &e->b};
        tl_reduce(e->dtype, e->op, &ref, in, 2, 1);
        if (ref != e->want) { /* the reference itself must agree with the table */
            tl_log("FAIL reference: %s %s: 0x%04x, table says 0x%04x", tl_dtype_name(e->dtype),
                   e->what, ref, e->want);
            fails++;
        }
        char ctx[160];
        snprintf(ctx, sizeof(ctx), "rank %d all_reduce %s %s: %s", me, tl_dtype_name(e->dtype),
                 tl_op_name(e->op), e->what);
        if (EXPECT_OK(fails, ctx, nexar_all_reduce(w, &v, 1, (nexar_dtype_t)e->dtype,
                                                   (nexar_op_t)e->op)))
            continue;
        if (tl_check_elems(ctx, e->dtype, &e->want, &v, 1))
            fails++;
    }
    if (me == 0 && !fails)
        tl_log("%zu hand-checked f16/bf16 edges (ties, overflow, subnormals): exact", NEDGES);
    return fails;
}

static int rank_main(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    fails += edge_table(w, r->rank);

    static const int colls[] = {TL_ALL_REDUCE, TL_REDUCE, TL_REDUCE_SCATTER, TL_SCAN, TL_BUCKETED};
    static const int dts[] = {NEXAR_F16, NEXAR_BF16, NEXAR_F32, NEXAR_F64};
    int cases = 0, bad = 0;
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++)
        for (int d = 0; d < 4; d++)
            for (int op = 0; op < NEXAR_OP_COUNT; op++)
                for (int k = 0; k < 2; k++) {
                    struct tl_case c = {.coll = colls[ci], .dtype = dts[d], .op = op,
                                        .count = k ? 65537 : 1001, .root = (cases / 2) % 2,
                                        .mode = k ? TL_HEAP : TL_ARENA, .full = 1,
                                        .seed = 0x5eed0000u + (uint64_t)cases};
                    int rv = tl_run_case(w, &c);
                    cases++;
                    if (rv != TL_CASE_OK)
                        bad++;
                    if (rv == TL_CASE_STATUS || rv == TL_CASE_SETUP) {
                        nexar_finalize();
                        return 1;
                    }
                }
    if (r->rank == 0)
        tl_log("%d cases of full-range f16/bf16/f32/f64 values (subnormals, overflow) through "
               "reducing collectives: %s", cases, bad ? "WRONG RESULTS (above)" : "exact");
    fails += bad;
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

int main(void)
{
    hx_require_nexard();
    tl_log("rounding edges, 2 ranks, daemon --slot-bytes 65536 --slots 2");
    struct hx_daemon d;
    if (hx_daemon_start(&d, (const char *const[]){"--slot-bytes", "65536", "--slots", "2", NULL}))
        return 1;
    int rv = itest_run(&d, 2, rank_main, NULL, 60, 240.0);
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
