/*
 * transport_lanes.c - the lanes' face to the layer above, on the daemon's loop thread:
 * the ops table, peer records (one per peer incarnation, over lane 0's record and an id
 * the lanes know it by), and the events of lanes >= 1.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_int.h"
#include "log.h"
#include "mem.h"

static const struct nx_transport_ops lanes_ops;

int nx_lanes_addr_shift(const char *addr, int delta, char *out, size_t len)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return -1;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port + delta < 1 || port + delta > 65535)
        return -1;
    int n = snprintf(out, len, "%.*s:%ld", (int)(colon - addr), addr, port + delta);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* ---- events from the lanes ---- */

void nx_levt_free(struct nx_lanes *L, struct nx_levt *e)
{
    if (e->kind == NX_LE_MSG) {
        struct nx_lane *ln = &L->lane[e->lane];
        size_t left = atomic_fetch_sub(&ln->rx_queued, e->len) - e->len;
        if (atomic_load(&ln->rx_paused) && left < L->rx_limit / 2 &&
            !atomic_load(&L->stopping) && !atomic_exchange(&ln->resume_posted, 1)) {
            struct nx_lcmd *c = nx_xcalloc(1, sizeof(*c));
            c->kind = NX_LC_RESUME;
            nx_lane_post(ln, c);
        }
    }
    if (e->data && e->data != e->inl)
        nx_bufpool_put(&L->pool, e->data, e->cap);
    free(e);
}

void nx_lanes_event(struct nx_lanes *L, struct nx_levt *e)
{
    e->next = NULL;
    pthread_mutex_lock(&L->ev_mu);
    int was_empty = !L->ev_head;
    if (L->ev_tail)
        L->ev_tail->next = e;
    else
        L->ev_head = e;
    L->ev_tail = e;
    pthread_mutex_unlock(&L->ev_mu);
    if (was_empty)
        uv_async_send(&L->ev_wake);
}

static struct nx_lpeer *by_id(struct nx_lanes *L, uint64_t id)
{
    for (struct nx_lpeer *p = L->peers; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static void post(struct nx_lanes *L, uint32_t lane, enum nx_lcmd_kind kind,
                 const struct nx_lpeer *p, const char *reason)
{
    struct nx_lcmd *c = nx_xcalloc(1, sizeof(*c));
    c->kind = kind;
    c->id = p->id;
    if (reason)
        snprintf(c->reason, sizeof(c->reason), "%s", reason);
    if (kind == NX_LC_ADOPT && /* the lane keeps it with the peer's id */
        nx_lanes_addr_shift(p->base.addr, (int)lane, c->addr, sizeof(c->addr)) < 0)
        c->addr[0] = 0;
    nx_lane_post(&L->lane[lane], c);
}

static void drop_held(struct nx_lanes *L, struct nx_lpeer *p)
{
    while (p->held) {
        struct nx_lcmd *c = p->held;
        p->held = c->next;
        nx_quic_msg_free(&L->pool, c->msg);
        free(c);
    }
    p->held_tail = NULL;
}

/* Any lane lost is the peer lost: the other lanes close theirs. */
static void lost(struct nx_lanes *L, struct nx_lpeer *p, uint32_t lane, const char *reason)
{
    if (p->state == NX_TPEER_LOST)
        return;
    p->state = NX_TPEER_LOST;
    if (lane)
        snprintf(p->reason, sizeof(p->reason), "lane %u of %u: %s", lane, L->n, reason);
    else
        snprintf(p->reason, sizeof(p->reason), "%s", reason);
    char why[100];
    snprintf(why, sizeof(why), "lane %u lost", lane);
    if (lane)
        L->t0->ops->close_peer(p->p0, why);
    for (uint32_t i = 1; i < L->n; i++)
        if (i != lane)
            post(L, i, NX_LC_CLOSE, p, why);
    drop_held(L, p);
    if (L->base.cb.on_peer)
        L->base.cb.on_peer(L->base.cb.arg, &p->base, NX_TPEER_LOST, p->reason);
}

static void send_hello(struct nx_lanes *L, struct nx_lpeer *p)
{
    char hello[32];
    struct iovec iov = {hello, nx_lanes_hello_put(hello, sizeof(hello), L->n)};
    p->hello_sent = 1;
    L->t0->ops->send(p->p0, NX_LANES_HELLO, &iov, 1, 0);
}

static void up(struct nx_lanes *L, struct nx_lpeer *p)
{
    if (p->state != NX_TPEER_CONNECTING)
        return;
    p->state = NX_TPEER_UP;
    if (!p->hello_sent)
        send_hello(L, p);
    for (uint32_t i = 1; i < L->n; i++)
        post(L, i, NX_LC_ADOPT, p, NULL);
    while (p->held) { /* in order, behind the adopts */
        struct nx_lcmd *c = p->held;
        p->held = c->next;
        nx_lane_post(&L->lane[nx_lanes_of(c->channel, L->n)], c);
    }
    p->held_tail = NULL;
    if (L->base.cb.on_peer)
        L->base.cb.on_peer(L->base.cb.arg, &p->base, NX_TPEER_UP, "");
}

static void on_hello(struct nx_lanes *L, struct nx_lpeer *p, const void *data, size_t len)
{
    char why[256];
    unsigned n = 0;
    if (nx_lanes_hello_parse(data, len, &n) == 0 && n == L->n)
        return;
    /* Both ends read the same text: it names the nodes, not "here" and "there". */
    if (n)
        snprintf(why, sizeof(why), "quic_lanes differ: %u on %s, %u on %s; set quic_lanes "
                 "alike on every node", L->n, L->base.local_addr, n, p->base.addr);
    else
        snprintf(why, sizeof(why), "protocol: a lanes hello of %zu bytes that does not say "
                 "a lane count from 1 to %u", len, NX_LANES_MAX);
    L->t0->ops->close_peer(p->p0, why);
    lost(L, p, 0, why);
}

/* Events handled per wake-up: the loop's other handles (the ranks' rings) get their turn
 * between batches, as they do between the QUIC endpoint's receive batches. */
#define NX_LEVT_BUDGET 256

static void ev_cb(uv_async_t *h)
{
    struct nx_lanes *L = h->data;
    pthread_mutex_lock(&L->ev_mu);
    struct nx_levt *e = L->ev_head, *cut = e;
    for (int i = 1; cut && i < NX_LEVT_BUDGET; i++)
        cut = cut->next;
    if (cut && cut->next) { /* the rest waits for the next turn, still in order */
        L->ev_head = cut->next;
        cut->next = NULL;
        uv_async_send(&L->ev_wake);
    } else {
        L->ev_head = L->ev_tail = NULL;
    }
    pthread_mutex_unlock(&L->ev_mu);
    while (e) {
        struct nx_levt *next = e->next;
        struct nx_lpeer *p = by_id(L, e->id);
        if (e->kind == NX_LE_COPIED) { /* the lender's, whatever became of the peer */
            if (L->base.cb.on_copied)
                L->base.cb.on_copied(L->base.cb.arg, e->token);
        } else if (p) {
            switch (e->kind) {
            case NX_LE_MSG:
                p->msgs_recv++;
                p->bytes_recv += e->len;
                if (p->state != NX_TPEER_LOST && L->base.cb.on_message) {
                    L->delivering = e;
                    L->base.cb.on_message(L->base.cb.arg, &p->base, e->channel,
                                          e->len ? (const void *)e->data : "", e->len);
                    L->delivering = NULL;
                }
                break;
            case NX_LE_SENT:
                if (L->base.cb.on_sent)
                    L->base.cb.on_sent(L->base.cb.arg, &p->base, e->token);
                break;
            case NX_LE_UP:
                break; /* the peer is up with lane 0 */
            case NX_LE_LOST:
                lost(L, p, e->lane, e->reason);
                break;
            case NX_LE_COPIED:
                break;
            }
        }
        nx_levt_free(L, e);
        e = next;
    }
}

/* ---- lane 0: the endpoint on this thread ---- */

static struct nx_lpeer *peer_new(struct nx_lanes *L, struct nx_tpeer *p0)
{
    struct nx_lpeer *p = nx_xcalloc(1, sizeof(*p));
    p->base.t = &L->base;
    snprintf(p->base.addr, sizeof(p->base.addr), "%s", p0->addr);
    p->id = ++L->next_id;
    p->p0 = p0;
    p->state = NX_TPEER_CONNECTING;
    p0->user = p;
    p->next = L->peers;
    L->peers = p;
    return p;
}

static void l0_message(void *arg, struct nx_tpeer *p0, uint64_t channel, const void *data,
                       size_t len)
{
    struct nx_lanes *L = arg;
    struct nx_lpeer *p = p0->user;
    if (!p || p->state == NX_TPEER_LOST)
        return;
    if (channel == NX_LANES_HELLO)
        on_hello(L, p, data, len);
    else if (L->base.cb.on_message)
        L->base.cb.on_message(L->base.cb.arg, &p->base, channel, data, len);
}

/* Lane 0 runs on this thread: its long messages may stream to the caller as they come. */
static void *l0_stream(void *arg, struct nx_tpeer *p0, uint64_t channel, const void *head,
                       size_t headlen, size_t len)
{
    struct nx_lanes *L = arg;
    struct nx_lpeer *p = p0->user;
    if (!p || p->state == NX_TPEER_LOST || channel == NX_LANES_HELLO || !L->base.cb.on_stream)
        return NULL;
    return L->base.cb.on_stream(L->base.cb.arg, &p->base, channel, head, headlen, len);
}

static void l0_stream_data(void *arg, void *sink, const void *data, size_t n)
{
    struct nx_lanes *L = arg;
    L->base.cb.on_stream_data(L->base.cb.arg, sink, data, n);
}

static void l0_stream_end(void *arg, void *sink, int whole)
{
    struct nx_lanes *L = arg;
    L->base.cb.on_stream_end(L->base.cb.arg, sink, whole);
}

static void l0_peer(void *arg, struct nx_tpeer *p0, enum nx_tpeer_state st, const char *reason)
{
    struct nx_lanes *L = arg;
    struct nx_lpeer *p = p0->user;
    if (st == NX_TPEER_UP) {
        if (!p)
            p = peer_new(L, p0); /* it dialed us */
        up(L, p);
    } else if (st == NX_TPEER_LOST && p) {
        lost(L, p, 0, reason);
    }
}

static void l0_sent(void *arg, struct nx_tpeer *p0, uint64_t token)
{
    struct nx_lanes *L = arg;
    struct nx_lpeer *p = p0->user;
    if (p && token && L->base.cb.on_sent)
        L->base.cb.on_sent(L->base.cb.arg, &p->base, token);
}

/* ---- ops ---- */

static struct nx_tpeer *lanes_peer(struct nx_transport *t, const char *addr, char *err,
                                   size_t errlen)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    struct nx_tpeer *p0 = L->t0->ops->peer(L->t0, addr, err, errlen);
    if (!p0)
        return NULL;
    struct nx_lpeer *p = p0->user ? p0->user : peer_new(L, p0);
    return &p->base;
}

/* send() and lend(): a message for lane 0 goes on this thread's connection, copied; one
 * for another lane is copied here, or, lent, on that lane's thread. */
static int lanes_submit(struct nx_tpeer *tp, uint64_t channel, const struct iovec *iov,
                        int iovcnt, uint64_t token, bool lend)
{
    struct nx_lpeer *p = (struct nx_lpeer *)tp;
    struct nx_lanes *L = (struct nx_lanes *)tp->t;
    if (p->state == NX_TPEER_LOST)
        return -ENOTCONN;
    if (channel == NX_LANES_HELLO)
        return -EINVAL;
    if (!p->hello_sent)
        send_hello(L, p); /* lane 0 dials first, whichever lane this goes on */
    uint32_t lane = nx_lanes_of(channel, L->n);
    if (lane == 0)
        return L->t0->ops->send(p->p0, channel, iov, iovcnt, token);
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > NX_TMSG_MAX || total + iov[i].iov_len > NX_TMSG_MAX)
            return -EMSGSIZE;
        total += iov[i].iov_len;
    }
    struct nx_lcmd *c = nx_xcalloc(1, sizeof(*c));
    c->kind = NX_LC_SEND;
    c->id = p->id;
    c->channel = channel;
    c->token = token;
    /* Lent only to a lane that is up (one that is not holds it for as long as a dial
     * takes) and with a header that fits the command. */
    lend = lend && token && iovcnt > 1 && p->state == NX_TPEER_UP &&
           iov[0].iov_len <= sizeof(c->head);
    if (lend) {
        c->total = total;
        c->headlen = iov[0].iov_len;
        memcpy(c->head, iov[0].iov_base, c->headlen);
        c->nlent = iovcnt - 1;
        c->lent = nx_xcalloc((size_t)c->nlent, sizeof(*c->lent));
        memcpy(c->lent, iov + 1, (size_t)c->nlent * sizeof(*c->lent));
        L->lane[lane].lent_posted++;
    } else {
        uint8_t *dst;
        c->msg = nx_quic_msg_new(&L->pool, total, &dst);
        for (int i = 0; i < iovcnt; i++) {
            if (iov[i].iov_len)
                memcpy(dst, iov[i].iov_base, iov[i].iov_len);
            dst += iov[i].iov_len;
        }
    }
    p->msgs_sent++;
    p->bytes_sent += total;
    if (p->state == NX_TPEER_UP) {
        nx_lane_post(&L->lane[lane], c);
    } else {
        if (p->held_tail)
            p->held_tail->next = c;
        else
            p->held = c;
        p->held_tail = c;
    }
    return lend;
}

static int lanes_send(struct nx_tpeer *tp, uint64_t channel, const struct iovec *iov,
                      int iovcnt, uint64_t token)
{
    return lanes_submit(tp, channel, iov, iovcnt, token, false);
}

static int lanes_lend(struct nx_tpeer *tp, uint64_t channel, const struct iovec *iov,
                      int iovcnt, uint64_t token)
{
    return lanes_submit(tp, channel, iov, iovcnt, token, true);
}

/* A message of lane 0 is its endpoint's to give; one of another lane is in its event's
 * pool buffer, which the event then no longer frees (nx_levt_free). */
static void *lanes_take(struct nx_transport *t, const void *data)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    struct nx_levt *e = L->delivering;
    if (!e)
        return L->t0->ops->take ? L->t0->ops->take(L->t0, data) : NULL;
    if (data != e->data || e->data == e->inl)
        return NULL;
    void *buf = e->data;
    e->data = NULL;
    return buf;
}

static void lanes_settle(struct nx_transport *t)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    if (atomic_load(&L->stopping))
        return; /* the lanes are stopped, or stop before they read anything more */
    for (uint32_t i = 1; i < L->n; i++) {
        struct nx_lane *ln = &L->lane[i];
        pthread_mutex_lock(&ln->mu);
        while (ln->lent_done < ln->lent_posted)
            pthread_cond_wait(&ln->cv, &ln->mu);
        pthread_mutex_unlock(&ln->mu);
    }
}

static void lanes_close_peer(struct nx_tpeer *tp, const char *reason)
{
    struct nx_lpeer *p = (struct nx_lpeer *)tp;
    struct nx_lanes *L = (struct nx_lanes *)tp->t;
    if (p->state != NX_TPEER_LOST) {
        p->state = NX_TPEER_LOST;
        snprintf(p->reason, sizeof(p->reason), "closed here: %s",
                 reason && *reason ? reason : "closed");
    }
    L->t0->ops->close_peer(p->p0, reason);
    for (uint32_t i = 1; i < L->n; i++)
        post(L, i, NX_LC_CLOSE, p, reason);
    drop_held(L, p);
}

static void lanes_peer_forget(struct nx_tpeer *tp)
{
    struct nx_lpeer *p = (struct nx_lpeer *)tp;
    struct nx_lanes *L = (struct nx_lanes *)tp->t;
    p->p0->user = NULL;
    L->t0->ops->peer_forget(p->p0);
    for (uint32_t i = 1; i < L->n; i++)
        post(L, i, NX_LC_FORGET, p, NULL);
    drop_held(L, p);
    for (struct nx_lpeer **pp = &L->peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    free(p);
}

static void lanes_progress(struct nx_transport *t)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    L->t0->ops->progress(L->t0);
}

static void lanes_stats(struct nx_tpeer *tp, struct nx_tpeer_stats *o)
{
    struct nx_lpeer *p = (struct nx_lpeer *)tp;
    struct nx_lanes *L = (struct nx_lanes *)tp->t;
    L->t0->ops->stats(p->p0, o);
    snprintf(o->addr, sizeof(o->addr), "%s", p->base.addr);
    o->state = p->state;
    o->bytes_sent += p->bytes_sent;
    o->bytes_recv += p->bytes_recv;
    o->msgs_sent += p->msgs_sent;
    o->msgs_recv += p->msgs_recv;
    if (p->state == NX_TPEER_LOST)
        snprintf(o->reason, sizeof(o->reason), "%s", p->reason);
}

/* Lane 0 from its endpoint here; the others asked on their threads, all at once, then
 * waited for (a lane answers between two turns of its loop). */
static uint32_t lanes_lanes(struct nx_tpeer *tp, struct nx_tpeer_lane *out, uint32_t max)
{
    struct nx_lpeer *p = (struct nx_lpeer *)tp;
    struct nx_lanes *L = (struct nx_lanes *)tp->t;
    uint32_t n = L->n < max ? L->n : max;
    if (!n)
        return 0;
    struct nx_tpeer_stats s;
    L->t0->ops->stats(p->p0, &s);
    out[0] = nx_tpeer_lane_of(&s);
    uint64_t seq = ++L->stat_seq;
    for (uint32_t i = 1; i < n; i++) {
        struct nx_lcmd *c = nx_xcalloc(1, sizeof(*c));
        c->kind = NX_LC_STATS;
        c->id = p->id;
        c->seq = seq;
        nx_lane_post(&L->lane[i], c);
    }
    for (uint32_t i = 1; i < n; i++) {
        struct nx_lane *ln = &L->lane[i];
        pthread_mutex_lock(&ln->mu);
        while (ln->stat_seq != seq)
            pthread_cond_wait(&ln->cv, &ln->mu);
        out[i] = ln->stat;
        pthread_mutex_unlock(&ln->mu);
    }
    return n;
}

static void lanes_each_peer(struct nx_transport *t, void (*fn)(struct nx_tpeer *, void *),
                            void *arg)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    for (struct nx_lpeer *p = L->peers, *next; p; p = next) {
        next = p->next;
        fn(&p->base, arg);
    }
}

static void free_lanes(uv_handle_t *h)
{
    struct nx_lanes *L = h->data;
    nx_bufpool_fini(&L->pool);
    pthread_mutex_destroy(&L->ev_mu);
    free(L->lane);
    free(L);
}

static void lanes_destroy(struct nx_transport *t)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    atomic_store(&L->stopping, 1);
    for (uint32_t i = 1; i < L->n; i++)
        nx_lane_stop(&L->lane[i]);
    while (L->ev_head) {
        struct nx_levt *e = L->ev_head;
        L->ev_head = e->next;
        nx_levt_free(L, e);
    }
    while (L->peers) {
        struct nx_lpeer *p = L->peers;
        L->peers = p->next;
        drop_held(L, p);
        free(p);
    }
    L->t0->ops->destroy(L->t0);
    uv_close((uv_handle_t *)&L->ev_wake, free_lanes);
}

static const struct nx_transport_ops lanes_ops = {
    .name = "quic-lanes",
    .peer = lanes_peer,
    .send = lanes_send,
    .lend = lanes_lend,
    .take = lanes_take,
    .settle = lanes_settle,
    .close_peer = lanes_close_peer,
    .peer_forget = lanes_peer_forget,
    .progress = lanes_progress,
    .stats = lanes_stats,
    .lanes = lanes_lanes,
    .each_peer = lanes_each_peer,
    .destroy = lanes_destroy,
};

/* Lane 0 on conf's listen, lanes 1..n-1 on the ports above the one it bound. */
static int start_lanes(struct nx_lanes *L, uv_loop_t *loop, const struct nx_quic_conf *conf,
                       char *err, size_t errlen)
{
    char base[NX_TADDR_MAX + 24];
    struct nx_quic_conf qc = *conf;
    /* Lane 0's buffers never leave this thread: it keeps its own, freed with it when its
     * handles have closed, after the shared pool (which the lanes stop using before
     * destroy returns) is gone. */
    qc.bufs = NULL;
    struct nx_transport_cb cb0 = {.arg = L, .on_message = l0_message, .on_peer = l0_peer,
                                  .on_sent = l0_sent, .on_stream = l0_stream,
                                  .on_stream_data = l0_stream_data,
                                  .on_stream_end = l0_stream_end};
    L->t0 = nx_quic_new(loop, &qc, &cb0, err, errlen);
    if (!L->t0)
        return -1;
    /* With port 0 the lanes follow the port the kernel gave lane 0. */
    char host_only[NX_TADDR_MAX];
    snprintf(host_only, sizeof(host_only), "%s", conf->listen);
    *strrchr(host_only, ':') = 0;
    snprintf(base, sizeof(base), "%s:%d", host_only, nx_quic_port(L->t0));
    qc.listen = base;
    uint32_t started = 1;
    for (; started < L->n; started++) {
        L->lane[started].L = L;
        L->lane[started].idx = started;
        if (nx_lane_start(&L->lane[started], &qc, err, errlen) != 0)
            break;
    }
    if (started == L->n)
        return 0;
    for (uint32_t i = 1; i < started; i++)
        nx_lane_stop(&L->lane[i]);
    L->t0->ops->destroy(L->t0); /* freed as its handles close, on the loop's next turn */
    L->t0 = NULL;
    return -1;
}

struct nx_transport *nx_lanes_new(uv_loop_t *loop, const struct nx_quic_conf *conf,
                                  uint32_t n, const struct nx_transport_cb *cb, char *err,
                                  size_t errlen)
{
    char tmp[NX_TADDR_MAX + 8];
    if (n < 2 || n > NX_LANES_MAX) {
        snprintf(err, errlen, "%u lanes: between 2 and %u", n, NX_LANES_MAX);
        return NULL;
    }
    if (!conf->listen || nx_lanes_addr_shift(conf->listen, 1, tmp, sizeof(tmp)) < 0) {
        snprintf(err, errlen, "%s: lanes need a listen address HOST:PORT (lane i listens "
                 "on PORT + i)", conf->listen ? conf->listen : "no listen");
        return NULL;
    }
    int any_port = !strcmp(strrchr(conf->listen, ':'), ":0");
    struct nx_lanes *L = nx_xcalloc(1, sizeof(*L));
    L->base.ops = &lanes_ops;
    if (cb)
        L->base.cb = *cb;
    L->n = n;
    L->rx_limit = NX_LANES_RX_LIMIT;
    L->lane = nx_xcalloc(n, sizeof(*L->lane));
    nx_bufpool_init(&L->pool, NX_LPOOL_KEEP, NX_LPOOL_BYTES, 1);
    pthread_mutex_init(&L->ev_mu, NULL);
    /* A port the kernel picked may have a taken one above it: pick again. */
    int rv = start_lanes(L, loop, conf, err, errlen);
    for (int tries = 1; rv != 0 && any_port && tries < 16; tries++)
        rv = start_lanes(L, loop, conf, err, errlen);
    if (rv != 0) {
        nx_bufpool_fini(&L->pool);
        pthread_mutex_destroy(&L->ev_mu);
        free(L->lane);
        free(L);
        return NULL;
    }
    snprintf(L->base.local_addr, sizeof(L->base.local_addr), "%s", L->t0->local_addr);
    uv_async_init(loop, &L->ev_wake, ev_cb);
    L->ev_wake.data = L;
    NX_INFO("lanes", "%u QUIC lanes on %s and the %u ports above it", n, L->base.local_addr,
            n - 1);
    return &L->base;
}

void nx_lanes_set_rx_limit(struct nx_transport *t, size_t bytes)
{
    ((struct nx_lanes *)t)->rx_limit = bytes;
}

size_t nx_lanes_rx_queued(struct nx_transport *t, size_t *peak)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    size_t sum = 0, top = 0;
    for (uint32_t i = 1; i < L->n; i++) {
        sum += atomic_load(&L->lane[i].rx_queued);
        size_t p = atomic_load(&L->lane[i].rx_peak);
        top = p > top ? p : top;
    }
    if (peak)
        *peak = top;
    return sum;
}

struct nx_transport *nx_lanes_first(struct nx_transport *t)
{
    return ((struct nx_lanes *)t)->t0;
}

int nx_lanes_reload(struct nx_transport *t, int *rolled, char *err, size_t errlen)
{
    struct nx_lanes *L = (struct nx_lanes *)t;
    int rv = nx_quic_reload(L->t0, rolled, err, errlen);
    for (uint32_t i = 1; i < L->n && rv == 0; i++) {
        struct nx_lane *ln = &L->lane[i];
        ln->reload_done = 0;
        struct nx_lcmd *c = nx_xcalloc(1, sizeof(*c));
        c->kind = NX_LC_RELOAD;
        nx_lane_post(ln, c);
        pthread_mutex_lock(&ln->mu);
        while (!ln->reload_done)
            pthread_cond_wait(&ln->cv, &ln->mu);
        rv = ln->reload_rv;
        *rolled += ln->rolled;
        if (rv != 0)
            snprintf(err, errlen, "lane %u: %s", i, ln->reload_err);
        pthread_mutex_unlock(&ln->mu);
    }
    return rv;
}
