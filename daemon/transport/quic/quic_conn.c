/*
 * quic_conn.c - one ngtcp2 connection: creation (dial or accept), its settings and
 * transport parameters, and the ngtcp2 callbacks.  Driving it (read, write, timer,
 * teardown) is quic_drive.c.
 *
 * The callbacks only record: stream events go to quic_stream.c, state changes to the peer
 * (nx_qpeer_up), failures to c->why via nx_qconn_fail.  None of them frees anything.
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
    if (cidlen != NX_QSCID_LEN || nx_qcid_new(c->q, cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    if (nx_qcid_reset_token(c->q, cid, token) != 0)
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
    if (c->server)
        nx_qconn_confirmed(c);
    return 0;
}

static int handshake_confirmed_cb(ngtcp2_conn *conn, void *user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    /* A client waits for HANDSHAKE_DONE: the server has accepted our certificate, so no
     * message we write can be refused unread. */
    nx_qconn_confirmed(c);
    return 0;
}

/* An inspector's connection (ALPN h3) carries HTTP/3: each stream event below goes to
 * quic_inspect.c and never near the peers' channels and records. */

static int recv_stream_data_cb(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t offset,
                               const uint8_t *data, size_t datalen, void *user_data,
                               void *stream_user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    (void)offset;
    if (c->inspector)
        return nx_qinspect_recv(c, flags, id, data, datalen);
    /* Stream data from the server proves it finished the handshake (it writes none
     * before); HANDSHAKE_DONE was merely lost or reordered. */
    nx_qconn_confirmed(c);
    return nx_qstream_on_recv(c, flags, id, data, datalen, stream_user_data);
}

static int acked_cb(ngtcp2_conn *conn, int64_t id, uint64_t offset, uint64_t datalen,
                    void *user_data, void *stream_user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    (void)offset;
    if (c->inspector)
        return nx_qinspect_acked(c, id, datalen);
    if (!stream_user_data)
        return 0;
    return nx_qstream_on_acked(user_data, stream_user_data, offset, datalen);
}

static int stream_close_cb(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t app_err,
                           void *user_data, void *stream_user_data)
{
    struct nx_qconn *c = user_data;
    if (c->inspector)
        return nx_qinspect_stream_close(c, flags, id, app_err);
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
    if (((struct nx_qconn *)user_data)->inspector)
        return nx_qinspect_stream_reset(user_data, id); /* a request given up: fine */
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
    if (((struct nx_qconn *)user_data)->inspector)
        return nx_qinspect_stream_reset(user_data, id);
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
    (void)max_data;
    if (((struct nx_qconn *)user_data)->inspector)
        return nx_qinspect_extend_stream(user_data, id);
    if (stream_user_data) {
        nx_qstream_on_extend(stream_user_data);
        nx_quic_schedule_flush(user_data);
    }
    return 0;
}

static int extend_remote_bidi_cb(ngtcp2_conn *conn, uint64_t max_streams, void *user_data)
{
    struct nx_qconn *c = user_data;
    (void)conn;
    /* Only inspectors may open bidirectional streams (their requests). */
    return c->inspector ? nx_qinspect_extend_bidi(c, max_streams) : 0;
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
    .extend_max_remote_streams_bidi = extend_remote_bidi_cb,
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
    /* BBR paces by measured bandwidth and RTT and does not take a random loss for
     * congestion: at 1% loss between namespaces it kept 0.6-0.7 of its lossless rate,
     * CUBIC 0.2 (docs/performance.md); lossless they are alike.  ngtcp2 0.12's BBR2
     * collapsed at 1% loss in two of three runs, so it is not offered. */
    s->cc_algo = cf->cc == NX_QUIC_CC_CUBIC ? NGTCP2_CC_ALGO_CUBIC : NGTCP2_CC_ALGO_BBR;
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
}

/*
 * The idle timeout we announce.  ngtcp2 restarts its idle timer at the first
 * ack-eliciting packet sent after a receipt, and the keep-alive sends one keepalive_ms
 * into a silence: announced as is, a peer that went silent was lost idle + keepalive
 * after its last packet (6 s with the defaults).  Taking the keep-alive off makes
 * idle_timeout_ms the bound, as documented.  A live but idle peer must still be heard
 * before the shorter timer runs out: its PING comes keepalive_ms into a silence, so the
 * keep-alive is taken off only while it is at most a third of the idle timeout, which
 * leaves a third for the round trip.
 */
static uint64_t announced_idle_ms(const struct nx_quic_conf *cf)
{
    uint64_t t = cf->idle_timeout_ms, k = cf->keepalive_ms;
    return k && 3 * k <= t ? t - k : t;
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
    p->max_idle_timeout = (ngtcp2_duration)announced_idle_ms(cf) * NGTCP2_MILLISECONDS;
    p->active_connection_id_limit = 4;
    /* A daemon is known by its address: one that moves is another peer. */
    p->disable_active_migration = 1;
    /* What arm_timer really waits: the peer's probe timeout adds it. */
    p->max_ack_delay = NX_QMAX_ACK_DELAY_MS * NGTCP2_MILLISECONDS;
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

static void new_scid(const struct nx_quic *q, ngtcp2_cid *cid)
{
    if (nx_qcid_new(q, cid) != 0)
        abort(); /* no randomness: nothing safe to do */
}

struct nx_qconn *nx_qconn_client_new(struct nx_qpeer *p, int successor, char *err,
                                     size_t errlen)
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
    dcid.datalen = NX_QSCID_LEN; /* the server's to replace: plain random */
    rand_cb(dcid.data, sizeof(dcid.data), NULL);
    if (successor) { /* tagged, so that the peer keeps our live connection (quic_roll.c) */
        dcid.datalen = NX_QROLL_DCID_LEN;
        memcpy(dcid.data, NX_QROLL_TAG, sizeof(NX_QROLL_TAG) - 1);
    }
    new_scid(q, &scid);
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
    new_scid(q, &scid);
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
    if (nx_qcid_reset_token(q, &scid, tp.stateless_reset_token) == 0)
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
