/*
 * test_ctl_report.c - what nexarctl status, jobs, comms, ops and stats report about a
 * job whose every op the test drives, checked field by field in --json and in the
 * tables, against values the test knows independently:
 *
 *  stage 0  nexard alone: 0 clients, jobs, communicators, no shared memory, every
 *           counter 0, its version, pid and socket;
 *  stage 1  2 ranks joined and ran 3 all_reduce(1024 f32) and one staged in 3 chunks:
 *           2 clients, 1 job, 1 communicator of size 2 with next_seq 4, 4 ops submitted
 *           and completed per rank (comms), 6 descriptors and their input bytes (jobs),
 *           the ranks' pids, the segments' size from the geometry the test gave nexard,
 *           4 ops / 6 chunks / both ranks' bytes reduced (stats);
 *  stage 2  rank 0 entered a 5th all_reduce, rank 1 did not: ops shows that op (seq 4,
 *           signature, 0/1 chunks, its algorithm) waiting for rank 1, its age growing;
 *           comms shows rank 0 active with 5 submitted, rank 1 idle;
 *  stage 3  both finished it: no op in flight, counters +1;
 *  stage 4  a communicator split off the world fails (MISMATCH) and both ranks free it:
 *           it is gone from comms and status at once, the world counts the split;
 *  stage 5  an all_reduce with different counts on the world: comms shows the
 *           communicator failed with the reason, stats 2 mismatches and 2 failed ops;
 *  end      the ranks finalized: back to 0 clients, jobs and communicators, and no client
 *           or peer counted lost (their exits were clean).
 */
#include <ctype.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "ctlrun.h"
#include "itest.h"
#include "shm_abi.h"

#define COUNT 1024
#define BIG 40000 /* 160000 bytes: 3 chunks through 64 KiB slots */
#define SLOTS 4
#define SLOT_BYTES 65536
#define HEAP_BYTES 1048576

static int fails;
static const char *g_sock, *g_dir;

struct sh {
    volatile int stage[2];
    volatile int go;
    volatile pid_t pid[2];
};

/* ---- the ranks ---------------------------------------------------------------------- */

static float val(int rank, size_t i)
{
    return (float)((int)((i * 13 + (size_t)rank * 5) % 41) - 20);
}

static int allreduce_checked(nexar_comm_t *w, int me, size_t count, const char *what)
{
    static float buf[BIG];
    for (size_t i = 0; i < count; i++)
        buf[i] = val(me, i);
    int f = 0;
    if (EXPECT_OK(f, what, nexar_all_reduce(w, buf, count, NEXAR_F32, NEXAR_SUM)))
        return 1;
    for (size_t i = 0; i < count; i++)
        if (buf[i] != val(0, i) + val(1, i)) {
            tl_log("FAIL %s: element %zu is %g, expected %g", what, i, buf[i],
                   val(0, i) + val(1, i));
            return 1;
        }
    return 0;
}

static int wait_go(struct sh *s, int k)
{
    double end = tl_now() + 60;
    while (s->go < k) {
        if (tl_now() > end) {
            tl_log("FAIL: the test never let stage %d start", k);
            return 1;
        }
        usleep(1000);
    }
    return 0;
}

static int rank_main(struct hx_rank *r)
{
    struct sh *s = r->arg;
    int me = r->rank, f = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    s->pid[me] = getpid();
    for (int k = 0; k < 3; k++)
        f += allreduce_checked(w, me, COUNT, "all_reduce (stage 1)");
    f += allreduce_checked(w, me, BIG, "staged all_reduce (stage 1)");
    s->stage[me] = 1;
    f += wait_go(s, 1);
    if (me == 1)
        f += wait_go(s, 2);
    f += allreduce_checked(w, me, COUNT, "all_reduce (stage 2)");
    s->stage[me] = 2;
    f += wait_go(s, 3);
    /* A communicator of both ranks that fails, and that they free. */
    nexar_comm_t *sub = NULL;
    float x[2] = {1, 2};
    if (!EXPECT_OK(f, "comm_split", nexar_comm_split(w, 0, (uint32_t)me, &sub))) {
        EXPECT_ST(f, NEXAR_ERR_MISMATCH, "all_reduce on the split, count 1 against count 2",
                  nexar_all_reduce(sub, x, (size_t)me + 1, NEXAR_F32, NEXAR_SUM));
        EXPECT_OK(f, "comm_free of the failed split", nexar_comm_free(sub));
    }
    s->stage[me] = 3;
    f += wait_go(s, 4);
    EXPECT_ST(f, NEXAR_ERR_MISMATCH, "all_reduce with count 1 against count 2",
              nexar_all_reduce(w, x, (size_t)me + 1, NEXAR_F32, NEXAR_SUM));
    s->stage[me] = 4;
    f += wait_go(s, 5);
    EXPECT_OK(f, "finalize", nexar_finalize());
    return f ? 1 : 0;
}

/* ---- checks ------------------------------------------------------------------------- */

/* Waits until both ranks reached stage k. */
static int reached(struct sh *s, int k)
{
    double end = tl_now() + 30;
    while (tl_now() < end)
        if (s->stage[0] >= k && s->stage[1] >= k)
            return 0;
        else
            usleep(2000);
    tl_log("FAIL: the ranks did not reach stage %d (at %d and %d)", k, s->stage[0], s->stage[1]);
    fails++;
    return -1;
}

static void want_u64(const struct tj *v, const char *cmd, const char *path, uint64_t want)
{
    uint64_t got = 0;
    if (tj_u64(v, path, &got) || got != want) {
        tl_log("FAIL nexarctl %s: %s is %s, expected %llu", cmd, path,
               tj_at(v, path) ? (tj_at(v, path)->str ? tj_at(v, path)->str : "not a number")
                              : "missing",
               (unsigned long long)want);
        fails++;
    }
}

static void want_str(const struct tj *v, const char *cmd, const char *path, const char *want)
{
    const char *got = tj_str(v, path);
    if (!got || strcmp(got, want)) {
        tl_log("FAIL nexarctl %s: %s is \"%s\", expected \"%s\"", cmd, path,
               got ? got : "(missing)", want);
        fails++;
    }
}

static struct tj *json(const char *cmd)
{
    int rc = 0;
    struct tj *v = tl_ctl_json(g_dir, g_sock, cmd, &rc);
    if (!v || rc != 0) {
        tl_log("FAIL: nexarctl --json %s: exit %d", cmd, rc);
        fails++;
        tj_free(v);
        return NULL;
    }
    want_str(v, cmd, "command", cmd);
    want_u64(v, cmd, "status", 0);
    return v;
}

/* The table output of cmd (static buffer). */
static const char *table(const char *cmd)
{
    static struct tl_ctl r;
    const char *args[] = {"-s", g_sock, cmd, NULL};
    if (tl_ctl_run(&r, g_dir, args, 20) != 0) {
        tl_log("FAIL: nexarctl %s: exit %d: %s", cmd, r.rc, r.err);
        fails++;
    }
    return r.out;
}

/* True when a line of text, with runs of blanks folded to one, contains words. */
static int has_line(const char *text, const char *words)
{
    char line[1024];
    for (const char *p = text; *p;) {
        size_t n = 0;
        int blank = 0;
        for (; *p && *p != '\n'; p++) {
            if (isblank((unsigned char)*p)) {
                blank = n > 0;
                continue;
            }
            if (blank && n < sizeof(line) - 1)
                line[n++] = ' ';
            blank = 0;
            if (n < sizeof(line) - 1)
                line[n++] = *p;
        }
        line[n] = '\0';
        if (strstr(line, words))
            return 1;
        if (*p)
            p++;
    }
    return 0;
}

static void want_line(const char *cmd, const char *text, const char *words)
{
    if (!has_line(text, words)) {
        tl_log("FAIL nexarctl %s: no line with \"%s\" in:\n%s", cmd, words, text);
        fails++;
    }
}

struct counters {
    uint64_t ops_completed, ops_failed, bytes_reduced, bytes_copied, chunks, p2p_messages,
        clients_accepted, clients_dropped, protocol_violations, mismatches, timeouts,
        peers_lost, recoveries, bytes_pulled, bytes_streamed;
};

/* stats: every counter exactly as expected, in JSON and in the table. */
static void check_stats(const struct counters *c, const char *when)
{
    struct tj *v = json("stats");
    if (!v)
        return;
    int before = fails;
#define ONE(f) want_u64(v, "stats", #f, c->f);
    ONE(ops_completed) ONE(ops_failed) ONE(bytes_reduced) ONE(bytes_copied) ONE(chunks)
    ONE(p2p_messages) ONE(clients_accepted) ONE(clients_dropped) ONE(protocol_violations)
    ONE(mismatches) ONE(timeouts) ONE(peers_lost) ONE(recoveries) ONE(bytes_pulled)
    ONE(bytes_streamed)
#undef ONE
    /* How often the loop found another program on its core, and how often one of its
     * turns took a second: the host's, not the test's. */
    uint64_t pauses, stalls;
    EXPECT_TRUE(fails, tj_u64(v, "spin_pauses", &pauses) == 0, "stats: no spin_pauses");
    EXPECT_TRUE(fails, tj_u64(v, "loop_stalls", &stalls) == 0, "stats: no loop_stalls");
    EXPECT_TRUE(fails, tj_len(v, "") == 19, "stats: %ld members, expected command, status "
                "and 17 counters", tj_len(v, ""));
    tj_free(v);
    const char *t = table("stats");
    char w[128];
    snprintf(w, sizeof(w), "ops completed %llu", (unsigned long long)c->ops_completed);
    want_line("stats", t, w);
    snprintf(w, sizeof(w), "bytes reduced %llu", (unsigned long long)c->bytes_reduced);
    want_line("stats", t, w);
    snprintf(w, sizeof(w), "mismatches %llu", (unsigned long long)c->mismatches);
    want_line("stats", t, w);
    if (fails == before)
        tl_log("ok: stats %s: ops %llu, failed %llu, chunks %llu, reduced %llu B, clients "
               "%llu accepted", when, (unsigned long long)c->ops_completed,
               (unsigned long long)c->ops_failed, (unsigned long long)c->chunks,
               (unsigned long long)c->bytes_reduced, (unsigned long long)c->clients_accepted);
}

/* status: the given counts, and what identifies this daemon. */
static void check_status(pid_t daemon_pid, uint64_t clients, uint64_t jobs, uint64_t comms,
                         uint64_t shm_bytes, const char *when)
{
    struct tj *v = json("status");
    if (!v)
        return;
    int before = fails;
    want_str(v, "status", "version", NEXAR_VERSION);
    want_u64(v, "status", "pid", (uint64_t)daemon_pid);
    want_str(v, "status", "socket", g_sock);
    want_u64(v, "status", "clients", clients);
    want_u64(v, "status", "jobs", jobs);
    want_u64(v, "status", "comms", comms);
    want_u64(v, "status", "shm_bytes", shm_bytes);
    double up = -1;
    uint64_t rss = 0;
    EXPECT_TRUE(fails, !tj_num(v, "uptime_s", &up) && up > 0 && up < 120,
                "status: uptime_s %g", up);
    EXPECT_TRUE(fails, !tj_u64(v, "rss_bytes", &rss) && rss > (1u << 20) && rss < (1ull << 32),
                "status: rss_bytes %llu", (unsigned long long)rss);
    uint64_t heap = 0;
    EXPECT_TRUE(fails, !tj_u64(v, "heap_bytes", &heap) && heap > 0 && heap < (1ull << 32),
                "status: heap_bytes %llu", (unsigned long long)heap);
    tj_free(v);
    const char *t = table("status");
    char w[128];
    snprintf(w, sizeof(w), "nexard %s, pid %d, up ", NEXAR_VERSION, (int)daemon_pid);
    want_line("status", t, w);
    snprintf(w, sizeof(w), "socket %s", g_sock);
    want_line("status", t, w);
    snprintf(w, sizeof(w), "clients %llu", (unsigned long long)clients);
    want_line("status", t, w);
    snprintf(w, sizeof(w), "communicators %llu", (unsigned long long)comms);
    want_line("status", t, w);
    if (fails == before)
        tl_log("ok: status %s: %llu clients, %llu jobs, %llu comms, %llu B shm, up %.2f s",
               when, (unsigned long long)clients, (unsigned long long)jobs,
               (unsigned long long)comms, (unsigned long long)shm_bytes, up);
}

/* comms: the one communicator, its next_seq, and per rank (submitted, completed, state). */
static void check_comms(const char *job, struct sh *s, uint64_t next_seq, const uint64_t sub[2],
                        const uint64_t done[2], const uint64_t bytes_in[2],
                        const char *const state[2], const char *comm_state_prefix,
                        uint64_t *comm_id)
{
    struct tj *v = json("comms");
    if (!v)
        return;
    int before = fails;
    EXPECT_TRUE(fails, tj_len(v, "comms") == 1, "comms: %ld communicators, expected 1",
                tj_len(v, "comms"));
    want_str(v, "comms", "comms[0].job", job);
    want_u64(v, "comms", "comms[0].size", 2);
    want_u64(v, "comms", "comms[0].next_seq", next_seq);
    const char *st = tj_str(v, "comms[0].state");
    EXPECT_TRUE(fails, st && !strncmp(st, comm_state_prefix, strlen(comm_state_prefix)),
                "comms: state \"%s\", expected \"%s...\"", st ? st : "(missing)",
                comm_state_prefix);
    if (tj_u64(v, "comms[0].id", comm_id) || *comm_id == 0) {
        tl_log("FAIL comms: no communicator id");
        fails++;
    }
    EXPECT_TRUE(fails, tj_len(v, "comms[0].ranks") == 2, "comms: %ld ranks",
                tj_len(v, "comms[0].ranks"));
    for (int r = 0; r < 2; r++) {
        char p[64];
#define AT(f) (snprintf(p, sizeof(p), "comms[0].ranks[%d].%s", r, f), p)
        want_u64(v, "comms", AT("rank"), (uint64_t)r);
        want_u64(v, "comms", AT("world_rank"), (uint64_t)r);
        want_u64(v, "comms", AT("pid"), (uint64_t)s->pid[r]);
        want_u64(v, "comms", AT("uid"), (uint64_t)getuid());
        want_u64(v, "comms", AT("ops_submitted"), sub[r]);
        want_u64(v, "comms", AT("ops_completed"), done[r]);
        want_u64(v, "comms", AT("bytes_in"), bytes_in[r]);
        if (state[r])
            want_str(v, "comms", AT("state"), state[r]);
#undef AT
    }
    tj_free(v);
    const char *t = table("comms");
    char w[256];
    snprintf(w, sizeof(w), "comm %llu of job %s: 2 ranks, next seq %llu, %s",
             (unsigned long long)*comm_id, job, (unsigned long long)next_seq, comm_state_prefix);
    want_line("comms", t, w);
    for (int r = 0; r < 2; r++) {
        snprintf(w, sizeof(w), "%d %d %d %s %llu %llu", r, r, (int)s->pid[r],
                 state[r] ? state[r] : "", (unsigned long long)sub[r],
                 (unsigned long long)done[r]);
        if (state[r])
            want_line("comms", t, w);
    }
    if (fails == before)
        tl_log("ok: comms: comm %llu, size 2, next_seq %llu, submitted %llu/%llu, completed "
               "%llu/%llu, %s", (unsigned long long)*comm_id, (unsigned long long)next_seq,
               (unsigned long long)sub[0], (unsigned long long)sub[1],
               (unsigned long long)done[0], (unsigned long long)done[1], comm_state_prefix);
}

/* jobs: the job, its ranks' pids and counters. */
static void check_jobs(const char *job, struct sh *s, uint64_t ops, uint64_t bytes_in)
{
    struct tj *v = json("jobs");
    if (!v)
        return;
    int before = fails;
    EXPECT_TRUE(fails, tj_len(v, "jobs") == 1, "jobs: %ld jobs", tj_len(v, "jobs"));
    want_str(v, "jobs", "jobs[0].job", job);
    want_str(v, "jobs", "jobs[0].state", "running");
    want_u64(v, "jobs", "jobs[0].world_size", 2);
    want_u64(v, "jobs", "jobs[0].joined", 2);
    want_u64(v, "jobs", "jobs[0].uid", (uint64_t)getuid());
    for (int r = 0; r < 2; r++) {
        char p[64];
#define AT(f) (snprintf(p, sizeof(p), "jobs[0].ranks[%d].%s", r, f), p)
        want_u64(v, "jobs", AT("rank"), (uint64_t)r);
        want_u64(v, "jobs", AT("pid"), (uint64_t)s->pid[r]);
        want_u64(v, "jobs", AT("ops_submitted"), ops);
        want_u64(v, "jobs", AT("ops_completed"), ops);
        want_u64(v, "jobs", AT("bytes_in"), bytes_in);
#undef AT
    }
    tj_free(v);
    char w[256];
    snprintf(w, sizeof(w), "job %s: running, 2/2 ranks joined, uid %u", job,
             (unsigned)getuid());
    want_line("jobs", table("jobs"), w);
    if (fails == before)
        tl_log("ok: jobs: %s running, 2/2, %llu ops and %llu B in per rank", job,
               (unsigned long long)ops, (unsigned long long)bytes_in);
}

static void check_no_ops(void)
{
    struct tj *v = json("ops");
    EXPECT_TRUE(fails, v && tj_len(v, "ops") == 0, "ops: %ld in flight, expected none",
                v ? tj_len(v, "ops") : -1);
    tj_free(v);
    want_line("ops", table("ops"), "no operations in flight");
}

/* Stage 2: rank 0 waits in all_reduce seq 4 for rank 1. */
static void check_waiting_op(const char *job, uint64_t comm_id)
{
    struct tj *v = NULL;
    double end = tl_now() + 20;
    while (tl_now() < end) {
        tj_free(v);
        v = json("ops");
        if (!v || tj_len(v, "ops") == 1)
            break;
        usleep(20000);
    }
    if (!v || tj_len(v, "ops") != 1) {
        tl_log("FAIL: ops never showed rank 0's all_reduce");
        fails++;
        tj_free(v);
        return;
    }
    int before = fails;
    want_u64(v, "ops", "ops[0].comm", comm_id);
    want_str(v, "ops", "ops[0].job", job);
    want_u64(v, "ops", "ops[0].seq", 4);
    want_str(v, "ops", "ops[0].kind", "all_reduce");
    want_str(v, "ops", "ops[0].signature", "all_reduce(count=1024, f32, sum)");
    want_str(v, "ops", "ops[0].algorithm", "local-fanout-reduce");
    want_u64(v, "ops", "ops[0].chunks_done", 0);
    want_u64(v, "ops", "ops[0].chunks_total", 1);
    EXPECT_TRUE(fails, tj_len(v, "ops[0].waiting_for") == 1, "ops: waiting for %ld ranks",
                tj_len(v, "ops[0].waiting_for"));
    want_u64(v, "ops", "ops[0].waiting_for[0]", 1);
    double age0 = -1, age1 = -1;
    tj_num(v, "ops[0].age_s", &age0);
    tj_free(v);
    double t0 = tl_now();
    usleep(400000);
    const char *t = table("ops");
    char w[256];
    snprintf(w, sizeof(w), "%llu %s 4 all_reduce(count=1024, f32, sum)",
             (unsigned long long)comm_id, job);
    want_line("ops", t, w);
    want_line("ops", t, "0/1 local-fanout-reduce rank 1");
    want_line("ops", t, "WAITING FOR");
    v = json("ops");
    if (v)
        tj_num(v, "ops[0].age_s", &age1);
    tj_free(v);
    double waited = tl_now() - t0;
    EXPECT_TRUE(fails, age0 >= 0 && age0 < 20 && age1 >= age0 + waited - 0.05 &&
                age1 < age0 + waited + 5,
                "ops: age_s %.3f, then %.3f after %.3f s", age0, age1, waited);
    if (fails == before)
        tl_log("ok: ops: all_reduce seq 4 waiting for rank 1, age %.3f -> %.3f s", age0, age1);
}

int main(void)
{
    hx_require_nexard();
    tl_ctl_path();
    char sbuf[32], hbuf[32], slbuf[32];
    snprintf(sbuf, sizeof(sbuf), "%d", SLOTS);
    snprintf(slbuf, sizeof(slbuf), "%d", SLOT_BYTES);
    snprintf(hbuf, sizeof(hbuf), "%d", HEAP_BYTES);
    const char *args[] = {"--slots", sbuf, "--slot-bytes", slbuf, "--heap-bytes", hbuf,
                          "--set", "sq_entries=64", "--set", "cq_entries=32", NULL};
    struct hx_daemon d;
    if (hx_daemon_start(&d, args))
        return 1;
    g_sock = d.sock;
    g_dir = d.dir;
    /* The segment the daemon maps per rank, from the geometry it was given (its error
     * ring has 64 entries: daemon/node/client.c). */
    struct nx_shm_geom g = {.sq_entries = 64, .cq_entries = 32, .err_entries = 64,
                            .slot_count = SLOTS, .slot_bytes = SLOT_BYTES,
                            .heap_bytes = HEAP_BYTES, .max_pending = 4096};
    struct nx_shm_hdr h;
    uint64_t seg = nx_shm_layout(&g, &h);
    const uint64_t small = COUNT * 4, big = BIG * 4;
    const uint64_t big_chunks = (big + SLOT_BYTES - 1) / SLOT_BYTES; /* in place: 1 region */

    tl_log("---- stage 0: nexard alone ----");
    struct counters c = {0};
    check_status(d.pid, 0, 0, 0, 0, "with no ranks");
    check_stats(&c, "with no ranks");
    check_no_ops();
    struct tj *v = json("comms");
    EXPECT_TRUE(fails, v && tj_len(v, "comms") == 0, "comms: communicators with no ranks");
    tj_free(v);
    want_line("comms", table("comms"), "no communicators");
    want_line("jobs", table("jobs"), "no jobs");
    v = json("peers");
    EXPECT_TRUE(fails, v && tj_at(v, "listen") && tj_at(v, "listen")->type == TJ_NULL &&
                tj_len(v, "peers") == 0, "peers without --listen: listen null, no peers");
    tj_free(v);
    want_line("peers", table("peers"), "this nexard has no network");

    tl_log("---- stage 1: 2 ranks, 3 all_reduce of 4 KiB, 1 of 160000 B ----");
    struct sh *s = hx_shared(sizeof(*s));
    struct hx_job j;
    struct hx_job_opts o = {.sock = d.sock, .size = 2, .fn = rank_main, .arg = s,
                            .nexar_timeout_s = 60};
    if (hx_job_start(&j, &o)) {
        hx_daemon_kill(&d);
        return 1;
    }
    uint64_t comm = 0;
    if (reached(s, 1) == 0) {
        check_status(d.pid, 2, 1, 1, 2 * seg, "with 2 ranks");
        c.ops_completed = 4;
        c.chunks = 3 + big_chunks;
        c.bytes_reduced = 2 * (3 * small + big); /* both ranks' inputs */
        c.clients_accepted = 2;
        check_stats(&c, "after 4 all_reduce");
        check_no_ops();
        /* comms counts ops, jobs the descriptors (one per chunk) and their input bytes. */
        check_comms(j.name, s, 4, (const uint64_t[]){4, 4}, (const uint64_t[]){4, 4},
                    (const uint64_t[]){3 * small + big, 3 * small + big},
                    (const char *const[]){"idle", "idle"}, "ok", &comm);
        check_jobs(j.name, s, 3 + big_chunks, 3 * small + big);
    }

    tl_log("---- stage 2: rank 0 in all_reduce seq 4, rank 1 not ----");
    s->go = 1;
    check_waiting_op(j.name, comm);
    check_comms(j.name, s, 4, (const uint64_t[]){5, 4}, (const uint64_t[]){4, 4},
                (const uint64_t[]){4 * small + big, 3 * small + big},
                (const char *const[]){"active", "idle"}, "ok", &comm);
    check_stats(&c, "while the op waits");

    tl_log("---- stage 3: rank 1 joins it ----");
    s->go = 2;
    if (reached(s, 2) == 0) {
        check_no_ops();
        c.ops_completed++;
        c.chunks++;
        c.bytes_reduced += 2 * small;
        check_stats(&c, "after the 5th all_reduce");
        check_comms(j.name, s, 5, (const uint64_t[]){5, 5}, (const uint64_t[]){5, 5},
                    (const uint64_t[]){4 * small + big, 4 * small + big},
                    (const char *const[]){"idle", "idle"}, "ok", &comm);
    }

    tl_log("---- stage 4: a split that fails, freed ----");
    s->go = 3;
    if (reached(s, 3) == 0) {
        c.ops_completed++; /* the split; it moves no data */
        c.mismatches = 1;
        c.ops_failed = 1;
        check_stats(&c, "after the split's mismatch and free");
        check_status(d.pid, 2, 1, 1, 2 * seg, "after the split was freed");
        check_comms(j.name, s, 6, (const uint64_t[]){6, 6}, (const uint64_t[]){6, 6},
                    (const uint64_t[]){4 * small + big, 4 * small + big},
                    (const char *const[]){"idle", "idle"}, "ok", &comm);
    }

    tl_log("---- stage 5: a mismatch on the world ----");
    s->go = 4;
    if (reached(s, 4) == 0) {
        c.mismatches = 2;
        c.ops_failed = 2;
        check_stats(&c, "after the mismatch");
        check_no_ops();
        /* The mismatched op handed in 1 and 2 floats. */
        check_comms(j.name, s, 6, (const uint64_t[]){7, 7}, (const uint64_t[]){6, 6},
                    (const uint64_t[]){4 * small + big + 4, 4 * small + big + 8},
                    (const char *const[]){NULL, NULL}, "failed: ", &comm);
        v = json("comms");
        const char *st = v ? tj_str(v, "comms[0].state") : NULL;
        EXPECT_TRUE(fails, st && strstr(st, "all_reduce(count=1, f32, sum)") &&
                    strstr(st, "all_reduce(count=2, f32, sum)"),
                    "comms: the failed state does not give both signatures: %s",
                    st ? st : "(missing)");
        tj_free(v);
    }

    tl_log("---- the ranks finalize ----");
    s->go = 5;
    if (hx_job_wait(&j, 30, 5) || hx_job_check_ok(&j))
        fails++;
    /* The daemon learns of the exits from the closing sockets: give it a moment. */
    double end = tl_now() + 10;
    uint64_t clients = 1;
    while (tl_now() < end && clients) {
        v = json("status");
        if (!v || tj_u64(v, "clients", &clients))
            clients = 1;
        tj_free(v);
        usleep(20000);
    }
    check_status(d.pid, 0, 0, 0, 0, "after the job");
    check_stats(&c, "after the job");

    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
