/*
 * h3c_quic.c - the HTTP/3 client's QUIC connection: a connected UDP socket, an ngtcp2
 * client connection with the GnuTLS session of h3c_tls.c, and the poll() loop that
 * drives it until every request is answered, then a clean CONNECTION_CLOSE so that the
 * daemon frees its side at once.
 *
 * The loop decides the failures of time and place: nothing at the address (port
 * unreachable, or no packet at all: UNAVAILABLE), an answer to the handshake but none to
 * the requests in time (TIMEOUT).  What the daemon said when it closed is h3c_tls.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>

#include "addr.h"
#include "h3c_int.h"
#include "inspect.h"
#include "nexar.h"

#define RX_BUF 65536

void h3c_fail(struct h3c *c, int status, const char *fmt, ...)
{
    if (c->fail)
        return;
    c->fail = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
}

static ngtcp2_tstamp now_ts(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ngtcp2_tstamp)ts.tv_sec * NGTCP2_SECONDS + (ngtcp2_tstamp)ts.tv_nsec;
}

/* ---- the address ---- */

/* Every address of opts.addr, in getaddrinfo's order: *res (freeaddrinfo).  The grammar
 * is addr.h's, as for every other daemon address (NEXAR_COORD, rank tables, peer-test):
 * what no rank or daemon could be named by, nexarctl does not take either. */
static int resolve(struct h3c *c, struct addrinfo **res, char *err, size_t errlen)
{
    const char *a = c->o->addr;
    char host[NX_ADDR_MAX], port[8];
    uint16_t p;
    if (nx_addr_split(a, false, host, sizeof(host), &p) < 0) {
        snprintf(err, errlen, "%s: not HOST:PORT or [V6]:PORT (a port from 1, at most %d "
                 "bytes)", a ? a : "(none)", NX_ADDR_MAX - 1);
        return -NEXAR_ERR_INVALID;
    }
    snprintf(port, sizeof(port), "%u", p);
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM};
    int rv = getaddrinfo(host, port, &hints, res);
    if (rv != 0) {
        snprintf(err, errlen, "%s: %s", a, gai_strerror(rv));
        return -NEXAR_ERR_INVALID;
    }
    return 0;
}

static int open_socket(struct h3c *c, char *err, size_t errlen)
{
    c->fd = socket(c->remote.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    /* Connected: the kernel filters strangers out, and an ICMP port unreachable comes
     * back as ECONNREFUSED, so a daemon that is not there is known at once. */
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&c->remote, c->remote_len) < 0) {
        snprintf(err, errlen, "%s: %s", c->o->addr, strerror(errno));
        return -NEXAR_ERR_UNAVAILABLE;
    }
    c->local_len = sizeof(c->local);
    if (getsockname(c->fd, (struct sockaddr *)&c->local, &c->local_len) < 0) {
        snprintf(err, errlen, "getsockname: %s", strerror(errno));
        return -NEXAR_ERR_INTERNAL;
    }
    return 0;
}

/* ---- ngtcp2 callbacks ---- */

static ngtcp2_conn *ref_get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((struct h3c *)ref->user_data)->conn;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, len) != 0)
        abort();
}

static int new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
                      void *user)
{
    (void)conn;
    (void)user;
    cid->datalen = cidlen;
    return gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) == 0 &&
                   gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN) == 0
               ? 0
               : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int handshake_completed(ngtcp2_conn *conn, void *user)
{
    struct h3c *c = user;
    gnutls_datum_t d;
    (void)conn;
    if (gnutls_alpn_get_selected_protocol(c->tls, &d) != 0 ||
        d.size != sizeof(NX_INSPECT_ALPN) - 1 || memcmp(d.data, NX_INSPECT_ALPN, d.size)) {
        h3c_fail(c, NEXAR_ERR_UNSUPPORTED, "%s did not select ALPN h3", c->o->addr);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return h3c_http_start(c);
}

static int recv_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t off,
                            const uint8_t *data, size_t len, void *user, void *sud)
{
    (void)conn;
    (void)off;
    (void)sud;
    return h3c_http_recv(user, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
}

static int acked(ngtcp2_conn *conn, int64_t id, uint64_t off, uint64_t len, void *user,
                 void *sud)
{
    (void)conn;
    (void)off;
    (void)sud;
    return h3c_http_acked(user, id, len);
}

static int stream_close(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t app_err,
                        void *user, void *sud)
{
    (void)conn;
    (void)sud;
    return h3c_http_stream_close(user, id, app_err,
                                 (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) != 0);
}

static int stream_reset(ngtcp2_conn *conn, int64_t id, uint64_t final_size, uint64_t app_err,
                        void *user, void *sud)
{
    (void)conn;
    (void)final_size;
    (void)sud;
    return h3c_http_stream_reset(user, id, app_err);
}

static int stop_sending(ngtcp2_conn *conn, int64_t id, uint64_t app_err, void *user,
                        void *sud)
{
    (void)conn;
    (void)sud;
    (void)app_err;
    /* The daemon answered early and needs no more of the request: fine. */
    return h3c_http_stop_sending(user, id);
}

static int extend_bidi(ngtcp2_conn *conn, uint64_t max, void *user)
{
    (void)conn;
    (void)max;
    return h3c_http_open_more(user);
}

static int extend_stream_data(ngtcp2_conn *conn, int64_t id, uint64_t max, void *user,
                              void *sud)
{
    (void)conn;
    (void)max;
    (void)sud;
    return h3c_http_unblock(user, id);
}

static const ngtcp2_callbacks callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = recv_stream_data,
    .acked_stream_data_offset = acked,
    .stream_close = stream_close,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .extend_max_local_streams_bidi = extend_bidi,
    .rand = rand_cb,
    .get_new_connection_id = new_cid_cb,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = stream_reset,
    .extend_max_stream_data = extend_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

static int conn_new(struct h3c *c, char *err, size_t errlen)
{
    ngtcp2_cid dcid, scid;
    ngtcp2_settings s;
    ngtcp2_transport_params tp;
    dcid.datalen = 16;
    scid.datalen = 16;
    rand_cb(dcid.data, dcid.datalen, NULL);
    rand_cb(scid.data, scid.datalen, NULL);
    ngtcp2_settings_default(&s);
    s.initial_ts = now_ts();
    s.handshake_timeout = (ngtcp2_duration)c->o->timeout_ms * NGTCP2_MILLISECONDS;
    ngtcp2_transport_params_default(&tp);
    tp.initial_max_streams_uni = 3;             /* the daemon's control and QPACK streams */
    tp.initial_max_stream_data_uni = 64u << 10;
    tp.initial_max_stream_data_bidi_local = 1u << 20; /* the answers */
    tp.initial_max_data = 4u << 20;
    tp.max_idle_timeout = (ngtcp2_duration)c->o->timeout_ms * NGTCP2_MILLISECONDS;
    tp.active_connection_id_limit = 2;
    ngtcp2_path_storage_init(&c->ps, (struct sockaddr *)&c->local, c->local_len,
                             (struct sockaddr *)&c->remote, c->remote_len, NULL);
    int rv = ngtcp2_conn_client_new(&c->conn, &dcid, &scid, &c->ps.path, NGTCP2_PROTO_VER_V1,
                                    &callbacks, &s, &tp, NULL, c);
    if (rv != 0) {
        snprintf(err, errlen, "cannot start a QUIC connection: %s", ngtcp2_strerror(rv));
        return -NEXAR_ERR_INTERNAL;
    }
    ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
    return 0;
}

/* ---- the loop ---- */

static int socket_error(struct h3c *c, int e)
{
    c->refused = e == ECONNREFUSED;
    if (e == ECONNREFUSED)
        h3c_fail(c, NEXAR_ERR_UNAVAILABLE, "no nexard answers at %s (UDP port unreachable)",
                 c->o->addr);
    else
        h3c_fail(c, NEXAR_ERR_UNAVAILABLE, "%s: %s", c->o->addr, strerror(e));
    return -1;
}

static int write_pkts(struct h3c *c)
{
    uint8_t buf[65536];
    ngtcp2_tstamp ts = now_ts();
    size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(c->conn);
    if (max > sizeof(buf))
        max = sizeof(buf);
    for (int i = 0; i < 64 && !c->fail; i++) {
        ngtcp2_ssize n = h3c_http_write_pkt(c, buf, max, ts);
        if (n < 0) {
            if (n == NGTCP2_ERR_CALLBACK_FAILURE)
                return -1; /* the callback said why */
            h3c_fail(c, NEXAR_ERR_INTERNAL, "QUIC write: %s", ngtcp2_strerror((int)n));
            return -1;
        }
        if (n == 0)
            break;
        if (send(c->fd, buf, (size_t)n, 0) < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return socket_error(c, errno);
    }
    ngtcp2_conn_update_pkt_tx_time(c->conn, ts);
    return c->fail ? -1 : 0;
}

static int read_pkts(struct h3c *c)
{
    static uint8_t buf[RX_BUF];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return socket_error(c, errno);
        }
        c->got_packet = 1;
        ngtcp2_pkt_info pi = {0};
        int rv = ngtcp2_conn_read_pkt(c->conn, &c->ps.path, &pi, buf, (size_t)n, now_ts());
        if (rv != 0) {
            h3c_read_failed(c, rv);
            return -1;
        }
    }
}

/* Tells the daemon we are done (or why we gave up), so that it frees our side now rather
 * than at its idle timeout. */
static void close_conn(struct h3c *c)
{
    uint8_t buf[1280];
    ngtcp2_connection_close_error ce;
    ngtcp2_pkt_info pi;
    if (!c->conn || ngtcp2_conn_is_in_closing_period(c->conn) ||
        ngtcp2_conn_is_in_draining_period(c->conn))
        return;
    uint8_t alert = ngtcp2_conn_get_tls_alert(c->conn);
    if (c->fail && alert)
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &ce, alert, (const uint8_t *)c->why, strlen(c->why));
    else
        ngtcp2_connection_close_error_set_application_error(&ce, NGHTTP3_H3_NO_ERROR, NULL, 0);
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->conn, NULL, &pi, buf, sizeof(buf),
                                                        &ce, now_ts());
    if (n > 0)
        (void)send(c->fd, buf, (size_t)n, 0);
}

/* Drives the connection until every request is done (hold: until the deadline). */
static void run(struct h3c *c, int timeout_ms, int hold)
{
    ngtcp2_tstamp deadline = now_ts() + (ngtcp2_tstamp)timeout_ms * NGTCP2_MILLISECONDS;
    while (!c->fail && (hold || c->ndone < c->nreq)) {
        if (write_pkts(c) < 0)
            break;
        ngtcp2_tstamp now = now_ts(), exp = ngtcp2_conn_get_expiry(c->conn);
        if (hold && now >= deadline)
            break;
        if (now >= deadline) {
            if (c->got_packet)
                h3c_fail(c, NEXAR_ERR_TIMEOUT, "%s did not answer within %.1f s", c->o->addr,
                         c->o->timeout_ms / 1000.0);
            else
                h3c_fail(c, NEXAR_ERR_UNAVAILABLE, "no nexard answers at %s (no reply in "
                         "%.1f s)", c->o->addr, c->o->timeout_ms / 1000.0);
            break;
        }
        ngtcp2_tstamp until = exp < deadline ? exp : deadline;
        int ms = until > now ? (int)((until - now + NGTCP2_MILLISECONDS - 1) /
                                     NGTCP2_MILLISECONDS)
                             : 0;
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, ms);
        if (pr < 0 && errno != EINTR) {
            h3c_fail(c, NEXAR_ERR_INTERNAL, "poll: %s", strerror(errno));
            break;
        }
        if (pr > 0 && read_pkts(c) < 0)
            break;
        if (now_ts() >= ngtcp2_conn_get_expiry(c->conn)) {
            int rv = ngtcp2_conn_handle_expiry(c->conn, now_ts());
            if (rv != 0 && !c->got_packet)
                h3c_fail(c, NEXAR_ERR_UNAVAILABLE, "no nexard answers at %s", c->o->addr);
            else if (rv != 0)
                h3c_fail(c, NEXAR_ERR_TIMEOUT, "%s went quiet (%s)", c->o->addr,
                         ngtcp2_strerror(rv));
        }
    }
    if (!c->fail)
        write_pkts(c); /* the last ACKs */
}

/* One try at one address: the connection, the requests, the close. */
static int attempt(struct h3c *c, const struct addrinfo *ai, char *err, size_t errlen)
{
    int rv;
    memcpy(&c->remote, ai->ai_addr, ai->ai_addrlen);
    c->remote_len = ai->ai_addrlen;
    if ((rv = h3c_tls_setup(c, err, errlen)) != 0 || (rv = open_socket(c, err, errlen)) != 0 ||
        (rv = conn_new(c, err, errlen)) != 0)
        return rv;
    run(c, c->o->timeout_ms, 0);
    if (!c->fail && c->rq->hold_ms > 0)
        run(c, c->rq->hold_ms, 1);
    close_conn(c);
    if (c->fail) {
        snprintf(err, errlen, "%s", c->why);
        return -c->fail;
    }
    return 0;
}

static void attempt_free(struct h3c *c)
{
    h3c_http_free(c);
    if (c->conn)
        ngtcp2_conn_del(c->conn);
    if (c->tls)
        gnutls_deinit(c->tls);
    if (c->cred)
        gnutls_certificate_free_credentials(c->cred);
    if (c->fd >= 0)
        close(c->fd);
}

/* A fresh state for a try: nothing of the one before survives. */
static void attempt_init(struct h3c *c, const struct nxt_h3c_opts *opts,
                         const struct nxt_h3c_req *rq, struct nxt_h3c_resp *resp)
{
    memset(c, 0, sizeof(*c));
    c->o = opts;
    c->rq = rq;
    c->fd = -1;
    c->nreq = rq->repeat > 0 ? rq->repeat : 1;
    if (c->nreq > NXT_H3C_MAX_REQ)
        c->nreq = NXT_H3C_MAX_REQ;
    for (int i = 0; i < c->nreq; i++) {
        nxt_h3c_resp_free(&resp[i]);
        memset(&resp[i], 0, sizeof(resp[i]));
        c->st[i].id = -1;
        c->st[i].resp = &resp[i];
    }
    c->ref.get_conn = ref_get_conn;
    c->ref.user_data = c;
    snprintf(c->authority, sizeof(c->authority), "%s", opts->addr ? opts->addr : "");
}

int nxt_h3c_request(const struct nxt_h3c_opts *opts, const struct nxt_h3c_req *rq,
                    struct nxt_h3c_resp *resp, char *err, size_t errlen)
{
    struct h3c c;
    struct addrinfo *res = NULL;
    int n = rq->repeat > 0 ? rq->repeat : 1;
    for (int i = 0; i < n && i < NXT_H3C_MAX_REQ; i++)
        memset(&resp[i], 0, sizeof(resp[i]));
    attempt_init(&c, opts, rq, resp);
    int rv = resolve(&c, &res, err, errlen);
    /* A name may stand for several addresses (localhost: 127.0.0.1 and ::1): a port
     * unreachable at one, known at once, sends us on to the next. */
    for (const struct addrinfo *ai = rv ? NULL : res; ai; ai = ai->ai_next) {
        attempt_init(&c, opts, rq, resp);
        rv = attempt(&c, ai, err, errlen);
        attempt_free(&c);
        if (!(rv == -NEXAR_ERR_UNAVAILABLE && c.refused))
            break;
    }
    if (res)
        freeaddrinfo(res);
    return rv;
}

int nxt_h3c_get(const struct nxt_h3c_opts *opts, const char *path, struct nxt_h3c_resp *resp,
                char *err, size_t errlen)
{
    struct nxt_h3c_req rq = {.method = "GET", .path = path};
    return nxt_h3c_request(opts, &rq, resp, err, errlen);
}

void nxt_h3c_resp_free(struct nxt_h3c_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}
