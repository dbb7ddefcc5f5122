/* xp2p.c - see xp2p.h. */
#include "xp2p.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "comm.h"
#include "context.h"
#include "devop.h"
#include "devstage.h"
#include "job.h"
#include "mem.h"
#include "nexar.h"
#include "p2p.h"
#include "rendezvous.h"
#include "xcomm.h"

/* One chunk of a send: its descriptor (staged) and where its bytes are in the arena (a
 * device send's: in its dpiece instead). */
struct piece {
    uint64_t user_data, off, bytes;
};

/* A piece of a device send in host memory (devstage.h); ready once its copy ended. */
struct dpiece {
    struct nx_xsend *xs;
    struct nx_devstage *st;
    bool ready;
};

/* A local rank's send to a rank on another node. */
struct nx_xsend {
    TAILQ_ENTRY(nx_xsend) link;
    struct nx_comm *comm;
    struct nx_client *cl;
    uint32_t rank; /* local index of the sender */
    uint32_t src;  /* the sender as the communicator numbers it */
    struct nx_sqe first; /* dst in peer, tag, message number in seq */
    bool direct;
    uint32_t es;
    uint64_t E, nchunks;
    uint64_t submitted, sent, acked; /* chunks */
    struct piece *q;                 /* q[i]: chunk i, grown as chunks come (a count is
                                        only the rank's word) */
    size_t cap;
    double since; /* last progress */
    /* A send from device memory: its pieces are copied to host memory a window ahead of
     * the acknowledgements (chunk i in dp[i % XP_WINDOW]) and sent from there, so the
     * copy of one overlaps the sending of others, and a message of any size holds at
     * most XP_WINDOW pieces of host memory. */
    struct nx_dev_part *dev;
    struct dpiece dp[XP_WINDOW];
    uint64_t staging; /* chunks whose copy started */
};

static struct nx_xsend *find(struct nx_comm *c, uint32_t src, uint32_t dst, uint32_t tag,
                             uint64_t k)
{
    struct nx_xsend *xs;
    TAILQ_FOREACH(xs, &c->x->sends, link)
        if (xs->src == src && xs->first.peer == dst && xs->first.tag == tag &&
            xs->first.seq == k)
            return xs;
    return NULL;
}

static void xs_free(struct nx_comm *c, struct nx_xsend *xs)
{
    TAILQ_REMOVE(&c->x->sends, xs, link);
    for (unsigned i = 0; i < XP_WINDOW; i++)
        nx_devstage_release(xs->dp[i].st);
    if (xs->dev) {
        nx_dev_part_release(xs->dev);
        free(xs->dev);
    }
    free(xs->q);
    free(xs);
}

static void complete(struct nx_client *cl, uint64_t user_data, uint32_t status, const char *text)
{
    struct nx_done d = {.user_data = user_data, .status = status};
    nx_client_complete(cl, &d, text);
    cl->pending--;
}

/* The send ended for its rank: the descriptor (or the device record) completes. */
static void complete_send(struct nx_xsend *xs, uint32_t status, const char *text)
{
    if (!xs->dev)
        return complete(xs->cl, xs->first.user_data, status, text);
    if (nx_dev_part_complete(xs->dev, status, text))
        xs->cl->pending--;
}

static void msg_name(struct nx_comm *c, const struct nx_xsend *xs, char *buf, size_t len)
{
    char node[160];
    const struct nx_sqe *e = &xs->first;
    nx_xcomm_node_name(c, c->x->rank_node[e->peer], node, sizeof(node));
    snprintf(buf, len,
             "message %" PRIu64 " from rank %u to rank %u (at %s) with tag %u on comm %u "
             "(job \"%s\")",
             e->seq, xs->src, e->peer, node, e->tag, c->id, c->job->name);
}

/* The header of a piece (or its acknowledgement) of the send described by send (dst in
 * peer, message number in seq) from rank src. */
static size_t put_hdr(uint8_t *out, const struct nx_comm *c, const struct nx_sqe *send,
                      uint32_t src, uint32_t flags, uint64_t offset, uint32_t length)
{
    struct nx_p2p_hdr h = {
        .job = c->job->net->key,
        .comm = c->x->key,
        .k = send->seq,
        .tag = send->tag,
        .src = src,
        .dst = send->peer,
        .dtype = send->dtype,
        .count = send->count,
        .offset = offset,
        .length = length,
    };
    return nx_wire_put_p2p(out, flags, &h);
}

static bool stage_more(struct nx_comm *c, struct nx_xsend *xs);

/* Sends what the window allows.  False when that failed the communicator (xs is gone). */
static bool pump(struct nx_comm *c, struct nx_xsend *xs)
{
    uint64_t channel = nx_xcomm_p2p_channel(c, xs->first.tag);
    uint32_t node = c->x->rank_node[xs->first.peer];
    if (xs->dev && !stage_more(c, xs))
        return false;
    while (xs->sent < xs->submitted && xs->sent - xs->acked < XP_WINDOW) {
        const struct piece *pc = &xs->q[xs->sent];
        struct dpiece *dp = xs->dev ? &xs->dp[xs->sent % XP_WINDOW] : NULL;
        if (dp && !dp->ready)
            break; /* its copy has not ended */
        uint8_t hdr[NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES];
        size_t hl = put_hdr(hdr, c, &xs->first, xs->src, 0, xs->sent * xs->E * xs->es,
                            (uint32_t)pc->bytes);
        uint8_t *data = dp ? nx_devstage_host(dp->st) : xs->cl->seg.arena + pc->off;
        struct iovec iov[2] = {{hdr, hl}, {data, pc->bytes}};
        int rv = nx_xcomm_send(c, node, channel, iov, pc->bytes ? 2 : 1, 0);
        if (rv < 0) {
            char what[320];
            msg_name(c, xs, what, sizeof(what));
            nx_comm_fail(c, rv == -ENOTCONN ? NEXAR_ERR_PEER_LOST : NEXAR_ERR_INTERNAL,
                         "%s: cannot send to its node: %s", what, strerror(-rv));
            return false;
        }
        if (dp) { /* the transport copied it */
            nx_devstage_release(dp->st);
            *dp = (struct dpiece){.xs = xs};
        }
        xs->sent++;
    }
    return true;
}

/* A piece of a device send is in host memory. */
static void piece_in(void *arg, uint32_t status, const char *text)
{
    struct dpiece *dp = arg;
    struct nx_xsend *xs = dp->xs;
    struct nx_comm *c = xs->comm;
    if (status != NEXAR_OK) {
        char what[320], node[192];
        msg_name(c, xs, what, sizeof(what));
        nx_xcomm_node_name(c, c->x->me, node, sizeof(node));
        nx_comm_fail(c, status, "%s: staging its device buffer failed on %s: %s", what, node,
                     text ? text : nx_status_text(status));
        return;
    }
    dp->ready = true;
    xs->since = nx_now();
    pump(c, xs);
}

/* Starts the copies of the pieces the window has room for.  False when that failed the
 * communicator (xs is gone). */
static bool stage_more(struct nx_comm *c, struct nx_xsend *xs)
{
    while (xs->staging < xs->nchunks && xs->staging < xs->acked + XP_WINDOW) {
        uint64_t ch = xs->staging, off = ch * xs->E, n = xs->q[ch].bytes / xs->es;
        struct dpiece *dp = &xs->dp[ch % XP_WINDOW];
        char what[320], why[256];
        msg_name(c, xs, what, sizeof(what));
        dp->st = nx_devstage_new(c->id, n * xs->es, what, why, sizeof(why));
        if (!dp->st) {
            nx_comm_fail(c, NEXAR_ERR_NOMEM, "%s: %s", what, why);
            return false;
        }
        xs->staging++;
        /* One stream carries a communicator's copies to the host in order: only the
         * first waits. */
        nx_devstage_copy_buf(dp->st, xs->dev, &xs->dev->rec.in, off, n, xs->es,
                             ch ? 0 : xs->dev->rec.ready_event, NX_DEV_D2H, piece_in, dp);
    }
    return true;
}

/* A send from device memory to another node, staged piece by piece (stage_more) and sent
 * as a direct send's pieces: its record.  False when it ended here (xs is gone). */
static bool dev_load(struct nx_comm *c, struct nx_xsend *xs, const struct nx_sqe *e)
{
    char why[512], what[320];
    struct nx_dev_part *dev = nx_xcalloc(1, sizeof(*dev));
    struct nx_client *cl = xs->cl;
    if (nx_dev_part_load(cl, e, nx_comm_span_size(c), xs->src, dev, why, sizeof(why)) < 0) {
        nx_dev_part_release(dev);
        free(dev);
        xs_free(c, xs);
        nx_client_violation(cl, why);
        return false;
    }
    xs->dev = dev;
    xs->direct = true; /* one record, completed when the last piece is acknowledged */
    for (unsigned i = 0; i < XP_WINDOW; i++)
        xs->dp[i].xs = xs;
    if (nx_devstage_available())
        return true;
    msg_name(c, xs, what, sizeof(what));
    snprintf(why, sizeof(why), "%s: device buffers across nodes need a device backend that "
             "stages them (this one: %s)", what, nx_device->name);
    cl->pending++;
    complete_send(xs, NEXAR_ERR_UNSUPPORTED, why);
    xs_free(c, xs);
    return false;
}

void nx_xp2p_submit(struct nx_comm *c, uint32_t rank, struct nx_client *cl,
                    const struct nx_sqe *e)
{
    uint32_t src = nx_comm_span_rank(c, rank);
    struct nx_xsend *xs = find(c, src, e->peer, e->tag, e->seq);
    if (xs) {
        if (xs->direct || (e->flags & NX_SQE_DIRECT) || e->chunk != xs->submitted ||
            e->count != xs->first.count || e->dtype != xs->first.dtype)
            return nx_client_violation(cl, "send chunk out of order or inconsistent");
    } else {
        if (!(e->flags & NX_SQE_DIRECT) && e->chunk != 0)
            return nx_client_violation(cl, "a message's first descriptor is not chunk 0");
        xs = nx_xcalloc(1, sizeof(*xs));
        xs->comm = c;
        xs->cl = cl;
        xs->rank = rank;
        xs->src = src;
        xs->first = *e;
        xs->direct = (e->flags & NX_SQE_DIRECT) != 0;
        xs->es = nx_dtype_size(e->dtype);
        xs->E = nx_chunk_elems(NX_K_SEND, 1, xs->es, cl->seg.hdr.slot_bytes);
        xs->nchunks = nx_chunk_count(e->count, xs->E);
        xs->since = nx_now();
        TAILQ_INSERT_TAIL(&c->x->sends, xs, link);
        if ((e->flags & NX_SQE_DEVICE) && !dev_load(c, xs, e))
            return;
    }
    cl->pending++;
    uint64_t first = xs->direct ? 0 : e->chunk, last = xs->direct ? xs->nchunks : first + 1;
    nx_grow((void **)&xs->q, &xs->cap, last, sizeof(*xs->q));
    for (uint64_t ch = first; ch < last; ch++) {
        uint64_t off = ch * xs->E, n = e->count > off ? e->count - off : 0;
        if (n > xs->E)
            n = xs->E;
        xs->q[ch] = (struct piece){
            .user_data = e->user_data,
            .off = xs->direct ? e->in_off + off * xs->es : e->in_off,
            .bytes = n * xs->es,
        };
    }
    xs->submitted = last;
    pump(c, xs);
}

static const char *on_ack(struct nx_comm *c, const struct nx_p2p_hdr *h)
{
    struct nx_xsend *xs = find(c, h->src, h->dst, h->tag, h->k);
    if (!xs || xs->acked >= xs->sent || h->offset != xs->acked * xs->E * xs->es)
        return "p2p: an acknowledgement of a piece that is not the oldest in flight";
    const struct piece *pc = &xs->q[xs->acked++];
    if (!xs->direct)
        complete(xs->cl, pc->user_data, NEXAR_OK, NULL);
    xs->since = nx_now();
    if (xs->acked == xs->nchunks) {
        if (xs->direct)
            complete_send(xs, NEXAR_OK, NULL);
        xs_free(c, xs);
        return NULL;
    }
    pump(c, xs);
    return NULL;
}

const char *nx_xp2p_on_msg(struct nx_tpeer *p, uint64_t channel, const struct nx_wire_msg *w,
                           const void *raw, size_t rawlen)
{
    struct nx_comm *c;
    uint32_t node;
    const char *why = NULL;
    int r = nx_xcomm_route(p, channel, w, raw, rawlen, &c, &node, &why);
    if (r <= 0)
        return r < 0 ? why : NULL;
    if (w->flags & NX_WIRE_F_ACK)
        return on_ack(c, &w->p2p);
    return nx_p2p_remote_piece(c, &w->p2p, w->body, w->body_len);
}

void nx_xp2p_ack(struct nx_comm *c, const struct nx_sqe *send, uint32_t src, uint64_t offset)
{
    uint8_t hdr[NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES];
    struct iovec iov = {hdr, put_hdr(hdr, c, send, src, NX_WIRE_F_ACK, offset, 0)};
    /* A lost node fails the job through the rendezvous: nothing to do here. */
    nx_xcomm_send(c, c->x->rank_node[src], nx_xcomm_p2p_channel(c, send->tag), &iov, 1, 0);
}

void nx_xp2p_fail_all(struct nx_comm *c)
{
    if (!c->x)
        return;
    while (!TAILQ_EMPTY(&c->x->sends)) {
        struct nx_xsend *xs = TAILQ_FIRST(&c->x->sends);
        if (xs->dev) { /* once no staging copy reads its buffer (devstage.h) */
            struct nx_devwait *w = nx_devwait_new(c->failed_status, c->failed_text);
            nx_devwait_add(w, xs->dev);
            for (unsigned i = 0; i < XP_WINDOW; i++) {
                nx_devstage_release_to(xs->dp[i].st, w);
                xs->dp[i].st = NULL;
            }
            nx_devwait_arm(w);
        } else if (xs->direct) {
            complete_send(xs, c->failed_status, c->failed_text);
        } else {
            for (uint64_t i = xs->acked; i < xs->submitted; i++)
                complete(xs->cl, xs->q[i].user_data, c->failed_status, c->failed_text);
        }
        xs_free(c, xs);
    }
}

void nx_xp2p_tick(struct nx_comm *c, double now)
{
    if (!c->x)
        return;
    double limit = c->timeout_ms / 1000.0;
    struct nx_xsend *xs;
    TAILQ_FOREACH(xs, &c->x->sends, link) {
        /* A device send whose next piece is still being copied off the GPU has sent
         * nothing the receiver could acknowledge: that copy is what waits. */
        bool copying = xs->dev && xs->sent < xs->staging &&
                       !xs->dp[xs->sent % XP_WINDOW].ready;
        if ((xs->sent == xs->acked && !copying) || now - xs->since < limit)
            continue;
        char what[320];
        msg_name(c, xs, what, sizeof(what));
        nxd.stats.timeouts++;
        if (copying) {
            char node[256];
            nx_xcomm_node_name(c, c->x->me, node, sizeof(node));
            nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                         "send of %s: its device buffer was not copied off the GPU on %s "
                         "within %.0f s. The copy waits for rank %u's ready event, which its "
                         "stream records only after the work queued there before the send: "
                         NX_DEV_CYCLE_HINT, what, node, limit, xs->src);
            return;
        }
        nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                     "send of %s found no matching recv within %.0f s (the receiving node "
                     "holds it without a recv and has no room for more)", what, limit);
        return; /* failing freed the list */
    }
}
