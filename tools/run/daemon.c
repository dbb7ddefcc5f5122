/*
 * daemon.c - find a nexard to talk to, or start a private one.
 *
 * A private daemon lives in a mkdtemp() directory that holds its socket, its
 * runtime files and its log.  It runs in its own process group, so that a
 * Ctrl-C on the terminal reaches the ranks but not the daemon they still need
 * to fail cleanly, and it gets SIGTERM when nexar-run dies (PR_SET_PDEATHSIG),
 * so that it never outlives us by accident.  --keep-daemon detaches it instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "run.h"
#include "util.h"

#define START_TIMEOUT_S 10.0 /* for the private daemon to answer HELLO */
#define STOP_TIMEOUT_S 5.0   /* between SIGTERM and SIGKILL */
#define PROBE_MS 2000        /* an existing daemon's HELLO_REPLY */
#define LOG_TAIL_LINES 20

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* nexard's path: $NEXARD, next to us (installed in one directory), the meson
 * build tree (tools/ and daemon/ are siblings), the installed layout (bin/ and
 * sbin/), then $PATH and the sbin directories a user's PATH often lacks. */
static char *find_nexard(const struct run_opts *o)
{
    if (o->daemon)
        return executable(o->daemon) ? nxt_xstrdup(o->daemon) : NULL;
    const char *env = getenv("NEXARD");
    if (env && *env)
        return executable(env) ? nxt_xstrdup(env) : NULL;

    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        const char *dir = dirname(self);
        static const char *const rel[] = {"nexard", "../daemon/nexard", "../sbin/nexard"};
        for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
            char *p = nxt_xasprintf("%s/%s", dir, rel[i]);
            if (executable(p))
                return p;
            free(p);
        }
    }
    const char *path = getenv("PATH");
    char *dirs = nxt_xasprintf("%s:/usr/local/sbin:/usr/sbin:/sbin", path ? path : "");
    char *save = NULL, *found = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *p = nxt_xasprintf("%s/nexard", *d ? d : ".");
        if (executable(p))
            found = p;
        else
            free(p);
    }
    free(dirs);
    return found;
}

/* The last lines of the private daemon's log, to explain why it failed. */
static void print_log_tail(const struct run_daemon *d)
{
    FILE *f = d->log ? fopen(d->log, "r") : NULL;
    if (!f)
        return;
    char *lines[LOG_TAIL_LINES] = {0};
    size_t cap[LOG_TAIL_LINES] = {0};
    unsigned n = 0;
    while (getline(&lines[n % LOG_TAIL_LINES], &cap[n % LOG_TAIL_LINES], f) > 0)
        n++;
    fclose(f);
    if (n)
        fprintf(stderr, "nexar-run: last lines of %s:\n", d->log);
    for (unsigned i = n > LOG_TAIL_LINES ? n - LOG_TAIL_LINES : 0; i < n; i++)
        fprintf(stderr, "  %s", lines[i % LOG_TAIL_LINES]);
    for (unsigned i = 0; i < LOG_TAIL_LINES; i++)
        free(lines[i]);
}

static void describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "wait status %#x", status);
}

static void exec_daemon(const struct run_opts *o, const char *bin, struct run_daemon *d,
                        pid_t parent)
{
    if (o->keep_daemon) {
        setsid(); /* fully detached: it outlives us on purpose */
    } else {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1); /* nexar-run died before prctl took effect */
    }
    run_child_signals();
    if (d->tls_cert)
        run_bind_child(o, d->node, -1, 0);

    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0)
        dup2(null, STDIN_FILENO);
    if (!o->verbose || o->keep_daemon) {
        int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (log >= 0) {
            dup2(log, STDOUT_FILENO);
            dup2(log, STDERR_FILENO);
        }
    }
    char **argv = nxt_xcalloc((size_t)o->n_daemon_args + 16, sizeof(char *));
    int i = 0;
    argv[i++] = (char *)bin;
    argv[i++] = "--foreground";
    argv[i++] = "--socket";
    argv[i++] = d->socket;
    argv[i++] = "--runtime-dir";
    argv[i++] = d->dir;
    if (d->tls_cert) {
        /* Port 0: the kernel picks a free one, and nexar-run asks which. */
        argv[i++] = "--listen";
        argv[i++] = "127.0.0.1:0";
        argv[i++] = "--tls-ca";
        argv[i++] = d->tls_ca;
        argv[i++] = "--tls-cert";
        argv[i++] = d->tls_cert;
        argv[i++] = "--tls-key";
        argv[i++] = d->tls_key;
    }
    for (int k = 0; k < o->n_daemon_args; k++)
        argv[i++] = o->daemon_args[k];
    execv(bin, argv);
    fprintf(stderr, "nexar-run: cannot execute %s: %s\n", bin, strerror(errno));
    _exit(127);
}

/* Reads pending signals during the start; returns the first SIGINT/SIGTERM/SIGHUP. */
static int pending_interrupt(int sigfd)
{
    struct signalfd_siginfo si;
    int sig = 0;
    while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        if (!sig && si.ssi_signo != SIGCHLD)
            sig = (int)si.ssi_signo;
    return sig;
}

static void remove_entry_quietly(const char *path, bool dir)
{
    if ((dir ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
        nxt_warn("cannot remove %s: %s", path, strerror(errno));
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    remove_entry_quietly(path, flag == FTW_DP);
    return 0;
}

static void remove_dir(const char *dir)
{
    /* FTW_PHYS: never follow a link out of our own directory. */
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* SIGTERM, up to STOP_TIMEOUT_S, then SIGKILL; always reaps. */
static void stop_daemon(struct run_daemon *d)
{
    if (d->pid <= 0)
        return;
    kill(d->pid, SIGTERM);
    double deadline = nxt_now() + STOP_TIMEOUT_S;
    for (;;) {
        pid_t r = waitpid(d->pid, &d->status, WNOHANG);
        if (r == d->pid || (r < 0 && errno != EINTR))
            break;
        if (nxt_now() >= deadline) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &d->status, 0);
            break;
        }
        usleep(20 * 1000);
    }
    d->pid = 0;
}

static int start_private(const struct run_opts *o, struct run_daemon *d, int sigfd)
{
    char *bin = find_nexard(o);
    if (!bin) {
        nxt_warn("no nexard answers at %s and none can be started: nexard not found "
                 "(use --daemon PATH or set $NEXARD)", nxt_socket_path(o->socket));
        return NXR_EXIT_NO_DAEMON;
    }
    const char *tmp = getenv("TMPDIR");
    char *templ = nxt_xasprintf("%s/nexar-run.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(templ)) {
        nxt_warn("mkdtemp %s: %s", templ, strerror(errno));
        free(templ);
        free(bin);
        return NXR_EXIT_OSERR;
    }
    d->dir = templ;
    d->socket = nxt_xasprintf("%s/nexard.sock", d->dir);
    d->log = nxt_xasprintf("%s/nexard.log", d->dir);

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        nxt_warn("fork: %s", strerror(errno));
        free(bin);
        return NXR_EXIT_OSERR;
    }
    if (pid == 0)
        exec_daemon(o, bin, d, parent);
    d->pid = pid;
    if (o->verbose)
        nxt_warn("started private nexard %s (pid %d) at %s", bin, (int)pid, d->socket);
    free(bin);

    char err[256] = "";
    double deadline = nxt_now() + START_TIMEOUT_S;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char why[64];
            d->pid = 0;
            describe_status(status, why, sizeof(why));
            nxt_warn("the private nexard exited (%s) before answering at %s", why,
                     d->socket);
            print_log_tail(d);
            return NXR_EXIT_NO_DAEMON;
        }
        int fd = nxt_connect(d->socket, NEXAR__CLIENT_KIND__CLIENT_CTL, PROBE_MS, NULL, err,
                             sizeof(err));
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (nxt_now() >= deadline) {
            nxt_warn("the private nexard (pid %d) did not answer at %s within %.0f s: %s",
                     (int)pid, d->socket, START_TIMEOUT_S, err);
            stop_daemon(d);
            print_log_tail(d);
            return NXR_EXIT_NO_DAEMON;
        }
        /* Sleep on the signalfd: a Ctrl-C now must not be lost or ignored. */
        struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
        if (poll(&pfd, 1, 25) > 0) {
            int sig = pending_interrupt(sigfd);
            if (sig) {
                stop_daemon(d);
                return 128 + sig;
            }
        }
    }
}

int run_daemon_attach(const struct run_opts *o, struct run_daemon *d, int sigfd)
{
    const char *path = nxt_socket_path(o->socket);
    char err[256];
    memset(d, 0, sizeof(*d));
    int fd = nxt_connect(path, NEXAR__CLIENT_KIND__CLIENT_CTL, PROBE_MS, NULL, err,
                         sizeof(err));
    if (fd >= 0) {
        close(fd);
        d->socket = nxt_xstrdup(path);
        if (o->verbose)
            nxt_warn("using the nexard at %s", path);
        return 0;
    }
    /* Joiners join a job that runs at a daemon: a fresh one would not know it. */
    if (o->join) {
        nxt_warn("--join %s: %s; joiners need the nexard that runs the job (--socket PATH, "
                 "or $NEXAR_SOCKET)", o->join, err);
        return NXR_EXIT_NO_DAEMON;
    }
    /* Nothing there is the normal case for a private run; anything stranger (a
     * daemon that refuses us, or the socket the user named) deserves a note. */
    if (!o->quiet && (fd != -NEXAR_ERR_UNAVAILABLE || o->socket || o->verbose))
        nxt_warn("%s; starting a private nexard", err);
    return start_private(o, d, sigfd);
}

int run_daemon_start_node(const struct run_opts *o, struct run_daemon *d, int sigfd)
{
    int code = start_private(o, d, sigfd);
    if (!code)
        code = run_nodes_address(d);
    if (!code && o->verbose)
        nxt_warn("simulated node at %s: nexard %s", d->addr, d->socket);
    return code;
}

bool run_daemon_reaped(const struct run_opts *o, struct run_daemon *d, pid_t pid,
                       int status)
{
    if (d->pid <= 0 || pid != d->pid)
        return false;
    d->pid = 0;
    d->status = status;
    if (!o->quiet) {
        char why[64];
        describe_status(status, why, sizeof(why));
        nxt_warn("the private nexard exited during the run (%s)", why);
        print_log_tail(d);
    }
    return true;
}

static void stop_and_clean(const struct run_opts *o, struct run_daemon *d)
{
    if (!d->dir)
        return;
    if (o->keep_daemon && d->pid > 0) {
        if (!o->quiet)
            nxt_warn("private nexard (pid %d) keeps running: NEXAR_SOCKET=%s", (int)d->pid,
                     d->socket);
        return;
    }
    stop_daemon(d);
    if (o->keep_daemon) {
        if (!o->quiet)
            nxt_warn("the private nexard's files stay in %s", d->dir);
        return;
    }
    remove_dir(d->dir);
}

void run_daemon_detach(const struct run_opts *o, struct run_daemon *d)
{
    stop_and_clean(o, d);
    free(d->socket);
    free(d->dir);
    free(d->log);
    free(d->tls_ca);
    free(d->tls_cert);
    free(d->tls_key);
    free(d->addr);
    d->socket = d->dir = d->log = NULL;
    d->tls_ca = d->tls_cert = d->tls_key = d->addr = NULL;
}
