/*
 * test_cluster_loss.c - a daemon killed with SIGKILL is found lost by the others.
 *
 * Three daemons A (coordinator), B, C with peer_idle_timeout_ms=2000 and a 500 ms
 * keep-alive (docs/configuration.md: the bound is exact while the keep-alive is at most
 * a third of the idle timeout); a job of 3 ranks, one per node, formed (so the daemons hold a full mesh of
 * connections).  The ranks poll with a barrier.  Then C gets SIGKILL:
 *  - `nexarctl peers --json` on A and on B shows C "lost" with a reason, within the idle
 *    timeout (2 s) plus the 100 ms tick and the polling (BUDGET_S); before the announced
 *    idle timeout took the keep-alive off, this took up to 2.5 s;
 *  - the ranks at A and B get NEXAR_ERR_PEER_LOST naming C and its rank, within it too;
 *  - A and B keep serving (a peer-test between them passes) and stop cleanly.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster_util.h"
#include "itest.h"
#include "nexar.h"

#define BUDGET_S 2.3

static int fails;

/* The state and reason of peer addr in a `peers --json` answer. */
static void peer_state(const char *json, const char *addr, char *state, size_t slen,
                       char *reason, size_t rlen)
{
    char pat[96];
    state[0] = reason[0] = '\0';
    snprintf(pat, sizeof(pat), "\"addr\":\"%s\"", addr);
    const char *p = strstr(json, pat);
    if (!p)
        return;
    const char *end = strchr(p, '}');
    const char *s = strstr(p, "\"state\":\"");
    if (s && (!end || s < end))
        snprintf(state, slen, "%.*s", (int)strcspn(s + 9, "\""), s + 9);
    const char *r = strstr(p, "\"reason\":\"");
    if (r && (!end || r < end))
        snprintf(reason, rlen, "%.*s", (int)strcspn(r + 10, "\""), r + 10);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
    cu_init("loss");
    struct cu_node n[3];
    const char *quick[] = {"--set", "peer_idle_timeout_ms=2000", "--set", "keepalive_ms=500",
                           NULL};
    static const char *const certs[] = {"node0", "node1", "node2"};
    for (int i = 0; i < 3; i++)
        if (cu_node_start(&n[i], certs[i], "ca", quick)) {
            cu_fini();
            return 1;
        }
    tl_log("A %s, B %s, C %s", n[0].addr, n[1].addr, n[2].addr);
    char job[64];
    hx_job_name(job, sizeof(job), "loss");
    pid_t rk[3];
    for (int r = 0; r < 3; r++)
        rk[r] = cu_rank(n[r].d.sock, n[0].addr, job, r, 3, "hold", 30);
    for (int r = 0; r < 3; r++)
        if (cu_wait_file("ready", r, 30)) {
            EXPECT_TRUE(fails, 0, "rank %d did not join within 30 s", r);
            goto out;
        }
    /* The mesh: B and C know each other although neither coordinates. */
    char out[8192], st[32], why[256];
    const char *q[] = {"--json", "peers", NULL};
    for (int i = 0; i < 100; i++) {
        cu_ctl(n[1].d.sock, q, out, sizeof(out), 5);
        peer_state(out, n[2].addr, st, sizeof(st), why, sizeof(why));
        if (!strcmp(st, "up"))
            break;
        usleep(20000);
    }
    EXPECT_TRUE(fails, !strcmp(st, "up"), "B has no connection to C (state \"%s\")", st);

    tl_log("SIGKILL to C (pid %d)", (int)n[2].d.pid);
    double t0 = mono_s();
    hx_daemon_kill(&n[2].d);
    double seen[2] = {0, 0};
    char reason[2][256];
    while (mono_s() - t0 < 10 && (!seen[0] || !seen[1])) {
        for (int i = 0; i < 2; i++) {
            if (seen[i])
                continue;
            cu_ctl(n[i].d.sock, q, out, sizeof(out), 5);
            peer_state(out, n[2].addr, st, sizeof(st), reason[i], sizeof(reason[i]));
            if (!strcmp(st, "lost"))
                seen[i] = mono_s() - t0;
        }
        usleep(20000);
    }
    for (int i = 0; i < 2; i++) {
        EXPECT_TRUE(fails, seen[i] > 0 && seen[i] <= BUDGET_S && reason[i][0],
                    "%s saw C lost after %.2f s (budget %.1f s), reason \"%s\"",
                    i ? "B" : "A", seen[i], BUDGET_S, reason[i]);
        tl_log("%s: C lost after %.2f s: %s", i ? "B" : "A", seen[i], reason[i]);
    }
    for (int r = 0; r < 2; r++) {
        char buf[1024];
        EXPECT_TRUE(fails, cu_wait_file("lost", r, 10) == 0, "rank %d never saw the loss", r);
        if (cu_read("lost", r, buf, sizeof(buf)))
            continue;
        int status = atoi(buf);
        long long ns = atoll(strchr(buf, ' ') ? strchr(buf, ' ') + 1 : "0");
        double dt = ns / 1e9 - t0;
        EXPECT_TRUE(fails, status == NEXAR_ERR_PEER_LOST && strstr(buf, n[2].addr) &&
                    strstr(buf, "rank(s) 2") && dt <= BUDGET_S,
                    "rank %d after %.2f s: %s", r, dt, buf);
        tl_log("rank %d: PEER_LOST after %.2f s: %s", r, dt, buf);
    }
    const char *pt[] = {"peer-test", n[1].addr, "--bytes", "4M", NULL};
    EXPECT_TRUE(fails, cu_ctl(n[0].d.sock, pt, out, sizeof(out), 30) == 0,
                "peer-test A -> B after the loss: %s", out);
out:
    for (int r = 0; r < 3; r++)
        cu_wait_exit(rk[r], 15);
    for (int i = 0; i < 2; i++)
        if (hx_daemon_stop(&n[i].d))
            fails++;
    hx_daemon_kill(&n[2].d);
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
