/*
 * test_quic_retry.c - Retry tokens that must not buy connection state.
 *
 * An endpoint with Retry on (the default) keeps no state for a new peer until it returns
 * a valid token: AEAD-sealed with the endpoint's secret, bound to the source address and
 * to the DCID the Retry told it to use, and at most 10 s old (quic_server.c).  A raw
 * client made of ngtcp2's own client connection and GnuTLS (real Initial packets: 1200
 * bytes, Initial keys, a ClientHello) sends from real UDP sockets:
 *
 *   forged tokens      random bytes behind the Retry magic, the regular-token magic, a
 *                      lone magic byte, a genuine token with one bit flipped;
 *   another address    a genuine token, from a Retry sent to socket A, replayed from B;
 *   expired            a token sealed with the endpoint's own secret for A's address,
 *                      11 s ago.
 *
 * None of them may create a connection or a peer record, or draw any answer.  Two
 * controls show that each packet was wrong only in what the case says: the same
 * construction with a fresh sealed token, and A continuing after its Retry, do create a
 * connection.  Finally a real endpoint still connects and delivers a message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "qh.h"
#include "quic_int.h"

static uv_loop_t *loop;
static union nx_qsa server;
static socklen_t server_len;

/* ---- the server and the legitimate client: transport endpoints ---- */

struct ep {
    struct nx_transport *t;
    int ups, msgs;
};

static void on_message(void *arg, struct nx_tpeer *p, uint64_t ch, const void *d, size_t len)
{
    struct ep *e = arg;
    (void)p;
    if (ch == 5 && len == 5 && !memcmp(d, "hello", 5))
        e->msgs++;
}

static void on_peer(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *why)
{
    struct ep *e = arg;
    (void)p;
    (void)why;
    if (st == NX_TPEER_UP)
        e->ups++;
}

static void on_sent(void *arg, struct nx_tpeer *p, uint64_t token)
{
    (void)arg;
    (void)p;
    (void)token;
}

static int ep_start(struct ep *e, int node)
{
    struct nx_quic_conf c;
    struct nx_transport_cb cb = {.arg = e, .on_message = on_message, .on_peer = on_peer,
                                 .on_sent = on_sent};
    char err[256];
    qh_conf(&c, "127.0.0.1:0", node);
    c.retry = 1;
    e->t = nx_quic_new(loop, &c, &cb, err, sizeof(err));
    if (!e->t)
        fprintf(stderr, "nx_quic_new: %s\n", err);
    return e->t ? 0 : -1;
}

/* ---- the raw client: a UDP socket and ngtcp2 client connections on it ---- */

struct raw {
    int fd;
    union nx_qsa local;
    socklen_t local_len;
};

struct rconn {
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    ngtcp2_path_storage ps;
};

static gnutls_certificate_credentials_t cred;

static ngtcp2_conn *rc_get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((struct rconn *)ref->user_data)->conn;
}

static void rc_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, len) != 0)
        abort();
}

static int rc_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen,
                      void *user_data)
{
    (void)conn;
    (void)user_data;
    rc_rand(cid->data, cidlen, NULL);
    cid->datalen = cidlen;
    rc_rand(token, NGTCP2_STATELESS_RESET_TOKENLEN, NULL);
    return 0;
}

static const ngtcp2_callbacks rc_callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .rand = rc_rand,
    .get_new_connection_id = rc_new_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

static int raw_open(struct raw *r)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    r->local_len = sizeof(r->local);
    if (r->fd < 0 || bind(r->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(r->fd, &r->local.sa, &r->local_len) != 0) {
        perror("raw socket");
        return -1;
    }
    return 0;
}

static ngtcp2_cid random_cid(void)
{
    ngtcp2_cid c;
    c.datalen = NX_QSCID_LEN;
    rc_rand(c.data, c.datalen, NULL);
    return c;
}

/* A client connection from r to the server: its first Initial goes to dcid and carries
 * token (none when tokenlen is 0). */
static int rconn_new(struct rconn *c, struct raw *r, const ngtcp2_cid *dcid,
                     const uint8_t *token, size_t tokenlen)
{
    static const gnutls_datum_t alpn = {(unsigned char *)"nexar/1", 7};
    ngtcp2_settings s;
    ngtcp2_transport_params p;
    ngtcp2_cid scid = random_cid();
    memset(c, 0, sizeof(*c));
    ngtcp2_settings_default(&s);
    s.initial_ts = nx_qnow();
    s.token.base = (uint8_t *)token;
    s.token.len = tokenlen;
    ngtcp2_transport_params_default(&p);
    p.initial_max_streams_uni = 4;
    p.initial_max_stream_data_uni = 1 << 16;
    p.initial_max_data = 1 << 20;
    ngtcp2_path_storage_init(&c->ps, &r->local.sa, r->local_len, &server.sa, server_len, NULL);
    c->ref.get_conn = rc_get_conn;
    c->ref.user_data = c;
    if (ngtcp2_conn_client_new(&c->conn, dcid, &scid, &c->ps.path, NGTCP2_PROTO_VER_V1,
                               &rc_callbacks, &s, &p, NULL, c) != 0)
        return -1;
    if (gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_TICKETS | GNUTLS_NO_END_OF_EARLY_DATA) ||
        ngtcp2_crypto_gnutls_configure_client_session(c->tls) ||
        gnutls_priority_set_direct(c->tls, "NORMAL:-VERS-ALL:+VERS-TLS1.3", NULL) ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, cred) ||
        gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY))
        return -1;
    gnutls_session_set_ptr(c->tls, &c->ref);
    ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
    return 0;
}

static void rconn_free(struct rconn *c)
{
    ngtcp2_conn_del(c->conn);
    gnutls_deinit(c->tls);
}

/* Writes the connection's next packet (an Initial: at least 1200 bytes) and sends it. */
static int rconn_send(struct rconn *c, struct raw *r)
{
    uint8_t buf[1500];
    ngtcp2_ssize n = ngtcp2_conn_write_pkt(c->conn, &c->ps.path, NULL, buf, sizeof(buf),
                                           nx_qnow());
    if (n < 1200 || (buf[0] & 0xb0) != 0x80) { /* long header, type Initial */
        fprintf(stderr, "raw client: no Initial (%zd)\n", n);
        return -1;
    }
    return sendto(r->fd, buf, (size_t)n, 0, &server.sa, server_len) == n ? 0 : -1;
}

/* The server's answer to r, if one comes within ms (the loop runs meanwhile). */
static ssize_t raw_recv(struct raw *r, uint8_t *buf, size_t cap, int ms)
{
    double end = qh_now() + ms / 1000.0;
    do {
        uv_run(loop, UV_RUN_NOWAIT);
        ssize_t n = recv(r->fd, buf, cap, MSG_DONTWAIT);
        if (n > 0)
            return n;
        usleep(1000);
    } while (qh_now() < end);
    return 0;
}

/* ---- the cases ---- */

static struct nx_quic *srv;
static struct raw ra, rb;

/* One Initial from r with token to dcid: the server must stay as it was and say nothing. */
static void refused(const char *what, struct raw *r, const ngtcp2_cid *dcid,
                    const uint8_t *token, size_t tokenlen)
{
    struct rconn c;
    uint8_t buf[2048];
    uint64_t retries = srv->retries_sent;
    QH_CHECK(rconn_new(&c, r, dcid, token, tokenlen) == 0);
    QH_CHECK(rconn_send(&c, r) == 0);
    ssize_t n = raw_recv(r, buf, sizeof(buf), 250);
    int ok = n == 0 && srv->all == NULL && srv->routes.n == 0 && srv->retries_sent == retries;
    if (!ok)
        fprintf(stderr, "%s: answered %zd bytes, %s peer record, %zu routes, %llu retries\n",
                what, n, srv->all ? "a" : "no", srv->routes.n,
                (unsigned long long)srv->retries_sent);
    QH_CHECK(ok);
    rconn_free(&c);
}

/* An Initial to dcid was taken: the endpoint routes dcid to a new connection. */
static int accepted(const ngtcp2_cid *dcid)
{
    double end = qh_now() + 2.0;
    do {
        uv_run(loop, UV_RUN_NOWAIT);
        if (nx_qmap_get(&srv->routes, dcid->data, dcid->datalen) && srv->all)
            return 1;
        usleep(1000);
    } while (qh_now() < end);
    return 0;
}

/* The DCID a Retry binds (its SCID) and its token; -1 when it is no Retry. */
static int parse_retry(const uint8_t *b, ssize_t n, ngtcp2_cid *scid, uint8_t *token,
                       size_t *tokenlen)
{
    /* long header, type Retry | version | DCID len, DCID | SCID len, SCID | token | tag */
    if (n < 7 + 16 || (b[0] & 0xb0) != 0xb0)
        return -1;
    size_t off = 5 + 1 + b[5];
    if (off + 1 > (size_t)n || b[off] > NGTCP2_MAX_CIDLEN || off + 1 + b[off] + 16 >= (size_t)n)
        return -1;
    scid->datalen = b[off];
    memcpy(scid->data, b + off + 1, scid->datalen);
    off += 1 + scid->datalen;
    *tokenlen = (size_t)n - off - 16;
    if (*tokenlen > NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN || b[off] != NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY)
        return -1;
    memcpy(token, b + off, *tokenlen);
    return 0;
}

static int got_hello(void *arg)
{
    struct ep *s = arg;
    return s->msgs > 0;
}

static int run(void)
{
    struct ep s = {0}, l = {0};
    uint8_t buf[2048], tok[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN + 64];
    if (ep_start(&s, 0) != 0 || raw_open(&ra) != 0 || raw_open(&rb) != 0)
        return 1;
    srv = (struct nx_quic *)s.t;
    char err[128];
    server_len = sizeof(server);
    QH_CHECK(nx_qaddr_resolve(s.t->local_addr, false, &server, &server_len, err, sizeof(err)) == 0);
    QH_CHECK(gnutls_certificate_allocate_credentials(&cred) == 0);

    /* Forged: nothing the server sealed. */
    ngtcp2_cid d = random_cid();
    rc_rand(tok, sizeof(tok), NULL);
    tok[0] = NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY;
    refused("forged token", &ra, &d, tok, NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN);
    tok[0] = NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR;
    refused("regular-token magic", &ra, &d, tok, 64);
    tok[0] = NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY;
    refused("magic byte alone", &ra, &d, tok, 1);

    /* A genuine Retry to A: the token and the DCID it binds. */
    struct rconn a;
    QH_CHECK(rconn_new(&a, &ra, &d, NULL, 0) == 0);
    QH_CHECK(rconn_send(&a, &ra) == 0);
    ssize_t n = raw_recv(&ra, buf, sizeof(buf), 2000);
    QH_CHECK(n > 0 && srv->retries_sent == 1 && srv->all == NULL);
    ngtcp2_cid rscid;
    uint8_t genuine[sizeof(tok)];
    size_t glen;
    if (parse_retry(buf, n, &rscid, genuine, &glen) != 0) {
        fprintf(stderr, "no Retry came (%zd bytes)\n", n);
        return 1;
    }
    /* A reads it as a client would; its next Initial will carry the token. */
    QH_CHECK(ngtcp2_conn_read_pkt(a.conn, &a.ps.path, NULL, buf, (size_t)n, nx_qnow()) == 0);

    memcpy(tok, genuine, glen);
    tok[glen - 1] ^= 1;
    refused("genuine token, one bit flipped", &ra, &rscid, tok, glen);
    refused("genuine token from another address", &rb, &rscid, genuine, glen);

    /* Sealed with the server's own secret for A and a DCID, but 11 s ago. */
    ngtcp2_cid x = random_cid(), odcid = random_cid();
    ngtcp2_ssize tl = ngtcp2_crypto_generate_retry_token(
        tok, srv->token_secret, sizeof(srv->token_secret), NGTCP2_PROTO_VER_V1, &ra.local.sa,
        ra.local_len, &x, &odcid, nx_qnow() - 11 * NGTCP2_SECONDS);
    QH_CHECK(tl > 0);
    refused("expired token", &ra, &x, tok, (size_t)tl);
    QH_CHECK(s.ups == 0);

    /* Controls.  The same seal, fresh: a connection. */
    tl = ngtcp2_crypto_generate_retry_token(tok, srv->token_secret, sizeof(srv->token_secret),
                                            NGTCP2_PROTO_VER_V1, &ra.local.sa, ra.local_len,
                                            &x, &odcid, nx_qnow());
    struct rconn fresh;
    QH_CHECK(tl > 0 && rconn_new(&fresh, &ra, &x, tok, (size_t)tl) == 0);
    QH_CHECK(rconn_send(&fresh, &ra) == 0);
    QH_CHECK(accepted(&x));
    /* A after its Retry, from its own address: a connection (it replaces the one above,
     * still handshaking, as a restarted peer's would). */
    QH_CHECK(rconn_send(&a, &ra) == 0);
    QH_CHECK(accepted(&rscid));
    QH_CHECK(srv->retries_sent == 1 && s.ups == 0);

    /* A real peer still gets in, through its own Retry. */
    QH_CHECK(ep_start(&l, 1) == 0);
    struct nx_tpeer *p = l.t->ops->peer(l.t, s.t->local_addr, err, sizeof(err));
    struct iovec iov = {(void *)"hello", 5};
    QH_CHECK(p && l.t->ops->send(p, 5, &iov, 1, 0) == 0);
    QH_CHECK(qh_run_until(loop, got_hello, &s, 5000));
    QH_CHECK(s.ups == 1 && l.ups == 1 && srv->retries_sent == 2);

    rconn_free(&fresh);
    rconn_free(&a);
    close(ra.fd);
    close(rb.fd);
    qh_destroy(loop, l.t);
    qh_destroy(loop, s.t);
    gnutls_certificate_free_credentials(cred);
    return 0;
}

int main(void)
{
    static uv_loop_t l;
    uv_loop_init(&l);
    loop = &l;
    qh_certs(2);
    int rv = run();
    qh_certs_cleanup();
    uv_run(loop, UV_RUN_NOWAIT);
    if (rv || qh_failures) {
        fprintf(stderr, "test_quic_retry: %d failures\n", qh_failures);
        return 1;
    }
    printf("test_quic_retry: ok\n");
    return 0;
}
