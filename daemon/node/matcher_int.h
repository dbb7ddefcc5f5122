/*
 * matcher_int.h - what the matcher shares with xcoll.c, which runs the ops of
 * communicators spanning nodes part by part instead of chunk by chunk.
 */
#ifndef NX_MATCHER_INT_H
#define NX_MATCHER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "coll_local.h"
#include "matcher.h"

/* The op of comm's matcher with sequence seq, or NULL. */
struct nx_op *nx_sched_op_find(struct nx_sched *s, uint64_t seq);

/* Every local rank has supplied the op's next chunk. */
bool nx_op_chunk_ready(const struct nx_op *op);

/* Where elements [off, off + n) of each block live for each local rank (io has one entry
 * per local rank): a direct rank's buffers, or a staged rank's oldest queued chunk. */
void nx_op_chunk_io(const struct nx_op *op, uint64_t off, uint64_t n, struct nx_rank_io *io);

/* Every chunk of op ran: completes the direct descriptors, counts the op, frees it. */
void nx_op_finish(struct nx_op *op);

static inline bool nx_part_direct(const struct nx_part *p)
{
    return (p->first.flags & NX_SQE_DIRECT) != 0;
}

#endif
