/*
 * algo_rd.c - the latency algorithms: log2(N) exchanges between partners at distance
 * 1, 2, 4, ...
 *
 *   all_reduce "rd"  recursive doubling: every step exchanges the whole piece with the
 *                    partner and reduces.
 *   all_reduce "hd"  recursive halving (each step exchanges and reduces half of what is
 *                    left, so each node ends with 1/p2 of the piece reduced), then
 *                    recursive doubling gathers the reduced parts back.
 *   all_gather "rd"  Bruck's algorithm: step k sends everything gathered so far (up to
 *                    2^k nodes' blocks) to node me - 2^k; works for any N, no fold.
 *   reduce_scatter "hd"  the halving alone, over the nodes' rank blocks.
 *
 * Node counts that are not powers of two (all_reduce): with p2 the largest power of two
 * <= N and rem = N - p2, nodes 2i and 2i+1 (i < rem) first fold: 2i sends its piece to
 * 2i+1, which reduces (x_2i op x_2i+1) and stands for both; the p2 remaining nodes
 * ("virtual ranks" in node order) run the power-of-two algorithm, and at the end 2i+1
 * sends the result back to 2i.
 *
 * Bits: every combination takes the lower node's operand first (XA_REDUCE_FIRST when the
 * partner is lower), so both partners compute the very same a op b, NaN payloads
 * included.  rd and hd pair the same partners in the same order (distance 1 first), so
 * both compute the balanced binary tree over the virtual ranks and give identical bits.
 */
#include "algo_int.h"

struct fold {
    uint32_t p2, rem, K; /* K = log2(p2) */
};

static struct fold fold_of(uint32_t N)
{
    struct fold f = {.p2 = 1};
    while ((uint64_t)f.p2 * 2 <= N) {
        f.p2 *= 2;
        f.K++;
    }
    f.rem = N - f.p2;
    return f;
}

/* The virtual rank of node i, -1 for a node folded away. */
static int64_t vr_of(const struct fold *f, uint32_t i)
{
    if (i < 2 * f->rem)
        return i % 2 ? (int64_t)(i / 2) : -1;
    return (int64_t)i - f->rem;
}

static uint32_t real_of(const struct fold *f, uint32_t v)
{
    return v < f->rem ? 2 * v + 1 : v + f->rem;
}

/* Without a fold the fold steps are not numbered: steps are "logical" here. */
static uint32_t logical(const struct fold *f, uint32_t s)
{
    return f->rem ? s : s + 1;
}

static int rd_init_common(struct nx_xop *x, uint32_t core_steps, uint64_t pe)
{
    struct fold f = fold_of(x->d.nnodes);
    x->nsteps = core_steps + (f.rem ? 2 : 0);
    x->piece_elems = pe;
    return 0;
}

/* The fold steps of both all_reduce forms; true when s was one. */
static bool fold_step(struct nx_xop *x, const struct fold *f, const struct nx_xpiece *pc,
                      uint32_t L, uint32_t last, struct nx_xplan *pl)
{
    uint32_t me = x->d.me;
    if (L != 0 && L != last)
        return false;
    if (me >= 2 * f->rem)
        return true;
    bool odd = me % 2;
    if (L == 0) {
        if (odd) {
            nx_xplan_recv(pl, me - 1);
            nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, XA_REDUCE_FIRST);
        } else {
            nx_xplan_send(pl, me + 1);
            nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, XA_COPY);
        }
    } else if (odd) {
        nx_xplan_send(pl, me - 1);
        nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, XA_COPY);
    } else {
        nx_xplan_recv(pl, me + 1);
        nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, XA_COPY);
    }
    return true;
}

/* ---- recursive doubling ----------------------------------------------------------------- */

static int rd_init(struct nx_xop *x, char *err, size_t errlen)
{
    return rd_init_common(x, fold_of(x->d.nnodes).K, x->chunk_elems);
}

static void rd_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                    struct nx_xplan *pl)
{
    struct fold f = fold_of(x->d.nnodes);
    uint32_t L = logical(&f, s), me = x->d.me;
    if (fold_step(x, &f, pc, L, f.K + 1, pl))
        return;
    int64_t v = vr_of(&f, me);
    if (v < 0)
        return;
    uint32_t partner = real_of(&f, (uint32_t)v ^ (1u << (L - 1)));
    nx_xplan_send(pl, partner);
    nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, XA_COPY);
    nx_xplan_recv(pl, partner);
    nx_xplan_reg(x, pl, XB_OUT, pc->e0, pc->n, partner < me ? XA_REDUCE_FIRST : XA_REDUCE);
}

const struct nx_xalgo nx_xalgo_rd_allreduce = {
    .name = "rd", .init = rd_init, .plan = rd_plan, .begin = nx_xbegin_copy,
};

/* ---- halving-doubling ------------------------------------------------------------------- */

static int hd_init(struct nx_xop *x, char *err, size_t errlen)
{
    uint64_t pe;
    if (__builtin_mul_overflow(x->chunk_elems, (uint64_t)2, &pe))
        pe = x->chunk_elems;
    return rd_init_common(x, 2 * fold_of(x->d.nnodes).K, pe); /* first message: half */
}

/* Segments [sa, sa + len) of the piece's p2 segments, as one region. */
static void segs(struct nx_xop *x, struct nx_xplan *pl, const struct nx_xpiece *pc,
                 uint32_t p2, uint32_t sa, uint32_t len, uint8_t act)
{
    uint64_t a = nx_xsplit(pc->n, p2, sa), b = nx_xsplit(pc->n, p2, sa + len);
    nx_xplan_reg(x, pl, XB_OUT, pc->e0 + a, b - a, act);
}

static void hd_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                    struct nx_xplan *pl)
{
    struct fold f = fold_of(x->d.nnodes);
    uint32_t L = logical(&f, s), me = x->d.me;
    if (fold_step(x, &f, pc, L, 2 * f.K + 1, pl))
        return;
    int64_t sv = vr_of(&f, me);
    if (sv < 0)
        return;
    uint32_t v = (uint32_t)sv;
    /* Halving step k and the doubling step that undoes it use the same partner and the
     * same two halves of the same range. */
    uint32_t k = L <= f.K ? L - 1 : f.K - 1 - (L - 1 - f.K);
    uint32_t a = 0;
    for (uint32_t j = 0; j < k; j++)
        a += ((v >> j) & 1) * (f.p2 >> (j + 1));
    uint32_t h = f.p2 >> (k + 1), bit = (v >> k) & 1;
    uint32_t mine = a + bit * h, theirs = a + (1 - bit) * h;
    uint32_t partner = real_of(&f, v ^ (1u << k));
    if (L <= f.K) {
        nx_xplan_send(pl, partner);
        segs(x, pl, pc, f.p2, theirs, h, XA_COPY);
        nx_xplan_recv(pl, partner);
        segs(x, pl, pc, f.p2, mine, h, partner < me ? XA_REDUCE_FIRST : XA_REDUCE);
    } else {
        nx_xplan_send(pl, partner);
        segs(x, pl, pc, f.p2, mine, h, XA_COPY);
        nx_xplan_recv(pl, partner);
        segs(x, pl, pc, f.p2, theirs, h, XA_COPY);
    }
}

const struct nx_xalgo nx_xalgo_hd_allreduce = {
    .name = "hd", .init = hd_init, .plan = hd_plan, .begin = nx_xbegin_copy,
};

/* ---- Bruck all_gather -------------------------------------------------------------------- */

static int bruck_init(struct nx_xop *x, char *err, size_t errlen)
{
    x->nsteps = nx_xlog2up(x->d.nnodes);
    /* The last step carries up to half the nodes' blocks: size pieces for all of them. */
    x->piece_elems = nx_xpiece_for(x, x->d.nranks);
    return 0;
}

/* Step k: node me holds the blocks of nodes me .. me + 2^k - 1 and sends them to
 * me - 2^k, so that after the step it holds me .. me + 2^(k+1) - 1 (mod N, capped). */
static void bruck_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                       struct nx_xplan *pl)
{
    uint32_t N = x->d.nnodes, me = x->d.me;
    uint64_t d = 1ull << s;
    uint64_t cnt = d < N - d ? d : N - d;
    nx_xplan_send(pl, nx_xmod((int64_t)me - (int64_t)d, N));
    for (uint64_t j = 0; j < cnt; j++)
        nx_xplan_group(x, pl, XB_OUT, (uint32_t)((me + j) % N), pc->e0, pc->n, XA_COPY);
    nx_xplan_recv(pl, (uint32_t)((me + d) % N));
    for (uint64_t j = 0; j < cnt; j++)
        nx_xplan_group(x, pl, XB_OUT, (uint32_t)((me + d + j) % N), pc->e0, pc->n, XA_COPY);
}

const struct nx_xalgo nx_xalgo_bruck_all_gather = {
    .name = "rd", .init = bruck_init, .plan = bruck_plan, .begin = nx_xag_begin,
};

/* ---- reduce_scatter by recursive halving ----------------------------------------------- */

/* in (P blocks) is the accumulator, as in the ring.  Virtual rank u stands for the nodes
 * folded into it; in step k a node keeps the groups of the virtual ranks that agree with
 * its own on bits 0..k and sends its partner (which differs in bit k) the others, so that
 * after log2(p2) steps it holds its own groups, reduced over every node. */
static int rs_hd_init(struct nx_xop *x, char *err, size_t errlen)
{
    /* the fold-in message carries every block */
    return rd_init_common(x, fold_of(x->d.nnodes).K, nx_xpiece_for(x, x->d.nranks));
}

/* Every block of the nodes virtual rank u stands for. */
static void vgroups(struct nx_xop *x, const struct fold *f, struct nx_xplan *pl,
                    const struct nx_xpiece *pc, uint32_t u, uint8_t act)
{
    if (u < f->rem)
        nx_xplan_group(x, pl, XB_IN, 2 * u, pc->e0, pc->n, act);
    nx_xplan_group(x, pl, XB_IN, real_of(f, u), pc->e0, pc->n, act);
}

static void rs_hd_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                       struct nx_xplan *pl)
{
    struct fold f = fold_of(x->d.nnodes);
    uint32_t L = logical(&f, s), me = x->d.me, P = x->d.nranks;
    uint64_t c = x->bs;
    if (L == 0 || L == f.K + 1) {
        if (me >= 2 * f.rem)
            return;
        bool odd = me % 2;
        if (L == 0) { /* 2i hands everything to 2i+1 */
            if (odd)
                nx_xplan_recv(pl, me - 1);
            else
                nx_xplan_send(pl, me + 1);
            for (uint32_t r = 0; r < P; r++)
                nx_xplan_reg(x, pl, XB_IN, r * c + pc->e0, pc->n,
                             odd ? XA_REDUCE_FIRST : XA_COPY);
        } else { /* and gets its own blocks back, reduced */
            if (odd)
                nx_xplan_send(pl, me - 1);
            else
                nx_xplan_recv(pl, me + 1);
            nx_xplan_group(x, pl, XB_IN, odd ? me - 1 : me, pc->e0, pc->n, XA_COPY);
        }
        return;
    }
    int64_t sv = vr_of(&f, me);
    if (sv < 0)
        return;
    uint32_t v = (uint32_t)sv, k = L - 1, low = (2u << k) - 1;
    uint32_t partner = real_of(&f, v ^ (1u << k));
    nx_xplan_send(pl, partner);
    for (uint32_t u = 0; u < f.p2; u++)
        if ((u & low) == ((v ^ (1u << k)) & low))
            vgroups(x, &f, pl, pc, u, XA_COPY);
    nx_xplan_recv(pl, partner);
    for (uint32_t u = 0; u < f.p2; u++)
        if ((u & low) == (v & low))
            vgroups(x, &f, pl, pc, u, partner < me ? XA_REDUCE_FIRST : XA_REDUCE);
}

const struct nx_xalgo nx_xalgo_hd_reduce_scatter = {
    .name = "hd", .init = rs_hd_init, .plan = rs_hd_plan, .end = nx_xrs_end,
};
