/*
 * xcoll_split.c - comm_split of a world across nodes (part "split" of xcoll_rank.c).
 *  1. color rank % 2, key rank: in a block placement the groups span nodes (in the
 *     interleaved one, where the even ranks share a node, they are node-local);
 *  2. color = the rank's position on its node, key = size - rank: one rank of every
 *     node per group, in reverse rank order; across nodes whenever K >= 2;
 *  3. color = node, key = size - rank: node-local communicators (hierarchical schemes).
 * On each new communicator: its rank and size are the ones MPI_Comm_split semantics
 * give, then allreduce (f32 sum 1001 and ~1 MiB, i64 max 13), broadcast (i32 13 at
 * every root, f32 ~1 MiB at the last) and all_gather (u8 ~1 MiB a block), exact
 * (tl_run_case).  Then the world still works.
 */
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "xcoll.h"

/* MPI_Comm_split: the ranks of my color ordered by (key, old rank). */
static void expect_split(const uint32_t *color, const uint32_t *key, int size, int me,
                         int *rank, int *n)
{
    *rank = *n = 0;
    for (int q = 0; q < size; q++) {
        if (color[q] != color[me])
            continue;
        (*n)++;
        if (key[q] < key[me] || (key[q] == key[me] && q < me))
            (*rank)++;
    }
}

/* The cases on a new communicator; stops at the first failure. */
static int run_on(nexar_comm_t *c, const char *label, int *fails)
{
    int size = nexar_comm_size(c);
    struct tl_case cs[8 + XC_MAX];
    int n = 0;
    cs[n++] = (struct tl_case){.coll = TL_ALL_REDUCE, .dtype = NEXAR_F32, .op = NEXAR_SUM,
                               .count = 1001};
    cs[n++] = (struct tl_case){.coll = TL_ALL_REDUCE, .dtype = NEXAR_I64, .op = NEXAR_MAX,
                               .count = 13};
    cs[n++] = (struct tl_case){.coll = TL_ALL_REDUCE, .dtype = NEXAR_F32, .op = NEXAR_SUM,
                               .count = 262147};
    for (int root = 0; root < size; root++)
        cs[n++] = (struct tl_case){.coll = TL_BROADCAST, .dtype = NEXAR_I32, .root = root,
                                   .count = 13};
    cs[n++] = (struct tl_case){.coll = TL_BROADCAST, .dtype = NEXAR_F32, .root = size - 1,
                               .count = 262147};
    /* On a node-local group these two run in the local chunk plan (shm-protocol.md), which
     * the ranks learn from the split's completion: they and nexard must cut alike. */
    cs[n++] = (struct tl_case){.coll = TL_ALL_GATHER, .dtype = NEXAR_U8, .count = 1048577};
    for (int i = 0; i < n; i++) {
        cs[i].mode = TL_HEAP;
        cs[i].seed = tl_mix64(0x5917u + (uint64_t)i);
        int rv = tl_run_case(c, &cs[i]); /* prints rank, case and status on failure */
        if (rv != TL_CASE_OK) {
            tl_log("FAIL split: on the communicator of %s (above)", label);
            (*fails)++;
            if (rv != TL_CASE_WRONG)
                return -1;
        }
    }
    return 0;
}

static void one_split(nexar_comm_t *w, const struct xc_place *p, const char *label,
                      const uint32_t *color, const uint32_t *key, int *fails)
{
    int me = nexar_comm_rank(w), size = p->size, want_rank, want_n;
    expect_split(color, key, size, me, &want_rank, &want_n);
    nexar_comm_t *c = NULL;
    char what[160];
    snprintf(what, sizeof(what), "split: %s (color %u key %u)", label, color[me], key[me]);
    if (EXPECT_OK(*fails, what, nexar_comm_split(w, color[me], key[me], &c)))
        return;
    if (!c || nexar_comm_rank(c) != want_rank || nexar_comm_size(c) != want_n) {
        tl_log("FAIL %s: rank %d of %d, expected %d of %d", what, nexar_comm_rank(c),
               nexar_comm_size(c), want_rank, want_n);
        (*fails)++;
    } else {
        run_on(c, label, fails);
    }
    if (c)
        EXPECT_OK(*fails, "split: free", nexar_comm_free(c));
}

int xc_split(nexar_comm_t *w, const struct xc_place *p)
{
    int fails = 0, me = nexar_comm_rank(w), size = p->size;
    double t0 = tl_now();
    uint32_t color[XC_MAX] = {0}, key[XC_MAX] = {0};

    for (int q = 0; q < size; q++)
        color[q] = (uint32_t)(q % 2), key[q] = (uint32_t)q;
    one_split(w, p, "rank % 2", color, key, &fails);

    for (int q = 0; q < size; q++)
        color[q] = (uint32_t)xc_local_index(p, q), key[q] = (uint32_t)(size - q);
    one_split(w, p, "position on the node (one rank per node)", color, key, &fails);

    for (int q = 0; q < size; q++)
        color[q] = (uint32_t)p->node[q], key[q] = (uint32_t)(size - q);
    one_split(w, p, "node", color, key, &fails);

    /* the world after three splits */
    struct tl_case c = {.coll = TL_ALL_REDUCE, .dtype = NEXAR_I32, .op = NEXAR_SUM,
                        .count = 7, .mode = TL_HEAP, .seed = 77};
    if (tl_run_case(w, &c) != TL_CASE_OK) {
        tl_log("FAIL split: allreduce on the world after the splits (above)");
        fails++;
    }
    if (me == 0 || fails)
        tl_log("split: by rank %% 2, by position on the node, by node: %s, %.1f s",
               fails ? "FAILED (above)" : "ranks as expected, allreduce and broadcast exact",
               tl_now() - t0);
    return fails;
}
