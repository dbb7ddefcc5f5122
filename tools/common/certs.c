/*
 * certs.c - the cluster CA and node certificates, with the GnuTLS x509 API.
 */
#include "certs.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "cert_check.h"
#include "certs_int.h"

#define DEFAULT_CA_NAME "nexar cluster CA"
#define ORG_NAME "nexar"
/* Nodes' clocks disagree by a little; a certificate made a moment ago on one
 * node must already be valid on the others. */
#define BACKDATE_S 300
#define MAX_CN 64 /* ub-common-name, RFC 5280 */

/* One GnuTLS call: on error a sentence in err and a jump to the label. */
#define GT(call, what, label)                                                               \
    do {                                                                                    \
        int gt_rv_ = (call);                                                                \
        if (gt_rv_ < 0) {                                                                   \
            snprintf(err, errlen, "%s: %s", (what), gnutls_strerror(gt_rv_));              \
            rv = -EIO;                                                                      \
            goto label;                                                                     \
        }                                                                                   \
    } while (0)

bool nxt_certs_valid_dns(const char *s)
{
    size_t total = strlen(s);
    if (total == 0 || total > 253)
        return false;
    if (!strncmp(s, "*.", 2))
        s += 2;
    size_t label = 0;
    for (const char *p = s;; p++) {
        if (*p == '.' || *p == '\0') {
            /* Empty labels, and hyphens at a label's edge, are not host names. */
            if (label == 0 || label > 63 || p[-1] == '-' || p[-(long)label] == '-')
                return false;
            if (*p == '\0')
                return true;
            label = 0;
            continue;
        }
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
        label++;
    }
}

static bool valid_cn(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_CN)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* A node's name: what names a host in logs, nexarctl peers and file names, and its first
 * subjectAltName when it is a host name.  Letters, digits, '.', '-' and '_', starting with
 * a letter or digit: "bad name!" once passed as printable. */
static bool valid_node_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_CN || !isalnum((unsigned char)s[0]))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '-' && *s != '_')
            return false;
    return true;
}

static int check_days(unsigned days, char *err, size_t errlen)
{
    if (days < 1 || days > NXT_CERTS_MAX_DAYS) {
        snprintf(err, errlen, "--days: %u is outside 1..%u", days, NXT_CERTS_MAX_DAYS);
        return -EINVAL;
    }
    return 0;
}

static int join(char *out, size_t outlen, const char *dir, const char *file, char *err,
                size_t errlen)
{
    if (snprintf(out, outlen, "%s/%s", dir, file) >= (int)outlen) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -EINVAL;
    }
    return 0;
}

/* ---- keys and certificates in memory ---------------------------------------------- */

static int gen_key(gnutls_x509_privkey_t *key, char *err, size_t errlen)
{
    int rv = 0;
    GT(gnutls_x509_privkey_init(key), "key", out);
    GT(gnutls_x509_privkey_generate2(*key, GNUTLS_PK_ECDSA,
                                     GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0, NULL,
                                     0),
       "generating an ECDSA P-256 key", fail_key);
    return 0;
fail_key:
    gnutls_x509_privkey_deinit(*key);
out:
    return rv;
}

/* What every certificate has: version, serial, validity, subject (with the role as its
 * OU, when it has one), public key and its key id. */
static int set_common(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn,
                      const char *ou, time_t not_after, char *err, size_t errlen)
{
    int rv = 0;
    unsigned char serial[16];
    GT(gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial)), "random serial", out);
    /* Positive and without a leading zero byte, as RFC 5280 wants serials. */
    serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x40);
    GT(gnutls_x509_crt_set_version(crt, 3), "certificate version", out);
    GT(gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)), "certificate serial", out);
    GT(gnutls_x509_crt_set_activation_time(crt, time(NULL) - BACKDATE_S), "activation time",
       out);
    GT(gnutls_x509_crt_set_expiration_time(crt, not_after), "expiration time", out);
    GT(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATION_NAME, 0, ORG_NAME,
                                     sizeof(ORG_NAME) - 1),
       "subject O", out);
    if (ou)
        GT(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, 0, ou,
                                         (unsigned)strlen(ou)),
           "subject OU", out);
    GT(gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
                                     (unsigned)strlen(cn)),
       "subject CN", out);
    GT(gnutls_x509_crt_set_key(crt, key), "certificate key", out);
    unsigned char id[64];
    size_t idlen = sizeof(id);
    GT(gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, id, &idlen), "key id", out);
    GT(gnutls_x509_crt_set_subject_key_id(crt, id, idlen), "subject key id", out);
out:
    return rv;
}

static int sign(gnutls_x509_crt_t crt, gnutls_x509_crt_t issuer,
                gnutls_x509_privkey_t issuer_key, char *err, size_t errlen)
{
    int rv = 0;
    gnutls_privkey_t pk;
    GT(gnutls_privkey_init(&pk), "signing key", out);
    GT(gnutls_privkey_import_x509(pk, issuer_key, 0), "signing key", fail_pk);
    GT(gnutls_x509_crt_privkey_sign(crt, issuer, pk, GNUTLS_DIG_SHA256, 0),
       "signing the certificate", fail_pk);
fail_pk:
    gnutls_privkey_deinit(pk);
out:
    return rv;
}

static void fill_result(gnutls_x509_crt_t crt, struct nxt_certs_result *res)
{
    unsigned char fp[32];
    size_t fplen = sizeof(fp);
    char *p = res->fingerprint;
    *p = '\0';
    if (gnutls_x509_crt_get_fingerprint(crt, GNUTLS_DIG_SHA256, fp, &fplen) == 0)
        for (size_t i = 0; i < fplen && i < 32; i++)
            p += sprintf(p, i ? ":%02X" : "%02X", fp[i]);
    res->not_after = (long long)gnutls_x509_crt_get_expiration_time(crt);
}

/* Writes key (0600) then certificate (0644).  Without force, a failure after the
 * key was written removes it again, so nothing half-made is left behind. */
static int write_pair(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cert_path,
                      const char *key_path, bool force, char *err, size_t errlen)
{
    int rv = 0;
    gnutls_datum_t kd = {NULL, 0}, cd = {NULL, 0};
    GT(gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN,
                                         &kd),
       "exporting the key", out);
    GT(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cd), "exporting the certificate",
       out);
    if ((rv = nxt_certs_write(key_path, kd.data, kd.size, 0600, force, err, errlen)) < 0)
        goto out;
    if ((rv = nxt_certs_write(cert_path, cd.data, cd.size, 0644, force, err, errlen)) < 0) {
        if (!force)
            unlink(key_path);
        goto out;
    }
out:
    if (kd.data) {
        gnutls_memset(kd.data, 0, kd.size);
        gnutls_free(kd.data);
    }
    gnutls_free(cd.data);
    return rv;
}

/* ---- the CA ------------------------------------------------------------------------ */

int nxt_certs_make_ca(const struct nxt_ca_req *req, struct nxt_certs_result *res, char *err,
                      size_t errlen)
{
    const char *cn = req->name ? req->name : DEFAULT_CA_NAME;
    int rv;
    if (!valid_cn(cn)) {
        snprintf(err, errlen, "--name: a CA name is 1..%d printable characters", MAX_CN);
        return -EINVAL;
    }
    if ((rv = check_days(req->days, err, errlen)) < 0)
        return rv;
    memset(res, 0, sizeof(*res));
    if ((rv = join(res->cert_path, sizeof(res->cert_path), req->out_dir, NXT_CERTS_CA_CERT, err,
                   errlen)) < 0 ||
        (rv = join(res->key_path, sizeof(res->key_path), req->out_dir, NXT_CERTS_CA_KEY, err,
                   errlen)) < 0)
        return rv;
    /* The CA key signs every node: its directory is nobody else's business. */
    if ((rv = nxt_certs_mkdirs(req->out_dir, 0700, err, errlen)) < 0 ||
        (rv = nxt_certs_check_absent(res->key_path, req->force, err, errlen)) < 0 ||
        (rv = nxt_certs_check_absent(res->cert_path, req->force, err, errlen)) < 0)
        return rv;

    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    if ((rv = gen_key(&key, err, errlen)) < 0)
        return rv;
    GT(gnutls_x509_crt_init(&crt), "certificate", fail_key);
    if ((rv = set_common(crt, key, cn, NULL, time(NULL) + (time_t)req->days * 86400, err,
                         errlen)) < 0)
        goto fail_crt;
    /* Path length 0: the CA signs node certificates only, never another CA. */
    GT(gnutls_x509_crt_set_basic_constraints(crt, 1, 0), "basic constraints", fail_crt);
    GT(gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN |
                                              GNUTLS_KEY_DIGITAL_SIGNATURE),
       "key usage", fail_crt);
    if ((rv = sign(crt, crt, key, err, errlen)) < 0 ||
        (rv = write_pair(crt, key, res->cert_path, res->key_path, req->force, err, errlen)) < 0)
        goto fail_crt;
    fill_result(crt, res);
fail_crt:
    gnutls_x509_crt_deinit(crt);
fail_key:
    gnutls_x509_privkey_deinit(key);
    return rv;
}

/* ---- node certificates ------------------------------------------------------------- */

static int load_file(const char *path, gnutls_datum_t *d, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return nxt_certs_errno(e);
    }
    int rv = gnutls_load_file(path, d);
    if (rv < 0) {
        snprintf(err, errlen, "%s: cannot read it (%s)", path, gnutls_strerror(rv));
        return -EACCES;
    }
    return 0;
}

/* Loads the CA and checks that it can sign: a CA certificate, not expired, and
 * the key in ca-key.pem is the one in ca.pem. */
static int load_ca(const char *dir, gnutls_x509_crt_t *crt, gnutls_x509_privkey_t *key,
                   char *err, size_t errlen)
{
    char cpath[PATH_MAX], kpath[PATH_MAX];
    int rv;
    if ((rv = join(cpath, sizeof(cpath), dir, NXT_CERTS_CA_CERT, err, errlen)) < 0 ||
        (rv = join(kpath, sizeof(kpath), dir, NXT_CERTS_CA_KEY, err, errlen)) < 0)
        return rv;
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--ca %s: no such directory (create a CA with 'nexarctl certs "
                 "ca --out DIR')", dir);
        return -ENOENT;
    }
    gnutls_datum_t cd = {NULL, 0}, kd = {NULL, 0};
    if ((rv = load_file(cpath, &cd, err, errlen)) < 0)
        goto out;
    if ((rv = load_file(kpath, &kd, err, errlen)) < 0)
        goto out;
    GT(gnutls_x509_crt_init(crt), "certificate", out);
    GT(gnutls_x509_privkey_init(key), "key", fail_crt);
    if ((rv = gnutls_x509_crt_import(*crt, &cd, GNUTLS_X509_FMT_PEM)) < 0) {
        snprintf(err, errlen, "%s: not a PEM certificate (%s)", cpath, gnutls_strerror(rv));
        rv = -EINVAL;
        goto fail_key;
    }
    if ((rv = gnutls_x509_privkey_import2(*key, &kd, GNUTLS_X509_FMT_PEM, NULL,
                                          GNUTLS_PKCS_PLAIN)) < 0) {
        snprintf(err, errlen, "%s: not an unencrypted PEM private key (%s)", kpath,
                 gnutls_strerror(rv));
        rv = -EINVAL;
        goto fail_key;
    }
    unsigned crit = 0;
    if (gnutls_x509_crt_get_ca_status(*crt, &crit) <= 0) {
        snprintf(err, errlen, "%s is not a CA certificate", cpath);
        rv = -EINVAL;
        goto fail_key;
    }
    if (gnutls_x509_crt_get_expiration_time(*crt) <= time(NULL)) {
        snprintf(err, errlen, "%s has expired; create a new CA", cpath);
        rv = -EINVAL;
        goto fail_key;
    }
    unsigned char id1[64], id2[64];
    size_t n1 = sizeof(id1), n2 = sizeof(id2);
    GT(gnutls_x509_crt_get_key_id(*crt, GNUTLS_KEYID_USE_SHA256, id1, &n1), "CA key id",
       fail_key);
    GT(gnutls_x509_privkey_get_key_id(*key, GNUTLS_KEYID_USE_SHA256, id2, &n2), "CA key id",
       fail_key);
    if (n1 != n2 || memcmp(id1, id2, n1)) {
        snprintf(err, errlen, "%s is not the key of %s", kpath, cpath);
        rv = -EINVAL;
        goto fail_key;
    }
    rv = 0;
    goto out;
fail_key:
    gnutls_x509_privkey_deinit(*key);
fail_crt:
    gnutls_x509_crt_deinit(*crt);
out:
    if (kd.data) {
        gnutls_memset(kd.data, 0, kd.size);
        gnutls_free(kd.data);
    }
    gnutls_free(cd.data);
    return rv;
}

static int check_sans(const struct nxt_node_req *req, char *err, size_t errlen)
{
    for (size_t i = 0; i < req->ndns; i++)
        if (!nxt_certs_valid_dns(req->dns[i])) {
            snprintf(err, errlen, "--dns %s: not a valid DNS name", req->dns[i]);
            return -EINVAL;
        }
    unsigned char a[16];
    for (size_t i = 0; i < req->nips; i++)
        if (inet_pton(AF_INET, req->ips[i], a) != 1 && inet_pton(AF_INET6, req->ips[i], a) != 1) {
            snprintf(err, errlen, "--ip %s: not an IPv4 or IPv6 address", req->ips[i]);
            return -EINVAL;
        }
    return 0;
}

/* The node's own name first (when it is a host name and not listed again), then
 * --dns, then --ip. */
static int add_sans(gnutls_x509_crt_t crt, const struct nxt_node_req *req, char *err,
                    size_t errlen)
{
    int rv = 0;
    bool name_listed = false;
    for (size_t i = 0; i < req->ndns; i++)
        name_listed |= !strcasecmp(req->dns[i], req->name);
    if (!name_listed && nxt_certs_valid_dns(req->name))
        GT(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, req->name,
                                                (unsigned)strlen(req->name), GNUTLS_FSAN_APPEND),
           "subjectAltName", out);
    for (size_t i = 0; i < req->ndns; i++)
        GT(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, req->dns[i],
                                                (unsigned)strlen(req->dns[i]),
                                                GNUTLS_FSAN_APPEND),
           "subjectAltName", out);
    for (size_t i = 0; i < req->nips; i++) {
        unsigned char a[16];
        unsigned len = 4;
        if (inet_pton(AF_INET, req->ips[i], a) != 1) {
            inet_pton(AF_INET6, req->ips[i], a);
            len = 16;
        }
        GT(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, a, len,
                                                GNUTLS_FSAN_APPEND),
           "subjectAltName", out);
    }
out:
    return rv;
}

/* Copies the CA certificate next to the node's, so that the node directory is
 * all a daemon needs; skipped when it is the CA directory itself. */
static int copy_ca_cert(const struct nxt_node_req *req, gnutls_x509_crt_t ca, char *err,
                        size_t errlen)
{
    char path[PATH_MAX], src[PATH_MAX];
    int rv;
    if ((rv = join(path, sizeof(path), req->out_dir, NXT_CERTS_CA_CERT, err, errlen)) < 0 ||
        (rv = join(src, sizeof(src), req->ca_dir, NXT_CERTS_CA_CERT, err, errlen)) < 0)
        return rv;
    struct stat a, b;
    if (stat(path, &a) == 0 && stat(src, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return 0;
    gnutls_datum_t d = {NULL, 0};
    GT(gnutls_x509_crt_export2(ca, GNUTLS_X509_FMT_PEM, &d), "exporting the CA", out);
    /* A copy of the same CA is fine to replace; a different one needs --force. */
    gnutls_datum_t old = {NULL, 0};
    bool same = gnutls_load_file(path, &old) == 0 && old.size == d.size &&
                !memcmp(old.data, d.data, d.size);
    gnutls_free(old.data);
    if (!same && (rv = nxt_certs_check_absent(path, req->force, err, errlen)) == 0)
        rv = nxt_certs_write(path, d.data, d.size, 0644, req->force, err, errlen);
    gnutls_free(d.data);
out:
    return rv;
}

int nxt_certs_make_node(const struct nxt_node_req *req, struct nxt_certs_result *res,
                        char *err, size_t errlen)
{
    int rv;
    if (!req->name || !valid_node_name(req->name)) {
        snprintf(err, errlen, "--name \"%s\": a node name is 1..%d letters, digits, '.', "
                 "'-' and '_', starting with a letter or digit", req->name ? req->name : "",
                 MAX_CN);
        return -EINVAL;
    }
    if ((rv = check_days(req->days, err, errlen)) < 0 ||
        (rv = check_sans(req, err, errlen)) < 0)
        return rv;
    /* An operator is no host: a name it could answer for would only invite using its
     * certificate as a server's. */
    if (req->operator_role && (req->ndns || req->nips)) {
        snprintf(err, errlen, "--ip and --dns belong to node certificates; an operator's "
                 "names no host");
        return -EINVAL;
    }
    const bool op = req->operator_role;
    memset(res, 0, sizeof(*res));
    if ((rv = join(res->cert_path, sizeof(res->cert_path), req->out_dir,
                   op ? NXT_CERTS_OPERATOR_CERT : NXT_CERTS_NODE_CERT, err, errlen)) < 0 ||
        (rv = join(res->key_path, sizeof(res->key_path), req->out_dir,
                   op ? NXT_CERTS_OPERATOR_KEY : NXT_CERTS_NODE_KEY, err, errlen)) < 0)
        return rv;

    gnutls_x509_crt_t ca, crt;
    gnutls_x509_privkey_t ca_key, key;
    if ((rv = load_ca(req->ca_dir, &ca, &ca_key, err, errlen)) < 0)
        return rv;
    if ((rv = nxt_certs_mkdirs(req->out_dir, 0755, err, errlen)) < 0 ||
        (rv = nxt_certs_check_absent(res->key_path, req->force, err, errlen)) < 0 ||
        (rv = nxt_certs_check_absent(res->cert_path, req->force, err, errlen)) < 0)
        goto fail_ca;

    time_t not_after = time(NULL) + (time_t)req->days * 86400;
    time_t ca_end = gnutls_x509_crt_get_expiration_time(ca);
    /* A certificate outliving its CA would fail verification then anyway. */
    if (not_after > ca_end) {
        not_after = ca_end;
        res->clamped = true;
    }
    if ((rv = gen_key(&key, err, errlen)) < 0)
        goto fail_ca;
    GT(gnutls_x509_crt_init(&crt), "certificate", fail_key);
    if ((rv = set_common(crt, key, req->name, op ? NX_CERT_OU_OPERATOR : NX_CERT_OU_NODE,
                         not_after, err, errlen)) < 0 ||
        (!op && (rv = add_sans(crt, req, err, errlen)) < 0))
        goto fail_crt;
    GT(gnutls_x509_crt_set_basic_constraints(crt, 0, -1), "basic constraints", fail_crt);
    /* digitalSignature is all TLS 1.3 asks of an ECDSA key (no key encipherment). */
    GT(gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE), "key usage", fail_crt);
    if (!op)
        GT(gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0),
           "key purpose", fail_crt);
    GT(gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_CLIENT, 0), "key purpose",
       fail_crt);
    unsigned char id[64];
    size_t idlen = sizeof(id);
    /* A CA made elsewhere may lack a subject key id; then name its key the way
     * set_common() would have. */
    if (gnutls_x509_crt_get_subject_key_id(ca, id, &idlen, NULL) < 0) {
        idlen = sizeof(id);
        GT(gnutls_x509_crt_get_key_id(ca, GNUTLS_KEYID_USE_SHA1, id, &idlen), "CA key id",
           fail_crt);
    }
    GT(gnutls_x509_crt_set_authority_key_id(crt, id, idlen), "authority key id", fail_crt);
    /* The CA copy first: when it conflicts, nothing of the node is written. */
    if ((rv = sign(crt, ca, ca_key, err, errlen)) < 0 ||
        (rv = copy_ca_cert(req, ca, err, errlen)) < 0 ||
        (rv = write_pair(crt, key, res->cert_path, res->key_path, req->force, err, errlen)) < 0)
        goto fail_crt;
    fill_result(crt, res);
fail_crt:
    gnutls_x509_crt_deinit(crt);
fail_key:
    gnutls_x509_privkey_deinit(key);
fail_ca:
    gnutls_x509_privkey_deinit(ca_key);
    gnutls_x509_crt_deinit(ca);
    return rv;
}
