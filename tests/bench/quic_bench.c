/*
 * quic_bench.c - bulk throughput of one QUIC connection over loopback, sender and receiver
 * in two processes (each pinned to its own core when there are two).
 *
 *   quic_bench [--mib 1024] [--channels 1,4] [--payload 1452,65527] [--msg 1048576]
 *              [--queue-mib 8] [--window-mib 64] [--stream-window-mib 16]
 *
 * For every (channels, payload) pair it moves --mib MiB in --msg byte messages spread over
 * the channels, keeping --queue-mib sent but unacknowledged (what a pipelined collective
 * would keep), and prints GB/s measured by the
 * sender from the first send to the last acknowledgement (the handshake is done before).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "qh.h"

struct opts {
    uint64_t mib, msg, window_mib, stream_window_mib, queue_mib;
    int chans[8], nchans;
    unsigned payloads[8];
    int npayloads;
};

static uv_loop_t *loop;

static double cpu_s(const struct rusage *r)
{
    return (double)r->ru_utime.tv_sec + r->ru_utime.tv_usec * 1e-6 + (double)r->ru_stime.tv_sec +
           r->ru_stime.tv_usec * 1e-6;
}

static void pin(int cpu)
{
    cpu_set_t s;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    (void)sched_setaffinity(0, sizeof(s), &s);
}

static void conf_for(struct nx_quic_conf *c, int node, const struct opts *o, unsigned payload)
{
    qh_conf(c, "127.0.0.1:0", node);
    c->idle_timeout_ms = 10000;
    c->keepalive_ms = 2000;
    c->max_udp_payload = payload;
    c->loopback_udp_payload = 0; /* the size under test, not the loopback default */
    c->window_bytes = o->window_mib << 20;
    c->stream_window_bytes = o->stream_window_mib << 20;
}

/* ---- receiver (child) ---- */

struct rx {
    uint64_t bytes, msgs;
};

static void rx_message(void *arg, struct nx_tpeer *p, uint64_t ch, const void *d, size_t len)
{
    struct rx *r = arg;
    (void)p, (void)ch, (void)d;
    r->bytes += len;
    r->msgs++;
}

static void rx_peer(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *why)
{
    (void)arg;
    if (st == NX_TPEER_LOST) {
        /* The sender went away: this run is over. */
        p->t->ops->peer_forget(p);
        (void)why;
    }
}

static void receiver(int wfd, const struct opts *o, unsigned payload)
{
    struct nx_quic_conf c;
    struct rx r = {0, 0};
    char err[256];
    pin(1);
    loop = uv_default_loop();
    conf_for(&c, 1, o, payload);
    struct nx_transport_cb cb = {.arg = &r, .on_message = rx_message, .on_peer = rx_peer};
    struct nx_transport *t = nx_quic_new(loop, &c, &cb, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "receiver: %s\n", err);
        _exit(3);
    }
    int port = nx_quic_port(t);
    if (write(wfd, &port, sizeof(port)) != sizeof(port))
        _exit(4);
    close(wfd);
    uv_run(loop, UV_RUN_DEFAULT);
    _exit(0);
}

/* ---- sender (parent) ---- */

struct tx {
    struct nx_tpeer *p;
    int nch;
    uint64_t msg, total, sent, acked, inflight, limit;
    uint8_t *buf;
    int up;
};

static void tx_pump(struct tx *x)
{
    while (x->sent < x->total && x->inflight < x->limit) {
        uint64_t len = x->total - x->sent < x->msg ? x->total - x->sent : x->msg;
        struct iovec iov = {x->buf, len};
        uint64_t ch = (x->sent / x->msg) % (uint64_t)x->nch;
        if (x->p->t->ops->send(x->p, ch, &iov, 1, len) != 0) {
            fprintf(stderr, "send failed\n");
            exit(1);
        }
        x->sent += len;
        x->inflight += len;
    }
}

static void tx_sent(void *arg, struct nx_tpeer *p, uint64_t token)
{
    struct tx *x = arg;
    (void)p;
    x->acked += token;
    x->inflight -= token;
    tx_pump(x);
}

static void tx_peer(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *why)
{
    struct tx *x = arg;
    (void)p;
    if (st == NX_TPEER_UP)
        x->up = 1;
    else {
        fprintf(stderr, "sender: peer lost: %s\n", why);
        exit(1);
    }
}

static int tx_up(void *arg)
{
    struct tx *x = arg;
    return x->up && x->acked == x->sent;
}

static int tx_done(void *arg)
{
    struct tx *x = arg;
    return x->acked >= x->total;
}

static int run_one(const struct opts *o, int nch, unsigned payload)
{
    int fds[2];
    int port;
    char err[256], addr[64];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        receiver(fds[1], o, payload);
    }
    close(fds[1]);
    if (read(fds[0], &port, sizeof(port)) != sizeof(port)) {
        fprintf(stderr, "receiver did not start\n");
        return -1;
    }
    close(fds[0]);
    pin(0);
    loop = uv_default_loop();
    struct nx_quic_conf c;
    conf_for(&c, 0, o, payload);
    struct tx x = {0};
    x.nch = nch;
    x.msg = o->msg;
    x.limit = o->queue_mib << 20;
    x.buf = malloc(x.msg);
    memset(x.buf, 0x5a, x.msg);
    struct nx_transport_cb cb = {.arg = &x, .on_peer = tx_peer, .on_sent = tx_sent};
    struct nx_transport *t = nx_quic_new(loop, &c, &cb, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "sender: %s\n", err);
        return -1;
    }
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    x.p = t->ops->peer(t, addr, err, sizeof(err));
    /* Handshake and one message per channel first: streams exist, timing is the bulk. */
    x.total = x.msg < 4096 ? x.msg : 4096;
    for (int ch = 0; ch < nch; ch++) {
        struct iovec iov = {x.buf, 1};
        t->ops->send(x.p, (uint64_t)ch, &iov, 1, 1);
        x.sent++;
        x.inflight++;
    }
    x.total = x.sent;
    qh_run_until(loop, tx_up, &x, 10000);
    x.total = x.sent + (o->mib << 20);
    struct rusage r0, r1, rc;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = qh_now();
    tx_pump(&x);
    int ok = qh_run_until(loop, tx_done, &x, 120000);
    double dt = qh_now() - t0;
    getrusage(RUSAGE_SELF, &r1);
    struct nx_tpeer_stats st;
    t->ops->stats(x.p, &st);
    uint64_t bytes = o->mib << 20;
    qh_destroy(loop, t);
    kill(pid, SIGKILL);
    wait4(pid, NULL, 0, &rc);
    /* CPU seconds per side: on a busy machine wall time lies, CPU time much less.  The
     * receiver's count includes its (short) start and handshake. */
    double ctx = cpu_s(&r1) - cpu_s(&r0), crx = cpu_s(&rc);
    printf("quic_bench: %4llu MiB, %d channel%s, datagram %5u B, %4llu KiB messages: "
           "%5.2f GB/s  (%.2f s; cpu tx %.2f s rx %.2f s -> %.2f GB/s cpu-bound; rtt %.2f ms, "
           "cwnd %llu KiB, %llu pkts, %llu lost)%s\n",
           (unsigned long long)o->mib, nch, nch > 1 ? "s" : " ", payload,
           (unsigned long long)(o->msg >> 10), (double)bytes / dt / 1e9, dt, ctx, crx,
           (double)bytes / (ctx > crx ? ctx : crx) / 1e9, st.rtt_ms,
           (unsigned long long)(st.cwnd >> 10), (unsigned long long)st.pkts_sent,
           (unsigned long long)st.pkts_lost, ok ? "" : "  TIMED OUT");
    fflush(stdout);
    uv_loop_close(loop);
    free(x.buf);
    return ok ? 0 : 1;
}

static int parse_list(const char *s, unsigned *out, int max)
{
    int n = 0;
    char *end;
    while (*s && n < max) {
        out[n++] = (unsigned)strtoul(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s)
            break;
    }
    return n;
}

int main(int argc, char **argv)
{
    struct opts o = {1024, 1 << 20, 64, 16, 8, {1, 4}, 2, {1452, 65527}, 2};
    for (int i = 1; i + 1 < argc; i += 2) {
        unsigned tmp[8];
        if (!strcmp(argv[i], "--mib"))
            o.mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--msg"))
            o.msg = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--queue-mib"))
            o.queue_mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--window-mib"))
            o.window_mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--stream-window-mib"))
            o.stream_window_mib = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--channels")) {
            o.nchans = parse_list(argv[i + 1], tmp, 8);
            for (int k = 0; k < o.nchans; k++)
                o.chans[k] = (int)tmp[k];
        } else if (!strcmp(argv[i], "--payload"))
            o.npayloads = parse_list(argv[i + 1], o.payloads, 8);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!o.msg || o.msg > NX_TMSG_MAX) {
        fprintf(stderr, "--msg must be 1 .. %u\n", NX_TMSG_MAX);
        return 2;
    }
    const char *lv = getenv("NEXAR_LOG");
    nx_log_init(lv ? (enum nx_log_level)nx_log_level_parse(lv) : NX_LOG_ERROR, 0);
    signal(SIGPIPE, SIG_IGN);
    qh_certs(2);
    int rv = 0;
    for (int i = 0; i < o.npayloads; i++)
        for (int j = 0; j < o.nchans; j++)
            rv |= run_one(&o, o.chans[j], o.payloads[i]);
    qh_certs_cleanup();
    return rv;
}
