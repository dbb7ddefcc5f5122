/* p2p.c - see p2p.h. */
#include "p2p.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cluster_ops.h"
#include "comm.h"
#include "context.h"
#include "devop.h"
#include "devstage.h"
#include "job.h"
#include "mem.h"
#include "nexar.h"
#include "wire.h"

/* One chunk of one side of a message. */
struct nx_pentry {
    uint64_t user_data; /* staged: the chunk's own completion */
    uint64_t off;       /* arena offset of the chunk (send: input, recv: output) */
    uint64_t bytes;
    uint8_t *buf; /* send: the eager copy we own; NULL while parked in the rank's slot */
    bool acked;   /* remote send: the sending node was told it may reuse its slot */
};

struct nx_side {
    struct nx_client *cl; /* NULL for a send from another node (remote) or one whose
                           * sender left (orphan) */
    bool have, direct, completed, remote;
    bool orphan; /* a completed send whose rank left: only our copies remain */
    struct nx_dev_part *dev; /* a device side: its record (no entries, no eager copy) */
    /* A device recv of a send from another node: each piece goes to the device as it
     * comes (landing, below); NULL once every piece went, or the recv failed. */
    struct landing *land;
    struct nx_sqe first;
    uint64_t nchunks, submitted, finished;
    struct nx_pentry *q;
    size_t head, len, cap;
};

struct nx_msg {
    uint32_t src, dst, tag;
    uint64_t k;
    double since; /* last progress, for the deadline */
    struct nx_side s, r;
    TAILQ_ENTRY(nx_msg) link;
};

static void land_close(struct landing *l, uint32_t status, const char *text);

void nx_p2p_init(struct nx_p2p *p)
{
    TAILQ_INIT(&p->msgs);
    p->nmsgs = 0;
}

static struct nx_msg *msg_get(struct nx_comm *c, uint32_t src, uint32_t dst, uint32_t tag,
                              uint64_t k)
{
    struct nx_msg *m;
    TAILQ_FOREACH(m, &c->p2p.msgs, link)
        if (m->src == src && m->dst == dst && m->tag == tag && m->k == k)
            return m;
    m = nx_xcalloc(1, sizeof(*m));
    m->src = src;
    m->dst = dst;
    m->tag = tag;
    m->k = k;
    m->since = nx_now();
    TAILQ_INSERT_TAIL(&c->p2p.msgs, m, link);
    c->p2p.nmsgs++;
    return m;
}

static void side_free(struct nx_side *sd)
{
    /* Remote or orphan chunks still here were never delivered: the message failed. */
    if (sd->remote || sd->orphan)
        for (size_t i = sd->head; i < sd->len; i++)
            free(sd->q[i].buf);
    free(sd->q);
    if (sd->land) /* not reached: a message goes whole or failed */
        land_close(sd->land, NEXAR_ERR_INTERNAL, "the message went before it was whole");
    if (sd->dev) {
        nx_dev_part_release(sd->dev);
        free(sd->dev);
    }
}

static void msg_free(struct nx_comm *c, struct nx_msg *m)
{
    TAILQ_REMOVE(&c->p2p.msgs, m, link);
    side_free(&m->s);
    side_free(&m->r);
    free(m);
}

static void done(struct nx_client *cl, uint64_t user_data, uint32_t status, const char *text)
{
    struct nx_done d = {.user_data = user_data, .status = status};
    nx_client_complete(cl, &d, text);
    cl->pending--;
}

/*
 * A device recv of a send from another node: each piece is copied to the rank's device
 * buffer as it comes, through pinned staging memory (devstage.h), and the recv completes
 * once every piece's copy ended, whatever became of the message meanwhile: its done word
 * is never set while a copy still writes the buffer.
 */
struct landing {
    struct nx_dev_part part; /* iov table not kept */
    uint32_t es;
    uint32_t pending; /* piece copies in flight */
    bool waited;      /* the first copy waited for the rank's ready event */
    bool closed;      /* no more pieces: every one went, or the recv failed */
    uint32_t status;  /* the first failure */
    char text[512];
    char what[256];
};

struct landing_piece {
    struct landing *l;
    struct nx_devstage *st;
};

static void land_fail(struct landing *l, uint32_t status, const char *why)
{
    if (l->status)
        return;
    l->status = status;
    snprintf(l->text, sizeof(l->text), "%s", why);
}

static void land_end(struct landing *l)
{
    struct nx_client *cl = nx_dev_part_complete(&l->part, l->status, l->status ? l->text : NULL);
    if (cl)
        cl->pending--;
    free(l);
}

static void piece_landed(void *arg, uint32_t status, const char *text)
{
    struct landing_piece *lp = arg;
    struct landing *l = lp->l;
    nx_devstage_release(lp->st);
    free(lp);
    if (status != NEXAR_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s: copying it to device memory failed on this node: %s",
                 l->what, text ? text : nx_status_text(status));
        land_fail(l, status, why);
    }
    if (--l->pending == 0 && l->closed)
        land_end(l);
}

/* Piece re of the recv, its bytes at data, to the device. */
static void land_piece(struct nx_comm *c, struct landing *l, const struct nx_pentry *re,
                       const uint8_t *data)
{
    char why[200], text[512];
    if (l->status || re->bytes == 0)
        return; /* after a failure the rest need not go */
    struct landing_piece *lp = nx_xcalloc(1, sizeof(*lp));
    lp->l = l;
    lp->st = nx_devstage_new(c->id, re->bytes, l->what, why, sizeof(why));
    if (!lp->st) {
        snprintf(text, sizeof(text), "%s: %s", l->what, why);
        land_fail(l, NEXAR_ERR_NOMEM, text);
        free(lp);
        return;
    }
    memcpy(nx_devstage_host(lp->st), data, re->bytes);
    /* The first copy waits for the work the rank queued before the recv; the others are
     * behind it on the communicator's stream of copies to the device. */
    uint32_t ev = l->waited ? 0 : l->part.rec.ready_event;
    l->waited = true;
    l->pending++;
    nx_devstage_copy_buf(lp->st, &l->part, &l->part.rec.out, re->off / l->es,
                         re->bytes / l->es, l->es, ev, NX_DEV_H2D, piece_landed, lp);
}

/* No more pieces: the recv completes when the copies in flight ended. */
static void land_close(struct landing *l, uint32_t status, const char *text)
{
    if (status != NEXAR_OK)
        land_fail(l, status, text ? text : nx_status_text(status));
    l->closed = true;
    if (l->pending == 0)
        land_end(l);
}

/* One chunk of side finished (delivered, or eagerly held for a send). */
static void finish_chunk(struct nx_side *sd, const struct nx_pentry *pe)
{
    sd->finished++;
    if (sd->land)
        return; /* one completion, when every piece is on the device (landing) */
    if (!sd->direct)
        done(sd->cl, pe->user_data, NEXAR_OK, NULL);
    else if (sd->finished == sd->nchunks && !sd->completed) {
        sd->completed = true;
        done(sd->cl, sd->first.user_data, NEXAR_OK, NULL);
    }
}

/* A chunk from another node reached its receive: it no longer counts against the
 * buffer, and its sender hears of it now if it did not when it came. */
static void remote_delivered(struct nx_comm *c, struct nx_msg *m, struct nx_pentry *se)
{
    free(se->buf);
    se->buf = NULL;
    m->s.finished++;
    if (se->acked) {
        c->p2p.remote_buffered -= se->bytes;
        return;
    }
    se->acked = true;
    nx_cluster_ops->p2p_ack(c, &m->s.first, m->src, se->off);
}

static bool side_closed(const struct nx_side *sd)
{
    return sd->have && sd->submitted == sd->nchunks && sd->head == sd->len;
}

/* Pairs the chunks both sides have; true when that finished (and freed) the message. */
static bool match(struct nx_comm *c, struct nx_msg *m)
{
    struct nx_side *s = &m->s, *r = &m->r;
    while (s->head < s->len && r->head < r->len) {
        struct nx_pentry *se = &s->q[s->head++], *re = &r->q[r->head++];
        const uint8_t *src = se->buf || !s->cl ? se->buf : s->cl->seg.arena + se->off;
        if (r->land)
            land_piece(c, r->land, re, src);
        else if (re->bytes)
            memcpy(r->cl->seg.arena + re->off, src, re->bytes);
        nxd.stats.bytes_copied += re->bytes;
        if (s->remote) {
            remote_delivered(c, m, se);
        } else if (s->orphan) {
            free(se->buf);
            c->p2p.orphan_bytes -= se->bytes;
        } else if (se->buf) {
            free(se->buf);
            s->cl->p2p_buffered -= se->bytes;
        } else {
            finish_chunk(s, se);
        }
        finish_chunk(r, re);
        if (r->land && r->finished == r->nchunks) {
            r->completed = true;
            land_close(r->land, NEXAR_OK, NULL);
            r->land = NULL;
        }
        m->since = nx_now();
    }
    if (side_closed(s) && side_closed(r)) {
        nxd.stats.p2p_messages++;
        msg_free(c, m);
        return true;
    }
    return false;
}

static void push(struct nx_side *sd, uint64_t user_data, uint64_t off, uint64_t bytes)
{
    nx_grow((void **)&sd->q, &sd->cap, sd->len + 1, sizeof(*sd->q));
    sd->q[sd->len++] = (struct nx_pentry){.user_data = user_data, .off = off, .bytes = bytes};
    sd->submitted++;
}

/* Send chunks are copied out at once while the sender's budget lasts: the rank gets
 * its slot (or buffer) back, and sends never wait for receives in the common case. */
static void eager(struct nx_side *sd)
{
    struct nx_client *cl = sd->cl;
    for (size_t i = sd->head; i < sd->len; i++) {
        struct nx_pentry *pe = &sd->q[i];
        if (pe->buf || pe->bytes == 0 ||
            cl->p2p_buffered + pe->bytes > nxd.cfg.p2p_eager_bytes)
            continue;
        pe->buf = nx_xmalloc(pe->bytes);
        memcpy(pe->buf, cl->seg.arena + pe->off, pe->bytes);
        cl->p2p_buffered += pe->bytes;
        finish_chunk(sd, pe);
    }
}

static void fail_side(struct nx_p2p *pp, struct nx_side *sd, uint32_t status, const char *text)
{
    if (sd->remote || sd->orphan) { /* nothing of a rank's to complete: our copies go */
        for (; sd->head < sd->len; sd->head++) {
            struct nx_pentry *pe = &sd->q[sd->head];
            if (pe->acked)
                pp->remote_buffered -= pe->bytes;
            if (sd->orphan)
                pp->orphan_bytes -= pe->bytes;
            free(pe->buf);
        }
        return;
    }
    for (; sd->head < sd->len; sd->head++) {
        struct nx_pentry *pe = &sd->q[sd->head];
        if (pe->buf) {
            free(pe->buf);
            sd->cl->p2p_buffered -= pe->bytes;
        } else if (!sd->direct) {
            done(sd->cl, pe->user_data, status, text);
        }
    }
    if (sd->direct && sd->have && !sd->completed) {
        sd->completed = true;
        if (sd->land) {
            land_close(sd->land, status, text);
            sd->land = NULL;
        } else if (!sd->dev)
            done(sd->cl, sd->first.user_data, status, text);
        else if (nx_dev_part_complete(sd->dev, status, text))
            sd->cl->pending--;
    }
}

/* "message 3 from rank 0 to rank 2 with tag 5 on comm 1 (job "j")" */
static void msg_what(const struct nx_comm *c, const struct nx_msg *m, char *buf, size_t len)
{
    snprintf(buf, len,
             "message %" PRIu64 " from rank %u to rank %u with tag %u on comm %u (job \"%s\")",
             m->k, m->src, m->dst, m->tag, c->id, c->job->name);
}

/* Both sides are device buffers: the backend copies and completes them. */
static void run_device(struct nx_comm *c, struct nx_msg *m)
{
    char what[256];
    msg_what(c, m, what, sizeof(what));
    struct nx_dev_part parts[2] = {*m->s.dev, *m->r.dev};
    struct nx_dev_job job = {
        .comm_id = c->id,
        .seq = m->k,
        .kind = NX_K_SEND,
        .dtype = m->s.first.dtype,
        .size = 2,
        .count = m->s.first.count,
        .parts = parts,
        .what = what,
        .timeout_ms = c->timeout_ms,
    };
    m->s.completed = m->r.completed = true;
    nx_device->run(&job);
    nxd.stats.p2p_messages++;
    nxd.stats.bytes_copied += m->s.first.count * nx_dtype_size(m->s.first.dtype);
    msg_free(c, m);
}

void nx_p2p_fail_all(struct nx_comm *c)
{
    nx_cluster_ops->p2p_fail_all(c);
    while (!TAILQ_EMPTY(&c->p2p.msgs)) {
        struct nx_msg *m = TAILQ_FIRST(&c->p2p.msgs);
        fail_side(&c->p2p, &m->s, c->failed_status, c->failed_text);
        fail_side(&c->p2p, &m->r, c->failed_status, c->failed_text);
        msg_free(c, m);
    }
}

/* Across nodes the bytes travel through host memory either way: a device send may meet
 * a host recv and the other way round.  On one node they may not (nx_device's run). */
static bool sizes_differ(const struct nx_sqe *a, const struct nx_sqe *b, bool across)
{
    return a->count != b->count || a->dtype != b->dtype ||
           (!across && ((a->flags ^ b->flags) & NX_SQE_DEVICE));
}

static void fail_mismatch(struct nx_comm *c, const struct nx_msg *m, const struct nx_sqe *se,
                          const struct nx_sqe *re)
{
    nxd.stats.mismatches++;
    nx_comm_fail(c, NEXAR_ERR_MISMATCH,
                 "message %" PRIu64 " from rank %u to rank %u with tag %u on comm %u "
                 "(job \"%s\"): the send has count=%" PRIu64 " %s%s but the recv "
                 "expects count=%" PRIu64 " %s%s",
                 m->k, m->src, m->dst, m->tag, c->id, c->job->name, se->count,
                 nx_dtype_name(se->dtype),
                 (se->flags & NX_SQE_DEVICE) ? " in device memory" : "", re->count,
                 nx_dtype_name(re->dtype),
                 (re->flags & NX_SQE_DEVICE) ? " in device memory" : "");
}

/* Whether the communicator's rank r is one of this node's. */
static bool rank_here(const struct nx_comm *c, uint32_t r)
{
    for (uint32_t i = 0; i < c->size; i++)
        if (nx_comm_span_rank(c, i) == r)
            return true;
    return false;
}

/* A device recv whose send comes from another node: its pieces land as a direct recv's
 * do, each copied to the device as it comes (land_piece).  False when that failed the
 * communicator (m is gone). */
static bool land_open(struct nx_comm *c, struct nx_msg *m)
{
    struct nx_side *r = &m->r;
    char what[256];
    msg_what(c, m, what, sizeof(what));
    if (!nx_devstage_available()) {
        nx_comm_fail(c, NEXAR_ERR_UNSUPPORTED, "%s: a device recv across nodes needs a device "
                     "backend that stages it (this one: %s)", what, nx_device->name);
        return false;
    }
    r->land = nx_xcalloc(1, sizeof(*r->land));
    r->land->part = *r->dev;
    r->land->part.iov = NULL;
    r->land->es = nx_dtype_size(r->first.dtype);
    snprintf(r->land->what, sizeof(r->land->what), "%s", what);
    return true;
}

void nx_p2p_submit(struct nx_comm *c, uint32_t rank, struct nx_client *cl,
                   const struct nx_sqe *e)
{
    bool is_send = e->kind == NX_K_SEND;
    /* Messages are named by the ranks as the communicator numbers them. */
    uint32_t me = nx_comm_span_rank(c, rank);
    if (is_send && c->x && nx_cluster_ops->p2p_send(c, rank, cl, e))
        return;
    uint32_t src = is_send ? me : e->peer, dst = is_send ? e->peer : me;
    struct nx_msg *m = msg_get(c, src, dst, e->tag, e->seq);
    struct nx_side *sd = is_send ? &m->s : &m->r, *other = is_send ? &m->r : &m->s;
    uint32_t es = nx_dtype_size(e->dtype);
    uint64_t E = nx_chunk_elems(e->kind, c->size, es, cl->seg.hdr.slot_bytes);

    if (sd->have) {
        if (sd->direct || (e->flags & NX_SQE_DIRECT) || e->chunk != sd->submitted ||
            e->count != sd->first.count || e->dtype != sd->first.dtype)
            return nx_client_violation(cl, "send/recv chunk out of order or inconsistent");
    } else {
        struct nx_dev_part *dev = NULL;
        char why[160];
        if (!(e->flags & NX_SQE_DIRECT) && e->chunk != 0)
            return nx_client_violation(cl, "a message's first descriptor is not chunk 0");
        if (e->flags & NX_SQE_DEVICE) {
            dev = nx_xcalloc(1, sizeof(*dev));
            if (nx_dev_part_load(cl, e, nx_comm_span_size(c), me, dev, why, sizeof(why)) < 0) {
                nx_dev_part_release(dev);
                free(dev);
                return nx_client_violation(cl, why);
            }
        }
        /* Checked before this side joins the message: failing the communicator frees
         * the message, and this descriptor is completed here, once. */
        if (other->have && sizes_differ(&other->first, e, other->remote)) {
            fail_mismatch(c, m, is_send ? e : &other->first, is_send ? &other->first : e);
            if (!dev) {
                struct nx_done d = {.user_data = e->user_data, .status = c->failed_status};
                return nx_client_complete(cl, &d, c->failed_text);
            }
            nx_dev_part_complete(dev, c->failed_status, c->failed_text);
            nx_dev_part_release(dev);
            free(dev);
            return;
        }
        sd->have = true;
        sd->cl = cl;
        sd->first = *e;
        sd->direct = (e->flags & NX_SQE_DIRECT) != 0;
        sd->dev = dev;
        sd->nchunks = nx_chunk_count(e->count, E);
    }
    cl->pending++;
    if (sd->dev && !is_send && c->nodes > 1 && !rank_here(c, src)) {
        if (!land_open(c, m))
            return;
    } else if (sd->dev) {
        if (other->have)
            run_device(c, m);
        return;
    }
    if (sd->direct) {
        for (uint64_t ch = 0; ch < sd->nchunks; ch++) {
            uint64_t off = ch * E, n = e->count - off < E ? e->count - off : E;
            if (e->count == 0)
                n = 0;
            /* a landing recv's chunks: their place in the message */
            uint64_t base = sd->land ? 0 : is_send ? e->in_off : e->out_off;
            push(sd, 0, base + off * es, n * es);
        }
    } else {
        uint64_t off = (uint64_t)e->chunk * E, n = e->count - off < E ? e->count - off : E;
        if (e->count == 0)
            n = 0;
        push(sd, e->user_data, is_send ? e->in_off : e->out_off, n * es);
    }
    if (is_send)
        eager(sd);
    match(c, m);
}

void nx_p2p_tick(struct nx_comm *c, double now)
{
    struct nx_msg *m;
    double limit = c->timeout_ms / 1000.0;
    TAILQ_FOREACH(m, &c->p2p.msgs, link) {
        bool recv_waits = m->r.head < m->r.len || (m->r.dev && !m->s.have);
        bool send_waits = m->s.dev && !m->r.have;
        for (size_t i = m->s.head; i < m->s.len; i++)
            send_waits |= !m->s.remote && m->s.q[i].buf == NULL;
        if ((!recv_waits && !send_waits) || now - m->since < limit)
            continue;
        nxd.stats.timeouts++;
        char node[256];
        if (recv_waits && !m->s.have && nx_cluster_ops->rank_node(c, m->src, node,
                                                                  sizeof(node))) {
            /* The sender's node says nothing until a piece is ready: "no matching send"
             * would be a guess, and a wrong one when a device send cannot leave. */
            nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                         "recv of message %" PRIu64 " from rank %u to rank %u with tag %u on "
                         "comm %u (job \"%s\") received none of it within %.0f s from %s, "
                         "where rank %u is: it has not sent it%s", m->k, m->src, m->dst,
                         m->tag, c->id, c->job->name, limit, node, m->src,
                         m->r.dev ? ", or its node could not copy it off the GPU yet: that "
                         "copy waits for the rank's ready event, which its stream records "
                         "only after the work queued there before the send: " NX_DEV_CYCLE_HINT
                         : "");
            return;
        }
        nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                     "%s of message %" PRIu64 " from rank %u to rank %u with tag %u on comm %u "
                     "(job \"%s\") found no matching %s within %.0f s",
                     recv_waits ? "recv" : "send", m->k, m->src, m->dst, m->tag, c->id,
                     c->job->name, recv_waits ? "send" : "recv", limit);
        return; /* failing freed the list */
    }
}

const char *nx_p2p_remote_piece(struct nx_comm *c, const struct nx_p2p_hdr *h,
                                const uint8_t *data, size_t len)
{
    struct nx_msg *m = msg_get(c, h->src, h->dst, h->tag, h->k);
    struct nx_side *s = &m->s, *r = &m->r;
    uint32_t es = nx_dtype_size(h->dtype);
    uint64_t E = nx_chunk_elems(NX_K_SEND, 1, es, nxd.cfg.slot_bytes);
    if (!s->have) {
        if (h->offset != 0)
            return "p2p: a message's first piece is not at offset 0";
        s->have = s->remote = true;
        s->first = (struct nx_sqe){.kind = NX_K_SEND, .dtype = h->dtype, .count = h->count,
                                   .peer = h->dst, .tag = h->tag, .seq = h->k};
        s->nchunks = nx_chunk_count(h->count, E);
        if (r->have && sizes_differ(&s->first, &r->first, true)) {
            fail_mismatch(c, m, &s->first, &r->first);
            return NULL;
        }
    } else if (h->dtype != s->first.dtype || h->count != s->first.count) {
        return "p2p: the pieces of one message disagree on its size";
    }
    /* Pieces come in order on their channel, one per chunk of the sender's plan, which
     * is ours: the job's nodes share slot_bytes. */
    uint64_t first = s->submitted * E, n = h->count > first ? h->count - first : 0;
    if (n > E)
        n = E;
    if (s->submitted >= s->nchunks || h->offset != first * es || len != n * es) {
        nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                     "message %" PRIu64 " from rank %u to rank %u with tag %u on comm %u "
                     "(job \"%s\"): a piece of %zu bytes at byte %" PRIu64 " where this node "
                     "expects %" PRIu64 " at %" PRIu64 " (do the nodes' slot_bytes differ?)",
                     h->k, h->src, h->dst, h->tag, c->id, c->job->name, len, h->offset,
                     n * es, first * es);
        return NULL;
    }
    push(s, 0, h->offset, len);
    struct nx_pentry *pe = &s->q[s->len - 1];
    if (len) {
        pe->buf = nx_xmalloc(len);
        memcpy(pe->buf, data, len);
    }
    m->since = nx_now();
    size_t idx = s->len - 1;
    if (match(c, m) || idx < s->head)
        return NULL; /* delivered, and acknowledged with it */
    /* Parked: the sender may reuse its slot at once while the buffer lasts. */
    if (c->p2p.remote_buffered + len <= nxd.cfg.p2p_eager_bytes) {
        pe->acked = true;
        c->p2p.remote_buffered += len;
        nx_cluster_ops->p2p_ack(c, &s->first, m->src, pe->off);
    }
    return NULL;
}

/* Whether every chunk of a local send is done from its rank's view: held by us (eager) or
 * delivered.  Such a send completed for the rank; nothing of it is left in its memory. */
static bool send_in_custody(const struct nx_side *sd)
{
    if (!sd->have || sd->dev || sd->submitted < sd->nchunks || sd->finished < sd->nchunks)
        return false;
    for (size_t i = sd->head; i < sd->len; i++)
        if (!sd->q[i].buf && sd->q[i].bytes)
            return false;
    return true;
}

int nx_p2p_leave(struct nx_comm *c, struct nx_client *cl, uint32_t rank, char *why,
                 size_t len)
{
    uint32_t me = nx_comm_span_rank(c, rank);
    struct nx_msg *m;
    /* First look, then change: a refusal leaves every message as it was (the
     * communicator fails next, and completes them). */
    TAILQ_FOREACH(m, &c->p2p.msgs, link) {
        if (m->s.have && m->s.cl == cl && !send_in_custody(&m->s)) {
            snprintf(why, len, "its send of message %" PRIu64 " to rank %u with tag %u has "
                     "not completed", m->k, m->dst, m->tag);
            return -EBUSY;
        }
        if (m->r.have && m->r.cl == cl && !m->r.completed && !side_closed(&m->r)) {
            snprintf(why, len, "its receive of message %" PRIu64 " from rank %u with tag %u "
                     "has not completed", m->k, m->src, m->tag);
            return -EBUSY;
        }
        if (m->dst == me && !m->r.have && m->s.have && !m->s.orphan &&
            (m->s.dev || (m->s.cl && !send_in_custody(&m->s)))) {
            snprintf(why, len, "rank %u's send of message %" PRIu64 " with tag %u waits for "
                     "its receive", m->src, m->k, m->tag);
            return -EBUSY;
        }
    }
    /* Its completed sends are ours now: they are delivered when their receives come, or
     * dropped with the communicator. */
    TAILQ_FOREACH(m, &c->p2p.msgs, link) {
        struct nx_side *s = &m->s;
        if (!s->have || s->cl != cl)
            continue;
        for (size_t i = s->head; i < s->len; i++) {
            cl->p2p_buffered -= s->q[i].bytes;
            c->p2p.orphan_bytes += s->q[i].bytes;
        }
        s->cl = NULL;
        s->orphan = true;
    }
    return 0;
}
