/*
 * supervise.c - wait for the ranks, forward signals, stop the job when one fails.
 *
 * Everything arrives through one signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP are
 * blocked in main.c), so the loop is a poll() with the next deadline as timeout
 * and no code runs in signal handlers.
 *
 * When a rank fails (non-zero exit or a signal), the others usually fail too
 * within seconds: the daemon fails the communicators with NEXAR_ERR_PEER_LOST.
 * A rank that is not inside a nexar call does not notice, so after --grace
 * seconds the survivors get SIGTERM, and SIGKILL two seconds after that.
 *
 * Exit status: the first failing rank's (128 + S for signal S); 128 + S when
 * nexar-run was interrupted by signal S and every rank still exited 0; else 0.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"
#include "util.h"

#define KILL_AFTER_TERM_S 2.0

struct sup {
    const struct run_opts *o;
    struct run_rank *ranks;
    struct run_daemon *d;
    int live;
    int first_fail;     /* index of the first failed rank, -1 */
    int interrupted;    /* the first forwarded signal, 0 */
    double term_at;     /* SIGTERM the survivors then; 0: not scheduled */
    double kill_at;     /* SIGKILL them then; 0: not scheduled */
};

int run_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

static void describe(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exit status %d", run_exit_code(status));
}

static int signal_live(struct sup *s, int sig, bool mark)
{
    int n = 0;
    for (int i = 0; i < s->o->nranks; i++) {
        struct run_rank *r = &s->ranks[i];
        if (r->exited)
            continue;
        kill(r->pid, sig);
        r->stopped_by_us |= mark;
        n++;
    }
    return n;
}

static struct run_rank *rank_of(struct sup *s, pid_t pid)
{
    for (int i = 0; i < s->o->nranks; i++)
        if (s->ranks[i].pid == pid && !s->ranks[i].exited)
            return &s->ranks[i];
    return NULL;
}

static void reap(struct sup *s)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct run_rank *r = rank_of(s, pid);
        if (!r) {
            for (int k = 0; k < s->o->nodes; k++)
                if (run_daemon_reaped(s->o, &s->d[k], pid, status))
                    break;
            continue;
        }
        r->exited = true;
        r->status = status;
        s->live--;
        if (run_exit_code(status) == 0 || s->first_fail >= 0)
            continue;
        s->first_fail = r->rank;
        if (!s->term_at && !s->kill_at)
            s->term_at = nxt_now() + s->o->grace;
    }
}

static void on_signal(struct sup *s, int sig)
{
    if (sig == SIGCHLD)
        return; /* reap() runs on every wake-up */
    if (s->interrupted) {
        /* A second interrupt: the user means it. */
        int n = signal_live(s, SIGKILL, true);
        if (n && !s->o->quiet)
            nxt_warn("second %s: killing %d rank%s", strsignal(sig), n, n == 1 ? "" : "s");
        return;
    }
    s->interrupted = sig;
    signal_live(s, sig, false);
    if (!s->term_at && !s->kill_at)
        s->term_at = nxt_now() + s->o->grace;
}

static void deadlines(struct sup *s)
{
    double now = nxt_now();
    if (s->term_at && now >= s->term_at) {
        s->term_at = 0;
        s->kill_at = now + KILL_AFTER_TERM_S;
        int n = signal_live(s, SIGTERM, true);
        if (n && !s->o->quiet)
            nxt_warn("%s; sending SIGTERM to the %d rank%s still running",
                     s->first_fail >= 0 ? "a rank failed" : "interrupted", n,
                     n == 1 ? "" : "s");
    }
    if (s->kill_at && now >= s->kill_at) {
        s->kill_at = 0;
        int n = signal_live(s, SIGKILL, true);
        if (n && !s->o->quiet)
            nxt_warn("sending SIGKILL to %d rank%s", n, n == 1 ? "" : "s");
    }
}

static int next_timeout_ms(const struct sup *s)
{
    double at = s->term_at ? s->term_at : s->kill_at;
    if (!at)
        return -1;
    double left = at - nxt_now();
    return left <= 0 ? 0 : (int)(left * 1000.0) + 1;
}

/* One line: the first failure, and how the rest ended. */
static void summary(const struct sup *s)
{
    const struct run_rank *first = &s->ranks[s->first_fail];
    int failed = 0, stopped = 0;
    for (int i = 0; i < s->o->nranks; i++) {
        const struct run_rank *r = &s->ranks[i];
        if (run_exit_code(r->status) == 0)
            continue;
        if (r->stopped_by_us && r != first)
            stopped++;
        else
            failed++;
    }
    char why[96], more[96] = "";
    describe(first->status, why, sizeof(why));
    if (failed > 1)
        snprintf(more, sizeof(more), "; %d of %d ranks failed", failed, s->o->nranks);
    if (stopped)
        snprintf(more + strlen(more), sizeof(more) - strlen(more),
                 "%s%d stopped by nexar-run", failed > 1 ? ", " : "; ", stopped);
    char intr[64] = "";
    if (s->interrupted)
        snprintf(intr, sizeof(intr), "interrupted by %s; ", strsignal(s->interrupted));
    nxt_warn("%srank %d (pid %d) failed%s: %s%s", intr, first->rank, (int)first->pid,
             first->stopped_by_us ? " (stopped by nexar-run)" : "", why, more);
}

int run_supervise(const struct run_opts *o, int sigfd, struct run_rank *ranks,
                  struct run_daemon *d)
{
    struct sup s = {.o = o, .ranks = ranks, .d = d, .live = o->nranks, .first_fail = -1};
    while (s.live > 0) {
        struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
        int pr = poll(&pfd, 1, next_timeout_ms(&s));
        if (pr < 0 && errno != EINTR) {
            nxt_warn("poll: %s", strerror(errno));
            signal_live(&s, SIGKILL, true);
        }
        struct signalfd_siginfo si;
        while (pr > 0 && read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            on_signal(&s, (int)si.ssi_signo);
        reap(&s);
        deadlines(&s);
    }
    if (s.first_fail >= 0) {
        if (!o->quiet)
            summary(&s);
        return run_exit_code(ranks[s.first_fail].status);
    }
    return s.interrupted ? 128 + s.interrupted : 0;
}
