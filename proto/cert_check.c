/* cert_check.c - see cert_check.h. */
#include "cert_check.h"

#include <stdio.h>
#include <string.h>

const char *nx_cert_roles_text(unsigned roles)
{
    switch (roles & (NX_CERT_NODE | NX_CERT_OPERATOR)) {
    case NX_CERT_NODE:
        return "node";
    case NX_CERT_OPERATOR:
        return "operator";
    case NX_CERT_NODE | NX_CERT_OPERATOR:
        return "node or operator";
    default:
        return "none";
    }
}

unsigned nx_cert_roles(gnutls_x509_crt_t crt)
{
    unsigned roles = 0;
    for (unsigned i = 0; i < 16; i++) {
        char ou[128];
        size_t n = sizeof(ou);
        if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, i, 0,
                                          ou, &n) < 0)
            break;
        if (!strcmp(ou, NX_CERT_OU_NODE))
            roles |= NX_CERT_NODE;
        else if (!strcmp(ou, NX_CERT_OU_OPERATOR))
            roles |= NX_CERT_OPERATOR;
    }
    return roles;
}

/* Whether the extendedKeyUsage lists oid; -1 when there is no such extension. */
static int has_purpose(gnutls_x509_crt_t crt, const char *oid)
{
    int seen = 0;
    for (unsigned i = 0;; i++) {
        char buf[128];
        size_t n = sizeof(buf);
        int rv = gnutls_x509_crt_get_key_purpose_oid(crt, i, buf, &n, NULL);
        if (rv == GNUTLS_E_SHORT_MEMORY_BUFFER)
            continue; /* an OID longer than any we look for */
        if (rv < 0)
            return seen ? 0 : -1;
        seen = 1;
        if (!strcmp(buf, oid))
            return 1;
    }
}

static int side_ok(gnutls_x509_crt_t crt, const char *oid, const char *side, char *why,
                   size_t whylen)
{
    int rv = has_purpose(crt, oid);
    if (rv < 0) {
        snprintf(why, whylen, "certificate has no extended key usage (needs TLS %s)", side);
        return -1;
    }
    if (rv == 0) {
        snprintf(why, whylen, "certificate is not for a TLS %s (its extended key usage lacks "
                 "%sAuth)", side, side);
        return -1;
    }
    return 0;
}

int nx_cert_check(gnutls_x509_crt_t crt, int server, unsigned want, char *why, size_t whylen)
{
    unsigned ku = 0, crit = 0;
    if (gnutls_x509_crt_get_ca_status(crt, &crit) > 0) {
        snprintf(why, whylen, "certificate is a CA certificate (CA:TRUE); a CA signs, it does "
                 "not connect");
        return -1;
    }
    if (gnutls_x509_crt_get_key_usage(crt, &ku, &crit) < 0 ||
        !(ku & GNUTLS_KEY_DIGITAL_SIGNATURE)) {
        snprintf(why, whylen, "certificate key usage lacks digitalSignature");
        return -1;
    }
    if (server != 0 && side_ok(crt, GNUTLS_KP_TLS_WWW_SERVER, "server", why, whylen) < 0)
        return -1;
    if (server <= 0 && side_ok(crt, GNUTLS_KP_TLS_WWW_CLIENT, "client", why, whylen) < 0)
        return -1;
    unsigned roles = nx_cert_roles(crt);
    if (!(roles & want)) {
        if (roles)
            snprintf(why, whylen, "certificate is of role %s; this connection needs a %s "
                     "certificate", nx_cert_roles_text(roles), nx_cert_roles_text(want));
        else
            snprintf(why, whylen, "certificate has no nexar role (subject OU \"%s\" or \"%s\"); "
                     "make it with nexarctl certs", NX_CERT_OU_NODE, NX_CERT_OU_OPERATOR);
        return -1;
    }
    return 0;
}

const char *nx_cert_time(time_t t, char *buf, size_t len)
{
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(buf, len, "%lld", (long long)t);
    return buf;
}

int nx_cert_ends_soon(time_t end, time_t now)
{
    return difftime(end, now) < NX_CERT_WARN_S;
}

const char *nx_cert_left(time_t end, time_t now, char *buf, size_t len)
{
    double s = difftime(end, now), a = s < 0 ? -s : s;
    const char *unit = a >= 86400 ? "days" : "hours";
    double v = a >= 86400 ? a / 86400 : a / 3600;
    snprintf(buf, len, s < 0 ? "%.1f %s ago" : "in %.1f %s", v, unit);
    return buf;
}

static void earliest(time_t *end, time_t t)
{
    if (t != (time_t)-1 && (*end == (time_t)-1 || t < *end))
        *end = t;
}

/* The anchor ends the proof too: a CA that expires before its node certificates. */
static void anchor_end(gnutls_certificate_credentials_t cred, gnutls_x509_crt_t last,
                       time_t *end)
{
    gnutls_x509_trust_list_t tl;
    gnutls_x509_crt_t issuer;
    gnutls_certificate_get_trust_list(cred, &tl);
    if (gnutls_x509_trust_list_get_issuer(tl, last, &issuer, GNUTLS_TL_GET_COPY) == 0) {
        earliest(end, gnutls_x509_crt_get_expiration_time(issuer));
        gnutls_x509_crt_deinit(issuer);
    }
}

time_t nx_cert_own_end(gnutls_certificate_credentials_t cred, char *subject, size_t len)
{
    time_t end = (time_t)-1;
    gnutls_x509_crt_t crt, last = NULL;
    gnutls_datum_t der;
    if (len)
        subject[0] = 0;
    for (unsigned i = 0; gnutls_certificate_get_crt_raw(cred, 0, i, &der) >= 0; i++) {
        if (gnutls_x509_crt_init(&crt) < 0)
            break;
        if (gnutls_x509_crt_import(crt, &der, GNUTLS_X509_FMT_DER) < 0) {
            gnutls_x509_crt_deinit(crt);
            break;
        }
        gnutls_datum_t dn = {NULL, 0};
        if (i == 0 && len && gnutls_x509_crt_get_dn3(crt, &dn, 0) >= 0)
            snprintf(subject, len, "%.*s", (int)dn.size, (const char *)dn.data);
        gnutls_free(dn.data);
        earliest(&end, gnutls_x509_crt_get_expiration_time(crt));
        if (last)
            gnutls_x509_crt_deinit(last);
        last = crt;
    }
    if (last) {
        anchor_end(cred, last, &end);
        gnutls_x509_crt_deinit(last);
    }
    return end;
}

int nx_cert_check_peer(gnutls_session_t s, gnutls_certificate_credentials_t cred, int server,
                       unsigned want, time_t *not_after, char *why, size_t whylen)
{
    unsigned n = 0;
    const gnutls_datum_t *der = gnutls_certificate_get_peers(s, &n);
    gnutls_x509_crt_t crt, last = NULL;
    int rv = -1;
    if (!der || n == 0) {
        snprintf(why, whylen, "peer presented no certificate");
        return -1;
    }
    time_t end = (time_t)-1;
    for (unsigned i = 0; i < n; i++) {
        if (gnutls_x509_crt_init(&crt) < 0) {
            snprintf(why, whylen, "out of memory");
            goto out;
        }
        if (gnutls_x509_crt_import(crt, &der[i], GNUTLS_X509_FMT_DER) < 0) {
            snprintf(why, whylen, "peer certificate %u cannot be parsed", i);
            gnutls_x509_crt_deinit(crt);
            goto out;
        }
        if (i == 0 && nx_cert_check(crt, server, want, why, whylen) < 0) {
            gnutls_x509_crt_deinit(crt);
            goto out;
        }
        earliest(&end, gnutls_x509_crt_get_expiration_time(crt));
        if (last)
            gnutls_x509_crt_deinit(last);
        last = crt;
    }
    anchor_end(cred, last, &end);
    *not_after = end;
    rv = 0;
out:
    if (last)
        gnutls_x509_crt_deinit(last);
    return rv;
}
