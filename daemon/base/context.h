/* context.h - the daemon-wide context every module shares: the loop, the settings, the
 * counters.  One nexard process has one of it. */
#ifndef NX_CONTEXT_H
#define NX_CONTEXT_H

#include <stdint.h>
#include <uv.h>

#include "config.h"

struct nx_stats {
    uint64_t ops_completed, ops_failed;
    uint64_t bytes_reduced, bytes_copied, chunks;
    uint64_t bytes_pulled; /* moved by the ranks' peer reads (pull.c) */
    uint64_t bytes_streamed; /* DATA payload taken as it arrived (xcoll_net.c) */
    uint64_t clients_accepted, clients_dropped, protocol_violations;
    uint64_t p2p_messages, mismatches, timeouts, peers_lost;
    uint64_t recoveries; /* communicators shrunk */
    uint64_t spin_pauses; /* the loop stopped spinning: another program on its core (ring.c) */
    uint64_t loop_stalls; /* turns of the loop of a second or more (loopwatch.h) */
};

struct nx_daemon {
    uv_loop_t *loop;
    struct nx_config cfg;
    double start_time; /* nx_now() at start */
    struct nx_stats stats;
    int stopping;
};

extern struct nx_daemon nxd;

/* Monotonic seconds. */
double nx_now(void);

#endif
