/*
 * op.h - an op as the matcher holds it: one part per local rank, with the descriptors
 * that rank supplied.  The matcher runs it chunk by chunk on one node; the cluster layer
 * (cluster/xcoll.c) runs the op of a communicator spanning nodes part by part, through
 * what is declared here.
 */
#ifndef NX_OP_H
#define NX_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "coll_local.h"
#include "matcher.h"
#include "shm_abi.h"

struct nx_client;
struct nx_comm;
struct nx_dev_part;
struct nx_xrun;

struct nx_staged {
    uint64_t user_data;
    uint64_t in_off, out_off; /* single copy: the rank's buffers' addresses */
    uint32_t chunk;
    uint32_t table_slot; /* single copy: the slot that takes its peer-read table (tag) */
};

/* Staged chunks a part holds without an allocation (most small ops have one). */
#define NX_PART_Q_INL 2

/* One rank's part in one op. */
struct nx_part {
    struct nx_client *client; /* NULL until the rank arrived */
    struct nx_sqe first;      /* the descriptor that brought the rank in */
    struct nx_staged *q;      /* staged chunks not yet run, in chunk order (q_inl first) */
    size_t q_head, q_len, q_cap;
    struct nx_staged q_inl[NX_PART_Q_INL];
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
    /* Peer reads (pull.c): chunks [pull_rel, next_chunk) ran; for each, in a ring of
     * pull_win entries (chunk % pull_win), the ranks (bits) that still read it and the
     * ranks whose slots they read, with those ranks' descriptors, completed in chunk
     * order once nobody reads them.  NULL until the op's first chunk by peer reads. */
    uint64_t pull_rel;
    uint32_t pull_win;
    uint32_t *pull_owe, *pull_src;
    uint64_t *pull_ud; /* [chunk % pull_win * comm size + rank] */
    /* A single-copy reader found a peer's process gone (ESRCH): the peer's hang-up, which
     * fails the communicator with PEER_LOST, is on its way.  The reader's notice (tag),
     * its rank and when it came, should the peer still be there a second later. */
    uint32_t gone_tag, gone_reader, gone_peer;
    double gone_at;
    TAILQ_ENTRY(nx_op) link;
    struct nx_part parts[];
};


/* The op of comm's matcher with sequence seq, or NULL. */
struct nx_op *nx_match_op_find(struct nx_matcher *s, uint64_t seq);

/* Every local rank has supplied the op's next chunk. */
bool nx_op_chunk_ready(const struct nx_op *op);

/* Where elements [off, off + n) of each block live for each local rank (io has one entry
 * per local rank): a direct rank's buffers, or a staged rank's oldest queued chunk. */
void nx_op_chunk_io(const struct nx_op *op, uint64_t off, uint64_t n, struct nx_rank_io *io);

/* Whether local rank r holds up op: it has not arrived, or, staged, has no chunk queued
 * while one is still to come and may take a slot for it.  A rank whose communicator's
 * parts across nodes hold as many of its chunks as one stream may hold slots
 * (nx_stream_slot_cap) waits for nexard instead: those parts wait for other nodes.  The
 * deadline's text and nexarctl ops name the ranks this says. */
bool nx_op_rank_holds_up(const struct nx_op *op, uint32_t r);

/* Every chunk of op ran: completes the direct descriptors, counts the op, frees it. */
void nx_op_finish(struct nx_op *op);

/* ---- peer reads (pull.c) ---- */

/* Runs the op's next chunk by peer reads if it qualifies (a local staged broadcast,
 * all_gather, gather, scatter or all_to_all whose ranks all read peers' slots, blocks of
 * NX_PULL_MIN_BYTES or more):
 * writes each reader's table, completes the readers' descriptors with it and holds the
 * read ones.  False: the chunk is nexard's to copy. */
bool nx_pull_chunk(struct nx_op *op, uint64_t n);

/* A late notice of a failed single-copy op (seq): the held ranks complete, with the
 * failure, once no live rank still copies. */
void nx_pull_drain_done(struct nx_comm *c, uint64_t seq, uint32_t rank);
/* Rank left c (gone, or freed it): it copies no more, and hears nothing. */
void nx_pull_drain_leave(struct nx_comm *c, uint32_t rank);
/* Completes, with the failure, every drain older than the communicator's deadline (a
 * rank that never comes back to copy), and frees them all when `all`. */
void nx_pull_drain_tick(struct nx_comm *c, double now, bool all);

/* Whether the op's next chunk may run: false while pull_win chunks are still read. */
bool nx_pull_room(const struct nx_op *op);

/* Completes the held descriptors of the leading chunks nobody reads any more.  True when
 * every chunk that ran is released. */
bool nx_pull_release(struct nx_op *op);

/* rank's NX_K_PULLED for chunk `chunk`.  False (nothing changed) when the rank was not
 * given that chunk to read, with why. */
bool nx_pull_done(struct nx_op *op, uint32_t rank, uint32_t chunk, char *why, size_t len);

/* The communicator failed: completes the held descriptors with its failure. */
void nx_pull_fail(struct nx_op *op);

/* Whether rank still reads a chunk of op, or holds a slot (or buffer) others read. */
bool nx_pull_involves(const struct nx_op *op, uint32_t rank);

/* The ranks (bits) that still read the oldest unreleased chunk; 0 when none. */
uint32_t nx_pull_owing(const struct nx_op *op);

/* The same as "1, 3"; "" when none. */
void nx_pull_waiting(const struct nx_op *op, char *buf, size_t len);

static inline bool nx_part_direct(const struct nx_part *p)
{
    return (p->first.flags & NX_SQE_DIRECT) != 0;
}

#endif
