/*
 * sig_rank.c - the rank program of test_run_signals.c: what a rank does with the signals
 * nexar-run forwards.  Files go to $HX_OUT, named <what><rank>; every mode writes
 * ready<rank> once its handlers are in place, and gives up after 60 s (exit 3).
 *
 *   sig_rank MODE
 *     exit0     SIGINT or SIGHUP: write int<rank> / hup<rank>, exit 0
 *     default   SIGINT kills it (the default action, set explicitly)
 *     stubborn  SIGINT and SIGTERM are written down (int<rank>, term<rank>) and ignored:
 *               only SIGKILL ends it
 *     nexar     nexar_init first; on SIGINT write int<rank>, then an all_reduce of the
 *               ranks (it needs the daemon alive), finalize, exit 0 when it was right
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nexar.h"

static char g_int[600], g_hup[600], g_term[600];
static volatile sig_atomic_t g_got;
static int g_exit_on_signal;

static void mark(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* async-signal-safe */
    if (fd >= 0) {
        ssize_t w = write(fd, "1\n", 2);
        (void)w;
        close(fd);
    }
}

static void on_signal(int sig)
{
    mark(sig == SIGINT ? g_int : sig == SIGHUP ? g_hup : g_term);
    g_got = sig;
    if (g_exit_on_signal)
        _exit(0);
}

static void handle(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

static void put_ready(const char *dir, int rank)
{
    char p[600], tmp[640];
    snprintf(p, sizeof(p), "%s/ready%d", dir, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    mark(tmp);
    rename(tmp, p);
}

/* Sleeps until a signal was handled or 60 s passed; 0 when one was. */
static int wait_signal(void)
{
    time_t end = time(NULL) + 60;
    while (!g_got && time(NULL) < end)
        usleep(10000);
    return g_got ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit0";
    const char *dir = getenv("HX_OUT"), *r = getenv("NEXAR_RANK");
    if (!dir || !r)
        return 2;
    int rank = atoi(r);
    snprintf(g_int, sizeof(g_int), "%s/int%d", dir, rank);
    snprintf(g_hup, sizeof(g_hup), "%s/hup%d", dir, rank);
    snprintf(g_term, sizeof(g_term), "%s/term%d", dir, rank);

    if (!strcmp(mode, "exit0")) {
        g_exit_on_signal = 1;
        handle(SIGINT, on_signal);
        handle(SIGHUP, on_signal);
    } else if (!strcmp(mode, "default")) {
        handle(SIGINT, SIG_DFL);
    } else if (!strcmp(mode, "stubborn")) {
        handle(SIGINT, on_signal);
        handle(SIGTERM, on_signal);
    } else if (!strcmp(mode, "nexar")) {
        handle(SIGINT, on_signal);
        nexar_comm_t *w = NULL;
        nexar_status_t st = nexar_init(&w);
        if (st != NEXAR_OK) {
            fprintf(stderr, "rank %d: nexar_init: %s\n", rank, nexar_last_error());
            return 20;
        }
        put_ready(dir, rank);
        if (wait_signal())
            return 3;
        int32_t v = nexar_comm_rank(w);
        int n = nexar_comm_size(w);
        st = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
        if (st != NEXAR_OK || v != n * (n - 1) / 2) {
            fprintf(stderr, "rank %d: all_reduce after SIGINT: %s: %s (%d)\n", rank,
                    nexar_strerror(st), nexar_last_error(), v);
            nexar_finalize();
            return 21;
        }
        return nexar_finalize() == NEXAR_OK ? 0 : 22;
    } else {
        return 2;
    }
    put_ready(dir, rank);
    for (time_t end = time(NULL) + 60; time(NULL) < end;)
        usleep(10000); /* the handlers act; stubborn keeps sleeping */
    return 3;
}
