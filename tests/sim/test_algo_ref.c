/* test_algo_ref.c - cases, inputs and the independent reference (see test_algo.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexar.h"
#include "refnum.h"
#include "shm_abi.h"
#include "test_algo.h"

uint64_t ta_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static bool is_float(uint8_t dt)
{
    return dt <= NEXAR_BF16;
}

bool ta_kind_reduces(uint8_t kind)
{
    return kind == NX_K_ALL_REDUCE || kind == NX_K_ALL_REDUCE_BUCKETED ||
           kind == NX_K_REDUCE || kind == NX_K_REDUCE_SCATTER || kind == NX_K_SCAN ||
           kind == NX_K_EXSCAN;
}

void ta_place(struct ta_case *c, uint32_t nranks, bool shuffle, uint64_t *rng)
{
    uint32_t N = c->nnodes, per[TA_MAXN] = {0};
    c->nranks = nranks;
    for (uint32_t r = 0; r < nranks; r++)
        per[r < N ? r : ta_rand(rng) % N]++;
    uint32_t r = 0;
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t i = 0; i < per[n]; i++)
            c->rank_node[r++] = n;
    if (shuffle)
        for (uint32_t i = nranks; i > 1; i--) {
            uint32_t j = (uint32_t)(ta_rand(rng) % i), t = c->rank_node[i - 1];
            c->rank_node[i - 1] = c->rank_node[j];
            c->rank_node[j] = t;
        }
}

/* ---- geometry ------------------------------------------------------------------------ */

static uint32_t local_of(const struct ta_case *c, uint32_t n)
{
    uint32_t L = 0;
    for (uint32_t r = 0; r < c->nranks; r++)
        L += c->rank_node[r] == n;
    return L;
}

/* The placement, computed once per check: the loops below run over every element. */
struct geo {
    uint32_t lidx[TA_MAXR], local[TA_MAXN], at[TA_MAXN][TA_MAXR];
};

static void geo_of(const struct ta_case *c, struct geo *g)
{
    memset(g->local, 0, sizeof(g->local));
    for (uint32_t r = 0; r < c->nranks; r++) {
        uint32_t n = c->rank_node[r];
        g->lidx[r] = g->local[n];
        g->at[n][g->local[n]++] = r;
    }
}

static uint32_t root_node(const struct ta_case *c)
{
    return nx_kind_has_root(c->kind) ? c->rank_node[c->root] : 0;
}

/* Blocks of count elements in node n's input and output (0: none). */
static void blocks(const struct ta_case *c, uint32_t n, uint64_t *bi, uint64_t *bo)
{
    uint64_t L = local_of(c, n), P = c->nranks;
    bool root = n == root_node(c);
    *bi = *bo = 1;
    switch (c->kind) {
    case NX_K_BROADCAST: *bi = root; *bo = !root || !c->inplace; break;
    case NX_K_REDUCE: *bo = root && !c->inplace; break;
    case NX_K_ALL_GATHER: *bi = L; *bo = P; break;
    case NX_K_GATHER: *bi = L; *bo = root ? P : 0; break;
    case NX_K_REDUCE_SCATTER: *bi = P; *bo = L; break;
    case NX_K_SCATTER: *bi = root ? P : 0; *bo = L; break;
    case NX_K_ALL_TO_ALL: *bi = *bo = L * P; break;
    case NX_K_SCAN: case NX_K_EXSCAN: *bi = L; *bo = c->inplace ? 0 : L; break;
    case NX_K_BARRIER: *bi = *bo = 0; break;
    default: *bo = !c->inplace; break;
    }
}

/* ---- values ---------------------------------------------------------------------------- */

static void put_float(uint8_t dt, void *p, double v)
{
    if (dt == NEXAR_F64) {
        memcpy(p, &v, 8);
    } else if (dt == NEXAR_F32) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else {
        uint16_t h = dt == NEXAR_F16 ? tl_f32_to_f16((float)v) : tl_f32_to_bf16((float)v);
        memcpy(p, &h, 2);
    }
}

static double get_float(uint8_t dt, const void *p)
{
    if (dt == NEXAR_F64) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    if (dt == NEXAR_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return dt == NEXAR_F16 ? tl_f16_to_f32(h) : tl_bf16_to_f32(h);
}

static void gen(const struct ta_case *c, uint64_t *rng, uint8_t *p)
{
    uint64_t r = ta_rand(rng);
    size_t es = tl_esize(c->dtype);
    if (!is_float(c->dtype) || !ta_kind_reduces(c->kind)) {
        memcpy(p, &r, es); /* any bits: data movement must not look at them */
        return;
    }
    double u = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) */
    bool scan = c->kind == NX_K_SCAN || c->kind == NX_K_EXSCAN;
    double v;
    switch (c->redop) {
    case NEXAR_SUM:
        if (c->vals == TA_NAN && (r & 3) == 0) {
            /* NaNs with distinct payloads: the cross-node order decides which survives. */
            uint64_t nan64 = 0x7ff8000000000000ull | ((r >> 20) & 0xffff);
            uint32_t nan32 = 0x7fc00000u | (uint32_t)((r >> 20) & 0xffff);
            uint16_t nan16 = (uint16_t)(0x7e00u | ((r >> 20) & 0x1ff));
            memcpy(p, c->dtype == NEXAR_F64 ? (void *)&nan64
                      : c->dtype == NEXAR_F32 ? (void *)&nan32 : (void *)&nan16, es);
            return;
        }
        v = c->vals == TA_EXACT ? (double)((int)(r % 9) - 4) : 2 * u - 1;
        break;
    case NEXAR_PROD: {
        static const double exact[4] = {1, -1, 2, 0.5};
        v = c->vals == TA_EXACT ? exact[r % (scan ? 2 : 4)] : (0.2 * u + 0.9) * (r & 1 ? -1 : 1);
        break;
    }
    default:
        if (c->vals == TA_EXACT)
            v = (double)((int)(r % 201) - 100);
        else if ((r & 15) == 0)
            v = r & 16 ? -0.0 : 0.0;
        else
            v = ldexp(2 * u - 1, (int)((r >> 5) % 20) - 10);
        break;
    }
    put_float(c->dtype, p, v);
}

void ta_setup(const struct ta_case *c, struct ta_bufs *b)
{
    size_t es = tl_esize(c->dtype);
    memset(b, 0, sizeof(*b));
    for (uint32_t n = 0; n < c->nnodes; n++) {
        uint64_t bi, bo, rng = c->seed ^ (0x9e3779b97f4a7c15ull * (n + 1));
        blocks(c, n, &bi, &bo);
        b->in_bytes[n] = bi * c->count * es;
        b->out_bytes[n] = bo * c->count * es;
        /* +1: never a zero-size malloc, and a count-0 op still has a (unused) buffer */
        b->in[n] = bi ? malloc(b->in_bytes[n] + 1) : NULL;
        b->in0[n] = bi ? malloc(b->in_bytes[n] + 1) : NULL;
        b->out[n] = bo ? malloc(b->out_bytes[n] + 1) : NULL;
        for (size_t i = 0; i < b->in_bytes[n]; i += es)
            gen(c, &rng, b->in[n] + i);
        if (bi)
            memcpy(b->in0[n], b->in[n], b->in_bytes[n]);
        if (bo)
            memset(b->out[n], 0xa5, b->out_bytes[n]);
    }
}

void ta_free(struct ta_bufs *b)
{
    for (int n = 0; n < TA_MAXN; n++) {
        free(b->in[n]);
        free(b->in0[n]);
        free(b->out[n]);
    }
}

void ta_desc(const struct ta_case *c, struct ta_bufs *b, uint32_t n, struct nx_xop_desc *d)
{
    *d = (struct nx_xop_desc){
        .kind = c->kind, .dtype = c->dtype, .redop = c->redop, .algo = c->algo,
        .count = c->count, .root = c->root, .nnodes = c->nnodes, .me = n,
        .nranks = c->nranks, .rank_node = c->rank_node, .in = b->in[n],
        .out = b->out[n] ? b->out[n] : NULL, .ad = &nx_adapter_cpu,
        .chunk_bytes = c->chunk_bytes, .window = c->window, .max_inflight = c->max_inflight,
        .iov_send = c->iov_send,
    };
    /* in place: the output is the input (broadcast: only the root has one) */
    if (!b->out[n] && c->kind != NX_K_GATHER && c->kind != NX_K_REDUCE)
        d->out = b->in[n];
    if (c->kind == NX_K_REDUCE && c->inplace && n == root_node(c))
        d->out = b->in[n];
    if (c->kind == NX_K_BROADCAST && n == root_node(c) && c->inplace)
        d->out = NULL;
}

void ta_name(const struct ta_case *c, char *buf, size_t len)
{
    int o = snprintf(buf, len, "%s/%s %s %s count=%" PRIu64 " N=%u P=%u root=%u w=%u "
                     "chunk=%" PRIu64 " vals=%d inplace=%d iov=%d seed=%" PRIu64 " placement=",
                     nx_kind_name(c->kind), nx_algo_name(c->algo), nx_dtype_name(c->dtype),
                     nx_redop_name(c->redop), c->count, c->nnodes, c->nranks, c->root,
                     c->window, c->chunk_bytes, c->vals, c->inplace, c->iov_send, c->seed);
    for (uint32_t r = 0; r < c->nranks && o > 0 && (size_t)o < len; r++)
        o += snprintf(buf + o, len - o, "%u", c->rank_node[r]);
}

/* ---- the reference arithmetic ---------------------------------------------------------- */

/* out = a op b, rounded to the dtype (one hop). */
static void op2(uint8_t dt, uint8_t op, const uint8_t *a, const uint8_t *b, uint8_t *out)
{
    size_t es = tl_esize(dt);
    if (!is_float(dt)) {
        uint64_t x = 0, y = 0, z;
        memcpy(&x, a, es);
        memcpy(&y, b, es);
        bool sgn = dt == NEXAR_I8 || dt == NEXAR_I32 || dt == NEXAR_I64;
        int sh = 64 - 8 * (int)es;
        int64_t sx = (int64_t)(x << sh) >> sh, sy = (int64_t)(y << sh) >> sh;
        bool lt = sgn ? sx < sy : x < y;
        switch (op) {
        case NEXAR_SUM: z = x + y; break;
        case NEXAR_PROD: z = x * y; break;
        case NEXAR_MIN: z = lt ? x : y; break;
        default: z = lt ? y : x; break;
        }
        memcpy(out, &z, es);
        return;
    }
    double x = get_float(dt, a), y = get_float(dt, b), z;
    if (op == NEXAR_MIN || op == NEXAR_MAX) {
        bool pick_x = op == NEXAR_MIN ? (x < y || (x == y && signbit(x)))
                                      : (x > y || (x == y && !signbit(x)));
        memcpy(out, pick_x ? a : b, es);
        return;
    }
    if (dt == NEXAR_F64) {
        z = op == NEXAR_SUM ? x + y : x * y;
    } else { /* f32, and f16/bf16 widened to f32: the op in f32, then one rounding */
        float fz = op == NEXAR_SUM ? (float)x + (float)y : (float)x * (float)y;
        z = fz;
    }
    put_float(dt, out, z);
}

/* Left fold of vals[order[0..k)]. */
static void fold(uint8_t dt, uint8_t op, uint8_t *const *vals, const uint32_t *order,
                 uint32_t k, uint8_t *out)
{
    memcpy(out, vals[order[0]], tl_esize(dt));
    for (uint32_t i = 1; i < k; i++)
        op2(dt, op, out, vals[order[i]], out);
}

/* rd/hd: balanced binary tree over the virtual ranks (folded pairs first). */
static void tree_rd(uint8_t dt, uint8_t op, uint8_t *const *vals, uint32_t N, uint32_t lo,
                    uint32_t len, uint8_t *out)
{
    if (len == 1) {
        uint32_t p2 = 1;
        while (p2 * 2 <= N)
            p2 *= 2;
        uint32_t rem = N - p2;
        if (lo < rem)
            op2(dt, op, vals[2 * lo], vals[2 * lo + 1], out);
        else
            memcpy(out, vals[lo + rem], tl_esize(dt));
        return;
    }
    uint8_t l[8], h[8];
    tree_rd(dt, op, vals, N, lo, len / 2, l);
    tree_rd(dt, op, vals, N, lo + len / 2, len / 2, h);
    op2(dt, op, l, h, out);
}

/* tree reduce: binomial over positions v .. v + size - 1 (vals by position). */
static void tree_binomial(uint8_t dt, uint8_t op, uint8_t *const *vals, uint32_t N,
                          uint32_t v, uint32_t size, uint8_t *out)
{
    if (size == 1 || v + size / 2 >= N) {
        if (size == 1)
            memcpy(out, vals[v], tl_esize(dt));
        else
            tree_binomial(dt, op, vals, N, v, size / 2, out);
        return;
    }
    uint8_t l[8], h[8];
    tree_binomial(dt, op, vals, N, v, size / 2, l);
    tree_binomial(dt, op, vals, N, v + size / 2, size / 2, h);
    op2(dt, op, l, h, out);
}

/* The expected reduction of vals[node] (one element each) in the algorithm's order;
 * e: the element's index within its block, for the ring's segment. */
static void reduce_ref(const struct ta_case *c, uint8_t *const *vals, uint64_t e,
                       uint64_t pe, uint32_t group, uint8_t *out)
{
    uint32_t N = c->nnodes, order[TA_MAXN] = {0}; /* -O3 cannot see N >= 1 */
    uint8_t algo = c->algo;
    if (c->kind == NX_K_REDUCE_SCATTER && algo == NX_ALGO_RING) { /* g's chain: g+1 .. g */
        for (uint32_t i = 0; i < N; i++)
            order[i] = (group + 1 + i) % N;
        return fold(c->dtype, c->redop, vals, order, N, out);
    }
    if (c->kind == NX_K_REDUCE) {
        uint32_t rn = root_node(c);
        uint8_t *pos[TA_MAXN];
        for (uint32_t v = 0; v < N; v++)
            pos[v] = vals[(v + rn) % N];
        if (algo == NX_ALGO_TREE) {
            uint32_t size = 1;
            while (size < N)
                size *= 2;
            return tree_binomial(c->dtype, c->redop, pos, N, 0, size, out);
        }
        for (uint32_t i = 0; i < N; i++) /* chain: x_0 op (x_1 op (...)) */
            order[i] = N - 1 - i;
        return fold(c->dtype, c->redop, pos, order, N, out);
    }
    if (algo == NX_ALGO_RING) {
        uint64_t p0 = e / pe * pe, n = c->count - p0 < pe ? c->count - p0 : pe, i = e - p0;
        uint32_t k = 0;
        while (k + 1 < N && (uint64_t)(((unsigned __int128)n * (k + 1)) / N) <= i)
            k++;
        for (uint32_t j = 0; j < N; j++)
            order[j] = (k + j) % N;
        return fold(c->dtype, c->redop, vals, order, N, out);
    }
    uint32_t p2 = 1;
    while (p2 * 2 <= N)
        p2 *= 2;
    tree_rd(c->dtype, c->redop, vals, N, 0, p2, out);
}

/* ---- the check ------------------------------------------------------------------------- */

static int bad(char *why, size_t len, const struct ta_case *c, uint32_t node, uint64_t elem,
               const void *want, const void *got, const char *what)
{
    char w[64], g[64];
    tl_format_elem(c->dtype, want, 0, w, sizeof(w));
    tl_format_elem(c->dtype, got, 0, g, sizeof(g));
    snprintf(why, len, "node %u %s element %" PRIu64 ": want %s got %s", node, what, elem, w,
             g);
    return -1;
}

static double unit_roundoff(uint8_t dt)
{
    return dt == NEXAR_F64 ? 0x1p-53 : dt == NEXAR_F32 ? 0x1p-24
           : dt == NEXAR_F16 ? 0x1p-11 : 0x1p-8;
}

/* scan/exscan: rank r's expected prefix over the ranks' inputs, in rank order.  Random
 * float sums/products: within (P + 2) u of a double-precision prefix (relative to the sum
 * of magnitudes, or to the product); everything else bit for bit. */
static int scan_check(const struct ta_case *c, const struct ta_bufs *b, const struct geo *g,
                      char *why, size_t len)
{
    size_t es = tl_esize(c->dtype);
    bool ex = c->kind == NX_K_EXSCAN, prod = c->redop == NEXAR_PROD;
    bool tol = is_float(c->dtype) && c->vals != TA_EXACT && (c->redop == NEXAR_SUM || prod);
    double bound = (c->nranks + 2) * unit_roundoff(c->dtype) * 2;
    for (uint64_t e = 0; e < c->count; e++) {
        uint8_t acc[8], incl[8], want[8];
        double dacc = prod ? 1 : 0, mag = 0;
        for (uint32_t r = 0; r < c->nranks; r++) {
            uint32_t n = c->rank_node[r];
            uint64_t at = ((uint64_t)g->lidx[r] * c->count + e) * es;
            const uint8_t *x = b->in0[n] + at;
            const uint8_t *got = (b->out[n] ? b->out[n] : b->in[n]) + at;
            double xv = is_float(c->dtype) ? get_float(c->dtype, x) : 0;
            double dincl = prod ? dacc * xv : dacc + xv;
            double mincl = prod ? fabs(dincl) : mag + fabs(xv);
            if (r == 0)
                memcpy(incl, x, es);
            else
                op2(c->dtype, c->redop, acc, x, incl);
            if (ex && r == 0)
                tl_fill_identity(c->dtype, c->redop, want, 1);
            else
                memcpy(want, ex ? acc : incl, es);
            if (tol && !(ex && r == 0)) {
                double gv = get_float(c->dtype, got), w = ex ? dacc : dincl;
                if (fabs(gv - w) > bound * (ex ? mag : mincl) + 1e-300)
                    return bad(why, len, c, n, at / es, want, got, "scan (tolerance)");
            } else if (memcmp(want, got, es) != 0) {
                return bad(why, len, c, n, at / es, want, got, ex ? "exscan" : "scan");
            }
            memcpy(acc, incl, es);
            dacc = dincl;
            mag = mincl;
        }
    }
    return 0;
}

int ta_check(const struct ta_case *c, const struct ta_bufs *b, uint64_t pe, char *why,
             size_t len)
{
    uint32_t N = c->nnodes, P = c->nranks, rn = root_node(c);
    size_t es = tl_esize(c->dtype);
    uint64_t cnt = c->count;
    uint8_t want[8], *vals[TA_MAXN];
    const uint8_t *outs[TA_MAXN];
    struct geo g;
    geo_of(c, &g);
    for (uint32_t n = 0; n < N; n++)
        outs[n] = b->out[n] ? b->out[n] : b->in[n];

    switch (c->kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
    case NX_K_REDUCE:
        for (uint64_t e = 0; e < cnt; e++) {
            for (uint32_t n = 0; n < N; n++)
                vals[n] = b->in0[n] + e * es;
            if (c->vals == TA_NAN) { /* the same bits everywhere */
                for (uint32_t n = 1; n < N; n++)
                    if (memcmp(outs[0] + e * es, outs[n] + e * es, es) != 0)
                        return bad(why, len, c, n, e, outs[0] + e * es, outs[n] + e * es,
                                   "differs from node 0 at");
                continue;
            }
            reduce_ref(c, vals, e, pe, 0, want);
            for (uint32_t n = 0; n < N; n++) {
                if (c->kind == NX_K_REDUCE && n != rn)
                    continue;
                if (memcmp(want, outs[n] + e * es, es) != 0)
                    return bad(why, len, c, n, e, want, outs[n] + e * es, "reduction");
            }
        }
        return 0;
    case NX_K_REDUCE_SCATTER:
        for (uint32_t n = 0; n < N; n++)
            for (uint32_t l = 0; l < g.local[n]; l++) {
                uint32_t r = g.at[n][l];
                for (uint64_t e = 0; e < cnt; e++) {
                    for (uint32_t m = 0; m < N; m++)
                        vals[m] = b->in0[m] + ((uint64_t)r * cnt + e) * es;
                    reduce_ref(c, vals, e, pe, n, want);
                    if (memcmp(want, outs[n] + (l * cnt + e) * es, es) != 0)
                        return bad(why, len, c, n, r * cnt + e, want,
                                   outs[n] + (l * cnt + e) * es, "reduce_scatter block/elem");
                }
            }
        return 0;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        return scan_check(c, b, &g, why, len);
    case NX_K_BARRIER:
        return 0;
    default:
        break;
    }
    /* Data movement: every expected byte of every node that has an output. */
    for (uint32_t n = 0; n < N; n++) {
        uint32_t L = g.local[n];
        for (uint64_t e = 0; e < cnt; e++) {
            const uint8_t *src = NULL, *got;
            uint64_t idx;
            switch (c->kind) {
            case NX_K_BROADCAST:
                if (n == rn && !b->out[n])
                    continue;
                src = b->in0[rn] + e * es;
                idx = e;
                break;
            case NX_K_ALL_GATHER:
            case NX_K_GATHER:
                if (c->kind == NX_K_GATHER && n != rn)
                    continue;
                for (uint32_t r = 0; r < P; r++) {
                    src = b->in0[c->rank_node[r]] + ((uint64_t)g.lidx[r] * cnt + e) * es;
                    got = outs[n] + ((uint64_t)r * cnt + e) * es;
                    if (memcmp(src, got, es) != 0)
                        return bad(why, len, c, n, r * cnt + e, src, got, "gathered block/elem");
                }
                continue;
            case NX_K_SCATTER:
                for (uint32_t l = 0; l < L; l++) {
                    src = b->in0[rn] + ((uint64_t)g.at[n][l] * cnt + e) * es;
                    got = outs[n] + ((uint64_t)l * cnt + e) * es;
                    if (memcmp(src, got, es) != 0)
                        return bad(why, len, c, n, l * cnt + e, src, got, "scattered block/elem");
                }
                continue;
            default: /* all_to_all */
                for (uint32_t l = 0; l < L; l++)
                    for (uint32_t j = 0; j < P; j++) {
                        uint32_t me_r = g.at[n][l], sn = c->rank_node[j];
                        src = b->in0[sn] + (((uint64_t)g.lidx[j] * P + me_r) * cnt + e) * es;
                        got = outs[n] + (((uint64_t)l * P + j) * cnt + e) * es;
                        if (memcmp(src, got, es) != 0)
                            return bad(why, len, c, n, ((uint64_t)l * P + j) * cnt + e, src,
                                       got, "all_to_all block/elem");
                    }
                continue;
            }
            got = outs[n] + idx * es;
            if (memcmp(src, got, es) != 0)
                return bad(why, len, c, n, idx, src, got, "element");
        }
    }
    return 0;
}
