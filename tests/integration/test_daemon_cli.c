/*
 * test_daemon_cli.c - nexard as a system citizen.
 *
 *  - a second daemon on the same socket and runtime directory refuses to start
 *    (lock file) with a message saying so, and the first keeps serving on its
 *    socket; a second daemon on the same socket with another runtime directory
 *    must not take over the live socket either;
 *  - a stale socket file (nobody listening) is removed and the daemon starts;
 *  - after a SIGKILLed daemon (socket and lock file left behind) a new one starts;
 *  - SIGTERM -> exit 0, also with ranks connected, whose outstanding op then fails
 *    with NEXAR_ERR_UNAVAILABLE;
 *  - READY=1 is sent to $NOTIFY_SOCKET, and the daemon answers once it is;
 *  - without --foreground, the starter exits 0 once the socket answers, and non-zero with
 *    the reason on stderr when the daemon cannot start
 *  - bad command lines (unknown flag, bad number, missing config file, an algo setting
 *    naming no algorithm) exit non-zero
 *    with a message.
 */
#include <ctype.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "itest.h"
#include "outfile.h"
#include "rawclient.h"

static int fails;

static pid_t spawn_daemon(const char *sock, const char *rundir, const char *out,
                          const char *const *extra, const char *const *env)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = hx_nexard_path();
    argv[n++] = "--foreground";
    argv[n++] = "--socket";
    argv[n++] = sock;
    argv[n++] = "--runtime-dir";
    argv[n++] = rundir;
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return hx_spawn(argv, env, out);
}

static int icontains(const char *hay, const char *needle)
{
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (needle[i] && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (!needle[i])
            return 1;
    }
    return 0;
}

/* Expects the process to exit non-zero (not by a signal) within 10 s, having
 * printed something; returns its output (free it). */
static char *expect_refusal(pid_t pid, const char *what, const char *out)
{
    int ws = 0;
    char s[64];
    if (hx_wait_pid(pid, 10.0, &ws)) {
        tl_log("FAIL %s: still running after 10 s", what);
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
        fails++;
        return tl_read_file(out);
    }
    char *text = tl_read_file(out);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) == 0) {
        tl_log("FAIL %s: %s, expected a non-zero exit", what, hx_describe_status(ws, s, sizeof(s)));
        fails++;
    } else if (!*text) {
        tl_log("FAIL %s: exit %d without any message", what, WEXITSTATUS(ws));
        fails++;
    } else {
        tl_log("ok: %s -> exit %d: %.200s", what, WEXITSTATUS(ws), text);
    }
    return text;
}

/* nexard without --foreground: its starter returns once the daemon is ready (the socket
 * answers at once), or exits non-zero with the reason on stderr when it cannot start
 * (it used to exit 0 either way, the reason only in syslog). */
static void background_start(void)
{
    struct hx_daemon d;
    if (hx_daemon_paths(&d)) {
        fails++;
        return;
    }
    mkdir(d.rundir, 0700);
    char out[200];
    const char *argv[] = {hx_nexard_path(), "--socket", d.sock, "--runtime-dir", d.rundir,
                          NULL};
    snprintf(out, sizeof(out), "%s/bg1.log", d.dir);
    pid_t p = hx_spawn(argv, NULL, out);
    int ws = 0;
    char st[64];
    if (hx_wait_pid(p, 10.0, &ws) || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        tl_log("FAIL nexard in the background: its starter %s", hx_describe_status(ws, st,
               sizeof(st)));
        fails++;
    } else if (rc_ping(d.sock, 2000) != 0) {
        tl_log("FAIL nexard in the background: its starter returned before the socket "
               "answered");
        fails++;
    } else {
        tl_log("ok: nexard in the background: the starter exits 0 once the socket answers");
    }
    /* A second one on the same runtime directory cannot start: its starter says why. */
    snprintf(out, sizeof(out), "%s/bg2.log", d.dir);
    pid_t q = hx_spawn(argv, NULL, out);
    char *text = expect_refusal(q, "second nexard in the background, same runtime dir", out);
    if (!strstr(text, "another nexard")) {
        tl_log("FAIL second nexard in the background: no reason on stderr: \"%s\"", text);
        fails++;
    }
    free(text);
    char lock[256];
    snprintf(lock, sizeof(lock), "%s/nexard.lock", d.rundir);
    char *pidtext = tl_read_file(lock);
    pid_t daemon = pidtext ? (pid_t)atoi(pidtext) : 0;
    free(pidtext);
    if (daemon > 0) {
        kill(daemon, SIGTERM);
        for (int i = 0; i < 100 && kill(daemon, 0) == 0; i++)
            usleep(50000);
    }
    hx_rmtree(d.dir);
}

static void second_daemon(void)
{
    struct hx_daemon a;
    if (hx_daemon_start(&a, NULL)) {
        fails++;
        return;
    }
    char out[200];
    snprintf(out, sizeof(out), "%s/second.log", a.dir);
    pid_t b = spawn_daemon(a.sock, a.rundir, out, NULL, NULL);
    char *text = expect_refusal(b, "second daemon, same socket and runtime dir", out);
    if (!icontains(text, "lock") && !icontains(text, "already") && !icontains(text, "running") &&
        !icontains(text, "in use")) {
        tl_log("FAIL second daemon: the message does not say why (lock / already running): %s", text);
        fails++;
    }
    free(text);
    struct stat st;
    if (stat(a.sock, &st) != 0 || rc_ping(a.sock, 5000) != 0) {
        tl_log("FAIL: the first daemon no longer answers on %s after the second one tried", a.sock);
        fails++;
    }

    /* same socket, another runtime dir: the live socket must not be taken over */
    char rd2[200];
    snprintf(rd2, sizeof(rd2), "%s/run2", a.dir);
    snprintf(out, sizeof(out), "%s/third.log", a.dir);
    pid_t c = spawn_daemon(a.sock, rd2, out, NULL, NULL);
    free(expect_refusal(c, "second daemon, same socket, other runtime dir", out));
    if (rc_ping(a.sock, 5000) != 0) {
        tl_log("FAIL: the first daemon's socket was taken over by the second daemon");
        fails++;
    }
    if (hx_daemon_stop(&a))
        fails++;
}

static void stale_socket(void)
{
    struct hx_daemon d;
    if (hx_daemon_paths(&d)) {
        fails++;
        return;
    }
    mkdir(d.rundir, 0700);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(d.sock) < sizeof(sa.sun_path))
        memcpy(sa.sun_path, d.sock, strlen(d.sock) + 1);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        tl_log("FAIL: could not make a stale socket at %s", d.sock);
        fails++;
    }
    close(fd); /* the file stays, nobody listens */
    d.pid = spawn_daemon(d.sock, d.rundir, d.log, NULL, NULL);
    double end = tl_now() + 20.0;
    int ok = 0;
    while (!ok && tl_now() < end && hx_daemon_running(&d)) {
        ok = rc_ping(d.sock, 2000) == 0;
        usleep(20000);
    }
    if (!ok) {
        tl_log("FAIL: nexard did not start over a stale socket file");
        hx_daemon_log_tail(&d, 20);
        fails++;
        hx_daemon_kill(&d);
        return;
    }
    tl_log("ok: a stale socket file was replaced and the daemon answers");

    /* crash: SIGKILL leaves the socket and the lock file behind */
    hx_daemon_kill(&d);
    d.reaped = 0;
    d.pid = spawn_daemon(d.sock, d.rundir, d.log, NULL, NULL);
    end = tl_now() + 20.0;
    ok = 0;
    while (!ok && tl_now() < end && hx_daemon_running(&d)) {
        ok = rc_ping(d.sock, 2000) == 0;
        usleep(20000);
    }
    if (!ok) {
        tl_log("FAIL: nexard did not start after a SIGKILLed predecessor (stale socket + lock)");
        hx_daemon_log_tail(&d, 20);
        fails++;
        hx_daemon_kill(&d);
        return;
    }
    tl_log("ok: a daemon starts where a SIGKILLed one left its socket and lock file");
    if (hx_daemon_stop(&d))
        fails++;
    else
        tl_log("ok: SIGTERM -> exit 0");
}

struct term_shared {
    volatile int ready[4];
};

static int term_rank(struct hx_rank *r)
{
    struct term_shared *sh = r->arg;
    nexar_comm_t *w = NULL;
    int f = 0;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    EXPECT_OK(f, "barrier", nexar_barrier(w));
    sh->ready[r->rank] = 1;
    if (r->rank == 1) {
        pause();
        return 1;
    }
    int32_t v = 1;
    nexar_status_t st = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
    if (!EXPECT_ST(f, NEXAR_ERR_UNAVAILABLE, "allreduce when the daemon gets SIGTERM", st))
        tl_log("ok: outstanding op on SIGTERM -> NEXAR_ERR_UNAVAILABLE: \"%s\"", nexar_last_error());
    EXPECT_OK(f, "finalize", nexar_finalize());
    return f ? 1 : 0;
}

static void sigterm_with_ranks(void)
{
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL)) {
        fails++;
        return;
    }
    struct term_shared *sh = hx_shared(sizeof(*sh));
    struct hx_job j;
    struct hx_job_opts o = {.sock = d.sock, .size = 2, .fn = term_rank, .arg = sh,
                            .nexar_timeout_s = 60};
    if (hx_job_start(&j, &o)) {
        fails++;
        return;
    }
    for (int i = 0; i < 3000 && !(sh->ready[0] && sh->ready[1]); i++)
        usleep(10000);
    usleep(300000);
    double t0 = tl_now();
    if (hx_daemon_stop(&d))
        fails++;
    else
        tl_log("ok: SIGTERM with 2 ranks connected -> exit 0 after %.2f s", tl_now() - t0);
    int ws = 0;
    char s[64];
    if (hx_wait_pid(j.pid[0], 15.0, &ws)) {
        tl_log("FAIL: rank 0 still waiting 15 s after the daemon exited");
        kill(j.pid[0], SIGKILL);
        waitpid(j.pid[0], &ws, 0);
        fails++;
    } else if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        tl_log("FAIL: rank 0 after the daemon's SIGTERM: %s", hx_describe_status(ws, s, sizeof(s)));
        fails++;
    }
    kill(j.pid[1], SIGKILL);
    waitpid(j.pid[1], NULL, 0);
}

static void notify(void)
{
    struct hx_daemon d;
    if (hx_daemon_paths(&d)) {
        fails++;
        return;
    }
    char path[200], env[240];
    snprintf(path, sizeof(path), "%s/notify", d.dir);
    snprintf(env, sizeof(env), "NOTIFY_SOCKET=%s", path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) < sizeof(sa.sun_path))
        memcpy(sa.sun_path, path, strlen(path) + 1);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        tl_log("FAIL: notify socket");
        fails++;
        return;
    }
    const char *e[] = {env, NULL};
    d.pid = spawn_daemon(d.sock, d.rundir, d.log, NULL, e);
    char msg[4096];
    int got_ready = 0;
    double end = tl_now() + 20.0;
    while (!got_ready && tl_now() < end) {
        struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ssize_t n = recv(fd, msg, sizeof(msg) - 1, 0);
        if (n > 0) {
            msg[n] = 0;
            got_ready = strstr(msg, "READY=1") != NULL;
        }
        if (!hx_daemon_running(&d))
            break;
    }
    if (!got_ready) {
        tl_log("FAIL: no datagram with READY=1 on $NOTIFY_SOCKET within 20 s");
        hx_daemon_log_tail(&d, 20);
        fails++;
    } else if (rc_ping(d.sock, 3000) != 0) {
        tl_log("FAIL: READY=1 was sent but the socket does not answer HELLO yet");
        fails++;
    } else {
        tl_log("ok: READY=1 on $NOTIFY_SOCKET (\"%s\"), and the socket answers", msg);
    }
    if (hx_daemon_stop(&d))
        fails++;
    close(fd);
}

static void bad_cli(void)
{
    struct hx_daemon d;
    if (hx_daemon_paths(&d)) {
        fails++;
        return;
    }
    static const char *const cases[][3] = {
        {"--no-such-flag", NULL, NULL},
        {"--slot-bytes", "abc", NULL},
        {"-c", "/nonexistent/nexard.conf", NULL},
        {"--set", "algo=broadcast=hd", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[200], what[128];
        snprintf(out, sizeof(out), "%s/bad%zu.log", d.dir, i);
        snprintf(what, sizeof(what), "nexard %s %s", cases[i][0], cases[i][1] ? cases[i][1] : "");
        pid_t p = spawn_daemon(d.sock, d.rundir, out, cases[i], NULL);
        char *t = expect_refusal(p, what, out);
        if (i == 2 && !strstr(t, "/nonexistent/nexard.conf")) {
            tl_log("FAIL %s: the message does not name the config file: %s", what, t);
            fails++;
        }
        if (i == 3 && !strstr(t, "algo = \"broadcast=hd\": broadcast has no algorithm \"hd\"")) {
            tl_log("FAIL %s: the message does not name the setting and why: %s", what, t);
            fails++;
        }
        free(t);
    }
    hx_rmtree(d.dir);
}

int main(void)
{
    hx_require_nexard();
    tl_log("---- second daemon ----");
    second_daemon();
    tl_log("---- in the background ----");
    background_start();
    tl_log("---- stale socket, crash recovery ----");
    stale_socket();
    tl_log("---- SIGTERM with ranks connected ----");
    sigterm_with_ranks();
    tl_log("---- READY=1 to $NOTIFY_SOCKET ----");
    notify();
    tl_log("---- bad command lines ----");
    bad_cli();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
