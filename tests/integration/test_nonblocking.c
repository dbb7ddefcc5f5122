/*
 * test_nonblocking.c - several nonblocking collectives outstanding on different
 * communicators, waited in a different order on each rank; nexar_test() loops;
 * nexar_sync(); every nexar_i* variant checked through nexar_wait and nexar_test;
 * a nonblocking op on one communicator while blocking ops run on another.
 *
 *   itest_nonblocking --world N   (default 3)
 */
#include <stdlib.h>

#include "itest.h"

#define NV 4099 /* elements per buffer: odd, chunked over the 16 KiB slots */

static void vals(float *b, int rank, int salt)
{
    for (size_t i = 0; i < NV; i++)
        b[i] = (float)(itest_val(rank, i) + salt);
}

static void check_sum(int *fails, const char *what, const float *got, int n, int salt)
{
    for (size_t i = 0; i < NV; i++) {
        double want = 0;
        for (int r = 0; r < n; r++)
            want += itest_val(r, i) + salt;
        if (got[i] != (float)want) {
            tl_log("FAIL %s: index %zu: expected %g, got %g", what, i, want, (double)got[i]);
            (*fails)++;
            return;
        }
    }
}

static nexar_status_t test_loop(nexar_request_t *q)
{
    for (;;) {
        int done = 0;
        nexar_status_t st = nexar_test(q, &done);
        if (done || st != NEXAR_OK)
            return st;
        usleep(50);
    }
}

static int rank_main(struct hx_rank *r)
{
    int fails = 0, me = r->rank, n = r->size;
    nexar_comm_t *w = NULL, *ca = NULL, *cb = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(fails, "split A", nexar_comm_split(w, 0, (uint32_t)me, &ca));
    EXPECT_OK(fails, "split B (reverse keys)", nexar_comm_split(w, 0, (uint32_t)(n - me), &cb));
    if (!ca || !cb) {
        nexar_finalize();
        return 1;
    }
    int ra = nexar_comm_rank(ca), rb = nexar_comm_rank(cb);

    /* 1. three iall_reduce on three comms, waited in a rank-dependent order; x4 rounds */
    static const int perm[6][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {1, 0, 2}};
    float *bw = malloc(NV * 4), *ba = malloc(NV * 4), *bb = malloc(NV * 4);
    for (int round = 0; round < 4; round++) {
        vals(bw, me, round);
        vals(ba, ra, 10 + round);
        vals(bb, rb, 20 + round);
        nexar_request_t *q[3] = {NULL, NULL, NULL};
        EXPECT_OK(fails, "iall_reduce world", nexar_iall_reduce(w, bw, NV, NEXAR_F32, NEXAR_SUM, &q[0]));
        EXPECT_OK(fails, "iall_reduce A", nexar_iall_reduce(ca, ba, NV, NEXAR_F32, NEXAR_SUM, &q[1]));
        EXPECT_OK(fails, "iall_reduce B", nexar_iall_reduce(cb, bb, NV, NEXAR_F32, NEXAR_SUM, &q[2]));
        const int *o = perm[(me + round) % 6];
        for (int k = 0; k < 3; k++) {
            int i = o[k];
            if (!q[i])
                continue;
            if (round % 2 == 0)
                EXPECT_OK(fails, "wait", nexar_wait(q[i]));
            else
                EXPECT_OK(fails, "test loop", test_loop(q[i]));
        }
        check_sum(&fails, "iall_reduce on world", bw, n, round);
        check_sum(&fails, "iall_reduce on A", ba, n, 10 + round);
        check_sum(&fails, "iall_reduce on B", bb, n, 20 + round);
    }
    if (me == 0)
        tl_log("3 comms x 4 rounds of iall_reduce, completed in rank-dependent orders "
               "(nexar_wait and nexar_test loops): exact");

    /* 2. several outstanding on one comm, completed newest first */
    {
        float *bufs[4];
        nexar_request_t *q[4] = {NULL};
        for (int k = 0; k < 4; k++) {
            bufs[k] = malloc(NV * 4);
            vals(bufs[k], me, 30 + k);
            EXPECT_OK(fails, "iall_reduce queue", nexar_iall_reduce(w, bufs[k], NV, NEXAR_F32, NEXAR_SUM, &q[k]));
        }
        for (int k = 3; k >= 0; k--)
            if (q[k])
                EXPECT_OK(fails, "wait newest first", nexar_wait(q[k]));
        for (int k = 0; k < 4; k++) {
            check_sum(&fails, "queued iall_reduce", bufs[k], n, 30 + k);
            free(bufs[k]);
        }
        if (me == 0)
            tl_log("4 iall_reduce queued on one comm, waited newest first: exact");
    }

    /* 3. nexar_sync completes everything outstanding on a comm */
    {
        nexar_request_t *q = NULL;
        int64_t bc[5] = {0}, ag[HX_MAX_RANKS], mine = 1000 + me;
        if (me == n - 1)
            for (int i = 0; i < 5; i++)
                bc[i] = 77 * i - 3;
        vals(ba, ra, 40);
        EXPECT_OK(fails, "iall_reduce (sync)", nexar_iall_reduce(ca, ba, NV, NEXAR_F32, NEXAR_SUM, &q));
        EXPECT_OK(fails, "ibroadcast (sync)", nexar_ibroadcast(ca, bc, 5, NEXAR_I64, n - 1, &q));
        EXPECT_OK(fails, "ibarrier (sync)", nexar_ibarrier(ca, &q));
        EXPECT_OK(fails, "iall_gather (sync)", nexar_iall_gather(ca, &mine, ag, 1, NEXAR_I64, &q));
        EXPECT_OK(fails, "nexar_sync", nexar_sync(ca));
        check_sum(&fails, "iall_reduce before sync", ba, n, 40);
        for (int i = 0; i < 5; i++)
            EXPECT_TRUE(fails, bc[i] == 77 * i - 3, "ibroadcast before sync: [%d] = %lld", i,
                        (long long)bc[i]);
        for (int i = 0; i < n; i++)
            EXPECT_TRUE(fails, ag[i] == 1000 + i, "iall_gather before sync: [%d] = %lld", i,
                        (long long)ag[i]);
        EXPECT_OK(fails, "nexar_sync with nothing outstanding", nexar_sync(ca));
        if (me == 0)
            tl_log("nexar_sync completed 4 outstanding ops of different kinds: exact");
    }

    /* 4. a nonblocking op on A stays in flight while blocking ops run on the world */
    {
        nexar_request_t *q = NULL;
        vals(ba, ra, 50);
        EXPECT_OK(fails, "iall_reduce A (overlap)", nexar_iall_reduce(ca, ba, NV, NEXAR_F32, NEXAR_SUM, &q));
        for (int k = 0; k < 3; k++) {
            vals(bw, me, 60 + k);
            EXPECT_OK(fails, "blocking world op (overlap)", nexar_all_reduce(w, bw, NV, NEXAR_F32, NEXAR_SUM));
            check_sum(&fails, "blocking world op while A in flight", bw, n, 60 + k);
        }
        if (q)
            EXPECT_OK(fails, "wait A (overlap)", nexar_wait(q));
        check_sum(&fails, "A after the world ops", ba, n, 50);
    }
    free(bw);
    free(ba);
    free(bb);

    /* 5. more requests outstanding than the submission ring holds */
    {
        enum { NQ = 600 };
        static int32_t vals_q[NQ][3];
        nexar_request_t *q = NULL;
        int issued = 0;
        for (int k = 0; k < NQ; k++) {
            vals_q[k][0] = k;
            vals_q[k][1] = me;
            vals_q[k][2] = 1;
            if (EXPECT_OK(fails, "iall_reduce (600 outstanding)",
                          nexar_iall_reduce(w, vals_q[k], 3, NEXAR_I32, NEXAR_SUM, &q)))
                break;
            issued++;
        }
        EXPECT_OK(fails, "nexar_sync of 600 requests", nexar_sync(w));
        int bad = 0;
        for (int k = 0; k < issued && !bad; k++)
            if (vals_q[k][0] != k * n || vals_q[k][1] != n * (n - 1) / 2 || vals_q[k][2] != n) {
                tl_log("FAIL request %d of 600: got %d %d %d, expected %d %d %d", k, vals_q[k][0],
                       vals_q[k][1], vals_q[k][2], k * n, n * (n - 1) / 2, n);
                bad = 1;
                fails++;
            }
        if (me == 0 && !bad)
            tl_log("600 iall_reduce outstanding at once, then nexar_sync: exact");
    }

    /* 6. every nexar_i* variant, through nexar_wait and through nexar_test */
    int cases = 0;
    for (int call = TL_WAIT; call <= TL_TESTLOOP; call++)
        for (int coll = 0; coll < TL_COLL_COUNT; coll++)
            for (int big = 0; big < 2; big++) {
                struct tl_case c = {.coll = coll, .dtype = big ? NEXAR_F32 : NEXAR_I64,
                                    .op = NEXAR_SUM, .count = big ? 70001 : 13,
                                    .root = (coll + big) % n, .call = call,
                                    .mode = big ? TL_MIXED : TL_HEAP,
                                    .seed = (uint64_t)(900 + coll * 4 + big * 2 + call)};
                if (tl_run_case(w, &c) != TL_CASE_OK)
                    fails++;
                cases++;
            }
    if (me == 0)
        tl_log("%d cases of every nexar_i* variant via nexar_wait and nexar_test", cases);

    EXPECT_OK(fails, "free A", nexar_comm_free(ca));
    EXPECT_OK(fails, "free B", nexar_comm_free(cb));
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int world = argc > 2 && !strcmp(argv[1], "--world") ? atoi(argv[2]) : 3;
    hx_require_nexard();
    tl_log("nonblocking test, world %d", world);
    struct hx_daemon d;
    const char *args[] = {"--slot-bytes", "16384", "--slots", "2", NULL};
    if (hx_daemon_start(&d, args))
        return 1;
    int rv = itest_run(&d, world, rank_main, NULL, 60, 240.0);
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
