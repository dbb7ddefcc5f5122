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
 *    byte verified; between a 3-lane daemon and a 1-lane one, both ways, NEXAR_ERR_PEER_LOST
 *    with the text that names both nodes and their counts.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster_util.h"
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
