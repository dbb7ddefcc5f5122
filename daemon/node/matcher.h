/*
 * matcher.h - the matcher of one communicator: it collects each rank's descriptors for
 * op seq k, checks that their signatures agree, runs the op chunk by chunk once every
 * rank has supplied the chunk, and completes the descriptors.
 */
#ifndef NX_MATCHER_H
#define NX_MATCHER_H

#include <stdint.h>
#include <sys/queue.h>

#include "shm_abi.h"

struct nx_client;
struct nx_comm;
struct nx_dev_part;
struct nx_xrun;

struct nx_staged {
    uint64_t user_data;
    uint64_t in_off, out_off;
    uint32_t chunk;
};

/* One rank's part in one op. */
struct nx_part {
    struct nx_client *client; /* NULL until the rank arrived */
    struct nx_sqe first;      /* the descriptor that brought the rank in */
    struct nx_staged *q;      /* staged chunks not yet run, in chunk order */
    size_t q_head, q_len, q_cap;
    uint32_t next_chunk; /* staged: the chunk index the rank must submit next */
    struct nx_dev_part *dev; /* device descriptor (NX_SQE_DEVICE): its loaded record */
};

struct nx_op {
    struct nx_comm *comm;
    uint64_t seq;
    struct nx_sqe sig; /* the first arrival's descriptor: the signature */
    uint32_t sig_rank;
    uint64_t chunk_elems, nchunks, next_chunk;
    uint32_t arrived;
    double started;
    struct nx_xrun *xr; /* on a communicator spanning nodes: its parts (xcoll.c) */
    uint32_t algo;      /* nx_cqe.algo of its completions (the algorithm across nodes) */
    TAILQ_ENTRY(nx_op) link;
    struct nx_part parts[];
};

TAILQ_HEAD(nx_op_list, nx_op);

struct nx_sched {
    struct nx_op_list ops; /* by seq */
    uint64_t *next_seq;    /* per rank: the next op the rank may open */
    uint64_t done_seq;     /* ops completed (for nexarctl) */
};

void nx_sched_init(struct nx_sched *s, uint32_t size);
void nx_sched_fini(struct nx_sched *s);

/* Entry point for every descriptor a client submits (already copied out of shm).
 * Validates it and routes it: collectives here, send/recv to p2p, free, abort. */
void nx_sched_submit(struct nx_client *cl, const struct nx_sqe *e);

/* Completes every pending op of comm with the comm's failure. */
void nx_sched_fail_all(struct nx_comm *comm);

/* Deadlines; called from the daemon's tick. */
void nx_sched_tick(double now);

/* "all_reduce(count=1024, f32, sum)" */
void nx_sig_format(const struct nx_sqe *e, char *buf, size_t len);

#endif
