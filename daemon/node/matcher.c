/* matcher.c - see matcher.h. */
#include "matcher.h"
#include "op.h"
#include "grow.h"
#include "shrink.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cluster_ops.h"
#include "coll_local.h"
#include "comm.h"
#include "context.h"
#include "devop.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"

void nx_match_init(struct nx_matcher *s, uint32_t size)
{
    TAILQ_INIT(&s->ops);
    s->next_seq = nx_xcalloc(size, sizeof(*s->next_seq));
    s->done_seq = 0;
}

void nx_match_fini(struct nx_matcher *s)
{
    free(s->next_seq);
    s->next_seq = NULL;
}

void nx_sig_format(const struct nx_sqe *e, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s(", nx_kind_name(e->kind));
    if (n < 0 || (size_t)n >= len)
        return;
    size_t off = (size_t)n;
    if (e->kind == NX_K_SPLIT) {
        snprintf(buf + off, len - off, "color=%u, key=%u)", e->peer, e->tag);
        return;
    }
    if (e->kind == NX_K_BARRIER) {
        snprintf(buf + off, len - off, ")");
        return;
    }
    off += (size_t)snprintf(buf + off, len - off, "count=%" PRIu64 ", %s", e->count,
                            nx_dtype_name(e->dtype));
    if (off < len && (e->flags & NX_SQE_DEVICE))
        off += (size_t)snprintf(buf + off, len - off, ", device");
    if (off < len && nx_kind_has_redop(e->kind))
        off += (size_t)snprintf(buf + off, len - off, ", %s", nx_redop_name(e->redop));
    if (off < len && nx_kind_has_root(e->kind))
        off += (size_t)snprintf(buf + off, len - off, ", root=%u", e->peer);
    if (off < len)
        snprintf(buf + off, len - off, ")");
}

static bool sig_equal(const struct nx_sqe *a, const struct nx_sqe *b)
{
    if (a->kind != b->kind)
        return false;
    if (a->kind == NX_K_SPLIT || a->kind == NX_K_BARRIER)
        return true;
    if (a->dtype != b->dtype || a->count != b->count)
        return false;
    /* One op runs on host buffers everywhere or on device buffers everywhere. */
    if ((a->flags ^ b->flags) & NX_SQE_DEVICE)
        return false;
    if (nx_kind_has_redop(a->kind) && a->redop != b->redop)
        return false;
    if (nx_kind_has_root(a->kind) && a->peer != b->peer)
        return false;
    return true;
}

static void complete(struct nx_client *cl, uint64_t user_data, uint32_t status,
                     const char *text)
{
    struct nx_done d = {.user_data = user_data, .status = status};
    nx_client_complete(cl, &d, text);
}

static void complete_op(struct nx_op *op, struct nx_client *cl, uint64_t user_data)
{
    struct nx_done d = {.user_data = user_data, .algo = op->algo};
    nx_client_complete(cl, &d, NULL);
}

static void fail_desc(struct nx_comm *c, struct nx_client *cl, const struct nx_sqe *e)
{
    complete(cl, e->user_data, c->failed_status, c->failed_text);
}

/* A device descriptor that will not run: its done word is set too. */
static void fail_dev(struct nx_comm *c, struct nx_dev_part *dev)
{
    nx_dev_part_complete(dev, c->failed_status, c->failed_text);
    nx_dev_part_release(dev);
    free(dev);
}

static void op_free(struct nx_comm *c, struct nx_op *op)
{
    if (op->xr)
        nx_cluster_ops->coll_free(op);
    TAILQ_REMOVE(&c->match.ops, op, link);
    free(op->pull_owe);
    free(op->pull_src);
    free(op->pull_ud);
    for (uint32_t r = 0; r < c->size; r++) {
        if (op->parts[r].q != op->parts[r].q_inl)
            free(op->parts[r].q);
        if (op->parts[r].dev) {
            nx_dev_part_release(op->parts[r].dev);
            free(op->parts[r].dev);
        }
    }
    free(op);
}

struct nx_op *nx_match_op_find(struct nx_matcher *s, uint64_t seq)
{
    struct nx_op *op;
    TAILQ_FOREACH(op, &s->ops, link)
        if (op->seq == seq)
            return op;
    return NULL;
}

static struct nx_op *op_new(struct nx_comm *c, const struct nx_sqe *e, uint32_t rank)
{
    struct nx_op *op = nx_xcalloc(1, sizeof(*op) + c->size * sizeof(struct nx_part));
    op->comm = c;
    op->seq = e->seq;
    op->sig = *e;
    op->sig_rank = rank;
    /* The ranks plan their chunks for the communicator's size as they see it. */
    /* On one node the backend runs a device op at once; across nodes its parts stage
     * through host memory (node/devstage.h), cut the same way on every node. */
    bool dev = (e->flags & NX_SQE_DEVICE) != 0;
    uint32_t span = nx_comm_span_size(c), es = nx_dtype_size(e->dtype);
    op->chunk_elems = dev ? nx_chunk_elems(e->kind, span, es, NX_DEV_XCHUNK_BYTES)
                          : nx_op_chunk_elems(e->kind, span, es, nxd.cfg.slot_bytes, e->count,
                                              nx_comm_plan(c));
    op->nchunks = dev && c->nodes == 1 ? 1 : nx_chunk_count(e->count, op->chunk_elems);
    op->started = nx_now();
    /* Keep the list in seq order: ops open in order on each rank, but ranks differ. */
    struct nx_op *it;
    TAILQ_FOREACH(it, &c->match.ops, link) {
        if (it->seq > op->seq) {
            TAILQ_INSERT_BEFORE(it, op, link);
            return op;
        }
    }
    TAILQ_INSERT_TAIL(&c->match.ops, op, link);
    return op;
}

static void push_staged(struct nx_part *p, const struct nx_sqe *e)
{
    if (p->q_head > 0 && p->q_head == p->q_len) {
        p->q_head = p->q_len = 0;
    }
    nx_grow_inline((void **)&p->q, &p->q_cap, p->q_inl, NX_PART_Q_INL, p->q_len + 1,
                   sizeof(*p->q));
    p->q[p->q_len++] = (struct nx_staged){
        .user_data = e->user_data, .in_off = e->in_off, .out_off = e->out_off, .chunk = e->chunk,
        .table_slot = e->tag};
    p->next_chunk = e->chunk + 1;
}

bool nx_op_chunk_ready(const struct nx_op *op)
{
    for (uint32_t r = 0; r < op->comm->size; r++) {
        const struct nx_part *p = &op->parts[r];
        if (!p->client)
            return false;
        if (!nx_part_direct(p) && p->q_head == p->q_len)
            return false;
    }
    return true;
}

void nx_op_chunk_io(const struct nx_op *op, uint64_t off, uint64_t n, struct nx_rank_io *io)
{
    const struct nx_comm *c = op->comm;
    uint32_t es = nx_dtype_size(op->sig.dtype), P = nx_comm_span_size(c);
    for (uint32_t r = 0; r < c->size; r++) {
        const struct nx_part *p = &op->parts[r];
        uint8_t *arena = p->client->seg.arena;
        struct nx_shape shape;
        nx_kind_shape(op->sig.kind, P, nx_comm_span_rank(c, r), op->sig.peer, &shape);
        if (nx_part_direct(p)) {
            io[r].in = arena + p->first.in_off + off * es;
            io[r].out = arena + p->first.out_off + off * es;
            io[r].in_stride = io[r].out_stride = op->sig.count;
        } else {
            const struct nx_staged *st = &p->q[p->q_head];
            io[r].in = arena + st->in_off;
            io[r].out = arena + st->out_off;
            io[r].in_stride = io[r].out_stride = n;
        }
        io[r].own_by_rank = !nx_part_direct(p) && op->sig.kind == NX_K_ALL_GATHER;
        if (!shape.in_mul)
            io[r].in = NULL;
        if (!shape.out_mul)
            io[r].out = NULL;
    }
}

static void exec_chunk(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    uint32_t es = nx_dtype_size(op->sig.dtype);
    uint64_t off = op->next_chunk * op->chunk_elems;
    uint64_t n = op->sig.count > off ? op->sig.count - off : 0;
    if (n > op->chunk_elems)
        n = op->chunk_elems;
    struct nx_shape shape;
    if (!nx_kind_shape(op->sig.kind, c->size, 0, 0, &shape) || !shape.has_data || n == 0)
        return;

    struct nx_rank_io io_stack[64];
    struct nx_rank_io *io = c->size <= 64 ? io_stack : nx_xcalloc(c->size, sizeof(*io));
    nx_op_chunk_io(op, off, n, io);
    struct nx_chunk_job job = {
        .kind = op->sig.kind,
        .dtype = op->sig.dtype,
        .redop = op->sig.redop,
        .root = op->sig.peer,
        .size = c->size,
        .n = n,
        .io = io,
    };
    nx_coll_local_run(&nx_adapter_cpu, &job);
    nxd.stats.chunks++;
    if (nx_kind_has_redop(op->sig.kind))
        nxd.stats.bytes_reduced += n * es * c->size;
    else
        nxd.stats.bytes_copied += n * es * c->size;
    if (io != io_stack)
        free(io);
}

/* Split runs when every rank arrived: group by color, order by (key, old rank). */
static void finish_split(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    uint32_t P = c->size;
    uint32_t *order = nx_xcalloc(P, sizeof(*order));
    struct nx_done *res = nx_xcalloc(P, sizeof(*res));
    for (uint32_t r = 0; r < P; r++)
        order[r] = r;
    /* Insertion sort: P is the ranks on this node, and the order must be stable. */
    for (uint32_t i = 1; i < P; i++) {
        uint32_t x = order[i], j = i;
        const struct nx_sqe *ex = &op->parts[x].first;
        while (j > 0) {
            const struct nx_sqe *ey = &op->parts[order[j - 1]].first;
            if (ey->peer < ex->peer || (ey->peer == ex->peer && ey->tag <= ex->tag))
                break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    struct nx_client **cls = nx_xcalloc(P, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(P, sizeof(*wr));
    for (uint32_t i = 0; i < P;) {
        uint32_t color = op->parts[order[i]].first.peer, g = 0;
        uint32_t j = i;
        while (j < P && op->parts[order[j]].first.peer == color)
            j++;
        if (color != NEXAR_UNDEFINED) {
            for (uint32_t k = i; k < j; k++, g++) {
                cls[g] = op->parts[order[k]].client;
                wr[g] = c->ranks[order[k]].world_rank;
            }
            struct nx_comm *nc = nx_comm_new(c->job, g, cls, wr, c->timeout_ms);
            nx_comm_set_plan(nc, c->plan_local);
            for (uint32_t k = i; k < j; k++)
                res[order[k]] = (struct nx_done){.res_comm = nc->id, .res_rank = k - i,
                                                 .res_size = g, .res_local = nx_comm_plan(nc)};
        }
        i = j;
    }
    for (uint32_t r = 0; r < P; r++) {
        res[r].user_data = op->parts[r].first.user_data;
        nx_client_complete(op->parts[r].client, &res[r], NULL);
        if (nx_part_direct(&op->parts[r]))
            op->parts[r].client->pending--;
    }
    free(cls);
    free(wr);
    free(order);
    free(res);
}

/* Every rank's device descriptor is here: the backend takes the op over. */
static void run_device(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    struct nx_dev_part *parts = nx_xcalloc(c->size, sizeof(*parts));
    char what[160];
    snprintf(what, sizeof(what), "%s seq %" PRIu64 " on comm %u (job \"%s\")",
             nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name);
    for (uint32_t r = 0; r < c->size; r++)
        parts[r] = *op->parts[r].dev; /* the iov tables stay the op's, freed with it */
    struct nx_dev_job job = {
        .comm_id = c->id,
        .seq = op->seq,
        .kind = op->sig.kind,
        .dtype = op->sig.dtype,
        .redop = op->sig.redop,
        .root = nx_kind_has_root(op->sig.kind) ? op->sig.peer : 0,
        .size = c->size,
        .count = op->sig.count,
        .parts = parts,
        .what = what,
        .timeout_ms = c->timeout_ms,
    };
    nx_device->run(&job);
    free(parts);
    nxd.stats.chunks++;
    if (nx_kind_has_redop(op->sig.kind))
        nxd.stats.bytes_reduced += op->sig.count * nx_dtype_size(op->sig.dtype) * c->size;
    else
        nxd.stats.bytes_copied += op->sig.count * nx_dtype_size(op->sig.dtype) * c->size;
}

void nx_op_finish(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    for (uint32_t r = 0; r < c->size; r++) {
        struct nx_part *p = &op->parts[r];
        if (nx_part_direct(p) && !p->dev && op->sig.kind != NX_K_SPLIT) {
            complete_op(op, p->client, p->first.user_data);
            p->client->pending--;
        }
        c->ranks[r].ops_completed++;
    }
    c->match.done_seq++;
    nxd.stats.ops_completed++;
    op_free(c, op);
}

static void run_ready(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    /* Across nodes also a device op: the nodes agree on it first (xcoll.h). */
    if (c->x && op->sig.kind != NX_K_SPLIT)
        return nx_cluster_ops->coll_run(op);
    if ((op->sig.flags & NX_SQE_DEVICE) && op->arrived == c->size) {
        run_device(op);
        return nx_op_finish(op);
    }
    while (op->next_chunk < op->nchunks && nx_op_chunk_ready(op) && nx_pull_room(op)) {
        uint64_t off = op->next_chunk * op->chunk_elems;
        uint64_t n = op->sig.count > off ? op->sig.count - off : 0;
        if (nx_pull_chunk(op, n < op->chunk_elems ? n : op->chunk_elems)) {
            op->next_chunk++;
            op->started = nx_now();
            continue;
        }
        /* A single-copy op has no data in the arena: its ranks read each other, or no one
         * moves it.  (Validation lets no rank of it submit another form.) */
        if (op->sig.flags & NX_SQE_CMA) {
            nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                         "%s seq %" PRIu64 " on comm %u (job \"%s\"): a single-copy op whose "
                         "ranks cannot read each other", nx_kind_name(op->sig.kind), op->seq,
                         c->id, c->job->name);
            return;
        }
        exec_chunk(op);
        for (uint32_t r = 0; r < c->size; r++) {
            struct nx_part *p = &op->parts[r];
            if (nx_part_direct(p))
                continue;
            if (op->sig.kind != NX_K_SPLIT)
                complete(p->client, p->q[p->q_head].user_data, NEXAR_OK, NULL);
            p->q_head++;
            p->client->pending--;
        }
        op->next_chunk++;
        op->started = nx_now(); /* the deadline measures lack of progress */
    }
    /* A chunk run by peer reads ends when its readers say so (pull.c). */
    if (!nx_pull_release(op) || op->next_chunk < op->nchunks)
        return;
    if (op->sig.kind == NX_K_SPLIT) {
        if (c->nodes > 1)
            nx_cluster_ops->split_take(op);
        else
            finish_split(op);
    }
    nx_op_finish(op);
}

static void mismatch(struct nx_comm *c, struct nx_op *op, uint32_t rank,
                     const struct nx_sqe *e)
{
    char a[160], b[160], ra[64], rb[64];
    nx_sig_format(&op->sig, a, sizeof(a));
    nx_sig_format(e, b, sizeof(b));
    nxd.stats.mismatches++;
    nx_comm_fail(c, NEXAR_ERR_MISMATCH,
                 "%s seq %" PRIu64 " on comm %u (job \"%s\"): %s called %s but %s called %s",
                 nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name,
                 nx_comm_rank_name(c, op->sig_rank, ra, sizeof(ra)), a,
                 nx_comm_rank_name(c, rank, rb, sizeof(rb)), b);
}

static void submit_collective(struct nx_client *cl, struct nx_comm *c, uint32_t rank,
                              const struct nx_sqe *e)
{
    struct nx_matcher *s = &c->match;
    struct nx_op *op = nx_match_op_find(s, e->seq);
    struct nx_part *p = op ? &op->parts[rank] : NULL;
    char why[160];

    if (!p || !p->client) {
        struct nx_dev_part *dev = NULL;
        if (e->seq != s->next_seq[rank]) {
            snprintf(why, sizeof(why), "op sequence %" PRIu64 " on comm %u, expected %" PRIu64,
                     e->seq, c->id, s->next_seq[rank]);
            return nx_client_violation(cl, why);
        }
        if (!(e->flags & NX_SQE_DIRECT) && e->chunk != 0)
            return nx_client_violation(cl, "an op's first descriptor is not chunk 0");
        if (e->flags & NX_SQE_DEVICE) {
            dev = nx_xcalloc(1, sizeof(*dev));
            /* The op's shape is the whole communicator's: across nodes a rank's local
             * index is not its rank, and a root elsewhere is no root here. */
            if (nx_dev_part_load(cl, e, nx_comm_span_size(c), nx_comm_span_rank(c, rank), dev,
                                 why, sizeof(why)) < 0) {
                nx_dev_part_release(dev);
                free(dev);
                return nx_client_violation(cl, why);
            }
        }
        s->next_seq[rank]++;
        /* The rank's op counts from its first descriptor on, also when it mismatches;
         * its later chunks are the same op. */
        c->ranks[rank].ops_submitted++;
        if (c->live < c->size) {
            nx_comm_fail(c, NEXAR_ERR_PEER_LOST,
                         "communicator %u can never complete %s seq %" PRIu64
                         ": a rank has freed it", c->id, nx_kind_name(e->kind), e->seq);
            return dev ? fail_dev(c, dev) : fail_desc(c, cl, e);
        }
        if (e->seq >= c->closed_from) {
            nx_comm_fail(c, c->closed_status, "%s", c->closed_text);
            return dev ? fail_dev(c, dev) : fail_desc(c, cl, e);
        }
        if (!op) {
            op = op_new(c, e, rank);
        } else if (!sig_equal(&op->sig, e)) {
            mismatch(c, op, rank, e);
            return dev ? fail_dev(c, dev) : fail_desc(c, cl, e);
        }
        p = &op->parts[rank];
        p->client = cl;
        p->first = *e;
        p->dev = dev;
        op->arrived++;
        if (!(e->flags & NX_SQE_DIRECT))
            push_staged(p, e);
    } else {
        if (nx_part_direct(p))
            return nx_client_violation(cl, "a second descriptor for a direct op");
        if (e->chunk != p->next_chunk || !sig_equal(&p->first, e) ||
            (e->flags & NX_SQE_DIRECT)) {
            snprintf(why, sizeof(why), "chunk %u of op %" PRIu64 " out of order (expected %u)",
                     e->chunk, e->seq, p->next_chunk);
            return nx_client_violation(cl, why);
        }
        push_staged(p, e);
    }
    cl->pending++;
    run_ready(op);
}

/* The reader could not read (or write) what its table named: the op cannot complete on
 * any rank, and a source must not hear that its data arrived. */
static void pull_failed(struct nx_comm *c, const struct nx_op *op, uint32_t rank,
                        uint32_t peer, uint32_t tag)
{
    char rn[64], sn[64];
    bool cma = op->sig.flags & NX_SQE_CMA, write = tag & NX_PULL_FAIL_WRITE;
    nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                 "%s seq %" PRIu64 " on comm %u (job \"%s\"): %s could not %s %s's %s: %s%s",
                 nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name,
                 nx_comm_rank_name(c, rank, rn, sizeof(rn)), write ? "write into" : "read",
                 nx_comm_rank_name(c, peer, sn, sizeof(sn)),
                 !cma ? "staging slot"
                 : write ? "buffer with process_vm_writev"
                         : "buffer with process_vm_readv",
                 strerror((int)(tag & ~NX_PULL_FAIL_WRITE)),
                 cma ? "; NEXAR_SINGLE_COPY=0 turns single copy off" : "");
}

/* rank read chunk e->chunk of op e->seq from its peers' slots (pull.c). */
static void pulled(struct nx_client *cl, struct nx_comm *c, uint32_t rank,
                   const struct nx_sqe *e)
{
    /* After a failure the op is gone and its held descriptors failed, or wait in a drain
     * for this notice: a late notice is the reader's answer to what it was told before,
     * not a violation. */
    if (c->failed_status) {
        nx_pull_drain_done(c, e->seq, rank);
        return;
    }
    struct nx_op *op = nx_match_op_find(&c->match, e->seq);
    char why[192];
    if (!op) {
        snprintf(why, sizeof(why), "said it read chunk %u of op %" PRIu64 " on comm %u, "
                 "which is not running", e->chunk, e->seq, c->id);
        return nx_client_violation(cl, why);
    }
    if (!nx_pull_done(op, rank, e->chunk, why, sizeof(why)))
        return nx_client_violation(cl, why);
    if (e->tag) {
        /* A peer whose process is gone: a rank killed mid-op dies (its memory first) a
         * moment before its socket closes or its pidfd says so, and that fails the
         * communicator with PEER_LOST, naming it, as for any lost rank.  Only if it is
         * still here a second later does the reader's word stand (nx_match_tick). */
        if ((e->tag & ~NX_PULL_FAIL_WRITE) == ESRCH && (op->sig.flags & NX_SQE_CMA) &&
            !op->gone_tag) {
            op->gone_tag = e->tag;
            op->gone_reader = rank;
            op->gone_peer = e->peer;
            op->gone_at = nx_now();
            return;
        }
        return pull_failed(c, op, rank, e->peer, e->tag);
    }
    run_ready(op);
}

/* The payload a validated descriptor hands in (its chunk's input, or a direct op's);
 * for device buffers the op's input, which is not in the arena. */
static uint64_t input_bytes(const struct nx_sqe *e, const struct nx_sqe_limits *lim)
{
    uint64_t in = 0, out = 0;
    if (!(e->flags & (NX_SQE_DEVICE | NX_SQE_CMA)))
        return nx_sqe_extent(e, lim, &in, &out) ? in : 0;
    struct nx_shape s;
    if (!nx_kind_shape(e->kind, lim->comm_size, lim->comm_rank, e->peer, &s) ||
        __builtin_mul_overflow(e->count, (uint64_t)nx_dtype_size(e->dtype) * s.in_mul, &in))
        return 0;
    return in;
}

void nx_match_submit(struct nx_client *cl, const struct nx_sqe *e)
{
    struct nx_member *m = nx_client_member(cl, e->comm_id);
    char why[128];
    if (!m) {
        snprintf(why, sizeof(why), "descriptor for communicator %u, which it is not in",
                 e->comm_id);
        return nx_client_violation(cl, why);
    }
    struct nx_comm *c = m->comm;
    uint32_t rank = m->rank;
    struct nx_sqe_limits lim = {
        .arena_bytes = cl->seg.hdr.arena_bytes,
        .slot_bytes = cl->seg.hdr.slot_bytes,
        .comm_size = nx_comm_span_size(c),
        .comm_rank = nx_comm_span_rank(c, rank),
        .comm_plan = nx_comm_plan(c),
    };
    const char *reason = NULL;
    if (nx_sqe_validate(e, &lim, &reason) < 0) {
        const char *kind = nx_kind_name(e->kind);
        if (strcmp(kind, "?"))
            snprintf(why, sizeof(why), "bad %s descriptor: %s", kind, reason);
        else
            snprintf(why, sizeof(why), "bad descriptor of kind %u: %s", e->kind, reason);
        return nx_client_violation(cl, why);
    }
    /* A notice, not an op: it parks nothing and gets no completion. */
    if (e->kind == NX_K_PULLED)
        return pulled(cl, c, rank, e);
    if (cl->pending >= nxd.cfg.max_pending) {
        snprintf(why, sizeof(why), "more than %u descriptors outstanding", nxd.cfg.max_pending);
        return nx_client_violation(cl, why);
    }
    uint64_t in = input_bytes(e, &lim);
    cl->bytes_in += in;
    c->ranks[rank].bytes_in += in;
    /* Shrink is what survivors do after a failure: before the failed check. */
    if (e->kind == NX_K_COMM_SHRINK)
        return nx_shrink_submit(c, rank, cl, e->user_data);
    if (e->kind != NX_K_COMM_FREE && c->failed_status) {
        if (e->flags & NX_SQE_DEVICE) {
            struct nx_dev_part *dev = nx_xcalloc(1, sizeof(*dev));
            if (nx_dev_part_load(cl, e, nx_comm_span_size(c), nx_comm_span_rank(c, rank), dev,
                                 why, sizeof(why)) < 0) {
                nx_dev_part_release(dev);
                free(dev);
                return nx_client_violation(cl, why);
            }
            return fail_dev(c, dev);
        }
        return fail_desc(c, cl, e);
    }

    switch (e->kind) {
    case NX_K_COMM_GROW:
        return nx_grow_submit(c, rank, cl, e->user_data, e->peer);
    case NX_K_COMM_ABORT: {
        char who[160];
        nx_comm_fail(c, NEXAR_ERR_ABORTED, "communicator %u aborted by %s", c->id,
                     nx_client_name(cl, who, sizeof(who)));
        return complete(cl, e->user_data, NEXAR_OK, NULL);
    }
    case NX_K_COMM_FREE: {
        char who[160];
        complete(cl, e->user_data, NEXAR_OK, NULL);
        return nx_comm_leave(c, rank, false, nx_client_name(cl, who, sizeof(who)), NULL);
    }
    case NX_K_SEND:
    case NX_K_RECV:
        return nx_p2p_submit(c, rank, cl, e);
    default:
        return submit_collective(cl, c, rank, e);
    }
}

bool nx_match_rank_busy(const struct nx_comm *c, uint32_t rank)
{
    const struct nx_op *op;
    TAILQ_FOREACH(op, &c->match.ops, link) {
        const struct nx_part *p = &op->parts[rank];
        if (!p->client || nx_part_direct(p) || p->dev || p->next_chunk < op->nchunks ||
            p->q_head < p->q_len || op->next_chunk < op->nchunks ||
            nx_pull_involves(op, rank))
            return true;
    }
    return false;
}

void nx_match_fail_all(struct nx_comm *c)
{
    while (!TAILQ_EMPTY(&c->match.ops)) {
        struct nx_op *op = TAILQ_FIRST(&c->match.ops);
        nx_pull_fail(op);
        for (uint32_t r = 0; r < c->size; r++) {
            struct nx_part *p = &op->parts[r];
            if (!p->client)
                continue;
            if (p->dev) {
                /* Across nodes a staging copy may still use the rank's buffer: the
                 * cluster layer completes the part once it ended (op_free). */
                if (!op->xr && nx_dev_part_complete(p->dev, c->failed_status, c->failed_text))
                    p->client->pending--;
                continue;
            }
            if (nx_part_direct(p)) {
                complete(p->client, p->first.user_data, c->failed_status, c->failed_text);
                p->client->pending--;
                continue;
            }
            for (; p->q_head < p->q_len; p->q_head++) {
                complete(p->client, p->q[p->q_head].user_data, c->failed_status,
                         c->failed_text);
                p->client->pending--;
            }
        }
        op_free(c, op);
    }
}

bool nx_op_rank_holds_up(const struct nx_op *op, uint32_t r)
{
    const struct nx_part *p = &op->parts[r];
    if (!p->client)
        return true;
    if (nx_part_direct(p) || p->q_head < p->q_len || op->next_chunk >= op->nchunks)
        return false;
    /* The slots of the communicator's stream this rank has in nexard: the chunks that
     * its ops' parts across nodes hold (a local op holds none once it ran them). */
    uint32_t held = 0;
    const struct nx_op *o;
    TAILQ_FOREACH(o, &op->comm->match.ops, link)
        held += nx_cluster_ops->coll_held(o, r);
    return held < nx_stream_slot_cap(p->client->seg.hdr.slot_count);
}

/* "2, 3" of the ranks of op that hold up its next chunk, as the ranks number them. */
static void waiting_ranks(const struct nx_op *op, char *buf, size_t len)
{
    size_t off = 0;
    unsigned shown = 0;
    buf[0] = '\0';
    for (uint32_t r = 0; r < op->comm->size && off < len; r++) {
        if (nx_op_rank_holds_up(op, r) && shown++ < 32)
            off += (size_t)snprintf(buf + off, len - off, "%s%u", shown > 1 ? ", " : "",
                                    nx_comm_span_rank(op->comm, r));
    }
}

void nx_match_tick(double now)
{
    /* Failing a communicator completes ops but frees none: drops wait for the flush. */
    struct nx_comm *c;
    LIST_FOREACH(c, &nx_comms, link) {
        if (!c->failed_status)
            nx_p2p_tick(c, now);
        if (!c->failed_status)
            nx_cluster_ops->p2p_tick(c, now);
        nx_pull_drain_tick(c, now, false);
        struct nx_op *op = TAILQ_FIRST(&c->match.ops);
        if (!op || c->failed_status)
            continue;
        if (op->gone_tag && now - op->gone_at >= 1.0) {
            pull_failed(c, op, op->gone_reader, op->gone_peer, op->gone_tag);
            continue;
        }
        double limit = c->timeout_ms / 1000.0;
        if (now - op->started < limit)
            continue; /* who holds it up is asked only once it may be late */
        char ranks[256], readers[256];
        waiting_ranks(op, ranks, sizeof(ranks));
        nx_pull_waiting(op, readers, sizeof(readers));
        /* Held up by other nodes only: the node where a rank is missing names it first,
         * and its text reaches us through the communicator's abort. */
        bool remote = c->x && !ranks[0];
        if (remote && now - op->started < limit + 1.0)
            continue;
        nxd.stats.timeouts++;
        if (remote) {
            char where[1024];
            nx_cluster_ops->coll_describe(op, where, sizeof(where));
            nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                         "%s seq %" PRIu64 " on comm %u (job \"%s\") made no progress for "
                         "%.0f s: its ranks here are all in, %s",
                         nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, limit,
                         where[0] ? where : "other nodes never sent their part");
        } else if (op->arrived < c->size) {
            nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                         "%s seq %" PRIu64 " on comm %u (job \"%s\") timed out after %.0f s: "
                         "rank(s) %s never arrived (%u of %u did%s)",
                         nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, limit,
                         ranks, op->arrived, c->size, c->x ? " at this node" : "");
        } else if (readers[0]) {
            nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                         "%s seq %" PRIu64 " on comm %u (job \"%s\") made no progress for "
                         "%.0f s: rank(s) %s did not finish reading chunk %" PRIu64 " of %"
                         PRIu64 " from the other ranks' slots",
                         nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, limit,
                         readers, op->pull_rel + 1, op->nchunks);
        } else if (ranks[0]) {
            nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                         "%s seq %" PRIu64 " on comm %u (job \"%s\") made no progress for "
                         "%.0f s: rank(s) %s did not submit chunk %" PRIu64 " of %" PRIu64,
                         nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, limit,
                         ranks, op->next_chunk + 1, op->nchunks);
        } else {
            nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                         "%s seq %" PRIu64 " on comm %u (job \"%s\") made no progress for "
                         "%.0f s at chunk %" PRIu64 " of %" PRIu64 ": its ranks are all in, "
                         "and nexard has what they submitted",
                         nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, limit,
                         op->next_chunk + 1, op->nchunks);
        }
    }
}
