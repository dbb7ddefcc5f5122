/*
 * test_fdlimit.c - nexard and its open-files limit.
 *
 * Each rank costs nexard four descriptors (its socket, two doorbells, a pidfd).  systemd
 * starts services with a soft limit of 1024 and a far higher hard one, so a node with a
 * few hundred ranks ran out:
 *  - a rank with one descriptor left: nexar_init fails with NEXAR_ERR_NOMEM saying this
 *    process has no room for the JOIN reply's descriptors, and its limit;
 *  - a daemon started with a soft limit of 40 (hard unchanged) serves 16 ranks: it raises
 *    its soft limit to the hard one at start;
 *  - a daemon whose hard limit is 48 (lowered after start with prlimit) cannot: the ranks it
 *    turns away get NEXAR_ERR_UNAVAILABLE with a text that says nexard ran out of open
 *    files (not "out of memory"), every rank ends within its deadline, the daemon logs a
 *    line per rank it turned away and at most one a second about accept() (not one per
 *    retry), and serves a small job afterwards;
 *  - a daemon with no descriptor left even for accept(): the ranks end at their deadline,
 *    and it says so once a second, not once per retry (it used to spin on the readable
 *    socket).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "itest.h"

#define NRANKS 16

static int exact_allreduces(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    for (int k = 0; k < 5; k++) {
        int64_t v = (int64_t)r->rank + k;
        int64_t want = (int64_t)r->size * (r->size - 1) / 2 + (int64_t)k * r->size;
        EXPECT_OK(fails, "all_reduce", nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM));
        EXPECT_TRUE(fails, v == want, "rank %d: all_reduce %d gave %lld, want %lld", r->rank, k,
                    (long long)v, (long long)want);
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

struct shared {
    volatile int refused_fds;  /* ranks told nexard ran out of open files */
    volatile int bad_text;     /* ranks told something else that is wrong ("out of memory") */
};
static struct shared *sh;

/* Every rank must end with OK, or with a text that says why it could not join. */
static int starved(struct hx_rank *r)
{
    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    const char *t = nexar_last_error();
    if (st == NEXAR_OK) {
        nexar_finalize(); /* the job formed: nothing to check here */
        return 0;
    }
    if (st == NEXAR_ERR_UNAVAILABLE && strstr(t, "open files")) {
        __atomic_add_fetch(&sh->refused_fds, 1, __ATOMIC_RELAXED);
        if (r->rank == 0 || sh->refused_fds == 1)
            tl_log("refused: \"%s\"", t);
    } else if (strstr(t, "out of memory") || strstr(t, "cannot create")) {
        __atomic_add_fetch(&sh->bad_text, 1, __ATOMIC_RELAXED);
        tl_log("FAIL rank %d: %s: \"%s\"", r->rank, tl_status_name(st), t);
    }
    return 0;
}

/* The rank itself has one descriptor left: its socket takes it, and the JOIN reply's three
 * find no room.  Its text says so (it used to say "carried 0 file descriptors, not 3", an
 * INTERNAL error). */
static int rank_without_room(struct hx_rank *r)
{
    int fails = 0, top = dup(0);
    struct rlimit low = {(rlim_t)top + 8, 0};
    struct rlimit cur;
    getrlimit(RLIMIT_NOFILE, &cur);
    low.rlim_max = cur.rlim_max;
    close(top);
    setrlimit(RLIMIT_NOFILE, &low);
    int last = -1;
    for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;)
        last = fd;
    close(last);
    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    if (!EXPECT_ST(fails, NEXAR_ERR_NOMEM, "nexar_init with one descriptor left", st)) {
        const char *t = nexar_last_error();
        EXPECT_TRUE(fails, strstr(t, "no room for the descriptors") && strstr(t, "open files"),
                    "text \"%s\" should say this process is out of descriptors", t);
        tl_log("rank %d: \"%s\"", r->rank, t);
    }
    nexar_finalize();
    return fails ? 1 : 0;
}

/* nexard cannot even accept: the rank's nexar_init ends at its deadline. */
static int unanswered(struct hx_rank *r)
{
    nexar_comm_t *w = NULL;
    double t0 = tl_now();
    nexar_status_t st = nexar_init(&w);
    double dt = tl_now() - t0;
    if (st == NEXAR_OK) {
        tl_log("FAIL rank %d: nexar_init succeeded on a nexard without descriptors", r->rank);
        nexar_finalize();
        return 1;
    }
    if (r->rank == 0)
        tl_log("after %.2f s: %s: \"%s\"", dt, tl_status_name(st), nexar_last_error());
    return 0;
}

static int count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Lines of the log that contain both needles (b may be NULL). */
static int count_lines(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, a) && (!b || strstr(line, b));
    fclose(f);
    return n;
}

int main(void)
{
    hx_require_nexard();
    sh = hx_shared(sizeof(*sh));
    int rv = 0;
    struct rlimit old;
    getrlimit(RLIMIT_NOFILE, &old);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 256) {
        tl_log("hard limit of open files is %llu here: skipped", (unsigned long long)old.rlim_max);
        return HX_SKIP;
    }

    tl_log("---- a rank with one descriptor left ----");
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL))
        return 1;
    if (itest_run(&d, 1, rank_without_room, NULL, 10, 30.0))
        rv = -1;
    if (hx_daemon_stop(&d))
        rv = -1;

    tl_log("---- a soft limit of 40 open files, 16 ranks ----");
    struct rlimit low = {40, old.rlim_max};
    setrlimit(RLIMIT_NOFILE, &low); /* nexard inherits it */
    int started = hx_daemon_start(&d, NULL);
    setrlimit(RLIMIT_NOFILE, &old); /* the ranks do not */
    if (started)
        return 1;
    if (itest_run(&d, NRANKS, exact_allreduces, NULL, 20, 60.0)) {
        tl_log("FAIL: 16 ranks on a nexard started with a soft limit of 40");
        hx_daemon_log_tail(&d, 20);
        rv = -1;
    } else {
        tl_log("ok: 16 ranks, 5 exact all_reduces each");
    }
    if (hx_daemon_stop(&d))
        rv = -1;

    tl_log("---- a hard limit of 48 open files, 16 ranks ----");
    if (hx_daemon_start(&d, NULL))
        return 1;
    struct rlimit hard = {48, 48};
    if (prlimit(d.pid, RLIMIT_NOFILE, &hard, NULL) != 0) {
        tl_log("FAIL: prlimit on nexard: %s", strerror(errno));
        rv = -1;
    }
    struct hx_job j;
    struct hx_job_opts o = {.sock = d.sock, .size = NRANKS, .fn = starved, .nexar_timeout_s = 4};
    if (hx_job_start(&j, &o) || hx_job_wait(&j, 30.0, 15.0) || hx_job_check_ok(&j)) {
        tl_log("FAIL: the ranks of a starved nexard did not all end within 30 s");
        rv = -1;
    }
    tl_log("%d of %d ranks were told nexard ran out of open files, %d told something else",
           sh->refused_fds, NRANKS, sh->bad_text);
    if (sh->refused_fds == 0 || sh->bad_text) {
        tl_log("FAIL: the refusals should say nexard ran out of open files");
        rv = -1;
    }
    /* One line per rank turned away, and the accept() retries at most once a second: they
     * used to log (and spin) for every retry, hundreds in a few milliseconds. */
    int lines = count_lines(d.log, "open files", NULL);
    int accepts = count_lines(d.log, "accept", "open files");
    tl_log("nexard logged %d lines about open files, %d of them about accept()", lines, accepts);
    if (lines < 1 || lines > NRANKS + 4 || accepts > 5) {
        tl_log("FAIL: nexard should log a line per refused rank and a few about accept()");
        hx_daemon_log_tail(&d, 20);
        rv = -1;
    }
    if (hx_timed_allreduces(d.sock, 20) < 0) {
        tl_log("FAIL: a 2-rank job after the starved one");
        rv = -1;
    }
    if (hx_daemon_stop(&d))
        rv = -1;

    tl_log("---- no descriptor left even for accept(), 4 ranks ----");
    if (hx_daemon_start(&d, NULL))
        return 1;
    int open_now = count_fds(d.pid);
    struct rlimit none = {(rlim_t)open_now, (rlim_t)open_now};
    if (open_now <= 0 || prlimit(d.pid, RLIMIT_NOFILE, &none, NULL) != 0) {
        tl_log("FAIL: prlimit on nexard (%d open): %s", open_now, strerror(errno));
        rv = -1;
    }
    memset(sh, 0, sizeof(*sh));
    o = (struct hx_job_opts){.sock = d.sock, .size = 4, .fn = unanswered, .nexar_timeout_s = 2};
    if (hx_job_start(&j, &o) || hx_job_wait(&j, 20.0, 10.0) || hx_job_check_ok(&j)) {
        tl_log("FAIL: ranks that nexard could not accept did not all end within 20 s");
        rv = -1;
    }
    accepts = count_lines(d.log, "accept", "open files");
    tl_log("nexard (%d files open, its limit) logged %d lines about accept()", open_now, accepts);
    if (accepts < 1 || accepts > 5) {
        tl_log("FAIL: nexard should say once a second that it cannot accept, not %d times",
               accepts);
        hx_daemon_log_tail(&d, 20);
        rv = -1;
    }
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log(rv ? "FAILED" : "all passed");
    return rv ? 1 : 0;
}
