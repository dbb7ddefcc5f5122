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

#define CALL(blk, nb)                                                                   \
    do {                                                                                \
        if (c->call == TL_BLOCKING)                                                     \
            st = blk;                                                                   \
        else {                                                                          \
            nexar_request_t *req = NULL;                                                \
            nexar_status_t st0 = nb;                                                    \
            st = finish(req, st0, c->call);                                             \
        }                                                                               \
    } while (0)

static nexar_status_t do_op(nexar_comm_t *comm, const struct tl_case *c, void *send,
                            void *recv, const nexar_iov_t *iov, size_t niov)
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

int tl_run_case(nexar_comm_t *comm, const struct tl_case *c)
{
    int me = nexar_comm_rank(comm), size = nexar_comm_size(comm);
    size_t es = tl_esize(c->dtype), n = c->count;
    char desc[200], ctx[260];
    tl_case_str(c, desc, sizeof(desc));
    snprintf(ctx, sizeof(ctx), "rank %d/%d %s", me, size, desc);
    if (c->coll == TL_BARRIER) {
        nexar_status_t st = do_op(comm, c, NULL, NULL, NULL, 0);
        return tl_check_status(ctx, NEXAR_OK, st) ? TL_CASE_STATUS : TL_CASE_OK;
    }

    int pop = c->full ? TL_PAT_FULL : tl_coll_has_op(c->coll) ? c->op : -1;
    size_t in_n = n * in_blocks(c->coll, size), out_n = n * out_blocks(c->coll, size);
    int rv = TL_CASE_SETUP;

    /* every rank's input, as this rank can compute it */
    void **in = calloc((size_t)size, sizeof(void *));
    void *exp = malloc(out_n * es + 64);
    void *got = malloc(out_n * es + 64);
    struct buf sb = {0}, rb = {0}, pieces[4] = {{0}};
    nexar_iov_t iov[4];
    size_t pc[4] = {0}, npieces = 0;
    for (int r = 0; r < size; r++) {
        in[r] = malloc(in_n * es + 64);
        tl_pattern(c->dtype, pop, c->seed, r, 0, in[r], in_n);
    }

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
        npieces = bucket_pieces(n, pc);
        size_t off = 0;
        for (size_t k = 0; k < npieces; k++) {
            /* half mode: the iovs alternate between arena and malloc in one call */
            int ar = c->mode == TL_HALF ? (k % 2 == 0 ? BUF_ARENA : BUF_HEAP) : arena_in;
            if (buf_get(&pieces[k], pc[k] * es, ar, interior, es, ctx))
                goto out;
            memcpy(pieces[k].p, (char *)in[me] + off * es, pc[k] * es);
            iov[k].ptr = pieces[k].p;
            iov[k].count = pc[k];
            off += pc[k];
        }
    } else {
        if (buf_get(&sb, in_n * es, arena_in, interior, es, ctx))
            goto out;
        if (c->coll == TL_BROADCAST && me != c->root)
            tl_pattern(c->dtype, -1, c->seed ^ 0x5555u, me, 0, sb.p, in_n);
        else
            memcpy(sb.p, in[me], in_n * es);
        if (!in_place(c->coll) && buf_get(&rb, out_n * es, arena_out, interior, es, ctx))
            goto out;
    }

    nexar_status_t st = do_op(comm, c, sb.p, in_place(c->coll) ? sb.p : rb.p, iov, npieces);
    if (tl_check_status(ctx, NEXAR_OK, st)) {
        rv = TL_CASE_STATUS;
        goto out;
    }

    size_t want = expected(c, me, size, in, exp);
    if (want == (size_t)-1) {
        rv = TL_CASE_OK;
        goto out;
    }
    if (c->coll == TL_BUCKETED) {
        size_t off = 0;
        for (size_t k = 0; k < npieces; k++) {
            memcpy((char *)got + off * es, pieces[k].p, pc[k] * es);
            off += pc[k];
        }
    } else {
        memcpy(got, in_place(c->coll) ? sb.p : rb.p, want * es);
    }
    rv = tl_check_elems(ctx, c->dtype, exp, got, want) ? TL_CASE_WRONG : TL_CASE_OK;

out:
    for (size_t k = 0; k < 4; k++)
        if (pieces[k].base)
            buf_put(&pieces[k]);
    if (sb.base)
        buf_put(&sb);
    if (rb.base)
        buf_put(&rb);
    for (int r = 0; r < size; r++)
        free(in[r]);
    free(in);
    free(exp);
    free(got);
    return rv;
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
