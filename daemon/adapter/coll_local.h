/*
 * coll_local.h - one chunk of a collective among the ranks attached to this daemon.
 *
 * The matcher resolves, for every rank, where this chunk's input and output live
 * (in its staging slot or its arena buffer) and calls here.  Nothing here knows about
 * rings, sockets or clients: only buffers, through the adapter.
 */
#ifndef NX_COLL_LOCAL_H
#define NX_COLL_LOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include "adapter.h"

/* Where one rank's chunk lives.  Block j of the input starts at in + j * in_stride
 * elements (likewise for out); NULL where the shape gives the rank no such region. */
struct nx_rank_io {
    uint8_t *in, *out;
    uint64_t in_stride, out_stride;
    bool own_by_rank; /* staged all_gather: the rank copies its own block (shm_abi.h) */
};

struct nx_chunk_job {
    uint8_t kind, dtype, redop;
    uint32_t root, size;
    uint64_t n; /* elements per block in this chunk */
    struct nx_rank_io *io; /* size entries, indexed by rank */
};

/* Runs the chunk.  Returns 0, or -EINVAL for a kind without local data movement. */
int nx_coll_local_run(const struct nx_adapter *ad, const struct nx_chunk_job *job);

/* Name of the local algorithm for kind, for nexarctl ops. */
const char *nx_coll_local_algo(uint8_t kind);

#endif
