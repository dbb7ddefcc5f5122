/*
 * algo_barrier.c - the dissemination barrier: in step k node me tells me + 2^k that it
 * arrived and waits for me - 2^k.  After ceil(log2 N) steps every node has heard,
 * directly or through others, from every node, and no node needed a coordinator.  The
 * messages are empty: they carry only the op's signature, which is what detects a node
 * that called something else.
 */
#include "algo_int.h"

static int diss_init(struct nx_xop *x, char *err, size_t errlen)
{
    x->nsteps = nx_xlog2up(x->d.nnodes);
    x->piece_elems = 1;
    return 0;
}

static void diss_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                      struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, me = x->d.me;
    uint64_t d = 1ull << s;
    nx_xplan_send(pl, (uint32_t)((me + d) % N));
    nx_xplan_recv(pl, nx_xmod((int64_t)me - (int64_t)d, N));
}

const struct nx_xalgo nx_xalgo_dissemination = {
    .name = "dissemination", .init = diss_init, .plan = diss_plan,
};
