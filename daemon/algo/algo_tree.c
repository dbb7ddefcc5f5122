/*
 * algo_tree.c - binomial trees rooted at the root node, ceil(log2 N) steps.
 *
 * Nodes are numbered by tree position v = (node - root) mod N.  In step k (d = 2^k)
 * position v talks with v +- d:
 *
 *   broadcast  v < d sends the piece to v + d (the set that has it doubles)
 *   reduce     v with lowest set bit d sends its partial to v - d, which folds it in:
 *              own op received, i.e. the lower positions first - a balanced binary tree
 *              over positions
 *   gather     as reduce, but the partial is every block of the subtree [v, v + d),
 *              kept in scratch at inner nodes and put in place at the root
 *   scatter    the reverse of gather: the root sends the upper half of the blocks first
 *              (step k uses d = 2^(K-1-k))
 *
 * Gather/scatter messages carry the subtree's blocks in position order, each node's
 * blocks in rank order.  An inner node's scratch holds its subtree below itself:
 * positions v+1 .. v+lsb(v)-1, at block (cum[u] - cum[v+1] + j) * n for block j of
 * position u (cum: ranks before a position).
 */
#include <stdlib.h>

#include "algo_int.h"
#include "mem.h"

static uint32_t lsb(uint32_t v, uint32_t N)
{
    return v ? v & -v : N; /* the root's subtree is everything */
}

static uint32_t sub_end(uint32_t v, uint32_t N)
{
    uint64_t e = (uint64_t)v + lsb(v, N);
    return e < N ? (uint32_t)e : N;
}

/* ---- broadcast ---------------------------------------------------------------------------- */

static int tree_init(struct nx_xop *x, char *err, size_t errlen)
{
    x->nsteps = nx_xlog2up(x->d.nnodes);
    x->piece_elems = x->chunk_elems;
    return 0;
}

static int bcast_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    if (x->d.me != x->root_node || !x->d.out)
        return 0;
    return nx_xbegin_copy(x, pc);
}

static void bcast_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                       struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, v = nx_xvrank(x, x->d.me);
    uint64_t d = 1ull << s;
    if (v < d && v + d < N) {
        nx_xplan_send(pl, nx_xreal(x, (uint32_t)(v + d)));
        nx_xplan_reg(x, pl, v == 0 ? XB_IN : XB_OUT, pc->e0, pc->n, XA_COPY);
    } else if (v >= d && v < 2 * d) {
        nx_xplan_recv(pl, nx_xreal(x, (uint32_t)(v - d)));
        nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, XA_COPY);
    }
}

const struct nx_xalgo nx_xalgo_tree_broadcast = {
    .name = "tree", .init = tree_init, .plan = bcast_plan, .begin = bcast_begin,
};

/* ---- reduce ------------------------------------------------------------------------------- */

static int reduce_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    return x->d.me == x->root_node ? nx_xbegin_copy(x, pc) : 0;
}

static void reduce_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                        struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, v = nx_xvrank(x, x->d.me);
    uint64_t d = 1ull << s;
    uint8_t acc = v == 0 ? XB_OUT : XB_IN;
    if (v % (2 * d) == d) {
        nx_xplan_send(pl, nx_xreal(x, (uint32_t)(v - d)));
        nx_xplan_reg(x, pl, acc, pc->e0, pc->n, XA_COPY);
    } else if (v % (2 * d) == 0 && v + d < N) {
        nx_xplan_recv(pl, nx_xreal(x, (uint32_t)(v + d)));
        nx_xplan_reg(x, pl, acc, pc->e0, pc->n, XA_REDUCE);
    }
}

const struct nx_xalgo nx_xalgo_tree_reduce = {
    .name = "tree", .init = tree_init, .plan = reduce_plan, .begin = reduce_begin,
};

/* ---- gather and scatter --------------------------------------------------------------------- */

/* x->priv: cum[u] = ranks at positions < u, u = 0..N. */
static int blocks_init(struct nx_xop *x, char *err, size_t errlen)
{
    uint32_t N = x->d.nnodes, *cum = nx_xcalloc((size_t)N + 1, sizeof(uint32_t));
    for (uint32_t u = 0; u < N; u++)
        cum[u + 1] = cum[u] + nx_xlocal(x, nx_xreal(x, u));
    x->priv = cum;
    uint32_t most = 1;
    for (uint32_t v = 1; v < N; v++)
        if (cum[sub_end(v, N)] - cum[v] > most)
            most = cum[sub_end(v, N)] - cum[v];
    x->nsteps = nx_xlog2up(N);
    x->piece_elems = nx_xpiece_for(x, most);
    uint32_t v = nx_xvrank(x, x->d.me);
    x->scratch_elems = v ? (uint64_t)(cum[sub_end(v, N)] - cum[v + 1]) * x->piece_elems : 0;
    return 0;
}

/* Regions of the blocks of positions [u0, u1) as node v holds or wants them: its own in
 * own_buf (local order), at the root in the P-block buffer, elsewhere in scratch. */
static void subtree(struct nx_xop *x, struct nx_xplan *pl, const struct nx_xpiece *pc,
                    uint32_t u0, uint32_t u1, uint8_t own_buf, uint8_t root_buf, uint8_t act)
{
    const uint32_t *cum = x->priv;
    uint32_t v = nx_xvrank(x, x->d.me);
    uint64_t c = x->bs;
    for (uint32_t u = u0; u < u1; u++) {
        uint32_t g = nx_xreal(x, u), L = nx_xlocal(x, g);
        for (uint32_t j = 0; j < L; j++) {
            if (u == v && v != 0)
                nx_xplan_reg(x, pl, own_buf, (uint64_t)j * c + pc->e0, pc->n, act);
            else if (v == 0)
                nx_xplan_reg(x, pl, root_buf, x->nr_rank[x->nr_off[g] + j] * c + pc->e0,
                             pc->n, act);
            else
                nx_xplan_reg(x, pl, XB_SCR, (uint64_t)(cum[u] - cum[v + 1] + j) * pc->n,
                             pc->n, act);
        }
    }
}

static void gather_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                        struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, v = nx_xvrank(x, x->d.me);
    uint64_t d = 1ull << s;
    if (v % (2 * d) == d) {
        nx_xplan_send(pl, nx_xreal(x, (uint32_t)(v - d)));
        subtree(x, pl, pc, v, sub_end(v, N), XB_IN, XB_OUT, XA_COPY);
    } else if (v % (2 * d) == 0 && v + d < N) {
        uint64_t end = v + 2 * d < N ? v + 2 * d : N;
        nx_xplan_recv(pl, nx_xreal(x, (uint32_t)(v + d)));
        subtree(x, pl, pc, (uint32_t)(v + d), (uint32_t)end, XB_IN, XB_OUT, XA_COPY);
    }
}

static int gather_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    return x->d.me == x->root_node ? nx_xag_begin(x, pc) : 0;
}

const struct nx_xalgo nx_xalgo_tree_gather = {
    .name = "tree", .init = blocks_init, .plan = gather_plan, .begin = gather_begin,
};

static void scatter_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                         struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, v = nx_xvrank(x, x->d.me);
    uint64_t d = 1ull << (x->nsteps - 1 - s);
    if (v % (2 * d) == 0 && v + d < N) {
        uint64_t end = v + 2 * d < N ? v + 2 * d : N;
        nx_xplan_send(pl, nx_xreal(x, (uint32_t)(v + d)));
        subtree(x, pl, pc, (uint32_t)(v + d), (uint32_t)end, XB_OUT, XB_IN, XA_COPY);
    } else if (v % (2 * d) == d) {
        nx_xplan_recv(pl, nx_xreal(x, (uint32_t)(v - d)));
        subtree(x, pl, pc, v, sub_end(v, N), XB_OUT, XB_IN, XA_COPY);
    }
}

/* The root's own blocks: from their rank positions in in to its local order in out. */
static int scatter_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    uint32_t me = x->d.me;
    uint64_t c = x->bs;
    if (me != x->root_node)
        return 0;
    for (uint32_t l = 0; l < nx_xlocal(x, me); l++) {
        uint64_t r = x->nr_rank[x->nr_off[me] + l];
        int rv = nx_xcopy(x, nx_xbuf_at(x, pc, XB_OUT, l * c + pc->e0),
                          nx_xbuf_at(x, pc, XB_IN, r * c + pc->e0), pc->n);
        if (rv < 0)
            return rv;
    }
    return 0;
}

const struct nx_xalgo nx_xalgo_tree_scatter = {
    .name = "tree", .init = blocks_init, .plan = scatter_plan, .begin = scatter_begin,
};
