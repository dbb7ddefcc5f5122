/*
 * test_ctl_nodes.c - nexarctl jobs and ops on both daemons of a job across two nodes,
 * the coordinator (A) and the other one (B): ranks 0-1 at A, 2-3 at B, coordinator A
 * (ctlnodes_rank.c), an all_reduce that rank 0 holds up.  On each node:
 *
 *  - jobs: the formed job reads "running, 4/4 ranks joined" (every rank joined, four of
 *    them at the other node), and every rank of the other node has the pid and uid of
 *    the process there, state "remote": the rank table carries them (PeerRegister.pids,
 *    PeerRankTable.rank_pid/rank_uid).  Before, a node counted its own ranks only ("2/4
 *    ranks joined", as if the job were still forming) and showed pid 0 for the others;
 *  - ops: A waits for rank 0; B, whose ranks are all in, waits for A's node, named with
 *    its address and ranks;
 *  - the all_reduce is exact once rank 0 enters, and the reports still say 4/4.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_util.h"
#include "ctlrun.h"
#include "itest.h"
#include "nexar.h"

#define JOB "ctlnodes"
#define WORLD 4

static int fails;
static pid_t pids[WORLD];

static void touch(const char *name)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/%s", cu_out(), name);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

/* The node index of addr in the job's table on n ("nodes"), or -1. */
static int node_of(const struct tj *v, const char *addr)
{
    for (long i = 0; i < tj_len(v, "jobs[0].nodes"); i++) {
        char path[64];
        snprintf(path, sizeof(path), "jobs[0].nodes[%ld]", i);
        const char *a = tj_str(v, path);
        if (a && !strcmp(a, addr))
            return (int)i;
    }
    return -1;
}

/* jobs on n (who: "A" or "B"; here: the ranks at n), JSON and table. */
static void check_jobs(const struct cu_node *n, const char *who, int first_here,
                       const struct cu_node *coord)
{
    int rc = 0, before = fails;
    struct tj *v = tl_ctl_json(cu_out(), n->d.sock, "jobs", &rc);
    if (!v || rc != 0) {
        tl_log("FAIL %s: nexarctl --json jobs: exit %d", who, rc);
        fails++;
        tj_free(v);
        return;
    }
    uint64_t world = 0, joined = 0;
    const char *name = tj_str(v, "jobs[0].job"), *state = tj_str(v, "jobs[0].state");
    const char *c = tj_str(v, "jobs[0].coord");
    tj_u64(v, "jobs[0].world_size", &world);
    tj_u64(v, "jobs[0].joined", &joined);
    EXPECT_TRUE(fails, tj_len(v, "jobs") == 1 && name && !strcmp(name, JOB) && state &&
                !strcmp(state, "running") && world == WORLD && joined == WORLD,
                "%s: jobs: %ld job(s), %s %s, %llu/%llu joined (want " JOB " running 4/4)",
                who, tj_len(v, "jobs"), name ? name : "-", state ? state : "-",
                (unsigned long long)joined, (unsigned long long)world);
    EXPECT_TRUE(fails, c && !strcmp(c, coord->addr), "%s: coord %s, want %s", who,
                c ? c : "-", coord->addr);
    EXPECT_TRUE(fails, tj_len(v, "jobs[0].ranks") == WORLD, "%s: %ld ranks", who,
                tj_len(v, "jobs[0].ranks"));
    for (int r = 0; r < WORLD; r++) {
        char path[64];
        uint64_t pid = 0, uid = 99999;
        snprintf(path, sizeof(path), "jobs[0].ranks[%d].pid", r);
        tj_u64(v, path, &pid);
        snprintf(path, sizeof(path), "jobs[0].ranks[%d].uid", r);
        tj_u64(v, path, &uid);
        snprintf(path, sizeof(path), "jobs[0].ranks[%d].state", r);
        const char *st = tj_str(v, path);
        bool here = r >= first_here && r < first_here + 2;
        EXPECT_TRUE(fails, pid == (uint64_t)pids[r] && uid == (uint64_t)getuid() && st &&
                    (here ? strcmp(st, "remote") != 0 : !strcmp(st, "remote")),
                    "%s: rank %d: pid %llu uid %llu state %s (want pid %d uid %u, %s)", who, r,
                    (unsigned long long)pid, (unsigned long long)uid, st ? st : "-",
                    (int)pids[r], (unsigned)getuid(), here ? "here" : "remote");
    }
    tj_free(v);

    /* The table: the job's line, and each rank of the other node's row, token by token. */
    char out[8192], want[256];
    const char *args[] = {"jobs", NULL};
    rc = cu_ctl(n->d.sock, args, out, sizeof(out), 10);
    snprintf(want, sizeof(want), "job " JOB ": running, 4/4 ranks joined, uid %u\n",
             (unsigned)getuid());
    EXPECT_TRUE(fails, rc == 0 && !strncmp(out, want, strlen(want)),
                "%s: jobs table starts\n%s\nwant\n%s", who, out, want);
    for (int r = 0; r < WORLD; r++) {
        if (r >= first_here && r < first_here + 2)
            continue;
        char row[128];
        snprintf(row, sizeof(row), "%d %u %d remote 0 0 0 B", r, (unsigned)getuid(),
                 (int)pids[r]);
        EXPECT_TRUE(fails, tl_has_row(out, row), "%s: no row \"%s\" in\n%s", who, row, out);
    }
    if (fails == before)
        tl_log("ok: %s: jobs says 4/4 ranks joined, the other node's pids and uids", who);
}

/* ops on n: the one all_reduce, waiting for want_waiting (-1: none) and, across nodes,
 * for node `node` (coord's index) when across is set. */
static void check_ops(const struct cu_node *n, const char *who, int want_waiting,
                      const char *across_suffix)
{
    int rc = 0;
    struct tj *v = tl_ctl_json(cu_out(), n->d.sock, "ops", &rc);
    const char *job = v ? tj_str(v, "ops[0].job") : NULL;
    const char *across = v ? tj_str(v, "ops[0].across") : NULL;
    uint64_t w0 = 99;
    long nw = v ? tj_len(v, "ops[0].waiting_for") : -1;
    if (v)
        tj_u64(v, "ops[0].waiting_for[0]", &w0);
    EXPECT_TRUE(fails, v && rc == 0 && tj_len(v, "ops") == 1 && job && !strcmp(job, JOB),
                "%s: ops: exit %d, %ld op(s) of %s", who, rc, v ? tj_len(v, "ops") : -1,
                job ? job : "-");
    if (want_waiting >= 0)
        EXPECT_TRUE(fails, nw == 1 && w0 == (uint64_t)want_waiting,
                    "%s: ops waits for %ld rank(s), the first %llu (want rank %d)", who, nw,
                    (unsigned long long)w0, want_waiting);
    else
        EXPECT_TRUE(fails, nw == 0, "%s: ops waits for %ld local rank(s) (want none)", who,
                    nw);
    if (across_suffix) {
        size_t al = across ? strlen(across) : 0, sl = strlen(across_suffix);
        EXPECT_TRUE(fails, al > sl && !strcmp(across + al - sl, across_suffix),
                    "%s: across \"%s\" does not end with \"%s\"", who, across ? across : "-",
                    across_suffix);
        char out[8192], line[512];
        const char *args[] = {"ops", NULL};
        rc = cu_ctl(n->d.sock, args, out, sizeof(out), 10);
        snprintf(line, sizeof(line), "comm 1 seq 0 across nodes: %s\n", across ? across : "");
        EXPECT_TRUE(fails, rc == 0 && strstr(out, line), "%s: ops table\n%s\nlacks %s", who,
                    out, line);
    }
    tj_free(v);
}

/* B's op reached the step across nodes (its ranks are all in): its "across" is set. */
static int wait_across(const struct cu_node *n)
{
    for (int i = 0; i < 200; i++) {
        int rc;
        struct tj *v = tl_ctl_json(cu_out(), n->d.sock, "ops", &rc);
        const char *a = v ? tj_str(v, "ops[0].across") : NULL;
        int ok = a && *a;
        tj_free(v);
        if (ok)
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

int main(void)
{
    cu_init("ctl_nodes");
    const char *prog = getenv("CTLNODES_RANK");
    if (!prog) {
        fprintf(stderr, "SKIP: $CTLNODES_RANK is not set (run through meson test)\n");
        cu_fini();
        return HX_SKIP;
    }
    struct cu_node A, B;
    if (cu_node_start(&A, "node0", "ca", NULL) || cu_node_start(&B, "node1", "ca", NULL)) {
        cu_fini();
        return 1;
    }
    const char *argv[] = {prog, NULL};
    for (int r = 0; r < WORLD; r++)
        pids[r] = cu_rank_exec(r < 2 ? A.d.sock : B.d.sock, A.addr, JOB, r, WORLD, 60, argv,
                               NULL, NULL);
    for (int r = 0; r < WORLD; r++)
        if (pids[r] < 0 || cu_wait_file("ready", r, 30)) {
            tl_log("FAIL: rank %d did not start or the job did not form", r);
            fails++;
        }
    if (!fails && wait_across(&B)) {
        tl_log("FAIL: B's all_reduce never reached the step across nodes");
        fails++;
    }
    if (!fails) {
        int rc;
        struct tj *v = tl_ctl_json(cu_out(), B.d.sock, "jobs", &rc);
        int a_node = v ? node_of(v, A.addr) : -1;
        tj_free(v);
        char suffix[200];
        snprintf(suffix, sizeof(suffix), ": waiting for node %d (%s, ranks 0-1)", a_node,
                 A.addr);
        check_jobs(&A, "A (the coordinator)", 0, &A);
        check_jobs(&B, "B", 2, &A);
        check_ops(&A, "A", 0, NULL);
        check_ops(&B, "B", -1, suffix);
        tl_log("%s: ops: A waits for rank 0, B for node %d (%s)", fails ? "FAIL" : "ok",
               a_node, A.addr);
    }
    touch("go");
    for (int r = 0; r < WORLD; r++) {
        char text[64] = "";
        EXPECT_TRUE(fails, cu_wait_file("done", r, 30) == 0 &&
                    cu_read("done", r, text, sizeof(text)) == 0 && !strcmp(text, "0\n"),
                    "rank %d: all_reduce: %s", r, text[0] ? text : "no result");
    }
    if (!fails) {
        check_jobs(&A, "A after the op", 0, &A);
        check_jobs(&B, "B after the op", 2, &A);
    }
    touch("release");
    for (int r = 0; r < WORLD; r++)
        if (pids[r] > 0)
            EXPECT_TRUE(fails, cu_wait_exit(pids[r], 30) == 0, "rank %d did not exit 0", r);
    EXPECT_TRUE(fails, hx_daemon_stop(&A.d) == 0 && hx_daemon_stop(&B.d) == 0,
                "a daemon did not stop cleanly");
    tl_log("%s (%d failure(s))", fails ? "FAIL" : "PASS", fails);
    cu_fini();
    return fails ? 1 : 0;
}
