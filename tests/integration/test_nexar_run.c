/*
 * test_nexar_run.c - the launcher.
 *
 *  - nexar-run -n 3 on a running daemon: every rank gets NEXAR_RANK 0..2,
 *    NEXAR_WORLD_SIZE 3, NEXAR_LOCAL_RANK = rank, one NEXAR_JOB and the socket; and
 *    torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR 127.0.0.1 and
 *    one MASTER_PORT;
 *    the job works; exit 0;
 *  - with no daemon at --socket it starts a private one (passing --daemon-arg), the
 *    job works, and the private daemon is gone afterwards; a bad --daemon-arg makes
 *    the private daemon (and so nexar-run) fail;
 *  - a rank that exits 3 -> nexar-run exits 3 and kills the sleeping rest after its
 *    grace period (well before they would end); also when the rest then fail
 *    with PEER_LOST (the first failure's status wins);
 *  - a rank killed by SIGKILL -> non-zero exit;
 *  - SIGTERM to nexar-run is forwarded to every rank, and it exits non-zero.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "itest.h"
#include "rawclient.h"

static int fails;
static const char *g_run, *g_helper;
static char g_out[200];

/* Runs nexar-run with args; returns its wait status, or -1 after limit_s. *dt gets
 * its run time. */
static int launch(const char *const *args, double limit_s, double *dt, pid_t *pid_out,
                  int nowait)
{
    const char *argv[40];
    int n = 0;
    argv[n++] = g_run;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char env[300];
    snprintf(env, sizeof(env), "HX_OUT=%s", g_out);
    const char *e[] = {env, NULL};
    char log[300];
    snprintf(log, sizeof(log), "%s/nexar-run.log", g_out);
    double t0 = tl_now();
    pid_t p = hx_spawn(argv, e, log);
    if (pid_out)
        *pid_out = p;
    if (nowait)
        return 0;
    int ws = 0;
    if (hx_wait_pid(p, limit_s, &ws)) {
        tl_log("FAIL: nexar-run still running after %.0f s; killing it", limit_s);
        kill(p, SIGKILL);
        waitpid(p, &ws, 0);
        fails++;
        return -1;
    }
    if (dt)
        *dt = tl_now() - t0;
    return ws;
}

static void show_log(void)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/nexar-run.log", g_out);
    FILE *f = fopen(p, "r");
    char line[512];
    int k = 0;
    while (f && fgets(line, sizeof(line), f) && k++ < 40)
        fprintf(stderr, "    | %s", line);
    if (f)
        fclose(f);
}

static void clean_out(void)
{
    hx_rmtree(g_out);
    mkdir(g_out, 0700);
}

static int file_exists(const char *name, int rank)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/%s%d", g_out, name, rank);
    return access(p, F_OK) == 0;
}

static void check_env(int n, const char *sock)
{
    char job0[256] = "", port0[256] = "";
    for (int r = 0; r < n; r++) {
        char p[300], l[13][256];
        snprintf(p, sizeof(p), "%s/env%d", g_out, r);
        FILE *f = fopen(p, "r");
        if (!f) {
            tl_log("FAIL: rank %d wrote no env file (did it run?)", r);
            fails++;
            continue;
        }
        for (int i = 0; i < 13; i++) {
            l[i][0] = 0;
            if (fgets(l[i], sizeof(l[i]), f))
                l[i][strcspn(l[i], "\n")] = 0;
        }
        fclose(f);
        if (atoi(l[0]) != r || atoi(l[1]) != n || atoi(l[2]) != r || !*l[3] ||
            (sock && strcmp(l[4], sock)) || atoi(l[5]) != r || atoi(l[6]) != n) {
            tl_log("FAIL: rank %d env: NEXAR_RANK=%s NEXAR_WORLD_SIZE=%s NEXAR_LOCAL_RANK=%s "
                   "NEXAR_JOB=%s NEXAR_SOCKET=%s comm %s/%s", r, l[0], l[1], l[2], l[3], l[4],
                   l[5], l[6]);
            fails++;
        }
        /* torchrun's variables, for torch.distributed's env:// (one node here). */
        if (atoi(l[7]) != r || atoi(l[8]) != n || atoi(l[9]) != r || atoi(l[10]) != n ||
            strcmp(l[11], "127.0.0.1") || atoi(l[12]) <= 0 || atoi(l[12]) > 65535) {
            tl_log("FAIL: rank %d torchrun env: RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s "
                   "LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s", r, l[7], l[8], l[9],
                   l[10], l[11], l[12]);
            fails++;
        }
        if (r == 0)
            snprintf(port0, sizeof(port0), "%s", l[12]);
        else if (strcmp(port0, l[12])) {
            tl_log("FAIL: rank %d MASTER_PORT %s differs from rank 0's %s", r, l[12], port0);
            fails++;
        }
        if (r == 0)
            snprintf(job0, sizeof(job0), "%s", l[3]);
        else if (strcmp(job0, l[3])) {
            tl_log("FAIL: rank %d NEXAR_JOB %s differs from rank 0's %s", r, l[3], job0);
            fails++;
        }
    }
}

static void expect_exit(int ws, int code, const char *what)
{
    char s[64];
    if (ws == -1)
        return;
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != code) {
        tl_log("FAIL %s: nexar-run %s, expected exit %d", what, hx_describe_status(ws, s, sizeof(s)), code);
        show_log();
        fails++;
    } else {
        tl_log("ok: %s -> exit %d", what, code);
    }
}

int main(void)
{
    hx_require_nexard();
    g_run = getenv("NEXAR_RUN");
    g_helper = getenv("NEXAR_RUN_HELPER");
    if (!g_run || access(g_run, X_OK) || !g_helper || access(g_helper, X_OK)) {
        tl_log("SKIP: $NEXAR_RUN (%s) or $NEXAR_RUN_HELPER (%s) not executable",
               g_run ? g_run : "unset", g_helper ? g_helper : "unset");
        return HX_SKIP;
    }
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL))
        return 1;
    snprintf(g_out, sizeof(g_out), "%s/out", d.dir);
    double dt = 0;
    int ws;

    clean_out();
    ws = launch((const char *const[]){"-n", "3", "--socket", d.sock, g_helper, "ok", NULL}, 60, &dt, NULL, 0);
    expect_exit(ws, 0, "nexar-run -n 3 on a running daemon");
    check_env(3, d.sock);

    /* a private daemon */
    struct hx_daemon p;
    hx_daemon_paths(&p);
    clean_out();
    ws = launch((const char *const[]){"-n", "2", "--socket", p.sock, "--daemon-arg", "--slot-bytes",
                                      "--daemon-arg", "65536", g_helper, "ok", NULL}, 60, &dt, NULL, 0);
    expect_exit(ws, 0, "nexar-run -n 2 with no daemon at --socket (private daemon)");
    check_env(2, NULL);
    if (rc_ping(p.sock, 1000) == 0) {
        tl_log("FAIL: the private daemon still answers after nexar-run exited");
        fails++;
    }
    clean_out();
    ws = launch((const char *const[]){"-n", "2", "--socket", p.sock, "--daemon-arg", "--no-such-flag",
                                      g_helper, "ok", NULL}, 60, &dt, NULL, 0);
    if (ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
        tl_log("FAIL: a private daemon with --no-such-flag, yet nexar-run exited 0 "
               "(--daemon-arg not passed?)");
        fails++;
    } else {
        tl_log("ok: --daemon-arg --no-such-flag reaches the private daemon: nexar-run fails");
    }
    hx_rmtree(p.dir);

    /* --join: 3 ranks grow their world by 2 joiners started by another nexar-run */
    clean_out();
    pid_t members;
    launch((const char *const[]){"-n", "3", "--socket", d.sock, "--job", "grow-by-join",
                                 "--timeout", "30", g_helper, "grow", NULL}, 60, NULL, &members, 1);
    usleep(300 * 1000); /* the job forms; joiners may only join a running one */
    ws = launch((const char *const[]){"-n", "2", "--socket", d.sock, "--join", "grow-by-join",
                                      "--timeout", "30", g_helper, "joiner", NULL}, 60, &dt, NULL, 0);
    expect_exit(ws, 0, "nexar-run --join grow-by-join -n 2 (the joiners)");
    int mws = 0;
    if (hx_wait_pid(members, 60, &mws))
        kill(members, SIGKILL);
    expect_exit(mws, 0, "nexar-run -n 3 whose ranks grow by 2");
    for (int r = 0; r < 5; r++)
        if (!file_exists("grown", r)) {
            tl_log("FAIL: rank %d of the grown communicator did not report", r);
            fails++;
        }
    clean_out();
    ws = launch((const char *const[]){"-n", "1", "--socket", "/nonexistent/nexard.sock",
                                      "--join", "nojob", g_helper, "joiner", NULL}, 30, &dt, NULL, 0);
    expect_exit(ws, 2, "nexar-run --join with no daemon at --socket");
    ws = launch((const char *const[]){"-n", "2", "--nodes", "2", "--join", "nojob", g_helper,
                                      "joiner", NULL}, 30, &dt, NULL, 0);
    expect_exit(ws, 64, "nexar-run --join with --nodes");

    /* first failure's status, and the rest killed after the grace period */
    clean_out();
    ws = launch((const char *const[]){"-n", "3", "--socket", d.sock, g_helper, "exit3", NULL}, 100, &dt, NULL, 0);
    expect_exit(ws, 3, "rank 1 exits 3, the others sleep 120 s");
    if (ws != -1)
        tl_log("%s: nexar-run returned after %.1f s (the sleepers were killed)",
               dt < 90 ? "ok" : "FAIL", dt);
    if (ws != -1 && dt >= 90)
        fails++;
    clean_out();
    ws = launch((const char *const[]){"-n", "3", "--socket", d.sock, g_helper, "exit3c", NULL}, 100, &dt, NULL, 0);
    expect_exit(ws, 3, "rank 1 exits 3, the others then fail with PEER_LOST");

    clean_out();
    ws = launch((const char *const[]){"-n", "2", "--socket", d.sock, g_helper, "kill9", NULL}, 100, &dt, NULL, 0);
    char s[64];
    if (ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) != 0)
        tl_log("ok: a rank killed by SIGKILL -> nexar-run exit %d", WEXITSTATUS(ws));
    else if (ws != -1) {
        tl_log("FAIL: a rank killed by SIGKILL -> nexar-run %s, expected a non-zero exit",
               hx_describe_status(ws, s, sizeof(s)));
        fails++;
    }

    /* SIGTERM forwarding */
    clean_out();
    pid_t pr = -1;
    launch((const char *const[]){"-n", "3", "--socket", d.sock, g_helper, "sleep", NULL}, 0, NULL, &pr, 1);
    double end = tl_now() + 30;
    while (tl_now() < end && !(file_exists("ready", 0) && file_exists("ready", 1) && file_exists("ready", 2)))
        usleep(10000);
    kill(pr, SIGTERM);
    if (hx_wait_pid(pr, 20.0, &ws)) {
        tl_log("FAIL: nexar-run still running 20 s after SIGTERM");
        kill(pr, SIGKILL);
        waitpid(pr, &ws, 0);
        fails++;
    } else {
        int got = file_exists("term", 0) + file_exists("term", 1) + file_exists("term", 2);
        if (got != 3) {
            tl_log("FAIL: SIGTERM reached %d of 3 ranks", got);
            fails++;
        } else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
            tl_log("FAIL: nexar-run exited 0 after SIGTERM although its ranks exited 143");
            fails++;
        } else {
            tl_log("ok: SIGTERM forwarded to all 3 ranks; nexar-run %s",
                   hx_describe_status(ws, s, sizeof(s)));
        }
    }

    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
