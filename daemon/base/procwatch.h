/* procwatch.h - learning that a process exited, through a pidfd.
 *
 * A rank's socket is not proof of life: a process it forked, or one it passed the
 * descriptor to, keeps the socket open after the rank itself is gone.  The pidfd becomes
 * readable when the process exits, whoever holds what. */
#ifndef NX_PROCWATCH_H
#define NX_PROCWATCH_H

#include <sys/types.h>
#include <uv.h>

struct nx_procwatch;

/* Calls fn(arg) once, from the loop, when pid exits.  NULL when it cannot be watched (no
 * pidfd in this kernel, a pid from another namespace, the process already gone): the
 * caller then has only what it had before. */
struct nx_procwatch *nx_procwatch_start(uv_loop_t *loop, pid_t pid, void (*fn)(void *arg),
                                        void *arg);
/* Stops the watch; fn is not called after this.  NULL is a no-op. */
void nx_procwatch_stop(struct nx_procwatch *w);

#endif
