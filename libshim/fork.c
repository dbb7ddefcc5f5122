/*
 * fork.c - a process forked after nexar_init().
 *
 * The child inherits the rank whole: its socket to nexard, the doorbells, and the shared
 * segment with the rings.  Kept, they do harm both ways.  A child that calls nexar takes
 * completions meant for its parent and moves the rings' indices under it: the parent's
 * request then ends with the child's result, or waits for ring space that never comes.
 * A child that merely lives on (a data-loader worker, a helper asleep) holds the socket
 * open, so when the parent dies nexard sees no hang-up and the other ranks wait for the op
 * deadline instead of hearing at once that the rank is gone.
 *
 * So the child closes its copies of the descriptors as it is born, and from then on every
 * call that would use the rank refuses with a text that says why.  The segment stays
 * mapped: memory from nexar_alloc() is shared with the parent, and a child may still read
 * what it was handed.  A child without this handler (the raw fork system call, clone) is
 * caught by nexard, which watches the rank's process and not only its socket.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "shim.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Runs in the child, alone (the other threads did not come along): the lock may have
 * been held by one of them, so it is made anew before anything else. */
static void in_child(void)
{
    nx_S.mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    nx_S.cv = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
    nx_S.poller = false;
    if (!nx_S.inited || nx_S.forked_from)
        return; /* nothing to give up, or a grandchild: already given up */
    nx_S.forked_from = nx_S.pid;
    int *fds[] = {&nx_S.sock, &nx_S.sq_efd, &nx_S.cq_efd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
        if (*fds[i] >= 0)
            close(*fds[i]); /* never shutdown(): that would end the parent's connection */
        *fds[i] = -1;
    }
    snprintf(nx_S.fork_text, sizeof(nx_S.fork_text),
             "this process (pid %ld) was forked from rank %d (pid %ld) after nexar_init(); "
             "only the parent may use that rank (exec a new program, or call nexar from "
             "the parent)",
             (long)getpid(), nx_S.world ? nx_S.world->rank : -1, (long)nx_S.forked_from);
}

static void install(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

void nx_fork_watch(void)
{
    nx_S.pid = getpid();
    pthread_once(&once, install);
}

nexar_status_t nx_fork_check(const char *fn)
{
    if (!nx_S.forked_from)
        return NEXAR_OK;
    return nx_fail(NEXAR_ERR_INVALID, "%s: %s", fn, nx_S.fork_text);
}
