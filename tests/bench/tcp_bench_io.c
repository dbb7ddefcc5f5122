/*
 * tcp_bench_io.c - see tcp_bench_io.h.
 */
#include "tcp_bench_io.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

/* TLS 1.3 only, AES-128-GCM only: the suite the QUIC transport prefers, so that the
 * comparison is cipher for cipher. */
#define TB_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM"
#define TB_SEED 0x6e65786172746370ull /* "nexartcp" */
#define TB_READ_AHEAD (256u << 10)

struct chan {
    int fd;
    gnutls_session_t s; /* NULL: plain TCP */
    gnutls_certificate_credentials_t cred;
    bool up; /* handshake done: a close_notify is worth sending */
    /* Read-ahead for TLS: GnuTLS asks for a record header, then its body, two
     * read(2)s per 16 KiB record without it. */
    uint8_t *rbuf;
    size_t rpos, rlen;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* ---- the pattern: word i of the stream is splitmix64 of i ----------------------- */

static inline uint64_t word(uint64_t i)
{
    uint64_t z = TB_SEED + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* off and len are multiples of 8 except for the stream's last chunk. */
static void fill(uint64_t off, uint8_t *buf, size_t len)
{
    uint64_t w0 = off / 8;
    size_t n = len / 8;
    for (size_t i = 0; i < n; i++) {
        uint64_t w = word(w0 + i);
        memcpy(buf + 8 * i, &w, 8);
    }
    if (len % 8) {
        uint64_t w = word(w0 + n);
        memcpy(buf + 8 * n, &w, len % 8);
    }
}

/* Offset in the stream of the first byte that differs, or -1. */
static int64_t check(uint64_t off, const uint8_t *buf, size_t len)
{
    uint64_t w0 = off / 8;
    size_t n = len / 8;
    for (size_t i = 0; i < n; i++) {
        uint64_t w = word(w0 + i), got;
        memcpy(&got, buf + 8 * i, 8);
        if (got != w)
            for (size_t b = 0; b < 8; b++)
                if (buf[8 * i + b] != ((const uint8_t *)&w)[b])
                    return (int64_t)(off + 8 * i + b);
    }
    if (len % 8) {
        uint64_t w = word(w0 + n);
        for (size_t b = 0; b < len % 8; b++)
            if (buf[8 * n + b] != ((const uint8_t *)&w)[b])
                return (int64_t)(off + 8 * n + b);
    }
    return -1;
}

/* ---- the channel: plain or TLS -------------------------------------------------- */

static ssize_t pull(gnutls_transport_ptr_t ptr, void *data, size_t len)
{
    struct chan *c = ptr;
    if (c->rpos == c->rlen) {
        ssize_t n = read(c->fd, c->rbuf, TB_READ_AHEAD);
        if (n <= 0)
            return n;
        c->rpos = 0;
        c->rlen = (size_t)n;
    }
    size_t n = c->rlen - c->rpos < len ? c->rlen - c->rpos : len;
    memcpy(data, c->rbuf + c->rpos, n);
    c->rpos += n;
    return (ssize_t)n;
}

static ssize_t push(gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
    return write(((struct chan *)ptr)->fd, data, len);
}

static int pull_timeout(gnutls_transport_ptr_t ptr, unsigned ms)
{
    struct chan *c = ptr;
    if (c->rpos < c->rlen)
        return 1;
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static int tls_fail(const char *what, int rv)
{
    fprintf(stderr, "tcp_bench: %s: %s\n", what, gnutls_strerror(rv));
    return -1;
}

static int chan_open(struct chan *c, int fd, const struct tb_params *p, bool server)
{
    char ca[4200], cert[4200], key[4200];
    int rv;
    *c = (struct chan){.fd = fd};
    if (!p->tls)
        return 0;
    snprintf(ca, sizeof(ca), "%s/ca.pem", p->certdir);
    snprintf(cert, sizeof(cert), "%s/node.pem", p->certdir);
    snprintf(key, sizeof(key), "%s/node-key.pem", p->certdir);
    if ((rv = gnutls_certificate_allocate_credentials(&c->cred)) < 0)
        return tls_fail("credentials", rv);
    if ((rv = gnutls_certificate_set_x509_trust_file(c->cred, ca, GNUTLS_X509_FMT_PEM)) <= 0)
        return tls_fail(ca, rv ? rv : GNUTLS_E_NO_CERTIFICATE_FOUND);
    if ((rv = gnutls_certificate_set_x509_key_file(c->cred, cert, key, GNUTLS_X509_FMT_PEM)) <
        0)
        return tls_fail(cert, rv);
    if ((rv = gnutls_init(&c->s, server ? GNUTLS_SERVER : GNUTLS_CLIENT)) < 0)
        return tls_fail("gnutls_init", rv);
    if ((rv = gnutls_priority_set_direct(c->s, TB_PRIORITY, NULL)) < 0 ||
        (rv = gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, c->cred)) < 0)
        return tls_fail("session setup", rv);
    /* Mutual and chain-only, as between daemons: the CA decides, not a host name. */
    if (server)
        gnutls_certificate_server_set_request(c->s, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(c->s, NULL, 0);
    if (!(c->rbuf = malloc(TB_READ_AHEAD)))
        return -1;
    gnutls_transport_set_ptr(c->s, c);
    gnutls_transport_set_push_function(c->s, push);
    gnutls_transport_set_pull_function(c->s, pull);
    gnutls_transport_set_pull_timeout_function(c->s, pull_timeout);
    do {
        rv = gnutls_handshake(c->s);
    } while (rv < 0 && !gnutls_error_is_fatal(rv));
    if (rv < 0)
        return tls_fail("handshake", rv);
    unsigned status = 1;
    if (gnutls_certificate_verify_peers2(c->s, &status) < 0 || status != 0) {
        fprintf(stderr, "tcp_bench: the peer's certificate does not verify\n");
        return -1;
    }
    c->up = true;
    return 0;
}

static void chan_close(struct chan *c)
{
    if (c->s) {
        if (c->up)
            gnutls_bye(c->s, GNUTLS_SHUT_WR);
        gnutls_deinit(c->s);
    }
    if (c->cred)
        gnutls_certificate_free_credentials(c->cred);
    free(c->rbuf);
}

static int chan_write(struct chan *c, const uint8_t *buf, size_t len)
{
    /* Corked, GnuTLS packs the chunk into full 16 KiB records and writes them at
     * once on uncork, instead of one write(2) per record. */
    if (c->s)
        gnutls_record_cork(c->s);
    while (len) {
        ssize_t n = c->s ? gnutls_record_send(c->s, buf, len) : write(c->fd, buf, len);
        if (n < 0) {
            if (c->s ? !gnutls_error_is_fatal((int)n) : errno == EINTR)
                continue;
            fprintf(stderr, "tcp_bench: send: %s\n",
                    c->s ? gnutls_strerror((int)n) : strerror(errno));
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    if (c->s) {
        int rv;
        do {
            rv = gnutls_record_uncork(c->s, GNUTLS_RECORD_WAIT);
        } while (rv < 0 && !gnutls_error_is_fatal(rv));
        if (rv < 0)
            return tls_fail("send", rv);
    }
    return 0;
}

/* Reads exactly len bytes; -1 on error or early end. */
static int chan_read(struct chan *c, uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t n = c->s ? gnutls_record_recv(c->s, buf, len) : read(c->fd, buf, len);
        if (n < 0 && (c->s ? !gnutls_error_is_fatal((int)n) : errno == EINTR))
            continue;
        if (n <= 0) {
            fprintf(stderr, "tcp_bench: receive: %s\n",
                    n == 0 ? "the peer closed early"
                           : c->s ? gnutls_strerror((int)n) : strerror(errno));
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- the two ends --------------------------------------------------------------- */

int tb_send(int fd, const struct tb_params *p, struct tb_result *r)
{
    struct chan c;
    uint8_t *buf = malloc(p->chunk);
    if (!buf)
        return -1;
    /* Untouched pages would be faulted in on the clock. */
    memset(buf, 0, p->chunk);
    double t0 = now_s();
    int rv = chan_open(&c, fd, p, false);
    r->handshake_ms = (now_s() - t0) * 1e3;
    if (rv < 0)
        goto out;
    double cpu0 = cpu_self();
    t0 = now_s();
    for (uint64_t off = 0; off < p->bytes && rv == 0; off += p->chunk) {
        size_t n = p->bytes - off < p->chunk ? (size_t)(p->bytes - off) : p->chunk;
        if (p->verify)
            fill(off, buf, n);
        rv = chan_write(&c, buf, n);
    }
    uint8_t ack = 0;
    if (rv == 0 && (rv = chan_read(&c, &ack, 1)) == 0 && ack != 'k') {
        fprintf(stderr, "tcp_bench: the receiver reports a bad byte\n");
        rv = -1;
    }
    r->seconds = now_s() - t0;
    r->cpu_send_s = cpu_self() - cpu0;
    snprintf(r->cipher, sizeof(r->cipher), "%s", c.s ? gnutls_ciphersuite_get(c.s) : "-");
out:
    chan_close(&c);
    free(buf);
    return rv;
}

int tb_receive(int fd, const struct tb_params *p)
{
    struct chan c;
    uint8_t *buf = malloc(p->chunk);
    if (!buf)
        return -1;
    memset(buf, 0, p->chunk);
    int rv = chan_open(&c, fd, p, true);
    int64_t bad = -1;
    for (uint64_t off = 0; off < p->bytes && rv == 0; off += p->chunk) {
        size_t n = p->bytes - off < p->chunk ? (size_t)(p->bytes - off) : p->chunk;
        if ((rv = chan_read(&c, buf, n)) == 0 && p->verify && bad < 0)
            bad = check(off, buf, n);
    }
    if (bad >= 0)
        fprintf(stderr, "tcp_bench: byte %lld differs from the pattern\n", (long long)bad);
    /* 'k' when every byte matched, so that the sender fails too when one did not. */
    uint8_t ack = bad < 0 ? 'k' : 'x';
    if (rv == 0)
        rv = chan_write(&c, &ack, 1);
    chan_close(&c);
    free(buf);
    return rv == 0 && bad < 0 ? 0 : -1;
}
