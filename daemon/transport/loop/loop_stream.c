/*
 * loop_stream.c - reliable, ordered messages per channel over the loop net's lossy packets:
 * the channel map and the sending side (the receiving side is loop_recv.c).
 *
 * Sender: each message is cut into segments of at most mtu bytes, numbered per channel
 * (pseq), so that a loss on one channel never holds up another.  A segment is sent when
 * the peer's window has room (channels take turns), and sent again when its ACK is late
 * (retransmission timeout from the measured RTT, doubled while nothing is acknowledged)
 * or when an ACK arrives for a segment sent more than REORDER_PKTS transmissions after
 * it.  A message is done, and on_sent fires, once all its segments are acknowledged and
 * all earlier messages of its channel are done.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop_int.h"
#include "mem.h"

#define MAX_FLIGHT_PKTS 1024u /* unacknowledged segments per peer */
#define REORDER_PKTS 3u       /* later transmissions acknowledged before a segment is lost */
#define RTO_MAX_MS 1000u

struct lmsg {
    struct lmsg *next;
    struct lbuf *buf;
    uint64_t token;
    uint64_t cut_off; /* bytes already cut into segments */
    uint32_t segs, segs_acked;
    int all_cut;
};

struct lseg {
    struct lseg *fl_prev, *fl_next;
    struct lmsg *m;
    uint64_t channel, pseq, off;
    uint32_t len;
    uint64_t tx, sent_at;
    uint32_t sends;
    int acked, in_flight;
};

/* ---- the channel map: open addressing, never shrinks (channels live as long as the
 * connection, like QUIC streams that were used) ---- */

static size_t chan_hash(uint64_t id, size_t cap)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (size_t)id & (cap - 1);
}

static struct lchan *chan_find(const struct lpeer *p, uint64_t id)
{
    if (!p->capchans)
        return NULL;
    for (size_t i = chan_hash(id, p->capchans);; i = (i + 1) & (p->capchans - 1)) {
        struct lchan *c = p->chans[i];
        if (!c || c->id == id)
            return c;
    }
}

static void chan_insert(struct lchan **tab, size_t cap, struct lchan *c)
{
    size_t i = chan_hash(c->id, cap);
    while (tab[i])
        i = (i + 1) & (cap - 1);
    tab[i] = c;
}

struct lchan *lchan_get(struct lpeer *p, uint64_t id)
{
    struct lchan *c = chan_find(p, id);
    if (c)
        return c;
    if (2 * (p->nchans + 1) > p->capchans) {
        size_t cap = p->capchans ? 2 * p->capchans : 16;
        struct lchan **tab = nx_xcalloc(cap, sizeof(*tab));
        for (size_t i = 0; i < p->capchans; i++)
            if (p->chans[i])
                chan_insert(tab, cap, p->chans[i]);
        free(p->chans);
        p->chans = tab;
        p->capchans = cap;
    }
    c = nx_xcalloc(1, sizeof(*c));
    c->id = id;
    chan_insert(p->chans, p->capchans, c);
    p->nchans++;
    return c;
}

uint32_t lstream_count(const struct lpeer *p)
{
    return (uint32_t)p->nchans;
}

/* ---- rings indexed by sequence number ---- */

static struct lseg **sslot(struct lchan *c, uint64_t pseq)
{
    return &c->sring[pseq & (c->scap - 1)];
}

static void sring_room(struct lchan *c)
{
    if (c->snd_next - c->snd_una < c->scap)
        return;
    size_t cap = c->scap ? 2 * c->scap : 16;
    struct lseg **r = nx_xcalloc(cap, sizeof(*r));
    for (uint64_t q = c->snd_una; q < c->snd_next; q++)
        r[q & (cap - 1)] = *sslot(c, q);
    free(c->sring);
    c->sring = r;
    c->scap = cap;
}

/* ---- RTT and retransmission timeout (RFC 6298) ---- */

static uint32_t rto_initial(const struct nx_loopnet_conf *c)
{
    return c->rto_min_ms + 2 * (c->delay_ms + c->jitter_ms) +
           (c->reorder > 0 ? c->reorder_ms : 0);
}

static uint32_t rto_max(const struct nx_loopnet_conf *c)
{
    uint32_t m = 4 * rto_initial(c);
    return m > RTO_MAX_MS ? m : RTO_MAX_MS;
}

/* The timeout from the estimates, without backoff. */
static void rto_reset(struct lpeer *p)
{
    const struct nx_loopnet_conf *c = &p->ep->net->conf;
    if (p->min_rtt < 0)
        return; /* no sample yet: keep the initial guess and its backoff */
    double rto = p->srtt + (4 * p->rttvar > 1 ? 4 * p->rttvar : 1);
    if (rto < c->rto_min_ms)
        rto = c->rto_min_ms;
    if (rto > rto_max(c))
        rto = rto_max(c);
    p->rto = (uint32_t)rto;
}

static void rtt_sample(struct lpeer *p, double r)
{
    if (p->min_rtt < 0) {
        p->srtt = r;
        p->rttvar = r / 2;
        p->min_rtt = r;
        return;
    }
    double d = p->srtt > r ? p->srtt - r : r - p->srtt;
    p->rttvar = 0.75 * p->rttvar + 0.25 * d;
    p->srtt = 0.875 * p->srtt + 0.125 * r;
    if (r < p->min_rtt)
        p->min_rtt = r;
}

void lstream_init(struct lpeer *p)
{
    p->min_rtt = -1;
    p->rto = rto_initial(&p->ep->net->conf);
}

/* ---- sending ---- */

static void fl_unlink(struct lpeer *p, struct lseg *s)
{
    if (s->fl_prev)
        s->fl_prev->fl_next = s->fl_next;
    else
        p->fl_head = s->fl_next;
    if (s->fl_next)
        s->fl_next->fl_prev = s->fl_prev;
    else
        p->fl_tail = s->fl_prev;
    s->fl_prev = s->fl_next = NULL;
}

static void fl_append(struct lpeer *p, struct lseg *s)
{
    s->fl_prev = p->fl_tail;
    s->fl_next = NULL;
    if (p->fl_tail)
        p->fl_tail->fl_next = s;
    else
        p->fl_head = s;
    p->fl_tail = s;
}

/* (Re)sends s; the in-flight list stays ordered by transmission. */
static void transmit(struct lpeer *p, struct lseg *s)
{
    struct lpkt *pkt = lpkt_new(LPKT_DATA);
    pkt->channel = s->channel;
    pkt->pseq = s->pseq;
    pkt->buf = lbuf_ref(s->m->buf);
    pkt->frag_off = s->off;
    pkt->len = s->len;
    if (s->in_flight) {
        fl_unlink(p, s);
        p->st.pkts_lost++;
    } else {
        s->in_flight = 1;
        p->fl_bytes += s->len;
        p->fl_pkts++;
    }
    fl_append(p, s);
    s->tx = ++p->next_tx;
    s->sent_at = lnet_now(p->ep->net);
    s->sends++;
    pkt->tx = s->tx;
    lpeer_xmit(p, pkt);
}

static void ready_push(struct lpeer *p, struct lchan *c)
{
    if (c->ready)
        return;
    c->ready = 1;
    c->ready_next = NULL;
    if (p->ready_tail)
        p->ready_tail->ready_next = c;
    else
        p->ready_head = c;
    p->ready_tail = c;
}

static struct lchan *ready_pop(struct lpeer *p)
{
    struct lchan *c = p->ready_head;
    if (!c)
        return NULL;
    p->ready_head = c->ready_next;
    if (!p->ready_head)
        p->ready_tail = NULL;
    c->ready = 0;
    c->ready_next = NULL;
    return c;
}

/* Cuts and sends c's next segment. */
static void send_next(struct lpeer *p, struct lchan *c)
{
    struct lmsg *m = c->cursor;
    uint32_t mtu = p->ep->net->conf.mtu;
    uint64_t left = m->buf->len - m->cut_off;
    struct lseg *s = nx_xcalloc(1, sizeof(*s));
    s->m = m;
    s->channel = c->id;
    s->off = m->cut_off;
    s->len = (uint32_t)(left < mtu ? left : mtu);
    sring_room(c);
    s->pseq = c->snd_next++;
    *sslot(c, s->pseq) = s;
    m->segs++;
    m->cut_off += s->len;
    if (m->cut_off == m->buf->len) { /* an empty message is one empty segment */
        m->all_cut = 1;
        c->cursor = m->next;
    }
    transmit(p, s);
}

void lstream_pump(struct lpeer *p)
{
    const struct nx_loopnet_conf *conf = &p->ep->net->conf;
    size_t blocked = 0, n = 0;
    for (struct lchan *c = p->ready_head; c; c = c->ready_next)
        n++;
    /* Channels take turns, one segment each; a channel whose receiver window is full
     * goes to the back, and a full round of those ends the turn. */
    while (blocked < n && p->fl_bytes < conf->window_bytes && p->fl_pkts < MAX_FLIGHT_PKTS &&
           lpeer_alive(p)) {
        struct lchan *c = ready_pop(p);
        if (c->snd_next - c->snd_una >= CHAN_WINDOW) {
            ready_push(p, c);
            blocked++;
            continue;
        }
        blocked = 0;
        send_next(p, c);
        if (c->cursor)
            ready_push(p, c);
        else
            n--;
    }
}

int lstream_send(struct lpeer *p, uint64_t channel, const struct iovec *iov, int iovcnt,
                 uint64_t token)
{
    size_t total = 0;
    if (iovcnt < 0 || (iovcnt > 0 && !iov))
        return -EINVAL;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len && !iov[i].iov_base)
            return -EINVAL;
        if (iov[i].iov_len > NX_TMSG_MAX - total)
            return -EMSGSIZE;
        total += iov[i].iov_len;
    }
    struct lbuf *b = lbuf_new(total);
    size_t off = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len)
            memcpy(b->data + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    struct lmsg *m = nx_xcalloc(1, sizeof(*m));
    m->buf = b;
    m->token = token;
    struct lchan *c = lchan_get(p, channel);
    if (c->sq_tail)
        c->sq_tail->next = m;
    else
        c->sq_head = m;
    c->sq_tail = m;
    if (!c->cursor)
        c->cursor = m;
    ready_push(p, c);
    p->st.queued_bytes += total;
    return 0;
}

/* ---- acknowledgements ---- */

static void ack_seg(struct lpeer *p, struct lseg *s)
{
    s->acked = 1;
    s->m->segs_acked++;
    if (s->in_flight) {
        fl_unlink(p, s);
        s->in_flight = 0;
        p->fl_bytes -= s->len;
        p->fl_pkts--;
    }
}

/* Pops c's finished messages in order and reports them; 0 when p went away meanwhile. */
static int finish_msgs(struct lpeer *p, struct lchan *c)
{
    struct nx_transport *t = &p->ep->base;
    struct lmsg *m;
    while ((m = c->sq_head) && m->all_cut && m->segs_acked == m->segs) {
        c->sq_head = m->next;
        if (!c->sq_head)
            c->sq_tail = NULL;
        p->st.queued_bytes -= m->buf->len;
        p->st.bytes_sent += m->buf->len;
        p->st.msgs_sent++;
        uint64_t token = m->token;
        lbuf_unref(m->buf);
        free(m);
        if (token && t->cb.on_sent) {
            t->cb.on_sent(t->cb.arg, &p->base, token);
            if (!lpeer_alive(p))
                return 0;
        }
    }
    return 1;
}

void lstream_on_ack(struct lpeer *p, const struct lpkt *pkt)
{
    struct lchan *c = chan_find(p, pkt->channel);
    uint64_t now = lnet_now(p->ep->net);
    /* Never trust the other side: an ACK beyond what we sent is ignored whole. */
    if (!c || pkt->pseq >= c->snd_next || pkt->cum > c->snd_next || pkt->tx > p->next_tx)
        return;
    int progress = 0;
    double latest = -1;
    if (pkt->pseq >= c->snd_una) {
        struct lseg *s = *sslot(c, pkt->pseq);
        if (!s->acked) {
            /* The ACK names the transmission it answers, so a resent segment still gives
             * an RTT sample, as long as it is the latest copy that arrived. */
            if (pkt->tx == s->tx) {
                latest = (double)(now - s->sent_at);
                rtt_sample(p, latest);
            }
            ack_seg(p, s);
            progress = 1;
        }
    }
    for (uint64_t q = c->snd_una; q < pkt->cum; q++) {
        struct lseg *s = *sslot(c, q);
        if (!s->acked) {
            ack_seg(p, s);
            progress = 1;
        }
    }
    while (c->snd_una < c->snd_next && (*sslot(c, c->snd_una))->acked) {
        free(*sslot(c, c->snd_una));
        *sslot(c, c->snd_una) = NULL;
        c->snd_una++;
    }
    if (!progress)
        return;
    /* The path delivers again: drop the backoff.  (Under heavy loss most ACKs may answer
     * resent segments; keeping the backoff until a clean sample, as RFC 6298 would,
     * stalls such a path for seconds.) */
    rto_reset(p);
    /* A segment sent REORDER_PKTS transmissions before one that arrived, and longer ago
     * than a round trip and a bit, is lost rather than overtaken (both conditions: the
     * simulated jitter reorders far more than real paths do). */
    double rtt = p->srtt > latest ? p->srtt : latest;
    uint64_t old_enough = (uint64_t)(rtt * 9 / 8) + 1;
    while (p->fl_head && p->fl_head->tx + REORDER_PKTS < pkt->tx &&
           p->fl_head->sent_at + old_enough <= now)
        transmit(p, p->fl_head);
    if (!finish_msgs(p, c))
        return;
    lstream_pump(p);
}

void lstream_on_timer(struct lpeer *p, uint64_t now)
{
    int fired = 0;
    while (p->fl_head && p->fl_head->sent_at + p->rto <= now) {
        transmit(p, p->fl_head);
        fired = 1;
    }
    if (fired) {
        uint32_t m = rto_max(&p->ep->net->conf);
        p->rto = p->rto * 2 < m ? p->rto * 2 : m;
    }
}

uint64_t lstream_deadline(const struct lpeer *p)
{
    return p->fl_head ? p->fl_head->sent_at + p->rto : UINT64_MAX;
}

/* ---- teardown ---- */

static void chan_free(struct lchan *c)
{
    while (c->sq_head) {
        struct lmsg *m = c->sq_head;
        c->sq_head = m->next;
        lbuf_unref(m->buf);
        free(m);
    }
    for (uint64_t q = c->snd_una; q < c->snd_next; q++)
        free(*sslot(c, q));
    free(c->sring);
    lrecv_free(c);
    free(c);
}

void lstream_free_all(struct lpeer *p)
{
    for (size_t i = 0; i < p->capchans; i++)
        if (p->chans[i])
            chan_free(p->chans[i]);
    free(p->chans);
    p->chans = NULL;
    p->nchans = p->capchans = 0;
    p->ready_head = p->ready_tail = NULL;
    p->fl_head = p->fl_tail = NULL;
    p->fl_bytes = 0;
    p->fl_pkts = 0;
    p->st.queued_bytes = 0;
}
