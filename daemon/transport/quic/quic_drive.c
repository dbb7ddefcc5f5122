/*
 * quic_drive.c - driving one connection: reading packets, the write loop into GSO batches,
 * the expiry timer, and teardown with a reason.
 *
 * Errors inside ngtcp2 calls only mark the connection (fail, why); the teardown happens
 * once ngtcp2 has returned (nx_qconn_leave), because nothing may free a connection from
 * inside one of its callbacks.  Whoever tears down decides whether the peer hears about
 * it: a CONNECTION_CLOSE carrying the reason, or silence (idle timeout, peer's close).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cert_check.h"
#include "log.h"
#include "quic_int.h"

enum { CLOSE_NONE, CLOSE_TRANSPORT, CLOSE_APP, CLOSE_TLS };

struct close_plan {
    int how;
    uint64_t code;
    int liberr;
};

static void conn_destroy(struct nx_qconn *c);
static int expire(struct nx_qconn *c, ngtcp2_tstamp now);

/* Nothing read for this long is a silence after which a read runs the due timers first
 * (nx_qconn_read): far above an ACK delay, far below any idle timeout. */
#define NX_QSILENCE (100 * NGTCP2_MILLISECONDS)

/* When the connection's next timer is due: ngtcp2's, the peer certificate's end, or for a
 * peer's current connection the next try of a successor dial that timed out (quic_roll.c;
 * only while it is ahead, or a dial that cannot start yet would spin the timer). */
static ngtcp2_tstamp due_at(const struct nx_qconn *c)
{
    ngtcp2_tstamp exp = ngtcp2_conn_get_expiry(c->conn);
    if (c->cert_deadline && c->cert_deadline < exp)
        exp = c->cert_deadline;
    const struct nx_qpeer *p = c->peer;
    if (p && p->conn == c && p->roll_again && p->roll_retry_at < exp &&
        p->roll_retry_at > nx_qnow())
        exp = p->roll_retry_at;
    return exp;
}

static void timer_free_cb(uv_handle_t *h)
{
    struct nx_qconn *c = h->data;
    struct nx_quic *q = c->q;
    free(c);
    nx_quic_handle_closed(q);
}

/* ---- reading ---- */

static void sanitize(char *out, size_t outlen, const uint8_t *in, size_t inlen)
{
    size_t j = 0;
    for (size_t i = 0; i < inlen && j + 1 < outlen; i++)
        out[j++] = in[i] >= 0x20 && in[i] < 0x7f ? (char)in[i] : '?';
    out[j] = 0;
}

/* The peer closed: say what it told us. */
static void remote_closed(struct nx_qconn *c)
{
    ngtcp2_connection_close_error ce;
    char r[100];
    if (c->stateless_reset) {
        nx_qconn_fail(c, "peer sent a stateless reset (it restarted or forgot us)");
        return;
    }
    ngtcp2_conn_get_connection_close_error(c->conn, &ce);
    sanitize(r, sizeof(r), ce.reason, ce.reasonlen);
    if (ce.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION &&
        ce.error_code == NX_QERR_ROLLED)
        c->peer_rolled = 1; /* it moved, and has seen us move: both ends are done */
    if (ce.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION)
        nx_qconn_fail(c, "peer closed: %s", r[0] ? r : "no reason given");
    else if ((ce.error_code & ~0xffull) == NGTCP2_CRYPTO_ERROR)
        nx_qconn_fail(c, "peer closed: TLS alert \"%s\"%s%s",
                      nx_qtls_alert_text((uint8_t)ce.error_code), r[0] ? ": " : "", r);
    else
        nx_qconn_fail(c, "peer closed: transport error 0x%llx%s%s",
                      (unsigned long long)ce.error_code, r[0] ? ": " : "", r);
}

static void read_failed(struct nx_qconn *c, int rv, struct close_plan *cp)
{
    cp->how = CLOSE_NONE;
    switch (rv) {
    case NGTCP2_ERR_DRAINING:
        remote_closed(c);
        return;
    case NGTCP2_ERR_DROP_CONN:
        nx_qconn_fail(c, "connection dropped: %s", ngtcp2_strerror(rv));
        return;
    case NGTCP2_ERR_CRYPTO:
        cp->how = CLOSE_TLS;
        cp->code = ngtcp2_conn_get_tls_alert(c->conn);
        nx_qconn_fail(c, "TLS: handshake failed (alert \"%s\")",
                      nx_qtls_alert_text((uint8_t)cp->code));
        return;
    case NGTCP2_ERR_CALLBACK_FAILURE:
        /* Our own callback said why (record format, TLS verify, reset stream). */
        cp->how = c->gnutls_err ? CLOSE_TLS : CLOSE_APP;
        cp->code = c->gnutls_err ? ngtcp2_conn_get_tls_alert(c->conn) : NX_QERR_PROTO;
        nx_qconn_fail(c, "internal error");
        return;
    default:
        cp->how = CLOSE_TRANSPORT;
        cp->liberr = rv;
        nx_qconn_fail(c, "QUIC: %s", ngtcp2_strerror(rv));
        return;
    }
}

static void send_close(struct nx_qconn *c, const struct close_plan *cp)
{
    ngtcp2_connection_close_error ce;
    uint8_t buf[1280];
    ngtcp2_pkt_info pi;
    size_t rl = strlen(c->why);
    const uint8_t *r = (const uint8_t *)c->why;
    if (cp->how == CLOSE_NONE || !c->conn || ngtcp2_conn_is_in_closing_period(c->conn) ||
        ngtcp2_conn_is_in_draining_period(c->conn))
        return;
    if (cp->how == CLOSE_APP)
        ngtcp2_connection_close_error_set_application_error(&ce, cp->code, r, rl);
    else if (cp->how == CLOSE_TLS)
        ngtcp2_connection_close_error_set_transport_error_tls_alert(&ce, (uint8_t)cp->code, r,
                                                                    rl);
    else
        ngtcp2_connection_close_error_set_transport_error_liberr(&ce, cp->liberr, r, rl);
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->conn, NULL, &pi, buf, sizeof(buf),
                                                        &ce, nx_qnow());
    if (n > 0)
        nx_qudp_send_one(c->q, c->ps.path.remote.addr, (socklen_t)c->ps.path.remote.addrlen,
                         c->q->udp.wildcard ? c->ps.path.local.addr : NULL, buf, (size_t)n);
}

static void close_now(struct nx_qconn *c, const struct close_plan *cp)
{
    struct nx_qpeer *p = c->peer;
    char why[sizeof(c->why)];
    snprintf(why, sizeof(why), "%s", c->why[0] ? c->why : "connection failed");
    send_close(c, cp);
    int current = p && p->conn == c;
    conn_destroy(c);
    if (current)
        nx_qpeer_conn_failed(p, why);
    else if (p) /* a successor or an old connection: a forget may have waited for it */
        nx_qpeer_settle(p);
}

static struct close_plan pending_plan(struct nx_qconn *c)
{
    struct close_plan cp = {CLOSE_NONE, 0, 0};
    if (c->close_app) {
        cp.how = CLOSE_APP;
        cp.code = (uint64_t)c->close_app;
    }
    return cp;
}

void nx_qconn_leave(struct nx_qconn *c)
{
    if (c->busy || c->dead)
        return;
    if (c->fail) {
        struct close_plan cp = pending_plan(c);
        close_now(c, &cp);
        return;
    }
    if (c->peer)
        nx_qpeer_settle(c->peer);
}

void nx_qconn_read(struct nx_qconn *c, const ngtcp2_path *path, const uint8_t *pkt, size_t len,
                   ngtcp2_tstamp ts)
{
    if (c->dead || c->fail)
        return;
    /* A packet that waited in the socket while this process stood still (SIGSTOP, a
     * paused VM) must not revive a connection whose idle time ran out meanwhile: the
     * peer has dropped it, and would answer whatever we send with a stateless reset.
     * The loop may read before it runs the timer, so after a silence the timers due come
     * first, and what they ask for (a keep-alive PING, a probe) is written at the loop's
     * next turn, as the timer would have.  Not after every packet: the timer due then is
     * mostly the ACK delay, and writing at once would send the ACK-only packets that
     * nx_qconn_after_rx saves. */
    if (ts > c->last_rx && ts - c->last_rx >= NX_QSILENCE && due_at(c) <= ts) {
        if (expire(c, ts))
            return;
        nx_quic_schedule_flush(c);
    }
    c->busy++;
    c->rx_data = 0;
    int rv = ngtcp2_conn_read_pkt(c->conn, path, NULL, pkt, len, ts);
    c->busy--;
    c->pkts_recv++;
    /* Only data counts towards answering at once (nx_qconn_after_rx): counting the
     * peer's ACK-only packets too made each answer an ACK-only packet of its own. */
    c->rx_since_tx += c->rx_data;
    /* A big datagram whose data ngtcp2 kept back came after a lost one (or was a copy).
     * The ACK that reports the gap is what the sender's loss recovery waits for: it is
     * not held for a message of ours (arm_timer, nx_qconn_after_rx). */
    if (!c->rx_data && len >= NX_QBIG_DGRAM)
        c->rx_gap = 1;
    c->last_rx = ts;
    if (rv != 0) {
        struct close_plan cp;
        read_failed(c, rv, &cp);
        if (!c->busy) {
            close_now(c, &cp);
            return;
        }
    }
    nx_qconn_leave(c);
}

/* ---- writing ---- */

static void timer_cb(uv_timer_t *t);

/* Data of ours waiting to be sent.  An inspector's HTTP/3 answers wait in nghttp3, where
 * we cannot see them: its connection always counts as having some, so it is served as
 * before (ACKs at once, no millisecond floor). */
static int has_data(const struct nx_qconn *c)
{
    return c->inspector || (c->peer && (c->peer->ready || c->peer->open_head));
}

static void arm_timer(struct nx_qconn *c)
{
    ngtcp2_tstamp exp = due_at(c), now = nx_qnow();
    if (exp == UINT64_MAX) {
        uv_timer_stop(&c->timer);
        return;
    }
    /* libuv counts milliseconds: round up, except that a sub-millisecond wait (pacing)
     * becomes "next loop iteration" rather than a whole millisecond of silence. */
    uint64_t d = exp > now ? exp - now : 0;
    uint64_t ms = d / NGTCP2_MILLISECONDS;
    if (ms && d % NGTCP2_MILLISECONDS)
        ms++;
    /* With nothing of ours to send, a deadline under a millisecond is the ACK delay
     * (or a pacing mark with nothing to pace): a millisecond lets the ACK ride on our
     * next message (see nx_qconn_after_rx), inside the max_ack_delay we announce. */
    if (!ms && c->confirmed && !has_data(c) && !c->rx_gap)
        ms = NX_QACK_WAIT_MS;
    uv_timer_start(&c->timer, timer_cb, ms, 0);
}

static int write_loop(struct nx_qconn *c, ngtcp2_tstamp ts)
{
    struct nx_quic *q = c->q;
    size_t maxlen = ngtcp2_conn_get_max_tx_udp_payload_size(c->conn);
    size_t pathmax = ngtcp2_conn_get_path_max_tx_udp_payload_size(c->conn);
    size_t quantum = ngtcp2_conn_get_send_quantum(c->conn);
    size_t npkts = pathmax ? quantum / pathmax : 1;
    const struct sockaddr *from = q->udp.wildcard ? c->ps.path.local.addr : NULL;
    if (npkts < 16)
        npkts = 16;
    if (npkts > 256)
        npkts = 256;
    for (size_t i = 0; i < npkts; i++) {
        size_t avail;
        uint8_t *buf = nx_qudp_tx_reserve(q, c->ps.path.remote.addr,
                                          (socklen_t)c->ps.path.remote.addrlen, from, maxlen,
                                          &avail);
        if (!buf)
            return -EAGAIN;
        ngtcp2_ssize n;
        if (c->confirmed)
            n = nx_qstream_write_pkt(c, buf, avail, ts);
        else
            n = ngtcp2_conn_write_pkt(c->conn, NULL, NULL, buf, avail, ts);
        if (n < 0)
            return (int)n;
        if (n == 0)
            return 0;
        nx_qudp_tx_commit(q, (size_t)n, avail);
        c->pkts_sent++;
        c->rx_since_tx = 0;
        c->rx_bytes_since_tx = 0;
        c->rx_gap = 0;
    }
    return 1; /* stopped by our own cap, not by ngtcp2: more may be ready */
}

void nx_qconn_flush(struct nx_qconn *c)
{
    if (c->dead || c->fail)
        return;
    if (c->peer && (c->peer->succ == c || c->peer->old == c || c->peer->roll_again)) {
        nx_qroll_progress(c->peer);
        if (c->dead)
            return;
    }
    ngtcp2_tstamp ts = nx_qnow();
    /* As in nx_qconn_read: after a stall, a write must not come first either, because
     * ngtcp2 restarts the idle timer on the first packet it writes after a read. */
    if (due_at(c) <= ts && expire(c, ts))
        return;
    c->busy++;
    if (c->confirmed)
        nx_qstream_open_pending(c);
    int rv = write_loop(c, ts);
    nx_qudp_tx_break(c->q);
    nx_qudp_tx_flush(c->q);
    ngtcp2_conn_update_pkt_tx_time(c->conn, ts);
    c->busy--;
    if (rv < 0 && rv != -EAGAIN) {
        struct close_plan cp = {CLOSE_TRANSPORT, 0, rv};
        if (rv == NGTCP2_ERR_CALLBACK_FAILURE)
            cp.how = CLOSE_APP, cp.code = NX_QERR_PROTO;
        nx_qconn_fail(c, "QUIC write: %s", ngtcp2_strerror(rv));
        if (!c->busy) {
            close_now(c, &cp);
            return;
        }
    }
    if (!c->fail)
        arm_timer(c);
    if (rv == 1) /* let the loop read (ACKs) in between, then go on */
        nx_quic_schedule_flush(c);
    nx_qconn_leave(c);
}

/* ngtcp2 0.12 takes its ACK delay as srtt/8: a few microseconds between daemons on one
 * fabric.  A small message is answered later than that, so flushing after every receive
 * sent each one an ACK-only packet of its own: two packets per message each way, each
 * encrypted, sent, received and decrypted.  Data received with nothing to send waits
 * instead (arm_timer), and its ACK rides on our next message.  Two or more full packets
 * of data are acknowledged at once, as ngtcp2's ack_thresh wants, so that a bulk
 * sender's window keeps opening; small messages are not a bulk sender, and when a peer
 * one op ahead sent two of them, answering at once cost an ACK-only packet for every
 * other message.  After a gap (rx_gap) the ACK goes at once too: the sender's loss
 * recovery waits for it. */
#define NX_QACK_NOW_BYTES 2400 /* two packets of a 1200-byte path */

void nx_qconn_after_rx(struct nx_qconn *c)
{
    if (c->dead || c->fail || !c->confirmed || has_data(c) || c->rx_gap ||
        (c->rx_since_tx >= 2 && c->rx_bytes_since_tx >= NX_QACK_NOW_BYTES)) {
        nx_qconn_flush(c);
        return;
    }
    arm_timer(c);
    nx_qconn_leave(c);
}

/* A certificate is the proof of membership: once the peer's has expired, a handshake
 * would be refused, so the connection made with it ends too. */
static void cert_expired(struct nx_qconn *c)
{
    struct close_plan cp = {CLOSE_APP, NX_QERR_REFUSED, 0};
    char when[32];
    nx_cert_time(c->cert_end, when, sizeof(when));
    nx_qconn_fail(c, "TLS: the certificate of %s expired at %s", c->peer->base.addr, when);
    close_now(c, &cp);
}

/* Runs the connection's timers that are due at now: 1 when that closed it. */
static int expire(struct nx_qconn *c, ngtcp2_tstamp now)
{
    if (c->cert_deadline && now >= c->cert_deadline) {
        cert_expired(c);
        return 1;
    }
    c->busy++;
    int rv = ngtcp2_conn_handle_expiry(c->conn, now);
    c->busy--;
    if (rv == 0)
        return 0;
    struct close_plan cp = {CLOSE_NONE, 0, 0};
    double quiet = (double)(now - c->last_rx) / NGTCP2_SECONDS;
    double age = (double)(now - c->started) / NGTCP2_SECONDS;
    c->timed_out = rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT;
    /* Before the handshake is done, idle and handshake expiry mean the same thing. */
    if ((rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) && !c->confirmed &&
        !c->pkts_recv)
        nx_qconn_fail(c, "handshake timeout after %.1f s (no answer from %s)", age,
                      c->peer->base.addr);
    else if (rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT || (rv == NGTCP2_ERR_IDLE_CLOSE && !c->confirmed))
        nx_qconn_fail(c, "handshake timeout after %.1f s (handshake not completed)", age);
    else if (rv == NGTCP2_ERR_IDLE_CLOSE)
        nx_qconn_fail(c, "idle timeout after %.1f s (nothing heard from the peer)", quiet);
    else {
        cp.how = CLOSE_TRANSPORT;
        cp.liberr = rv;
        nx_qconn_fail(c, "QUIC timer: %s", ngtcp2_strerror(rv));
    }
    close_now(c, &cp);
    return 1;
}

static void timer_cb(uv_timer_t *t)
{
    struct nx_qconn *c = t->data;
    if (!c->dead)
        nx_qconn_flush(c); /* which runs the timers first */
}

/* ---- teardown ---- */

void nx_qconn_close(struct nx_qconn *c, uint64_t app_err, const char *reason)
{
    if (c->dead)
        return;
    if (!c->why[0])
        snprintf(c->why, sizeof(c->why), "%s", reason);
    c->close_app = (int)app_err;
    c->fail = 1;
    if (c->busy)
        return;
    struct close_plan cp = {CLOSE_APP, app_err, 0};
    send_close(c, &cp);
    conn_destroy(c);
}

void nx_qconn_drop(struct nx_qconn *c)
{
    if (!c->dead)
        conn_destroy(c);
}

static void unlink_conn(struct nx_qconn **head, struct nx_qconn *c, int next_off)
{
    for (struct nx_qconn **pp = head; *pp;
         pp = (struct nx_qconn **)((char *)*pp + next_off)) {
        if (*pp == c) {
            *pp = *(struct nx_qconn **)((char *)c + next_off);
            return;
        }
    }
}

static void conn_destroy(struct nx_qconn *c)
{
    struct nx_quic *q = c->q;
    if (c->dead)
        return;
    c->dead = 1;
    nx_qroute_del_all(c);
    if (c->in_flush_list)
        unlink_conn(&q->flush_list, c, offsetof(struct nx_qconn, flush_next));
    if (c->in_touched)
        unlink_conn(&q->touched, c, offsetof(struct nx_qconn, touched_next));
    c->in_flush_list = c->in_touched = 0;
    while (c->rstreams)
        nx_qstream_rclose(c, c->rstreams);
    nx_qroll_conn_gone(c);
    if (c->peer && c->peer->conn == c) {
        nx_qstream_unbind(c->peer);
        c->peer->old_pkts_sent += c->pkts_sent;
        c->peer->old_pkts_recv += c->pkts_recv;
        c->peer->conn = NULL;
    }
    c->peer = NULL;
    ngtcp2_conn_del(c->conn);
    c->conn = NULL;
    if (c->tls) {
        gnutls_deinit(c->tls);
        nx_qtls_session_done(&q->tls, c);
    }
    c->tls = NULL;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, timer_free_cb);
}
