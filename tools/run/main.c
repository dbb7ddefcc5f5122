/*
 * main.c - nexar-run: start N ranks as one nexar job and supervise them.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "util.h"

static sigset_t orig_mask;
static struct sigaction orig_pipe;

/*
 * The signals nexar-run handles are blocked and read from a signalfd, so that a
 * rank's death or a Ctrl-C between two steps is never lost.  SIGPIPE is
 * ignored: when the reader of our stderr goes away (`nexar-run ... | head`),
 * nexar-run must still stop the ranks and the daemon and remove its directory.
 */
static void take_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigprocmask(SIG_BLOCK, set, &orig_mask);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, &orig_pipe);
}

void run_child_signals(void)
{
    /* An ignored signal stays ignored across exec: give the children what we got. */
    sigaction(SIGPIPE, &orig_pipe, NULL);
    sigprocmask(SIG_SETMASK, &orig_mask, NULL);
}

int main(int argc, char **argv)
{
    struct run_opts o;
    nxt_progname = "nexar-run";
    run_opts_parse(&o, argc, argv);
    run_resolve_program(&o);

    sigset_t set;
    take_signals(&set);
    int sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0)
        nxt_die(NXR_EXIT_OSERR, "signalfd: %s", strerror(errno));

    /* 64 random bits in the default name: another user cannot guess it and create the job
     * first (the uid rule refuses our ranks then; the name keeps that from happening). */
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        rnd = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    char *job = o.join ? nxt_xstrdup(o.join)
              : o.job ? nxt_xstrdup(o.job)
                      : nxt_xasprintf("run-%d-%lld-%016llx", (int)getpid(),
                                      (long long)time(NULL), (unsigned long long)rnd);

    /* One daemon per (simulated) node. */
    struct run_daemon *daemons = nxt_xcalloc((size_t)o.nodes, sizeof(*daemons));
    char *certdir = NULL;
    int code;
    if (o.nodes == 1) {
        code = run_daemon_attach(&o, &daemons[0], sigfd);
    } else {
        code = run_nodes_certs(&o, daemons, &certdir);
        for (int i = 0; i < o.nodes && !code; i++) {
            daemons[i].node = i;
            if (o.verbose) {
                char cpus[256];
                run_bind_describe(&o, i, cpus, sizeof(cpus));
                nxt_warn("node %d: %s", i, cpus);
            }
            code = run_daemon_start_node(&o, &daemons[i], sigfd);
        }
    }
    if (code)
        goto out_daemons;

    struct run_rank *ranks = nxt_xcalloc((size_t)o.nranks, sizeof(*ranks));
    code = run_ranks_start(&o, job, daemons, ranks);
    if (!code)
        code = run_supervise(&o, sigfd, ranks, daemons);
    free(ranks);

out_daemons:
    for (int i = 0; i < o.nodes; i++)
        run_daemon_detach(&o, &daemons[i]);
    run_nodes_cleanup(&o, certdir);
    free(daemons);
    free(job);
    free(o.daemon_args);
    close(sigfd);
    return code;
}
