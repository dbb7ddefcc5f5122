/*
 * transport_quic.c - the QUIC endpoint: construction, the ops table, peer records, the
 * idle handle that flushes connections and delivers LOST notifications, addresses.
 *
 * A peer record is keyed by the peer's address.  Records are never revived: once LOST, a
 * record stays LOST until peer_forget(), and a later connection (dialed after the forget,
 * or arriving from the peer) gets a new record.  The layer above therefore never sees a
 * pointer change state behind its back except UP -> LOST.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
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

/* ---- addresses ---- */

struct norm {
    int fam;
    uint8_t b[16];
    size_t n;
    uint16_t port;
};

static void normalize(const struct sockaddr *sa, struct norm *o)
{
    memset(o, 0, sizeof(*o));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        o->fam = 4;
        memcpy(o->b, &in->sin_addr, 4);
        o->n = 4;
        o->port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        o->port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            o->fam = 4;
            memcpy(o->b, in6->sin6_addr.s6_addr + 12, 4);
            o->n = 4;
        } else {
            o->fam = 6;
            memcpy(o->b, &in6->sin6_addr, 16);
            o->n = 16;
        }
    }
}

void nx_qaddr_format(const struct sockaddr *sa, char *out, size_t outlen)
{
    struct norm n;
    char host[INET6_ADDRSTRLEN];
    normalize(sa, &n);
    if (!n.fam) {
        snprintf(out, outlen, "?");
        return;
    }
    inet_ntop(n.fam == 4 ? AF_INET : AF_INET6, n.b, host, sizeof(host));
    snprintf(out, outlen, n.fam == 4 ? "%s:%u" : "[%s]:%u", host, n.port);
}

int nx_qaddr_cmp(const struct sockaddr *a, const struct sockaddr *b)
{
    struct norm x, y;
    normalize(a, &x);
    normalize(b, &y);
    if (x.fam != y.fam)
        return x.fam < y.fam ? -1 : 1;
    int r = memcmp(x.b, y.b, x.n);
    if (r)
        return r < 0 ? -1 : 1;
    return x.port < y.port ? -1 : x.port > y.port;
}

size_t nx_qaddr_key(const struct sockaddr *sa, uint8_t key[20])
{
    struct norm n;
    normalize(sa, &n);
    key[0] = (uint8_t)n.fam;
    memcpy(key + 1, n.b, n.n);
    key[1 + n.n] = (uint8_t)(n.port >> 8);
    key[2 + n.n] = (uint8_t)n.port;
    return 3 + n.n;
}

int nx_qaddr_is_loopback(const struct sockaddr *sa)
{
    struct norm n;
    normalize(sa, &n);
    if (n.fam == 4)
        return n.b[0] == 127;
    return n.fam == 6 && IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)n.b);
}

int nx_qaddr_resolve(const char *s, union nx_qsa *out, socklen_t *len, char *err, size_t errlen)
{
    char host[256];
    const char *port;
    if (!s || !*s) {
        snprintf(err, errlen, "empty address");
        return -EINVAL;
    }
    if (s[0] == '[') {
        const char *e = strchr(s, ']');
        if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof(host)) {
            snprintf(err, errlen, "bad address \"%s\": want [v6]:port", s);
            return -EINVAL;
        }
        memcpy(host, s + 1, (size_t)(e - s - 1));
        host[e - s - 1] = 0;
        port = e + 2;
    } else {
        const char *c = strrchr(s, ':');
        if (!c || strchr(s, ':') != c || (size_t)(c - s) >= sizeof(host)) {
            snprintf(err, errlen, "bad address \"%s\": want host:port or [v6]:port", s);
            return -EINVAL;
        }
        memcpy(host, s, (size_t)(c - s));
        host[c - s] = 0;
        port = c + 1;
    }
    char *end;
    long pn = strtol(port, &end, 10);
    if (!*port || *end || pn < 0 || pn > 65535) {
        snprintf(err, errlen, "bad port in \"%s\"", s);
        return -EINVAL;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV},
                    *res = NULL;
    const char *h = host[0] ? host : "0.0.0.0";
    int rv = getaddrinfo(h, port, &hints, &res);
    if (rv == EAI_NONAME) {
        hints.ai_flags = AI_NUMERICSERV; /* a name: one blocking lookup, at peer creation */
        rv = getaddrinfo(h, port, &hints, &res);
    }
    if (rv != 0 || !res) {
        snprintf(err, errlen, "cannot resolve \"%s\": %s", s, gai_strerror(rv));
        return -EINVAL;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Rewrites addr into the socket's family (v4 -> v4-mapped on a v6 socket). */
static int to_socket_family(struct nx_quic *q, union nx_qsa *a, socklen_t *len, char *err,
                            size_t errlen)
{
    if (a->sa.sa_family == q->udp.family)
        return 0;
    if (q->udp.family == AF_INET6 && a->sa.sa_family == AF_INET) {
        struct sockaddr_in in = a->in;
        memset(a, 0, sizeof(*a));
        a->in6.sin6_family = AF_INET6;
        a->in6.sin6_port = in.sin_port;
        a->in6.sin6_addr.s6_addr[10] = a->in6.sin6_addr.s6_addr[11] = 0xff;
        memcpy(a->in6.sin6_addr.s6_addr + 12, &in.sin_addr, 4);
        *len = sizeof(a->in6);
        return 0;
    }
    if (q->udp.family == AF_INET && IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr)) {
        struct sockaddr_in6 in6 = a->in6;
        memset(a, 0, sizeof(*a));
        a->in.sin_family = AF_INET;
        a->in.sin_port = in6.sin6_port;
        memcpy(&a->in.sin_addr, in6.sin6_addr.s6_addr + 12, 4);
        *len = sizeof(a->in);
        return 0;
    }
    snprintf(err, errlen, "an IPv4 endpoint cannot reach an IPv6 peer (listen on [::]:port)");
    return -EAFNOSUPPORT;
}

/* ---- the idle handle: flushes and LOST notifications, outside any ngtcp2 call ---- */

static void dial_now(struct nx_qpeer *p);

static void idle_cb(uv_idle_t *h)
{
    struct nx_quic *q = h->data;
    while (q->dials) {
        struct nx_qpeer *p = q->dials;
        q->dials = p->dial_next;
        p->dial_pending = 0;
        dial_now(p);
    }
    struct nx_qconn *list = q->flush_list;
    q->flush_list = NULL;
    while (list) {
        struct nx_qconn *c = list;
        list = c->flush_next;
        c->in_flush_list = 0;
        nx_qconn_flush(c);
    }
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

static void idle_start(struct nx_quic *q)
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
    idle_start(q);
}

void nx_quic_rx_done(struct nx_quic *q)
{
    while (q->touched) {
        struct nx_qconn *c = q->touched;
        q->touched = c->touched_next;
        c->in_touched = 0;
        nx_qconn_flush(c);
    }
}

void nx_quic_tx_ready(struct nx_quic *q)
{
    for (struct nx_qpeer *p = q->all; p; p = p->next)
        if (p->conn)
            nx_quic_schedule_flush(p->conn);
}

/* ---- peer records ---- */

struct nx_qpeer *nx_qpeer_find(struct nx_quic *q, const struct sockaddr *addr)
{
    uint8_t key[20];
    size_t kl = nx_qaddr_key(addr, key);
    return nx_qmap_get(&q->peers, key, kl);
}

void nx_qpeer_retire(struct nx_qpeer *p)
{
    if (!p->in_map)
        return;
    nx_qmap_del(&p->q->peers, p->key, p->keylen);
    p->in_map = 0;
}

struct nx_qpeer *nx_qpeer_new(struct nx_quic *q, const union nx_qsa *addr, socklen_t len)
{
    struct nx_qpeer *old = nx_qpeer_find(q, &addr->sa);
    if (old)
        nx_qpeer_retire(old);
    struct nx_qpeer *p = nx_xcalloc(1, sizeof(*p));
    p->base.t = &q->base;
    nx_qaddr_format(&addr->sa, p->base.addr, sizeof(p->base.addr));
    p->q = q;
    memcpy(&p->addr, addr, len);
    p->addrlen = len;
    p->keylen = nx_qaddr_key(&addr->sa, p->key);
    p->state = NX_TPEER_CONNECTING;
    nx_qmap_init(&p->chans);
    p->next = q->all;
    if (q->all)
        q->all->prev = p;
    q->all = p;
    nx_qmap_put(&q->peers, p->key, p->keylen, p);
    p->in_map = 1;
    return p;
}

static void notify_unlink(struct nx_qpeer *p)
{
    if (!p->in_notify)
        return;
    for (struct nx_qpeer **pp = &p->q->notify; *pp; pp = &(*pp)->notify_next) {
        if (*pp == p) {
            *pp = p->notify_next;
            break;
        }
    }
    p->in_notify = 0;
}

void nx_qpeer_free(struct nx_qpeer *p)
{
    struct nx_quic *q = p->q;
    if (p->dial_pending) {
        for (struct nx_qpeer **pp = &q->dials; *pp; pp = &(*pp)->dial_next)
            if (*pp == p) {
                *pp = p->dial_next;
                break;
            }
    }
    if (p->conn)
        nx_qconn_close(p->conn, NX_QERR_CLOSED, "closed");
    nx_qstream_free_all(p);
    nx_qmap_fini(&p->chans);
    nx_qpeer_retire(p);
    notify_unlink(p);
    if (p->prev)
        p->prev->next = p->next;
    else
        q->all = p->next;
    if (p->next)
        p->next->prev = p->prev;
    free(p);
}

void nx_qpeer_up(struct nx_qpeer *p)
{
    struct nx_quic *q = p->q;
    if (p->state != NX_TPEER_CONNECTING || !p->conn)
        return;
    p->state = NX_TPEER_UP;
    p->visible = 1;
    NX_INFO("quic", "%s: up (%s)", p->base.addr, p->inbound ? "inbound" : "outbound");
    nx_qstream_kick_all(p);
    nx_quic_schedule_flush(p->conn);
    if (!p->up_notified && q->base.cb.on_peer) {
        p->up_notified = 1;
        q->base.cb.on_peer(q->base.cb.arg, &p->base, NX_TPEER_UP, "");
    }
}

static int conn_busy(const struct nx_qpeer *p)
{
    return p->conn && p->conn->busy;
}

void nx_qpeer_lost(struct nx_qpeer *p, const char *reason)
{
    struct nx_quic *q = p->q;
    if (p->state == NX_TPEER_LOST)
        return;
    p->state = NX_TPEER_LOST;
    snprintf(p->reason, sizeof(p->reason), "%s", reason);
    if (p->visible)
        NX_WARN("quic", "%s: lost: %s", p->base.addr, reason);
    if (p->conn)
        nx_qconn_close(p->conn, NX_QERR_REFUSED, reason);
    if (conn_busy(p))
        p->close_req = 1; /* the queue is being walked: free it on the way out */
    else
        nx_qstream_free_all(p);
    if (p->visible && !p->lost_posted) {
        p->lost_posted = 1;
        p->in_notify = 1;
        p->notify_next = NULL;
        struct nx_qpeer **pp = &q->notify;
        while (*pp)
            pp = &(*pp)->notify_next;
        *pp = p;
        idle_start(q);
    }
}

void nx_qpeer_settle(struct nx_qpeer *p)
{
    if (conn_busy(p))
        return;
    if (p->close_req) {
        p->close_req = 0;
        nx_qstream_free_all(p);
    }
    if (p->forget_req)
        nx_qpeer_free(p);
}

void nx_qpeer_conn_failed(struct nx_qpeer *p, const char *why)
{
    if (p->state != NX_TPEER_LOST) {
        if (p->visible) {
            nx_qpeer_lost(p, why);
        } else {
            NX_WARN("quic", "%s: inbound connection ended before it came up: %s",
                    p->base.addr, why);
            p->forget_req = 1;
        }
    }
    nx_qpeer_settle(p);
}

/* ---- ops ---- */

static struct nx_tpeer *quic_peer(struct nx_transport *t, const char *addr, char *err,
                                  size_t errlen)
{
    struct nx_quic *q = (struct nx_quic *)t;
    union nx_qsa sa;
    socklen_t len;
    if (nx_qaddr_resolve(addr, &sa, &len, err, errlen) != 0 ||
        to_socket_family(q, &sa, &len, err, errlen) != 0)
        return NULL;
    struct nx_qpeer *p = nx_qpeer_find(q, &sa.sa);
    if (!p)
        p = nx_qpeer_new(q, &sa, len);
    p->visible = 1;
    return &p->base;
}

static int quic_send(struct nx_tpeer *tp, uint64_t channel, const struct iovec *iov,
                     int iovcnt, uint64_t token)
{
    struct nx_qpeer *p = (struct nx_qpeer *)tp;
    if (p->state == NX_TPEER_LOST || p->forget_req || p->q->destroying)
        return -ENOTCONN;
    int rv = nx_qstream_send(p, channel, iov, iovcnt, token);
    if (rv != 0 || p->conn)
        return rv;
    /* First message: dial, from the loop.  ngtcp2's idle and handshake clocks start when
     * the connection is made, so it is made right before its first packet goes out; the
     * caller may well queue for seconds before the loop runs again. */
    if (!p->dial_pending) {
        p->dial_pending = 1;
        p->dial_next = p->q->dials;
        p->q->dials = p;
        idle_start(p->q);
    }
    return 0;
}

static void dial_now(struct nx_qpeer *p)
{
    char err[160];
    if (p->conn || p->state == NX_TPEER_LOST)
        return; /* the peer dialed us meanwhile, or we gave up */
    p->conn = nx_qconn_client_new(p, err, sizeof(err));
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
    notify_unlink(p);
    if (p->conn)
        nx_qconn_close(p->conn, NX_QERR_CLOSED, why);
    if (conn_busy(p))
        p->close_req = 1;
    else
        nx_qstream_free_all(p);
}

static void quic_peer_forget(struct nx_tpeer *tp)
{
    struct nx_qpeer *p = (struct nx_qpeer *)tp;
    if (conn_busy(p)) {
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
    snprintf(o->reason, sizeof(o->reason), "%s", p->state == NX_TPEER_LOST ? p->reason : "");
    if (!c)
        return;
    ngtcp2_conn_stat st;
    ngtcp2_conn_get_conn_stat(c->conn, &st);
    o->rtt_ms = (double)st.smoothed_rtt / NGTCP2_MILLISECONDS;
    o->min_rtt_ms = st.min_rtt == UINT64_MAX ? 0 : (double)st.min_rtt / NGTCP2_MILLISECONDS;
    o->rttvar_ms = (double)st.rttvar / NGTCP2_MILLISECONDS;
    o->cwnd = st.cwnd;
    o->pkts_sent += c->pkts_sent;
    o->pkts_recv += c->pkts_recv;
    o->pkts_lost = nx_qstream_lost_pkts(c);
    o->streams_open = nx_qstream_count(c);
    if (c->confirmed)
        nx_qtls_cipher(c, o->cipher, sizeof(o->cipher));
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
        if (p->conn)
            nx_qconn_close(p->conn, NX_QERR_CLOSED, "shutdown");
        nx_qpeer_free(p);
    }
    q->notify = NULL;
    q->dials = NULL;
    q->flush_list = q->touched = NULL;
    uv_idle_stop(&q->idle);
    uv_close((uv_handle_t *)&q->idle, idle_close_cb);
    nx_qudp_close(q);
}

static const struct nx_transport_ops quic_ops = {
    .name = "quic",
    .peer = quic_peer,
    .send = quic_send,
    .close_peer = quic_close_peer,
    .peer_forget = quic_peer_forget,
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
        nx_qaddr_resolve(q->conf.advertise, &a, &l, err, sizeof(err)) == 0)
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
    if (nx_qaddr_resolve(conf->listen, &bind_addr, &bind_len, err, errlen) != 0)
        return NULL;
    struct nx_quic *q = nx_xcalloc(1, sizeof(*q));
    q->base.ops = &quic_ops;
    if (cb)
        q->base.cb = *cb;
    q->loop = loop;
    q->udp.fd = -1;
    copy_conf(&q->conf, conf);
    if (nx_qtls_init(&q->tls, &q->conf, q->reset_secret, err, errlen) != 0)
        goto fail_conf;
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
