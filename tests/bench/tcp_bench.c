/*
 * tcp_bench.c - the baselines for the QUIC transport: bulk transfer between two
 * processes over loopback TCP, plain and with GnuTLS TLS 1.3 (AES-128-GCM, mutual
 * certificate authentication as between two nexard daemons).
 *
 *   tcp_bench [--bytes 1G] [--mode both|tcp|tls] [--chunk 1M] [--no-verify]
 *             [--certs DIR] [--host 127.0.0.1] [--repeat R]
 *
 * The sender (parent) fills each chunk with a deterministic pattern and the receiver
 * (a forked child) checks every byte, the same work `nexarctl peer-test` does on both
 * daemons, so the numbers compare; --no-verify leaves it out for the raw pipe.  The
 * clock runs on the sender from the first byte sent (after the handshake) to the
 * receiver's one-byte acknowledgement that it has read and checked everything.
 *
 * --certs DIR takes ca.pem, node.pem and node-key.pem from DIR (both ends use that
 * node); without it a throw-away CA and node are made with tools/common/certs.c.
 *
 * Output, per run: one line for people, and one for scripts:
 *   tcp_bench transport=tls bytes=1073741824 seconds=0.612 gbps=1.754 verify=1
 *     cipher=TLS_AES_128_GCM_SHA256 handshake_ms=2.4 cpu_send_s=0.61 cpu_recv_s=0.58
 * GB/s is 1e9 bytes per second.  Exit status 0, or 1 on any failure (a byte that
 * differs from the pattern included).
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <gnutls/gnutls.h>

#include "certs.h"
#include "tcp_bench_io.h"

struct opts {
    uint64_t bytes;
    size_t chunk;
    bool tcp, tls, verify;
    const char *certs, *host;
    long repeat;
};

static void __attribute__((noreturn)) die(const char *what)
{
    fprintf(stderr, "tcp_bench: %s\n", what);
    exit(1);
}

static double cpu_seconds(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 +
           (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
}

/* A throw-away CA and one node under /tmp, removed again by the caller. */
static void make_certs(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/nexar-tcpbench.XXXXXX");
    if (!mkdtemp(dir))
        die("mkdtemp failed");
    char err[512];
    struct nxt_certs_result res;
    struct nxt_ca_req ca = {.out_dir = dir, .days = 1};
    const char *ips[] = {"127.0.0.1", "::1"};
    struct nxt_node_req node = {.ca_dir = dir, .out_dir = dir, .name = "localhost",
                                .ips = ips, .nips = 2, .days = 1};
    if (nxt_certs_make_ca(&ca, &res, err, sizeof(err)) < 0 ||
        nxt_certs_make_node(&node, &res, err, sizeof(err)) < 0)
        die(err);
}

static void remove_certs(const char *dir)
{
    static const char *const files[] = {NXT_CERTS_CA_CERT, NXT_CERTS_CA_KEY,
                                        NXT_CERTS_NODE_CERT, NXT_CERTS_NODE_KEY};
    char p[4200];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* A listening socket on host, any port; *addr gets where to connect. */
static int listen_any(const char *host, struct sockaddr_storage *addr, socklen_t *alen)
{
    memset(addr, 0, sizeof(*addr));
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        *alen = sizeof(*a4);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        *alen = sizeof(*a6);
    } else {
        die("--host: not an IPv4 or IPv6 address");
    }
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)addr, *alen) < 0 || listen(fd, 1) < 0 ||
        getsockname(fd, (struct sockaddr *)addr, alen) < 0)
        die("cannot listen on --host");
    return fd;
}

/* One transfer: fork the receiver, send, wait for it.  Returns 0 or -1. */
static int run_one(const struct opts *o, bool tls, const char *certdir, struct tb_result *r)
{
    struct sockaddr_storage addr;
    socklen_t alen;
    int lfd = listen_any(o->host, &addr, &alen);
    struct tb_params p = {.bytes = o->bytes, .chunk = o->chunk, .verify = o->verify,
                          .tls = tls, .certdir = certdir};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork failed");
    if (pid == 0) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        close(lfd);
        _exit(fd < 0 ? 1 : tb_receive(fd, &p) == 0 ? 0 : 1);
    }
    close(lfd);
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rv = -1;
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, alen) < 0)
        fprintf(stderr, "tcp_bench: connect: %s\n", strerror(errno));
    else
        rv = tb_send(fd, &p, r);
    if (fd >= 0)
        close(fd);
    int st;
    struct rusage ru;
    if (rv < 0)
        kill(pid, SIGTERM);
    if (wait4(pid, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "tcp_bench: the receiver failed\n");
        return -1;
    }
    r->cpu_recv_s = cpu_seconds(&ru);
    return rv;
}

static void report(const struct opts *o, bool tls, const struct tb_result *r)
{
    double gbps = (double)o->bytes / r->seconds / 1e9;
    printf("%-3s: %.2f GiB in %.3f s: %.2f GB/s%s (cpu: sender %.2f s, receiver %.2f s)%s%s\n",
           tls ? "tls" : "tcp", (double)o->bytes / (1 << 30), r->seconds, gbps,
           o->verify ? ", pattern checked" : "", r->cpu_send_s, r->cpu_recv_s,
           tls ? ", " : "", tls ? r->cipher : "");
    printf("tcp_bench transport=%s bytes=%llu seconds=%.4f gbps=%.3f verify=%d cipher=%s "
           "handshake_ms=%.2f cpu_send_s=%.3f cpu_recv_s=%.3f\n",
           tls ? "tls" : "tcp", (unsigned long long)o->bytes, r->seconds, gbps, o->verify,
           tls ? r->cipher : "-", r->handshake_ms, r->cpu_send_s, r->cpu_recv_s);
    fflush(stdout);
}

static uint64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    uint64_t mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default: break;
    }
    if (errno || end == s || *end || v <= 0 || v * (double)mul > (double)(1ull << 40))
        die("a size is a number with an optional K, M or G (binary), e.g. 1G");
    return (uint64_t)(v * (double)mul);
}

static void parse(struct opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"bytes", required_argument, NULL, 'b'}, {"mode", required_argument, NULL, 'm'},
        {"chunk", required_argument, NULL, 'c'}, {"no-verify", no_argument, NULL, 'n'},
        {"certs", required_argument, NULL, 'C'}, {"host", required_argument, NULL, 'H'},
        {"repeat", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct opts){.bytes = 1ull << 30, .chunk = 1 << 20, .tcp = true, .tls = true,
                       .verify = true, .host = "127.0.0.1", .repeat = 1};
    int ch;
    while ((ch = getopt_long(argc, argv, "b:m:c:nC:H:r:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': o->bytes = parse_size(optarg); break;
        case 'c': o->chunk = (size_t)parse_size(optarg); break;
        case 'n': o->verify = false; break;
        case 'C': o->certs = optarg; break;
        case 'H': o->host = optarg; break;
        case 'r':
            o->repeat = strtol(optarg, NULL, 10);
            if (o->repeat < 1 || o->repeat > 100)
                die("--repeat: 1..100");
            break;
        case 'm':
            o->tcp = !strcmp(optarg, "both") || !strcmp(optarg, "tcp");
            o->tls = !strcmp(optarg, "both") || !strcmp(optarg, "tls");
            if (!o->tcp && !o->tls)
                die("--mode: both, tcp or tls");
            break;
        case 'h':
            printf("usage: tcp_bench [--bytes 1G] [--mode both|tcp|tls] [--chunk 1M] "
                   "[--no-verify] [--certs DIR] [--host 127.0.0.1] [--repeat R]\n");
            exit(0);
        default: die("unknown option (--help)");
        }
    }
    /* Pattern words are 8 bytes: chunks stay aligned to them. */
    if (o->chunk < 4096 || o->chunk > (64u << 20) || o->chunk % 8)
        die("--chunk: 4K..64M, a multiple of 8");
}

int main(int argc, char **argv)
{
    struct opts o;
    parse(&o, argc, argv);
    signal(SIGPIPE, SIG_IGN);
    char tmpdir[64] = "";
    const char *certdir = o.certs;
    if (o.tls && !certdir) {
        make_certs(tmpdir, sizeof(tmpdir));
        certdir = tmpdir;
    }
    int rv = 0;
    for (long i = 0; i < o.repeat && rv == 0; i++) {
        for (int t = 0; t < 2 && rv == 0; t++) {
            bool tls = t == 1;
            if (tls ? !o.tls : !o.tcp)
                continue;
            struct tb_result r = {0};
            if ((rv = run_one(&o, tls, certdir, &r)) == 0)
                report(&o, tls, &r);
        }
    }
    if (*tmpdir)
        remove_certs(tmpdir);
    return rv == 0 ? 0 : 1;
}
