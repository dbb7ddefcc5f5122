/*
 * test_xcoll.c - collectives, point to point and comm_split on a job across nodes
 * (issue 4), every result exact: the rank program xcoll_rank.c on K daemons talking
 * QUIC on loopback with real certificates.
 *
 *   itest_test_xcoll --nodes K --per-node R [--interleaved | --direct]
 *                    [--level small|rep|full] [--long] [--parts LIST] [--limit S]
 *                    [--slot-bytes B] [--slots N] [--heap-bytes B] [--lanes K]
 *                    [--set KEY=VALUE]
 *
 * Placement in blocks (the default): nexar-run --nodes K -n K*R starts the daemons and
 * the ranks (rank r on node r*K/N), passing each daemon small staging slots
 * (--slot-bytes 64 KiB, 2 slots: a ~1 MiB case is cut into many chunks) and a 16 MiB
 * arena with --daemon-arg; --slot-bytes, --slots and --heap-bytes set them instead, and
 * --lanes K (quic_lanes) and --set KEY=VALUE (any config key) add to them.
 * --interleaved: rank r on node r % K, so the ranks of a node are not contiguous (with
 * 2 x 2: ranks 0 and 2 on node 0, 1 and 3 on node 1).  nexar-run cannot place ranks so;
 * the test starts the daemons (cluster_util.c, same daemon arguments) and the ranks
 * itself, with NEXAR_COORD at node 0.  --direct: that path with the block placement.
 * --nodes 1 runs the same program on one node (nexar-run without simulated nodes; with
 * --direct one networked daemon that coordinates its own job): a check of the test.
 * --level, --long (or NEXAR_LONG_TESTS=1) and --parts go to the ranks (xcoll_rank.c).
 *
 * Passes when every rank exits 0 (each prints what failed: rank, case, status and
 * nexar_last_error()), within the limit, and (--direct) every daemon stops cleanly.
 */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster_util.h"
#include "ctlrun.h"
#include "itest.h"
#include "tjson.h"

#define MAXK 4 /* gen-certs.sh makes node0..node3 */

/* Small slots by default, so that a ~1 MiB case is cut into many chunks; --slot-bytes
 * sets them (4194304: the local chunk plan of node-local groups, shm-protocol.md). */
static const char *slot_bytes = "65536", *slots = "2", *heap_bytes = "16777216";
static char slot_arg[64], slots_arg[64], heap_arg[64];
static const char *daemon_args[] = {"--slot-bytes", "65536", "--slots", "2",
                                    "--heap-bytes", "16777216", NULL, NULL, NULL, NULL, NULL};
static char lanes_arg[32]; /* "quic_lanes=K", or empty */
static const char *set_arg; /* --set: one more config key for every daemon, or NULL */

/* nexar-run --nodes K: its exit status (0 when every rank exited 0), -1 past limit. */
static int via_nexar_run(int K, int N, const char *const *rank_args, double limit)
{
    char k[16], n[16], env_k[32], sock[300];
    snprintf(k, sizeof(k), "%d", K);
    snprintf(n, sizeof(n), "%d", N);
    snprintf(env_k, sizeof(env_k), "XC_NODES=%d", K);
    /* one node: a socket nobody answers at, so that nexar-run starts a private daemon
     * with our arguments instead of using a system one */
    snprintf(sock, sizeof(sock), "%s/nobody.sock", cu_out());
    const char *argv[40] = {getenv("NEXAR_RUN"), "--nodes", k, "-n", n, "--timeout", "60",
                            "--grace", "10",
                            "--daemon-arg", slot_arg, "--daemon-arg", slots_arg,
                            "--daemon-arg", heap_arg};
    int a = 15;
    if (lanes_arg[0]) {
        argv[a++] = "--daemon-arg";
        argv[a++] = "--set";
        argv[a++] = "--daemon-arg";
        argv[a++] = lanes_arg;
    }
    if (set_arg) {
        argv[a++] = "--daemon-arg";
        argv[a++] = "--set";
        argv[a++] = "--daemon-arg";
        argv[a++] = set_arg;
    }
    if (K == 1) {
        argv[a++] = "--socket";
        argv[a++] = sock;
    }
    for (int i = 0; rank_args[i] && a < 39; i++)
        argv[a++] = rank_args[i];
    argv[a] = NULL;
    const char *env[] = {env_k, NULL};
    pid_t pid = hx_spawn(argv, env, NULL); /* ranks and nexar-run write to our stderr */
    if (pid < 0)
        return -1;
    int code = cu_wait_exit(pid, limit);
    if (code)
        tl_log("FAIL: nexar-run exited %d%s", code, code < 0 ? " (killed at the limit)" : "");
    return code;
}

/* Daemons and ranks started here, rank r on node place[r]. */
static int direct(int K, int N, const int *place, const char *const *rank_args, double limit)
{
    struct cu_node nodes[MAXK];
    int started = 0, fails = 0;
    for (; started < K; started++) {
        char cert[16];
        snprintf(cert, sizeof(cert), "node%d", started);
        if (cu_node_start(&nodes[started], cert, "ca", daemon_args)) {
            fails++;
            goto out;
        }
    }
    char job[64], env_place[128] = "XC_PLACE=";
    hx_job_name(job, sizeof(job), "xcoll");
    for (int r = 0; r < N; r++)
        snprintf(env_place + strlen(env_place), sizeof(env_place) - strlen(env_place), "%s%d",
                 r ? "," : "", place[r]);
    const char *env[] = {env_place, NULL};
    for (int i = 0; i < K; i++)
        tl_log("node %d: nexard at %s (%s)", i, nodes[i].addr, nodes[i].d.sock);
    tl_log("%s, coordinator %s", env_place, nodes[0].addr);

    pid_t pid[HX_MAX_RANKS];
    int done[HX_MAX_RANKS] = {0};
    for (int r = 0; r < N; r++)
        pid[r] = cu_rank_exec(nodes[place[r]].d.sock, nodes[0].addr, job, r, N, 60, rank_args,
                              env, NULL);
    /* Collect them; after the first failure the others get 15 s (their failure must
     * reach them through the daemons), then the rest is killed. */
    double end = tl_now() + limit;
    int left = N;
    while (left && tl_now() < end) {
        for (int r = 0; r < N; r++) {
            int ws;
            if (done[r] || pid[r] <= 0 || waitpid(pid[r], &ws, WNOHANG) != pid[r])
                continue;
            done[r] = 1;
            left--;
            if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
                char s[64];
                tl_log("FAIL: rank %d ended with %s", r, hx_describe_status(ws, s, sizeof(s)));
                fails++;
                if (end > tl_now() + 15)
                    end = tl_now() + 15;
            }
        }
        usleep(20000);
    }
    for (int r = 0; r < N; r++)
        if (!done[r]) {
            tl_log("FAIL: rank %d did not end in time; killed", r);
            if (pid[r] > 0) {
                kill(pid[r], SIGKILL);
                waitpid(pid[r], NULL, 0);
            }
            fails++;
        }
    /* The large ops' data went into them as the packets came (streamed receives,
     * transport.md): all of it with one connection a pair, lane 0's with lanes. */
    for (int i = 0; i < K && !fails; i++) {
        int rc;
        uint64_t v = 0;
        struct tj *j = tl_ctl_json(nodes[i].d.dir, nodes[i].d.sock, "stats", &rc);
        if (!j || rc != 0 || tj_u64(j, "bytes_streamed", &v) < 0) {
            tl_log("FAIL: node %d: nexarctl --json stats: exit %d, no bytes_streamed", i, rc);
            fails++;
        } else if (v == 0) {
            tl_log("FAIL: node %d streamed no bytes", i);
            fails++;
        } else {
            tl_log("node %d: %llu bytes streamed", i, (unsigned long long)v);
        }
        tj_free(j);
    }
out:
    for (int i = 0; i < started; i++)
        if (hx_daemon_stop(&nodes[i].d)) /* exit 0 on SIGTERM: part of the contract */
            fails++;
    return fails;
}

int main(int argc, char **argv)
{
    int K = 2, R = 1, interleaved = 0, use_direct = 0, lng = 0;
    double limit = 0;
    const char *level = "rep", *parts = "matrix,p2p,split";
    static const struct option lo[] = {{"nodes", required_argument, NULL, 'k'},
                                       {"per-node", required_argument, NULL, 'r'},
                                       {"interleaved", no_argument, NULL, 'i'},
                                       {"direct", no_argument, NULL, 'd'},
                                       {"level", required_argument, NULL, 'L'},
                                       {"long", no_argument, NULL, 'l'},
                                       {"parts", required_argument, NULL, 'p'},
                                       {"limit", required_argument, NULL, 't'},
                                       {"slot-bytes", required_argument, NULL, 's'},
                                       {"slots", required_argument, NULL, 'S'},
                                       {"heap-bytes", required_argument, NULL, 'H'},
                                       {"lanes", required_argument, NULL, 'q'},
                                       {"set", required_argument, NULL, 'e'},
                                       {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        switch (ch) {
        case 'k': K = atoi(optarg); break;
        case 'r': R = atoi(optarg); break;
        case 'i': interleaved = use_direct = 1; break;
        case 'd': use_direct = 1; break;
        case 'L': level = optarg; break;
        case 'l': lng = 1; break;
        case 'p': parts = optarg; break;
        case 't': limit = atof(optarg); break;
        case 's': slot_bytes = optarg; break;
        case 'S': slots = optarg; break;
        case 'H': heap_bytes = optarg; break;
        case 'q': snprintf(lanes_arg, sizeof(lanes_arg), "quic_lanes=%s", optarg); break;
        case 'e': set_arg = optarg; break;
        default: return 2;
        }
    }
    daemon_args[1] = slot_bytes;
    daemon_args[3] = slots;
    daemon_args[5] = heap_bytes;
    int da = 6;
    if (lanes_arg[0]) { /* several QUIC connections between every two daemons */
        daemon_args[da++] = "--set";
        daemon_args[da++] = lanes_arg;
    }
    if (set_arg) {
        daemon_args[da++] = "--set";
        daemon_args[da++] = set_arg;
    }
    snprintf(slot_arg, sizeof(slot_arg), "--slot-bytes=%s", slot_bytes);
    snprintf(slots_arg, sizeof(slots_arg), "--slots=%s", slots);
    snprintf(heap_arg, sizeof(heap_arg), "--heap-bytes=%s", heap_bytes);
    lng |= hx_env_flag("NEXAR_LONG_TESTS");
    int N = K * R;
    if (K < 1 || K > MAXK || R < 1 || N > HX_MAX_RANKS) {
        fprintf(stderr, "--nodes 1..%d, --per-node >= 1, at most %d ranks\n", MAXK, HX_MAX_RANKS);
        return 2;
    }
    const char *xr = getenv("XCOLL_RANK");
    if (!xr || !*xr || (!use_direct && !getenv("NEXAR_RUN"))) {
        fprintf(stderr, "SKIP: $XCOLL_RANK or $NEXAR_RUN is not set (run through meson test)\n");
        return HX_SKIP;
    }
    if (limit <= 0)
        limit = lng ? 3500 : 280;
    cu_init("xcoll"); /* exits 77 without QUIC */

    const char *rank_args[] = {xr, "--level", level, "--parts", parts, lng ? "--long" : NULL,
                               NULL};
    int place[HX_MAX_RANKS];
    for (int r = 0; r < N; r++)
        place[r] = interleaved ? r % K : r * K / N;
    tl_log("cross-node collectives: %d node(s) x %d rank(s), %s placement, %s, %s level%s%s%s",
           K, R, interleaved ? "interleaved (rank r on node r mod K)" : "block",
           use_direct ? "daemons started by the test" : "nexar-run --nodes", level,
           lng ? ", long" : "", lanes_arg[0] ? ", " : "", lanes_arg);
    double t0 = tl_now();
    int rv = use_direct ? direct(K, N, place, rank_args, limit)
                        : via_nexar_run(K, N, rank_args, limit);
    tl_log("ranks finished in %.1f s", tl_now() - t0);
    cu_fini();
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
