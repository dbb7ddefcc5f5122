/*
 * collref.c - run one collective case and check it against the reference
 * (see collref.h).
 */
#include "collref.h"

#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "refnum.h"

static const char *const coll_names[] = {
    "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "gather",
    "scatter", "all_to_all", "scan", "exscan", "all_reduce_bucketed", "barrier"};

const char *tl_coll_name(int coll)
{
    return coll >= 0 && coll < TL_COLL_COUNT ? coll_names[coll] : "?";
}

const char *tl_mode_name(int mode)
{
    static const char *const n[] = {"heap", "arena", "mixed", "half"};
    if (mode == TL_DEVICE)
        return "device";
    return mode >= 0 && mode < TL_MODE_COUNT ? n[mode] : "?";
}

int tl_coll_has_op(int coll)
{
    return coll == TL_ALL_REDUCE || coll == TL_REDUCE || coll == TL_REDUCE_SCATTER ||
           coll == TL_SCAN || coll == TL_EXSCAN || coll == TL_BUCKETED;
}

int tl_coll_has_root(int coll)
{
    return coll == TL_BROADCAST || coll == TL_REDUCE || coll == TL_GATHER ||
           coll == TL_SCATTER;
}

void tl_case_str(const struct tl_case *c, char *out, size_t len)
{
    char root[16] = "-";
    if (tl_coll_has_root(c->coll))
        snprintf(root, sizeof(root), "%d", c->root);
    static const char *const calls[] = {"blocking", "iwait", "itest"};
    snprintf(out, len, "%s %s %s count=%zu root=%s mode=%s call=%s", tl_coll_name(c->coll),
             tl_dtype_name(c->dtype), tl_coll_has_op(c->coll) ? tl_op_name(c->op) : "-",
             c->count, root, tl_mode_name(c->mode), calls[c->call % 3]);
}

/* ---- buffers -------------------------------------------------------------------- */

enum { BUF_HEAP, BUF_ARENA, BUF_DEVICE };

struct buf {
    void *base; /* what to free */
    void *p;    /* what the op gets */
    int kind;
};

static struct tl_devmem devmem;

void tl_set_devmem(const struct tl_devmem *m)
{
    devmem = *m;
}

static int buf_get(struct buf *b, size_t bytes, int kind, int interior, size_t es,
                   const char *ctx)
{
    memset(b, 0, sizeof(*b));
    size_t pad = interior ? 3 * es : 0;
    size_t want = bytes + pad ? bytes + pad : 64;
    if (kind == BUF_DEVICE) {
        if (!devmem.alloc || !(b->base = devmem.alloc(want))) {
            tl_log("FAIL %s: device memory of %zu bytes: %s", ctx, want,
                   devmem.alloc ? "allocation failed" : "no allocator (tl_set_devmem)");
            return -1;
        }
        b->kind = BUF_DEVICE;
    } else if (kind == BUF_ARENA) {
        nexar_status_t st = nexar_alloc(want, &b->base);
        if (st != NEXAR_OK) {
            tl_log("FAIL %s: nexar_alloc(%zu): %s: %s", ctx, want, tl_status_name((int)st),
                   nexar_last_error());
            return -1;
        }
        if ((uintptr_t)b->base % 64 != 0) {
            tl_log("FAIL %s: nexar_alloc returned %p, not 64-byte aligned", ctx, b->base);
            return -1;
        }
        b->kind = BUF_ARENA;
    } else {
        b->base = malloc(want);
        if (!b->base) {
            tl_log("FAIL %s: malloc(%zu)", ctx, want);
            return -1;
        }
    }
    b->p = (char *)b->base + pad;
    memset(b->base, 0xa5, want);
    return 0;
}

static void buf_put(struct buf *b)
{
    if (b->kind == BUF_ARENA)
        nexar_free(b->base);
    else if (b->kind == BUF_DEVICE)
        devmem.free(b->base);
    else
        free(b->base);
    b->base = b->p = NULL;
}

/* ---- the op ---------------------------------------------------------------------- */

static nexar_status_t finish(nexar_request_t *req, nexar_status_t st, int call)
{
    if (st != NEXAR_OK)
        return st;
    if (call == TL_WAIT)
        return nexar_wait(req);
    for (long spins = 0;; spins++) {
        int done = 0;
        st = nexar_test(req, &done);
        if (done || st != NEXAR_OK)
            return st;
        if (spins < 100)
            sched_yield();
        else
            usleep(100); /* ranks share few cores with the daemon: do not starve it */
    }
}

/* keep: post the nonblocking form and hand its request over, unfinished. */
#define CALL(blk, nb)                                                                   \
    do {                                                                                \
        if (c->call == TL_BLOCKING && !keep)                                            \
            st = blk;                                                                   \
        else {                                                                          \
            nexar_request_t *req = NULL;                                                \
            nexar_status_t st0 = nb;                                                    \
            if (keep) {                                                                 \
                *keep = req;                                                            \
                st = st0;                                                               \
            } else                                                                      \
                st = finish(req, st0, c->call);                                         \
        }                                                                               \
    } while (0)

static nexar_status_t do_op(nexar_comm_t *comm, const struct tl_case *c, void *send,
                            void *recv, const nexar_iov_t *iov, size_t niov,
                            nexar_request_t **keep)
{
    nexar_status_t st;
    size_t n = c->count;
    nexar_dtype_t dt = (nexar_dtype_t)c->dtype;
    nexar_op_t op = (nexar_op_t)c->op;
    switch (c->coll) {
    case TL_ALL_REDUCE:
        CALL(nexar_all_reduce(comm, send, n, dt, op),
             nexar_iall_reduce(comm, send, n, dt, op, &req));
        break;
    case TL_BROADCAST:
        CALL(nexar_broadcast(comm, send, n, dt, c->root),
             nexar_ibroadcast(comm, send, n, dt, c->root, &req));
        break;
    case TL_REDUCE:
        CALL(nexar_reduce(comm, send, recv, n, dt, op, c->root),
             nexar_ireduce(comm, send, recv, n, dt, op, c->root, &req));
        break;
    case TL_ALL_GATHER:
        CALL(nexar_all_gather(comm, send, recv, n, dt),
             nexar_iall_gather(comm, send, recv, n, dt, &req));
        break;
    case TL_REDUCE_SCATTER:
        CALL(nexar_reduce_scatter(comm, send, recv, n, dt, op),
             nexar_ireduce_scatter(comm, send, recv, n, dt, op, &req));
        break;
    case TL_GATHER:
        CALL(nexar_gather(comm, send, recv, n, dt, c->root),
             nexar_igather(comm, send, recv, n, dt, c->root, &req));
        break;
    case TL_SCATTER:
        CALL(nexar_scatter(comm, send, recv, n, dt, c->root),
             nexar_iscatter(comm, send, recv, n, dt, c->root, &req));
        break;
    case TL_ALL_TO_ALL:
        CALL(nexar_all_to_all(comm, send, recv, n, dt),
             nexar_iall_to_all(comm, send, recv, n, dt, &req));
        break;
    case TL_SCAN:
        CALL(nexar_scan(comm, send, n, dt, op), nexar_iscan(comm, send, n, dt, op, &req));
        break;
    case TL_EXSCAN:
        CALL(nexar_exscan(comm, send, n, dt, op), nexar_iexscan(comm, send, n, dt, op, &req));
        break;
    case TL_BUCKETED:
        CALL(nexar_all_reduce_bucketed(comm, iov, niov, dt, op),
             nexar_iall_reduce_bucketed(comm, iov, niov, dt, op, &req));
        break;
    default:
        CALL(nexar_barrier(comm), nexar_ibarrier(comm, &req));
        break;
    }
    return st;
}

/* ---- shapes --------------------------------------------------------------------- */

static size_t in_blocks(int coll, int size)
{
    return coll == TL_REDUCE_SCATTER || coll == TL_SCATTER || coll == TL_ALL_TO_ALL
               ? (size_t)size : 1;
}

static size_t out_blocks(int coll, int size)
{
    return coll == TL_ALL_GATHER || coll == TL_GATHER || coll == TL_ALL_TO_ALL
               ? (size_t)size : 1;
}

static int in_place(int coll)
{
    return coll == TL_ALL_REDUCE || coll == TL_BROADCAST || coll == TL_SCAN ||
           coll == TL_EXSCAN || coll == TL_BUCKETED;
}

/* Splits count into the bucketed iov pieces: {n/2, 0, n/4, rest} (fewer when small). */
static size_t bucket_pieces(size_t n, size_t pc[4])
{
    pc[0] = n / 2;
    pc[1] = 0;
    pc[2] = n / 4;
    pc[3] = n - pc[0] - pc[2];
    return 4;
}

/* Expected output of rank me; returns its element count, or (size_t)-1 when the
 * output is not significant on this rank. */
static size_t expected(const struct tl_case *c, int me, int size, void *const *in,
                       void *exp)
{
    size_t n = c->count, es = tl_esize(c->dtype);
    const void **blk = malloc(sizeof(void *) * (size_t)size);
    size_t rv = n;
    switch (c->coll) {
    case TL_ALL_REDUCE:
    case TL_BUCKETED:
        tl_reduce(c->dtype, c->op, exp, (const void *const *)in, size, n);
        break;
    case TL_BROADCAST:
        memcpy(exp, in[c->root], n * es);
        break;
    case TL_REDUCE:
        if (me != c->root)
            rv = (size_t)-1;
        else
            tl_reduce(c->dtype, c->op, exp, (const void *const *)in, size, n);
        break;
    case TL_GATHER:
    case TL_ALL_GATHER:
        if (c->coll == TL_GATHER && me != c->root) {
            rv = (size_t)-1;
            break;
        }
        for (int r = 0; r < size; r++)
            memcpy((char *)exp + (size_t)r * n * es, in[r], n * es);
        rv = n * (size_t)size;
        break;
    case TL_REDUCE_SCATTER:
        for (int r = 0; r < size; r++)
            blk[r] = (const char *)in[r] + (size_t)me * n * es;
        tl_reduce(c->dtype, c->op, exp, blk, size, n);
        break;
    case TL_SCATTER:
        memcpy(exp, (const char *)in[c->root] + (size_t)me * n * es, n * es);
        break;
    case TL_ALL_TO_ALL:
        for (int r = 0; r < size; r++)
            memcpy((char *)exp + (size_t)r * n * es,
                   (const char *)in[r] + (size_t)me * n * es, n * es);
        rv = n * (size_t)size;
        break;
    case TL_SCAN:
        tl_reduce(c->dtype, c->op, exp, (const void *const *)in, me + 1, n);
        break;
    case TL_EXSCAN:
        if (me == 0)
            tl_fill_identity(c->dtype, c->op, exp, n);
        else
            tl_reduce(c->dtype, c->op, exp, (const void *const *)in, me, n);
        break;
    default:
        rv = 0;
    }
    free(blk);
    return rv;
}

/* ---- one case ------------------------------------------------------------------------ */

struct tl_run {
    struct tl_case c;
    int me, size;
    size_t es, in_n, out_n;
    struct buf sb, rb, pieces[4];
    nexar_iov_t iov[4];
    size_t pc[4], npieces;
    nexar_request_t *req;
    char ctx[320];
};

static void run_free(struct tl_run *r)
{
    for (size_t k = 0; k < 4; k++)
        if (r->pieces[k].base)
            buf_put(&r->pieces[k]);
    if (r->sb.base)
        buf_put(&r->sb);
    if (r->rb.base)
        buf_put(&r->rb);
    free(r);
}

/* The case's buffers, this rank's input in them.  NULL after printing why. */
static struct tl_run *run_setup(nexar_comm_t *comm, const struct tl_case *c, const char *tag)
{
    struct tl_run *r = calloc(1, sizeof(*r));
    if (!r) {
        tl_log("FAIL %s: out of memory", tag ? tag : "case");
        return NULL;
    }
    r->c = *c;
    r->me = nexar_comm_rank(comm);
    r->size = nexar_comm_size(comm);
    r->es = tl_esize(c->dtype);
    char desc[200];
    tl_case_str(c, desc, sizeof(desc));
    snprintf(r->ctx, sizeof(r->ctx), "%s%srank %d/%d %s", tag ? tag : "", tag ? ": " : "",
             r->me, r->size, desc);
    if (c->coll == TL_BARRIER)
        return r;

    int me = r->me;
    size_t es = r->es, n = c->count;
    int pop = c->full ? TL_PAT_FULL : tl_coll_has_op(c->coll) ? c->op : -1;
    r->in_n = n * in_blocks(c->coll, r->size);
    r->out_n = n * out_blocks(c->coll, r->size);

    int arena_in = BUF_HEAP, arena_out = BUF_HEAP; /* BUF_* */
    switch (c->mode) {
    case TL_ARENA: arena_in = arena_out = BUF_ARENA; break;
    case TL_MIXED: arena_in = arena_out = me % 2 == 0 ? BUF_ARENA : BUF_HEAP; break;
    case TL_HALF:
        if (in_place(c->coll))
            arena_in = arena_out = me % 2 == 0 ? BUF_ARENA : BUF_HEAP;
        else
            arena_in = BUF_ARENA;
        break;
    case TL_DEVICE: arena_in = arena_out = BUF_DEVICE; break;
    default: break;
    }
    int interior = c->mode == TL_ARENA && me % 2 == 1;

    if (c->coll == TL_BUCKETED) {
        void *mine = malloc(r->in_n * es + 64);
        if (!mine) {
            tl_log("FAIL %s: malloc(%zu)", r->ctx, r->in_n * es + 64);
            goto fail;
        }
        tl_pattern(c->dtype, pop, c->seed, me, 0, mine, r->in_n);
        r->npieces = bucket_pieces(n, r->pc);
        size_t off = 0;
        for (size_t k = 0; k < r->npieces; k++) {
            /* half mode: the iovs alternate between arena and malloc in one call */
            int ar = c->mode == TL_HALF ? (k % 2 == 0 ? BUF_ARENA : BUF_HEAP) : arena_in;
            if (buf_get(&r->pieces[k], r->pc[k] * es, ar, interior, es, r->ctx)) {
                free(mine);
                goto fail;
            }
            memcpy(r->pieces[k].p, (char *)mine + off * es, r->pc[k] * es);
            r->iov[k].ptr = r->pieces[k].p;
            r->iov[k].count = r->pc[k];
            off += r->pc[k];
        }
        free(mine);
    } else {
        if (buf_get(&r->sb, r->in_n * es, arena_in, interior, es, r->ctx))
            goto fail;
        if (c->coll == TL_BROADCAST && me != c->root)
            tl_pattern(c->dtype, -1, c->seed ^ 0x5555u, me, 0, r->sb.p, r->in_n);
        else
            tl_pattern(c->dtype, pop, c->seed, me, 0, r->sb.p, r->in_n);
        if (!in_place(c->coll) &&
            buf_get(&r->rb, r->out_n * es, arena_out, interior, es, r->ctx))
            goto fail;
    }
    return r;
fail:
    run_free(r);
    return NULL;
}

static nexar_status_t run_op(nexar_comm_t *comm, struct tl_run *r, nexar_request_t **keep)
{
    return do_op(comm, &r->c, r->sb.p, in_place(r->c.coll) ? r->sb.p : r->rb.p, r->iov,
                 r->npieces, keep);
}

/* Judges the status the op ended with and, when OK, the output; frees r. */
static int run_check(struct tl_run *r, nexar_status_t st)
{
    const struct tl_case *c = &r->c;
    int rv = TL_CASE_SETUP;
    if (tl_check_status(r->ctx, NEXAR_OK, st)) {
        run_free(r);
        return TL_CASE_STATUS;
    }
    if (c->coll == TL_BARRIER) {
        run_free(r);
        return TL_CASE_OK;
    }
    size_t es = r->es;
    int size = r->size;
    int pop = c->full ? TL_PAT_FULL : tl_coll_has_op(c->coll) ? c->op : -1;
    /* every rank's input, as this rank can compute it */
    void **in = calloc((size_t)size, sizeof(void *));
    void *exp = malloc(r->out_n * es + 64);
    void *got = malloc(r->out_n * es + 64);
    if (!in || !exp || !got) {
        tl_log("FAIL %s: out of memory for the reference", r->ctx);
        goto out;
    }
    for (int k = 0; k < size; k++) {
        if (!(in[k] = malloc(r->in_n * es + 64))) {
            tl_log("FAIL %s: out of memory for the reference", r->ctx);
            goto out;
        }
        tl_pattern(c->dtype, pop, c->seed, k, 0, in[k], r->in_n);
    }
    size_t want = expected(c, r->me, size, in, exp);
    if (want == (size_t)-1) {
        rv = TL_CASE_OK;
        goto out;
    }
    if (c->coll == TL_BUCKETED) {
        size_t off = 0;
        for (size_t k = 0; k < r->npieces; k++) {
            memcpy((char *)got + off * es, r->pieces[k].p, r->pc[k] * es);
            off += r->pc[k];
        }
    } else {
        memcpy(got, in_place(c->coll) ? r->sb.p : r->rb.p, want * es);
    }
    rv = tl_check_elems(r->ctx, c->dtype, exp, got, want) ? TL_CASE_WRONG : TL_CASE_OK;
out:
    if (in)
        for (int k = 0; k < size; k++)
            free(in[k]);
    free(in);
    free(exp);
    free(got);
    run_free(r);
    return rv;
}

int tl_run_case(nexar_comm_t *comm, const struct tl_case *c)
{
    struct tl_run *r = run_setup(comm, c, NULL);
    if (!r)
        return TL_CASE_SETUP;
    return run_check(r, run_op(comm, r, NULL));
}

int tl_case_post(nexar_comm_t *comm, const struct tl_case *c, const char *tag,
                 struct tl_run **out)
{
    *out = NULL;
    struct tl_run *r = run_setup(comm, c, tag);
    if (!r)
        return TL_CASE_SETUP;
    nexar_status_t st = run_op(comm, r, &r->req);
    if (st != NEXAR_OK) {
        tl_check_status(r->ctx, NEXAR_OK, st);
        run_free(r);
        return TL_CASE_STATUS;
    }
    *out = r;
    return TL_CASE_OK;
}

nexar_request_t *tl_run_request(const struct tl_run *r)
{
    return r->req;
}

const char *tl_run_ctx(const struct tl_run *r)
{
    return r->ctx;
}

int tl_case_check(struct tl_run *r, nexar_status_t st)
{
    return run_check(r, st);
}


/* ---- barrier order ------------------------------------------------------------------- */

int tl_barrier_order(nexar_comm_t *w, int rounds)
{
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    double *all_in = malloc(sizeof(double) * (size_t)size);
    if (!all_in)
        return -1;
    for (int round = 0; round < rounds && !bad; round++) {
        usleep((useconds_t)(((me + round) % size) * 40000));
        double t_in = tl_now();
        nexar_status_t st = nexar_barrier(w);
        double t_out = tl_now();
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "rank %d/%d barrier round %d", me, size, round);
        if (tl_check_status(ctx, NEXAR_OK, st)) {
            bad = 1;
            break;
        }
        st = nexar_all_gather(w, &t_in, all_in, 1, NEXAR_F64);
        snprintf(ctx, sizeof(ctx), "rank %d/%d all_gather of barrier entry times", me, size);
        if (tl_check_status(ctx, NEXAR_OK, st)) {
            bad = 1;
            break;
        }
        for (int r = 0; r < size; r++)
            if (all_in[r] > t_out) {
                tl_log("FAIL barrier round %d: rank %d left at %.6f before rank %d entered "
                       "at %.6f", round, me, t_out, r, all_in[r]);
                bad = 1;
            }
    }
    free(all_in);
    return bad ? -1 : 0;
}
