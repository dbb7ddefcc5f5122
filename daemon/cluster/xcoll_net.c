/* xcoll_net.c - the other nodes' DATA messages for collectives: routed to their op and
 * part, held while early, checked against what this node called (xcoll.h). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "algo.h"
#include "cluster.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "matcher.h"
#include "mem.h"
#include "nexar.h"
#include "wire.h"
#include "op.h"
#include "xcoll.h"
#include "xcoll_int.h"
#include "xcomm.h"

/* Every local rank is past seq: its op ended here (or failed). */
static bool ended_here(const struct nx_comm *c, uint64_t seq)
{
    for (uint32_t r = 0; r < c->size; r++)
        if (c->match.next_seq[r] <= seq)
            return false;
    return true;
}

/* The whole message nx_xcoll_on_data is delivering, as the transport gave it, or the held
 * message feed_held is: what must be kept of it stays in that buffer, taken, instead of
 * being copied (xc_take). */
static const uint8_t *cur_raw;
static size_t cur_rawlen;
static struct nx_xheld *cur_held;

#define XC_TAKE_MIN 4096 /* smaller ones are copied: cheaper than a buffer of their own */

void *xc_take(const void *data, size_t len)
{
    const uint8_t *d = data;
    struct nx_transport *t = nx_cluster_transport();
    void *buf = NULL;
    if (len < XC_TAKE_MIN)
        return NULL;
    if (cur_held && cur_held->buf && d == cur_held->data && len == cur_held->len) {
        buf = cur_held->buf;
        cur_held->buf = NULL;
    } else if (cur_raw && d >= cur_raw && d + len <= cur_raw + cur_rawlen && t &&
               t->ops->take) {
        buf = t->ops->take(t, cur_raw);
        cur_raw = NULL; /* the transport's no longer */
    }
    return buf;
}

void xc_feeding_held(struct nx_xheld *h)
{
    cur_held = h;
}

static void hold(struct nx_comm *c, uint32_t node, unsigned ci, const struct nx_data_hdr *h,
                 const void *data, size_t len)
{
    struct nx_xcomm *x = c->x;
    if (x->held_bytes + len > XC_HELD_BYTES || x->held_msgs >= XC_HELD_MSGS) {
        char who[160];
        nx_xcomm_node_name(c, node, who, sizeof(who));
        nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                     "comm %u (job \"%s\"): %s sent more than %llu MiB or %u messages for "
                     "ops this node's ranks have not reached (at seq %" PRIu64 ")",
                     c->id, c->job->name, who, (unsigned long long)(XC_HELD_BYTES >> 20),
                     XC_HELD_MSGS, h->seq);
        return;
    }
    void *buf = xc_take(data, len); /* data stays where it is, now ours */
    struct nx_xheld *e = nx_xmalloc(sizeof(*e) + (buf ? 0 : len));
    *e = (struct nx_xheld){.h = *h, .src = node, .ci = (uint8_t)ci, .len = len, .buf = buf,
                           .data = buf ? data : e->inl};
    if (!buf)
        memcpy(e->inl, data, len);
    TAILQ_INSERT_TAIL(&x->held, e, link);
    x->held_bytes += len;
    x->held_msgs++;
}

static struct xpart *live_part(const struct nx_xrun *xr, uint64_t k)
{
    struct xpart *p;
    LIST_FOREACH(p, &xr->parts, op_link)
        if (p->index == k)
            return p;
    return NULL;
}

/* A DATA message for c from comm node `node` on its collective channel ci. */
static void deliver(struct nx_comm *c, uint32_t node, unsigned ci, const struct nx_data_hdr *h,
                    const void *data, size_t len)
{
    bool confirm = h->step == NX_XSTEP_CONFIRM, note = h->step == NX_XSTEP_DEVICE;
    if ((confirm || note) && (len || h->offset || (confirm && !xc_needs_confirm(h->kind)))) {
        char who[160];
        nx_xcomm_node_name(c, node, who, sizeof(who));
        nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                     "comm %u (job \"%s\"): %s sent a malformed confirmation of seq %" PRIu64,
                     c->id, c->job->name, who, h->seq);
        return;
    }
    struct nx_op *op = nx_match_op_find(&c->match, h->seq);
    if (!op) {
        if (!ended_here(c, h->seq))
            hold(c, node, ci, h, data, len);
        return; /* else a late credit, or a device note's copy on a slower channel */
    }
    if (!op->xr || !xc_sig_same(op, h))
        return xc_mismatch(c, op, node, h); /* another op here (or a split) */
    if (!xc_dev_agrees(op, node, note, ci))
        return xc_mismatch_dev(c, op, node);
    if (confirm || note) {
        /* A confirmation comes once; a device note once per channel (send_note). */
        if (confirm ? op->xr->confirmed[node] != 0 : op->xr->confirmed[node] >> ci & 1) {
            char who[160];
            nx_xcomm_node_name(c, node, who, sizeof(who));
            nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                         "comm %u (job \"%s\"): %s confirmed seq %" PRIu64 " twice", c->id,
                         c->job->name, who, h->seq);
            return;
        }
        return xc_confirmed_by(op, node, ci);
    }
    uint64_t k = xc_part_of(op, h->offset);
    if (k >= op->nchunks) {
        char who[160];
        nx_xcomm_node_name(c, node, who, sizeof(who));
        nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                     "%s seq %" PRIu64 " on comm %u (job \"%s\"): %s sent data at byte %" PRIu64
                     ", past the op's %" PRIu64 " parts (do the nodes' slot_bytes differ?)",
                     nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, who, h->offset,
                     op->nchunks);
        return;
    }
    struct xpart *p = live_part(op->xr, k);
    if (p) {
        if (p->ended)
            return;
        if (!p->x) /* a device part still copying in: fed when its xop starts */
            return hold(c, node, ci, h, data, len);
        nx_xop_on_data(p->x, node, h->step, h->sig, h->offset - xc_part_base(op, k), data, len);
        return;
    }
    if (k >= op->next_chunk)
        hold(c, node, ci, h, data, len);
    /* else that part ended here: a late credit */
}

const char *nx_xcoll_on_data(struct nx_tpeer *tp, uint64_t channel, const struct nx_wire_msg *w,
                             const void *raw, size_t rawlen)
{
    struct nx_comm *c;
    uint32_t node;
    const char *why = NULL;
    int r = nx_xcomm_route(tp, channel, w, raw, rawlen, &c, &node, &why);
    if (r <= 0)
        return r < 0 ? why : NULL;
    xc_enter();
    cur_raw = raw;
    cur_rawlen = rawlen;
    deliver(c, node, (unsigned)(channel - c->x->chan0), &w->hdr, w->body, w->body_len);
    cur_raw = NULL;
    xc_leave();
    return NULL;
}

/* ---- streamed receives -------------------------------------------------------------- */

/* A DATA message going into its xop as the packets bring it.  The part is found again by
 * id for every piece (and must still run the same xop): it may end between two pieces. */
struct xc_sink {
    uint32_t part_id;
    const struct nx_xop *x;
    size_t skip; /* envelope and header bytes still to pass over */
    struct nx_xstream s;
};

void *nx_xcoll_stream_begin(struct nx_tpeer *tp, uint64_t channel, const struct nx_wire_msg *w)
{
    const struct nx_data_hdr *h = &w->hdr;
    struct nx_comm *c;
    uint32_t node;
    const char *why;
    /* Only the plain case: the comm, op and part here, the step this node waits in.  The
     * rest (early, held, confirmations, mismatches, errors) comes whole and is judged
     * by deliver. */
    if (w->type != NX_WIRE_DATA || h->step >= NX_XSTEP_DEVICE || h->length == 0 ||
        nx_xcomm_route(tp, channel, w, NULL, 0, &c, &node, &why) <= 0)
        return NULL;
    struct nx_op *op = nx_match_op_find(&c->match, h->seq);
    if (!op || !op->xr || !xc_sig_same(op, h) ||
        !xc_dev_agrees(op, node, false, (unsigned)(channel - c->x->chan0)))
        return NULL;
    uint64_t k = xc_part_of(op, h->offset);
    struct xpart *p = k < op->nchunks ? live_part(op->xr, k) : NULL;
    if (!p || p->ended || !p->x)
        return NULL;
    struct xc_sink *sk = nx_xmalloc(sizeof(*sk));
    if (!nx_xop_stream_begin(p->x, node, h->step, h->sig, h->offset - xc_part_base(op, k),
                             h->length, &sk->s)) {
        free(sk);
        return NULL;
    }
    sk->part_id = p->id;
    sk->x = p->x;
    sk->skip = NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES;
    return sk;
}

static struct xpart *sink_part(const struct xc_sink *sk)
{
    struct xpart *p = xc_part_by_id(sk->part_id);
    return p && p->x == sk->x && !p->ended ? p : NULL;
}

void nx_xcoll_stream_data(void *sink, const void *data, size_t n)
{
    struct xc_sink *sk = sink;
    const uint8_t *d = data;
    size_t t = sk->skip < n ? sk->skip : n;
    sk->skip -= t, d += t, n -= t;
    struct xpart *p = n ? sink_part(sk) : NULL;
    if (!p)
        return; /* the part ended meanwhile: its xop said why */
    nxd.stats.bytes_streamed += n;
    xc_enter();
    nx_xop_stream_data(p->x, &sk->s, d, n);
    xc_leave();
}

void nx_xcoll_stream_end(void *sink, int whole)
{
    struct xc_sink *sk = sink;
    struct xpart *p = whole ? NULL : sink_part(sk);
    if (p)
        nx_xop_stream_broken(p->x, &sk->s);
    free(sk);
}

void nx_xcoll_on_sent(uint64_t token)
{
    struct xpart *p = xc_part_by_id((uint32_t)(token >> 32) % ID_LIMIT);
    if (!p || p->ended || !p->x)
        return;
    xc_enter();
    nx_xop_on_sent(p->x, (uint32_t)token);
    xc_leave();
}

void nx_xcoll_on_copied(uint64_t token)
{
    struct xpart *p = xc_part_by_id((uint32_t)(token >> 32) % ID_LIMIT);
    if (!p || p->ended || !p->x)
        return; /* an ended part's xop settled first (nx_xop_fail) */
    xc_enter();
    nx_xop_on_copied(p->x, (uint32_t)token);
    xc_leave();
}

void nx_xcoll_comm_gone(struct nx_comm *c)
{
    xc_drop_held(c, true, 0);
}
