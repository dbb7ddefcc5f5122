/* loopwatch.h - says when the event loop went a long time without looking at its sockets.
 *
 * Everything nexard does runs on one loop: a turn that takes seconds holds every rank's
 * completions, every peer's packets and the keep-alives, and a peer that hears nothing for
 * peer_idle_timeout_ms declares this node lost.  Such a turn is logged (at most one line
 * every 10 s) and counted (nexarctl stats: loop_stalls), so that a lost peer or a slow op
 * can be told apart from a stalled daemon. */
#ifndef NX_LOOPWATCH_H
#define NX_LOOPWATCH_H

#include <uv.h>

/* A turn of the loop longer than this, time waiting in poll left out, is a stall. */
#define NX_LOOP_STALL_NS 1000000000ull

/* Starts watching loop (before uv_run: it asks libuv to count its idle time). */
void nx_loopwatch_start(uv_loop_t *loop);

#endif
