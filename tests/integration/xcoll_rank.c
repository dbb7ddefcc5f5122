/*
 * xcoll_rank.c - the rank program of the cross-node correctness tests (test_xcoll.c):
 * every collective, point to point and comm_split on a world whose ranks are spread
 * over several nodes, every result checked bit for bit against tests/lib's reference.
 *
 *   itest_xcoll_rank [--level small|rep|full] [--long]
 *                    [--parts matrix,p2p,split,soak,tsoak]
 *
 * Placement: see xcoll.h ($XC_PLACE or $XC_NODES).  NEXAR_LONG_TESTS=1 is --long.
 *
 * matrix  every collective (barrier included) over dtypes x ops x counts {0, 1, 7, 13,
 *         1001} (odd, and no multiple of any world size used), ~1 MiB cases (many staging
 *         slots; the daemons run with --slot-bytes 64 KiB), every root of the rooted ops,
 *         arena (direct) buffers beside malloc'd (staged) ones, blocking, wait and test
 *         calls, several nonblocking ops in flight at once, barrier order.  The level
 *         picks how much of the dtype x op cross product runs (full: all of it at the
 *         small counts); --long runs it at ten counts in every buffer mode and call form.
 * p2p     xcoll_p2p.c;  split  xcoll_split.c;  soak, tsoak  xcoll_soak.c (not in the
 *         default list: they want daemons with full-size slots).
 *
 * --level device: the matrix on device buffers (issue 15), for a job whose daemons are
 *         the test nexard with the fake device backend and whose ranks load the fake
 *         libcuda ($NX_FAKE_CUDA): its shared "device" memory is what nexard's staging
 *         copies move.  Small counts, and counts that cut each op into two parts of
 *         NX_DEV_XCHUNK_BYTES (device.h).  Part devp2p: messages to the next rank
 *         around the ring of nodes and from the previous, device to device, device to
 *         host and host to device, at counts of no, one and several pieces (more than
 *         the sending window's XP_WINDOW).  Part
 *         devstream: a stream-ordered all_reduce across the nodes returns at once, and
 *         the rank's stream (the fake's model of one) is released only once the result is
 *         in the buffer, with no nexar call in between.  It tests nexard's logic, not
 *         CUDA.
 *
 * A part stops at its first error status (the communicator may be failed; later cases
 * would only repeat it) or after 10 cases with wrong data.  Every failure line names
 * the rank, the case (tl_case_str) and the status with nexar_last_error().  Exit 0
 * when every check passed, 1 otherwise.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collref.h"
#include "fake_cuda.h"
#include "harness.h"
#include "shm_abi.h"
#include "xcoll.h"

#define MiB (1024u * 1024u)
#define NA(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define NC(...) (const size_t[]){__VA_ARGS__}, \
                (int)(sizeof((size_t[]){__VA_ARGS__}) / sizeof(size_t))

/* ---- placement ------------------------------------------------------------------- */

int xc_place_init(struct xc_place *p, int size)
{
    memset(p, 0, sizeof(*p));
    p->size = size;
    if (size < 1 || size > XC_MAX) {
        tl_log("FAIL: world size %d (1..%d)", size, XC_MAX);
        return -1;
    }
    const char *pl = getenv("XC_PLACE"), *k = getenv("XC_NODES");
    if (pl && *pl) {
        const char *s = pl;
        for (int r = 0; r < size; r++) {
            char *end;
            long v = strtol(s, &end, 10);
            if (end == s || v < 0 || v >= XC_MAX) {
                tl_log("FAIL: XC_PLACE=%s does not place rank %d", pl, r);
                return -1;
            }
            p->node[r] = (int)v;
            if (v + 1 > p->nodes)
                p->nodes = (int)v + 1;
            s = *end == ',' ? end + 1 : end;
        }
    } else {
        p->nodes = k && *k ? atoi(k) : 1;
        if (p->nodes < 1 || p->nodes > size) {
            tl_log("FAIL: XC_NODES=%s with %d ranks", k, size);
            return -1;
        }
        for (int r = 0; r < size; r++)
            p->node[r] = r * p->nodes / size;
    }
    return 0;
}

void xc_place_str(const struct xc_place *p, char *out, size_t len)
{
    size_t off = 0;
    out[0] = '\0';
    for (int r = 0; r < p->size && off < len; r++)
        off += (size_t)snprintf(out + off, len - off, "%s%d", r ? "," : "", p->node[r]);
}

int xc_local_index(const struct xc_place *p, int r)
{
    int li = 0;
    for (int q = 0; q < r; q++)
        li += p->node[q] == p->node[r];
    return li;
}

int xc_local_count(const struct xc_place *p, int node)
{
    int n = 0;
    for (int q = 0; q < p->size; q++)
        n += p->node[q] == node;
    return n;
}

int xc_next(const struct xc_place *p, int r)
{
    if (p->nodes < 2)
        return (r + 1) % p->size;
    int nn = (p->node[r] + 1) % p->nodes, want = xc_local_index(p, r) % xc_local_count(p, nn);
    for (int q = 0; q < p->size; q++)
        if (p->node[q] == nn && xc_local_index(p, q) == want)
            return q;
    return -1;
}

int xc_prev(const struct xc_place *p, int r)
{
    for (int q = 0; q < p->size; q++)
        if (xc_next(p, q) == r)
            return q;
    return -1;
}

/* ---- the matrix ------------------------------------------------------------------- */

struct tally {
    int cases, wrong;
};

/* ~1 MiB per buffer and 3 elements more: sixteen 64 KiB staging slots and a piece. */
static size_t big_count(int coll, int dtype, int w)
{
    size_t blocks = 1;
    if (coll == TL_ALL_GATHER || coll == TL_GATHER || coll == TL_ALL_TO_ALL ||
        coll == TL_REDUCE_SCATTER || coll == TL_SCATTER)
        blocks = (size_t)w;
    return MiB / tl_esize(dtype) / blocks + 3;
}

/* One case; -1 when the part must stop. */
static int run1(nexar_comm_t *w, struct tally *t, struct tl_case *c)
{
    c->seed = tl_mix64((uint64_t)t->cases * 7919u + 17u);
    if (!tl_coll_has_root(c->coll))
        c->root = 0;
    if (!tl_coll_has_op(c->coll))
        c->op = 0;
    int rv = tl_run_case(w, c); /* prints rank, case, status and last error on failure */
    t->cases++;
    if (rv == TL_CASE_WRONG && ++t->wrong >= 10) {
        tl_log("FAIL: 10 cases with wrong data; the matrix stops here");
        return -1;
    }
    return rv == TL_CASE_STATUS || rv == TL_CASE_SETUP ? -1 : 0;
}

struct sweep {
    const char *label;
    int mode, call;
    const int *dt;
    int ndt;
    const int *ops;
    int nops;
    const size_t *counts;
    int ncounts;
    int big; /* one more count per dtype x op: big_count(), or with 2 dev_count() */
};

/* tl_coll numbers the collectives in enum nx_kind's order, from 1. */
_Static_assert(TL_ALL_REDUCE + 1 == NX_K_ALL_REDUCE && TL_BUCKETED + 1 == NX_K_ALL_REDUCE_BUCKETED,
               "tl_coll and nx_kind in one order");

/* One and a half of the parts a device op across nodes is cut into (nexard's plan:
 * nx_chunk_elems of device.h's NX_DEV_XCHUNK_BYTES, 4 MiB): two parts, the last short. */
static size_t dev_count(int coll, int dtype, int w)
{
    uint64_t part = nx_chunk_elems((uint8_t)(coll + 1), (uint32_t)w, (uint32_t)tl_esize(dtype),
                                   4u * MiB);
    return part + part / 2 + 7;
}

/* Every collective over s's dtypes x ops (where it has one) x counts; barrier once. */
static int sweep(nexar_comm_t *w, struct tally *t, const struct sweep *s)
{
    int size = nexar_comm_size(w);
    int before = t->cases, wrong = t->wrong;
    double t0 = tl_now();
    for (int coll = 0; coll < TL_COLL_COUNT; coll++) {
        if (coll == TL_BARRIER) {
            struct tl_case c = {.coll = coll, .mode = s->mode, .call = s->call};
            if (run1(w, t, &c))
                return -1;
            continue;
        }
        for (int d = 0; d < s->ndt; d++) {
            int nop = tl_coll_has_op(coll) ? s->nops : 1;
            for (int o = 0; o < nop; o++)
                for (int k = 0; k < s->ncounts + (s->big ? 1 : 0); k++) {
                    struct tl_case c = {.coll = coll, .dtype = s->dt[d], .op = s->ops[o],
                                        .mode = s->mode, .call = s->call};
                    c.count = k < s->ncounts ? s->counts[k]
                              : s->big == 2  ? dev_count(coll, c.dtype, size)
                                             : big_count(coll, c.dtype, size);
                    c.root = (t->cases + k) % size; /* the roots rotate */
                    if (run1(w, t, &c))
                        return -1;
                }
        }
    }
    if (nexar_comm_rank(w) == 0)
        tl_log("%-44s %5d cases, %5.1f s, %s", s->label, t->cases - before, tl_now() - t0,
               t->wrong == wrong ? "all exact" : "WRONG RESULTS (above)");
    return 0;
}

/* Every root of the rooted collectives at the given counts (big: also ~1 MiB). */
static int every_root(nexar_comm_t *w, struct tally *t, const size_t *counts, int ncounts,
                      int big)
{
    static const int rooted[] = {TL_BROADCAST, TL_REDUCE, TL_GATHER, TL_SCATTER};
    int size = nexar_comm_size(w), before = t->cases, wrong = t->wrong;
    double t0 = tl_now();
    for (int i = 0; i < 4; i++)
        for (int root = 0; root < size; root++)
            for (int k = 0; k < ncounts + (big ? 1 : 0); k++) {
                struct tl_case c = {.coll = rooted[i], .dtype = k % 2 ? NEXAR_F32 : NEXAR_I32,
                                    .op = NEXAR_SUM, .root = root, .mode = TL_HEAP};
                c.count = k < ncounts ? counts[k] : big_count(c.coll, c.dtype, size);
                if (run1(w, t, &c))
                    return -1;
            }
    if (nexar_comm_rank(w) == 0)
        tl_log("%-44s %5d cases, %5.1f s, %s", "every root of broadcast/reduce/gather/scatter",
               t->cases - before, tl_now() - t0,
               t->wrong == wrong ? "all exact" : "WRONG RESULTS (above)");
    return 0;
}

/* Five nonblocking ops of different kinds in flight at once, completed out of order
 * (test, wait, then nexar_sync for the rest): each must come back exact. */
static int overlap(nexar_comm_t *w, struct tally *t)
{
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    size_t na = MiB / 4 + 3, nb = 1001, nc = 13, nd = 4099;
    int broot = size - 1;
    float *a = malloc(na * 4), *ea = malloc(na * 4);
    int32_t *b = malloc(nb * 4), *eb = malloc(nb * 4);
    uint8_t *cs = malloc(nc), *cr = malloc(nc * (size_t)size), *ec = malloc(nc * (size_t)size);
    double *ds = malloc(nd * 8 * (size_t)size), *dr = malloc(nd * 8), *ed = malloc(nd * 8);
    void **in_a = calloc((size_t)size, sizeof(void *));
    void **in_d = calloc((size_t)size, sizeof(void *));
    const void **blk = calloc((size_t)size, sizeof(void *));
    for (int r = 0; r < size; r++) {
        in_a[r] = malloc(na * 4);
        tl_pattern(NEXAR_F32, NEXAR_SUM, 101, r, 0, in_a[r], na);
        in_d[r] = malloc(nd * 8 * (size_t)size);
        tl_pattern(NEXAR_F64, NEXAR_MAX, 103, r, 0, in_d[r], nd * (size_t)size);
        blk[r] = (const char *)in_d[r] + (size_t)me * nd * 8;
        tl_pattern(NEXAR_U8, -1, 104, r, 0, ec + (size_t)r * nc, nc);
    }
    tl_reduce(NEXAR_F32, NEXAR_SUM, ea, (const void *const *)in_a, size, na);
    tl_pattern(NEXAR_I32, -1, 102, broot, 0, eb, nb);
    tl_reduce(NEXAR_F64, NEXAR_MAX, ed, blk, size, nd);
    memcpy(a, in_a[me], na * 4);
    if (me == broot)
        memcpy(b, eb, nb * 4);
    else
        memset(b, 0x5a, nb * 4);
    memcpy(cs, ec + (size_t)me * nc, nc);
    memcpy(ds, in_d[me], nd * 8 * (size_t)size);

    nexar_request_t *q[5] = {NULL};
    nexar_status_t st[5];
    st[0] = nexar_iall_reduce(w, a, na, NEXAR_F32, NEXAR_SUM, &q[0]);
    st[1] = nexar_ibroadcast(w, b, nb, NEXAR_I32, broot, &q[1]);
    st[2] = nexar_iall_gather(w, cs, cr, nc, NEXAR_U8, &q[2]);
    st[3] = nexar_ireduce_scatter(w, ds, dr, nd, NEXAR_F64, NEXAR_MAX, &q[3]);
    st[4] = nexar_ibarrier(w, &q[4]);
    char ctx[160];
    for (int i = 0; i < 5; i++) {
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: posting op %d of 5", me, size, i);
        bad |= tl_check_status(ctx, NEXAR_OK, st[i]);
    }
    if (!bad) {
        int done = 0;
        nexar_status_t s2 = NEXAR_OK;
        while (!done && s2 == NEXAR_OK)
            s2 = nexar_test(q[2], &done);
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: test of all_gather u8 count=13", me, size);
        bad |= tl_check_status(ctx, NEXAR_OK, s2);
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: wait of all_reduce f32 sum count=%zu",
                 me, size, na);
        bad |= tl_check_status(ctx, NEXAR_OK, nexar_wait(q[0]));
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: nexar_sync for broadcast, "
                 "reduce_scatter and barrier", me, size);
        bad |= tl_check_status(ctx, NEXAR_OK, nexar_sync(w));
    }
    if (!bad) {
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: all_reduce f32 sum count=%zu", me, size,
                 na);
        t->wrong += tl_check_elems(ctx, NEXAR_F32, ea, a, na) != 0;
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: broadcast i32 count=1001 root=%d", me,
                 size, broot);
        t->wrong += tl_check_elems(ctx, NEXAR_I32, eb, b, nb) != 0;
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: all_gather u8 count=13", me, size);
        t->wrong += tl_check_elems(ctx, NEXAR_U8, ec, cr, nc * (size_t)size) != 0;
        snprintf(ctx, sizeof(ctx), "rank %d/%d overlap: reduce_scatter f64 max count=4099", me,
                 size);
        t->wrong += tl_check_elems(ctx, NEXAR_F64, ed, dr, nd) != 0;
    }
    t->cases += 5;
    for (int r = 0; r < size; r++) {
        free(in_a[r]);
        free(in_d[r]);
    }
    free(in_a), free(in_d), free(blk);
    free(a), free(ea), free(b), free(eb), free(cs), free(cr), free(ec), free(ds), free(dr),
        free(ed);
    if (me == 0 && !bad)
        tl_log("%-44s %5d ops, %s", "5 nonblocking ops in flight at once", 5,
               t->wrong ? "WRONG RESULTS (above)" : "all exact");
    return bad ? -1 : 0;
}

enum { L_SMALL, L_REP, L_FULL, L_DEVICE };

static const int all_dt[] = {NEXAR_F32, NEXAR_F64, NEXAR_F16, NEXAR_BF16, NEXAR_I8,
                             NEXAR_U8,  NEXAR_I32, NEXAR_U32, NEXAR_I64,  NEXAR_U64};
static const int all_ops[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MIN, NEXAR_MAX};
#define ALL_DT all_dt, 10
#define ALL_OPS all_ops, 4
#define C5 NC(0, 1, 7, 13, 1001)

/* The default sets: A small counts on malloc'd buffers, B ~1 MiB, D arena, E the
 * nonblocking forms, F mixed and half buffers.  See the file comment. */
static const struct sweep full_set[] = {
    {"A every dtype x op, counts 0 1 7 13 1001", TL_HEAP, TL_BLOCKING, ALL_DT, ALL_OPS, C5, 0},
    {"B ~1 MiB every dtype, sum", TL_HEAP, TL_BLOCKING, ALL_DT, NA(NEXAR_SUM), NULL, 0, 1},
    {"B ~1 MiB f32 bf16 i8 u64, max", TL_HEAP, TL_BLOCKING,
     NA(NEXAR_F32, NEXAR_BF16, NEXAR_I8, NEXAR_U64), NA(NEXAR_MAX), NULL, 0, 1},
    {"B ~1 MiB f16, prod min", TL_HEAP, TL_BLOCKING, NA(NEXAR_F16), NA(NEXAR_PROD, NEXAR_MIN),
     NULL, 0, 1},
    {"D arena f32 f16 i32 u8 x sum prod max", TL_ARENA, TL_BLOCKING,
     NA(NEXAR_F32, NEXAR_F16, NEXAR_I32, NEXAR_U8), NA(NEXAR_SUM, NEXAR_PROD, NEXAR_MAX),
     NC(0, 1, 13, 1001), 0},
    {"D arena ~1 MiB f32 sum", TL_ARENA, TL_BLOCKING, NA(NEXAR_F32), NA(NEXAR_SUM), NULL, 0, 1},
    {"E iwait f32 bf16 i64 x sum min", TL_HEAP, TL_WAIT, NA(NEXAR_F32, NEXAR_BF16, NEXAR_I64),
     NA(NEXAR_SUM, NEXAR_MIN), NC(1, 1001), 1},
    {"E itest f64 u8 max", TL_HEAP, TL_TESTLOOP, NA(NEXAR_F64, NEXAR_U8), NA(NEXAR_MAX),
     NC(13), 1},
    {"F mixed f64 bf16 i64 x sum min", TL_MIXED, TL_BLOCKING,
     NA(NEXAR_F64, NEXAR_BF16, NEXAR_I64), NA(NEXAR_SUM, NEXAR_MIN), NC(7, 1001), 0},
    {"F half (input arena) f32 u32 sum", TL_HALF, TL_BLOCKING, NA(NEXAR_F32, NEXAR_U32),
     NA(NEXAR_SUM), NC(13), 1},
};

static const struct sweep rep_set[] = {
    {"A f32 f16 bf16 i8 u64 x every op, 0 1 7 1001", TL_HEAP, TL_BLOCKING,
     NA(NEXAR_F32, NEXAR_F16, NEXAR_BF16, NEXAR_I8, NEXAR_U64), ALL_OPS, NC(0, 1, 7, 1001), 0},
    {"A every dtype, sum, count 13", TL_HEAP, TL_BLOCKING, ALL_DT, NA(NEXAR_SUM), NC(13), 0},
    {"B ~1 MiB f32 f16 i64, sum", TL_HEAP, TL_BLOCKING, NA(NEXAR_F32, NEXAR_F16, NEXAR_I64),
     NA(NEXAR_SUM), NULL, 0, 1},
    {"B ~1 MiB bf16 u8, max", TL_HEAP, TL_BLOCKING, NA(NEXAR_BF16, NEXAR_U8), NA(NEXAR_MAX),
     NULL, 0, 1},
    {"D arena f32 u8 x sum max", TL_ARENA, TL_BLOCKING, NA(NEXAR_F32, NEXAR_U8),
     NA(NEXAR_SUM, NEXAR_MAX), NC(1, 1001), 1},
    /* parts of a direct op: one rank per node works at the op's block stride */
    {"D arena ~1 MiB i32 sum", TL_ARENA, TL_BLOCKING, NA(NEXAR_I32), NA(NEXAR_SUM), NULL, 0, 1},
    {"E iwait f32 i64 sum", TL_HEAP, TL_WAIT, NA(NEXAR_F32, NEXAR_I64), NA(NEXAR_SUM), NC(13),
     1},
    {"E itest bf16 max", TL_HEAP, TL_TESTLOOP, NA(NEXAR_BF16), NA(NEXAR_MAX), NC(13), 0},
    {"F mixed f64 sum", TL_MIXED, TL_BLOCKING, NA(NEXAR_F64), NA(NEXAR_SUM), NC(1001), 0},
    {"F half (input arena) f32 sum", TL_HALF, TL_BLOCKING, NA(NEXAR_F32), NA(NEXAR_SUM),
     NC(13), 1},
};

static const struct sweep small_set[] = {
    {"A f32 bf16 i32 u8 x sum max, 0 1 7 1001", TL_HEAP, TL_BLOCKING,
     NA(NEXAR_F32, NEXAR_BF16, NEXAR_I32, NEXAR_U8), NA(NEXAR_SUM, NEXAR_MAX),
     NC(0, 1, 7, 1001), 0},
    {"A every dtype, sum, count 13", TL_HEAP, TL_BLOCKING, ALL_DT, NA(NEXAR_SUM), NC(13), 0},
    {"B ~1 MiB f32 sum", TL_HEAP, TL_BLOCKING, NA(NEXAR_F32), NA(NEXAR_SUM), NULL, 0, 1},
    {"B ~1 MiB i8 max", TL_HEAP, TL_BLOCKING, NA(NEXAR_I8), NA(NEXAR_MAX), NULL, 0, 1},
    {"D arena f32 sum", TL_ARENA, TL_BLOCKING, NA(NEXAR_F32), NA(NEXAR_SUM), NC(1, 1001), 1},
    {"E iwait f32 sum", TL_HEAP, TL_WAIT, NA(NEXAR_F32), NA(NEXAR_SUM), NC(13), 1},
    {"E itest i64 min", TL_HEAP, TL_TESTLOOP, NA(NEXAR_I64), NA(NEXAR_MIN), NC(13), 0},
    {"F mixed f64 sum", TL_MIXED, TL_BLOCKING, NA(NEXAR_F64), NA(NEXAR_SUM), NC(1001), 0},
};

static const struct sweep device_set[] = {
    {"G device every dtype, sum, 0 7 1001", TL_DEVICE, TL_BLOCKING, ALL_DT, NA(NEXAR_SUM),
     NC(0, 7, 1001), 0},
    {"G device f32 f16 i32 u64, max, 1 13", TL_DEVICE, TL_BLOCKING,
     NA(NEXAR_F32, NEXAR_F16, NEXAR_I32, NEXAR_U64), NA(NEXAR_MAX), NC(1, 13), 0},
    {"G device f32 bf16 sum, two parts", TL_DEVICE, TL_BLOCKING, NA(NEXAR_F32, NEXAR_BF16),
     NA(NEXAR_SUM), NULL, 0, 2},
    {"G device iwait f64 prod", TL_DEVICE, TL_WAIT, NA(NEXAR_F64),
     NA(NEXAR_PROD), NC(13, 1001), 0},
    {"G device itest u8 min", TL_DEVICE, TL_TESTLOOP, NA(NEXAR_U8), NA(NEXAR_MIN), NC(1001),
     0},
};

static int matrix(nexar_comm_t *w, int level, int lng, struct tally *t)
{
    if (level == L_DEVICE) {
        for (size_t i = 0; i < sizeof(device_set) / sizeof(device_set[0]); i++)
            if (sweep(w, t, &device_set[i]))
                return -1;
        return 0;
    }
    if (lng) {
        static const size_t longc[] = {0, 1, 2, 3, 7, 13, 64, 1001, 4097, 65537};
        char label[64];
        for (int mode = 0; mode < TL_MODE_COUNT; mode++) {
            snprintf(label, sizeof(label), "long: every dtype x op x 11 counts, %s",
                     tl_mode_name(mode));
            struct sweep s = {label, mode, TL_BLOCKING, ALL_DT, ALL_OPS, longc, 10, 1};
            if (sweep(w, t, &s))
                return -1;
        }
        for (int call = TL_WAIT; call <= TL_TESTLOOP; call++) {
            struct sweep s = {call == TL_WAIT ? "long: every dtype x op, iwait"
                                              : "long: every dtype x op, itest",
                              TL_HEAP, call, ALL_DT, ALL_OPS, NC(1, 13, 1001), 1};
            if (sweep(w, t, &s))
                return -1;
        }
        if (every_root(w, t, NC(0, 1, 13, 1001), 1))
            return -1;
    } else {
        const struct sweep *set = level == L_FULL ? full_set : level == L_REP ? rep_set : small_set;
        size_t n = level == L_FULL ? sizeof(full_set) / sizeof(full_set[0])
                   : level == L_REP ? sizeof(rep_set) / sizeof(rep_set[0])
                                    : sizeof(small_set) / sizeof(small_set[0]);
        for (size_t i = 0; i < n; i++) {
            if (sweep(w, t, &set[i]))
                return -1;
            /* the rooted ops at every root, once the small cases passed */
            if (i == 0 && level == L_SMALL && every_root(w, t, NC(13), 0))
                return -1;
            if (i == 0 && level != L_SMALL && every_root(w, t, NC(1, 13), 1))
                return -1;
        }
    }
    if (overlap(w, t))
        return -1;
    if (tl_barrier_order(w, 3))
        return -1;
    if (nexar_comm_rank(w) == 0)
        tl_log("barrier: no rank left before the last one entered (3 rounds)");
    return 0;
}

/* ---- send/recv on device buffers (--level device) --------------------------------- */

static struct tl_devmem g_devmem;
static struct nx_fake_cuda g_fake;

/* A stream-ordered all_reduce across nodes: the call returns at once; the stream's wait on
 * the op's done word is released only when the result is in place (checked as soon as it
 * is released, without a nexar call that could make progress); nexar_sync reports it. */
static int dev_stream(nexar_comm_t *w)
{
    enum { MAXW = 4096 };
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    size_t n = 300001;
    float *buf = g_devmem.alloc(n * 4), *want = malloc(n * 4);
    float **in = calloc((size_t)size, sizeof(*in));
    struct nx_fake_wait *wv = calloc(MAXW, sizeof(*wv));
    for (int r = 0; r < size; r++) {
        in[r] = malloc(n * 4);
        tl_pattern(NEXAR_F32, NEXAR_SUM, 4242, r, 0, in[r], n);
    }
    tl_reduce(NEXAR_F32, NEXAR_SUM, want, (const void *const *)in, size, n);
    memcpy(buf, in[me], n * 4);
    char ctx[160];
    snprintf(ctx, sizeof(ctx), "rank %d/%d devstream: stream-ordered all_reduce f32 sum "
             "count=%zu", me, size, n);
    int n0 = g_fake.waits(wv, MAXW);
    if (tl_check_status(ctx, NEXAR_OK, nexar_comm_set_stream(w, g_fake.stream())))
        return 1;
    double t0 = tl_now();
    nexar_status_t st = nexar_all_reduce(w, buf, n, NEXAR_F32, NEXAR_SUM);
    double t_call = tl_now() - t0;
    if (tl_check_status(ctx, NEXAR_OK, st))
        return 1;
    int nw = 0;
    while ((nw = g_fake.waits(wv, MAXW)) <= n0 || nw > MAXW || !wv[n0].t_rel_ns) {
        if (tl_now() - t0 > 30) {
            tl_log("FAIL %s: the stream was not released within 30 s (%d waits queued "
                   "before, %d now)", ctx, n0, nw);
            return 1;
        }
        usleep(200);
    }
    /* released: the result must be there already */
    bad += tl_check_elems(ctx, NEXAR_F32, want, buf, n) != 0;
    bad += tl_check_status(ctx, NEXAR_OK, nexar_sync(w)) != 0;
    bad += tl_check_status(ctx, NEXAR_OK, nexar_comm_set_stream(w, NULL)) != 0;
    if (nw != n0 + 1) {
        tl_log("FAIL %s: %d stream waits queued for one op, expected 1", ctx, nw - n0);
        bad++;
    }
    if (me == 0 && !bad)
        tl_log("%-44s %5d op,  %5.3f s call, stream released with the result in place",
               "devstream stream-ordered all_reduce", 1, t_call);
    for (int r = 0; r < size; r++)
        free(in[r]);
    free(in), free(want), free(wv);
    g_devmem.free(buf);
    return bad;
}

/* Rank r sends to xc_next(r) and receives from xc_prev(r): across nodes with 2 nodes.
 * The sides' memory: 0 device to device, 1 device to host, 2 host to device. */
static int dev_p2p(nexar_comm_t *w, const struct xc_place *p)
{
    /* with 64 KiB slots: 50000 f32 are 4 pieces, 200001 are 13 (more than a window) */
    static const size_t counts[] = {0, 1, 1001, 50000, 200001};
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0, n_ok = 0;
    int next = xc_next(p, me), prev = xc_prev(p, me);
    double t0 = tl_now();
    for (int mix = 0; mix < 3; mix++) {
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
            size_t n = counts[ci], bytes = n * 4 + 64;
            bool sdev = mix != 2, rdev = mix != 1;
            float *sb = sdev ? g_devmem.alloc(bytes) : malloc(bytes);
            float *rb = rdev ? g_devmem.alloc(bytes) : malloc(bytes);
            float *want = malloc(bytes);
            if (!sb || !rb || !want) {
                tl_log("FAIL rank %d: devp2p buffers of %zu bytes", me, bytes);
                return 1;
            }
            uint64_t seed = 9000u + (uint64_t)mix * 17u + ci;
            tl_pattern(NEXAR_F32, -1, seed, me, 0, sb, n);
            tl_pattern(NEXAR_F32, -1, seed, prev, 0, want, n);
            memset(rb, 0x5a, bytes);
            nexar_request_t *rq = NULL, *sq = NULL;
            char ctx[200];
            snprintf(ctx, sizeof(ctx), "rank %d/%d devp2p %s count=%zu from %d to %d", me,
                     size, mix == 0 ? "device->device" : mix == 1 ? "device->host"
                                                                  : "host->device",
                     n, me, next);
            nexar_status_t st = nexar_irecv(w, rb, n, NEXAR_F32, prev, 7, &rq);
            if (st == NEXAR_OK)
                st = nexar_isend(w, sb, n, NEXAR_F32, next, 7, &sq);
            if (st == NEXAR_OK)
                st = nexar_wait(sq);
            if (st == NEXAR_OK)
                st = nexar_wait(rq);
            if (tl_check_status(ctx, NEXAR_OK, st))
                return 1; /* the communicator may be failed: nothing more to learn */
            if (tl_check_elems(ctx, NEXAR_F32, want, rb, n))
                bad++;
            else
                n_ok++;
            sdev ? g_devmem.free(sb) : free(sb);
            rdev ? g_devmem.free(rb) : free(rb);
            free(want);
        }
    }
    if (me == 0)
        tl_log("%-44s %5d msgs, %5.1f s, %s", "devp2p to the next node and back", n_ok + bad,
               tl_now() - t0, bad ? "WRONG RESULTS (above)" : "all exact");
    return bad;
}

/* ---- main -------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    int level = L_REP, lng = 0;
    const char *parts = "matrix,p2p,split";
    static const struct option lo[] = {{"level", required_argument, NULL, 'L'},
                                       {"long", no_argument, NULL, 'l'},
                                       {"parts", required_argument, NULL, 'p'},
                                       {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        if (ch == 'L')
            level = !strcmp(optarg, "full")     ? L_FULL
                    : !strcmp(optarg, "small")  ? L_SMALL
                    : !strcmp(optarg, "device") ? L_DEVICE
                                                : L_REP;
        else if (ch == 'l')
            lng = 1;
        else if (ch == 'p')
            parts = optarg;
        else
            return 2;
    }
    lng |= hx_env_flag("NEXAR_LONG_TESTS");
    const char *er = getenv("NEXAR_RANK");
    char tag[64];
    snprintf(tag, sizeof(tag), "xcoll r%s", er ? er : "?");
    tl_set_log_tag(tag);

    if (level == L_DEVICE) { /* before nexar_init, so that the shim finds it */
        char err[512];
        if (nx_fake_cuda_load(&g_fake, err, sizeof(err))) {
            tl_log("FAIL: %s", err);
            return 1;
        }
        g_devmem = (struct tl_devmem){.alloc = g_fake.shared, .free = g_fake.free_};
        tl_set_devmem(&g_devmem);
    }
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);
    struct xc_place p;
    if ((er && atoi(er) != me) || xc_place_init(&p, size)) {
        tl_log("FAIL: world rank %d of %d, NEXAR_RANK=%s", me, size, er ? er : "(unset)");
        nexar_finalize();
        return 1;
    }
    snprintf(tag, sizeof(tag), "xcoll r%d/%d node %d", me, size, p.node[me]);
    tl_set_log_tag(tag);
    if (me == 0) {
        char pl[64];
        xc_place_str(&p, pl, sizeof(pl));
        tl_log("%d ranks on %d node(s), rank -> node %s; %s level, parts %s", size, p.nodes,
               pl, lng                 ? "long"
                   : level == L_FULL   ? "full"
                   : level == L_REP    ? "rep"
                   : level == L_DEVICE ? "device"
                                       : "small",
               parts);
    }

    int fails = 0;
    if (strstr(parts, "matrix")) {
        struct tally t = {0};
        double t0 = tl_now();
        int rc = matrix(w, level, lng, &t);
        if (rc || t.wrong || me == 0)
            tl_log("matrix: %d cases, %d with wrong data%s, %.1f s", t.cases, t.wrong,
                   rc ? ", stopped at an error (above)" : "", tl_now() - t0);
        fails += t.wrong + (rc != 0);
    }
    if (strstr(parts, "devstream"))
        fails += dev_stream(w);
    if (strstr(parts, "devp2p"))
        fails += dev_p2p(w, &p);
    else if (strstr(parts, "p2p"))
        fails += xc_p2p(w, &p);
    if (strstr(parts, "split"))
        fails += xc_split(w, &p);
    if (strstr(parts, "tsoak"))
        fails += xc_tsoak(w, &p);
    else if (strstr(parts, "soak"))
        fails += xc_soak(w, &p);

    nexar_status_t fst = nexar_finalize();
    if (fst != NEXAR_OK) {
        tl_log("FAIL nexar_finalize: %s: %s", tl_status_name((int)fst), nexar_last_error());
        fails++;
    }
    if (fails)
        tl_log("FAILED: %d check(s)", fails);
    return fails ? 1 : 0;
}
