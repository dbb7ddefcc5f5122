/*
 * coll.c - the public collective and point-to-point entry points.
 *
 * Each checks its arguments locally (NEXAR_ERR_INVALID: nothing is submitted, the
 * sequence numbers do not move and the communicator stays usable), refuses at once
 * on a failed communicator (its status and text, mirroring the daemon), then starts
 * a request.  The blocking forms wait for it; the nexar_iX forms hand it out.
 */
#include <stdio.h>

#include "shim.h"

/* Which checks an entry point needs. */
enum {
    A_REDOP = 1, /* op is significant */
    A_ROOT = 2,  /* peer is a root */
    A_PEER = 4,  /* peer is a destination / source */
};

static nexar_status_t bad(const char *fn, const nexar_comm_t *c, const char *fmt,
                          const char *what, long long v)
{
    char why[160];
    snprintf(why, sizeof(why), fmt, what, v);
    return nx_fail(NEXAR_ERR_INVALID, "%s: %s (rank %d of %d, comm %u)", fn, why, c->rank,
                   c->size, c->id);
}

/* The in-place form of a two-buffer call, for its error text; NULL where its buffers may
 * only be the same (a reduce) or never meet (all_to_all). */
static const char *inplace_form(uint8_t kind)
{
    switch (kind) {
    case NX_K_ALL_GATHER: return "send = recv + rank * count elements";
    case NX_K_GATHER: return "at the root, send = recv + root * count elements";
    case NX_K_REDUCE_SCATTER: return "recv = send + rank * count elements";
    case NX_K_SCATTER: return "at the root, recv = send + root * count elements";
    case NX_K_REDUCE: return "send = recv";
    default: return NULL;
    }
}

/* Whether an op's input and output may share bytes: never, but for the in-place forms
 * MPI knows (the same buffer for one-buffer calls and a reduce; the rank's own block of
 * the larger buffer for all_gather, gather, reduce_scatter and scatter).  Any other
 * overlap is refused: a single-copy op's ranks read each other's inputs while they write
 * their outputs (shm-protocol.md), so its result would depend on timing. */
static bool overlap_ok(const struct nx_call *op, const struct nx_shape *sh, uint64_t blk,
                       uint64_t rank)
{
    uintptr_t in = (uintptr_t)op->in, out = (uintptr_t)op->out;
    uint64_t ib = sh->in_mul * blk, ob = sh->out_mul * blk;
    if (!sh->in_mul || !sh->out_mul || in + ib <= out || out + ob <= in)
        return true;
    switch (op->kind) {
    case NX_K_ALL_GATHER:
    case NX_K_GATHER: /* (only the root has both) */
        return in == out + rank * blk;
    case NX_K_REDUCE_SCATTER:
    case NX_K_SCATTER:
        return out == in + rank * blk;
    case NX_K_ALL_TO_ALL:
        return false;
    default: /* one buffer, or a reduce's root */
        return in == out && ib == ob;
    }
}

/* Validation of everything but the comm itself; op->count is final. */
static nexar_status_t check_args(const char *fn, const nexar_comm_t *c, const struct nx_call *op,
                                 int dtype, int redop, long long peer, unsigned flags)
{
    if ((unsigned)dtype >= NEXAR_DTYPE_COUNT)
        return bad(fn, c, "%s %lld is not a nexar_dtype_t", "dtype", dtype);
    if ((flags & A_REDOP) && (unsigned)redop >= NEXAR_OP_COUNT)
        return bad(fn, c, "%s %lld is not a nexar_op_t", "op", redop);
    if ((flags & (A_ROOT | A_PEER)) && (peer < 0 || peer >= c->size))
        return nx_fail(NEXAR_ERR_INVALID,
                       "%s: %s %lld is out of range for a communicator of %d ranks (rank %d, "
                       "comm %u)",
                       fn, flags & A_ROOT ? "root" : op->kind == NX_K_SEND ? "dest" : "src",
                       peer, c->size, c->rank, c->id);

    uint64_t es = nx_dtype_size((uint8_t)dtype), total;
    if (__builtin_mul_overflow((uint64_t)op->count, es, &total) ||
        __builtin_mul_overflow(total, (uint64_t)c->size, &total) || total > SIZE_MAX)
        return nx_fail(NEXAR_ERR_INVALID,
                       "%s: count %llu of %s over %d ranks overflows the address space", fn,
                       (unsigned long long)op->count, nx_dtype_name((uint8_t)dtype), c->size);
    if (op->count == 0 || op->kind == NX_K_ALL_REDUCE_BUCKETED)
        return NEXAR_OK;

    struct nx_shape sh;
    nx_kind_shape(op->kind, (uint32_t)c->size, (uint32_t)c->rank,
                  (flags & A_ROOT) ? (uint32_t)peer : 0, &sh);
    if (sh.in_mul && !op->in)
        return nx_fail(NEXAR_ERR_INVALID, "%s: the input buffer is NULL with count %llu", fn,
                       (unsigned long long)op->count);
    if (sh.out_mul && !op->out)
        return nx_fail(NEXAR_ERR_INVALID, "%s: the output buffer is NULL with count %llu", fn,
                       (unsigned long long)op->count);
    if (!overlap_ok(op, &sh, op->count * es, (uint64_t)c->rank)) {
        const char *form = inplace_form(op->kind);
        return nx_fail(NEXAR_ERR_INVALID,
                       "%s: send and recv overlap (%llu bytes at %p, %llu at %p; rank %d of "
                       "%d, comm %u); pass separate buffers%s%s", fn,
                       (unsigned long long)(sh.in_mul * op->count * es), op->in,
                       (unsigned long long)(sh.out_mul * op->count * es), op->out, c->rank,
                       c->size, c->id, form ? ", or the in-place form: " : "",
                       form ? form : "");
    }
    return NEXAR_OK;
}

/*
 * Validates, starts, and (req == NULL) waits.  fn names the blocking form; the i-form
 * reports the same name with an "i" after "nexar_".
 */
static nexar_status_t run(const char *fn, nexar_comm_t *c, struct nx_call *op, int dtype,
                          int redop, long long peer, unsigned flags, nexar_request_t **req)
{
    char ifn[48];
    if (req) {
        snprintf(ifn, sizeof(ifn), "nexar_i%s", fn + 6);
        fn = ifn;
        *req = NULL;
    }
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "%s: comm is NULL", fn);
    op->dtype = (uint8_t)dtype;
    op->redop = (flags & A_REDOP) ? (uint8_t)redop : 0;
    op->peer = (flags & (A_ROOT | A_PEER)) ? (uint32_t)peer : 0;

    nx_lock();
    nexar_status_t s;
    struct nexar_request *r;
    op->dev = NULL;
    if ((s = nx_shim_check(fn)) || (s = check_args(fn, c, op, dtype, redop, peer, flags)) ||
        (s = nx_comm_check(c, fn)) || (s = nx_dev_prepare(fn, c, op)))
        goto out;
    nexar_status_t earlier = NEXAR_OK;
    char earlier_text[NX_ERR_TEXT_BYTES];
    if (op->kind == NX_K_BARRIER && !req) {
        /* A barrier implies sync (numr): c's requests started before it end first, and
         * the first failure among them is the barrier's. */
        if ((earlier = nx_comm_drain(c, c->req_serial)) != NEXAR_OK)
            snprintf(earlier_text, sizeof(earlier_text), "%s", nexar_last_error());
    }
    if ((s = nx_req_start(c, op, &r)) != NEXAR_OK) {
        nx_dev_discard(op->dev);
        goto out;
    }
    /* Stream-ordered: the caller's stream waits for the op on the GPU, the CPU goes on. */
    bool ordered = nx_dev_ordered(r->dev) && nx_dev_started(r) == NEXAR_OK;
    if (req)
        *req = r;
    else if (ordered)
        r->detached = true;
    else
        s = nx_wait_locked(r);
    if (earlier != NEXAR_OK)
        s = nx_fail_text(earlier, earlier_text);
out:
    nx_unlock();
    return s;
}

#define REQ_ARG_CHECK(fn)                                                                  \
    do {                                                                                   \
        if (!req)                                                                          \
            return nx_fail(NEXAR_ERR_INVALID, "%s: req is NULL", fn);                      \
    } while (0)

/* ---- in-place reductions ------------------------------------------------------------ */

static nexar_status_t inplace(const char *fn, uint8_t kind, nexar_comm_t *c, void *buf,
                              size_t count, nexar_dtype_t dtype, nexar_op_t op,
                              nexar_request_t **req)
{
    struct nx_call o = {.kind = kind, .count = count, .in = buf, .out = buf};
    return run(fn, c, &o, (int)dtype, (int)op, 0, A_REDOP, req);
}

nexar_status_t nexar_all_reduce(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                                nexar_op_t op)
{
    return inplace("nexar_all_reduce", NX_K_ALL_REDUCE, c, buf, count, dtype, op, NULL);
}

nexar_status_t nexar_iall_reduce(nexar_comm_t *c, void *buf, size_t count,
                                 nexar_dtype_t dtype, nexar_op_t op, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_iall_reduce");
    return inplace("nexar_all_reduce", NX_K_ALL_REDUCE, c, buf, count, dtype, op, req);
}

nexar_status_t nexar_scan(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                          nexar_op_t op)
{
    return inplace("nexar_scan", NX_K_SCAN, c, buf, count, dtype, op, NULL);
}

nexar_status_t nexar_iscan(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                           nexar_op_t op, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_iscan");
    return inplace("nexar_scan", NX_K_SCAN, c, buf, count, dtype, op, req);
}

nexar_status_t nexar_exscan(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                            nexar_op_t op)
{
    return inplace("nexar_exscan", NX_K_EXSCAN, c, buf, count, dtype, op, NULL);
}

nexar_status_t nexar_iexscan(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                             nexar_op_t op, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_iexscan");
    return inplace("nexar_exscan", NX_K_EXSCAN, c, buf, count, dtype, op, req);
}

/* ---- rooted ------------------------------------------------------------------------- */

nexar_status_t nexar_broadcast(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                               int root)
{
    struct nx_call o = {.kind = NX_K_BROADCAST, .count = count, .in = buf, .out = buf};
    return run("nexar_broadcast", c, &o, (int)dtype, 0, root, A_ROOT, NULL);
}

nexar_status_t nexar_ibroadcast(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                                int root, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_ibroadcast");
    struct nx_call o = {.kind = NX_K_BROADCAST, .count = count, .in = buf, .out = buf};
    return run("nexar_broadcast", c, &o, (int)dtype, 0, root, A_ROOT, req);
}

nexar_status_t nexar_reduce(nexar_comm_t *c, const void *send, void *recv, size_t count,
                            nexar_dtype_t dtype, nexar_op_t op, int root)
{
    struct nx_call o = {.kind = NX_K_REDUCE, .count = count, .in = send, .out = recv};
    return run("nexar_reduce", c, &o, (int)dtype, (int)op, root, A_ROOT | A_REDOP, NULL);
}

nexar_status_t nexar_ireduce(nexar_comm_t *c, const void *send, void *recv, size_t count,
                             nexar_dtype_t dtype, nexar_op_t op, int root,
                             nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_ireduce");
    struct nx_call o = {.kind = NX_K_REDUCE, .count = count, .in = send, .out = recv};
    return run("nexar_reduce", c, &o, (int)dtype, (int)op, root, A_ROOT | A_REDOP, req);
}

nexar_status_t nexar_gather(nexar_comm_t *c, const void *send, void *recv, size_t count,
                            nexar_dtype_t dtype, int root)
{
    struct nx_call o = {.kind = NX_K_GATHER, .count = count, .in = send, .out = recv};
    return run("nexar_gather", c, &o, (int)dtype, 0, root, A_ROOT, NULL);
}

nexar_status_t nexar_igather(nexar_comm_t *c, const void *send, void *recv, size_t count,
                             nexar_dtype_t dtype, int root, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_igather");
    struct nx_call o = {.kind = NX_K_GATHER, .count = count, .in = send, .out = recv};
    return run("nexar_gather", c, &o, (int)dtype, 0, root, A_ROOT, req);
}

nexar_status_t nexar_scatter(nexar_comm_t *c, const void *send, void *recv, size_t count,
                             nexar_dtype_t dtype, int root)
{
    struct nx_call o = {.kind = NX_K_SCATTER, .count = count, .in = send, .out = recv};
    return run("nexar_scatter", c, &o, (int)dtype, 0, root, A_ROOT, NULL);
}

nexar_status_t nexar_iscatter(nexar_comm_t *c, const void *send, void *recv, size_t count,
                              nexar_dtype_t dtype, int root, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_iscatter");
    struct nx_call o = {.kind = NX_K_SCATTER, .count = count, .in = send, .out = recv};
    return run("nexar_scatter", c, &o, (int)dtype, 0, root, A_ROOT, req);
}

/* ---- all-to-all family ----------------------------------------------------------------- */

nexar_status_t nexar_all_gather(nexar_comm_t *c, const void *send, void *recv, size_t count,
                                nexar_dtype_t dtype)
{
    struct nx_call o = {.kind = NX_K_ALL_GATHER, .count = count, .in = send, .out = recv};
    return run("nexar_all_gather", c, &o, (int)dtype, 0, 0, 0, NULL);
}

nexar_status_t nexar_iall_gather(nexar_comm_t *c, const void *send, void *recv, size_t count,
                                 nexar_dtype_t dtype, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_iall_gather");
    struct nx_call o = {.kind = NX_K_ALL_GATHER, .count = count, .in = send, .out = recv};
    return run("nexar_all_gather", c, &o, (int)dtype, 0, 0, 0, req);
}

nexar_status_t nexar_reduce_scatter(nexar_comm_t *c, const void *send, void *recv,
                                    size_t count, nexar_dtype_t dtype, nexar_op_t op)
{
    struct nx_call o = {.kind = NX_K_REDUCE_SCATTER, .count = count, .in = send, .out = recv};
    return run("nexar_reduce_scatter", c, &o, (int)dtype, (int)op, 0, A_REDOP, NULL);
}

nexar_status_t nexar_ireduce_scatter(nexar_comm_t *c, const void *send, void *recv,
                                     size_t count, nexar_dtype_t dtype, nexar_op_t op,
                                     nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_ireduce_scatter");
    struct nx_call o = {.kind = NX_K_REDUCE_SCATTER, .count = count, .in = send, .out = recv};
    return run("nexar_reduce_scatter", c, &o, (int)dtype, (int)op, 0, A_REDOP, req);
}

nexar_status_t nexar_all_to_all(nexar_comm_t *c, const void *send, void *recv, size_t count,
                                nexar_dtype_t dtype)
{
    struct nx_call o = {.kind = NX_K_ALL_TO_ALL, .count = count, .in = send, .out = recv};
    return run("nexar_all_to_all", c, &o, (int)dtype, 0, 0, 0, NULL);
}

nexar_status_t nexar_iall_to_all(nexar_comm_t *c, const void *send, void *recv, size_t count,
                                 nexar_dtype_t dtype, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_iall_to_all");
    struct nx_call o = {.kind = NX_K_ALL_TO_ALL, .count = count, .in = send, .out = recv};
    return run("nexar_all_to_all", c, &o, (int)dtype, 0, 0, 0, req);
}

/* ---- bucketed allreduce ---------------------------------------------------------------- */

static nexar_status_t bucketed(nexar_comm_t *c, const nexar_iov_t *v, size_t n,
                               nexar_dtype_t dtype, nexar_op_t op, nexar_request_t **req)
{
    const char *fn = req ? "nexar_iall_reduce_bucketed" : "nexar_all_reduce_bucketed";
    struct nx_call o = {.kind = NX_K_ALL_REDUCE_BUCKETED, .iov = v, .niov = n};
    if (n > 0 && !v)
        return nx_fail(NEXAR_ERR_INVALID, "%s: the iov array is NULL with n = %zu", fn, n);
    if (n > SIZE_MAX / sizeof(*v))
        return nx_fail(NEXAR_ERR_INVALID, "%s: n = %zu iovs overflows", fn, n);
    for (size_t i = 0; i < n; i++) {
        if (v[i].count > 0 && !v[i].ptr)
            return nx_fail(NEXAR_ERR_INVALID, "%s: iov %zu has count %zu and a NULL ptr", fn,
                           i, v[i].count);
        if (__builtin_add_overflow(o.count, (uint64_t)v[i].count, &o.count))
            return nx_fail(NEXAR_ERR_INVALID, "%s: the iov counts overflow", fn);
    }
    return run("nexar_all_reduce_bucketed", c, &o, (int)dtype, (int)op, 0, A_REDOP, req);
}

nexar_status_t nexar_all_reduce_bucketed(nexar_comm_t *c, const nexar_iov_t *v, size_t n,
                                         nexar_dtype_t dtype, nexar_op_t op)
{
    return bucketed(c, v, n, dtype, op, NULL);
}

nexar_status_t nexar_iall_reduce_bucketed(nexar_comm_t *c, const nexar_iov_t *v, size_t n,
                                          nexar_dtype_t dtype, nexar_op_t op,
                                          nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_iall_reduce_bucketed");
    return bucketed(c, v, n, dtype, op, req);
}

/* ---- barrier ------------------------------------------------------------------------ */

nexar_status_t nexar_barrier(nexar_comm_t *c)
{
    struct nx_call o = {.kind = NX_K_BARRIER};
    return run("nexar_barrier", c, &o, 0, 0, 0, 0, NULL);
}

nexar_status_t nexar_ibarrier(nexar_comm_t *c, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_ibarrier");
    struct nx_call o = {.kind = NX_K_BARRIER};
    return run("nexar_barrier", c, &o, 0, 0, 0, 0, req);
}

/* ---- point to point ----------------------------------------------------------------- */

nexar_status_t nexar_send(nexar_comm_t *c, const void *buf, size_t count, nexar_dtype_t dtype,
                          int dest, uint32_t tag)
{
    struct nx_call o = {.kind = NX_K_SEND, .count = count, .in = buf, .tag = tag};
    return run("nexar_send", c, &o, (int)dtype, 0, dest, A_PEER, NULL);
}

nexar_status_t nexar_isend(nexar_comm_t *c, const void *buf, size_t count, nexar_dtype_t dtype,
                           int dest, uint32_t tag, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_isend");
    struct nx_call o = {.kind = NX_K_SEND, .count = count, .in = buf, .tag = tag};
    return run("nexar_send", c, &o, (int)dtype, 0, dest, A_PEER, req);
}

nexar_status_t nexar_recv(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                          int src, uint32_t tag)
{
    struct nx_call o = {.kind = NX_K_RECV, .count = count, .out = buf, .tag = tag};
    return run("nexar_recv", c, &o, (int)dtype, 0, src, A_PEER, NULL);
}

nexar_status_t nexar_irecv(nexar_comm_t *c, void *buf, size_t count, nexar_dtype_t dtype,
                           int src, uint32_t tag, nexar_request_t **req)
{
    REQ_ARG_CHECK("nexar_irecv");
    struct nx_call o = {.kind = NX_K_RECV, .count = count, .out = buf, .tag = tag};
    return run("nexar_recv", c, &o, (int)dtype, 0, src, A_PEER, req);
}
