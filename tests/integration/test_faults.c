/*
 * test_faults.c - every op ends: mismatch, timeout, rank death, abort, daemon death.
 *
 *  - mismatch (count; kind: broadcast vs all_reduce; on a sub-communicator, which
 *    leaves the world usable): NEXAR_ERR_MISMATCH on every rank, the text names the
 *    ranks and both signatures, later ops on the comm fail the same way;
 *  - timeout (NEXAR_TIMEOUT=2, one rank never calls): the others get
 *    NEXAR_ERR_TIMEOUT after 2-4 s naming the missing rank;
 *  - rank death: a rank killed with SIGKILL while the others wait in an allreduce,
 *    and while a 32 MiB allreduce is in flight on every rank (through the slots; single
 *    copy, while the others read and write its buffer; and a single-copy broadcast): the
 *    others get NEXAR_ERR_PEER_LOST within 2 s of the kill, naming the rank;
 *  - abort: nexar_comm_abort() on one rank -> NEXAR_ERR_ABORTED on the others
 *    (sub-communicator: the world keeps working; world: in-flight ops fail);
 *  - after all that the daemon serves a new job and exits 0 on SIGTERM;
 *  - daemon death: a SIGKILLed daemon fails outstanding ops with
 *    NEXAR_ERR_UNAVAILABLE.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "bgjob.h"
#include "itest.h"
#include "outfile.h"

struct shared {
    volatile double kill_time;  /* when the victim died (set by whoever killed it) */
    volatile int ready[HX_MAX_RANKS];
};
static struct shared *sh;

static void wait_kill_time(void)
{
    for (int i = 0; i < 2000 && sh->kill_time == 0; i++)
        usleep(1000);
}

/* ---- mismatch ---------------------------------------------------------------------- */

static int mismatch_count(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    float *b = calloc(1024, sizeof(float));
    size_t count = r->rank == 1 ? 1000 : 1024;
    nexar_status_t st = nexar_all_reduce(w, b, count, NEXAR_F32, NEXAR_SUM);
    if (!EXPECT_ST(fails, NEXAR_ERR_MISMATCH, "allreduce with count 1000 on rank 1", st)) {
        const char *t = nexar_last_error();
        fails += tl_check_contains("mismatch text", t, "1024") ? 1 : 0;
        fails += tl_check_contains("mismatch text", t, "1000") ? 1 : 0;
        fails += tl_check_contains("mismatch text", t, "all_reduce") ? 1 : 0;
        fails += tl_check_names_rank("mismatch text", t, 1);
        if (!strstr(t, "rank 0") && !strstr(t, "rank 2"))
            fails += tl_check_names_rank("mismatch text (a rank that called count=1024)", t, 0);
        if (r->rank == 0)
            tl_log("count mismatch -> NEXAR_ERR_MISMATCH: \"%s\"", t);
    }
    char *first = strdup(nexar_last_error());
    EXPECT_ST(fails, NEXAR_ERR_MISMATCH, "the next op on the failed world", nexar_barrier(w));
    if (strcmp(first, nexar_last_error())) {
        tl_log("FAIL: a later op on the failed comm has another text: \"%s\" vs \"%s\"",
               nexar_last_error(), first);
        fails++;
    }
    free(first);
    EXPECT_OK(fails, "finalize", nexar_finalize());
    free(b);
    return fails ? 1 : 0;
}

static int mismatch_kind(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    float b[256] = {0};
    nexar_status_t st = r->rank == 1 ? nexar_broadcast(w, b, 256, NEXAR_F32, 0)
                                     : nexar_all_reduce(w, b, 256, NEXAR_F32, NEXAR_SUM);
    if (!EXPECT_ST(fails, NEXAR_ERR_MISMATCH, "rank 1 broadcast vs all_reduce", st)) {
        const char *t = nexar_last_error();
        fails += tl_check_contains("mismatch text", t, "broadcast") ? 1 : 0;
        fails += tl_check_contains("mismatch text", t, "all_reduce") ? 1 : 0;
        fails += tl_check_names_rank("mismatch text", t, 1);
        if (r->rank == 0)
            tl_log("kind mismatch -> NEXAR_ERR_MISMATCH: \"%s\"", t);
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

static int mismatch_sub(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL, *sub = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(fails, "split", nexar_comm_split(w, 0, (uint32_t)r->rank, &sub));
    int32_t b[8] = {0};
    if (sub) {
        /* rank 2 reduces with MAX, the others with SUM */
        nexar_status_t st = nexar_all_reduce(sub, b, 8, NEXAR_I32, r->rank == 2 ? NEXAR_MAX : NEXAR_SUM);
        if (!EXPECT_ST(fails, NEXAR_ERR_MISMATCH, "op mismatch on a sub-communicator", st)) {
            fails += tl_check_contains("mismatch text", nexar_last_error(), "max") ? 1 : 0;
            fails += tl_check_contains("mismatch text", nexar_last_error(), "sum") ? 1 : 0;
        }
        EXPECT_OK(fails, "free the failed sub-communicator", nexar_comm_free(sub));
    }
    int32_t v = r->rank + 1;
    EXPECT_OK(fails, "world allreduce after a sub-communicator failed",
              nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM));
    EXPECT_TRUE(fails, v == r->size * (r->size + 1) / 2, "world allreduce: %d", v);
    if (r->rank == 0 && !fails)
        tl_log("op mismatch on a sub-communicator: MISMATCH there, the world still works");
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- timeout ------------------------------------------------------------------------- */

static int timeout_rank(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int32_t v[4] = {0};
    if (r->rank == 2) {
        sleep(6); /* never calls within the deadline */
        nexar_status_t st = nexar_all_reduce(w, v, 4, NEXAR_I32, NEXAR_SUM);
        EXPECT_TRUE(fails, st == NEXAR_ERR_TIMEOUT, "late rank's op on the timed-out world: %s",
                    tl_status_name((int)st));
    } else {
        double t0 = tl_now();
        nexar_status_t st = nexar_all_reduce(w, v, 4, NEXAR_I32, NEXAR_SUM);
        double dt = tl_now() - t0;
        if (!EXPECT_ST(fails, NEXAR_ERR_TIMEOUT, "allreduce with rank 2 absent", st)) {
            fails += tl_check_names_rank("timeout text", nexar_last_error(), 2);
            EXPECT_TRUE(fails, dt >= 1.5 && dt <= 4.5,
                        "the deadline is 2 s but the timeout came after %.2f s", dt);
            if (r->rank == 0)
                tl_log("timeout after %.2f s: \"%s\"", dt, nexar_last_error());
        }
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- rank death ------------------------------------------------------------------------ */

static int check_peer_lost(nexar_status_t st, const char *what, int victim, int me)
{
    int fails = 0;
    double now = tl_now();
    if (EXPECT_ST(fails, NEXAR_ERR_PEER_LOST, what, st))
        return 1;
    wait_kill_time();
    double dt = now - sh->kill_time;
    fails += tl_check_names_rank("peer-lost text", nexar_last_error(), victim);
    EXPECT_TRUE(fails, dt < 2.0, "%s: PEER_LOST %.3f s after the kill (limit 2 s)", what, dt);
    tl_log("%s: rank %d: PEER_LOST %.3f s after the kill: \"%s\"", what, me, dt,
           nexar_last_error());
    return fails;
}

/* The test (parent) kills rank 2 while ranks 0 and 1 wait in an allreduce. */
static int death_waiting(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(fails, "barrier before the kill", nexar_barrier(w));
    sh->ready[r->rank] = 1;
    if (r->rank == 2) {
        pause(); /* killed by the test */
        return 1;
    }
    double b[64] = {0};
    nexar_status_t st = nexar_all_reduce(w, b, 64, NEXAR_F64, NEXAR_SUM);
    fails += check_peer_lost(st, "allreduce waiting for a killed rank", 2, r->rank);
    EXPECT_ST(fails, NEXAR_ERR_PEER_LOST, "next op after the peer died", nexar_barrier(w));
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* What death_midop's job does: a 32 MiB allreduce through the slots (NEXAR_SINGLE_COPY=0),
 * rank 1 having submitted half its chunks; single copy, rank 1 never folding its part and
 * killed while the others fold theirs from its buffer (process_vm_readv then finds it
 * gone: PEER_LOST all the same) or wait for it; or a single-copy 32 MiB broadcast from
 * rank 0, whose root writes into rank 1 while rank 2 touches only the root's buffer, so
 * rank 2 learns of the death from nexard alone, which must call it PEER_LOST even when
 * the root's "no such process" reaches it before rank 1's hang-up. */
enum { MIDOP_SLOTS, MIDOP_CMA, MIDOP_CMA_BCAST };
static int midop;

/* Rank 1 kills itself in the middle of a 32 MiB iall_reduce (ibroadcast); the others are
 * in the same op. */
static int death_midop(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (midop == MIDOP_SLOTS)
        setenv("NEXAR_SINGLE_COPY", "0", 1);
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    size_t n = 8u << 20;
    float *b = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        b[i] = 1.0f;
    EXPECT_OK(fails, "barrier before the kill", nexar_barrier(w));
    if (r->rank == 1) {
        nexar_request_t *q = NULL;
        if (midop == MIDOP_CMA_BCAST)
            nexar_ibroadcast(w, b, n, NEXAR_F32, 0, &q);
        else
            nexar_iall_reduce(w, b, n, NEXAR_F32, NEXAR_SUM, &q);
        int done = 0;
        for (int i = 0; midop == MIDOP_SLOTS && !done && i < 20; i++) {
            nexar_test(q, &done);
            usleep(1000);
        }
        if (done) /* the others then see it complete: not what this tests */
            tl_log("FAIL rank 1: its 32 MiB allreduce completed before the kill");
        usleep(2000); /* single copy: into the others' folds */
        sh->kill_time = tl_now();
        raise(SIGKILL);
    }
    nexar_status_t st = midop == MIDOP_CMA_BCAST ? nexar_broadcast(w, b, n, NEXAR_F32, 0)
                                                 : nexar_all_reduce(w, b, n, NEXAR_F32,
                                                                    NEXAR_SUM);
    fails += check_peer_lost(st, midop == MIDOP_CMA_BCAST
                                     ? "32 MiB broadcast with a rank killed mid-op"
                                     : "32 MiB allreduce with a rank killed mid-op",
                             1, r->rank);
    EXPECT_OK(fails, "finalize", nexar_finalize());
    free(b);
    return fails ? 1 : 0;
}

/* ---- abort ----------------------------------------------------------------------------- */

static int abort_sub(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL, *sub = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(fails, "split", nexar_comm_split(w, 0, (uint32_t)r->rank, &sub));
    if (!sub)
        return 1;
    EXPECT_OK(fails, "barrier", nexar_barrier(w));
    int32_t v[4] = {1, 1, 1, 1};
    if (r->rank == 0) {
        EXPECT_OK(fails, "nexar_comm_abort", nexar_comm_abort(sub));
        EXPECT_ST(fails, NEXAR_ERR_ABORTED, "own op after abort",
                  nexar_all_reduce(sub, v, 4, NEXAR_I32, NEXAR_SUM));
    } else {
        nexar_status_t st = nexar_all_reduce(sub, v, 4, NEXAR_I32, NEXAR_SUM);
        if (!EXPECT_ST(fails, NEXAR_ERR_ABORTED, "allreduce on a comm aborted by rank 0", st) &&
            r->rank == 1)
            tl_log("abort -> NEXAR_ERR_ABORTED: \"%s\"", nexar_last_error());
    }
    EXPECT_OK(fails, "free the aborted comm", nexar_comm_free(sub));
    int32_t s = 2;
    EXPECT_OK(fails, "world allreduce after the sub-communicator abort",
              nexar_all_reduce(w, &s, 1, NEXAR_I32, NEXAR_SUM));
    EXPECT_TRUE(fails, s == 2 * r->size, "world allreduce after abort: %d", s);

    /* rank 2 aborts the world while the others are in an allreduce on it */
    if (r->rank == 2) {
        usleep(200000);
        EXPECT_OK(fails, "abort world", nexar_comm_abort(w));
    } else {
        EXPECT_ST(fails, NEXAR_ERR_ABORTED, "in-flight allreduce when the world is aborted",
                  nexar_all_reduce(w, v, 4, NEXAR_I32, NEXAR_SUM));
    }
    EXPECT_ST(fails, NEXAR_ERR_ABORTED, "op after the world was aborted", nexar_barrier(w));
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- healthy ------------------------------------------------------------------------------ */

static int healthy(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    for (int i = 0; i < 3; i++) {
        struct tl_case c = {.coll = i == 0 ? TL_ALL_REDUCE : i == 1 ? TL_ALL_GATHER : TL_BROADCAST,
                            .dtype = NEXAR_F32, .op = NEXAR_SUM, .count = 70001, .seed = 5u + (unsigned)i};
        if (tl_run_case(w, &c))
            fails++;
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- daemon death -------------------------------------------------------------------------- */

static int daemon_death(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(fails, "barrier", nexar_barrier(w));
    sh->ready[r->rank] = 1;
    if (r->rank == 1) {
        pause(); /* ends when the test kills everything; the others must not wait for it */
        return 1;
    }
    int32_t v = 1;
    nexar_status_t st = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
    double t_err = tl_now();
    wait_kill_time();
    double dt = t_err - sh->kill_time;
    if (!EXPECT_ST(fails, NEXAR_ERR_UNAVAILABLE, "allreduce when the daemon is SIGKILLed", st)) {
        EXPECT_TRUE(fails, dt < 5.0, "UNAVAILABLE only %.2f s after the daemon died", dt);
        if (r->rank == 0)
            tl_log("daemon killed -> NEXAR_ERR_UNAVAILABLE after %.3f s: \"%s\"", dt,
                   nexar_last_error());
    }
    EXPECT_OK(fails, "finalize after the daemon died", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- driver ------------------------------------------------------------------------------- */

/* Runs a job in which the ranks listed in `dies` (-1 terminated) are expected to die
 * by SIGKILL and every other rank must exit 0. */
static int run_fault_job(const struct hx_daemon *d, const char *what, int size, int tmo,
                         hx_rank_fn fn, int kill_rank, const int *dies)
{
    tl_log("---- %s ----", what);
    memset(sh, 0, sizeof(*sh));
    struct hx_job j;
    struct hx_job_opts o = {.sock = d->sock, .size = size, .fn = fn, .nexar_timeout_s = tmo};
    if (hx_job_start(&j, &o))
        return -1;
    int rv = 0;
    if (kill_rank >= 0) {
        if (hx_wait_flags(sh->ready, size, 30.0)) {
            tl_log("FAIL %s: ranks did not get ready", what);
            rv = -1;
        }
        usleep(300000); /* let the others enter their allreduce */
        sh->kill_time = tl_now();
        kill(j.pid[kill_rank], SIGKILL);
    }
    if (hx_job_wait(&j, 60.0, 15.0))
        rv = -1;
    for (int k = 0; k < size; k++) {
        int expect_killed = 0;
        for (int i = 0; dies && dies[i] >= 0; i++)
            expect_killed |= dies[i] == k;
        int ws = j.wstatus[k];
        char s[64];
        if (expect_killed ? !(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)
                          : !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
            tl_log("FAIL %s: rank %d: %s, expected %s", what, k,
                   hx_describe_status(ws, s, sizeof(s)), expect_killed ? "SIGKILL" : "exit 0");
            rv = -1;
        }
    }
    return rv;
}

/* A socket that accepts connections (the kernel's backlog) but never answers HELLO: a
 * rank with NEXAR_TIMEOUT=2 gives up within its timeout, not after a fixed 10 s. */
static int mute_daemon(void)
{
    char dir[] = "/tmp/nx-mute-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/mute.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 8)) {
        tl_log("FAIL mute daemon: cannot listen at %s", a.sun_path);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setenv("NEXAR_SOCKET", a.sun_path, 1);
        setenv("NEXAR_RANK", "0", 1);
        setenv("NEXAR_WORLD_SIZE", "1", 1);
        setenv("NEXAR_JOB", "mute", 1);
        setenv("NEXAR_TIMEOUT", "2", 1);
        nexar_comm_t *w;
        double t0 = tl_now();
        nexar_status_t s = nexar_init(&w);
        double dt = tl_now() - t0;
        int ok = s == NEXAR_ERR_TIMEOUT && dt < 3.5;
        tl_log("%s mute daemon, NEXAR_TIMEOUT=2: nexar_init -> %s after %.2f s: %s",
               ok ? "ok:" : "FAIL", nexar_strerror(s), dt, nexar_last_error());
        _exit(ok ? 0 : 1);
    }
    int ws = 0;
    int rv = hx_wait_pid(pid, 20, &ws) || !WIFEXITED(ws) || WEXITSTATUS(ws) ? -1 : 0;
    close(fd);
    hx_rmtree(dir);
    return rv;
}

/* A rank whose NEXAR_COORD carries a newline and a forged log line: refused (no network
 * here), and the daemon's log holds it escaped on the refusal's own line. */
#define FORGED "12:00:00.000 nexard warn main: FORGED LOG LINE"
static int forged_coord_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    nexar_status_t s = nexar_init(&w);
    if (s != NEXAR_ERR_UNAVAILABLE) {
        tl_log("FAIL forged NEXAR_COORD: nexar_init -> %s: %s", nexar_strerror(s),
               nexar_last_error());
        return 1;
    }
    return 0;
}

static int log_injection(const struct hx_daemon *d)
{
    static const char *const env[] = {"NEXAR_COORD=x:1\n" FORGED "\xff", NULL};
    struct hx_job_opts o = {.sock = d->sock, .size = 1, .fn = forged_coord_rank,
                            .nexar_timeout_s = 10, .env_extra = env};
    int rv = hx_run(&o, 30);
    char *log = tl_read_file(d->log);
    bool forged = false;
    for (const char *l = log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
        forged |= !strncmp(l, FORGED, strlen(FORGED));
    bool escaped = log && strstr(log, "x:1\\x0a" FORGED "\\xff");
    if (rv || forged || !escaped) {
        tl_log("FAIL log injection: the daemon's log %s", forged ? "holds the forged line"
               : !escaped ? "does not show the text escaped" : "(the rank failed)");
        rv = -1;
    } else {
        tl_log("ok: a forged line in NEXAR_COORD is logged escaped on the refusal's line");
    }
    free(log);
    return rv;
}

int main(void)
{
    hx_require_nexard();
    sh = hx_shared(sizeof(*sh));
    int rv = 0;
    struct hx_daemon d;
    const char *args[] = {"--slot-bytes", "65536", "--slots", "2", NULL};
    if (hx_daemon_start(&d, args))
        return 1;
    static const int r1[] = {1, -1}, r2[] = {2, -1};
    rv |= run_fault_job(&d, "count mismatch", 3, 30, mismatch_count, -1, NULL);
    rv |= run_fault_job(&d, "kind mismatch", 3, 30, mismatch_kind, -1, NULL);
    rv |= run_fault_job(&d, "op mismatch on a sub-communicator", 3, 30, mismatch_sub, -1, NULL);
    rv |= run_fault_job(&d, "timeout (NEXAR_TIMEOUT=2)", 3, 2, timeout_rank, -1, NULL);
    {
        /* Without NEXAR_TIMEOUT the daemon's op_timeout_s is the deadline. */
        struct hx_daemon dt;
        const char *targs[] = {"--set", "op_timeout_s=2", NULL};
        if (hx_daemon_start(&dt, targs))
            return 1;
        rv |= run_fault_job(&dt, "timeout (op_timeout_s=2, NEXAR_TIMEOUT unset)", 3, -1,
                            timeout_rank, -1, NULL);
        if (hx_daemon_stop(&dt))
            rv = -1;
    }
    rv |= run_fault_job(&d, "rank 2 SIGKILLed while the others wait", 3, 60, death_waiting, 2, r2);
    struct bgjob bg; /* another job on the same daemon must not notice */
    int bg_ok = bgjob_start(&bg, &d, 2) == 0;
    rv |= run_fault_job(&d, "rank 1 SIGKILLed mid 32 MiB allreduce (slots)", 3, 60,
                        death_midop, -1, r1);
    for (int i = 0; i < 6; i++) {
        midop = i % 2 ? MIDOP_CMA_BCAST : MIDOP_CMA;
        rv |= run_fault_job(&d, midop == MIDOP_CMA ? "rank 1 SIGKILLed mid 32 MiB allreduce "
                                                     "(single copy)"
                                                   : "rank 1 SIGKILLed mid 32 MiB broadcast "
                                                     "(single copy)",
                            3, 60, death_midop, -1, r1);
    }
    if (!bg_ok || bgjob_finish(&bg)) {
        tl_log("FAIL: a job running next to the killed rank's job was affected");
        rv = -1;
    } else {
        tl_log("ok: a job running next to the killed rank's job finished exact");
    }
    rv |= run_fault_job(&d, "abort", 3, 30, abort_sub, -1, NULL);
    rv |= run_fault_job(&d, "a healthy job after the faults", 3, 30, healthy, -1, NULL);
    rv |= mute_daemon();
    rv |= log_injection(&d);
    if (hx_daemon_stop(&d))
        rv = -1;

    /* daemon death: a daemon of its own, killed with SIGKILL */
    struct hx_daemon d2;
    if (hx_daemon_start(&d2, NULL))
        return 1;
    tl_log("---- daemon SIGKILLed while ranks wait ----");
    memset(sh, 0, sizeof(*sh));
    struct hx_job j;
    struct hx_job_opts o = {.sock = d2.sock, .size = 3, .fn = daemon_death, .nexar_timeout_s = 60};
    if (hx_job_start(&j, &o) == 0) {
        if (hx_wait_flags(sh->ready, 3, 30.0))
            tl_log("FAIL: ranks did not get ready");
        usleep(300000);
        sh->kill_time = tl_now();
        hx_daemon_kill(&d2);
        for (int k = 0; k < 3; k += 2) {
            int ws = 0;
            char s[64];
            if (hx_wait_pid(j.pid[k], 30.0, &ws)) {
                tl_log("FAIL daemon death: rank %d still running 30 s after the daemon died", k);
                kill(j.pid[k], SIGKILL);
                waitpid(j.pid[k], &ws, 0);
                rv = -1;
            } else if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
                tl_log("FAIL daemon death: rank %d: %s", k, hx_describe_status(ws, s, sizeof(s)));
                rv = -1;
            }
        }
        /* rank 1 sleeps in pause() on purpose */
        kill(j.pid[1], SIGKILL);
        waitpid(j.pid[1], NULL, 0);
    }
    hx_rmtree(d2.dir);
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
