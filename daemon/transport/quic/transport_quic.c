/*
 * transport_quic.c - the QUIC endpoint: construction, the ops table, and the idle handle
 * that makes dials, flushes connections and delivers LOST notifications outside any
 * ngtcp2 call.  Peer records are quic_peer.c, addresses quic_addr.c.
 *
 * A peer record is keyed by the peer's address.  Records are never revived: once LOST, a
 * record stays LOST until peer_forget(), and a later connection (dialed after the forget,
 * or arriving from the peer) gets a new record.  The layer above therefore never sees a
 * pointer change state behind its back except UP -> LOST.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>

#include "log.h"
#include "mem.h"
#include "quic_int.h"

static const struct nx_transport_ops quic_ops;

ngtcp2_tstamp nx_qnow(void)
{
    return uv_hrtime();
}

void nx_quic_conf_defaults(struct nx_quic_conf *c)
{
    memset(c, 0, sizeof(*c));
    c->idle_timeout_ms = 5000;
    c->keepalive_ms = 1000;
    c->window_bytes = 64u << 20;
    c->stream_window_bytes = 16u << 20;
    c->max_udp_payload = 1452;
    c->loopback_udp_payload = 65527;
    c->retry = 1;
    c->max_streams = 1024;
}

/* ---- the idle handle: flushes and LOST notifications, outside any ngtcp2 call ---- */

static void dial_now(struct nx_qpeer *p);

static void flush_all(struct nx_quic *q)
{
    struct nx_qconn *list = q->flush_list;
    q->flush_list = NULL;
    while (list) {
        struct nx_qconn *c = list;
        list = c->flush_next;
        c->in_flush_list = 0;
        nx_qconn_flush(c);
    }
}

static void idle_cb(uv_idle_t *h)
{
    struct nx_quic *q = h->data;
    while (q->dials) {
        struct nx_qpeer *p = q->dials;
        q->dials = p->dial_next;
        p->dial_pending = 0;
        dial_now(p);
    }
    flush_all(q);
    while (q->notify) {
        struct nx_qpeer *p = q->notify;
        q->notify = p->notify_next;
        p->in_notify = 0;
        if (q->base.cb.on_peer)
            q->base.cb.on_peer(q->base.cb.arg, &p->base, NX_TPEER_LOST, p->reason);
        /* p may be gone now (peer_forget from the callback) */
    }
    if (!q->flush_list && !q->notify && !q->dials) {
        uv_idle_stop(&q->idle);
        q->idle_on = 0;
    }
}

void nx_quic_idle_start(struct nx_quic *q)
{
    if (q->idle_on || q->destroying)
        return;
    q->idle_on = 1;
    uv_idle_start(&q->idle, idle_cb);
}

void nx_quic_schedule_flush(struct nx_qconn *c)
{
    struct nx_quic *q = c->q;
    if (c->dead || c->in_flush_list)
        return;
    c->in_flush_list = 1;
    c->flush_next = q->flush_list;
    q->flush_list = c;
    nx_quic_idle_start(q);
}

void nx_quic_rx_done(struct nx_quic *q)
{
    while (q->touched) {
        struct nx_qconn *c = q->touched;
        q->touched = c->touched_next;
        c->in_touched = 0;
        nx_qconn_after_rx(c);
    }
}

void nx_quic_tx_ready(struct nx_quic *q)
{
    for (struct nx_qpeer *p = q->all; p; p = p->next) {
        if (p->conn)
            nx_quic_schedule_flush(p->conn);
        if (p->succ)
            nx_quic_schedule_flush(p->succ);
        if (p->old)
            nx_quic_schedule_flush(p->old);
    }
}

/* ---- ops ---- */

static struct nx_tpeer *quic_peer(struct nx_transport *t, const char *addr, char *err,
                                  size_t errlen)
{
    struct nx_quic *q = (struct nx_quic *)t;
    /* Every message to a peer names it by address: one seen before is found without
     * parsing, in either spelling it came in ("[::ffff:10.0.0.7]:7000" and
     * "10.0.0.7:7000"). */
    for (struct nx_qpeer *p = addr && *addr ? q->all : NULL; p; p = p->next)
        if (p->in_map && (!strcmp(p->base.addr, addr) || !strcmp(p->alias, addr))) {
            p->visible = 1;
            return &p->base;
        }
    union nx_qsa sa;
    socklen_t len;
    if (nx_qaddr_resolve(addr, false, &sa, &len, err, errlen) != 0 ||
        nx_qaddr_to_family(q->udp.family, &sa, &len, err, errlen) != 0)
        return NULL;
    char canon[NX_TADDR_MAX];
    nx_qaddr_format(&sa.sa, canon, sizeof(canon));
    if (nx_qaddr_cmp(&sa.sa, &q->udp.local.sa) == 0 || !strcmp(canon, q->base.local_addr)) {
        /* Both ends of the simultaneous-open rule would be us: refuse it plainly. */
        snprintf(err, errlen, "%s is this daemon", canon);
        return NULL;
    }
    struct nx_qpeer *p = nx_qpeer_find(q, &sa.sa);
    if (!p)
        p = nx_qpeer_new(q, &sa, len);
    if (strcmp(canon, addr) && strlen(addr) < sizeof(p->alias))
        strcpy(p->alias, addr);
    p->visible = 1;
    return &p->base;
}

/* First message: dial, from the loop.  ngtcp2's idle and handshake clocks start when the
 * connection is made, so it is made right before its first packet goes out; the caller
 * may well queue for seconds before the loop runs again. */
static void dial_soon(struct nx_qpeer *p)
{
    if (p->conn || p->dial_pending)
        return;
    p->dial_pending = 1;
    p->dial_next = p->q->dials;
    p->q->dials = p;
    nx_quic_idle_start(p->q);
}

/* Whether a send to p may be queued: not to a lost or forgotten peer, nor while the
 * endpoint is going away. */
static int sendable(const struct nx_qpeer *p)
{
    return p->state != NX_TPEER_LOST && !p->forget_req && !p->q->destroying;
}

static int quic_send(struct nx_tpeer *tp, uint64_t channel, const struct iovec *iov,
                     int iovcnt, uint64_t token)
{
    struct nx_qpeer *p = (struct nx_qpeer *)tp;
    if (!sendable(p))
        return -ENOTCONN;
    int rv = nx_qstream_send(p, channel, iov, iovcnt, token);
    if (rv == 0)
        dial_soon(p);
    return rv;
}

int nx_quic_send_built(struct nx_tpeer *tp, uint64_t channel, void *msg, uint64_t token)
{
    struct nx_qpeer *p = (struct nx_qpeer *)tp;
    if (!sendable(p)) {
        nx_quic_msg_free(p->q->bufs, msg);
        return -ENOTCONN;
    }
    int rv = nx_qstream_send_built(p, channel, msg, token);
    if (rv == 0)
        dial_soon(p);
    return rv;
}

static void dial_now(struct nx_qpeer *p)
{
    char err[160];
    if (p->conn || p->state == NX_TPEER_LOST)
        return; /* the peer dialed us meanwhile, or we gave up */
    p->conn = nx_qconn_client_new(p, 0, err, sizeof(err));
    if (!p->conn) {
        nx_qpeer_lost(p, err);
        return;
    }
    p->inbound = 0;
    nx_qconn_flush(p->conn);
}

static void quic_close_peer(struct nx_tpeer *tp, const char *reason)
{
    struct nx_qpeer *p = (struct nx_qpeer *)tp;
    char why[100];
    snprintf(why, sizeof(why), "%s", reason && *reason ? reason : "closed");
    if (p->state != NX_TPEER_LOST) {
        p->state = NX_TPEER_LOST;
        snprintf(p->reason, sizeof(p->reason), "closed here: %s", why);
    }
    p->lost_posted = 1; /* the caller knows: no on_peer for a local close */
    nx_qpeer_notify_unlink(p);
    nx_qpeer_close_conns(p, NX_QERR_CLOSED, why);
    if (nx_qpeer_busy(p))
        p->close_req = 1;
    else
        nx_qstream_free_all(p);
}

static void quic_peer_forget(struct nx_tpeer *tp)
{
    struct nx_qpeer *p = (struct nx_qpeer *)tp;
    if (nx_qpeer_busy(p)) {
        if (p->state != NX_TPEER_LOST)
            quic_close_peer(tp, "forgotten");
        p->forget_req = 1;
        return;
    }
    nx_qpeer_free(p);
}

static void quic_stats(struct nx_tpeer *tp, struct nx_tpeer_stats *o)
{
    struct nx_qpeer *p = (struct nx_qpeer *)tp;
    struct nx_qconn *c = p->conn && !p->conn->dead ? p->conn : NULL;
    memset(o, 0, sizeof(*o));
    snprintf(o->addr, sizeof(o->addr), "%s", p->base.addr);
    o->state = p->state;
    o->inbound = p->inbound;
    o->bytes_sent = p->bytes_sent;
    o->bytes_recv = p->bytes_recv;
    o->msgs_sent = p->msgs_sent;
    o->msgs_recv = p->msgs_recv;
    o->queued_bytes = p->queued_bytes;
    o->pkts_sent = p->old_pkts_sent;
    o->pkts_recv = p->old_pkts_recv;
    o->handovers = p->handovers;
    o->conns = (p->conn && !p->conn->dead) + (p->succ && !p->succ->dead) +
               (p->old && !p->old->dead);
    snprintf(o->reason, sizeof(o->reason), "%s", p->state == NX_TPEER_LOST ? p->reason : "");
    if (!c)
        return;
    ngtcp2_conn_stat st;
    ngtcp2_conn_get_conn_stat(c->conn, &st);
    o->rtt_ms = (double)st.smoothed_rtt / NGTCP2_MILLISECONDS;
    o->min_rtt_ms = st.min_rtt == UINT64_MAX ? 0 : (double)st.min_rtt / NGTCP2_MILLISECONDS;
    o->rttvar_ms = (double)st.rttvar / NGTCP2_MILLISECONDS;
    o->pto_ms = (double)ngtcp2_conn_get_pto(c->conn) / NGTCP2_MILLISECONDS;
    o->cwnd = st.cwnd;
    o->pkts_sent += c->pkts_sent;
    o->pkts_recv += c->pkts_recv;
    o->pkts_lost = nx_qstream_lost_pkts(c);
    o->streams_open = nx_qstream_count(c);
    if (c->confirmed)
        nx_qtls_cipher(c, o->cipher, sizeof(o->cipher));
    o->cert_end = c->cert_end;
}

size_t nx_quic_creds_held(struct nx_transport *t)
{
    return nx_qtls_creds_held(&((struct nx_quic *)t)->tls);
}

int nx_quic_reload(struct nx_transport *t, int *rolled, char *err, size_t errlen)
{
    struct nx_quic *q = (struct nx_quic *)t;
    uint8_t secret[32];
    int rv = nx_qtls_reload(&q->tls, &q->conf, secret, err, errlen);
    *rolled = 0;
    if (rv != 0)
        return rv;
    /* A new key (one that may have leaked is replaced) gets its own reset and ID-tag
     * secrets: the old key no longer forges our resets.  IDs issued before lose their
     * resets, and their connections are handed over below. */
    if (memcmp(secret, q->reset_secret, sizeof(secret)) != 0) {
        memcpy(q->reset_secret, secret, sizeof(secret));
        if (nx_qcid_init(q) != 0)
            NX_WARN("quic", "cannot derive the connection ID key of the new node key");
    }
    gnutls_memset(secret, 0, sizeof(secret));
    /* The peers still hold the proof we showed them: show them the new one on a
     * successor of each connection (quic_roll.c). */
    for (struct nx_qpeer *p = q->all; p; p = p->next)
        if (p->visible && nx_qroll_start(p) != -1)
            (*rolled)++; /* now, or once the dial or handover under way is over */
    return 0;
}

time_t nx_quic_own_cert(struct nx_transport *t, char *subject, size_t len)
{
    struct nx_quic *q = (struct nx_quic *)t;
    snprintf(subject, len, "%s", q->tls.own_subject);
    return q->tls.own_end;
}

static void quic_each_peer(struct nx_transport *t, void (*fn)(struct nx_tpeer *, void *),
                           void *arg)
{
    struct nx_quic *q = (struct nx_quic *)t;
    for (struct nx_qpeer *p = q->all, *next; p; p = next) {
        next = p->next;
        if (p->visible)
            fn(&p->base, arg);
    }
}

void nx_quic_handle_closed(struct nx_quic *q)
{
    if (--q->handles_open > 0 || !q->destroying)
        return;
    nx_qmap_fini(&q->routes);
    nx_qmap_fini(&q->peers);
    nx_qtls_fini(&q->tls);
    nx_bufpool_fini(&q->own_bufs);
    free((char *)q->conf.listen);
    free((char *)q->conf.advertise);
    free((char *)q->conf.tls_ca);
    free((char *)q->conf.tls_cert);
    free((char *)q->conf.tls_key);
    free(q);
}

static void idle_close_cb(uv_handle_t *h)
{
    nx_quic_handle_closed(h->data);
}

static void quic_destroy(struct nx_transport *t)
{
    struct nx_quic *q = (struct nx_quic *)t;
    q->destroying = 1;
    while (q->all) {
        struct nx_qpeer *p = q->all;
        nx_qpeer_close_conns(p, NX_QERR_CLOSED, "shutdown");
        nx_qpeer_free(p);
    }
    q->notify = NULL;
    q->dials = NULL;
    q->flush_list = q->touched = NULL;
    uv_idle_stop(&q->idle);
    uv_close((uv_handle_t *)&q->idle, idle_close_cb);
    nx_qudp_close(q);
}

/* The idle handle stays on: it has dials and LOST notices to deliver, and finds the
 * flush list empty. */
static void quic_progress(struct nx_transport *t)
{
    struct nx_quic *q = (struct nx_quic *)t;
    if (!q->destroying)
        flush_all(q);
}

static void *quic_take(struct nx_transport *t, const void *data)
{
    size_t cap;
    return nx_quic_take_delivered(t, data, &cap);
}

static const struct nx_transport_ops quic_ops = {
    .name = "quic",
    .peer = quic_peer,
    .send = quic_send,
    .take = quic_take,
    .close_peer = quic_close_peer,
    .peer_forget = quic_peer_forget,
    .progress = quic_progress,
    .stats = quic_stats,
    .each_peer = quic_each_peer,
    .destroy = quic_destroy,
};

/* ---- construction ---- */

static char *dup_or_null(const char *s)
{
    return s ? nx_xstrdup(s) : NULL;
}

static void copy_conf(struct nx_quic_conf *d, const struct nx_quic_conf *s)
{
    *d = *s;
    d->listen = dup_or_null(s->listen);
    d->advertise = dup_or_null(s->advertise);
    d->tls_ca = dup_or_null(s->tls_ca);
    d->tls_cert = dup_or_null(s->tls_cert);
    d->tls_key = dup_or_null(s->tls_key);
    if (!d->handshake_timeout_ms)
        d->handshake_timeout_ms = d->idle_timeout_ms > 3000 ? d->idle_timeout_ms : 3000;
    if (!d->max_streams)
        d->max_streams = 1024;
    if (d->max_udp_payload < NGTCP2_MAX_UDP_PAYLOAD_SIZE)
        d->max_udp_payload = NGTCP2_MAX_UDP_PAYLOAD_SIZE;
}

static void set_local_addr(struct nx_quic *q)
{
    union nx_qsa a;
    socklen_t l;
    char err[128];
    if (q->conf.advertise &&
        nx_qaddr_resolve(q->conf.advertise, true, &a, &l, err, sizeof(err)) == 0)
        nx_qaddr_format(&a.sa, q->base.local_addr, sizeof(q->base.local_addr));
    else if (q->conf.advertise)
        snprintf(q->base.local_addr, sizeof(q->base.local_addr), "%s", q->conf.advertise);
    else
        nx_qaddr_format(&q->udp.local.sa, q->base.local_addr, sizeof(q->base.local_addr));
}

struct nx_transport *nx_quic_new(uv_loop_t *loop, const struct nx_quic_conf *conf,
                                 const struct nx_transport_cb *cb, char *err, size_t errlen)
{
    union nx_qsa bind_addr;
    socklen_t bind_len;
    if (!conf->listen) {
        snprintf(err, errlen, "listen address is required");
        return NULL;
    }
    if (nx_qaddr_resolve(conf->listen, true, &bind_addr, &bind_len, err, errlen) != 0)
        return NULL;
    struct nx_quic *q = nx_xcalloc(1, sizeof(*q));
    q->base.ops = &quic_ops;
    if (cb)
        q->base.cb = *cb;
    q->loop = loop;
    q->udp.fd = -1;
    copy_conf(&q->conf, conf);
    nx_bufpool_init(&q->own_bufs, NX_QBUF_KEEP, NX_QBUF_BYTES, 0);
    q->bufs = q->conf.bufs ? q->conf.bufs : &q->own_bufs;
    if (nx_qtls_init(&q->tls, &q->conf, q->reset_secret, err, errlen) != 0)
        goto fail_conf;
    if (nx_qcid_init(q) != 0) {
        snprintf(err, errlen, "cannot derive the connection ID key");
        goto fail_tls;
    }
    if (gnutls_rnd(GNUTLS_RND_KEY, q->token_secret, sizeof(q->token_secret)) != 0) {
        snprintf(err, errlen, "no randomness for the Retry token key");
        goto fail_tls;
    }
    nx_qmap_init(&q->routes);
    nx_qmap_init(&q->peers);
    if (nx_qudp_open(q, &bind_addr, bind_len, err, errlen) != 0)
        goto fail_maps;
    uv_idle_init(loop, &q->idle);
    q->idle.data = q;
    q->handles_open++;
    set_local_addr(q);
    NX_INFO("quic", "listening on %s as %s (max datagram %u, GSO %s, GRO %s)",
            conf->listen, q->base.local_addr, q->conf.max_udp_payload,
            q->udp.gso ? "on" : "off", q->udp.gro ? "on" : "off");
    return &q->base;
fail_maps:
    nx_qmap_fini(&q->routes);
    nx_qmap_fini(&q->peers);
fail_tls:
    nx_qtls_fini(&q->tls);
fail_conf:
    free((char *)q->conf.listen);
    free((char *)q->conf.advertise);
    free((char *)q->conf.tls_ca);
    free((char *)q->conf.tls_cert);
    free((char *)q->conf.tls_key);
    free(q);
    return NULL;
}

int nx_quic_port(struct nx_transport *t)
{
    struct nx_quic *q = (struct nx_quic *)t;
    const union nx_qsa *a = &q->udp.local;
    return ntohs(a->sa.sa_family == AF_INET ? a->in.sin_port : a->in6.sin6_port);
}
