/*
 * coll.c - the collectives nexar-bench knows: names, buffer shapes, busbw factor,
 * and the one call that is timed.
 *
 * Sizes follow nccl-tests: "size" is the per-rank vector for all_reduce,
 * broadcast, reduce, scan, exscan and sendrecv, and the total buffer (count *
 * ranks elements) for all_gather, reduce_scatter, gather, scatter and all_to_all.
 */
#include <string.h>

#include "bench.h"

/* out/in: the out-of-place and in-place forms nexar.h gives each call.  The one-buffer
 * calls (all_reduce, broadcast, scan, exscan, all_reduce_bucketed) have no
 * out-of-place form; of the two-buffer ones only nexar_reduce allows recv == send, so
 * all_gather, reduce_scatter, gather, scatter, all_to_all and send/recv (two requests
 * in flight on one buffer) have no in-place form.  barrier has no buffers: one form. */
const struct nxb_coll_desc nxb_colls[NXB_COLL_COUNT] = {
    /*                          name, op, root, out, in, total, data */
    [NXB_ALL_REDUCE] = {"all_reduce", true, false, false, true, false, true},
    [NXB_BROADCAST] = {"broadcast", false, true, false, true, false, true},
    [NXB_REDUCE] = {"reduce", true, true, true, true, false, true},
    [NXB_ALL_GATHER] = {"all_gather", false, false, true, false, true, true},
    [NXB_REDUCE_SCATTER] = {"reduce_scatter", true, false, true, false, true, true},
    [NXB_GATHER] = {"gather", false, true, true, false, true, true},
    [NXB_SCATTER] = {"scatter", false, true, true, false, true, true},
    [NXB_ALL_TO_ALL] = {"all_to_all", false, false, true, false, true, true},
    [NXB_SCAN] = {"scan", true, false, false, true, false, true},
    [NXB_EXSCAN] = {"exscan", true, false, false, true, false, true},
    [NXB_ALL_REDUCE_BUCKETED] = {"all_reduce_bucketed", true, false, false, true, false, true},
    [NXB_BARRIER] = {"barrier", false, false, true, false, false, false},
    [NXB_SENDRECV] = {"sendrecv", false, false, true, false, false, true},
};

/* Compares ignoring '_' so that "allreduce" (mpi_bench, nccl-tests) works too. */
static bool same_name(const char *a, const char *b)
{
    for (;;) {
        while (*a == '_')
            a++;
        while (*b == '_')
            b++;
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++, b++;
    }
}

int nxb_coll_lookup(const char *name)
{
    for (int c = 0; c < NXB_COLL_COUNT; c++)
        if (same_name(name, nxb_colls[c].name))
            return c;
    if (same_name(name, "alltoall") || same_name(name, "a2a"))
        return NXB_ALL_TO_ALL;
    if (same_name(name, "bcast"))
        return NXB_BROADCAST;
    return -1;
}

double nxb_busbw_factor(enum nxb_coll c, int n)
{
    double dn = n;
    switch (c) {
    case NXB_ALL_REDUCE:
    case NXB_ALL_REDUCE_BUCKETED:
        return 2.0 * (dn - 1) / dn;
    case NXB_ALL_GATHER:
    case NXB_REDUCE_SCATTER:
    case NXB_ALL_TO_ALL:
    case NXB_GATHER:
    case NXB_SCATTER:
        return (dn - 1) / dn;
    case NXB_BARRIER:
        return 0;
    default: /* broadcast, reduce, scan, exscan, sendrecv: every byte crosses once */
        return 1.0;
    }
}

/* At most this many buffers per bucketed call, of unequal sizes, as gradient
 * buckets are. */
#define BUCKETS 8

static nexar_status_t run_bucketed(nexar_comm_t *comm, void *buf, size_t count,
                                   nexar_dtype_t d, nexar_op_t op)
{
    nexar_iov_t v[BUCKETS];
    size_t es = nexar_dtype_size(d), n = 0, start = 0;
    /* Bucket k ends at count * (k+1)^2 / BUCKETS^2: small ones first, big last. */
    for (size_t k = 0; k < BUCKETS && start < count; k++) {
        size_t end = k + 1 == BUCKETS ? count : count * (k + 1) * (k + 1) / (BUCKETS * BUCKETS);
        if (end <= start)
            continue;
        v[n].ptr = (char *)buf + start * es;
        v[n].count = end - start;
        n++;
        start = end;
    }
    if (n == 0) { /* count 0: still one (empty) buffer, so the call is matched */
        v[0].ptr = buf;
        v[0].count = 0;
        n = 1;
    }
    return nexar_all_reduce_bucketed(comm, v, n, d, op);
}

/* Ring exchange: send to the next rank, receive from the previous one.  Both
 * are posted before waiting, so that large messages (beyond the daemon's eager
 * budget) cannot deadlock. */
static nexar_status_t run_sendrecv(nexar_comm_t *comm, const void *send, void *recv,
                                   size_t count, nexar_dtype_t d)
{
    int n = nexar_comm_size(comm), r = nexar_comm_rank(comm);
    nexar_request_t *rr = NULL, *sr = NULL;
    nexar_status_t s = nexar_irecv(comm, recv, count, d, (r + n - 1) % n, 0, &rr);
    if (s != NEXAR_OK)
        return s;
    s = nexar_isend(comm, send, count, d, (r + 1) % n, 0, &sr);
    if (s != NEXAR_OK)
        return s; /* rr is left to nexar_finalize(): its sender may never come */
    nexar_status_t s1 = nexar_wait(sr);
    nexar_status_t s2 = nexar_wait(rr);
    return s1 != NEXAR_OK ? s1 : s2;
}

nexar_status_t nxb_coll_run(nexar_comm_t *comm, enum nxb_coll c, void *send, void *recv,
                            size_t count, nexar_dtype_t d, nexar_op_t op, int root)
{
    switch (c) {
    case NXB_ALL_REDUCE: return nexar_all_reduce(comm, recv, count, d, op);
    case NXB_BROADCAST: return nexar_broadcast(comm, recv, count, d, root);
    case NXB_REDUCE: return nexar_reduce(comm, send, recv, count, d, op, root);
    case NXB_ALL_GATHER: return nexar_all_gather(comm, send, recv, count, d);
    case NXB_REDUCE_SCATTER: return nexar_reduce_scatter(comm, send, recv, count, d, op);
    case NXB_GATHER: return nexar_gather(comm, send, recv, count, d, root);
    case NXB_SCATTER: return nexar_scatter(comm, send, recv, count, d, root);
    case NXB_ALL_TO_ALL: return nexar_all_to_all(comm, send, recv, count, d);
    case NXB_SCAN: return nexar_scan(comm, recv, count, d, op);
    case NXB_EXSCAN: return nexar_exscan(comm, recv, count, d, op);
    case NXB_ALL_REDUCE_BUCKETED: return run_bucketed(comm, recv, count, d, op);
    case NXB_BARRIER: return nexar_barrier(comm);
    case NXB_SENDRECV: return run_sendrecv(comm, send, recv, count, d);
    case NXB_COLL_COUNT: break;
    }
    return NEXAR_ERR_INVALID;
}
