/*
 * quic_stream.c - messages on streams: the send side (the receive side is quic_recv.c).
 *
 * Each (peer, channel) gets one unidirectional stream, opened lazily once the connection
 * is confirmed.  Wire format of a stream:
 *
 *     preamble  "nxq1" | channel (u64, big endian)            12 bytes, once
 *     record    length (u32, big endian, <= NX_TMSG_MAX) | payload      repeated
 *
 * send() copies the message into one allocation (header + payload) queued on the channel.
 * ngtcp2 is handed vectors straight into that queue; a message is freed, and on_sent
 * called, only when acked_stream_data_offset has passed its last byte, since ngtcp2 keeps
 * pointers into it for retransmission until then.
 *
 * Channels with unsent data sit in a ring on the peer; each packet starts with the next
 * channel of the ring and may coalesce several (WRITE_MORE), so no channel waits behind
 * another's large message.
 *
 * Streams are lanes that never close.  The peer bounds how many we may open (its
 * max_streams); past that, a channel waiting for a stream takes over the lane of the
 * channel idle the longest (everything it sent acknowledged) by writing a switch record,
 *
 *     NX_QSWITCH (u32) | channel (u64, big endian)
 *
 * after which the stream carries the new channel.  Nothing of the old channel can be
 * overtaken: all of it was delivered before the switch.  (Closing streams instead would
 * hit an ngtcp2 0.12 bug: a peer-opened unidirectional stream never closes, issue #662.)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mem.h"
#include "quic_int.h"

#define NX_QVEC_MAX 16

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* ---- the ready ring and the open queue (they share the links: exclusive states) ---- */

static void ready_add(struct nx_qpeer *p, struct nx_qchan *ch)
{
    if (ch->in_ready || ch->blocked || ch->stream_id < 0)
        return;
    ch->in_ready = 1;
    if (!p->ready) {
        ch->rnext = ch->rprev = ch;
        p->ready = ch;
        return;
    }
    ch->rnext = p->ready;
    ch->rprev = p->ready->rprev;
    ch->rprev->rnext = ch;
    p->ready->rprev = ch;
}

static void ready_del(struct nx_qpeer *p, struct nx_qchan *ch)
{
    if (!ch->in_ready)
        return;
    ch->in_ready = 0;
    if (ch->rnext == ch) {
        p->ready = NULL;
    } else {
        ch->rprev->rnext = ch->rnext;
        ch->rnext->rprev = ch->rprev;
        if (p->ready == ch)
            p->ready = ch->rnext;
    }
    ch->rnext = ch->rprev = NULL;
}

static void open_add(struct nx_qpeer *p, struct nx_qchan *ch)
{
    if (ch->in_open || ch->stream_id >= 0)
        return;
    ch->in_open = 1;
    ch->rnext = NULL;
    if (p->open_tail)
        p->open_tail->rnext = ch;
    else
        p->open_head = ch;
    p->open_tail = ch;
}

static int has_unsent(const struct nx_qchan *ch)
{
    return ch->wmsg != NULL || (ch->head && ch->wstream < ch->pre_off + NX_QPRE_LEN);
}

/* Has bytes the writer may give ngtcp2 now: while rolling over, only up to roll_end. */
static int writable(const struct nx_qchan *ch)
{
    return has_unsent(ch) && (!ch->peer->rolling || ch->wstream < ch->roll_end);
}

static void idle_add(struct nx_qpeer *p, struct nx_qchan *ch)
{
    if (ch->in_idle)
        return;
    ch->in_idle = 1;
    ch->inext = NULL;
    ch->iprev = p->idle_tail;
    if (p->idle_tail)
        p->idle_tail->inext = ch;
    else
        p->idle_head = ch;
    p->idle_tail = ch;
}

static void idle_del(struct nx_qpeer *p, struct nx_qchan *ch)
{
    if (!ch->in_idle)
        return;
    ch->in_idle = 0;
    if (ch->iprev)
        ch->iprev->inext = ch->inext;
    else
        p->idle_head = ch->inext;
    if (ch->inext)
        ch->inext->iprev = ch->iprev;
    else
        p->idle_tail = ch->iprev;
    ch->inext = ch->iprev = NULL;
}

/* Puts a channel with data where the writer will find it. */
static void chan_kick(struct nx_qpeer *p, struct nx_qchan *ch)
{
    if (!p->conn || !p->conn->confirmed || !writable(ch))
        return;
    if (ch->stream_id < 0)
        open_add(p, ch);
    else
        ready_add(p, ch);
    nx_quic_schedule_flush(p->conn);
}

/* ---- send side ---- */

static struct nx_qchan *chan_get(struct nx_qpeer *p, uint64_t channel)
{
    uint8_t key[8];
    put_be64(key, channel);
    struct nx_qchan *ch = nx_qmap_get(&p->chans, key, sizeof(key));
    if (ch)
        return ch;
    ch = nx_xcalloc(1, sizeof(*ch));
    ch->peer = p;
    ch->channel = channel;
    ch->stream_id = -1;
    memcpy(ch->pre, NX_QMAGIC, 4);
    put_be64(ch->pre + 4, channel);
    ch->head_off = NX_QPRE_LEN;
    nx_qmap_put(&p->chans, key, sizeof(key), ch);
    return ch;
}

static struct nx_qmsg *msg_init(struct nx_qmsg *m, size_t cap, size_t total)
{
    m->cap = cap;
    m->next = NULL;
    m->token = 0;
    m->len = NX_QREC_HDR + total;
    m->data[0] = (uint8_t)(total >> 24);
    m->data[1] = (uint8_t)(total >> 16);
    m->data[2] = (uint8_t)(total >> 8);
    m->data[3] = (uint8_t)total;
    return m;
}

static void msg_queue(struct nx_qpeer *p, struct nx_qchan *ch, struct nx_qmsg *m)
{
    size_t total = m->len - NX_QREC_HDR;
    idle_del(p, ch);
    if (ch->tail)
        ch->tail->next = m;
    else
        ch->head = m;
    ch->tail = m;
    if (!ch->wmsg) {
        ch->wmsg = m;
        ch->woff = 0;
    }
    p->queued_bytes += total;
    p->bytes_sent += total;
    p->msgs_sent++;
    chan_kick(p, ch);
}

int nx_qstream_send(struct nx_qpeer *p, uint64_t channel, const struct iovec *iov, int iovcnt,
                    uint64_t token)
{
    size_t total = 0;
    if (iovcnt < 0 || (iovcnt > 0 && !iov) || channel == NX_QCHAN_ROLL)
        return -EINVAL;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > NX_TMSG_MAX || total + iov[i].iov_len > NX_TMSG_MAX)
            return -EMSGSIZE;
        total += iov[i].iov_len;
    }
    struct nx_qchan *ch = chan_get(p, channel);
    size_t cap;
    struct nx_qmsg *m = nx_bufpool_get(p->q->bufs, sizeof(*m) + NX_QREC_HDR + total, &cap);
    msg_init(m, cap, total);
    m->token = token;
    size_t off = NX_QREC_HDR;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len)
            memcpy(m->data + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    msg_queue(p, ch, m);
    return 0;
}

void *nx_quic_msg_new(struct nx_bufpool *bufs, size_t len, uint8_t **payload)
{
    size_t cap;
    struct nx_qmsg *m = nx_bufpool_get(bufs, sizeof(*m) + NX_QREC_HDR + len, &cap);
    *payload = msg_init(m, cap, len)->data + NX_QREC_HDR;
    return m;
}

void nx_quic_msg_free(struct nx_bufpool *bufs, void *msg)
{
    if (msg)
        nx_bufpool_put(bufs, msg, ((struct nx_qmsg *)msg)->cap);
}

int nx_qstream_send_built(struct nx_qpeer *p, uint64_t channel, void *msg, uint64_t token)
{
    struct nx_qmsg *m = msg;
    if (channel == NX_QCHAN_ROLL || m->len - NX_QREC_HDR > NX_TMSG_MAX) {
        nx_bufpool_put(p->q->bufs, m, m->cap);
        return channel == NX_QCHAN_ROLL ? -EINVAL : -EMSGSIZE;
    }
    m->token = token;
    msg_queue(p, chan_get(p, channel), m);
    return 0;
}

/* ---- lanes ---- */

static void chan_free(struct nx_qpeer *p, struct nx_qchan *ch)
{
    uint8_t key[8];
    put_be64(key, ch->channel);
    nx_qmap_del(&p->chans, key, sizeof(key));
    free(ch);
}

/* Hands the stream of the longest-idle channel to ch; 0, or -1 when none is idle. */
static int take_lane(struct nx_qconn *c, struct nx_qchan *ch)
{
    struct nx_qpeer *p = c->peer;
    struct nx_qchan *from = p->idle_head;
    if (!from)
        return -1;
    idle_del(p, from);
    ch->stream_id = from->stream_id;
    ch->pre_off = from->wstream; /* == everything it sent, all acknowledged */
    ch->wstream = ch->pre_off;
    ch->head_off = ch->pre_off + NX_QPRE_LEN;
    memset(ch->pre, 0xff, 4); /* NX_QSWITCH */
    put_be64(ch->pre + 4, ch->channel);
    ngtcp2_conn_set_stream_user_data(c->conn, ch->stream_id, ch);
    NX_DEBUG("quic", "%s: channel %llu takes stream %lld over from idle channel %llu",
             p->base.addr, (unsigned long long)ch->channel, (long long)ch->stream_id,
             (unsigned long long)from->channel);
    chan_free(p, from); /* it had nothing queued; a later message makes a new one */
    return 0;
}

static void kick_one(void *val, void *arg)
{
    chan_kick(arg, val);
}

void nx_qstream_kick_all(struct nx_qpeer *p)
{
    nx_qmap_each(&p->chans, kick_one, p);
}

void nx_qstream_open_pending(struct nx_qconn *c)
{
    struct nx_qpeer *p = c->peer;
    if (c != p->conn || p->rolling)
        return; /* channels without a stream wait for the successor */
    while (p->open_head) {
        struct nx_qchan *ch = p->open_head;
        int64_t sid;
        int rv = ngtcp2_conn_open_uni_stream(c->conn, &sid, ch);
        if (rv == 0) {
            ch->stream_id = sid;
        } else if (rv != NGTCP2_ERR_STREAM_ID_BLOCKED || take_lane(c, ch) != 0) {
            if (rv != NGTCP2_ERR_STREAM_ID_BLOCKED)
                NX_WARN("quic", "%s: open stream: %s", p->base.addr, ngtcp2_strerror(rv));
            return; /* a MAX_STREAMS or an idle channel will bring us back */
        }
        p->open_head = ch->rnext;
        if (!p->open_head)
            p->open_tail = NULL;
        ch->in_open = 0;
        ch->rnext = NULL;
        ch->blocked = 0;
        ready_add(p, ch);
    }
}

static size_t build_vec(const struct nx_qchan *ch, ngtcp2_vec *v)
{
    size_t n = 0;
    uint64_t in_pre = ch->wstream - ch->pre_off;
    uint64_t room = ch->peer->rolling ? ch->roll_end - ch->wstream : UINT64_MAX;
    if (in_pre < NX_QPRE_LEN) {
        v[n].base = (uint8_t *)ch->pre + in_pre;
        v[n++].len = NX_QPRE_LEN - in_pre;
    }
    size_t off = ch->woff;
    for (struct nx_qmsg *m = ch->wmsg; m && n < NX_QVEC_MAX; m = m->next, off = 0) {
        v[n].base = m->data + off;
        v[n++].len = m->len - off;
    }
    for (size_t i = 0; i < n; i++) { /* rolling over: nothing past roll_end */
        if (v[i].len > room)
            v[i].len = (size_t)room;
        room -= v[i].len;
        if (!v[i].len)
            return i;
    }
    return n;
}

static void consume(struct nx_qpeer *p, struct nx_qchan *ch, size_t n)
{
    uint64_t in_pre = ch->wstream - ch->pre_off;
    ch->wstream += n;
    if (in_pre < NX_QPRE_LEN) {
        size_t t = NX_QPRE_LEN - in_pre < n ? (size_t)(NX_QPRE_LEN - in_pre) : n;
        n -= t;
    }
    while (n > 0 && ch->wmsg) {
        size_t left = ch->wmsg->len - ch->woff;
        if (n < left) {
            ch->woff += n;
            n = 0;
        } else {
            n -= left;
            ch->wmsg = ch->wmsg->next;
            ch->woff = 0;
        }
    }
    if (!writable(ch))
        ready_del(p, ch);
    else if (ch->in_ready && p->ready == ch)
        p->ready = ch->rnext; /* next packet starts with the next channel */
}

ngtcp2_ssize nx_qstream_write_pkt(struct nx_qconn *c, uint8_t *dest, size_t destlen,
                                  ngtcp2_tstamp ts)
{
    struct nx_qpeer *p = c->peer;
    ngtcp2_vec v[NX_QVEC_MAX];
    if (c->inspector) /* HTTP/3, not our channels */
        return nx_qinspect_write_pkt(c, dest, destlen, ts);
    if (c != p->conn) /* a successor not yet in use, or an old connection */
        return nx_qroll_write_pkt(c, dest, destlen, ts);
    /* Bounded: a channel that keeps saying WRITE_MORE without taking bytes (connection
     * credit gone) must not spin us; after a lap we close the packet. */
    for (int lap = 0;; lap++) {
        struct nx_qchan *ch = lap < 64 ? p->ready : NULL;
        ngtcp2_ssize ndata = -1;
        size_t nv = ch ? build_vec(ch, v) : 0;
        uint32_t flags = ch ? NGTCP2_WRITE_STREAM_FLAG_MORE : NGTCP2_WRITE_STREAM_FLAG_NONE;
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->conn, NULL, NULL, dest, destlen, &ndata,
                                                   flags, ch ? ch->stream_id : -1, v, nv, ts);
        if (n == NGTCP2_ERR_WRITE_MORE) {
            consume(p, ch, (size_t)ndata); /* rotates: the packet goes on with the next */
            continue;
        }
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
            ch->blocked = 1;
            ready_del(p, ch);
            continue;
        }
        if (n == NGTCP2_ERR_STREAM_SHUT_WR || n == NGTCP2_ERR_STREAM_NOT_FOUND) {
            ready_del(p, ch);
            continue;
        }
        if (n >= 0 && ch && ndata > 0)
            consume(p, ch, (size_t)ndata);
        return n;
    }
}

void nx_qstream_on_extend(struct nx_qchan *ch)
{
    ch->blocked = 0;
    if (writable(ch))
        ready_add(ch->peer, ch);
}

int nx_qstream_on_acked(struct nx_qconn *c, struct nx_qchan *ch, uint64_t offset,
                        uint64_t datalen)
{
    struct nx_qpeer *p = ch->peer;
    struct nx_quic *q = c->q;
    uint64_t end = offset + datalen;
    struct nx_qmsg *m;
    while ((m = ch->head) && ch->head_off + m->len <= end && !p->forget_req && !p->close_req) {
        ch->head = m->next;
        if (!ch->head)
            ch->tail = NULL;
        ch->head_off += m->len;
        p->queued_bytes -= m->len - NX_QREC_HDR;
        uint64_t tok = m->token;
        nx_bufpool_put(q->bufs, m, m->cap);
        if (tok && q->base.cb.on_sent)
            q->base.cb.on_sent(q->base.cb.arg, &p->base, tok);
    }
    if (!ch->head && ch->stream_id >= 0 && !p->forget_req && !p->close_req) {
        idle_add(p, ch);
        if (p->open_head) /* a channel waits for a stream: it can have this one */
            nx_quic_schedule_flush(c);
    }
    if (p->rolling && p->succ) /* maybe drained: see at the successor's flush */
        nx_quic_schedule_flush(p->succ);
    return 0;
}

/* ---- whole-peer operations ---- */

static void unbind_one(void *val, void *arg)
{
    struct nx_qchan *ch = val;
    (void)arg;
    ch->stream_id = -1;
    ch->blocked = ch->in_ready = ch->in_open = ch->in_idle = 0;
    ch->rnext = ch->rprev = ch->inext = ch->iprev = NULL;
}

void nx_qstream_unbind(struct nx_qpeer *p)
{
    nx_qmap_each(&p->chans, unbind_one, NULL);
    p->ready = NULL;
    p->open_head = p->open_tail = NULL;
    p->idle_head = p->idle_tail = NULL;
}

static void free_one(void *val, void *arg)
{
    struct nx_qchan *ch = val;
    (void)arg;
    while (ch->head) {
        struct nx_qmsg *m = ch->head;
        ch->head = m->next;
        nx_bufpool_put(ch->peer->q->bufs, m, m->cap);
    }
    free(ch);
}

void nx_qstream_free_all(struct nx_qpeer *p)
{
    nx_qstream_unbind(p);
    nx_qmap_each(&p->chans, free_one, NULL);
    nx_qmap_fini(&p->chans);
    nx_qmap_init(&p->chans);
    p->queued_bytes = 0;
}

/* ---- rollover (quic_roll.c) ---- */

static void roll_begin_one(void *val, void *arg)
{
    struct nx_qchan *ch = val;
    (void)arg;
    ch->roll_end = ch->wstream;
    if (ch->stream_id >= 0 && ch->wmsg && ch->woff > 0) /* finish the message begun */
        ch->roll_end += ch->wmsg->len - ch->woff;
    if (!writable(ch))
        ready_del(ch->peer, ch);
}

void nx_qstream_roll_begin(struct nx_qpeer *p)
{
    nx_qmap_each(&p->chans, roll_begin_one, NULL);
    /* Waiting for a stream on the old connection: they get one on the successor. */
    for (struct nx_qchan *ch = p->open_head, *next; ch; ch = next) {
        next = ch->rnext;
        ch->in_open = 0;
        ch->rnext = NULL;
    }
    p->open_head = p->open_tail = NULL;
}

static void drained_one(void *val, void *arg)
{
    struct nx_qchan *ch = val;
    int *all = arg;
    /* Acknowledged up to roll_end: what is left starts there (a message boundary), or
     * the stream had only (part of) its preamble, which carries no message. */
    if (ch->stream_id >= 0 && ch->head && ch->head_off < ch->roll_end)
        *all = 0;
}

int nx_qstream_roll_drained(struct nx_qpeer *p)
{
    int all = 1;
    nx_qmap_each(&p->chans, drained_one, &all);
    return all;
}

static void rebase_one(void *val, void *arg)
{
    struct nx_qchan *ch = val;
    struct nx_qconn *old = arg;
    if (ch->stream_id >= 0 && old->conn) /* late events of that stream find no channel */
        ngtcp2_conn_set_stream_user_data(old->conn, ch->stream_id, NULL);
    ch->stream_id = -1;
    ch->pre_off = ch->wstream = 0;
    ch->head_off = NX_QPRE_LEN;
    ch->roll_end = 0;
    ch->wmsg = ch->head; /* everything before it was acknowledged and freed */
    ch->woff = 0;
    memcpy(ch->pre, NX_QMAGIC, 4); /* a new stream: a preamble, not a switch record */
    put_be64(ch->pre + 4, ch->channel);
}

void nx_qstream_roll_rebase(struct nx_qpeer *p, struct nx_qconn *old)
{
    nx_qstream_unbind(p);
    nx_qmap_each(&p->chans, rebase_one, old);
}

struct count_arg {
    struct nx_qconn *c;
    uint64_t n, lost;
};

static void count_one(void *val, void *arg)
{
    struct nx_qchan *ch = val;
    struct count_arg *a = arg;
    if (ch->stream_id < 0)
        return;
    a->n++;
    a->lost += ngtcp2_conn_get_stream_loss_count(a->c->conn, ch->stream_id);
}

uint32_t nx_qstream_count(struct nx_qconn *c)
{
    struct count_arg a = {c, 0, 0};
    nx_qmap_each(&c->peer->chans, count_one, &a);
    for (struct nx_qrstream *rs = c->rstreams; rs; rs = rs->next)
        a.n++;
    return (uint32_t)a.n;
}

uint64_t nx_qstream_lost_pkts(struct nx_qconn *c)
{
    struct count_arg a = {c, 0, 0};
    nx_qmap_each(&c->peer->chans, count_one, &a);
    return a.lost;
}
