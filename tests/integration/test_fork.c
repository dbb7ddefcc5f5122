/*
 * test_fork.c - a rank that forks after nexar_init().
 *
 * A forked child inherits the rank's socket to nexard, its doorbells and the shared rings.
 *  - a rank SIGKILLed while a child forked with fork() lives on (a data-loader worker):
 *    the other ranks get NEXAR_ERR_PEER_LOST naming it within 2 s, not a TIMEOUT at the
 *    deadline (the child closed its copies of the descriptors at the fork);
 *  - the same with a child made by the raw fork system call, which runs no pthread_atfork
 *    handler and keeps the socket open: nexard watches the rank's process, not only its
 *    socket;
 *  - a child that calls nexar: nexar_wait on a request its parent started, a collective,
 *    nexar_alloc and nexar_init fail with NEXAR_ERR_INVALID and a text naming the child's
 *    pid, the rank and the parent's pid; nexar_finalize is a no-op there.  The parents'
 *    request and five all_reduces after it complete exact: the child took nothing from
 *    their rings;
 *  - a child of the raw fork syscall that calls nexar: the rank's rings are undefined
 *    after that, but the parent's next call fails at once with NEXAR_ERR_INTERNAL ("the
 *    submission ring is corrupt"), where it used to wait for ring space forever.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "itest.h"

#define NRANKS 3
#define TIMEOUT_S 20 /* the op deadline: a TIMEOUT would take this long */

struct shared {
    volatile double kill_time;
    volatile int ready[NRANKS];
    volatile pid_t child[NRANKS];
};
static struct shared *sh;

enum child_kind { LIBC_FORK, RAW_FORK };

/* A child that only lives on, holding what it inherited. */
static pid_t linger_child(enum child_kind k)
{
    pid_t c = k == RAW_FORK ? (pid_t)syscall(SYS_fork) : fork();
    if (c == 0) {
        alarm(TIMEOUT_S + 10); /* ends itself if the test cannot */
        for (;;)
            pause();
    }
    return c;
}

static int death_with_child(struct hx_rank *r, enum child_kind k)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(fails, "barrier before the fork", nexar_barrier(w));
    if (r->rank == 1) {
        sh->child[1] = linger_child(k);
        sh->ready[1] = 1;
        pause(); /* killed by the test */
        return 1;
    }
    sh->ready[r->rank] = 1;
    int64_t v = r->rank;
    nexar_status_t st = nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM);
    double dt = tl_now() - sh->kill_time;
    if (!EXPECT_ST(fails, NEXAR_ERR_PEER_LOST, "all_reduce with rank 1 killed", st)) {
        fails += tl_check_names_rank("peer-lost text", nexar_last_error(), 1);
        EXPECT_TRUE(fails, dt < 2.0, "PEER_LOST %.2f s after the kill (limit 2 s)", dt);
        if (r->rank == 0)
            tl_log("PEER_LOST %.3f s after the kill: \"%s\"", dt, nexar_last_error());
    } else if (r->rank == 0) {
        tl_log("after %.2f s: \"%s\"", dt, nexar_last_error());
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

static int death_libc_fork(struct hx_rank *r)
{
    return death_with_child(r, LIBC_FORK);
}

static int death_raw_fork(struct hx_rank *r)
{
    return death_with_child(r, RAW_FORK);
}

/* In the child: every call that would use the parent's connection refuses, saying why. */
static int child_calls(int rank, pid_t parent, nexar_comm_t *w, nexar_request_t *q)
{
    int fails = 0;
    char want_child[32], want_parent[32], want_rank[32];
    snprintf(want_child, sizeof(want_child), "pid %ld", (long)getpid());
    snprintf(want_parent, sizeof(want_parent), "pid %ld", (long)parent);
    snprintf(want_rank, sizeof(want_rank), "rank %d", rank);
    int64_t v = 1;
    void *p = NULL;
    nexar_comm_t *w2 = NULL;
    nexar_status_t st;
    const char *names[] = {"nexar_wait", "nexar_all_reduce", "nexar_alloc", "nexar_init"};
    for (int i = 0; i < 4; i++) {
        switch (i) {
        case 0: st = nexar_wait(q); break;
        case 1: st = nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM); break;
        case 2: st = nexar_alloc(64, &p); break;
        default: st = nexar_init(&w2); break;
        }
        const char *t = nexar_last_error();
        if (EXPECT_ST(fails, NEXAR_ERR_INVALID, names[i], st))
            continue;
        EXPECT_TRUE(fails, strstr(t, names[i]) && strstr(t, "forked") && strstr(t, want_child) &&
                               strstr(t, want_parent) && strstr(t, want_rank),
                    "%s in the child: text \"%s\" should name the call, the fork, %s, %s and %s",
                    names[i], t, want_child, want_rank, want_parent);
        if (rank == 0 && i == 1)
            tl_log("in a forked child: \"%s\"", t);
    }
    EXPECT_OK(fails, "nexar_finalize in the child", nexar_finalize());
    return fails;
}

static int child_uses_nexar(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int n = r->size;
    int64_t a = r->rank + 1;
    nexar_request_t *q = NULL;
    EXPECT_OK(fails, "iall_reduce before the fork",
              nexar_iall_reduce(w, &a, 1, NEXAR_I64, NEXAR_SUM, &q));
    pid_t parent = getpid();
    pid_t c = fork();
    if (c == 0)
        _exit(child_calls(r->rank, parent, w, q) ? 1 : 0);
    int ws = 0;
    EXPECT_TRUE(fails, c > 0 && waitpid(c, &ws, 0) == c && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
                "rank %d: the forked child's checks failed (status 0x%x)", r->rank, ws);
    EXPECT_OK(fails, "the parent's request after the child's calls", nexar_wait(q));
    EXPECT_TRUE(fails, a == (int64_t)n * (n + 1) / 2, "rank %d: iall_reduce gave %lld, want %lld",
                r->rank, (long long)a, (long long)n * (n + 1) / 2);
    for (int k = 0; k < 5; k++) {
        int64_t v = (int64_t)r->rank * 1000 + k;
        int64_t want = 1000LL * n * (n - 1) / 2 + (int64_t)k * n;
        EXPECT_OK(fails, "all_reduce after the fork",
                  nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM));
        EXPECT_TRUE(fails, v == want, "rank %d: all_reduce %d gave %lld, want %lld", r->rank, k,
                    (long long)v, (long long)want);
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* A child of the raw fork syscall knows nothing of the fork and uses the rank's rings as
 * its own.  What it does is undefined, but the parent must not wait forever: its next
 * call finds nexard's head past its own tail and fails at once. */
static int raw_child_uses_nexar(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(fails, "barrier before the fork", nexar_barrier(w));
    pid_t c = (pid_t)syscall(SYS_fork);
    if (c == 0) {
        int64_t v = 1;
        nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM);
        _exit(0);
    }
    int ws = 0;
    EXPECT_TRUE(fails, c > 0 && waitpid(c, &ws, 0) == c, "rank %d: no raw-forked child",
                r->rank);
    int64_t v = r->rank;
    double t0 = tl_now();
    nexar_status_t st = nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM);
    double dt = tl_now() - t0;
    if (!EXPECT_ST(fails, NEXAR_ERR_INTERNAL, "the parent's all_reduce after its child's", st)) {
        EXPECT_TRUE(fails, strstr(nexar_last_error(), "submission ring is corrupt") != NULL,
                    "text \"%s\" should say the ring is corrupt", nexar_last_error());
        EXPECT_TRUE(fails, dt < 5.0, "the error took %.2f s (limit 5 s)", dt);
        if (r->rank == 0)
            tl_log("after %.3f s: \"%s\"", dt, nexar_last_error());
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- driver ------------------------------------------------------------------------- */

static void reap_children(void)
{
    for (int i = 0; i < NRANKS; i++)
        if (sh->child[i] > 0) {
            kill(sh->child[i], SIGKILL);
            sh->child[i] = 0;
        }
}

static int run_death(const struct hx_daemon *d, const char *what, hx_rank_fn fn)
{
    tl_log("---- %s ----", what);
    memset(sh, 0, sizeof(*sh));
    struct hx_job j;
    struct hx_job_opts o = {.sock = d->sock, .size = NRANKS, .fn = fn,
                            .nexar_timeout_s = TIMEOUT_S};
    if (hx_job_start(&j, &o))
        return -1;
    int rv = 0;
    if (hx_wait_flags(sh->ready, NRANKS, 30.0)) {
        tl_log("FAIL %s: ranks did not get ready", what);
        rv = -1;
    }
    usleep(300000); /* the others enter their all_reduce */
    sh->kill_time = tl_now();
    kill(j.pid[1], SIGKILL);
    if (hx_job_wait(&j, TIMEOUT_S + 20.0, TIMEOUT_S + 5.0))
        rv = -1;
    reap_children();
    for (int k = 0; k < NRANKS; k++) {
        int ws = j.wstatus[k];
        char s[64];
        int want_killed = k == 1;
        if (want_killed ? !(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)
                        : !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
            tl_log("FAIL %s: rank %d: %s", what, k, hx_describe_status(ws, s, sizeof(s)));
            rv = -1;
        }
    }
    return rv;
}

int main(void)
{
    hx_require_nexard();
    sh = hx_shared(sizeof(*sh));
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL))
        return 1;
    int rv = 0;
    rv |= run_death(&d, "rank 1 SIGKILLed while a child from fork() lives", death_libc_fork);
    rv |= run_death(&d, "rank 1 SIGKILLed while a child from the raw fork syscall lives",
                    death_raw_fork);
    tl_log("---- a forked child calls nexar ----");
    memset(sh, 0, sizeof(*sh));
    rv |= itest_run(&d, NRANKS, child_uses_nexar, NULL, TIMEOUT_S, 60.0);
    tl_log("---- a child of the raw fork syscall calls nexar ----");
    rv |= itest_run(&d, NRANKS, raw_child_uses_nexar, NULL, TIMEOUT_S, 60.0);
    tl_log("---- a job after all that ----");
    if (hx_timed_allreduces(d.sock, 50) < 0) {
        tl_log("FAIL: a job after the forks did not finish exact");
        rv = -1;
    }
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log(rv ? "FAILED" : "all passed");
    return rv ? 1 : 0;
}
