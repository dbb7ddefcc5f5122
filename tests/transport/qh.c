/* qh.c - see qh.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qh.h"

int qh_failures;
static char certdir[64];

const char *qh_certs(int n)
{
    return qh_certs_short(n, 0);
}

const char *qh_certs_short(int n, int short_s)
{
    char cmd[512];
    const char *script = getenv("NX_GEN_CERTS");
    snprintf(certdir, sizeof(certdir), "/tmp/nexar-quic-XXXXXX");
    if (!mkdtemp(certdir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(cmd, sizeof(cmd), "sh %s %s %d %s", script ? script : "tests/lib/gen-certs.sh",
             certdir, n, short_s > 0 ? "" : "''");
    if (short_s > 0)
        snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%d", short_s);
    if (system(cmd) != 0) {
        fprintf(stderr, "certificate generation failed: %s\n", cmd);
        exit(1);
    }
    return certdir;
}

void qh_certs_cleanup(void)
{
    char cmd[128];
    if (!certdir[0])
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", certdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", certdir);
}

const char *qh_path(const char *file)
{
    static char bufs[8][160];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof(bufs[0]), "%s/%s", certdir, file);
    return b;
}

void qh_conf(struct nx_quic_conf *c, const char *listen, int node)
{
    char name[32];
    nx_quic_conf_defaults(c);
    c->listen = listen;
    c->tls_ca = qh_path("ca.pem");
    c->idle_timeout_ms = 2000;
    c->keepalive_ms = 500;
    if (node < 0) {
        c->test_lax_cert = 1;
        return;
    }
    snprintf(name, sizeof(name), "node%d.pem", node);
    c->tls_cert = qh_path(name);
    snprintf(name, sizeof(name), "node%d.key", node);
    c->tls_key = qh_path(name);
}

void qh_conf_foreign(struct nx_quic_conf *c, const char *listen, int trust_cluster)
{
    qh_conf(c, listen, -1);
    c->tls_ca = qh_path(trust_cluster ? "ca.pem" : "foreign-ca.pem");
    c->tls_cert = qh_path("foreign.pem");
    c->tls_key = qh_path("foreign.key");
}

double qh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void tick(uv_timer_t *t)
{
    (void)t;
}

int qh_run_until(uv_loop_t *loop, int (*done)(void *), void *arg, int timeout_ms)
{
    uv_timer_t t;
    double end = qh_now() + timeout_ms / 1000.0;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, tick, 10, 10); /* wake up to look at the clock */
    int ok;
    while (!(ok = done(arg)) && qh_now() < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return ok;
}

static int never(void *arg)
{
    (void)arg;
    return 0;
}

void qh_run_for(uv_loop_t *loop, int ms)
{
    qh_run_until(loop, never, NULL, ms);
}

void qh_destroy(uv_loop_t *loop, struct nx_transport *t)
{
    t->ops->destroy(t);
    uv_run(loop, UV_RUN_NOWAIT);
    uv_run(loop, UV_RUN_NOWAIT);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

size_t qh_msg_len(uint64_t channel, uint64_t seq, size_t max)
{
    uint64_t h = mix(channel * 1000003u + seq);
    if (seq % 53 == 7)
        return h % 64; /* now and then a tiny one, empty included */
    return max / 16 + h % (max - max / 16);
}

void qh_msg_fill(uint8_t *buf, size_t len, uint64_t channel, uint64_t seq)
{
    uint64_t s = mix(channel << 32 ^ seq) | 1;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        memcpy(buf + i, &s, 8);
    }
    for (; i < len; i++)
        buf[i] = (uint8_t)(s >> (8 * (i & 7)));
}
