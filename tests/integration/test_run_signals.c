/*
 * test_run_signals.c - nexar-run and the signals it forwards (docs/tools.md, "Signals
 * and failures"; test_nexar_run.c covers SIGTERM), with the ranks of sig_rank.c:
 *
 *  - SIGINT and SIGHUP reach every rank; ranks that then exit 0 make nexar-run exit
 *    128+S ("interrupted by signal S, and every rank still exited 0");
 *  - ranks killed by the forwarded SIGINT: exit 130, and the summary says so;
 *  - ranks that ignore it: SIGTERM after --grace, SIGKILL 2 s later (exit 137); a second
 *    SIGINT sends SIGKILL at once;
 *  - a Ctrl-C (SIGINT to nexar-run's whole process group, as a terminal sends it) with a
 *    private daemon: the ranks get it, the daemon does not, so the ranks can still run an
 *    all_reduce before they exit 0.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "itest.h"
#include "outfile.h"

static int fails;
static const char *g_run, *g_rank;
static char g_out[256], g_log[300];

static int count(const char *what, int n)
{
    int k = 0;
    for (int r = 0; r < n; r++) {
        char p[400];
        snprintf(p, sizeof(p), "%s/%s%d", g_out, what, r);
        k += access(p, F_OK) == 0;
    }
    return k;
}

/* Starts nexar-run args...; own_group: in a process group of its own (a terminal's job). */
static pid_t launch(const char *const *args, int own_group)
{
    hx_rmtree(g_out);
    mkdir(g_out, 0700);
    unlink(g_log);
    const char *argv[40];
    int n = 0;
    argv[n++] = g_run;
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char env[300];
    snprintf(env, sizeof(env), "HX_OUT=%s", g_out);
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (own_group)
            setpgid(0, 0);
        putenv(env);
        int fd = open(g_log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (own_group && p > 0)
        setpgid(p, p); /* also here: the kill below must not race the child's setpgid */
    return p;
}

static int wait_files(const char *what, int n, double limit_s)
{
    double end = tl_now() + limit_s;
    while (tl_now() < end)
        if (count(what, n) == n)
            return 0;
        else
            usleep(5000);
    return -1;
}

/* Waits for nexar-run; its exit code (128+S when killed), -1 after limit_s. */
static int finish(pid_t p, double limit_s)
{
    int ws = 0;
    if (hx_wait_pid(p, limit_s, &ws)) {
        tl_log("FAIL: nexar-run still runs after %.0f s", limit_s);
        kill(p, SIGKILL);
        waitpid(p, &ws, 0);
        fails++;
        return -1;
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

static void expect_log(const char *want, const char *what)
{
    char *t = tl_read_file(g_log);
    EXPECT_TRUE(fails, strstr(t, want), "%s: nexar-run did not say \"%s\":\n%s", what, want, t);
    free(t);
}

/* SIGINT / SIGHUP to nexar-run, ranks that exit 0 on it. */
static void forwarded(int sig, const char *file, const char *what)
{
    const char *args[] = {"-n", "3", "--socket", getenv("ITEST_SOCK"), g_rank, "exit0", NULL};
    pid_t p = launch(args, 0);
    if (wait_files("ready", 3, 30)) {
        tl_log("FAIL %s: the ranks did not start", what);
        fails++;
    }
    double t0 = tl_now();
    kill(p, sig);
    int rc = finish(p, 20);
    double dt = tl_now() - t0;
    int got = count(file, 3);
    EXPECT_TRUE(fails, got == 3 && rc == 128 + sig && dt < 5,
                "%s: %d of 3 ranks got it, nexar-run exit %d (expected %d) after %.2f s", what,
                got, rc, 128 + sig, dt);
    if (got == 3 && rc == 128 + sig)
        tl_log("ok: %s reached all 3 ranks; they exited 0; nexar-run exit %d after %.2f s",
               what, rc, dt);
}

static void killed_by_it(void)
{
    const char *args[] = {"-n", "2", "--socket", getenv("ITEST_SOCK"), g_rank, "default", NULL};
    pid_t p = launch(args, 0);
    if (wait_files("ready", 2, 30))
        fails++;
    kill(p, SIGINT);
    int rc = finish(p, 20);
    EXPECT_TRUE(fails, rc == 130, "ranks killed by the forwarded SIGINT: nexar-run exit %d", rc);
    expect_log("interrupted by Interrupt; rank ", "ranks killed by SIGINT");
    expect_log("killed by signal 2 (Interrupt)", "ranks killed by SIGINT");
    if (rc == 130)
        tl_log("ok: ranks killed by the forwarded SIGINT: exit 130");
}

/* Ranks that ignore SIGINT and SIGTERM: the grace period, then SIGTERM, then SIGKILL. */
static void escalation(void)
{
    const char *args[] = {"-n", "3", "--grace", "1", "--socket", getenv("ITEST_SOCK"), g_rank,
                          "stubborn", NULL};
    pid_t p = launch(args, 0);
    if (wait_files("ready", 3, 30))
        fails++;
    double t0 = tl_now();
    kill(p, SIGINT);
    if (wait_files("int", 3, 5)) {
        tl_log("FAIL escalation: SIGINT reached %d of 3 ranks", count("int", 3));
        fails++;
    }
    int rc = finish(p, 20);
    double dt = tl_now() - t0;
    EXPECT_TRUE(fails, rc == 137 && count("term", 3) == 3 && dt >= 2.5 && dt < 10,
                "escalation: nexar-run exit %d after %.2f s, %d of 3 ranks got SIGTERM", rc,
                dt, count("term", 3));
    expect_log("interrupted; sending SIGTERM to the 3 ranks still running", "escalation");
    expect_log("sending SIGKILL to 3 ranks", "escalation");
    if (rc == 137)
        tl_log("ok: ranks that ignore SIGINT and SIGTERM: SIGTERM after --grace 1, SIGKILL 2 s "
               "later: exit 137 after %.2f s", dt);

    /* A second SIGINT: SIGKILL at once, long before a grace of 30 s. */
    const char *args2[] = {"-n", "3", "--grace", "30", "--socket", getenv("ITEST_SOCK"),
                           g_rank, "stubborn", NULL};
    p = launch(args2, 0);
    if (wait_files("ready", 3, 30))
        fails++;
    kill(p, SIGINT);
    if (wait_files("int", 3, 5))
        fails++;
    t0 = tl_now();
    kill(p, SIGINT);
    rc = finish(p, 20);
    dt = tl_now() - t0;
    EXPECT_TRUE(fails, rc == 137 && dt < 3, "a second SIGINT: exit %d after %.2f s", rc, dt);
    expect_log("second Interrupt: killing 3 ranks", "a second SIGINT");
    if (rc == 137 && dt < 3)
        tl_log("ok: a second SIGINT kills the ranks at once (%.2f s)", dt);
}

/* A terminal's Ctrl-C: SIGINT to the whole group, with a private daemon. */
static void ctrl_c(void)
{
    char sock[300];
    snprintf(sock, sizeof(sock), "%s-sock/none.sock", g_out); /* outside g_out: launch wipes it */
    const char *args[] = {"-n", "2", "--socket", sock, "--daemon", hx_nexard_path(), g_rank,
                          "nexar", NULL};
    pid_t p = launch(args, 1);
    if (wait_files("ready", 2, 30)) {
        tl_log("FAIL Ctrl-C: the ranks did not start on the private daemon");
        fails++;
    }
    kill(-p, SIGINT);
    int rc = finish(p, 30);
    EXPECT_TRUE(fails, rc == 130 && count("int", 2) == 2,
                "Ctrl-C with a private daemon: nexar-run exit %d, %d of 2 ranks got SIGINT", rc,
                count("int", 2));
    if (rc != 130) {
        char *t = tl_read_file(g_log);
        tl_log("nexar-run's output:\n%s", t);
        free(t);
    } else {
        tl_log("ok: Ctrl-C: the ranks got SIGINT, the private daemon did not (their "
               "all_reduce after it worked); exit 130");
    }
}

int main(void)
{
    hx_require_nexard();
    g_run = getenv("NEXAR_RUN");
    g_rank = getenv("SIG_RANK");
    if (!g_run || access(g_run, X_OK) || !g_rank || access(g_rank, X_OK)) {
        tl_log("SKIP: $NEXAR_RUN or $SIG_RANK is not executable");
        return HX_SKIP;
    }
    /* Signals ignored here would stay ignored in nexar-run's ranks. */
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL))
        return 1;
    setenv("ITEST_SOCK", d.sock, 1);
    snprintf(g_out, sizeof(g_out), "%s/out", d.dir);
    snprintf(g_log, sizeof(g_log), "%s/nexar-run.log", d.dir);

    forwarded(SIGINT, "int", "SIGINT");
    forwarded(SIGHUP, "hup", "SIGHUP");
    killed_by_it();
    escalation();
    ctrl_c();

    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
