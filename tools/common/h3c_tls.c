/*
 * h3c_tls.c - the HTTP/3 client's TLS: a GnuTLS client session for QUIC (TLS 1.3, ALPN
 * "h3", our certificate for the daemon's mutual authentication, the daemon's checked
 * against opts.ca), and what a failed handshake or the daemon's CONNECTION_CLOSE means
 * for nexarctl: a refused certificate either way is PERMISSION, a refused ALPN is
 * UNSUPPORTED (inspect = off), H3_EXCESSIVE_LOAD is UNAVAILABLE (busy).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "cert_check.h"
#include "h3c_int.h"
#include "inspect.h"
#include "tls_policy.h"
#include "nexar.h"

/* ---- TLS ---- */

static struct h3c *session_h3c(gnutls_session_t s)
{
    ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
    return ref ? ref->user_data : NULL;
}

static int verify_cb(gnutls_session_t s)
{
    struct h3c *c = session_h3c(s);
    unsigned status = 0;
    int rv = gnutls_certificate_verify_peers2(s, &status);
    if (rv == 0 && status == 0) {
        /* Signed by our CA, but is it a daemon?  An operator's or a client-only
         * certificate answering on the port is not. */
        char why[128];
        time_t end;
        if (nx_cert_check_peer(s, c->cred, 1, NX_CERT_NODE, &end, why, sizeof(why)) == 0)
            return 0;
        c->verify_failed = 1;
        h3c_fail(c, NEXAR_ERR_PERMISSION, "the certificate of %s is not accepted: %s",
                 c->o->addr, why);
        return -1;
    }
    c->verify_failed = 1;
    if (rv < 0)
        h3c_fail(c, NEXAR_ERR_PERMISSION, "cannot verify the certificate of %s: %s",
                 c->o->addr, gnutls_strerror(rv));
    else
        h3c_fail(c, NEXAR_ERR_PERMISSION, "the certificate of %s is not accepted: %s "
                 "(--tls-ca %s)", c->o->addr,
                 status & GNUTLS_CERT_SIGNER_NOT_FOUND ? "not signed by our CA"
                 : status & GNUTLS_CERT_EXPIRED       ? "expired"
                 : status & GNUTLS_CERT_NOT_ACTIVATED ? "not yet valid"
                                                      : "it does not verify",
                 c->o->ca);
    return -1;
}

static int load_file_err(const char *what, const char *path, int rv, char *err, size_t errlen)
{
    /* GnuTLS folds every open error into FILE_ERROR ("Error while reading file."): ask
     * the file system which, and say it as errno does ("No such file or directory"). */
    int e = access(path, R_OK) != 0 ? errno : 0;
    int perm = e == EACCES || e == EPERM;
    snprintf(err, errlen, "%s %s: %s", what, path,
             perm ? "permission denied" : e ? strerror(e)
                                        : rv == 0 ? "no certificate in the file"
                                                  : gnutls_strerror(rv));
    return perm ? -NEXAR_ERR_PERMISSION : -NEXAR_ERR_INVALID;
}

int h3c_tls_setup(struct h3c *c, char *err, size_t errlen)
{
    static const gnutls_datum_t alpn = {(unsigned char *)NX_INSPECT_ALPN,
                                        sizeof(NX_INSPECT_ALPN) - 1};
    const struct nxt_h3c_opts *o = c->o;
    const char *errpos;
    gnutls_priority_t prio;
    int rv;
    if (gnutls_certificate_allocate_credentials(&c->cred) < 0)
        goto nomem;
    rv = gnutls_certificate_set_x509_trust_file(c->cred, o->ca, GNUTLS_X509_FMT_PEM);
    if (rv <= 0)
        return load_file_err("--tls-ca", o->ca, rv, err, errlen);
    if (o->cert && *o->cert) {
        rv = gnutls_certificate_set_x509_key_file(c->cred, o->cert, o->key ? o->key : "",
                                                  GNUTLS_X509_FMT_PEM);
        if (rv < 0) {
            int r1 = load_file_err("--tls-cert", o->cert, rv, err, errlen);
            if (r1 == -NEXAR_ERR_INVALID && o->key && access(o->key, R_OK) != 0)
                return load_file_err("--tls-key", o->key, rv, err, errlen);
            return r1;
        }
    }
    gnutls_certificate_set_verify_function(c->cred, verify_cb);
    if (gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_TICKETS | GNUTLS_NO_END_OF_EARLY_DATA))
        goto nomem;
    if (ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
        gnutls_priority_init(&prio, NX_TLS_PRIORITY, &errpos) < 0)
        goto internal;
    rv = gnutls_priority_set(c->tls, prio);
    gnutls_priority_deinit(prio);
    if (rv < 0 || gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred) < 0 ||
        gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) < 0)
        goto internal;
    gnutls_session_set_ptr(c->tls, &c->ref);
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
    return -NEXAR_ERR_NOMEM;
internal:
    snprintf(err, errlen, "cannot set up a TLS session");
    return -NEXAR_ERR_INTERNAL;
}

/* ---- what the daemon's CONNECTION_CLOSE says ---- */

static void sanitize(char *out, size_t outlen, const uint8_t *in, size_t inlen)
{
    size_t j = 0;
    for (size_t i = 0; i < inlen && j + 1 < outlen; i++)
        out[j++] = in[i] >= 0x20 && in[i] < 0x7f ? (char)in[i] : '?';
    out[j] = '\0';
}

static void daemon_closed(struct h3c *c)
{
    ngtcp2_connection_close_error ce;
    char r[200];
    ngtcp2_conn_get_connection_close_error(c->conn, &ce);
    sanitize(r, sizeof(r), ce.reason, ce.reasonlen);
    const char *sep = r[0] ? ": " : "";
    if (ce.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT &&
        (ce.error_code & ~0xffull) == NGTCP2_CRYPTO_ERROR) {
        uint8_t alert = (uint8_t)ce.error_code;
        const char *name = gnutls_alert_get_name((gnutls_alert_description_t)alert);
        if (alert == GNUTLS_A_NO_APPLICATION_PROTOCOL)
            h3c_fail(c, NEXAR_ERR_UNSUPPORTED, "%s does not serve remote inspection (it "
                     "refused ALPN h3: inspect = off?)", c->o->addr);
        else
            h3c_fail(c, NEXAR_ERR_PERMISSION, "%s refused the TLS handshake (alert \"%s\")%s%s",
                     c->o->addr, name ? name : "?", sep, r);
    } else if (ce.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION &&
               ce.error_code == NGHTTP3_H3_EXCESSIVE_LOAD) {
        h3c_fail(c, NEXAR_ERR_UNAVAILABLE, "%s is busy%s%s", c->o->addr, sep, r);
    } else {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "%s closed the connection (%s error 0x%llx)%s%s",
                 c->o->addr,
                 ce.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION ? "HTTP/3"
                                                                               : "QUIC",
                 (unsigned long long)ce.error_code, sep, r);
    }
}

void h3c_read_failed(struct h3c *c, int rv)
{
    if (rv == NGTCP2_ERR_DRAINING) {
        daemon_closed(c);
    } else if (rv == NGTCP2_ERR_CRYPTO) {
        uint8_t alert = ngtcp2_conn_get_tls_alert(c->conn);
        const char *name = gnutls_alert_get_name((gnutls_alert_description_t)alert);
        h3c_fail(c, NEXAR_ERR_PERMISSION, "TLS handshake with %s failed (alert \"%s\")",
                 c->o->addr, name ? name : "?");
    } else {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "QUIC: %s", ngtcp2_strerror(rv));
    }
}

