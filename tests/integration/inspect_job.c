/*
 * inspect_job.c - test_inspect.c's job section: daemons a and b form a job (rank 0 on a,
 * rank 1 on b, coordinator a) whose ranks run all_reduce and broadcast over and over
 * (inspect_rank.c), while the test inspects a remotely from the same host as b's daemon:
 * every report, round after round, with nexarctl --remote, plus 8 requests at once
 * through the library.  Then:
 *   - every element of every iteration was exact, and nothing failed;
 *   - a and b each have exactly one peer, the other daemon, up since before the
 *     inspections, and lost none: an inspector is no peer and supersedes none;
 *   - with the job idle (ranks waiting to be released), remote and local reports agree
 *     field by field (peers: all but the traffic counters the keep-alive moves).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inspect_test.h"
#include "nexar.h"

static const char *const cmds[] = {"status", "jobs", "comms", "ops", "stats", "peers"};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))
#define ROUNDS 5

static void touch(const char *name)
{
    char p[400];
    snprintf(p, sizeof(p), "%s/%s", cu_out(), name);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

/* n's one peer must be other, up; its since_s in *since. */
static void one_peer(const struct it_node *n, const struct it_node *other, int remote,
                     double *since)
{
    int rc;
    struct tj *p = remote ? it_remote_json(n, "peers", &rc) : it_local_json(n, "peers", &rc);
    const char *addr = p ? tj_str(p, "peers[0].addr") : NULL;
    const char *state = p ? tj_str(p, "peers[0].state") : NULL;
    IT_CHECK(p && rc == 0 && tj_len(p, "peers") == 1 && addr && !strcmp(addr, other->addr) &&
                 state && !strcmp(state, "up"),
             "%s peers on %s: %ld peer(s), the first %s, %s (want exactly %s, up)",
             remote ? "remote" : "local", n->name, p ? tj_len(p, "peers") : -1L,
             addr ? addr : "-", state ? state : "-", other->addr);
    if (since && p && tj_num(p, "peers[0].since_s", since) != 0)
        *since = -1;
    tj_free(p);
}

static void inspect_rounds(const struct it_node *a, const struct it_node *b)
{
    int bad = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < NCMDS; i++) {
            int rc;
            struct tj *v = it_remote_json(a, cmds[i], &rc);
            bad += !v || rc != 0;
            if (v && !strcmp(cmds[i], "jobs")) {
                const char *st = tj_str(v, "jobs[0].state");
                IT_CHECK(tj_len(v, "jobs") == 1 && st, "remote jobs while the job runs: %ld",
                         tj_len(v, "jobs"));
            }
            tj_free(v);
        }
        one_peer(a, b, 1, NULL);
        struct nxt_h3c_opts o;
        struct nxt_h3c_resp r[8];
        struct nxt_h3c_req rq = {.method = "GET", .path = "/v1/ops", .repeat = 8};
        char err[512];
        it_h3_opts(&o, a);
        int rv = nxt_h3c_request(&o, &rq, r, err, sizeof(err));
        for (int i = 0; i < 8; i++) {
            bad += rv != 0 || r[i].status != 200;
            nxt_h3c_resp_free(&r[i]);
        }
        if (rv)
            tl_log("8 GET /v1/ops at once: %s", err);
    }
    IT_CHECK(bad == 0, "%d remote inspections failed while the job ran", bad);
}

static void compare_idle(const struct it_node *a)
{
    static const char *const skip[] = {"uptime_s", "rss_bytes", "heap_bytes", "since_s", "rtt_ms",
                                       "min_rtt_ms", "rttvar_ms", "pto_ms", "cwnd", "bytes_sent",
                                       "bytes_recv", "pkts_sent", "pkts_recv", "pkts_lost",
                                       "msgs_sent", "msgs_recv", "queued_bytes", NULL};
    for (size_t i = 0; i < NCMDS; i++) {
        int rr, lr;
        struct tj *r = it_remote_json(a, cmds[i], &rr);
        struct tj *l = it_local_json(a, cmds[i], &lr);
        char where[256];
        IT_CHECK(r && l && rr == 0 && lr == 0 && it_same(r, l, skip, where, sizeof(where)),
                 "%s with the job idle: remote and local differ at %s", cmds[i],
                 r && l ? where : "(no answer)");
        tj_free(r);
        tj_free(l);
    }
}

void it_job_section(struct it_node *a, struct it_node *b)
{
    const char *argv[] = {getenv("INSPECT_RANK"), NULL};
    char log0[400], log1[400], text[1024];
    snprintf(log0, sizeof(log0), "%s/rank0.log", cu_out());
    snprintf(log1, sizeof(log1), "%s/rank1.log", cu_out());
    pid_t r0 = cu_rank_exec(a->d.sock, a->addr, "inspected", 0, 2, 60, argv, NULL, log0);
    pid_t r1 = cu_rank_exec(b->d.sock, a->addr, "inspected", 1, 2, 60, argv, NULL, log1);
    if (r0 < 0 || r1 < 0 || cu_wait_file("ready", 0, 30) || cu_wait_file("ready", 1, 30)) {
        tl_log("FAIL: the job did not form");
        it_fails++;
        touch("stop");
        touch("release");
        cu_wait_exit(r0, 30);
        cu_wait_exit(r1, 30);
        return;
    }
    double since0 = -1, since1 = -1;
    one_peer(a, b, 0, &since0);
    inspect_rounds(a, b);
    touch("stop");
    IT_CHECK(cu_wait_file("result", 0, 60) == 0 && cu_wait_file("result", 1, 60) == 0,
             "the ranks wrote no result");
    for (int r = 0; r < 2; r++) {
        long iters = -1, wrong = -1;
        int st = -1;
        if (cu_read("result", r, text, sizeof(text)) == 0)
            sscanf(text, "%ld %ld %d", &iters, &wrong, &st);
        IT_CHECK(iters >= 20 && wrong == 0 && st == 0,
                 "rank %d while inspected: %ld iterations, %ld wrong, status %d (%s)", r,
                 iters, wrong, st, text);
        tl_log("rank %d: %ld iterations of all_reduce + broadcast, %ld wrong", r, iters,
               wrong);
    }
    /* The job is idle now: the reports hold still. */
    compare_idle(a);
    pid_t pids[2] = {r0, r1};
    it_json_job(a, "inspected", pids, 2);
    one_peer(a, b, 0, &since1);
    IT_CHECK(since1 >= since0 && since0 >= 0,
             "a's connection to b is younger than the inspections (%.1f s, then %.1f s)",
             since0, since1);
    one_peer(b, a, 0, NULL);
    for (int n = 0; n < 2; n++) {
        int rc;
        uint64_t lost = 1;
        struct tj *s = it_local_json(n ? b : a, "stats", &rc);
        IT_CHECK(s && tj_u64(s, "peers_lost", &lost) == 0 && lost == 0,
                 "node %s lost %llu peer(s)", n ? "b" : "a", (unsigned long long)lost);
        tj_free(s);
    }
    touch("release");
    int e0 = cu_wait_exit(r0, 30), e1 = cu_wait_exit(r1, 30);
    IT_CHECK(e0 == 0 && e1 == 0, "ranks exited %d and %d", e0, e1);
    tl_log("job: exact while inspected, one peer each, reports equal when idle");
}
