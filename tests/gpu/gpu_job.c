/* gpu_job.c - gx_job_main (gpu_util.h): the main of the suite's programs that run ranks. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"
#include "harness.h"

/* Set in the ranks that nexar-run starts (--nodes): they run fn and exit. */
#define AS_RANK_ENV "GX_AS_RANK"

/* NEXAR_TIMEOUT for the ranks (--nexar-timeout). */
static int nexar_timeout_s = 120;

/* One node: a private nexard of this program's own and ranks forked from here. */
static int one_node(int world, int (*fn)(struct hx_rank *r), double limit_s)
{
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL) < 0)
        return 1;
    struct hx_job_opts o = {.sock = d.sock, .size = world, .fn = fn,
                            .nexar_timeout_s = nexar_timeout_s};
    int rv = hx_run(&o, limit_s);
    if (hx_daemon_stop(&d) < 0)
        rv = -1;
    return rv ? 1 : 0;
}

/*
 * Several simulated nodes: nexar-run --nodes K starts K nexards (QUIC on loopback, its
 * own certificates) and runs this program again as every rank, so that the cross-node
 * path (staging through pinned memory) carries the device buffers, all on one GPU.
 */
static int nodes(int K, int world, double limit_s)
{
    const char *run = getenv("NEXAR_RUN");
    if (!run || !*run) {
        tl_log("FAIL: --nodes needs NEXAR_RUN (nexar-run's path)");
        return 1;
    }
    char exe[4096], k[16], n[16], t[16];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) {
        tl_log("FAIL: readlink /proc/self/exe");
        return 1;
    }
    exe[len] = '\0';
    snprintf(k, sizeof(k), "%d", K);
    snprintf(n, sizeof(n), "%d", world);
    snprintf(t, sizeof(t), "%d", nexar_timeout_s);
    const char *argv[] = {run, "--nodes", k, "-n", n, "--bind", "none", "--timeout", t,
                          "--grace", "10", "--", exe, NULL};
    const char *env[] = {AS_RANK_ENV "=1", NULL};
    tl_log("%d ranks on %d simulated nodes (nexar-run --nodes %d), one GPU", world, K, K);
    pid_t pid = hx_spawn(argv, env, NULL);
    if (pid < 0)
        return 1;
    int ws;
    if (hx_wait_pid(pid, limit_s, &ws)) {
        tl_log("FAIL: still running after %.0f s: stopping nexar-run", limit_s);
        kill(pid, SIGTERM); /* it stops its ranks and daemons */
        if (hx_wait_pid(pid, 15, &ws)) {
            kill(pid, SIGKILL);
            waitpid(pid, &ws, 0);
        }
        return 1;
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
        tl_log("FAIL: nexar-run exited %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
        return 1;
    }
    return 0;
}

int gx_job_main(int argc, char **argv, const char *test, const char *tag,
                int (*fn)(struct hx_rank *r), double limit_s)
{
    if (getenv(AS_RANK_ENV)) {
        const char *rank = getenv("NEXAR_RANK"), *size = getenv("NEXAR_WORLD_SIZE");
        struct hx_rank r = {.rank = rank ? atoi(rank) : -1, .size = size ? atoi(size) : 0,
                            .job = getenv("NEXAR_JOB"), .sock = getenv("NEXAR_SOCKET")};
        static char rtag[96];
        snprintf(rtag, sizeof(rtag), "%s r%d/%d", tag, r.rank, r.size);
        tl_set_log_tag(rtag);
        return fn(&r) ? 1 : 0;
    }
    tl_set_log_tag(tag);
    int world = 2, k = 1;
    static const struct option lo[] = {{"world", required_argument, NULL, 'w'},
                                       {"nodes", required_argument, NULL, 'k'},
                                       {"nexar-timeout", required_argument, NULL, 't'},
                                       {0, 0, 0, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        if (ch == 'w')
            world = atoi(optarg);
        else if (ch == 'k')
            k = atoi(optarg);
        else if (ch == 't')
            nexar_timeout_s = atoi(optarg);
        else
            return 64;
    }
    if (world < 1 || world > HX_MAX_RANKS || k < 1 || k > world || nexar_timeout_s < 1) {
        tl_log("FAIL: usage: %s [--world N] [--nodes K] [--nexar-timeout S], 1 <= K <= N <= %d",
               test, HX_MAX_RANKS);
        return 64;
    }
    gx_require_gpu(test);
    hx_require_nexard();
    return k > 1 ? nodes(k, world, limit_s) : one_node(world, fn, limit_s);
}
