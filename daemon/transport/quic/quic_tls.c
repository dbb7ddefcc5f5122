/*
 * quic_tls.c - GnuTLS for the QUIC handshake: TLS 1.3 only, ALPN "nexar/1", mutual
 * authentication against the cluster CA.
 *
 * With an inspection endpoint (conf.inspect) the server also accepts ALPN "h3"; the
 * client's offer decides.  GnuTLS selects the protocol while it reads the ClientHello,
 * and the post-ClientHello hook hands an "h3" connection to quic_inspect.c before any
 * transport parameter or certificate of ours has been written, so that an inspector gets
 * an inspector's limits from its first packet and never becomes a peer.  Its client
 * certificate is verified exactly like a peer's.
 *
 * Both ends present a certificate and verify the other's chain to tls_ca during the
 * handshake, so a stranger is refused before a single stream byte is accepted.  The chain
 * is not enough: the leaf must also be fit for its side and its role (cert_check.h), so
 * that a CA certificate, a client-only one that was dialled, or an operator's that tries
 * to be a peer are refused too.  Why it was refused is kept on the connection (verify
 * callback, or the GnuTLS error of the handshake) and sent in the CONNECTION_CLOSE
 * reason, so both ends can say it.  The earliest expiry in the peer's proof is kept as
 * well: the connection ends then (quic_drive.c), not only the next handshake.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "cert_check.h"
#include "inspect.h"
#include "tls_policy.h"
#include "log.h"
#include "mem.h"
#include "quic_int.h"

#define NX_ALPN "nexar/1"

static struct nx_qconn *session_conn(gnutls_session_t s)
{
    ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
    return ref ? ref->user_data : NULL;
}

static void set_why(struct nx_qconn *c, const char *what)
{
    if (!c->why[0])
        snprintf(c->why, sizeof(c->why), "TLS: %s", what);
}

static const char *status_text(unsigned status)
{
    if (status & GNUTLS_CERT_SIGNER_NOT_FOUND)
        return "certificate not signed by the cluster CA";
    if (status & GNUTLS_CERT_EXPIRED)
        return "certificate expired";
    if (status & GNUTLS_CERT_NOT_ACTIVATED)
        return "certificate not yet valid";
    if (status & GNUTLS_CERT_REVOKED)
        return "certificate revoked";
    if (status & GNUTLS_CERT_SIGNER_NOT_CA)
        return "certificate signed by a non-CA certificate";
    if (status & GNUTLS_CERT_INSECURE_ALGORITHM)
        return "certificate uses an insecure algorithm";
    if (status & GNUTLS_CERT_SIGNATURE_FAILURE)
        return "certificate signature does not verify";
    return "certificate rejected";
}

/* Runs on both sides once the peer's Certificate message is in. */
static int verify_cb(gnutls_session_t s)
{
    struct nx_qconn *c = session_conn(s);
    unsigned status = 0;
    int rv = gnutls_certificate_verify_peers2(s, &status);
    if (rv == GNUTLS_E_NO_CERTIFICATE_FOUND) {
        set_why(c, "peer presented no certificate");
        return -1;
    }
    if (rv < 0) {
        char m[128];
        snprintf(m, sizeof(m), "cannot verify the peer's certificate: %s", gnutls_strerror(rv));
        set_why(c, m);
        return -1;
    }
    if (status) {
        set_why(c, status_text(status));
        return -1;
    }
    /* The server knows by now whether it serves an inspector (post_client_hello); a
     * daemon that dials only ever dials a peer. */
    unsigned want = c->server && c->inspector ? NX_CERT_NODE | NX_CERT_OPERATOR : NX_CERT_NODE;
    char why[128];
    time_t end = (time_t)-1;
    if (nx_cert_check_peer(s, c->q->tls.cred, !c->server, want, &end, why, sizeof(why)) < 0) {
        set_why(c, why);
        return -1;
    }
    if (end != (time_t)-1) {
        /* On our own clock: a wall-clock step later does not move it. */
        time_t now = time(NULL), left = end - now;
        c->cert_end = end;
        c->cert_deadline = nx_qnow() + (ngtcp2_tstamp)(left > 0 ? left : 0) * NGTCP2_SECONDS;
        if (nx_cert_ends_soon(end, now) && !c->inspector) {
            char when[40], in[40];
            NX_WARN("quic", "%s: its certificate proof ends at %s, %s; connections with it end "
                    "then, and it must rotate its certificate (docs/operations.md, Rotation)",
                    c->peer->base.addr, nx_cert_time(end, when, sizeof(when)),
                    nx_cert_left(end, now, in, sizeof(in)));
        }
    }
    return 0;
}

static const char *error_text(int rv)
{
    switch (rv) {
    case GNUTLS_E_NO_CERTIFICATE_FOUND:
    case GNUTLS_E_CERTIFICATE_REQUIRED:
        return "peer presented no certificate";
    case GNUTLS_E_NO_APPLICATION_PROTOCOL:
        return "peer does not speak ALPN " NX_ALPN;
    case GNUTLS_E_NO_CIPHER_SUITES:
    case GNUTLS_E_UNSUPPORTED_VERSION_PACKET:
    case GNUTLS_E_INSUFFICIENT_CREDENTIALS:
        return "no common TLS 1.3 parameters with the peer";
    default:
        return gnutls_strerror(rv);
    }
}

/* Hashes the node key into the stateless-reset secret: a restarted daemon can then reset
 * connections its previous life had, and the peer learns at once instead of timing out. */
static int reset_secret_from_key(const char *keyfile, uint8_t out[32])
{
    gnutls_datum_t d = {NULL, 0};
    static const char label[] = "nexar stateless reset v1";
    if (!keyfile || gnutls_load_file(keyfile, &d) < 0)
        return gnutls_rnd(GNUTLS_RND_KEY, out, 32) == 0 ? 0 : -1;
    int rv = gnutls_hmac_fast(GNUTLS_MAC_SHA256, label, sizeof(label) - 1, d.data, d.size, out);
    gnutls_memset(d.data, 0, d.size);
    gnutls_free(d.data);
    return rv == 0 ? 0 : -1;
}

/* Our own certificate must chain to the CA, or every peer would refuse us later. */
static int check_own_cert(gnutls_certificate_credentials_t cred, char *err, size_t errlen)
{
    gnutls_x509_crt_t *crts = NULL;
    unsigned n = 0, vout = 0;
    gnutls_x509_trust_list_t tl;
    int rv = gnutls_certificate_get_x509_crt(cred, 0, &crts, &n);
    if (rv < 0) {
        snprintf(err, errlen, "tls_cert: %s", gnutls_strerror(rv));
        return -EINVAL;
    }
    gnutls_certificate_get_trust_list(cred, &tl);
    rv = gnutls_x509_trust_list_verify_crt(tl, crts, n, 0, &vout, NULL);
    for (unsigned i = 0; i < n; i++)
        gnutls_x509_crt_deinit(crts[i]);
    gnutls_free(crts);
    if (rv < 0 || vout) {
        snprintf(err, errlen, "tls_cert does not verify against tls_ca: %s",
                 rv < 0 ? gnutls_strerror(rv) : status_text(vout));
        return -EINVAL;
    }
    /* A daemon dials some peers and is dialled by others: its certificate must serve as
     * both, as a node.  Said here, at start, rather than by every peer's refusal later. */
    char why[160];
    gnutls_x509_crt_t own;
    if (gnutls_x509_crt_init(&own) < 0)
        return -ENOMEM;
    gnutls_datum_t der;
    rv = gnutls_certificate_get_crt_raw(cred, 0, 0, &der);
    if (rv >= 0)
        rv = gnutls_x509_crt_import(own, &der, GNUTLS_X509_FMT_DER);
    if (rv >= 0)
        rv = nx_cert_check(own, -1, NX_CERT_NODE, why, sizeof(why));
    else
        snprintf(why, sizeof(why), "%s", gnutls_strerror(rv));
    gnutls_x509_crt_deinit(own);
    if (rv < 0) {
        snprintf(err, errlen, "tls_cert: %s; a node needs a node certificate ('nexarctl certs "
                 "node', docs/operations.md)", why);
        return -EINVAL;
    }
    return 0;
}

/* The CA, our certificate and key from the files conf names, checked as one. */
static int load_cred(const struct nx_quic_conf *conf, gnutls_certificate_credentials_t *out,
                     int *have_cert, char *err, size_t errlen)
{
    gnutls_certificate_credentials_t cred;
    int rv;
    *have_cert = 0;
    if ((rv = gnutls_certificate_allocate_credentials(&cred)) < 0) {
        snprintf(err, errlen, "gnutls: %s", gnutls_strerror(rv));
        return -ENOMEM;
    }
    rv = gnutls_certificate_set_x509_trust_file(cred, conf->tls_ca, GNUTLS_X509_FMT_PEM);
    if (rv <= 0) {
        snprintf(err, errlen, "tls_ca %s: %s", conf->tls_ca,
                 rv == 0 ? "no certificate in the file" : gnutls_strerror(rv));
        goto fail;
    }
    if (conf->tls_cert && conf->tls_key) {
        rv = gnutls_certificate_set_x509_key_file(cred, conf->tls_cert, conf->tls_key,
                                                  GNUTLS_X509_FMT_PEM);
        if (rv < 0) {
            snprintf(err, errlen, "tls_cert %s / tls_key %s: %s", conf->tls_cert,
                     conf->tls_key, gnutls_strerror(rv));
            goto fail;
        }
        if (!conf->test_lax_cert && check_own_cert(cred, err, errlen) != 0)
            goto fail;
        *have_cert = 1;
    }
    gnutls_certificate_set_verify_function(cred, verify_cb);
    *out = cred;
    return 0;
fail:
    gnutls_certificate_free_credentials(cred);
    return -EINVAL;
}

static void set_own(struct nx_qtls *x)
{
    x->own_end = x->have_cert ? nx_cert_own_end(x->cred, x->own_subject, sizeof(x->own_subject))
                              : (time_t)-1;
}

int nx_qtls_init(struct nx_qtls *x, const struct nx_quic_conf *conf, uint8_t reset_secret[32],
                 char *err, size_t errlen)
{
    const char *errpos = NULL;
    int rv;
    memset(x, 0, sizeof(*x));
    if (!conf->tls_ca) {
        snprintf(err, errlen, "tls_ca is required");
        return -EINVAL;
    }
    if ((!conf->tls_cert || !conf->tls_key) && !conf->test_lax_cert) {
        snprintf(err, errlen, "tls_cert and tls_key are required");
        return -EINVAL;
    }
    if ((rv = load_cred(conf, &x->cred, &x->have_cert, err, errlen)) != 0)
        return rv;
    set_own(x);
    if ((rv = gnutls_priority_init(&x->prio, NX_TLS_PRIORITY, &errpos)) < 0) {
        snprintf(err, errlen, "gnutls priority: %s", gnutls_strerror(rv));
        goto fail_cred;
    }
    if (reset_secret_from_key(conf->tls_key, reset_secret) != 0) {
        snprintf(err, errlen, "cannot derive the stateless reset secret");
        goto fail_prio;
    }
    x->sessions = nx_xcalloc(1, sizeof(*x->sessions));
    return 0;
fail_prio:
    gnutls_priority_deinit(x->prio);
fail_cred:
    gnutls_certificate_free_credentials(x->cred);
    memset(x, 0, sizeof(*x));
    return -EINVAL;
}

static void free_retired(struct nx_qtls *x, size_t gen)
{
    gnutls_certificate_free_credentials(x->retired[gen]);
    x->retired[gen] = NULL;
}

int nx_qtls_reload(struct nx_qtls *x, const struct nx_quic_conf *conf,
                   uint8_t reset_secret[32], char *err, size_t errlen)
{
    gnutls_certificate_credentials_t cred;
    int have_cert;
    if (conf->test_lax_cert && !x->have_cert) {
        snprintf(err, errlen, "this endpoint has no certificate to reload");
        return -EINVAL;
    }
    int rv = load_cred(conf, &cred, &have_cert, err, errlen);
    if (rv != 0)
        return rv;
    if (reset_secret_from_key(conf->tls_key, reset_secret) != 0) {
        gnutls_certificate_free_credentials(cred);
        snprintf(err, errlen, "cannot derive the stateless reset secret");
        return -EINVAL;
    }
    /* Sessions of live connections point at the old credentials: kept until the last of
     * them ends (nx_qtls_session_done). */
    size_t gen = x->nretired;
    x->retired = nx_xrealloc(x->retired, (x->nretired + 1) * sizeof(*x->retired));
    x->retired[x->nretired++] = x->cred;
    x->sessions = nx_xrealloc(x->sessions, (x->nretired + 1) * sizeof(*x->sessions));
    x->sessions[x->nretired] = 0;
    if (x->sessions[gen] == 0)
        free_retired(x, gen);
    x->cred = cred;
    x->have_cert = have_cert;
    set_own(x);
    return 0;
}

void nx_qtls_fini(struct nx_qtls *x)
{
    if (x->prio)
        gnutls_priority_deinit(x->prio);
    if (x->cred)
        gnutls_certificate_free_credentials(x->cred);
    for (size_t i = 0; i < x->nretired; i++)
        if (x->retired[i])
            gnutls_certificate_free_credentials(x->retired[i]);
    free(x->retired);
    free(x->sessions);
    memset(x, 0, sizeof(*x));
}

void nx_qtls_session_done(struct nx_qtls *x, struct nx_qconn *c)
{
    size_t gen = c->cred_gen;
    if (--x->sessions[gen] == 0 && gen < x->nretired && x->retired[gen])
        free_retired(x, gen);
}

size_t nx_qtls_creds_held(const struct nx_qtls *x)
{
    size_t n = x->cred ? 1 : 0;
    for (size_t i = 0; i < x->nretired; i++)
        n += x->retired[i] != NULL;
    return n;
}

/* The ALPN GnuTLS selected (server: from the ClientHello just read). */
enum nx_qalpn nx_qtls_alpn(struct nx_qconn *c)
{
    gnutls_datum_t d;
    if (!c->tls || gnutls_alpn_get_selected_protocol(c->tls, &d) != 0)
        return NX_QALPN_NONE;
    if (d.size == sizeof(NX_ALPN) - 1 && !memcmp(d.data, NX_ALPN, d.size))
        return NX_QALPN_PEER;
    if (d.size == sizeof(NX_INSPECT_ALPN) - 1 && !memcmp(d.data, NX_INSPECT_ALPN, d.size))
        return NX_QALPN_H3;
    return NX_QALPN_NONE;
}

/* Server side, once the ClientHello is parsed and before our answer is written. */
static int post_client_hello(gnutls_session_t s)
{
    struct nx_qconn *c = session_conn(s);
    if (!c || nx_qtls_alpn(c) != NX_QALPN_H3)
        return 0;
    return nx_qinspect_classify(c) == 0 ? 0 : GNUTLS_E_INTERNAL_ERROR;
}

int nx_qtls_session_new(struct nx_qtls *x, struct nx_qconn *c, int server)
{
    gnutls_session_t s;
    /* A server with an inspection endpoint offers both; a client only ever asks for
     * nexar/1 (daemons never inspect each other). */
    static const gnutls_datum_t alpn[] = {
        {(unsigned char *)NX_ALPN, sizeof(NX_ALPN) - 1},
        {(unsigned char *)NX_INSPECT_ALPN, sizeof(NX_INSPECT_ALPN) - 1},
    };
    unsigned nalpn = server && c->q->conf.inspect ? 2 : 1;
    c->cred_gen = x->nretired;
    unsigned flags = (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_NO_TICKETS |
                     GNUTLS_NO_END_OF_EARLY_DATA;
    if (server && !x->have_cert)
        return -EINVAL;
    if (gnutls_init(&s, flags) != 0)
        return -ENOMEM;
    int rv = server ? ngtcp2_crypto_gnutls_configure_server_session(s)
                    : ngtcp2_crypto_gnutls_configure_client_session(s);
    if (rv != 0 || gnutls_priority_set(s, x->prio) != 0 ||
        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, x->cred) != 0 ||
        gnutls_alpn_set_protocols(s, alpn, nalpn, GNUTLS_ALPN_MANDATORY) != 0) {
        gnutls_deinit(s);
        return -EINVAL;
    }
    if (server) {
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
        /* Without our CA list in the request a client sends whatever certificate it has,
         * so a foreign one is refused by name instead of arriving as "no certificate". */
        gnutls_certificate_send_x509_rdn_sequence(s, 1);
        if (nalpn > 1)
            gnutls_handshake_set_post_client_hello_function(s, post_client_hello);
    }
    gnutls_session_set_ptr(s, &c->ref);
    c->tls = s;
    x->sessions[c->cred_gen]++;
    return 0;
}

int nx_qtls_recv_crypto(ngtcp2_conn *conn, ngtcp2_crypto_level level, uint64_t offset,
                        const uint8_t *data, size_t datalen, void *user_data)
{
    struct nx_qconn *c = user_data;
    int rv = 0;
    (void)offset;
    if (datalen > 0) {
        rv = gnutls_handshake_write(c->tls, ngtcp2_crypto_gnutls_from_ngtcp2_level(level), data,
                                    datalen);
        if (rv != 0 && gnutls_error_is_fatal(rv))
            goto fail;
    }
    if (!ngtcp2_conn_get_handshake_completed(conn)) {
        rv = gnutls_handshake(c->tls);
        if (rv < 0) {
            if (!gnutls_error_is_fatal(rv))
                return 0;
            goto fail;
        }
        ngtcp2_conn_handshake_completed(conn);
    }
    return 0;
fail:
    c->gnutls_err = rv;
    set_why(c, error_text(rv));
    gnutls_alert_send_appropriate(c->tls, rv);
    rv = ngtcp2_conn_get_tls_error(conn);
    return rv ? rv : NGTCP2_ERR_CRYPTO;
}

int nx_qtls_check_alpn(struct nx_qconn *c)
{
    /* An inspector was classified from the ALPN itself; anyone else must be a peer. */
    if (nx_qtls_alpn(c) != (c->inspector ? NX_QALPN_H3 : NX_QALPN_PEER)) {
        set_why(c, "peer does not speak ALPN " NX_ALPN);
        return -1;
    }
    return 0;
}

void nx_qtls_peer_name(struct nx_qconn *c, char *out, size_t outlen)
{
    unsigned n = 0;
    const gnutls_datum_t *certs = c->tls ? gnutls_certificate_get_peers(c->tls, &n) : NULL;
    gnutls_x509_crt_t crt;
    gnutls_datum_t dn = {NULL, 0};
    out[0] = '\0';
    if (!certs || n == 0 || gnutls_x509_crt_init(&crt) < 0)
        return;
    if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0 &&
        gnutls_x509_crt_get_dn3(crt, &dn, 0) == 0) {
        /* The DN is the peer's to choose: keep it printable for the log. */
        size_t j = 0;
        for (unsigned i = 0; i < dn.size && j + 1 < outlen; i++)
            out[j++] = dn.data[i] >= 0x20 && dn.data[i] < 0x7f ? (char)dn.data[i] : '?';
        out[j] = '\0';
        gnutls_free(dn.data);
    }
    gnutls_x509_crt_deinit(crt);
}

void nx_qtls_cipher(struct nx_qconn *c, char *out, size_t outlen)
{
    const char *name = c->tls ? gnutls_ciphersuite_get(c->tls) : NULL;
    snprintf(out, outlen, "%s", name ? name : "");
}

const char *nx_qtls_alert_text(uint8_t alert)
{
    const char *s = gnutls_alert_get_name((gnutls_alert_description_t)alert);
    return s ? s : "unknown alert";
}
