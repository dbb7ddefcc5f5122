/*
 * certs.h - the cluster CA and node certificates for the daemons' mutual TLS.
 *
 * Every nexard proves who it is to the others with a node certificate signed
 * by one cluster CA, and trusts exactly the certificates that CA signed
 * (config keys tls_ca, tls_cert, tls_key).  These functions create both with
 * GnuTLS, in the shape the QUIC handshake (TLS 1.3, ngtcp2 + GnuTLS) accepts:
 *
 *   - ECDSA P-256 keys and SHA-256 signatures: every TLS 1.3 stack offers
 *     ecdsa_secp256r1_sha256, and a key is generated in a millisecond;
 *   - the CA: basicConstraints CA:TRUE with path length 0 (it signs node
 *     certificates, never another CA), keyUsage keyCertSign + cRLSign;
 *   - a node: CA:FALSE, keyUsage digitalSignature, extendedKeyUsage
 *     serverAuth + clientAuth (every daemon is both ends of some connection),
 *     subject OU "nexar node" (its role), subjectAltName DNS and IP entries, subject
 *     and authority key ids;
 *   - an operator: the same with OU "nexar operator" and clientAuth alone;
 *   - valid from five minutes ago (clocks of the nodes disagree a little);
 *   - private keys as unencrypted PKCS#8 PEM, files created 0600, certificates
 *     0644; a file is written under a temporary name and renamed into place.
 *
 * Files (the names are fixed, so that a directory is the unit one copies):
 *   CA directory   ca.pem  ca-key.pem
 *   node directory node.pem  node-key.pem  ca.pem (a copy of the CA certificate)
 *
 * Return values: 0, or a negative errno-style code with a sentence in err
 * (which starts with the file or the option at fault):
 *   -EEXIST  a file to write exists and force is false (nothing was written);
 *   -ENOENT  the CA directory lacks ca.pem or ca-key.pem;
 *   -EACCES  a directory or file cannot be created or read (permissions);
 *   -EINVAL  a bad name, address, number of days, or a CA that is not one
 *            (not a CA certificate, key not matching, expired);
 *   -EIO     GnuTLS or the file system failed otherwise.
 */
#ifndef NXT_CERTS_H
#define NXT_CERTS_H

#include <stdbool.h>
#include <stddef.h>

#define NXT_CERTS_CA_CERT "ca.pem"
#define NXT_CERTS_CA_KEY "ca-key.pem"
#define NXT_CERTS_NODE_CERT "node.pem"
#define NXT_CERTS_NODE_KEY "node-key.pem"
#define NXT_CERTS_OPERATOR_CERT "operator.pem"
#define NXT_CERTS_OPERATOR_KEY "operator-key.pem"

#define NXT_CERTS_CA_DAYS 3650  /* default validity of a CA */
#define NXT_CERTS_NODE_DAYS 365 /* default validity of a node certificate */
#define NXT_CERTS_MAX_DAYS 36500

struct nxt_ca_req {
    const char *out_dir; /* created (0700) when missing */
    const char *name;    /* subject CN; NULL: "nexar cluster CA" */
    unsigned days;       /* 1..NXT_CERTS_MAX_DAYS */
    bool force;          /* replace existing files */
};

struct nxt_node_req {
    const char *ca_dir;  /* holds ca.pem and ca-key.pem */
    const char *out_dir; /* created (0755) when missing */
    const char *name;    /* subject CN; also a DNS SAN when it is a valid host name */
    const char *const *dns; /* further DNS SANs */
    size_t ndns;
    const char *const *ips; /* IP SANs, IPv4 or IPv6 text */
    size_t nips;
    unsigned days; /* 1..NXT_CERTS_MAX_DAYS; clamped to the CA's own expiry */
    bool force;
    /* An operator's certificate (cert_check.h): OU "nexar operator", TLS client only, no
     * subjectAltName, written as operator.pem / operator-key.pem.  It may inspect a
     * daemon and never be its peer. */
    bool operator_role;
};

/* What was written, for the caller to report. */
struct nxt_certs_result {
    char cert_path[4096], key_path[4096];
    char fingerprint[96];  /* SHA-256 of the certificate, "AB:CD:..." */
    long long not_after;   /* expiry, seconds since the epoch */
    bool clamped;          /* node: days was cut to the CA's expiry */
};

/* Creates a CA key and self-signed certificate in req->out_dir. */
int nxt_certs_make_ca(const struct nxt_ca_req *req, struct nxt_certs_result *res, char *err,
                      size_t errlen);

/* Creates a node's (or an operator's) key and a certificate signed by the CA in
 * req->ca_dir. */
int nxt_certs_make_node(const struct nxt_node_req *req, struct nxt_certs_result *res,
                        char *err, size_t errlen);

/* Whether s is a DNS name a certificate may carry: labels of [A-Za-z0-9-] (a
 * leading "*." allowed), 1..63 bytes each, 253 bytes in all. */
bool nxt_certs_valid_dns(const char *s);

#endif /* NXT_CERTS_H */
