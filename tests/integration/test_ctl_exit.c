/*
 * test_ctl_exit.c - nexarctl's exit status is the nexar_status_t of what went wrong
 * (docs/tools.md, "Exit status"), for every command, in both output forms:
 *
 *  - no socket file, and a socket file nobody listens on: 2 (NEXAR_ERR_UNAVAILABLE) with
 *    "no nexard answers at PATH"; with --json one object on stdout with "status":2,
 *    "status_name":"NEXAR_ERR_UNAVAILABLE" and the same error;
 *  - a socket whose owner never answers HELLO: 4 (NEXAR_ERR_TIMEOUT) within --timeout;
 *  - a daemon that answers HELLO with an ERROR frame (what nexard sends for a protocol
 *    version it does not speak): the frame's status (8 here) and its text;
 *  - an answer that is not a frame: 10 (NEXAR_ERR_INTERNAL);
 *  - usage errors (unknown command, two commands, bad --timeout): 1;
 *  - a real daemon: 0; after it stopped: 2 again.
 * The servers here are forked stand-ins written from proto/frame.h, not nexard.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "ctlrun.h"
#include "frame.h"
#include "itest.h"
#include "nexar.pb-c.h"
#include "rawclient.h"

static int fails;
static char g_dir[128];
static struct tl_ctl g_r;

static const char *const commands[] = {"status", "jobs", "comms", "ops", "stats", "peers"};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Runs nexarctl -s sock [--json] [-t 1] cmd and checks its exit status; with --json also
 * the failure object.  Returns 0 when everything matched. */
static int expect(const char *sock, const char *cmd, int json, int want, const char *err_has)
{
    const char *args[] = {"-s", sock, "-t", "1", json ? "--json" : cmd, json ? cmd : NULL,
                          NULL};
    int rc = tl_ctl_run(&g_r, g_dir, args, 20);
    int bad = 0;
    if (rc != want) {
        tl_log("FAIL nexarctl %s%s on %s: exit %d, expected %d (%s); stderr: %s",
               json ? "--json " : "", cmd, sock, rc, want, tl_status_name(want), g_r.err);
        return 1;
    }
    if (err_has && !strstr(g_r.err, err_has)) {
        tl_log("FAIL nexarctl %s: stderr does not say \"%s\": %s", cmd, err_has, g_r.err);
        bad++;
    }
    if (json && want) {
        char why[200];
        struct tj *v = tj_parse(g_r.out, why, sizeof(why));
        uint64_t st = 0;
        const char *name = v ? tj_str(v, "status_name") : NULL;
        const char *c = v ? tj_str(v, "command") : NULL;
        const char *e = v ? tj_str(v, "error") : NULL;
        if (!v || tj_u64(v, "status", &st) || st != (uint64_t)want || !name ||
            strcmp(name, tl_status_name(want)) || !c || strcmp(c, cmd) || !e ||
            (err_has && !strstr(e, err_has))) {
            tl_log("FAIL nexarctl --json %s (exit %d): the failure object is wrong (%s): %s",
                   cmd, rc, v ? "fields" : why, g_r.out);
            bad++;
        }
        tj_free(v);
    } else if (!json && g_r.out[0] && want) {
        tl_log("FAIL nexarctl %s failed with %d but printed on stdout: %s", cmd, rc, g_r.out);
        bad++;
    }
    return bad;
}

static void every_command(const char *sock, int want, const char *err_has, const char *what)
{
    int bad = 0;
    for (size_t i = 0; i < NCOMMANDS; i++)
        for (int json = 0; json < 2; json++)
            bad += expect(sock, commands[i], json, want, err_has);
    fails += bad;
    if (!bad)
        tl_log("ok: %s: every command, plain and --json, exits %d (%s)", what, want,
               tl_status_name(want));
}

/* Binds a Unix stream socket at path; the fd, or -1 (logged). */
static int bind_at(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || strlen(path) >= sizeof(sa.sun_path)) {
        tl_log("FAIL: a socket at %s", path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        tl_log("FAIL: bind %s: %m", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* A stand-in server on path, forked.  mode: 's' never answers, 'e' answers HELLO with an
 * ERROR frame (status 8), 'g' answers with bytes that are no frame.  The child serves
 * connections until it is killed. */
static pid_t fake_server(const char *path, char mode)
{
    int fd = bind_at(path);
    if (fd < 0 || listen(fd, 64)) {
        tl_log("FAIL: a stand-in server at %s: %m", path);
        exit(1);
    }
    fflush(NULL);
    pid_t p = fork();
    if (p != 0) {
        close(fd);
        return p;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (mode == 's')
        for (;;)
            pause(); /* the kernel completes connects into the backlog; nobody reads */
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            continue;
        struct rc_frame f = {0};
        if (rc_recv_frame(c, &f, 5000) == 0 && mode == 'e') {
            Nexar__ErrorReply er = NEXAR__ERROR_REPLY__INIT;
            er.status = NEXAR_ERR_UNSUPPORTED;
            er.error = "protocol version 1 is not spoken here (stand-in)";
            uint8_t buf[256];
            size_t n = nexar__error_reply__pack(&er, buf);
            rc_send_frame(c, NX_MSG_ERROR, buf, (uint32_t)n);
        } else if (mode == 'g') {
            static const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
            rc_send_raw(c, junk, sizeof(junk) - 1);
        }
        free(f.payload);
        rc_wait_closed(c, 5000);
        close(c);
    }
}

static void stop_server(pid_t p)
{
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
}

int main(void)
{
    hx_require_nexard();
    tl_ctl_path();
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/nxctl-exit-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        tl_log("FAIL: mkdtemp: %m");
        return 1;
    }
    char path[200];

    snprintf(path, sizeof(path), "%s/none.sock", g_dir);
    every_command(path, NEXAR_ERR_UNAVAILABLE, "no nexard answers at", "no socket file");

    /* A socket file left behind by a dead daemon: connect() is refused. */
    snprintf(path, sizeof(path), "%s/stale.sock", g_dir);
    int sfd = bind_at(path);
    if (sfd >= 0) {
        close(sfd);
        every_command(path, NEXAR_ERR_UNAVAILABLE, "no nexard answers at", "stale socket file");
    } else {
        fails++;
    }

    snprintf(path, sizeof(path), "%s/silent.sock", g_dir);
    pid_t p = fake_server(path, 's');
    double t0 = tl_now();
    fails += expect(path, "status", 0, NEXAR_ERR_TIMEOUT, "did not answer within 1000 ms");
    fails += expect(path, "ops", 1, NEXAR_ERR_TIMEOUT, "did not answer");
    double dt = tl_now() - t0;
    EXPECT_TRUE(fails, dt < 10, "two nexarctl -t 1 against a silent server took %.1f s", dt);
    tl_log("ok: a server that never answers: exit 4 (NEXAR_ERR_TIMEOUT), 2 runs in %.1f s", dt);
    stop_server(p);

    snprintf(path, sizeof(path), "%s/refuse.sock", g_dir);
    p = fake_server(path, 'e');
    every_command(path, NEXAR_ERR_UNSUPPORTED, "not spoken here (stand-in)",
                  "an ERROR frame answering HELLO (its status, its text)");
    stop_server(p);

    snprintf(path, sizeof(path), "%s/junk.sock", g_dir);
    p = fake_server(path, 'g');
    every_command(path, NEXAR_ERR_INTERNAL, "malformed", "an answer that is no frame");
    stop_server(p);

    /* Usage errors exit 1 before any connection. */
    static const char *const usage[][4] = {
        {"no-such-command", NULL},
        {"status", "comms", NULL},
        {"--timeout", "0", "status", NULL},
        {"--no-such-flag", "status", NULL},
    };
    for (size_t i = 0; i < sizeof(usage) / sizeof(usage[0]); i++) {
        int rc = tl_ctl_run(&g_r, g_dir, usage[i], 20);
        EXPECT_TRUE(fails, rc == NEXAR_ERR_INVALID && strstr(g_r.err, "nexarctl"),
                    "nexarctl %s %s: exit %d, expected 1 with a message: %s", usage[i][0],
                    usage[i][1] ? usage[i][1] : "", rc, g_r.err);
    }
    const char *ver[] = {"--version", NULL};
    tl_ctl_run(&g_r, g_dir, ver, 20);
    EXPECT_TRUE(fails, g_r.rc == 0 && !strcmp(g_r.out, "nexarctl " NEXAR_VERSION "\n"),
                "nexarctl --version: exit %d: %s", g_r.rc, g_r.out);

    /* The real daemon: 0 for every command; once it is gone, 2 again. */
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL)) {
        fails++;
    } else {
        every_command(d.sock, 0, NULL, "a running nexard");
        /* $NEXAR_SOCKET is the default socket. */
        setenv("NEXAR_SOCKET", d.sock, 1);
        const char *st[] = {"status", NULL};
        int rc = tl_ctl_run(&g_r, g_dir, st, 20);
        EXPECT_TRUE(fails, rc == 0 && strstr(g_r.out, d.sock),
                    "nexarctl status with $NEXAR_SOCKET: exit %d: %s", rc, g_r.out);
        unsetenv("NEXAR_SOCKET");
        char sock[sizeof(d.sock)];
        snprintf(sock, sizeof(sock), "%s", d.sock);
        if (hx_daemon_stop(&d))
            fails++;
        every_command(sock, NEXAR_ERR_UNAVAILABLE, "no nexard answers at", "a stopped nexard");
    }
    hx_rmtree(g_dir);
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
