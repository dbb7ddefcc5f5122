/*
 * coll_matrix.c - every collective x every dtype x every op x sizes x buffer modes
 * on one world size, against the reference in tests/lib.
 *
 *   itest_collectives --world N [--long]
 *
 * Starts a private nexard with small staging slots (--slot-bytes 64 KiB --slots 2)
 * so that the ~1 MiB cases are cut into many chunks, runs N rank processes that all
 * walk the same list of cases, and compares every output bit for bit.
 *   default: all collectives x dtypes x ops at counts {0,1,7,13,1001} on malloc'd
 *            buffers; ~1 MiB cases for a subset of dtypes; every root of the rooted
 *            ops; arena (direct), mixed (some ranks arena) and half (input arena,
 *            output malloc) buffers on subsets; barrier ordering.
 *   --long (or NEXAR_LONG_TESTS=1): the full cross product in every mode.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collref.h"
#include "harness.h"

static int g_long;

#define MiB (1024u * 1024u)

static size_t big_count(int coll, int dtype, int w)
{
    size_t blocks = 1;
    if (coll == TL_ALL_GATHER || coll == TL_GATHER || coll == TL_ALL_TO_ALL ||
        coll == TL_REDUCE_SCATTER || coll == TL_SCATTER)
        blocks = (size_t)w;
    return MiB / tl_esize(dtype) / blocks + 3; /* odd: not a multiple of anything */
}

struct tally {
    int cases, wrong, status;
    int per_coll[TL_COLL_COUNT];
};

/* Runs one case; returns -1 when the communicator can no longer be trusted. */
static int run1(nexar_comm_t *w, struct tally *t, struct tl_case *c)
{
    c->seed = tl_mix64((uint64_t)t->cases * 7919u + 17u);
    if (!tl_coll_has_root(c->coll))
        c->root = 0;
    int rv = tl_run_case(w, c);
    t->cases++;
    t->per_coll[c->coll]++;
    if (rv == TL_CASE_WRONG)
        t->wrong++;
    if (rv == TL_CASE_STATUS || rv == TL_CASE_SETUP) {
        t->status++;
        return -1;
    }
    return 0;
}

/* Every collective (but barrier) x dtypes x ops (where it has one) x counts. */
static int sweep(nexar_comm_t *w, struct tally *t, const char *label, int mode,
                 const int *dtypes, int ndt, const int *ops, int nops, const size_t *counts,
                 int ncounts, int big)
{
    int size = nexar_comm_size(w), me = nexar_comm_rank(w);
    for (int coll = 0; coll < TL_BARRIER; coll++) {
        int before = t->cases, wrong = t->wrong;
        for (int d = 0; d < ndt; d++) {
            int nop = tl_coll_has_op(coll) ? nops : 1;
            for (int o = 0; o < nop; o++) {
                for (int k = 0; k < ncounts + (big ? 1 : 0); k++) {
                    struct tl_case c = {.coll = coll, .dtype = dtypes[d],
                                        .op = tl_coll_has_op(coll) ? ops[o] : 0,
                                        .mode = mode, .call = TL_BLOCKING};
                    c.count = k < ncounts ? counts[k] : big_count(coll, dtypes[d], size);
                    c.root = (t->cases + k) % size;
                    if (run1(w, t, &c))
                        return -1;
                }
            }
        }
        if (me == 0)
            tl_log("%s: %-20s mode=%-5s %4d cases, %s", label, tl_coll_name(coll),
                   tl_mode_name(mode), t->cases - before,
                   t->wrong == wrong ? "all exact" : "WRONG RESULTS (above)");
    }
    return 0;
}

/* Rooted ops at every root, small and ~1 MiB. */
static int every_root(nexar_comm_t *w, struct tally *t)
{
    static const int rooted[] = {TL_BROADCAST, TL_REDUCE, TL_GATHER, TL_SCATTER};
    int size = nexar_comm_size(w);
    for (int i = 0; i < 4; i++)
        for (int root = 0; root < size; root++)
            for (int k = 0; k < 2; k++) {
                struct tl_case c = {.coll = rooted[i], .dtype = k ? NEXAR_F32 : NEXAR_I32,
                                    .op = NEXAR_SUM, .root = root, .mode = TL_HEAP};
                c.count = k ? big_count(c.coll, c.dtype, size) : 13;
                if (run1(w, t, &c))
                    return -1;
            }
    if (nexar_comm_rank(w) == 0)
        tl_log("every root of broadcast/reduce/gather/scatter at counts 13 and ~1 MiB: %s",
               t->wrong ? "WRONG RESULTS so far" : "exact");
    return 0;
}

/* reduce with recv == send on every rank, at every root. */
static int reduce_in_place(nexar_comm_t *w, struct tally *t)
{
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    size_t n = 1001;
    float *buf = malloc(n * 4), *exp = malloc(n * 4);
    const void *in[HX_MAX_RANKS];
    float *all[HX_MAX_RANKS];
    for (int root = 0; root < size; root++) {
        for (int r = 0; r < size; r++) {
            all[r] = malloc(n * 4);
            tl_pattern(NEXAR_F32, NEXAR_SUM, 4242u + (unsigned)root, r, 0, all[r], n);
            in[r] = all[r];
        }
        tl_reduce(NEXAR_F32, NEXAR_SUM, exp, in, size, n);
        memcpy(buf, all[me], n * 4);
        nexar_status_t st = nexar_reduce(w, buf, buf, n, NEXAR_F32, NEXAR_SUM, root);
        char ctx[96];
        snprintf(ctx, sizeof(ctx), "rank %d reduce in place (recv == send) f32 sum count=1001 root=%d",
                 me, root);
        if (tl_check_status(ctx, NEXAR_OK, st))
            bad = 1;
        else if (me == root && tl_check_elems(ctx, NEXAR_F32, exp, buf, n))
            t->wrong++;
        for (int r = 0; r < size; r++)
            free(all[r]);
    }
    free(buf);
    free(exp);
    if (me == 0 && !bad)
        tl_log("reduce with recv == send at every root: done");
    return bad ? -1 : 0;
}

/* all_gather with send == recv + rank * count (MPI_IN_PLACE style), staged, at a count
 * that takes several 64 KiB slots: the shim copies a staged all_gather's own block
 * itself, and must not copy it onto itself or lose it. Every block is checked. */
static int all_gather_in_place(nexar_comm_t *w, struct tally *t)
{
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    static const size_t counts[] = {1, 1001, 70001};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !bad; k++) {
        size_t n = counts[k];
        uint32_t *buf = malloc(n * size * 4), *exp = malloc(n * size * 4);
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < n; i++)
                exp[(size_t)r * n + i] = 0x9e3779b9u * (uint32_t)(r + 1) + (uint32_t)i * 7u + (uint32_t)n;
        for (size_t i = 0; i < n * size; i++)
            buf[i] = 0xdeadbeefu; /* what must be overwritten */
        memcpy(buf + (size_t)me * n, exp + (size_t)me * n, n * 4);
        nexar_status_t st = nexar_all_gather(w, buf + (size_t)me * n, buf, n, NEXAR_U32);
        char ctx[96];
        snprintf(ctx, sizeof(ctx), "rank %d all_gather in place (send == recv + rank) u32 count=%zu",
                 me, n);
        if (tl_check_status(ctx, NEXAR_OK, st))
            bad = 1;
        else if (tl_check_elems(ctx, NEXAR_U32, exp, buf, n * size))
            t->wrong++;
        free(buf);
        free(exp);
    }
    if (me == 0 && !bad)
        tl_log("all_gather with send inside recv at counts 1, 1001, 70001: done");
    return bad ? -1 : 0;
}

static int rank_main(struct hx_rank *r)
{
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    if (nexar_comm_rank(w) != r->rank || nexar_comm_size(w) != r->size) {
        tl_log("FAIL: world rank/size %d/%d, expected %d/%d", nexar_comm_rank(w),
               nexar_comm_size(w), r->rank, r->size);
        nexar_finalize();
        return 1;
    }
    struct tally t = {0};
    static const int all_dt[] = {NEXAR_F32, NEXAR_F64, NEXAR_F16, NEXAR_BF16, NEXAR_I8,
                                 NEXAR_U8,  NEXAR_I32, NEXAR_U32, NEXAR_I64,  NEXAR_U64};
    static const int all_ops[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MIN, NEXAR_MAX};
    static const size_t small[] = {0, 1, 7, 13, 1001};
    static const size_t longc[] = {0, 1, 2, 3, 7, 13, 64, 1001, 4097, 65537};
    int rc = 0;

    if (g_long) {
        for (int mode = 0; mode < TL_MODE_COUNT && !rc; mode++)
            rc = sweep(w, &t, "long: every dtype x op x 11 counts", mode, all_dt, 10, all_ops, 4, longc, 10, 1);
    } else {
        /* A: every dtype x op on malloc'd (staged) buffers */
        rc = sweep(w, &t, "every dtype x op, counts 0 1 7 13 1001", TL_HEAP, all_dt, 10,
                   all_ops, 4, small, 5, 0);
        /* B: ~1 MiB, chunked many times over the 64 KiB slots */
        static const int sum[] = {NEXAR_SUM};
        if (!rc)
            rc = sweep(w, &t, "~1 MiB every dtype, sum", TL_HEAP, all_dt, 10, sum, 1, NULL, 0, 1);
        static const int big_dt[] = {NEXAR_F32, NEXAR_BF16, NEXAR_I8, NEXAR_U64};
        static const int max[] = {NEXAR_MAX};
        if (!rc)
            rc = sweep(w, &t, "~1 MiB f32/bf16/i8/u64 max", TL_HEAP, big_dt, 4, max, 1, NULL, 0, 1);
        static const int f16[] = {NEXAR_F16};
        static const int prod[] = {NEXAR_PROD, NEXAR_MIN};
        if (!rc)
            rc = sweep(w, &t, "~1 MiB f16 prod+min", TL_HEAP, f16, 1, prod, 2, NULL, 0, 1);
        if (!rc)
            rc = every_root(w, &t);
        if (!rc)
            rc = reduce_in_place(w, &t);
        if (!rc)
            rc = all_gather_in_place(w, &t);
        /* D: arena buffers, the direct path */
        static const int ar_dt[] = {NEXAR_F32, NEXAR_F16, NEXAR_I32, NEXAR_U8};
        static const size_t ar_c[] = {0, 1, 13, 1001};
        static const int ar_ops[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MAX};
        if (!rc)
            rc = sweep(w, &t, "arena f32/f16/i32/u8 sum+prod+max", TL_ARENA, ar_dt, 4, ar_ops, 3,
                       ar_c, 4, 0);
        static const int f32[] = {NEXAR_F32};
        if (!rc)
            rc = sweep(w, &t, "arena ~1 MiB f32 sum", TL_ARENA, f32, 1, sum, 1, NULL, 0, 1);
        /* E: mixed: even ranks arena, odd ranks malloc */
        static const int mx_dt[] = {NEXAR_F64, NEXAR_BF16, NEXAR_I64};
        static const int mx_ops[] = {NEXAR_SUM, NEXAR_MIN};
        static const size_t mx_c[] = {7, 1001};
        if (!rc)
            rc = sweep(w, &t, "mixed f64/bf16/i64 sum+min", TL_MIXED, mx_dt, 3, mx_ops, 2,
                       mx_c, 2, 0);
        static const int f64[] = {NEXAR_F64};
        if (!rc)
            rc = sweep(w, &t, "mixed ~1 MiB f64 sum", TL_MIXED, f64, 1, sum, 1, NULL, 0, 1);
        /* F: input in the arena, output malloc'd */
        static const int hf_dt[] = {NEXAR_F32, NEXAR_U32};
        static const size_t hf_c[] = {13};
        if (!rc)
            rc = sweep(w, &t, "input arena, output malloc", TL_HALF, hf_dt, 2, sum, 1, hf_c,
                       1, 1);
    }
    if (!rc && tl_barrier_order(w, 3))
        rc = -1;
    else if (!rc && nexar_comm_rank(w) == 0)
        tl_log("barrier: no rank left before the last one entered (3 rounds)");
    nexar_status_t fst = nexar_finalize();
    if (fst != NEXAR_OK)
        tl_log("FAIL nexar_finalize: %s: %s", tl_status_name((int)fst), nexar_last_error());
    if (r->rank == 0 || t.wrong || t.status || rc)
        tl_log("%d cases, %d with wrong data, %d with an error status%s", t.cases, t.wrong,
               t.status, rc ? " (stopped early)" : "");
    return (t.wrong || t.status || rc || fst != NEXAR_OK) ? 1 : 0;
}

int main(int argc, char **argv)
{
    int world = 2;
    static const struct option lo[] = {{"world", required_argument, NULL, 'w'},
                                       {"long", no_argument, NULL, 'l'},
                                       {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "w:l", lo, NULL)) != -1;) {
        if (ch == 'w')
            world = atoi(optarg);
        else if (ch == 'l')
            g_long = 1;
        else
            return 2;
    }
    g_long |= hx_env_flag("NEXAR_LONG_TESTS");
    hx_require_nexard();
    tl_log("collectives matrix: world %d, %s run, daemon --slot-bytes 65536 --slots 2",
           world, g_long ? "long" : "default");

    struct hx_daemon d;
    const char *args[] = {"--slot-bytes", "65536", "--slots", "2", "--heap-bytes",
                          "16777216", NULL};
    if (hx_daemon_start(&d, args))
        return 1;
    struct hx_job_opts o = {.sock = d.sock, .size = world, .fn = rank_main,
                            .nexar_timeout_s = 120};
    double t0 = tl_now();
    int rv = hx_run(&o, g_long ? 3000.0 : 400.0);
    tl_log("ranks finished in %.1f s", tl_now() - t0);
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
