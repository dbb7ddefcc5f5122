/*
 * lanes_thread.c - one lane: its QUIC endpoint on a loop and a thread of its own.
 *
 * The lane turns commands from the loop thread into calls on its endpoint, and its
 * endpoint's callbacks into events for the loop thread.  It knows peers by the id the loop
 * thread gave them (nx_lrec); a connection that arrives before the loop thread adopted its
 * address (lane 0 not up there yet) is held under id 0 and bound when the adopt comes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_int.h"
#include "log.h"
#include "mem.h"

static struct nx_levt *evt_new(struct nx_lane *ln, enum nx_levt_kind kind, uint64_t id,
                               size_t inl)
{
    struct nx_levt *e = nx_xcalloc(1, sizeof(*e) + inl);
    e->kind = kind;
    e->lane = ln->idx;
    e->id = id;
    return e;
}

static void emit_lost(struct nx_lane *ln, uint64_t id, const char *reason)
{
    struct nx_levt *e = evt_new(ln, NX_LE_LOST, id, 0);
    snprintf(e->reason, sizeof(e->reason), "%.127s", reason);
    nx_lanes_event(ln->L, e);
}

static struct nx_lrec *rec_by_id(struct nx_lane *ln, uint64_t id)
{
    for (struct nx_lrec *r = ln->recs; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

static void rec_free(struct nx_lane *ln, struct nx_lrec *r)
{
    for (struct nx_lrec **pp = &ln->recs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    while (r->held) {
        struct nx_levt *e = r->held;
        r->held = e->next;
        nx_levt_free(ln->L, e);
    }
    if (r->qp)
        r->qp->user = NULL;
    free(r);
}

static struct nx_lrec *rec_new(struct nx_lane *ln, uint64_t id, const char *addr)
{
    struct nx_lrec *r = nx_xcalloc(1, sizeof(*r));
    r->id = id;
    snprintf(r->addr, sizeof(r->addr), "%s", addr);
    r->next = ln->recs;
    ln->recs = r;
    return r;
}

/* ---- the endpoint's callbacks ---- */

static void give(struct nx_lane *ln, struct nx_lrec *r, struct nx_levt *e)
{
    if (r->id) {
        nx_lanes_event(ln->L, e);
        return;
    }
    e->next = NULL;
    if (r->held_tail)
        r->held_tail->next = e;
    else
        r->held = e;
    r->held_tail = e;
}

static void on_message(void *arg, struct nx_tpeer *qp, uint64_t channel, const void *data,
                       size_t len)
{
    struct nx_lane *ln = arg;
    struct nx_lrec *r = qp->user;
    if (!r)
        return;
    struct nx_levt *e;
    size_t cap;
    uint8_t *taken = len > 4096 ? nx_quic_take_delivered(ln->t, data, &cap) : NULL;
    if (taken) { /* assembled from packets: hand the buffer over, no copy */
        e = evt_new(ln, NX_LE_MSG, r->id, 0);
        e->data = taken;
        e->cap = cap;
    } else if (len <= 4096) {
        e = evt_new(ln, NX_LE_MSG, r->id, len);
        e->data = e->inl;
        memcpy(e->data, data, len);
    } else {
        e = evt_new(ln, NX_LE_MSG, r->id, 0);
        e->data = nx_bufpool_get(&ln->L->pool, len, &e->cap);
        memcpy(e->data, data, len);
    }
    e->len = len;
    e->channel = channel;
    size_t q = atomic_fetch_add(&ln->rx_queued, len) + len;
    if (q > atomic_load(&ln->rx_peak))
        atomic_store(&ln->rx_peak, q); /* only this thread raises it */
    if (q > ln->L->rx_limit && !atomic_load(&ln->rx_paused)) {
        atomic_store(&ln->rx_paused, 1);
        nx_quic_rx_pause(ln->t, 1);
        /* The loop thread may have taken it all down before it could see the pause (it
         * posts a resume only when it does): then nobody would resume us. */
        if (atomic_load(&ln->rx_queued) < ln->L->rx_limit / 2) {
            atomic_store(&ln->rx_paused, 0);
            nx_quic_rx_pause(ln->t, 0);
        }
    }
    give(ln, r, e);
}

static void on_sent(void *arg, struct nx_tpeer *qp, uint64_t token)
{
    struct nx_lane *ln = arg;
    struct nx_lrec *r = qp->user;
    if (!r || !r->id)
        return;
    struct nx_levt *e = evt_new(ln, NX_LE_SENT, r->id, 0);
    e->token = token;
    nx_lanes_event(ln->L, e);
}

static void on_peer(void *arg, struct nx_tpeer *qp, enum nx_tpeer_state st, const char *reason)
{
    struct nx_lane *ln = arg;
    struct nx_lrec *r = qp->user;
    if (st == NX_TPEER_LOST) {
        if (r && r->id) {
            emit_lost(ln, r->id, reason);
            return;
        }
        if (r) /* held, never adopted: nobody above knows it */
            rec_free(ln, r);
        ln->t->ops->peer_forget(qp);
        return;
    }
    if (st != NX_TPEER_UP)
        return;
    if (!r) {
        /* It dialed us.  Its lane-0 address names it above. */
        char canon[NX_TADDR_MAX];
        if (nx_lanes_addr_shift(qp->addr, -(int)ln->idx, canon, sizeof(canon)) < 0) {
            ln->t->ops->close_peer(qp, "its port is below this lane's number");
            ln->t->ops->peer_forget(qp);
            return;
        }
        /* The peer adopted and not dialed yet, if the loop thread said so; else held.  A
         * record of that address with a connection is an older incarnation's: the
         * endpoint made this one a new record, so that one is lost or about to be. */
        for (r = ln->recs; r; r = r->next)
            if (r->id && !r->qp && !strcmp(r->addr, qp->addr))
                break;
        if (!r)
            r = rec_new(ln, 0, qp->addr);
        r->qp = qp;
        qp->user = r;
    }
    if (r->id)
        nx_lanes_event(ln->L, evt_new(ln, NX_LE_UP, r->id, 0));
}

/* ---- commands ---- */

/* A held record's connection is the peer id's now: the loop thread hears it is up, then
 * what it sent meanwhile, in order. */
static void release_held(struct nx_lane *ln, struct nx_lrec *held, uint64_t id)
{
    nx_lanes_event(ln->L, evt_new(ln, NX_LE_UP, id, 0));
    while (held->held) {
        struct nx_levt *e = held->held;
        held->held = e->next;
        e->id = id;
        nx_lanes_event(ln->L, e);
    }
    held->held_tail = NULL;
}

/* qp, the endpoint's record for r's address, belongs to another record o.  A held one (it
 * dialed us first) becomes r's, with what it sent: 1.  One of an older incarnation is
 * retired (the peer came back, as lane 0 knows already, and this lane may not have heard
 * yet, so that record would still be found): 0, dial afresh.  If o is the newer one, r's
 * peer is gone: -1. */
static int take_over(struct nx_lane *ln, struct nx_lrec *r, struct nx_tpeer *qp)
{
    struct nx_lrec *o = qp->user;
    if (!o->id) {
        r->qp = qp;
        qp->user = r;
        release_held(ln, o, r->id);
        o->qp = NULL;
        rec_free(ln, o);
        return 1;
    }
    if (o->id > r->id)
        return -1;
    o->qp = NULL;
    qp->user = NULL;
    ln->t->ops->close_peer(qp, "superseded: the peer connected afresh");
    ln->t->ops->peer_forget(qp);
    emit_lost(ln, o->id, "superseded: the peer connected afresh");
    return 0;
}

static void do_send(struct nx_lane *ln, struct nx_lcmd *c)
{
    char err[160] = "";
    /* The loop thread sends only to a peer it adopted first (and forgets it last). */
    struct nx_lrec *r = rec_by_id(ln, c->id);
    if (!r) {
        nx_quic_msg_free(&ln->L->pool, c->msg);
        return;
    }
    if (!r->qp) {
        struct nx_tpeer *qp = ln->t->ops->peer(ln->t, r->addr, err, sizeof(err));
        int took = qp && qp->user && qp->user != r ? take_over(ln, r, qp) : 1;
        if (took == 0) /* the older record is gone: a new one */
            qp = ln->t->ops->peer(ln->t, r->addr, err, sizeof(err));
        if (took < 0)
            snprintf(err, sizeof(err), "a newer connection to %s is here", r->addr);
        if (!qp || took < 0) {
            nx_quic_msg_free(&ln->L->pool, c->msg);
            emit_lost(ln, c->id, err);
            return;
        }
        r->qp = qp;
        qp->user = r;
    }
    /* A lost connection frees the message; its loss is on its way to the loop thread. */
    nx_quic_send_built(r->qp, c->channel, c->msg, c->token);
}

static void lent_done(struct nx_lane *ln)
{
    pthread_mutex_lock(&ln->mu);
    ln->lent_done++;
    pthread_cond_broadcast(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
}

/* A lent message becomes the lane's: copied here, so that the loop thread does not. */
static void copy_lent(struct nx_lane *ln, struct nx_lcmd *c)
{
    uint8_t *dst;
    c->msg = nx_quic_msg_new(&ln->L->pool, c->total, &dst);
    memcpy(dst, c->head, c->headlen);
    dst += c->headlen;
    for (int i = 0; i < c->nlent; i++) {
        if (c->lent[i].iov_len)
            memcpy(dst, c->lent[i].iov_base, c->lent[i].iov_len);
        dst += c->lent[i].iov_len;
    }
    free(c->lent);
    c->lent = NULL;
    struct nx_levt *e = evt_new(ln, NX_LE_COPIED, c->id, 0);
    e->token = c->token;
    lent_done(ln);
    nx_lanes_event(ln->L, e);
}

void nx_lcmd_drop(struct nx_lane *ln, struct nx_lcmd *c)
{
    if (c->lent) {
        free(c->lent);
        lent_done(ln);
    }
    if (c->msg)
        nx_quic_msg_free(&ln->L->pool, c->msg);
    free(c);
}

static void do_adopt(struct nx_lane *ln, struct nx_lcmd *c)
{
    struct nx_lrec *r;
    for (r = ln->recs; r; r = r->next)
        if (!r->id && !strcmp(r->addr, c->addr))
            break;
    if (!r) {
        if (!rec_by_id(ln, c->id))
            rec_new(ln, c->id, c->addr);
        return;
    }
    r->id = c->id;
    release_held(ln, r, r->id);
}

static void do_reload(struct nx_lane *ln)
{
    char err[256] = "";
    int rolled = 0;
    int rv = nx_quic_reload(ln->t, &rolled, err, sizeof(err));
    pthread_mutex_lock(&ln->mu);
    ln->reload_rv = rv;
    ln->rolled = rolled;
    snprintf(ln->reload_err, sizeof(ln->reload_err), "%s", err);
    ln->reload_done = 1;
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
}

/* One peer's connection on this lane, for nexarctl: the loop thread waits for it. */
static void do_stats(struct nx_lane *ln, struct nx_lcmd *c)
{
    struct nx_tpeer_lane out = {.state = NX_TPEER_CONNECTING};
    struct nx_lrec *r = rec_by_id(ln, c->id);
    if (r && r->qp) {
        struct nx_tpeer_stats s;
        ln->t->ops->stats(r->qp, &s);
        out = nx_tpeer_lane_of(&s);
    }
    pthread_mutex_lock(&ln->mu);
    ln->stat = out;
    ln->stat_seq = c->seq;
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void do_stop(struct nx_lane *ln)
{
    while (ln->recs)
        rec_free(ln, ln->recs);
    ln->t->ops->destroy(ln->t);
    ln->t = NULL;
    uv_walk(&ln->loop, close_walk, NULL);
}

static void wake_cb(uv_async_t *h)
{
    struct nx_lane *ln = h->data;
    pthread_mutex_lock(&ln->mu);
    struct nx_lcmd *c = ln->head;
    ln->head = ln->tail = NULL;
    pthread_mutex_unlock(&ln->mu);
    while (c) {
        struct nx_lcmd *next = c->next;
        struct nx_lrec *r;
        switch (c->kind) {
        case NX_LC_SEND:
            if (c->lent)
                copy_lent(ln, c);
            do_send(ln, c);
            break;
        case NX_LC_ADOPT:
            do_adopt(ln, c);
            break;
        case NX_LC_CLOSE:
            if ((r = rec_by_id(ln, c->id)) && r->qp)
                ln->t->ops->close_peer(r->qp, c->reason);
            break;
        case NX_LC_FORGET:
            if ((r = rec_by_id(ln, c->id))) {
                struct nx_tpeer *qp = r->qp;
                rec_free(ln, r);
                if (qp)
                    ln->t->ops->peer_forget(qp);
            }
            break;
        case NX_LC_RELOAD:
            do_reload(ln);
            break;
        case NX_LC_STATS:
            do_stats(ln, c);
            break;
        case NX_LC_RESUME:
            atomic_store(&ln->resume_posted, 0);
            if (atomic_load(&ln->rx_queued) <= ln->L->rx_limit) {
                atomic_store(&ln->rx_paused, 0);
                nx_quic_rx_pause(ln->t, 0);
            }
            break;
        case NX_LC_STOP:
            do_stop(ln);
            free(c);
            for (c = next; c; c = next) { /* nothing follows a stop but sends */
                next = c->next;
                nx_lcmd_drop(ln, c);
            }
            return;
        }
        free(c);
        c = next;
    }
}

static void *lane_main(void *arg)
{
    struct nx_lane *ln = arg;
    char name[16]; /* what top -H and perf show */
    snprintf(name, sizeof(name), "nexard-lane%u", ln->idx);
    pthread_setname_np(pthread_self(), name);
    uv_run(&ln->loop, UV_RUN_DEFAULT);
    return NULL;
}

void nx_lane_post(struct nx_lane *ln, struct nx_lcmd *c)
{
    c->next = NULL;
    pthread_mutex_lock(&ln->mu);
    int was_empty = !ln->head;
    if (ln->tail)
        ln->tail->next = c;
    else
        ln->head = c;
    ln->tail = c;
    pthread_mutex_unlock(&ln->mu);
    if (was_empty)
        uv_async_send(&ln->wake);
}

int nx_lane_start(struct nx_lane *ln, const struct nx_quic_conf *conf, char *err,
                  size_t errlen)
{
    char listen[NX_TADDR_MAX + 8], adv[NX_TADDR_MAX + 8], e[200];
    struct nx_quic_conf qc = *conf;
    if (nx_lanes_addr_shift(conf->listen, (int)ln->idx, listen, sizeof(listen)) < 0) {
        snprintf(err, errlen, "lane %u: listen %s + %u is no port", ln->idx, conf->listen,
                 ln->idx);
        return -1;
    }
    qc.listen = listen;
    if (conf->advertise) {
        if (nx_lanes_addr_shift(conf->advertise, (int)ln->idx, adv, sizeof(adv)) < 0) {
            snprintf(err, errlen, "lane %u: advertise %s + %u is no port", ln->idx,
                     conf->advertise, ln->idx);
            return -1;
        }
        qc.advertise = adv;
    }
    qc.inspect = NULL; /* inspectors are served on lane 0 */
    qc.bufs = &ln->L->pool;
    if (uv_loop_init(&ln->loop) != 0) {
        snprintf(err, errlen, "lane %u: no event loop", ln->idx);
        return -1;
    }
    struct nx_transport_cb cb = {.arg = ln, .on_message = on_message, .on_peer = on_peer,
                                 .on_sent = on_sent};
    ln->t = nx_quic_new(&ln->loop, &qc, &cb, e, sizeof(e));
    if (!ln->t) {
        snprintf(err, errlen, "lane %u (%s): %s", ln->idx, listen, e);
        uv_loop_close(&ln->loop);
        return -1;
    }
    pthread_mutex_init(&ln->mu, NULL);
    pthread_cond_init(&ln->cv, NULL);
    uv_async_init(&ln->loop, &ln->wake, wake_cb);
    ln->wake.data = ln;
    int rv = pthread_create(&ln->th, NULL, lane_main, ln);
    if (rv != 0) {
        snprintf(err, errlen, "lane %u: no thread: %s", ln->idx, strerror(rv));
        ln->t->ops->destroy(ln->t);
        uv_walk(&ln->loop, close_walk, NULL);
        uv_run(&ln->loop, UV_RUN_DEFAULT);
        uv_loop_close(&ln->loop);
        pthread_mutex_destroy(&ln->mu);
        pthread_cond_destroy(&ln->cv);
        return -1;
    }
    return 0;
}

void nx_lane_stop(struct nx_lane *ln)
{
    struct nx_lcmd *c = nx_xcalloc(1, sizeof(*c));
    c->kind = NX_LC_STOP;
    nx_lane_post(ln, c);
    pthread_join(ln->th, NULL);
    /* The loop ran dry once every handle closed: what posted after the stop is freed. */
    for (c = ln->head; c;) {
        struct nx_lcmd *next = c->next;
        nx_lcmd_drop(ln, c);
        c = next;
    }
    uv_loop_close(&ln->loop);
    pthread_mutex_destroy(&ln->mu);
    pthread_cond_destroy(&ln->cv);
}
