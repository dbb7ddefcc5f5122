/*
 * matcher.h - the matcher of one communicator: it collects each rank's descriptors for
 * op seq k, checks that their signatures agree, runs the op chunk by chunk once every
 * rank has supplied the chunk, and completes the descriptors.  On a communicator that
 * spans nodes it hands the matched op to the cluster layer (cluster_ops.h), which runs it
 * part by part (op.h).
 */
#ifndef NX_MATCHER_H
#define NX_MATCHER_H

#include <stdint.h>
#include <sys/queue.h>

#include "shm_abi.h"

struct nx_client;
struct nx_comm;
struct nx_op;

TAILQ_HEAD(nx_op_list, nx_op);

struct nx_pull_drain;

struct nx_matcher {
    struct nx_op_list ops; /* by seq */
    /* Failed single-copy ops whose ranks still copy into each other (pull.c). */
    struct nx_pull_drain *drains;
    uint64_t *next_seq;    /* per rank: the next op the rank may open */
    uint64_t done_seq;     /* ops completed (for nexarctl) */
};

void nx_match_init(struct nx_matcher *s, uint32_t size);
void nx_match_fini(struct nx_matcher *s);

/* Entry point for every descriptor a client submits (already copied out of shm).
 * Validates it and routes it: collectives here, send/recv to p2p, free, abort. */
void nx_match_submit(struct nx_client *cl, const struct nx_sqe *e);

/* Whether an op of comm still needs rank: one it has not submitted every chunk of, whose
 * chunks have not all run, or that it still reads or is read for.  An op that waits only
 * for its other ranks' peer reads does not: the rank has its result and may leave. */
bool nx_match_rank_busy(const struct nx_comm *comm, uint32_t rank);

/* Completes every pending op of comm with the comm's failure. */
void nx_match_fail_all(struct nx_comm *comm);

/* Deadlines; called from the daemon's tick. */
void nx_match_tick(double now);

/* "all_reduce(count=1024, f32, sum)" */
void nx_sig_format(const struct nx_sqe *e, char *buf, size_t len);

#endif
