/*
 * algo_ring.c - the bandwidth algorithms: every node sends to its successor and receives
 * from its predecessor, so each link carries (N-1)/N of the data once per phase.
 *
 *   all_reduce      ring reduce-scatter over N segments of the piece, then ring
 *                   all-gather of the reduced segments (2(N-1) steps)
 *   reduce_scatter  ring reduce-scatter whose segments are the nodes' rank blocks
 *   all_gather      ring all-gather of the nodes' rank blocks
 *   broadcast       pipelined chain root -> root+1 -> ... (N-1 steps per piece)
 *   reduce          pipelined chain ... -> root+1 -> root, reducing on the way
 *
 * Reduction order: segment k of an all_reduce piece is first sent by node k, and each
 * node on the way folds its own value into what it received, so its result is
 * x_k op x_k+1 op ... op x_k-1 (mod N), a left fold in ring order computed once and then
 * copied: every node ends with the same bits.  reduce_scatter: node k's blocks start at
 * node k+1 and end at node k.
 */
#include "algo_int.h"

/* ---- all_reduce ------------------------------------------------------------------------ */

static int ar_init(struct nx_xop *x, char *err, size_t errlen)
{
    uint32_t N = x->d.nnodes;
    x->nsteps = N > 1 ? 2 * (N - 1) : 0;
    /* One message carries a segment, 1/N of the piece. */
    uint64_t pe;
    if (__builtin_mul_overflow(x->chunk_elems, (uint64_t)N, &pe))
        pe = UINT64_MAX >> 8;
    x->piece_elems = pe;
    return 0;
}

static void seg(struct nx_xop *x, struct nx_xplan *pl, const struct nx_xpiece *pc,
                uint32_t k, uint8_t act)
{
    uint32_t N = x->d.nnodes;
    uint64_t a = nx_xsplit(pc->n, N, k), b = nx_xsplit(pc->n, N, k + 1);
    nx_xplan_reg(x, pl, XB_OUT, pc->e0 + a, b - a, act);
}

static void ar_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                    struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, me = x->d.me;
    uint32_t next = (me + 1) % N, prev = (me + N - 1) % N;
    if (s < N - 1) { /* reduce-scatter: afterwards node me holds segment me+1 */
        nx_xplan_send(pl, next);
        seg(x, pl, pc, nx_xmod((int64_t)me - s, N), XA_COPY);
        nx_xplan_recv(pl, prev);
        seg(x, pl, pc, nx_xmod((int64_t)me - s - 1, N), XA_REDUCE);
    } else {
        uint32_t t = s - (N - 1);
        nx_xplan_send(pl, next);
        seg(x, pl, pc, nx_xmod((int64_t)me + 1 - t, N), XA_COPY);
        nx_xplan_recv(pl, prev);
        seg(x, pl, pc, nx_xmod((int64_t)me - t, N), XA_COPY);
    }
}

const struct nx_xalgo nx_xalgo_ring_allreduce = {
    .name = "ring", .init = ar_init, .plan = ar_plan, .begin = nx_xbegin_copy,
};

/* ---- reduce_scatter ---------------------------------------------------------------------- */

static int blocks_init(struct nx_xop *x, char *err, size_t errlen)
{
    x->nsteps = x->d.nnodes - 1;
    x->piece_elems = nx_xpiece_for(x, x->max_local); /* a message: one node's blocks */
    return 0;
}

/* in is the accumulator (P blocks); node me's blocks are final after step N-2. */
static void rs_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                    struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, me = x->d.me;
    nx_xplan_send(pl, (me + 1) % N);
    nx_xplan_group(x, pl, XB_IN, nx_xmod((int64_t)me - s - 1, N), pc->e0, pc->n, XA_COPY);
    nx_xplan_recv(pl, (me + N - 1) % N);
    nx_xplan_group(x, pl, XB_IN, nx_xmod((int64_t)me - s - 2, N), pc->e0, pc->n,
                   XA_REDUCE);
}

int nx_xrs_end(struct nx_xop *x, const struct nx_xpiece *pc)
{
    uint32_t me = x->d.me, c0 = x->nr_off[me];
    uint64_t c = x->bs;
    for (uint32_t l = 0; l < nx_xlocal(x, me); l++) {
        uint64_t r = x->nr_rank[c0 + l];
        int rv = nx_xcopy(x, nx_xbuf_at(x, pc, XB_OUT, l * c + pc->e0),
                          nx_xbuf_at(x, pc, XB_IN, r * c + pc->e0), pc->n);
        if (rv < 0)
            return rv;
    }
    return 0;
}

const struct nx_xalgo nx_xalgo_ring_reduce_scatter = {
    .name = "ring", .init = blocks_init, .plan = rs_plan, .end = nx_xrs_end,
};

/* ---- all_gather ------------------------------------------------------------------------ */

/* Puts this node's own blocks where they belong in the P-block output. */
static int ag_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    uint32_t me = x->d.me, c0 = x->nr_off[me];
    uint64_t c = x->bs;
    for (uint32_t l = 0; l < nx_xlocal(x, me); l++) {
        uint64_t r = x->nr_rank[c0 + l];
        int rv = nx_xcopy(x, nx_xbuf_at(x, pc, XB_OUT, r * c + pc->e0),
                          nx_xbuf_at(x, pc, XB_IN, l * c + pc->e0), pc->n);
        if (rv < 0)
            return rv;
    }
    return 0;
}

static void ag_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                    struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, me = x->d.me;
    nx_xplan_send(pl, (me + 1) % N);
    nx_xplan_group(x, pl, XB_OUT, nx_xmod((int64_t)me - s, N), pc->e0, pc->n, XA_COPY);
    nx_xplan_recv(pl, (me + N - 1) % N);
    nx_xplan_group(x, pl, XB_OUT, nx_xmod((int64_t)me - s - 1, N), pc->e0, pc->n, XA_COPY);
}

int nx_xag_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    return ag_begin(x, pc);
}

const struct nx_xalgo nx_xalgo_ring_all_gather = {
    .name = "ring", .init = blocks_init, .plan = ag_plan, .begin = ag_begin,
};

/* ---- broadcast and reduce: pipelined chains --------------------------------------------- */

static int chain_init(struct nx_xop *x, char *err, size_t errlen)
{
    x->nsteps = x->d.nnodes - 1;
    x->piece_elems = x->chunk_elems;
    return 0;
}

static int bcast_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    if (x->d.me != x->root_node || !x->d.out)
        return 0;
    return nx_xbegin_copy(x, pc);
}

/* Step s: chain position s forwards the piece to position s+1. */
static void bcast_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                       struct nx_xplan *pl)
{
    uint32_t v = nx_xvrank(x, x->d.me);
    if (v == s) {
        nx_xplan_send(pl, nx_xreal(x, s + 1));
        nx_xplan_reg(x, pl, v == 0 ? XB_IN : XB_OUT, pc->e0, pc->n, XA_COPY);
    } else if (v == s + 1) {
        nx_xplan_recv(pl, nx_xreal(x, s));
        nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, XA_COPY);
    }
}

const struct nx_xalgo nx_xalgo_chain_broadcast = {
    .name = "ring", .init = chain_init, .plan = bcast_plan, .begin = bcast_begin,
};

/* The root accumulates in out, the others in in (working memory, algo.h). */
static int reduce_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    return x->d.me == x->root_node ? nx_xbegin_copy(x, pc) : 0;
}

/* Step s: position N-1-s sends its partial to N-2-s, which folds it into its own
 * (x_v op (x_v+1 op ...)): a right fold in chain order. */
static void reduce_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                        struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, v = nx_xvrank(x, x->d.me);
    uint8_t acc = v == 0 ? XB_OUT : XB_IN;
    if (v == N - 1 - s) {
        nx_xplan_send(pl, nx_xreal(x, v - 1));
        nx_xplan_reg(x, pl, acc, pc->e0, pc->n, XA_COPY);
    } else if (v == N - 2 - s) {
        nx_xplan_recv(pl, nx_xreal(x, v + 1));
        nx_xplan_reg(x, pl, acc, pc->e0, pc->n, XA_REDUCE);
    }
}

const struct nx_xalgo nx_xalgo_chain_reduce = {
    .name = "ring", .init = chain_init, .plan = reduce_plan, .begin = reduce_begin,
};
