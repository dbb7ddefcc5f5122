/*
 * test_rundir.c - nexard refuses a runtime directory that others could plant files in
 * (daemon/node/ctlsrv.c check_dir), and says why; it starts in one that is safe.
 *
 *   refused, exit non-zero, with the text of the log line:
 *   - owned by another uid (root only: the test chowns it to 65534)
 *       "runtime directory D belongs to uid 65534, not to us (uid U) or root"
 *   - writable by group or others without the sticky bit (0777, 0770, 0702)
 *       "runtime directory D is writable by others (mode 777)"
 *   - not a directory                      "runtime directory D is not a directory"
 *   - a directory that cannot be made      "cannot create runtime directory D: ..."
 *   started (answers HELLO, exits 0 on SIGTERM):
 *   - 0700 and 0755 owned by us; 01777 (sticky, like /tmp); one it creates itself (0755)
 * A refused daemon must leave nothing behind: no socket, no lock file.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "itest.h"
#include "outfile.h"
#include "rawclient.h"

static int fails;
static char g_dir[160];

static pid_t spawn(const char *sock, const char *rundir, const char *log)
{
    const char *argv[] = {hx_nexard_path(), "--foreground", "--socket", sock, "--runtime-dir",
                          rundir, NULL};
    unlink(log);
    return hx_spawn(argv, NULL, log);
}

/* nexard with rundir must exit non-zero within 10 s having logged want. */
static void refused(const char *rundir, const char *want, const char *what)
{
    char sock[300], log[300], lock[400];
    snprintf(sock, sizeof(sock), "%s/refused.sock", g_dir);
    snprintf(log, sizeof(log), "%s/refused.log", g_dir);
    snprintf(lock, sizeof(lock), "%s/nexard.lock", rundir);
    pid_t p = spawn(sock, rundir, log);
    int ws = 0;
    char s[64];
    if (p < 0 || hx_wait_pid(p, 10, &ws)) {
        tl_log("FAIL %s: nexard still runs after 10 s", what);
        if (p > 0) {
            kill(p, SIGKILL);
            waitpid(p, &ws, 0);
        }
        fails++;
        return;
    }
    char *text = tl_read_file(log);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) == 0) {
        tl_log("FAIL %s: nexard %s, expected a refusal", what, hx_describe_status(ws, s, sizeof(s)));
        fails++;
    } else if (!strstr(text, want)) {
        tl_log("FAIL %s: exit %d, but the log does not say \"%s\":\n%s", what, WEXITSTATUS(ws),
               want, text);
        fails++;
    } else if (access(sock, F_OK) == 0 || access(lock, F_OK) == 0) {
        tl_log("FAIL %s: refused, but left %s behind", what,
               access(sock, F_OK) == 0 ? sock : lock);
        fails++;
    } else {
        tl_log("ok: %s: exit %d, \"%s\"", what, WEXITSTATUS(ws), want);
    }
    free(text);
}

/* nexard with rundir must answer HELLO and exit 0 on SIGTERM. */
static void accepted(const char *rundir, const char *what)
{
    struct hx_daemon d;
    if (hx_daemon_paths(&d)) {
        fails++;
        return;
    }
    d.pid = spawn(d.sock, rundir, d.log);
    int ok = 0;
    double end = tl_now() + 20;
    while (!ok && tl_now() < end && hx_daemon_running(&d)) {
        ok = rc_ping(d.sock, 2000) == 0;
        usleep(10000);
    }
    if (!ok) {
        tl_log("FAIL %s: nexard did not start", what);
        hx_daemon_log_tail(&d, 20);
        hx_daemon_kill(&d);
        hx_rmtree(d.dir);
        fails++;
        return;
    }
    if (hx_daemon_stop(&d))
        fails++;
    else
        tl_log("ok: %s: nexard starts and stops cleanly", what);
}

static void make_dir(const char *path, mode_t mode)
{
    hx_rmtree(path);
    if (mkdir(path, 0700) < 0 || chmod(path, mode) < 0) {
        tl_log("FAIL: mkdir/chmod %s: %m", path);
        fails++;
    }
}

int main(void)
{
    hx_require_nexard();
    umask(022); /* the mode of the directory nexard makes */
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/nxrundir-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        tl_log("FAIL: mkdtemp: %m");
        return 1;
    }
    char rd[300], want[512];
    snprintf(rd, sizeof(rd), "%s/run", g_dir);

    static const mode_t writable[] = {0777, 0770, 0702, 0720};
    for (size_t i = 0; i < sizeof(writable) / sizeof(writable[0]); i++) {
        make_dir(rd, writable[i]);
        char what[64];
        snprintf(what, sizeof(what), "mode %03o", (unsigned)writable[i]);
        snprintf(want, sizeof(want), "runtime directory %s is writable by others (mode %03o)",
                 rd, (unsigned)writable[i]);
        refused(rd, want, what);
    }

    if (geteuid() == 0) {
        make_dir(rd, 0755);
        if (chown(rd, 65534, 65534) < 0) {
            tl_log("FAIL: chown %s: %m", rd);
            fails++;
        }
        snprintf(want, sizeof(want),
                 "runtime directory %s belongs to uid 65534, not to us (uid 0) or root", rd);
        refused(rd, want, "owned by uid 65534");
    } else {
        tl_log("note: not root, so the directory of another uid is not tried");
    }

    hx_rmtree(rd);
    FILE *f = fopen(rd, "w");
    if (f)
        fclose(f);
    snprintf(want, sizeof(want), "runtime directory %s is not a directory", rd);
    refused(rd, want, "a plain file");
    unlink(rd);

    snprintf(rd, sizeof(rd), "%s/missing/run", g_dir);
    snprintf(want, sizeof(want), "cannot create runtime directory %s: ", rd);
    refused(rd, want, "a parent that does not exist");

    snprintf(rd, sizeof(rd), "%s/run", g_dir);
    static const mode_t safe[] = {0700, 0755, 01777, 01770};
    for (size_t i = 0; i < sizeof(safe) / sizeof(safe[0]); i++) {
        make_dir(rd, safe[i]);
        char what[64];
        snprintf(what, sizeof(what), "mode %04o", (unsigned)safe[i]);
        accepted(rd, what);
    }
    hx_rmtree(rd);
    accepted(rd, "a directory it creates");
    struct stat st;
    EXPECT_TRUE(fails, stat(rd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755,
                "the directory nexard made has mode %04o, expected 0755",
                (unsigned)(st.st_mode & 07777));

    hx_rmtree(g_dir);
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
