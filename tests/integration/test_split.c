/*
 * test_split.c - nexar_comm_split: colors, keys in reverse order, equal keys,
 * NEXAR_UNDEFINED, collectives on the sub-communicators (interleaved with the
 * world), nested splits, free, and many split/free cycles.
 *
 *   itest_split --world N [--slot-bytes B]   (N >= 2; default 4; B default 65536)
 */
#include <stdlib.h>

#include "itest.h"

/* World ranks of the members of c, gathered in c's rank order. */
static int members(nexar_comm_t *c, int wrank, int *out, int *fails)
{
    int32_t me = wrank;
    return EXPECT_OK(*fails, "all_gather of world ranks",
                     nexar_all_gather(c, &me, out, 1, NEXAR_I32));
}

static void expect_members(int *fails, const char *what, const int *got, const int *want,
                           int n)
{
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            char g[128] = "", w[128] = "";
            for (int k = 0; k < n; k++) {
                snprintf(g + strlen(g), sizeof(g) - strlen(g), "%d ", got[k]);
                snprintf(w + strlen(w), sizeof(w) - strlen(w), "%d ", want[k]);
            }
            tl_log("FAIL %s: members in rank order [%s], expected [%s]", what, g, w);
            (*fails)++;
            return;
        }
}

/* A few checked collectives on c. */
static void exercise(nexar_comm_t *c, int *fails, uint64_t seed)
{
    static const struct { int coll, dtype, op; size_t count; } cs[] = {
        {TL_ALL_REDUCE, NEXAR_F32, NEXAR_SUM, 1001}, {TL_BROADCAST, NEXAR_I64, 0, 13},
        {TL_ALL_TO_ALL, NEXAR_U8, 0, 7},             {TL_SCAN, NEXAR_BF16, NEXAR_SUM, 13},
        {TL_REDUCE_SCATTER, NEXAR_I32, NEXAR_MAX, 5}, {TL_ALL_REDUCE, NEXAR_F64, NEXAR_SUM, 70000},
        /* With 4 MiB slots, cut by the local chunk plan (shm-protocol.md): 4 MiB in 9
         * chunks, 1.5 MiB a block in 9 (2 ranks) or 12 (3); the ranks and nexard must cut
         * alike. */
        {TL_BROADCAST, NEXAR_F32, 0, (1u << 20) + 3}, {TL_ALL_GATHER, NEXAR_U8, 0, (3u << 19) + 5},
    };
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
        struct tl_case k = {.coll = cs[i].coll, .dtype = cs[i].dtype, .op = cs[i].op,
                            .count = cs[i].count, .root = nexar_comm_size(c) - 1,
                            .seed = seed + i};
        if (tl_run_case(c, &k) != TL_CASE_OK)
            (*fails)++;
    }
}

static int rank_main(struct hx_rank *r)
{
    int fails = 0, me = r->rank, n = r->size;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int got[HX_MAX_RANKS], want[HX_MAX_RANKS];

    /* 1. color = rank % 2, key = n - rank: each half in reverse world order */
    nexar_comm_t *half = NULL;
    if (!EXPECT_OK(fails, "split(color=rank%2, key=n-rank)",
                   nexar_comm_split(w, (uint32_t)(me % 2), (uint32_t)(n - me), &half))) {
        int k = 0;
        for (int q = n - 1; q >= 0; q--)
            if (q % 2 == me % 2)
                want[k++] = q;
        int myrank = -1;
        for (int i = 0; i < k; i++)
            if (want[i] == me)
                myrank = i;
        EXPECT_TRUE(fails, half && nexar_comm_size(half) == k && nexar_comm_rank(half) == myrank,
                    "reverse-key split: rank/size %d/%d, expected %d/%d",
                    nexar_comm_rank(half), nexar_comm_size(half), myrank, k);
        if (half && !members(half, me, got, &fails))
            expect_members(&fails, "reverse-key split", got, want, k);
        if (half)
            exercise(half, &fails, 100);
        if (me == 0)
            tl_log("split by parity with reverse keys: ranks, order and 6 collectives checked");
    }

    /* 2. equal keys: order by rank in the parent; color = rank / 2 */
    nexar_comm_t *pair = NULL;
    if (!EXPECT_OK(fails, "split(color=rank/2, key=0)",
                   nexar_comm_split(w, (uint32_t)(me / 2), 0, &pair))) {
        int k = 0;
        for (int q = 0; q < n; q++)
            if (q / 2 == me / 2)
                want[k++] = q;
        EXPECT_TRUE(fails, pair && nexar_comm_size(pair) == k && nexar_comm_rank(pair) == me % 2,
                    "equal-key split: rank/size %d/%d, expected %d/%d", nexar_comm_rank(pair),
                    nexar_comm_size(pair), me % 2, k);
        if (pair && !members(pair, me, got, &fails))
            expect_members(&fails, "equal-key split", got, want, k);
    }

    /* 3. interleave ops on world, half and pair: each comm keeps its own sequence */
    for (int it = 0; it < 3 && half && pair; it++) {
        struct tl_case a = {.coll = TL_ALL_REDUCE, .dtype = NEXAR_I32, .op = NEXAR_SUM,
                            .count = 17, .seed = 200u + (unsigned)it};
        if (tl_run_case(w, &a) || tl_run_case(half, &a) || tl_run_case(pair, &a))
            fails++;
    }

    /* 4. NEXAR_UNDEFINED: rank 0 stays out */
    nexar_comm_t *rest = (nexar_comm_t *)&fails; /* must become NULL on rank 0 */
    if (!EXPECT_OK(fails, "split(rank 0 NEXAR_UNDEFINED, others color 7)",
                   nexar_comm_split(w, me == 0 ? NEXAR_UNDEFINED : 7, (uint32_t)me, &rest))) {
        if (me == 0) {
            EXPECT_TRUE(fails, rest == NULL, "NEXAR_UNDEFINED gave a communicator %p", (void *)rest);
        } else {
            EXPECT_TRUE(fails, rest && nexar_comm_size(rest) == n - 1 &&
                                   nexar_comm_rank(rest) == me - 1,
                        "split without rank 0: rank/size %d/%d, expected %d/%d",
                        nexar_comm_rank(rest), nexar_comm_size(rest), me - 1, n - 1);
            if (rest)
                exercise(rest, &fails, 300);
        }
        if (me == 0)
            tl_log("NEXAR_UNDEFINED: NULL on rank 0, the rest form a working communicator");
    }
    if (me == 0)
        rest = NULL;

    /* 5. nested: dup of the world (one color, key = rank), then split the dup by
     *    rank % 2 with keys in reverse, then split that again into singletons */
    nexar_comm_t *dup = NULL, *nest = NULL, *single = NULL;
    if (!EXPECT_OK(fails, "split(dup)", nexar_comm_split(w, 0, (uint32_t)me, &dup)) && dup) {
        EXPECT_TRUE(fails, nexar_comm_rank(dup) == me && nexar_comm_size(dup) == n,
                    "dup: rank/size %d/%d", nexar_comm_rank(dup), nexar_comm_size(dup));
        if (!EXPECT_OK(fails, "nested split",
                       nexar_comm_split(dup, (uint32_t)(me % 2), (uint32_t)(100 - me), &nest)) &&
            nest) {
            int k = 0;
            for (int q = n - 1; q >= 0; q--)
                if (q % 2 == me % 2)
                    want[k++] = q;
            if (!members(nest, me, got, &fails))
                expect_members(&fails, "nested split", got, want, k);
            exercise(nest, &fails, 400);
            if (!EXPECT_OK(fails, "split into singletons",
                           nexar_comm_split(nest, (uint32_t)nexar_comm_rank(nest), 0, &single)) &&
                single) {
                EXPECT_TRUE(fails, nexar_comm_size(single) == 1 && nexar_comm_rank(single) == 0,
                            "singleton: rank/size %d/%d", nexar_comm_rank(single),
                            nexar_comm_size(single));
                exercise(single, &fails, 500);
            }
        }
        if (me == 0)
            tl_log("nested splits (dup -> parity reverse -> singletons) checked");
    }

    /* 6. free everything; the world still works */
    nexar_comm_t *subs[] = {single, nest, dup, rest, pair, half};
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (subs[i])
            EXPECT_OK(fails, "comm_free", nexar_comm_free(subs[i]));
    EXPECT_ST(fails, NEXAR_ERR_INVALID, "comm_free(world)", nexar_comm_free(w));
    exercise(w, &fails, 600);

    /* 7. many split/free cycles */
    for (int it = 0; it < 25; it++) {
        nexar_comm_t *c = NULL;
        if (EXPECT_OK(fails, "split cycle", nexar_comm_split(w, (uint32_t)((me + it) % 3),
                                                            (uint32_t)it, &c)))
            break;
        int32_t v = 1, sum = v;
        if (c) {
            EXPECT_OK(fails, "allreduce in split cycle", nexar_all_reduce(c, &sum, 1, NEXAR_I32, NEXAR_SUM));
            EXPECT_TRUE(fails, sum == nexar_comm_size(c), "cycle %d: sum %d, size %d", it, sum,
                        nexar_comm_size(c));
            EXPECT_OK(fails, "free in split cycle", nexar_comm_free(c));
        }
    }
    if (me == 0)
        tl_log("25 split/allreduce/free cycles done");
    exercise(w, &fails, 700);

    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int world = argc > 2 && !strcmp(argv[1], "--world") ? atoi(argv[2]) : 4;
    /* Small slots by default (many chunks an op); --slot-bytes 4194304 gives the large
     * broadcast and all_gather of exercise() the local chunk plan (shm-protocol.md). */
    const char *slot = argc > 4 && !strcmp(argv[3], "--slot-bytes") ? argv[4] : "65536";
    hx_require_nexard();
    tl_log("split test, world %d, --slot-bytes %s", world, slot);
    struct hx_daemon d;
    const char *args[] = {"--slot-bytes", slot, "--slots", "2", NULL};
    if (hx_daemon_start(&d, args))
        return 1;
    int rv = itest_run(&d, world, rank_main, NULL, 60, 240.0);
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
