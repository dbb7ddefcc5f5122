/*
 * algo_scan.c - scan and exscan: Hillis-Steele over "runs".
 *
 * The ranks of a node need not be contiguous, so the unit of the prefix is a run: a
 * maximal stretch of consecutive ranks on one node (with the usual placement a run is a
 * node).  Runs s = 0 .. S-1 in rank order; a node may own several.
 *
 *   begin   for each of its runs the node scans its ranks locally (the adapter's
 *           scan_fanout: halves accumulate in f32, rounded once) and keeps the run's total
 *           P_s in scratch
 *   step k  (d = 2^k) run s sends P_s to run s + d; run s receives P_s-d and sets
 *           P_s = P_s-d op P_s and E_s = P_s-d op E_s (E_s absent before step 0).  After
 *           ceil(log2 S) steps E_s is the fold of every run before s
 *   end     each rank of run s > 0 gets E_s op its local prefix (exscan: the run's first
 *           rank gets E_s itself; rank 0 gets the identity from the local scan)
 *
 * All operands are combined lower runs first.  Messages between two nodes in one step
 * bundle their runs in run order; a run that sends to a run on its own node does so
 * through the engine's self-message.
 */
#include <stdlib.h>

#include "algo_int.h"
#include "mem.h"
#include "shm_abi.h"

struct runs {
    uint32_t S, nmine;
    uint32_t *node;  /* per run: its node */
    uint32_t *local; /* per run: its index among this node's runs, or UINT32_MAX */
    uint32_t *lb, *len; /* per run of this node: first local block, ranks */
    void **dsts;     /* max_local entries, for the local scans */
    const void **srcs;
};

static void runs_free(struct runs *r)
{
    free(r->node);
    free(r->local);
    free(r->lb);
    free(r->len);
    free(r->dsts);
    free(r->srcs);
}

static int scan_init(struct nx_xop *x, char *err, size_t errlen)
{
    uint32_t P = x->d.nranks, me = x->d.me;
    /* One allocation for x->priv (freed with free()): the struct, then its arrays. */
    struct runs tmp = {0};
    tmp.node = nx_xcalloc(P, sizeof(uint32_t));
    tmp.local = nx_xcalloc(P, sizeof(uint32_t));
    tmp.lb = nx_xcalloc(P, sizeof(uint32_t));
    tmp.len = nx_xcalloc(P, sizeof(uint32_t));
    uint32_t *per_node = nx_xcalloc(x->d.nnodes, sizeof(uint32_t)), most = 1;
    for (uint32_t r = 0; r < P; r++) {
        uint32_t n = x->rank_node[r];
        if (r > 0 && n == x->rank_node[r - 1]) {
            if (n == me)
                tmp.len[tmp.nmine - 1]++;
            continue;
        }
        if (++per_node[n] > most)
            most = per_node[n];
        tmp.node[tmp.S] = n;
        tmp.local[tmp.S] = UINT32_MAX;
        if (n == me) {
            tmp.local[tmp.S] = tmp.nmine;
            tmp.lb[tmp.nmine] = x->lidx[r];
            tmp.len[tmp.nmine++] = 1;
        }
        tmp.S++;
    }
    size_t S = tmp.S, m = tmp.nmine, L = x->max_local;
    size_t bytes = sizeof(struct runs) + (2 * S + 2 * m) * sizeof(uint32_t) +
                   2 * L * sizeof(void *);
    struct runs *r = nx_xcalloc(1, bytes);
    uint8_t *p = (uint8_t *)(r + 1);
    r->dsts = (void **)p;
    p += L * sizeof(void *);
    r->srcs = (const void **)p;
    p += L * sizeof(void *);
    r->node = (uint32_t *)p;
    r->local = r->node + S;
    r->lb = r->local + S;
    r->len = r->lb + m;
    for (size_t i = 0; i < S; i++) {
        r->node[i] = tmp.node[i];
        r->local[i] = tmp.local[i];
    }
    for (size_t i = 0; i < m; i++) {
        r->lb[i] = tmp.lb[i];
        r->len[i] = tmp.len[i];
    }
    r->S = tmp.S;
    r->nmine = tmp.nmine;
    tmp.dsts = NULL;
    tmp.srcs = NULL;
    runs_free(&tmp);
    x->priv = r;
    x->nsteps = nx_xlog2up(r->S);
    free(per_node);
    /* A message carries at most every run's total of a node; every node must agree on
     * the piece size, so it is sized for the node with the most runs. */
    x->piece_elems = nx_xpiece_for(x, most);
    x->scratch_elems = 2 * (uint64_t)r->nmine * x->piece_elems;
    return 0;
}

/* Scratch: P of local run j at j * n, E at (nmine + j) * n. */
static uint64_t p_at(const struct runs *r, uint32_t j, const struct nx_xpiece *pc)
{
    (void)r;
    return (uint64_t)j * pc->n;
}

static uint64_t e_at(const struct runs *r, uint32_t j, const struct nx_xpiece *pc)
{
    return ((uint64_t)r->nmine + j) * pc->n;
}

static void scan_plan(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t k,
                      struct nx_xplan *pl)
{
    const struct runs *r = x->priv;
    uint64_t d = 1ull << k;
    /* One message per peer node; each peer is found at its first run and bundles all. */
    for (uint32_t s = 0; s < r->S; s++) {
        uint32_t j = r->local[s];
        if (j == UINT32_MAX || s + d >= r->S)
            continue;
        uint32_t dst = r->node[s + d];
        bool seen = false;
        for (uint32_t t = 0; t < s && !seen; t++)
            seen = r->local[t] != UINT32_MAX && t + d < r->S && r->node[t + d] == dst;
        if (seen)
            continue;
        nx_xplan_send(pl, dst);
        for (uint32_t t = s; t + d < r->S; t++)
            if (r->local[t] != UINT32_MAX && r->node[t + d] == dst)
                nx_xplan_reg(x, pl, XB_SCR, p_at(r, r->local[t], pc), pc->n, XA_COPY);
    }
    for (uint32_t s = (uint32_t)d; s < r->S; s++) {
        uint32_t j = r->local[s];
        if (j == UINT32_MAX)
            continue;
        uint32_t src = r->node[s - d];
        bool seen = false;
        for (uint32_t t = (uint32_t)d; t < s && !seen; t++)
            seen = r->local[t] != UINT32_MAX && r->node[t - d] == src;
        if (seen)
            continue;
        nx_xplan_recv(pl, src);
        for (uint32_t t = s; t < r->S; t++) {
            uint32_t jt = r->local[t];
            if (jt == UINT32_MAX || r->node[t - d] != src)
                continue;
            nx_xplan_reg_keep(x, pl, XB_SCR, p_at(r, jt, pc), pc->n, XA_REDUCE_FIRST);
            nx_xplan_reg(x, pl, XB_SCR, e_at(r, jt, pc), pc->n,
                         k == 0 ? XA_COPY : XA_REDUCE_FIRST);
        }
    }
}

/* The local prefix of run j into out; exclusive: the run's total into P_j first (out may
 * be in, so the total must be read before the exclusive prefix overwrites the inputs). */
static int local_scan(struct nx_xop *x, struct runs *r, uint32_t j,
                      const struct nx_xpiece *pc)
{
    const struct nx_adapter *ad = x->d.ad;
    uint64_t c = x->bs;
    uint32_t len = r->len[j];
    uint8_t *total = nx_xbuf_at(x, pc, XB_SCR, p_at(r, j, pc));
    int rv;
    for (uint32_t i = 0; i < len; i++) {
        r->dsts[i] = nx_xbuf_at(x, pc, XB_OUT, (r->lb[j] + i) * c + pc->e0);
        r->srcs[i] = nx_xbuf_at(x, pc, XB_IN, (r->lb[j] + i) * c + pc->e0);
    }
    if (x->d.kind == NX_K_SCAN) {
        if ((rv = ad->scan_fanout(r->dsts, r->srcs, len, pc->n, x->d.dtype, x->d.redop, 0)) < 0)
            return rv;
        return nx_xcopy(x, total, r->dsts[len - 1], pc->n);
    }
    /* The total is the inclusive prefix of the last rank: the same rounding as a scan. */
    for (uint32_t i = 0; i < len; i++)
        r->dsts[i] = NULL;
    r->dsts[len - 1] = total;
    if ((rv = ad->scan_fanout(r->dsts, r->srcs, len, pc->n, x->d.dtype, x->d.redop, 0)) < 0)
        return rv;
    for (uint32_t i = 0; i < len; i++)
        r->dsts[i] = nx_xbuf_at(x, pc, XB_OUT, (r->lb[j] + i) * c + pc->e0);
    return ad->scan_fanout(r->dsts, r->srcs, len, pc->n, x->d.dtype, x->d.redop, 1);
}

static int scan_begin(struct nx_xop *x, const struct nx_xpiece *pc)
{
    struct runs *r = x->priv;
    int rv = 0;
    if (pc->n == 0)
        return 0;
    for (uint32_t j = 0; j < r->nmine && rv == 0; j++)
        rv = local_scan(x, r, j, pc);
    return rv;
}

static int scan_end(struct nx_xop *x, const struct nx_xpiece *pc)
{
    struct runs *r = x->priv;
    uint64_t c = x->bs;
    if (pc->n == 0)
        return 0;
    for (uint32_t s = 1; s < r->S; s++) {
        uint32_t j = r->local[s];
        if (j == UINT32_MAX)
            continue;
        const uint8_t *e = nx_xbuf_at(x, pc, XB_SCR, e_at(r, j, pc));
        for (uint32_t i = 0; i < r->len[j]; i++) {
            uint8_t *o = nx_xbuf_at(x, pc, XB_OUT, (r->lb[j] + i) * c + pc->e0);
            int rv = i == 0 && x->d.kind == NX_K_EXSCAN ? nx_xcopy(x, o, e, pc->n)
                                                         : nx_xreduce_first(x, o, e, pc->n);
            if (rv < 0)
                return rv;
        }
    }
    return 0;
}

const struct nx_xalgo nx_xalgo_hillis_steele = {
    .name = "hillis-steele", .init = scan_init, .plan = scan_plan, .begin = scan_begin,
    .end = scan_end,
};
