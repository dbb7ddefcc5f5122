/*
 * algo_a2a.c - all_to_all by pairwise exchange: in step s (s = 1 .. N-1) node me sends
 * to me + s everything its ranks have for that node's ranks and receives from me - s,
 * so every pair of nodes meets exactly once and each step is one send and one receive.
 *
 * A message from node a to node b carries, for each rank i of a (ascending), for each
 * rank j of b (ascending), the block i sends to j.  The blocks between ranks of one node
 * move locally before the first step.
 */
#include "algo_int.h"

static int a2a_init(struct nx_xop *x, char *err, size_t errlen)
{
    x->nsteps = x->d.nnodes - 1;
    x->piece_elems = nx_xpiece_for(x, (uint64_t)x->max_local * x->max_local);
    return 0;
}

/* Block (local rank l, peer rank j) of a L x P buffer. */
static uint64_t blk(const struct nx_xop *x, uint32_t l, uint32_t j, const struct nx_xpiece *pc)
{
    return ((uint64_t)l * x->d.nranks + j) * x->bs + pc->e0;
}

static void a2a_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                     struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, me = x->d.me;
    uint32_t dst = (me + s + 1) % N, src = nx_xmod((int64_t)me - s - 1, N);
    nx_xplan_send(pl, dst);
    for (uint32_t l = 0; l < nx_xlocal(x, me); l++)
        for (uint32_t i = x->nr_off[dst]; i < x->nr_off[dst + 1]; i++)
            nx_xplan_reg(x, pl, XB_IN, blk(x, l, x->nr_rank[i], pc), pc->n, XA_COPY);
    nx_xplan_recv(pl, src);
    for (uint32_t i = x->nr_off[src]; i < x->nr_off[src + 1]; i++)
        for (uint32_t l = 0; l < nx_xlocal(x, me); l++)
            nx_xplan_reg(x, pl, XB_OUT, blk(x, l, x->nr_rank[i], pc), pc->n, XA_COPY);
}

static int a2a_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    uint32_t me = x->d.me, L = nx_xlocal(x, me), *mine = &x->nr_rank[x->nr_off[me]];
    for (uint32_t a = 0; a < L; a++)
        for (uint32_t b = 0; b < L; b++) {
            int rv = nx_xcopy(x, nx_xbuf_at(x, pc, XB_OUT, blk(x, b, mine[a], pc)),
                              nx_xbuf_at(x, pc, XB_IN, blk(x, a, mine[b], pc)), pc->n);
            if (rv < 0)
                return rv;
        }
    return 0;
}

const struct nx_xalgo nx_xalgo_pairwise_a2a = {
    .name = "pairwise", .init = a2a_init, .plan = a2a_plan, .begin = a2a_begin,
};
