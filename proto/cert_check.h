/*
 * cert_check.h - what a certificate of the cluster CA may do, for nexard and nexarctl.
 *
 * The chain to the cluster CA proves that the CA signed a certificate, not what for.  A
 * connection also needs the leaf to be fit for its side and its role:
 *
 *   - an end entity (no CA:TRUE): the CA signs, it never connects;
 *   - keyUsage present, with digitalSignature (TLS 1.3 signs the handshake with it);
 *   - extendedKeyUsage present, with serverAuth for the side that was dialled and
 *     clientAuth for the side that dials;
 *   - a role, in the subject's organizational unit, which `nexarctl certs` writes:
 *       "nexar node"      a daemon: peer of the others, and may inspect;
 *       "nexar operator"  a person or a monitor: may inspect (HTTP/3), never a peer.
 *
 * The role lives in the subject rather than in a private EKU because certtool (and the
 * libtasn1 under GnuTLS) cannot write an OID arc above 2^63, which rules out a 2.25 UUID
 * arc, and nexar has no enterprise number of its own.  The subject is signed by the CA
 * like the rest, so it is as trustworthy as the chain.
 */
#ifndef NX_CERT_CHECK_H
#define NX_CERT_CHECK_H

#include <stddef.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#define NX_CERT_OU_NODE "nexar node"
#define NX_CERT_OU_OPERATOR "nexar operator"

enum {
    NX_CERT_NODE = 1u,
    NX_CERT_OPERATOR = 2u,
};

/* "node", "operator", "node or operator". */
const char *nx_cert_roles_text(unsigned roles);

/* The roles crt carries (a bitmask of NX_CERT_*; 0: none). */
unsigned nx_cert_roles(gnutls_x509_crt_t crt);

/* Checks crt for a connection where it is the TLS server (server != 0), the TLS client, or
 * both (server < 0), with one of the roles in want.  Returns 0, or -1 with a sentence in why
 * (without a "TLS:" prefix) saying what the certificate lacks. */
int nx_cert_check(gnutls_x509_crt_t crt, int server, unsigned want, char *why, size_t whylen);

/* For a session whose peer certificate chain has verified: checks the peer's leaf as
 * nx_cert_check() does, and gives the earliest expiry of the certificates it sent and of
 * the trusted issuer of the last one (cred's trust list), so that the connection can end
 * when its proof does. */
int nx_cert_check_peer(gnutls_session_t s, gnutls_certificate_credentials_t cred, int server,
                       unsigned want, time_t *not_after, char *why, size_t whylen);

/* Within this much of its end, a proof is announced: nexard warns in its log, nexarctl
 * status and peers say so. */
#define NX_CERT_WARN_S (14 * 86400)

/* Whether a proof that ends at end is within NX_CERT_WARN_S of it (or past it) at now.
 * end may be any value a peer or a remote daemon sent: no overflow. */
int nx_cert_ends_soon(time_t end, time_t now);

/* How far end is from now: "in 3.0 days", "in 5.2 hours", "5.2 hours ago"; returns buf. */
const char *nx_cert_left(time_t end, time_t now, char *buf, size_t len);

/* t as "2027-01-01 00:00:00 UTC", the form every certificate date takes in nexar's texts;
 * returns buf. */
const char *nx_cert_time(time_t t, char *buf, size_t len);

/* The same for our own chain in cred (its first key): the earliest expiry of the
 * certificates we send and of the trusted issuer of the last one, or (time_t)-1 when cred
 * has none; subject gets the leaf's distinguished name ("CN=node1,OU=nexar node"). */
time_t nx_cert_own_end(gnutls_certificate_credentials_t cred, char *subject, size_t len);

#endif
