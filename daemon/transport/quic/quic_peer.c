/*
 * quic_peer.c - peer records: one per daemon address, live in the address map or retired
 * (LOST, waiting for peer_forget).  A record owns its channels' queues, and at most one
 * connection at a time.  LOST is posted to the endpoint's idle handle, never delivered from
 * inside ngtcp2 or send(); UP is delivered at once, before the first message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mem.h"
#include "quic_int.h"

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

void nx_qpeer_notify_unlink(struct nx_qpeer *p)
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

void nx_qpeer_close_conns(struct nx_qpeer *p, uint64_t app_err, const char *why)
{
    if (p->conn)
        nx_qconn_close(p->conn, app_err, why);
    if (p->succ)
        nx_qconn_close(p->succ, app_err, why);
    if (p->old)
        nx_qconn_close(p->old, app_err, why);
    p->succ = p->old = NULL;
    p->rolling = 0;
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
    nx_qpeer_close_conns(p, NX_QERR_CLOSED, "closed");
    if (p->inspector)
        nx_qinspect_free(p);
    nx_qstream_free_all(p);
    nx_qmap_fini(&p->chans);
    nx_qpeer_retire(p);
    nx_qpeer_notify_unlink(p);
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
    if (p->inspector) {
        nx_qinspect_up(p); /* never a peer: no UP for the layer above */
        return;
    }
    if (p->state != NX_TPEER_CONNECTING || !p->conn)
        return;
    p->state = NX_TPEER_UP;
    p->visible = 1;
    NX_INFO("quic", "%s: up (%s)", p->base.addr, p->inbound ? "inbound" : "outbound");
    nx_qstream_kick_all(p);
    nx_quic_schedule_flush(p->conn); /* with roll_again: a handover to newer credentials */
    if (!p->up_notified && q->base.cb.on_peer) {
        p->up_notified = 1;
        q->base.cb.on_peer(q->base.cb.arg, &p->base, NX_TPEER_UP, "");
    }
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
    nx_qpeer_close_conns(p, NX_QERR_REFUSED, reason);
    if (nx_qpeer_busy(p))
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
        nx_quic_idle_start(q);
    }
}

void nx_qpeer_settle(struct nx_qpeer *p)
{
    if (nx_qpeer_busy(p))
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
    if (p->inspector) {
        nx_qinspect_gone(p, why);
        return;
    }
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
