/*
 * test_xshrink.c - survive a lost rank or node across nodes (issue 12): daemons A, B, C on
 * loopback with QUIC and real certificates (cluster_util.c; peer_idle_timeout_ms=2000,
 * keepalive_ms=500), ranks of xshrink_rank.c looping all_reduces.
 *
 *  0. grow across nodes: 3 ranks (0, 1 at A; 2 at B) grow by 2 joiners (NEXAR_JOIN=1), one
 *     started at A and one at B: A's becomes rank 3, B's rank 4 (node order: by lowest rank,
 *     though B's member registers first); the 5 run
 *     exact all_reduces and a broadcast from rank 4, rank 4 dies, the 4 shrink, exact.
 *  7. splits across nodes: 2 x 2 split by parity, rank 3 (B) dies: {1, 3} fails for rank 1,
 *     {0, 2} (across A and B) goes on with 50 exact all_reduces: only communicators with
 *     the lost rank fail, not the job.
 *  1. 2 nodes x 2 ranks (0, 1 at A; 2, 3 at B): rank 3 SIGKILLs itself.
 *  2. 3 nodes x 1 rank: rank 1 (at B) SIGKILLs itself; A and C shrink to 2 ranks.
 *  3. 3 nodes x 1 rank: C's nexard gets SIGKILL; the ranks at A and B shrink to 2.
 *  6. a replacement node: 3 x 1, C's nexard killed, A and B shrink to 2 and call
 *     nexar_comm_grow(1); C is restarted (a new port) and a process started there with
 *     NEXAR_JOIN=1 and NEXAR_COORD=A joins: C's daemon, which never knew the job, becomes
 *     its node through the coordinator, and the 3 run exact all_reduces.
 *  4. a node lost during the agreement: 3 x 1, rank 1 (B) killed; C's rank calls shrink,
 *     A's holds back; C's nexard gets SIGKILL; then A's rank calls shrink.  A, the leader,
 *     has C's READY and decides at once with C in; the shrunk communicator's first op
 *     fails when A notices C's loss, and A shrinks again, to itself (failed {1, 2}).
 *  5. the leader lost during the agreement: the same with A's rank in the agreement and
 *     C's held back, and A's nexard killed: C becomes the leader and shrinks to itself.
 * Each time every survivor gets NEXAR_ERR_PEER_LOST, nexar_comm_failed_ranks lists
 * exactly the lost rank(s), shrink gives the survivors in their old order, and 100
 * all_reduces, a split and a broadcast on the shrunk communicator are exact.  Printed:
 * from the kill to every survivor's PEER_LOST, and from there to the shrunk
 * communicator's first all_reduce.  Budgets: a rank's death 1 s + 1 s; a node's, the
 * idle timeout (2 s) + 1 s, then 1 s.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_util.h"
#include "itest.h"
#include "outfile.h"

#define MAXR 4

static int fails;
static struct cu_node nd[3];

/* The time in <name><rank>: its first number, or for "lost" (STATUS T TEXT) its second. */
static double read_time(const char *name, int r, double limit_s)
{
    char buf[2048];
    int st;
    double t;
    if (cu_wait_file(name, r, limit_s) || cu_read(name, r, buf, sizeof(buf)))
        return -1;
    if (!strcmp(name, "lost"))
        return sscanf(buf, "%d %lf", &st, &t) == 2 ? t : -1;
    return atof(buf);
}

static void clear_out(void)
{
    hx_rmtree(cu_out());
    mkdir(cu_out(), 0700);
}

/* Runs one scenario: node[r] places rank r; victim kills itself (-1: kill_node's daemon
 * is killed by the test).  dead: the ranks that fail. */
static void scenario(const char *title, int nranks, const int *node, int victim,
                     int kill_node, const char *dead, double lost_budget)
{
    char job[64], e_victim[32], e_dead[32];
    pid_t pid[MAXR];
    clear_out();
    tl_log("%s", title);
    hx_job_name(job, sizeof(job), "xshrink");
    snprintf(e_victim, sizeof(e_victim), "XS_VICTIM=%d", victim);
    snprintf(e_dead, sizeof(e_dead), "XS_DEAD=%s", dead);
    const char *argv[] = {getenv("XSHRINK_RANK"), NULL};
    const char *env[] = {e_victim, e_dead, NULL};
    for (int r = 0; r < nranks; r++)
        pid[r] = cu_rank_exec(nd[node[r]].d.sock, nd[0].addr, job, r, nranks, 20, argv, env,
                              NULL);
    for (int r = 0; r < nranks; r++)
        if (read_time("ready", r, 30) < 0) {
            EXPECT_TRUE(fails, 0, "rank %d never completed an all_reduce", r);
            goto reap;
        }
    double t_kill;
    if (victim >= 0) {
        t_kill = read_time("kill", victim, 20);
    } else {
        t_kill = tl_now();
        hx_daemon_kill(&nd[kill_node].d);
    }
    double lost = 0, ready = 0;
    for (int r = 0; r < nranks; r++) {
        if (r == victim || (victim < 0 && node[r] == kill_node))
            continue;
        char buf[2048];
        double tl = read_time("lost", r, lost_budget + 10), ts = read_time("shrunk", r, 20);
        if (cu_wait_file("end", r, 20) == 0 && cu_read("end", r, buf, sizeof(buf)) == 0 &&
            strncmp(buf, "OK", 2)) {
            EXPECT_TRUE(fails, 0, "rank %d: %s", r, buf);
            continue;
        }
        char lb[2048] = "";
        cu_read("lost", r, lb, sizeof(lb));
        tl_log("   rank %d (node %c): %s", r, 'A' + node[r], lb);
        EXPECT_TRUE(fails, tl > 0 && ts > 0 && atoi(lb) == NEXAR_ERR_PEER_LOST,
                    "rank %d did not get PEER_LOST and shrink", r);
        if (tl - t_kill > lost)
            lost = tl - t_kill;
        if (ts - tl > ready)
            ready = ts - tl;
    }
    tl_log("   timing: kill -> every survivor's PEER_LOST %.1f ms (budget %.1f s); PEER_LOST "
           "-> shrunk communicator's first all_reduce %.1f ms (budget 1 s)", lost * 1e3,
           lost_budget, ready * 1e3);
    EXPECT_TRUE(fails, lost <= lost_budget && ready <= 1.0, "timing above the budget");
reap:
    for (int r = 0; r < nranks; r++) {
        int code = cu_wait_exit(pid[r], 30);
        bool killed = r == victim;
        EXPECT_TRUE(fails, killed ? code == 128 + SIGKILL : code == 0,
                    "rank %d exited %d", r, code);
    }
}

static void split_across(void)
{
    static const int node[] = {0, 0, 1, 1};
    char job[64];
    pid_t pid[4];
    clear_out();
    tl_log("7. splits across nodes: rank 3 dies; the half without it goes on");
    hx_job_name(job, sizeof(job), "xsplit-loss");
    const char *argv[] = {getenv("XSHRINK_RANK"), NULL};
    const char *env[] = {"XS_MODE=split", NULL};
    for (int r = 0; r < 4; r++)
        pid[r] = cu_rank_exec(nd[node[r]].d.sock, nd[0].addr, job, r, 4, 20, argv, env, NULL);
    for (int r = 0; r < 3; r++) {
        char buf[2048] = "";
        cu_wait_file("end", r, 30);
        cu_read("end", r, buf, sizeof(buf));
        EXPECT_TRUE(fails, !strncmp(buf, "OK", 2), "rank %d: %s", r, buf);
    }
    for (int r = 0; r < 4; r++) {
        int code = cu_wait_exit(pid[r], 30);
        EXPECT_TRUE(fails, r == 3 ? code == 128 + SIGKILL : code == 0, "rank %d exited %d", r,
                    code);
    }
    tl_log("   %s", fails ? "FAILED" : "ok: {0, 2} went on, {1, 3} failed for rank 1");
}

static void grow_across(void)
{
    static const int node[] = {0, 0, 1};
    char job[64];
    pid_t pid[5];
    clear_out();
    tl_log("0. grow across nodes: ranks 0, 1 at A and 2 at B grow by 2 joiners (A and B)");
    hx_job_name(job, sizeof(job), "xgrow");
    const char *argv[] = {getenv("XSHRINK_RANK"), NULL};
    const char *members[] = {"XS_MODE=grow", NULL};
    const char *joiners[] = {"XS_MODE=joiner", "NEXAR_JOIN=1", NULL};
    /* B's member first, so that B registers with the coordinator before A: the node
     * order the joiners are ranked in follows the ranks (A holds rank 0), not arrival. */
    for (int i = 0; i < 3; i++) {
        int r = (i + 2) % 3;
        pid[r] = cu_rank_exec(nd[node[r]].d.sock, nd[0].addr, job, r, 3, 20, argv, members,
                              NULL);
        if (i == 0)
            usleep(300 * 1000);
    }
    for (int r = 0; r < 3; r++)
        if (read_time("formed", r, 20) < 0)
            EXPECT_TRUE(fails, 0, "member %d never formed", r);
    double t0 = tl_now();
    pid[3] = cu_rank_exec(nd[0].d.sock, nd[0].addr, job, 0, 1, 20, argv, joiners, NULL);
    usleep(100 * 1000); /* A's joiner first: the order within a node is arrival order */
    pid[4] = cu_rank_exec(nd[1].d.sock, nd[0].addr, job, 0, 1, 20, argv, joiners, NULL);
    for (int r = 0; r < 5; r++) {
        char buf[2048] = "";
        if (r != 4 && (cu_wait_file("end", r, 30) || cu_read("end", r, buf, sizeof(buf)) ||
                       strncmp(buf, "OK", 2)))
            EXPECT_TRUE(fails, 0, "rank %d of the grown communicator: %s", r, buf);
    }
    double tg = read_time("grown", 3, 1);
    tl_log("   the 5 ran, rank 4 died, the 4 shrank: %s (grown %.1f ms after the joiners "
           "started)", fails ? "FAILED" : "ok", (tg - t0) * 1e3);
    char who[16] = "";
    cu_read("kill", 4, who, sizeof(who));
    for (int i = 0; i < 5; i++) {
        int code = cu_wait_exit(pid[i], 30);
        /* pid[4] is B's joiner: rank 4 of the grown communicator, killed */
        EXPECT_TRUE(fails, i == 4 ? code == 128 + SIGKILL : code == 0, "process %d exited %d",
                    i, code);
    }
}

static void replacement(const char *const *certs, const char *const *quick)
{
    static const int node[] = {0, 1, 2};
    char job[64];
    pid_t pid[3], jp;
    clear_out();
    tl_log("6. a replacement node: C's nexard killed, A and B shrink, a joiner at a restarted "
           "C makes them 3 again");
    hx_job_name(job, sizeof(job), "xreplace");
    const char *argv[] = {getenv("XSHRINK_RANK"), NULL};
    const char *env[] = {"XS_MODE=replace", "XS_DEAD=2", NULL};
    const char *jenv[] = {"XS_MODE=replacement", "NEXAR_JOIN=1", NULL};
    for (int r = 0; r < 3; r++)
        pid[r] = cu_rank_exec(nd[node[r]].d.sock, nd[0].addr, job, r, 3, 20, argv, env, NULL);
    for (int r = 0; r < 3; r++)
        if (read_time("ready", r, 20) < 0) {
            EXPECT_TRUE(fails, 0, "rank %d never completed an all_reduce", r);
            return;
        }
    hx_daemon_kill(&nd[2].d);
    if (read_time("shrunk", 0, 20) < 0 || read_time("shrunk", 1, 20) < 0) {
        EXPECT_TRUE(fails, 0, "A and B did not shrink");
        return;
    }
    if (cu_node_start(&nd[2], certs[2], "ca", quick)) {
        EXPECT_TRUE(fails, 0, "node C did not restart");
        return;
    }
    double t0 = tl_now();
    jp = cu_rank_exec(nd[2].d.sock, nd[0].addr, job, 0, 1, 20, argv, jenv, NULL);
    char buf[2048] = "";
    for (int r = 0; r < 2; r++) {
        buf[0] = '\0';
        cu_wait_file("end", r, 30);
        cu_read("end", r, buf, sizeof(buf));
        EXPECT_TRUE(fails, !strncmp(buf, "OK", 2), "rank %d: %s", r, buf);
    }
    buf[0] = '\0';
    cu_wait_file("jend", 2, 30);
    cu_read("jend", 2, buf, sizeof(buf));
    double tg = read_time("grown", 0, 1);
    tl_log("   the joiner at the restarted C (%s) is rank 2 of 3, %.0f ms after it started: %s",
           nd[2].addr, (tg - t0) * 1e3, buf);
    EXPECT_TRUE(fails, !strncmp(buf, "OK", 2), "the replacement: %s", buf);
    for (int r = 0; r < 3; r++) {
        int code = cu_wait_exit(pid[r], 30);
        EXPECT_TRUE(fails, code == 0, "rank %d exited %d", r, code);
    }
    EXPECT_TRUE(fails, cu_wait_exit(jp, 30) == 0, "the replacement did not exit 0");
    if (hx_daemon_stop(&nd[2].d))
        fails++;
}

/* A node lost while the others agree: rank 1 (B) dies; `held`'s rank waits, the other
 * survivor (at node `victim_node`) is in its shrink when its nexard is killed; then the
 * held one shrinks alone. */
static void agreement_loss(const char *title, int victim_node, int held)
{
    static const int node[] = {0, 1, 2};
    char job[64], e_hold[32];
    pid_t pid[3];
    clear_out();
    tl_log("%s", title);
    hx_job_name(job, sizeof(job), "xshrink-agree");
    snprintf(e_hold, sizeof(e_hold), "XS_HOLD=%d", held);
    const char *argv[] = {getenv("XSHRINK_RANK"), NULL};
    const char *env[] = {"XS_VICTIM=1", "XS_DEAD=1,2", e_hold, NULL};
    if (held == 2)
        env[1] = "XS_DEAD=0,1";
    for (int r = 0; r < 3; r++)
        pid[r] = cu_rank_exec(nd[node[r]].d.sock, nd[0].addr, job, r, 3, 20, argv, env, NULL);
    int other = victim_node; /* the survivor in the agreement: the victim node's rank */
    if (read_time("held", held, 20) < 0 || read_time("lost", other, 20) < 0) {
        EXPECT_TRUE(fails, 0, "the survivors never saw rank 1 die");
    } else {
        usleep(300 * 1000); /* its shrink is in: its node sent READY */
        double t_kill = tl_now();
        hx_daemon_kill(&nd[victim_node].d);
        tl_put_file(cu_out(), "go", 0, "1\n");
        char buf[2048] = "";
        double ts = read_time("shrunk", held, 20);
        cu_wait_file("end", held, 20);
        cu_read("end", held, buf, sizeof(buf));
        char rounds[32] = "?";
        cu_read("rounds", held, rounds, sizeof(rounds));
        rounds[strcspn(rounds, "\n")] = '\0';
        tl_log("   rank %d shrank alone %.2f s after node %c's nexard was killed, in %s "
               "shrink(s): %s", held, ts - t_kill, 'A' + victim_node, rounds, buf);
        EXPECT_TRUE(fails, ts > 0 && !strncmp(buf, "OK", 2) && ts - t_kill <= 3.0,
                    "rank %d did not shrink alone within 3 s", held);
        buf[0] = '\0';
        cu_wait_file("end", other, 10);
        cu_read("end", other, buf, sizeof(buf));
        tl_log("   rank %d (its nexard killed during its shrink): %s", other, buf);
        EXPECT_TRUE(fails, !strncmp(buf, "UNAVAILABLE", 11), "rank %d: %s", other, buf);
    }
    for (int r = 0; r < 3; r++) {
        int code = cu_wait_exit(pid[r], 30);
        EXPECT_TRUE(fails, r == 1 ? code == 128 + SIGKILL : code == 0, "rank %d exited %d", r,
                    code);
    }
}

int main(void)
{
    if (!getenv("XSHRINK_RANK")) {
        fprintf(stderr, "SKIP: $XSHRINK_RANK is not set (run through meson test)\n");
        return HX_SKIP;
    }
    cu_init("xshrink");
    const char *quick[] = {"--set", "peer_idle_timeout_ms=2000", "--set", "keepalive_ms=500",
                           NULL};
    static const char *const certs[] = {"node0", "node1", "node2"};
    for (int i = 0; i < 3; i++)
        if (cu_node_start(&nd[i], certs[i], "ca", quick)) {
            for (int k = 0; k < i; k++)
                hx_daemon_kill(&nd[k].d);
            cu_fini();
            return 1;
        }
    tl_log("shrink across nodes: A %s (coordinator), B %s, C %s", nd[0].addr, nd[1].addr,
           nd[2].addr);
    static const int two_by_two[] = {0, 0, 1, 1}, three[] = {0, 1, 2};
    grow_across();
    split_across();
    scenario("1. 2 nodes x 2 ranks: rank 3 (node B) killed", 4, two_by_two, 3, -1, "3", 1.0);
    scenario("2. 3 nodes x 1 rank: rank 1 (node B) killed", 3, three, 1, -1, "1", 1.0);
    scenario("3. 3 nodes x 1 rank: node C's nexard killed", 3, three, -1, 2, "2", 3.0);
    if (cu_node_start(&nd[2], certs[2], "ca", quick) == 0)
        replacement(certs, quick);
    else
        EXPECT_TRUE(fails, 0, "node C did not restart");
    if (cu_node_start(&nd[2], certs[2], "ca", quick) == 0) {
        tl_log("node C restarted at %s", nd[2].addr);
        agreement_loss("4. node C lost while rank 2 (C) is in the agreement and rank 0 (A) "
                       "holds back", 2, 0);
    } else {
        EXPECT_TRUE(fails, 0, "node C did not restart");
    }
    if (cu_node_start(&nd[2], certs[2], "ca", quick) == 0) {
        tl_log("node C restarted at %s", nd[2].addr);
        agreement_loss("5. the leader A lost while rank 0 (A) is in the agreement and rank 2 "
                       "(C) holds back", 0, 2);
    } else {
        EXPECT_TRUE(fails, 0, "node C did not restart");
    }
    /* A is gone after 5; B and C stop cleanly. */
    if (hx_daemon_stop(&nd[1].d) || hx_daemon_stop(&nd[2].d))
        fails++;
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
