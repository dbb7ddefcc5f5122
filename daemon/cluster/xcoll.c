/* xcoll.c - see xcoll.h. */
#include "xcoll.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "algo.h"
#include "client.h"
#include "cluster.h"
#include "comm.h"
#include "context.h"
#include "devop.h"
#include "devstage.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "op.h"
#include "rendezvous.h"
#include "xcoll_int.h"
#include "xcomm.h"
#include "xlocal.h"

#define ID_BUCKETS 256u

static int depth;
static TAILQ_HEAD(, xpart) ended_q = TAILQ_HEAD_INITIALIZER(ended_q);
static LIST_HEAD(, xpart) by_id[ID_BUCKETS];
static uint32_t next_id = 1;

static void start_parts(struct nx_op *op);
static void complete_part(struct xpart *p);
static void dev_run(struct nx_op *op);
static void dev_complete(struct nx_op *op, uint32_t status, const char *text);

static void complete(struct nx_client *cl, uint64_t user_data, uint32_t status, const char *text,
                     uint32_t algo)
{
    struct nx_done d = {.user_data = user_data, .status = status, .algo = algo};
    nx_client_complete(cl, &d, text);
    cl->pending--;
}

/* ---- part lifecycle ----------------------------------------------------------------- */

struct xpart *xc_part_by_id(uint32_t id)
{
    struct xpart *p;
    LIST_FOREACH(p, &by_id[id % ID_BUCKETS], id_link)
        if (p->id == id)
            return p;
    return NULL;
}

static uint32_t new_id(void)
{
    for (;;) {
        uint32_t id = next_id++ % ID_LIMIT;
        if (id && !xc_part_by_id(id))
            return id;
    }
}

static void part_free(struct xpart *p)
{
    if (p->queued)
        TAILQ_REMOVE(&ended_q, p, q_link);
    LIST_REMOVE(p, op_link);
    LIST_REMOVE(p, id_link);
    p->op->xr->live--;
    nx_xop_destroy(p->x);
    nx_devstage_release(p->dev);
    if (!p->in_place) {
        free(p->in);
        free(p->out);
    }
    free(p->text);
    free(p);
}

/* An xop ended (or could not start): handled once the outermost call returns. */
static void part_ended(struct xpart *p, uint32_t status, const char *text)
{
    if (p->ended)
        return;
    p->ended = true;
    p->status = status;
    p->text = text ? nx_xstrdup(text) : NULL;
    if (status != NEXAR_OK)
        p->op->xr->failed = true; /* start nothing more of it */
    TAILQ_INSERT_TAIL(&ended_q, p, q_link);
    p->queued = true;
}

/* Messages from 64 KiB are lent to a transport that copies on its lanes' threads: the
 * copy leaves the loop thread, which sets the pace with lanes (performance.md). */
#define XC_LEND_MIN (64u << 10)

/* The collective channel of part k of op.  An op of one part (every small op) keeps
 * channel 0, which rides lane 0, the loop thread's own connection: no hand-off between
 * threads.  The parts of a larger op take channels 1-7 in turn, so that with quic_lanes
 * the loop thread, which already makes the reductions (and the copies of what it does not
 * lend), carries little of the bulk: 3 parts in 7 with 2 lanes, 1 in 7 with 4, none with 8
 * (performance.md, "Which thread sets the pace with lanes").  With one connection the
 * channels are only streams, and which one a part takes changes nothing. */
static uint64_t part_channel(const struct nx_op *op, uint64_t k)
{
    return op->nchunks <= 1 ? 0 : 1 + k % (NX_XCOLL_CHANNELS - 1);
}

static int xop_send(void *arg, struct nx_xop *x, const struct nx_xmsg *m)
{
    struct xpart *p = arg;
    struct nx_op *op = p->op;
    struct nx_comm *c = op->comm;
    uint8_t hdr[NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES];
    struct nx_data_hdr h = {
        .job = c->job->net->key,
        .comm = c->x->key,
        .seq = op->seq,
        .step = m->step,
        .sig = m->sig,
        .offset = m->offset + xc_part_base(op, p->index),
        .length = (uint32_t)m->len,
        .src = c->x->node_job[c->x->me],
    };
    xc_sig_put(op, &h);
    size_t hl = nx_wire_put_data(hdr, NX_WIRE_DATA, 0, &h);
    struct iovec stack[9], *iov = stack;
    int n = 1 + (m->iov ? m->iovcnt : m->len > 0);
    if (n > 9)
        iov = nx_xcalloc((size_t)n, sizeof(*iov));
    iov[0] = (struct iovec){hdr, hl};
    if (m->iov)
        memcpy(iov + 1, m->iov, (size_t)m->iovcnt * sizeof(*iov));
    else if (m->len)
        iov[1] = (struct iovec){(void *)m->data, m->len};
    uint64_t token = m->token ? NX_TOKEN_XCOLL | (uint64_t)p->id << 32 | m->token : 0;
    /* All of a part's messages on one channel: the xop's own order holds (algo.h). */
    uint64_t ch = nx_xcomm_coll_channel(c, part_channel(op, p->index));
    int rv = m->lend ? nx_xcomm_lend(c, m->dst, ch, iov, n, token)
                     : nx_xcomm_send(c, m->dst, ch, iov, n, token);
    if (iov != stack)
        free(iov);
    return rv;
}

static void *xop_take(void *arg, const void *data, size_t len)
{
    (void)arg;
    return xc_take(data, len);
}

static void xop_settle(void *arg)
{
    (void)arg;
    struct nx_transport *t = nx_cluster_transport();
    if (t && t->ops->settle)
        t->ops->settle(t);
}

static void xop_what(void *arg, char *buf, size_t len)
{
    struct xpart *p = arg;
    xc_what_of(p->op, p->index, buf, len);
}

static void xop_done(void *arg, struct nx_xop *x, uint32_t status, const char *text)
{
    part_ended(arg, status, text);
}

static void xlocal_of(const struct xpart *p, struct nx_xlocal *j)
{
    const struct nx_op *op = p->op;
    const struct nx_comm *c = op->comm;
    *j = (struct nx_xlocal){
        .kind = op->sig.kind,
        .dtype = op->sig.dtype,
        .redop = op->sig.redop,
        .P = nx_comm_span_size(c),
        .L = c->size,
        .n = p->n,
        .wide = nx_xlocal_wide(op->sig.kind, op->sig.dtype),
        .io = p->io,
        .in = p->in,
        .out = p->out_is_in ? p->in : p->out,
    };
    if (nx_kind_has_root(op->sig.kind)) {
        uint32_t root = op->sig.peer;
        j->root_here = c->x->rank_node[root] == c->x->me;
        for (uint32_t i = 0; i < c->size; i++)
            if (nx_comm_span_rank(c, i) == root)
                j->root_local = i;
    }
}

/* Node-level buffers, the local combine and the xop.  0, or -1 with the reason. */
static int part_setup(struct xpart *p, char *err, size_t errlen)
{
    struct nx_op *op = p->op;
    struct nx_comm *c = op->comm;
    struct nx_xlocal j;
    xlocal_of(p, &j);
    /* Node-level elements: f32 partials for half-type reductions. */
    uint8_t ndtype = j.wide ? NEXAR_F32 : op->sig.dtype;
    uint32_t es = xc_wire_esize(op);
    bool staged = c->size == 1 && (p->staged[0] || p->dev); /* this part's own memory */
    if (p->n && nx_xlocal_in_place(&j, staged, &p->in, &p->out)) {
        p->in_place = true;
    } else {
        uint64_t in_n, out_n;
        nx_xlocal_sizes(&j, &in_n, &out_n, &p->out_is_in);
        p->in = in_n ? nx_xmalloc(in_n * es) : NULL;
        p->out = out_n ? nx_xmalloc(out_n * es) : NULL;
        xlocal_of(p, &j);
        if (nx_xlocal_gather(&nx_adapter_cpu, &j) < 0) {
            snprintf(err, errlen, "the node-local combine of its ranks failed");
            return -1;
        }
    }
    struct nx_xop_desc d = {
        .kind = op->sig.kind,
        .dtype = ndtype,
        .redop = op->sig.redop,
        .algo = c->job->algo_pref[op->sig.kind],
        .count = p->n,
        .root = nx_kind_has_root(op->sig.kind) ? op->sig.peer : 0,
        .nnodes = c->x->nnodes,
        .me = c->x->me,
        .nranks = nx_comm_span_size(c),
        .rank_node = c->x->rank_node,
        .in = p->in,
        .out = p->out_is_in ? p->in : p->out,
        .stride = p->in_place ? p->io[0].out_stride : 0,
        .ad = &nx_adapter_cpu,
        .sig = op->xr->sig,
        .iov_send = 1, /* host buffers: the transport copies as it sends, or lends */
        /* A node that only sends (a root) would otherwise run its parts, and the next
         * op's, ahead of the others, whose data then waits whole for a part not started
         * there and is copied again.  The other kinds need no such wait: every node
         * sends and receives in every step. */
        .gate = xc_needs_confirm(op->sig.kind) && p->index >= XC_UNGATED_PARTS,
    };
    struct nx_transport *t = nx_cluster_transport();
    struct nx_xnet net = {.arg = p, .msg_max = NX_TMSG_MAX, .send = xop_send, .done = xop_done,
                          .what = xop_what, .settle = xop_settle, .take = xop_take,
                          .lend_min = t && t->ops->lend ? XC_LEND_MIN : 0};
    char why[192];
    if (nx_xop_create(&d, &net, &p->x, why, sizeof(why)) < 0) {
        char what[192];
        xc_what_of(op, p->index, what, sizeof(what));
        snprintf(err, errlen, "%s: %s", what, why);
        return -1;
    }
    /* What the op reports: its first part's choice (the others are as large, but for a
     * shorter last one). */
    if (p->index == 0) {
        op->xr->algo = nx_xop_algo_name(p->x);
        op->algo = (uint32_t)nx_algo_parse(op->xr->algo);
    }
    return 0;
}

/* The held messages of p's op that belong to p, in arrival order. */
static void feed_held(struct xpart *p)
{
    struct nx_op *op = p->op;
    struct nx_xcomm *x = op->comm->x;
    struct nx_xheld *h, *tmp;
    for (h = TAILQ_FIRST(&x->held); h; h = tmp) {
        tmp = TAILQ_NEXT(h, link);
        if (h->h.seq != op->seq || h->h.step == NX_XSTEP_CONFIRM ||
            h->h.step == NX_XSTEP_DEVICE || xc_part_of(op, h->h.offset) != p->index)
            continue;
        TAILQ_REMOVE(&x->held, h, link);
        x->held_bytes -= h->len;
        x->held_msgs--;
        xc_feeding_held(h);
        nx_xop_on_data(p->x, h->src, h->h.step, h->h.sig,
                       h->h.offset - xc_part_base(op, p->index), h->data, h->len);
        xc_feeding_held(NULL);
        xc_held_free(h);
    }
}

/* The node-level buffers are built and the xop starts. */
static void part_run(struct xpart *p)
{
    char err[512];
    if (part_setup(p, err, sizeof(err)) < 0) {
        part_ended(p, NEXAR_ERR_INTERNAL, err);
        return;
    }
    /* Started first: what was held for a step the xop is at goes straight in, not into
     * its early store (a copy), as a message that came now would. */
    nx_xop_start(p->x);
    feed_held(p);
}

/* A device backend's copy failed: the part ends with what failed, and where. */
static void part_dev_failed(struct xpart *p, const char *dir, uint32_t status, const char *text)
{
    char what[192], node[192], buf[800];
    struct nx_comm *c = p->op->comm;
    xc_what_of(p->op, p->index, what, sizeof(what));
    nx_xcomm_node_name(c, c->x->me, node, sizeof(node));
    snprintf(buf, sizeof(buf), "%s: staging device buffers %s failed on %s: %s", what, dir,
             node, text ? text : nx_status_text(status));
    part_ended(p, status, buf);
    p->text_whole = true;
}

/* The part's device inputs are in host memory (devstage.h). */
static void part_dev_in(void *arg, uint32_t status, const char *text)
{
    struct xpart *p = arg;
    xc_enter();
    if (status != NEXAR_OK)
        part_dev_failed(p, "in", status, text);
    else
        part_run(p);
    xc_leave();
}

static void part_start(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    struct nx_xrun *xr = op->xr;
    uint64_t k = op->next_chunk++, off = k * op->chunk_elems;
    /* The part and its per-rank arrays in one allocation (part_free frees it whole). */
    struct xpart *p = nx_xcalloc(1, sizeof(*p) + c->size * (sizeof(*p->io) +
                                                            sizeof(*p->user_data) +
                                                            sizeof(*p->staged)));
    p->io = (struct nx_rank_io *)(p + 1);
    p->user_data = (uint64_t *)(p->io + c->size);
    p->staged = (bool *)(p->user_data + c->size);
    p->op = op;
    p->index = k;
    p->n = op->sig.count > off ? op->sig.count - off : 0;
    if (p->n > op->chunk_elems)
        p->n = op->chunk_elems;
    p->id = new_id();
    if (!xc_is_dev(op)) /* a device part's io is its host staging (below) */
        nx_op_chunk_io(op, off, p->n, p->io);
    /* The staged chunks are the part's now: completed when it ends. */
    for (uint32_t r = 0; r < c->size && !xc_is_dev(op); r++) {
        struct nx_part *rp = &op->parts[r];
        if (nx_part_direct(rp))
            continue;
        p->user_data[r] = rp->q[rp->q_head++].user_data;
        p->staged[r] = true;
    }
    LIST_INSERT_HEAD(&xr->parts, p, op_link);
    LIST_INSERT_HEAD(&by_id[p->id % ID_BUCKETS], p, id_link);
    xr->live++;
    op->started = nx_now();
    nxd.stats.chunks++;
    if (xc_is_dev(op)) {
        char err[256], what[192], text[480];
        p->dev = nx_devstage_in(op, off, p->n, p->io, part_dev_in, p, err, sizeof(err));
        if (!p->dev) {
            xc_what_of(op, k, what, sizeof(what));
            snprintf(text, sizeof(text), "%s: %s", what, err);
            part_ended(p, NEXAR_ERR_NOMEM, text);
        }
        return; /* the xop starts when the copies are in */
    }
    part_run(p);
}

/*
 * Every other node of the communicator hears that this node ran the op to its end
 * (NX_XSTEP_CONFIRM), or that its ranks all called it on device buffers
 * (NX_XSTEP_DEVICE).
 *
 * A confirmation goes once, on the first channel: it is counted whenever it comes, and
 * neither it nor the op's data is read in the light of the other.  A device note goes on
 * every collective channel, ahead of any of the op's data (dev_run sends it before the
 * parts may start): a receiver takes this node's data on channel k only after the note
 * on channel k (xc_dev_agrees), and one note on one channel could be overtaken there by
 * data on another.  The copies after the first count nothing (xc_confirmed_by); those
 * that come after the op ended at the receiver are dropped there as stale.
 */
static void send_note(struct nx_op *op, uint32_t step)
{
    struct nx_comm *c = op->comm;
    uint8_t hdr[NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES];
    struct nx_data_hdr h = {.job = c->job->net->key, .comm = c->x->key, .seq = op->seq,
                            .step = step, .sig = op->xr->sig,
                            .src = c->x->node_job[c->x->me]};
    xc_sig_put(op, &h);
    struct iovec iov = {hdr, nx_wire_put_data(hdr, NX_WIRE_DATA, 0, &h)};
    /* A node lost on the way fails the job through the rendezvous. */
    unsigned nch = step == NX_XSTEP_DEVICE ? NX_XCOLL_CHANNELS : 1;
    for (uint32_t i = 0; i < c->x->nnodes; i++)
        for (unsigned ch = 0; ch < nch && i != c->x->me; ch++)
            nx_xcomm_send(c, i, nx_xcomm_coll_channel(c, ch), &iov, 1, 0);
}

/* Only the oldest ops of a communicator run: what other nodes may send ahead stays
 * bounded (XC_HELD_BYTES) whatever the ranks queue. */
static bool may_run(const struct nx_op *op)
{
    unsigned i = 0;
    const struct nx_op *it;
    TAILQ_FOREACH(it, &op->comm->match.ops, link) {
        if (it == op)
            return true;
        if (++i >= XC_OPS_PER_COMM)
            return false;
    }
    return false;
}

void xc_drop_held(struct nx_comm *c, bool all, uint64_t seq)
{
    struct nx_xcomm *x = c->x;
    struct nx_xheld *h, *tmp;
    for (h = TAILQ_FIRST(&x->held); h; h = tmp) {
        tmp = TAILQ_NEXT(h, link);
        if (!all && h->h.seq != seq)
            continue;
        TAILQ_REMOVE(&x->held, h, link);
        x->held_bytes -= h->len;
        x->held_msgs--;
        xc_held_free(h);
    }
}

void xc_held_free(struct nx_xheld *h)
{
    free(h->buf);
    free(h);
}

/* The ops behind a finished one may run now. */
static void kick(struct nx_comm *c)
{
    unsigned i = 0;
    struct nx_op *it;
    TAILQ_FOREACH(it, &c->match.ops, link) {
        if (i++ >= XC_OPS_PER_COMM)
            break;
        /* A newly allowed op has no part ending yet, so this never frees it. */
        if (it->xr && !it->xr->failed && (!xc_is_dev(it) || it->xr->dev_agreed))
            start_parts(it);
    }
}

static void start_parts(struct nx_op *op)
{
    struct nx_xrun *xr = op->xr;
    if (xc_is_dev(op) && !xr->dev_agreed)
        return dev_run(op);
    /* A confirmation says what this node's ranks called, known once they all came: sent
     * now, it crosses while the op runs, not after it (one trip, not two, for a root that
     * only sends). */
    if (xc_op_confirms(op) && !xr->confirm_sent && op->arrived == op->comm->size) {
        xr->confirm_sent = true;
        send_note(op, NX_XSTEP_CONFIRM);
    }
    while (!xr->failed && op->next_chunk < op->nchunks && xr->live < XC_PARTS_PER_OP &&
           may_run(op) && (xc_is_dev(op) || nx_op_chunk_ready(op)))
        part_start(op);
    if (xr->failed || xr->done < op->nchunks)
        return;
    struct nx_comm *c = op->comm;
    if (xc_op_confirms(op)) {
        if (!xr->confirm_sent) {
            xr->confirm_sent = true;
            send_note(op, NX_XSTEP_CONFIRM);
        }
        if (xr->confirms + 1 < c->x->nnodes)
            return;
        if (!LIST_EMPTY(&xr->parts))
            complete_part(LIST_FIRST(&xr->parts)); /* the last one, kept for this */
    }
    if (nx_kind_has_redop(op->sig.kind))
        nxd.stats.bytes_reduced += op->sig.count * xc_esize(op) * c->size;
    else
        nxd.stats.bytes_copied += op->sig.count * xc_esize(op) * c->size;
    xc_drop_held(c, false, op->seq); /* stale now */
    if (xc_is_dev(op))
        dev_complete(op, NEXAR_OK, NULL);
    nx_op_finish(op);
    kick(c);
}

/* The part's staged chunks complete; the part goes. */
static void complete_part(struct xpart *p)
{
    struct nx_op *op = p->op;
    for (uint32_t r = 0; r < op->comm->size; r++)
        if (p->staged[r])
            complete(op->parts[r].client, p->user_data[r], NEXAR_OK, NULL, op->algo);
    part_free(p);
}

static void part_fail_text(struct xpart *p, char *buf, size_t len)
{
    char leg[512] = "";
    if (!p->text_whole)
        xc_legend(p->op->comm, leg, sizeof(leg));
    snprintf(buf, len, "%s%s", p->text ? p->text : nx_status_text(p->status), leg);
}

static void part_done(struct xpart *p);
static void part_dev_out(void *arg, uint32_t status, const char *text);

static void handle_ended(struct xpart *p)
{
    struct nx_op *op = p->op;
    struct nx_comm *c = op->comm;
    if (p->status != NEXAR_OK) {
        char text[1024];
        part_fail_text(p, text, sizeof(text));
        if (p->status == NEXAR_ERR_MISMATCH)
            nxd.stats.mismatches++;
        nx_comm_fail(c, p->status, "%s", text); /* frees op, p with it */
        return;
    }
    if (!p->in_place) {
        struct nx_xlocal j;
        xlocal_of(p, &j);
        nx_xlocal_scatter(&nx_adapter_cpu, &j);
    }
    if (p->dev)
        return nx_devstage_out(p->dev, part_dev_out, p);
    part_done(p);
}

/* The part's outputs are back in the ranks' device buffers. */
static void part_dev_out(void *arg, uint32_t status, const char *text)
{
    struct xpart *p = arg;
    xc_enter();
    if (status != NEXAR_OK) {
        p->ended = false; /* ended again, with the copy's failure */
        part_dev_failed(p, "out", status, text);
    } else {
        part_done(p);
    }
    xc_leave();
}

/* The part ran to its end here and its results are in the ranks' buffers. */
static void part_done(struct xpart *p)
{
    struct nx_op *op = p->op;
    op->xr->done++;
    if (xc_op_confirms(op) && op->xr->done == op->nchunks) {
        /* The ranks' last chunks complete once every node confirmed (start_parts). */
        nx_xop_destroy(p->x);
        p->x = NULL;
    } else {
        complete_part(p);
    }
    op->started = nx_now();
    start_parts(op);
}

void xc_enter(void)
{
    depth++;
}

/* The outermost return handles the ended parts, at depth 1 so that nothing it calls
 * drains again. */
void xc_leave(void)
{
    if (--depth > 0)
        return;
    depth++;
    struct xpart *p;
    while ((p = TAILQ_FIRST(&ended_q))) {
        TAILQ_REMOVE(&ended_q, p, q_link);
        p->queued = false;
        handle_ended(p);
    }
    depth--;
}

/* ---- the matcher's side ------------------------------------------------------------- */

/* Every local rank's part of a device op completes (its done word, its completion). */
static void dev_complete(struct nx_op *op, uint32_t status, const char *text)
{
    op->xr->dev_completed = true;
    for (uint32_t r = 0; r < op->comm->size; r++) {
        struct nx_part *p = &op->parts[r];
        if (p->dev && nx_dev_part_complete(p->dev, status, text))
            p->client->pending--;
    }
}

/*
 * A device op across nodes runs only once every node said that all its ranks called it on
 * device buffers (NX_XSTEP_DEVICE): a node whose ranks called it on host buffers fails
 * the communicator with a mismatch instead, and none waits for the deadline.  Its parts
 * then stage through host memory (devstage.h); a backend that cannot ends it with
 * NEXAR_ERR_UNSUPPORTED, and the communicator stays usable.
 */
static void dev_run(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    struct nx_xrun *xr = op->xr;
    if (xr->failed || op->arrived < c->size)
        return;
    if (!xr->confirm_sent) {
        xr->confirm_sent = true;
        send_note(op, NX_XSTEP_DEVICE);
    }
    if (xr->confirms + 1 < c->x->nnodes)
        return;
    if (nx_devstage_available()) {
        xr->dev_agreed = true;
        return start_parts(op);
    }
    char text[320];
    snprintf(text, sizeof(text),
             "%s on device buffers on communicator %u (job \"%s\"), which spans %u nodes: "
             "this nexard's device backend (%s) cannot stage them across nodes",
             nx_kind_name(op->sig.kind), c->id, c->job->name, c->x->nnodes, nx_device->name);
    dev_complete(op, NEXAR_ERR_UNSUPPORTED, text);
    xc_drop_held(c, false, op->seq);
    nx_op_finish(op);
}

void xc_confirmed_by(struct nx_op *op, uint32_t node, unsigned ci)
{
    struct nx_xrun *xr = op->xr;
    bool first = !xr->confirmed[node];
    xr->confirmed[node] |= (uint8_t)(1u << ci);
    if (!first)
        return; /* a device note's copy on another channel */
    xr->confirms++;
    if (xr->confirm_sent)
        start_parts(op); /* may finish it */
}

void nx_xcoll_run(struct nx_op *op)
{
    xc_enter();
    if (!op->xr) {
        struct nx_comm *c = op->comm;
        struct nx_xrun *xr = nx_xcalloc(1, sizeof(*xr) + c->x->nnodes);
        LIST_INIT(&xr->parts);
        xr->sig = xc_op_sig(op);
        xr->confirmed = (uint8_t *)(xr + 1); /* freed with xr */
        op->xr = xr;
        /* Another node may have started something else at this sequence already; what
         * it confirmed is counted now. */
        struct nx_xheld *h, *tmp;
        for (h = TAILQ_FIRST(&c->x->held); h; h = tmp) {
            tmp = TAILQ_NEXT(h, link);
            if (h->h.seq != op->seq)
                continue;
            if (!xc_sig_same(op, &h->h)) {
                xc_mismatch(c, op, h->src, &h->h); /* frees op */
                xc_leave();
                return;
            }
            bool note = h->h.step == NX_XSTEP_DEVICE;
            if (!xc_dev_agrees(op, h->src, note, h->ci)) {
                xc_mismatch_dev(c, op, h->src); /* frees op */
                xc_leave();
                return;
            }
            if (h->h.step != NX_XSTEP_CONFIRM && !note)
                continue;
            TAILQ_REMOVE(&c->x->held, h, link);
            c->x->held_msgs--;
            xc_confirmed_by(op, h->src, h->ci); /* nothing sent yet: starts nothing */
            xc_held_free(h);
        }
    }
    start_parts(op);
    xc_leave();
}

void nx_xcoll_op_free(struct nx_op *op)
{
    struct nx_xrun *xr = op->xr;
    struct nx_comm *c = op->comm;
    uint32_t status = c->failed_status ? c->failed_status : NEXAR_ERR_INTERNAL;
    /* A device op's ranks complete once no staging copy uses their buffers (devstage.h). */
    struct nx_devwait *w = NULL;
    if (xc_is_dev(op) && !xr->dev_completed) {
        w = nx_devwait_new(status, c->failed_text);
        for (uint32_t r = 0; r < c->size; r++)
            if (op->parts[r].dev && op->parts[r].client)
                nx_devwait_add(w, op->parts[r].dev);
        xr->dev_completed = true;
    }
    while (!LIST_EMPTY(&xr->parts)) {
        struct xpart *p = LIST_FIRST(&xr->parts);
        for (uint32_t r = 0; r < c->size; r++)
            if (p->staged[r] && op->parts[r].client)
                complete(op->parts[r].client, p->user_data[r], status, c->failed_text, 0);
        if (w) {
            nx_devstage_release_to(p->dev, w);
            p->dev = NULL;
        }
        part_free(p);
    }
    if (w)
        nx_devwait_arm(w);
    free(xr);
    op->xr = NULL;
}

/* ---- inspection --------------------------------------------------------------------- */

void nx_xcoll_describe(const struct nx_op *op, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!op->xr)
        return;
    const struct xpart *oldest = NULL, *p;
    LIST_FOREACH(p, &op->xr->parts, op_link)
        if (!oldest || p->index < oldest->index)
            oldest = p;
    if (op->xr->confirm_sent && !op->xr->dev_agreed) {
        size_t off = (size_t)snprintf(buf, len, "waiting for the %s of",
                                      xc_is_dev(op) ? "device note" : "confirmation");
        for (uint32_t i = 0; i < op->comm->x->nnodes && off < len; i++) {
            if (i == op->comm->x->me || op->xr->confirmed[i])
                continue;
            buf[off++] = ' ';
            if (off < len)
                nx_xcomm_node_name(op->comm, i, buf + off, len - off);
            off += strlen(buf + off);
        }
        return;
    }
    if (oldest && oldest->dev && (!oldest->x || oldest->ended)) {
        snprintf(buf, len, "part %" PRIu64 "/%" PRIu64 ": copying device buffers %s",
                 oldest->index + 1, op->nchunks, oldest->ended ? "back" : "in");
        return;
    }
    if (!oldest || !oldest->x)
        return;
    char st[256], leg[512];
    nx_xop_describe(oldest->x, st, sizeof(st));
    xc_legend(op->comm, leg, sizeof(leg));
    snprintf(buf, len, "part %" PRIu64 "/%" PRIu64 " (%s): %s%s", oldest->index + 1,
             op->nchunks, nx_xop_algo_name(oldest->x), st, leg);
}

uint32_t nx_xcoll_held(const struct nx_op *op, uint32_t r)
{
    uint32_t n = 0;
    const struct xpart *p;
    if (op->xr)
        LIST_FOREACH(p, &op->xr->parts, op_link)
            n += p->staged && p->staged[r];
    return n;
}

const char *nx_xcoll_algo(const struct nx_op *op)
{
    return op->xr ? op->xr->algo : NULL;
}
