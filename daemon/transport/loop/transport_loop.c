/*
 * transport_loop.c - the loop transport's endpoints: peer records, connections (ids,
 * UP/LOST, keep-alive, idle timeout, close and reset) and the ops table.
 *
 * A connection is a pair of ids, one chosen by each side from the net's growing counter.
 * Every packet carries the sender's id and, once known, the receiver's; the receiver
 * checks them the way a QUIC endpoint checks connection ids, which is what lets a
 * restarted or forgetful endpoint be told apart from a slow one:
 *   - a packet naming a connection we do not have is answered by RESET;
 *   - a packet naming one we closed is answered by CLOSE with our reason;
 *   - a first packet (receiver id unknown) opens a connection, or joins our own dial to
 *     the same peer when neither side has heard from the other (simultaneous open);
 *   - a first packet with a newer sender id than the connection we have means the peer
 *     started over: ours is lost and the new one gets a new record.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop_int.h"
#include "mem.h"

static const struct nx_transport_ops loop_ops;

/* "name:port" or "[v6]:port"; the name without ':' or blanks, the port 1..65535. */
static int addr_check(const char *addr, char *err, size_t errlen)
{
    size_t n = addr ? strlen(addr) : 0;
    const char *colon = n ? strrchr(addr, ':') : NULL;
    if (!n || n >= NX_TADDR_MAX || !colon || colon == addr)
        goto bad;
    for (const char *s = addr; s < colon; s++) {
        if (*s == ' ' || *s == '\t' || (*s == ':' && addr[0] != '['))
            goto bad;
    }
    if (addr[0] == '[' && colon[-1] != ']')
        goto bad;
    unsigned long port = 0;
    const char *d = colon + 1;
    if (!*d || strlen(d) > 5)
        goto bad;
    for (; *d; d++) {
        if (*d < '0' || *d > '9')
            goto bad;
        port = port * 10 + (unsigned long)(*d - '0');
    }
    if (port == 0 || port > 65535)
        goto bad;
    return 0;
bad:
    snprintf(err, errlen, "bad loop address \"%.*s\": want name:port", NX_TADDR_MAX, addr ? addr : "");
    return -1;
}

/* ---- peer records ---- */

int lpeer_alive(const struct lpeer *p)
{
    return p->state != NX_TPEER_LOST && !p->forgotten && !p->ep->dying;
}

static struct lpeer *find_current(struct lep *ep, const char *addr)
{
    for (struct lpeer *p = ep->peers; p; p = p->next)
        if (p->current && !p->forgotten && strcmp(p->base.addr, addr) == 0)
            return p;
    return NULL;
}

static struct lpeer *peer_new(struct lep *ep, const char *addr)
{
    struct lpeer *old = find_current(ep, addr);
    if (old)
        old->current = 0;
    struct lpeer *p = nx_xcalloc(1, sizeof(*p));
    p->base.t = &ep->base;
    snprintf(p->base.addr, sizeof(p->base.addr), "%s", addr);
    p->ep = ep;
    p->state = NX_TPEER_CONNECTING;
    p->current = 1;
    lstream_init(p);
    struct lpeer **pp = &ep->peers; /* at the tail: each_peer goes in creation order */
    while (*pp)
        pp = &(*pp)->next;
    *pp = p;
    return p;
}

static void request_sweep(struct nx_loopnet *net)
{
    net->need_sweep = 1;
}

void lpeer_lost(struct lpeer *p, const char *reason, int notify)
{
    if (p->state == NX_TPEER_LOST)
        return;
    p->state = NX_TPEER_LOST;
    snprintf(p->reason, sizeof(p->reason), "%s", reason);
    NX_DEBUG("loopnet", "%s -> %s: lost: %s", p->ep->base.local_addr, p->base.addr, reason);
    request_sweep(p->ep->net);
    struct nx_transport *t = &p->ep->base;
    if (notify && !p->forgotten && !p->ep->dying && t->cb.on_peer)
        t->cb.on_peer(t->cb.arg, &p->base, NX_TPEER_LOST, p->reason);
}

static void peer_up(struct lpeer *p, uint64_t rid)
{
    p->rid = rid;
    if (p->state != NX_TPEER_CONNECTING)
        return;
    p->state = NX_TPEER_UP;
    NX_DEBUG("loopnet", "%s -> %s: up (%s)", p->ep->base.local_addr, p->base.addr,
             p->inbound ? "inbound" : "outbound");
    struct nx_transport *t = &p->ep->base;
    if (t->cb.on_peer)
        t->cb.on_peer(t->cb.arg, &p->base, NX_TPEER_UP, "");
}

void lpeer_xmit(struct lpeer *p, struct lpkt *pkt)
{
    struct nx_loopnet *net = p->ep->net;
    snprintf(pkt->src, sizeof(pkt->src), "%s", p->ep->base.local_addr);
    snprintf(pkt->dst, sizeof(pkt->dst), "%s", p->base.addr);
    pkt->src_conn = p->lid;
    pkt->dst_conn = p->rid;
    p->last_sent = lnet_now(net);
    p->st.pkts_sent++;
    lnet_send(net, pkt);
}

/* Answers a packet outside any live connection, to its sender. */
static void reply(struct lep *ep, const struct lpkt *in, enum lpkt_kind kind, uint64_t our_id,
                  const char *reason)
{
    struct lpkt *pkt = lpkt_new(kind);
    snprintf(pkt->src, sizeof(pkt->src), "%s", ep->base.local_addr);
    snprintf(pkt->dst, sizeof(pkt->dst), "%s", in->src);
    pkt->src_conn = our_id;
    pkt->dst_conn = in->src_conn;
    if (reason)
        snprintf(pkt->reason, sizeof(pkt->reason), "%.*s", (int)sizeof(pkt->reason) - 1, reason);
    lnet_send(ep->net, pkt);
}

static void send_close(struct lpeer *p, const char *reason)
{
    if (!p->lid)
        return; /* never dialed, never heard from: nobody to tell */
    struct lpkt *pkt = lpkt_new(LPKT_CLOSE);
    snprintf(pkt->reason, sizeof(pkt->reason), "%.*s", (int)sizeof(pkt->reason) - 1, reason);
    lpeer_xmit(p, pkt);
}

/* ---- input ---- */

/* Finds the record a packet belongs to, opening a connection when it starts one; NULL
 * when the packet is to be dropped (after any answer it deserves). */
static struct lpeer *demux(struct lep *ep, const struct lpkt *pkt)
{
    struct nx_loopnet *net = ep->net;
    struct lpeer *p = find_current(ep, pkt->src);
    if (pkt->kind == LPKT_RESET) {
        if (p && lpeer_alive(p) && p->lid && pkt->dst_conn == p->lid)
            lpeer_lost(p, "connection reset by peer", 1);
        return NULL;
    }
    if (pkt->dst_conn) {
        if (!p || p->lid != pkt->dst_conn) {
            if (pkt->kind != LPKT_CLOSE)
                reply(ep, pkt, LPKT_RESET, 0, NULL);
            return NULL;
        }
        if (!lpeer_alive(p)) {
            if (pkt->kind != LPKT_CLOSE)
                reply(ep, pkt, LPKT_CLOSE, p->lid, p->reason);
            return NULL;
        }
        if (p->rid && p->rid != pkt->src_conn)
            return NULL; /* a stale packet of an older connection */
        return p;
    }
    /* The sender has not heard from us on this connection yet. */
    if (p && lpeer_alive(p) && p->rid == pkt->src_conn)
        return p;
    if (pkt->kind == LPKT_CLOSE)
        return NULL; /* closing a dial we never heard of */
    if (pkt->kind != LPKT_DATA && pkt->kind != LPKT_PING)
        return NULL;
    if (p && lpeer_alive(p) && p->rid == 0) {
        if (!p->lid) { /* a record peer() made, never dialed */
            p->lid = ++net->next_conn_id;
            p->inbound = 1;
            p->last_sent = p->last_recv = lnet_now(net);
        }
        return p; /* else both dialed at once: the two halves make one connection */
    }
    if (p && pkt->src_conn <= p->rid)
        return NULL; /* a stale first packet of a connection we already replaced */
    if (p && lpeer_alive(p)) {
        lpeer_lost(p, "peer opened a new connection (it restarted or lost ours)", 1);
        if (ep->dying)
            return NULL;
    }
    p = peer_new(ep, pkt->src);
    p->lid = ++net->next_conn_id;
    p->inbound = 1;
    p->last_sent = p->last_recv = lnet_now(net);
    return p;
}

void lep_input(struct lep *ep, const struct lpkt *pkt)
{
    struct lpeer *p = demux(ep, pkt);
    if (!p || !lpeer_alive(p))
        return;
    p->last_recv = lnet_now(ep->net);
    p->st.pkts_recv++;
    if (!p->rid || p->state == NX_TPEER_CONNECTING) {
        peer_up(p, pkt->src_conn);
        if (!lpeer_alive(p))
            return;
    }
    char why[sizeof(pkt->reason) + 16];
    switch (pkt->kind) {
    case LPKT_DATA:
        lstream_on_data(p, pkt);
        break;
    case LPKT_ACK:
        lstream_on_ack(p, pkt);
        break;
    case LPKT_CLOSE:
        snprintf(why, sizeof(why), "peer closed: %s", pkt->reason);
        lpeer_lost(p, why, 1);
        break;
    default:
        break;
    }
    lep_rearm(ep);
}

/* ---- timers: retransmission, keep-alive, idle timeout ---- */

static void ep_timer_cb(uv_timer_t *h)
{
    struct lep *ep = h->data;
    struct nx_loopnet *net = ep->net;
    const struct nx_loopnet_conf *c = &net->conf;
    uint64_t now = lnet_now(net);
    char why[96];
    lnet_enter(net);
    for (struct lpeer *p = ep->peers; p && !ep->dying; p = p->next) {
        if (!lpeer_alive(p) || !p->lid)
            continue;
        if (now >= p->last_recv + c->idle_timeout_ms) {
            if (p->state == NX_TPEER_CONNECTING)
                snprintf(why, sizeof(why), "no answer within %u ms (nobody there, or cut off)",
                         c->idle_timeout_ms);
            else
                snprintf(why, sizeof(why), "idle timeout: nothing heard for %u ms",
                         c->idle_timeout_ms);
            lpeer_lost(p, why, 1);
            continue;
        }
        lstream_on_timer(p, now);
        if (lpeer_alive(p) && now >= p->last_sent + c->keepalive_ms)
            lpeer_xmit(p, lpkt_new(LPKT_PING));
    }
    lep_rearm(ep);
    lnet_leave(net);
}

void lep_rearm(struct lep *ep)
{
    const struct nx_loopnet_conf *c = &ep->net->conf;
    if (ep->dying)
        return;
    uint64_t next = UINT64_MAX;
    for (struct lpeer *p = ep->peers; p; p = p->next) {
        if (!lpeer_alive(p) || !p->lid)
            continue;
        uint64_t d = p->last_recv + c->idle_timeout_ms;
        if (p->last_sent + c->keepalive_ms < d)
            d = p->last_sent + c->keepalive_ms;
        uint64_t r = lstream_deadline(p);
        if (r < d)
            d = r;
        if (d < next)
            next = d;
    }
    if (next == UINT64_MAX) {
        uv_timer_stop(&ep->timer);
        return;
    }
    uint64_t now = lnet_now(ep->net);
    uv_timer_start(&ep->timer, ep_timer_cb, next > now ? next - now : 0, 0);
}

/* ---- freeing ---- */

static void peer_free(struct lpeer *p)
{
    lstream_free_all(p);
    free(p);
}

static void ep_close_cb(uv_handle_t *h)
{
    free(h->data);
}

void lep_free_now(struct lep *ep)
{
    struct nx_loopnet *net = ep->net;
    while (ep->peers) {
        struct lpeer *p = ep->peers;
        ep->peers = p->next;
        peer_free(p);
    }
    for (struct lep **pp = &net->eps; *pp; pp = &(*pp)->next) {
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    }
    uv_timer_stop(&ep->timer);
    uv_close((uv_handle_t *)&ep->timer, ep_close_cb);
}

void lep_sweep(struct lep *ep)
{
    if (ep->dying) {
        lep_free_now(ep);
        return;
    }
    struct lpeer **pp = &ep->peers;
    while (*pp) {
        struct lpeer *p = *pp;
        if (p->forgotten) {
            *pp = p->next;
            peer_free(p);
            continue;
        }
        if (p->state == NX_TPEER_LOST)
            lstream_free_all(p);
        pp = &p->next;
    }
}

/* ---- ops ---- */

static struct nx_tpeer *loop_peer(struct nx_transport *t, const char *addr, char *err,
                                  size_t errlen)
{
    struct lep *ep = (struct lep *)t;
    if (addr_check(addr, err, errlen) != 0)
        return NULL;
    if (strcmp(addr, t->local_addr) == 0) {
        snprintf(err, errlen, "%s is this endpoint's own address", addr);
        return NULL;
    }
    if (ep->dying) {
        snprintf(err, errlen, "endpoint %s is being destroyed", t->local_addr);
        return NULL;
    }
    struct lpeer *p = find_current(ep, addr);
    return p ? &p->base : &peer_new(ep, addr)->base;
}

static int loop_send(struct nx_tpeer *tp, uint64_t channel, const struct iovec *iov,
                     int iovcnt, uint64_t token)
{
    struct lpeer *p = (struct lpeer *)tp;
    struct nx_loopnet *net = p->ep->net;
    if (!lpeer_alive(p))
        return -ENOTCONN;
    int rv = lstream_send(p, channel, iov, iovcnt, token);
    if (rv != 0)
        return rv;
    if (!p->lid) { /* the first message dials */
        p->lid = ++net->next_conn_id;
        p->inbound = 0;
        p->last_sent = p->last_recv = lnet_now(net);
    }
    lnet_enter(net);
    lstream_pump(p);
    lep_rearm(p->ep);
    lnet_leave(net);
    return 0;
}

static void loop_close_peer(struct nx_tpeer *tp, const char *reason)
{
    struct lpeer *p = (struct lpeer *)tp;
    struct nx_loopnet *net = p->ep->net;
    char why[100];
    snprintf(why, sizeof(why), "%s", reason && *reason ? reason : "closed");
    if (p->state == NX_TPEER_LOST)
        return;
    lnet_enter(net);
    send_close(p, why);
    char here[sizeof(why) + 16];
    snprintf(here, sizeof(here), "closed here: %s", why);
    lpeer_lost(p, here, 0);
    lep_rearm(p->ep);
    lnet_leave(net);
}

static void loop_peer_forget(struct nx_tpeer *tp)
{
    struct lpeer *p = (struct lpeer *)tp;
    struct nx_loopnet *net = p->ep->net;
    lnet_enter(net);
    if (p->state != NX_TPEER_LOST)
        loop_close_peer(tp, "forgotten");
    p->forgotten = 1;
    p->current = 0;
    request_sweep(net);
    lnet_leave(net);
}

static void loop_stats(struct nx_tpeer *tp, struct nx_tpeer_stats *o)
{
    struct lpeer *p = (struct lpeer *)tp;
    *o = p->st;
    snprintf(o->addr, sizeof(o->addr), "%s", p->base.addr);
    o->state = p->state;
    o->inbound = p->inbound;
    o->rtt_ms = p->srtt;
    o->min_rtt_ms = p->min_rtt < 0 ? 0 : p->min_rtt;
    o->rttvar_ms = p->rttvar;
    o->pto_ms = p->rto; /* the loop's retransmission timeout, with its backoff */
    o->cwnd = p->ep->net->conf.window_bytes;
    o->streams_open = lstream_count(p);
    o->conns = p->state == NX_TPEER_UP; /* a loop peer is never handed over */
    snprintf(o->cipher, sizeof(o->cipher), "%s", p->state == NX_TPEER_UP ? "none (loop)" : "");
    snprintf(o->reason, sizeof(o->reason), "%s", p->state == NX_TPEER_LOST ? p->reason : "");
}

static void loop_each_peer(struct nx_transport *t, void (*fn)(struct nx_tpeer *, void *),
                           void *arg)
{
    struct lep *ep = (struct lep *)t;
    lnet_enter(ep->net); /* records fn forgets stay valid until we are done */
    for (struct lpeer *p = ep->peers; p; p = p->next)
        if (!p->forgotten)
            fn(&p->base, arg);
    lnet_leave(ep->net);
}

static void loop_destroy(struct nx_transport *t)
{
    struct lep *ep = (struct lep *)t;
    struct nx_loopnet *net = ep->net;
    if (ep->dying)
        return;
    lnet_enter(net);
    for (struct lpeer *p = ep->peers; p; p = p->next) {
        if (lpeer_alive(p))
            send_close(p, "shutdown");
    }
    ep->dying = 1;
    uv_timer_stop(&ep->timer);
    request_sweep(net);
    NX_DEBUG("loopnet", "%s: destroyed", t->local_addr);
    lnet_leave(net);
}

/* Deliveries follow the simulated clock of the links, not the caller's bursts. */
static void loop_progress(struct nx_transport *t)
{
    (void)t;
}

static const struct nx_transport_ops loop_ops = {
    .name = "loop",
    .peer = loop_peer,
    .send = loop_send,
    .close_peer = loop_close_peer,
    .peer_forget = loop_peer_forget,
    .progress = loop_progress,
    .stats = loop_stats,
    .each_peer = loop_each_peer,
    .destroy = loop_destroy,
};

struct nx_transport *nx_loopnet_endpoint(struct nx_loopnet *net, const char *addr,
                                         const struct nx_transport_cb *cb, char *err,
                                         size_t errlen)
{
    if (addr_check(addr, err, errlen) != 0)
        return NULL;
    if (lnet_find_ep(net, addr)) {
        snprintf(err, errlen, "loop address %s is taken", addr);
        return NULL;
    }
    struct lep *ep = nx_xcalloc(1, sizeof(*ep));
    ep->base.ops = &loop_ops;
    if (cb)
        ep->base.cb = *cb;
    snprintf(ep->base.local_addr, sizeof(ep->base.local_addr), "%s", addr);
    ep->net = net;
    uv_timer_init(net->loop, &ep->timer);
    ep->timer.data = ep;
    struct lep **pp = &net->eps;
    while (*pp)
        pp = &(*pp)->next;
    *pp = ep;
    NX_DEBUG("loopnet", "%s: endpoint up", addr);
    return &ep->base;
}
