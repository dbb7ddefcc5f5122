/*
 * test_cluster_peertest.c - nexarctl peer-test between two real daemons.
 *
 *  - 1 GiB over 4 concurrent streams, every byte verified by the receiver, in order;
 *    the throughput is logged (it is the transport's real-daemon figure);
 *  - 4 MiB over 1 stream in 64 KiB messages, and 0 bytes (a connectivity check);
 *  - the JSON has the documented fields; a peer-test to the daemon itself is a usage
 *    error; one to an address where nothing answers fails with NEXAR_ERR_PEER_LOST or
 *    NEXAR_ERR_TIMEOUT, not a hang;
 *  - with quic_lanes = 3 on two other daemons, 64 MiB over 6 streams (two a lane), every
 *    byte verified; then `nexarctl peers` on each has the peer's 3 lanes, up, each with at
 *    least a sixth of the bytes sent or received, lane bytes and packets adding up to the
 *    peer's, and the table a row per lane; a one-connection peer has no lanes;
 *  - on those two, 2 ranks of nexar-bench (results checked): 1000 all_reduces of 8 B move
 *    nothing on lanes 1 and 2 (an op of one part keeps lane 0, the loop thread's), and
 *    5 of 16 MiB (4 parts each, on channels 1-4) leave lane 0 at most 35 % of their bytes
 *    (a quarter; half when part k took channel k);
 *    between a 3-lane daemon and a 1-lane one, both ways, NEXAR_ERR_PEER_LOST with the
 *    text that names both nodes and their counts.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster_util.h"
#include "ctlrun.h"
#include "itest.h"
#include "nexar.h"

static int fails;

static double json_num(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

static void run(struct cu_node *from, struct cu_node *to, const char *bytes, const char *streams,
                const char *msg, double want_bytes)
{
    char out[4096];
    const char *q[] = {"--json", "peer-test", to->addr, "--bytes", bytes, "--streams", streams,
                       "--msg-bytes", msg, NULL};
    double t0 = tl_now();
    int rc = cu_ctl(from->d.sock, q, out, sizeof(out), 55);
    double dt = tl_now() - t0;
    EXPECT_TRUE(fails, rc == 0 && strstr(out, "\"verified\":true") &&
                json_num(out, "bytes_verified") == want_bytes && json_num(out, "status") == 0,
                "peer-test %s on %s streams: exit %d: %s", bytes, streams, rc, out);
    static const char *const keys[] = {"peer", "test_id", "bytes", "streams", "msg_bytes",
                                       "seconds", "gbps", "verified", "bytes_verified", "bad",
                                       "bad_stream", "bad_offset", "status_name", "error"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char pat[64];
        snprintf(pat, sizeof(pat), "\"%s\":", keys[i]);
        EXPECT_TRUE(fails, strstr(out, pat) != NULL, "peer-test JSON lacks %s", keys[i]);
    }
    tl_log("peer-test %s bytes on %s stream(s), %s-byte messages: %.3f s data phase, %.3f GB/s "
           "(%.1f s with nexarctl)", bytes, streams, msg, json_num(out, "seconds"),
           json_num(out, "gbps"), dt);
}

/* The index of the peer at addr in a `nexarctl --json peers` answer, or -1. */
static long peer_index(const struct tj *v, const char *addr)
{
    long np = v ? tj_len(v, "peers") : -1;
    for (long i = 0; i < np; i++) {
        char path[64];
        snprintf(path, sizeof(path), "peers[%ld].addr", i);
        if (tj_str(v, path) && !strcmp(tj_str(v, path), addr))
            return i;
    }
    return -1;
}

/* `nexarctl --json peers` on n: its one peer other is carried by want lanes, up, and
 * what they moved (dir "sent" or "recv", at least min_each each) adds up to the peer's. */
static void check_lanes(const struct cu_node *n, const char *other, long want,
                        const char *dir, uint64_t min_each)
{
    int rc = 0;
    struct tj *v = tl_ctl_json(cu_out(), n->d.sock, "peers", &rc);
    long at = peer_index(v, other);
    EXPECT_TRUE(fails, rc == 0 && at >= 0, "peers on %s: exit %d, %s not among its peers",
                n->addr, rc, other);
    if (at < 0) {
        tj_free(v);
        return;
    }
    char path[96];
#define P(fmt, ...) (snprintf(path, sizeof(path), "peers[%ld]." fmt, at, __VA_ARGS__), path)
    long nl = tj_len(v, P("%s", "lanes"));
    EXPECT_TRUE(fails, nl == want, "peers on %s: %ld lanes to %s, expected %ld", n->addr, nl,
                other, want);
    uint64_t peer_bytes = 0, peer_pkts = 0, sum_bytes = 0, sum_pkts = 0, b, k, lane;
    tj_u64(v, P("bytes_%s", dir), &peer_bytes);
    tj_u64(v, P("pkts_%s", dir), &peer_pkts);
    for (long i = 0; i < (nl > 0 ? nl : 0); i++) {
        const char *st = tj_str(v, P("lanes[%ld].state", i));
        int bad = tj_u64(v, P("lanes[%ld].lane", i), &lane) != 0;
        bad += tj_u64(v, P("lanes[%ld].bytes_%s", i, dir), &b) != 0;
        bad += tj_u64(v, P("lanes[%ld].pkts_%s", i, dir), &k) != 0;
        EXPECT_TRUE(fails, !bad && lane == (uint64_t)i && st && !strcmp(st, "up") &&
                    b >= min_each && k > 0, "peers on %s, lane %ld of %s: lane %llu, %s, "
                    "%llu bytes %s (at least %llu), %llu packets", n->addr, i, other,
                    (unsigned long long)lane, st ? st : "(no state)", (unsigned long long)b,
                    dir, (unsigned long long)min_each, (unsigned long long)k);
        tl_log("%s: lane %ld to %s: %s, %llu bytes and %llu packets %s", n->addr, i, other,
               st ? st : "?", (unsigned long long)b, (unsigned long long)k, dir);
        sum_bytes += b;
        sum_pkts += k;
    }
#undef P
    if (nl > 0)
        EXPECT_TRUE(fails, sum_bytes == peer_bytes && sum_pkts == peer_pkts,
                    "peers on %s: the lanes to %s %s %llu bytes in %llu packets, the peer "
                    "%llu in %llu", n->addr, other, dir, (unsigned long long)sum_bytes,
                    (unsigned long long)sum_pkts, (unsigned long long)peer_bytes,
                    (unsigned long long)peer_pkts);
    tj_free(v);
}

/* The bytes n has sent to other on each lane (nexarctl --json peers); how many lanes, or
 * -1 when the answer lacks them. */
static long lane_sent(const struct cu_node *n, const char *other, uint64_t *out, long max)
{
    int rc = 0;
    struct tj *v = tl_ctl_json(cu_out(), n->d.sock, "peers", &rc);
    long at = peer_index(v, other), nl = -1;
    if (at >= 0) {
        char path[96];
        snprintf(path, sizeof(path), "peers[%ld].lanes", at);
        nl = tj_len(v, path);
        for (long k = 0; k < nl && k < max; k++) {
            snprintf(path, sizeof(path), "peers[%ld].lanes[%ld].bytes_sent", at, k);
            if (tj_u64(v, path, &out[k]) != 0)
                nl = -1;
        }
    }
    tj_free(v);
    return nl;
}

/* 2 ranks of nexar-bench, rank 0 on a (the coordinator), rank 1 on b: exit 0 of both. */
static int bench(const struct cu_node *a, const struct cu_node *b, const char *size,
                 const char *iters)
{
    const char *nb = getenv("NEXAR_BENCH");
    const char *args[] = {nb, "-t", "all_reduce", "-b", size, "-e", size, "-n", iters,
                          "-w", "1", "-c", "1", NULL};
    char job[64];
    hx_job_name(job, sizeof(job), "lanes");
    pid_t p0 = cu_rank_exec(a->d.sock, a->addr, job, 0, 2, 60, args, NULL, NULL);
    pid_t p1 = cu_rank_exec(b->d.sock, a->addr, job, 1, 2, 60, args, NULL, NULL);
    int e0 = p0 > 0 ? cu_wait_exit(p0, 90) : -1, e1 = p1 > 0 ? cu_wait_exit(p1, 90) : -1;
    EXPECT_TRUE(fails, e0 == 0 && e1 == 0, "nexar-bench all_reduce of %s across the lanes: "
                "ranks exited %d and %d", size, e0, e1);
    return e0 == 0 && e1 == 0 ? 0 : -1;
}

/* Which lanes a collective's parts ride (xcoll.c, part_channel). */
static void lanes_of_collectives(const struct cu_node *C, const struct cu_node *D)
{
    uint64_t s0[3] = {0}, s1[3] = {0}, s2[3] = {0};
    if (!getenv("NEXAR_BENCH")) {
        tl_log("FAIL: $NEXAR_BENCH is not set (run through meson test)");
        fails++;
        return;
    }
    long n = lane_sent(C, D->addr, s0, 3);
    if (bench(C, D, "8", "1000") < 0)
        return;
    long n1 = lane_sent(C, D->addr, s1, 3);
    if (bench(C, D, "16M", "4") < 0)
        return;
    long n2 = lane_sent(C, D->addr, s2, 3);
    EXPECT_TRUE(fails, n == 3 && n1 == 3 && n2 == 3, "lanes of %s on %s: %ld, %ld, %ld",
                D->addr, C->addr, n, n1, n2);
    uint64_t d1[3], d2[3], t2 = 0;
    for (int k = 0; k < 3; k++) {
        d1[k] = s1[k] - s0[k];
        d2[k] = s2[k] - s1[k];
        t2 += d2[k];
    }
    tl_log("8 B all_reduces: %llu / %llu / %llu bytes on lanes 0 / 1 / 2; 16 MiB ones: "
           "%llu / %llu / %llu", (unsigned long long)d1[0], (unsigned long long)d1[1],
           (unsigned long long)d1[2], (unsigned long long)d2[0], (unsigned long long)d2[1],
           (unsigned long long)d2[2]);
    EXPECT_TRUE(fails, d1[0] >= 1000 * 8 && d1[1] == 0 && d1[2] == 0,
                "1000 all_reduces of 8 B: %llu / %llu / %llu bytes on lanes 0 / 1 / 2, "
                "expected all on lane 0", (unsigned long long)d1[0],
                (unsigned long long)d1[1], (unsigned long long)d1[2]);
    EXPECT_TRUE(fails, t2 >= 4 * (8u << 20) && d2[1] > 0 && d2[2] > 0 &&
                d2[0] <= t2 * 35 / 100, "5 all_reduces of 16 MiB: %llu / %llu / %llu bytes "
                "on lanes 0 / 1 / 2, expected lane 0 at most 35 %%", (unsigned long long)d2[0],
                (unsigned long long)d2[1], (unsigned long long)d2[2]);
}

int main(void)
{
    cu_init("peertest");
    struct cu_node A, B;
    if (cu_node_start(&A, "node0", "ca", NULL) || cu_node_start(&B, "node1", "ca", NULL)) {
        cu_fini();
        return 1;
    }
    tl_log("A %s, B %s", A.addr, B.addr);
    run(&A, &B, "1G", "4", "1M", 1073741824.0);
    run(&B, &A, "4M", "1", "64K", 4194304.0);
    run(&A, &B, "0", "2", "1M", 0);

    char out[4096];
    const char *self[] = {"peer-test", A.addr, NULL};
    int rc = cu_ctl(A.d.sock, self, out, sizeof(out), 10);
    EXPECT_TRUE(fails, rc == NEXAR_ERR_INVALID, "peer-test to itself: exit %d", rc);

    const char *nobody[] = {"--json", "peer-test", "127.0.0.1:9", "--bytes", "1M",
                            "--timeout", "8", NULL};
    rc = cu_ctl(A.d.sock, nobody, out, sizeof(out), 30);
    EXPECT_TRUE(fails, rc == NEXAR_ERR_PEER_LOST || rc == NEXAR_ERR_TIMEOUT,
                "peer-test to a closed port: exit %d: %s", rc, out);
    tl_log("peer-test to a closed port: exit %d: %.200s", rc, out);

    /* Lanes: C and D run 3 connections between them; A runs one. */
    struct cu_node C, D;
    const char *lanes3[] = {"--set", "quic_lanes=3", NULL};
    if (cu_node_start(&C, "node2", "ca", lanes3) || cu_node_start(&D, "node3", "ca", lanes3)) {
        fails++;
    } else {
        run(&C, &D, "64M", "6", "1M", 67108864.0);
        check_lanes(&C, D.addr, 3, "sent", (64u << 20) / 6);
        check_lanes(&D, C.addr, 3, "recv", (64u << 20) / 6);
        const char *table[] = {"peers", NULL};
        rc = cu_ctl(C.d.sock, table, out, sizeof(out), 10);
        char row[128];
        snprintf(row, sizeof(row), "%s  2     up", D.addr);
        EXPECT_TRUE(fails, rc == 0 && strstr(out, "PEER") && strstr(out, "LANE") &&
                    strstr(out, row), "nexarctl peers on a 3-lane node: exit %d, no row "
                    "\"%s\":\n%s", rc, row, out);
        fprintf(stderr, "%s", out);
        lanes_of_collectives(&C, &D);
        struct {
            struct cu_node *from, *to, *one, *more;
        } mix[] = {{&C, &A, &A, &C}, {&A, &D, &A, &D}};
        for (int i = 0; i < 2; i++) {
            char want[256];
            const char *q[] = {"--json", "peer-test", mix[i].to->addr, "--bytes", "1M",
                               "--streams", "3", "--timeout", "10", NULL};
            rc = cu_ctl(mix[i].from->d.sock, q, out, sizeof(out), 30);
            snprintf(want, sizeof(want), "quic_lanes differ: 1 on %s, more on %s",
                     mix[i].one->addr, mix[i].more->addr);
            EXPECT_TRUE(fails, rc == NEXAR_ERR_PEER_LOST && strstr(out, want),
                        "peer-test %s -> %s: exit %d, want \"%s\": %s", mix[i].from->addr,
                        mix[i].to->addr, rc, want, out);
            tl_log("peer-test %s lanes -> %s: exit %d: %.300s", i ? "1" : "3",
                   i ? "3" : "1", rc, out);
        }
        if (hx_daemon_stop(&C.d) || hx_daemon_stop(&D.d))
            fails++;
    }

    check_lanes(&A, B.addr, 0, "sent", 0);
    const char *peers[] = {"peers", NULL};
    rc = cu_ctl(A.d.sock, peers, out, sizeof(out), 10);
    EXPECT_TRUE(fails, rc == 0 && strstr(out, B.addr) && strstr(out, "TLS_AES"),
                "nexarctl peers: exit %d:\n%s", rc, out);
    fprintf(stderr, "%s", out);

    if (hx_daemon_stop(&A.d) || hx_daemon_stop(&B.d))
        fails++;
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
