/*
 * quic_conn.c - one ngtcp2 connection: creation (dial or accept), the ngtcp2 callbacks,
 * reading, the write loop, the expiry timer and teardown with a reason.
 *
 * The connection is driven sans-I/O: quic_udp.c hands datagrams in, nx_qconn_flush()
 * pulls packets out into GSO batches, and one uv_timer_t follows ngtcp2_conn_get_expiry().
 * Errors inside ngtcp2 calls only mark the connection (fail, why); nx_qconn_leave() tears
 * it down once ngtcp2 has returned, because nothing may free it from inside a callback.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>

#include "log.h"
#include "mem.h"
#include "quic_int.h"

enum { CLOSE_NONE, CLOSE_TRANSPORT, CLOSE_APP, CLOSE_TLS };

struct close_plan {
    int how;
    uint64_t code;
    int liberr;
};

static void conn_destroy(struct nx_qconn *c);

void nx_qconn_fail(struct nx_qconn *c, const char *fmt, ...)
{
    c->fail = 1;
    if (c->why[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
}

/* ---- ngtcp2 callbacks ---- */

static ngtcp2_conn *ref_get_conn(ngtcp2_crypto_conn_ref *ref)
{
    struct nx_qconn *c = ref->user_data;
    return c->conn;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, len) != 0)
        abort(); /* no randomness: nothing safe to do */
}

static int new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
                      void *user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    if (c->ncids >= sizeof(c->cids) / sizeof(c->cids[0]))
        return NGTCP2_ERR_CALLBACK_FAILURE;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    cid->datalen = cidlen;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c->q->reset_secret,
                                                     sizeof(c->q->reset_secret), cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    nx_qroute_add(c, cid);
    return 0;
}

static int remove_cid_cb(ngtcp2_conn *conn, const ngtcp2_cid *cid, void *user_data)
{
    (void)conn;
    nx_qroute_del(user_data, cid);
    return 0;
}

static int handshake_completed_cb(ngtcp2_conn *conn, void *user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    if (nx_qtls_check_alpn(c) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    /* A server's handshake completes only after the client's certificate verified. */
    if (c->server && !c->confirmed) {
        c->confirmed = 1;
        nx_qpeer_up(c->peer);
    }
    return 0;
}

static int handshake_confirmed_cb(ngtcp2_conn *conn, void *user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    /* A client waits for HANDSHAKE_DONE: the server has accepted our certificate, so no
     * message we write can be refused unread. */
    if (!c->confirmed) {
        c->confirmed = 1;
        nx_qpeer_up(c->peer);
    }
    return 0;
}

static int recv_stream_data_cb(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t offset,
                               const uint8_t *data, size_t datalen, void *user_data,
                               void *stream_user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    (void)offset;
    if (!c->confirmed) {
        /* Stream data from the server proves it finished the handshake (it writes none
         * before); HANDSHAKE_DONE was merely lost or reordered. */
        c->confirmed = 1;
        nx_qpeer_up(c->peer);
    }
    return nx_qstream_on_recv(c, flags, id, data, datalen, stream_user_data);
}

static int acked_cb(ngtcp2_conn *conn, int64_t id, uint64_t offset, uint64_t datalen,
                    void *user_data, void *stream_user_data)
{
    (void)conn;
    (void)id;
    if (!stream_user_data)
        return 0;
    return nx_qstream_on_acked(user_data, stream_user_data, offset, datalen);
}

static int stream_close_cb(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t app_err,
                           void *user_data, void *stream_user_data)
{
    struct nx_qconn *c = user_data;
    (void)flags;
    (void)app_err;
    if (ngtcp2_conn_is_local_stream(conn, id))
        return 0;
    if (stream_user_data)
        nx_qstream_rclose(c, stream_user_data);
    ngtcp2_conn_extend_max_streams_uni(conn, 1);
    return 0;
}

static int stream_reset_cb(ngtcp2_conn *conn, int64_t id, uint64_t final_size,
                           uint64_t app_err, void *user_data, void *stream_user_data)
{
    (void)conn;
    (void)final_size;
    (void)stream_user_data;
    /* Our streams are never reset: a reset would silently lose messages. */
    nx_qconn_fail(user_data, "peer reset stream %lld (error %llu)", (long long)id,
                  (unsigned long long)app_err);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

static int stop_sending_cb(ngtcp2_conn *conn, int64_t id, uint64_t app_err, void *user_data,
                           void *stream_user_data)
{
    (void)conn;
    (void)stream_user_data;
    nx_qconn_fail(user_data, "peer stopped reading stream %lld (error %llu)", (long long)id,
                  (unsigned long long)app_err);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

static int extend_streams_cb(ngtcp2_conn *conn, uint64_t max_streams, void *user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    (void)max_streams;
    nx_quic_schedule_flush(c);
    return 0;
}

static int extend_stream_data_cb(ngtcp2_conn *conn, int64_t id, uint64_t max_data,
                                 void *user_data, void *stream_user_data)
{
    (void)conn;
    (void)id;
    (void)max_data;
    if (stream_user_data) {
        nx_qstream_on_extend(stream_user_data);
        nx_quic_schedule_flush(user_data);
    }
    return 0;
}

static int stateless_reset_cb(ngtcp2_conn *conn, const ngtcp2_pkt_stateless_reset *sr,
                              void *user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    (void)sr;
    c->stateless_reset = 1;
    return 0;
}

static const ngtcp2_callbacks callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = nx_qtls_recv_crypto,
    .handshake_completed = handshake_completed_cb,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = recv_stream_data_cb,
    .acked_stream_data_offset = acked_cb,
    .stream_close = stream_close_cb,
    .recv_stateless_reset = stateless_reset_cb,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .extend_max_local_streams_uni = extend_streams_cb,
    .rand = rand_cb,
    .get_new_connection_id = new_cid_cb,
    .remove_connection_id = remove_cid_cb,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = stream_reset_cb,
    .extend_max_stream_data = extend_stream_data_cb,
    .handshake_confirmed = handshake_confirmed_cb,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = stop_sending_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

/* ---- creation ---- */

/* The largest UDP payload an IP packet to this address can carry. */
static size_t ip_max_payload(const struct sockaddr *to)
{
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)to;
    if (to->sa_family == AF_INET6 && !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
        return 65527;
    return 65507;
}

static void fill_settings(struct nx_quic *q, ngtcp2_settings *s, const struct sockaddr *to)
{
    const struct nx_quic_conf *cf = &q->conf;
    ngtcp2_settings_default(s);
    s->initial_ts = nx_qnow();
    s->cc_algo = NGTCP2_CC_ALGO_CUBIC;
    /* Daemons live on one fabric: a 333 ms first guess only slows the first PTO. */
    s->initial_rtt = 100 * NGTCP2_MILLISECONDS;
    size_t maxp = cf->max_udp_payload;
    /* Loopback (several daemons on one machine) has a 64 KiB MTU and nothing to fragment:
     * big datagrams cut the per-packet cost (crypto calls, ngtcp2, syscalls) 40-fold. */
    if (cf->loopback_udp_payload > maxp && nx_qaddr_is_loopback(to))
        maxp = cf->loopback_udp_payload;
    if (maxp > ip_max_payload(to))
        maxp = ip_max_payload(to);
    s->max_tx_udp_payload_size = maxp;
    if (maxp > NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE) {
        /* Configured beyond what PMTUD probes for: trust it (loopback, jumbo frames). */
        s->no_tx_udp_payload_size_shaping = 1;
        s->no_pmtud = 1;
    }
    s->handshake_timeout = (ngtcp2_duration)cf->handshake_timeout_ms * NGTCP2_MILLISECONDS;
    if (getenv("NEXAR_QUIC_CC_BBR"))
        s->cc_algo = NGTCP2_CC_ALGO_BBR2;
}

static void fill_params(struct nx_quic *q, ngtcp2_transport_params *p)
{
    const struct nx_quic_conf *cf = &q->conf;
    ngtcp2_transport_params_default(p);
    /* Everything defaults to 0 in 0.12: no stream could be opened without these. */
    p->initial_max_stream_data_uni = cf->stream_window_bytes;
    p->initial_max_data = cf->window_bytes;
    p->initial_max_streams_uni = cf->max_streams;
    p->initial_max_streams_bidi = 0;
    p->max_idle_timeout = (ngtcp2_duration)cf->idle_timeout_ms * NGTCP2_MILLISECONDS;
    p->active_connection_id_limit = 4;
    /* A daemon is known by its address: one that moves is another peer. */
    p->disable_active_migration = 1;
}

static struct nx_qconn *conn_alloc(struct nx_qpeer *p, int server)
{
    struct nx_qconn *c = nx_xcalloc(1, sizeof(*c));
    c->q = p->q;
    c->peer = p;
    c->server = server;
    c->ref.get_conn = ref_get_conn;
    c->ref.user_data = c;
    c->started = c->last_rx = nx_qnow();
    return c;
}

static void timer_free_cb(uv_handle_t *h)
{
    struct nx_qconn *c = h->data;
    struct nx_quic *q = c->q;
    free(c);
    nx_quic_handle_closed(q);
}

static int conn_finish(struct nx_qconn *c)
{
    struct nx_quic *q = c->q;
    if (nx_qtls_session_new(&q->tls, c, c->server) != 0) {
        ngtcp2_conn_del(c->conn);
        return -1;
    }
    ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
    if (q->conf.keepalive_ms)
        ngtcp2_conn_set_keep_alive_timeout(c->conn,
                                           (ngtcp2_duration)q->conf.keepalive_ms *
                                               NGTCP2_MILLISECONDS);
    uv_timer_init(q->loop, &c->timer);
    c->timer.data = c;
    q->handles_open++;
    return 0;
}

static void random_cid(ngtcp2_cid *cid)
{
    cid->datalen = NX_QSCID_LEN;
    rand_cb(cid->data, cid->datalen, NULL);
}

struct nx_qconn *nx_qconn_client_new(struct nx_qpeer *p, char *err, size_t errlen)
{
    struct nx_quic *q = p->q;
    union nx_qsa local;
    socklen_t local_len;
    ngtcp2_cid dcid, scid;
    ngtcp2_settings s;
    ngtcp2_transport_params tp;
    int rv = nx_qudp_local_for(q, &p->addr.sa, p->addrlen, &local, &local_len);
    if (rv != 0) {
        snprintf(err, errlen, "no route to %s: %s", p->base.addr, strerror(-rv));
        return NULL;
    }
    struct nx_qconn *c = conn_alloc(p, 0);
    ngtcp2_path_storage_init(&c->ps, &local.sa, local_len, &p->addr.sa, p->addrlen, NULL);
    random_cid(&dcid);
    random_cid(&scid);
    fill_settings(q, &s, &p->addr.sa);
    fill_params(q, &tp);
    rv = ngtcp2_conn_client_new(&c->conn, &dcid, &scid, &c->ps.path, NGTCP2_PROTO_VER_V1,
                                &callbacks, &s, &tp, NULL, c);
    if (rv != 0 || conn_finish(c) != 0) {
        snprintf(err, errlen, "cannot start a QUIC connection: %s",
                 rv ? ngtcp2_strerror(rv) : "TLS session setup failed");
        free(c);
        return NULL;
    }
    nx_qroute_add(c, &scid);
    return c;
}

struct nx_qconn *nx_qconn_server_new(struct nx_qpeer *p, const ngtcp2_pkt_hd *hd,
                                     const ngtcp2_path *path, const ngtcp2_cid *odcid,
                                     int retried)
{
    struct nx_quic *q = p->q;
    ngtcp2_cid scid;
    ngtcp2_settings s;
    ngtcp2_transport_params tp;
    struct nx_qconn *c = conn_alloc(p, 1);
    ngtcp2_path_storage_init(&c->ps, path->local.addr, path->local.addrlen, path->remote.addr,
                             path->remote.addrlen, NULL);
    random_cid(&scid);
    fill_settings(q, &s, path->remote.addr);
    fill_params(q, &tp);
    if (retried) {
        s.token = hd->token;
        tp.original_dcid = *odcid;
        tp.retry_scid = hd->dcid;
        tp.retry_scid_present = 1;
    } else {
        tp.original_dcid = hd->dcid;
    }
    if (ngtcp2_crypto_generate_stateless_reset_token(tp.stateless_reset_token, q->reset_secret,
                                                     sizeof(q->reset_secret), &scid) == 0)
        tp.stateless_reset_token_present = 1;
    int rv = ngtcp2_conn_server_new(&c->conn, &hd->scid, &scid, &c->ps.path, hd->version,
                                    &callbacks, &s, &tp, NULL, c);
    if (rv != 0 || conn_finish(c) != 0) {
        NX_WARN("quic", "%s: cannot accept: %s", p->base.addr,
                rv ? ngtcp2_strerror(rv) : "TLS session setup failed");
        free(c);
        return NULL;
    }
    nx_qroute_add(c, &scid);
    nx_qroute_add(c, &hd->dcid);
    if (retried)
        nx_qroute_add(c, odcid);
    return c;
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
    c->busy++;
    int rv = ngtcp2_conn_read_pkt(c->conn, path, NULL, pkt, len, ts);
    c->busy--;
    c->pkts_recv++;
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

static void arm_timer(struct nx_qconn *c)
{
    ngtcp2_tstamp exp = ngtcp2_conn_get_expiry(c->conn), now = nx_qnow();
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
    }
    return 0;
}

void nx_qconn_flush(struct nx_qconn *c)
{
    if (c->dead || c->fail)
        return;
    ngtcp2_tstamp ts = nx_qnow();
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
    nx_qconn_leave(c);
}

static void timer_cb(uv_timer_t *t)
{
    struct nx_qconn *c = t->data;
    if (c->dead)
        return;
    ngtcp2_tstamp now = nx_qnow();
    c->busy++;
    int rv = ngtcp2_conn_handle_expiry(c->conn, now);
    c->busy--;
    if (rv != 0) {
        struct close_plan cp = {CLOSE_NONE, 0, 0};
        double quiet = (double)(now - c->last_rx) / NGTCP2_SECONDS;
        double age = (double)(now - c->started) / NGTCP2_SECONDS;
        /* Before the handshake is done, idle and handshake expiry mean the same thing. */
        if ((rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) &&
            !c->confirmed && !c->pkts_recv)
            nx_qconn_fail(c, "handshake timeout after %.1f s (no answer from %s)", age,
                          c->peer->base.addr);
        else if (rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT ||
                 (rv == NGTCP2_ERR_IDLE_CLOSE && !c->confirmed))
            nx_qconn_fail(c, "handshake timeout after %.1f s (handshake not completed)", age);
        else if (rv == NGTCP2_ERR_IDLE_CLOSE)
            nx_qconn_fail(c, "idle timeout after %.1f s (nothing heard from the peer)", quiet);
        else {
            cp.how = CLOSE_TRANSPORT;
            cp.liberr = rv;
            nx_qconn_fail(c, "QUIC timer: %s", ngtcp2_strerror(rv));
        }
        close_now(c, &cp);
        return;
    }
    nx_qconn_flush(c);
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
    if (c->peer && c->peer->conn == c) {
        nx_qstream_unbind(c->peer);
        c->peer->old_pkts_sent += c->pkts_sent;
        c->peer->old_pkts_recv += c->pkts_recv;
        c->peer->conn = NULL;
    }
    c->peer = NULL;
    ngtcp2_conn_del(c->conn);
    c->conn = NULL;
    if (c->tls)
        gnutls_deinit(c->tls);
    c->tls = NULL;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, timer_free_cb);
}
