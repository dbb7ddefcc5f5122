/*
 * xlocal.h - the node-local halves of a collective that spans nodes: combining this
 * node's ranks into the node-level buffers of one part before the inter-node algorithm
 * runs, and handing the node-level result back to each rank after it.
 *
 * The node-level layouts are algo.h's (c = the part's elements per block, P = ranks of
 * the communicator, L = its ranks on this node in ascending rank order):
 *
 *   kind                  in (built here)                  out (read back here)
 *   all_reduce, bucketed  c: the sum over L                = in
 *   reduce                c: the sum over L                root node: = in
 *   broadcast             root node: the root's c          other nodes: c
 *   all_gather, gather    L blocks                         P blocks (gather: root node)
 *   scan, exscan          L blocks                         L blocks
 *   reduce_scatter        P blocks, each summed over L     L blocks
 *   scatter               root node: the root's P blocks   L blocks
 *   all_to_all            L x P: local rank i's block j    L x P: local i's block j,
 *                         at i*P + j                       from rank j
 *   barrier               -                                -
 *
 * F16/BF16 reductions (all_reduce, bucketed, reduce, reduce_scatter, scan, exscan) keep
 * the node-level buffers in f32 (wide): the ranks' values are widened, combined in f32,
 * carried across nodes in f32 and rounded once on the way back, so every element is
 * rounded once wherever the ranks are, as design.md promises and as on one node.
 *
 * Everything goes through the adapter, like coll_local.c.
 */
#ifndef NX_XLOCAL_H
#define NX_XLOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include "adapter.h"
#include "coll_local.h"

struct nx_xlocal {
    uint8_t kind, dtype, redop;
    uint32_t P, L;          /* ranks of the communicator; of them on this node */
    bool root_here;         /* rooted kinds: the root rank is on this node ... */
    uint32_t root_local;    /* ... and is local rank root_local (index into io) */
    uint64_t n;             /* elements per block in this part */
    bool wide;              /* node-level buffers are f32 (nx_xlocal_wide) */
    struct nx_rank_io *io;  /* L entries, in ascending rank order */
    uint8_t *in, *out;      /* the node-level buffers (nx_xlocal_sizes) */
};

/* Whether kind on dtype runs with f32 node-level buffers. */
bool nx_xlocal_wide(uint8_t kind, uint8_t dtype);

/* Elements of the node-level buffers for kind; out_is_in: out must be in itself (0
 * elements of its own).  Either may be 0 (no buffer). */
void nx_xlocal_sizes(const struct nx_xlocal *j, uint64_t *in_elems, uint64_t *out_elems,
                     bool *out_is_in);

/*
 * With one local rank, its chunk's own regions can serve as the node-level buffers: then
 * there is nothing to combine and nothing to copy back.  Their blocks lie io[0]'s stride
 * apart (the xop's nx_xop_desc.stride).  staged: the regions are the rank's staging slot
 * (this chunk's alone, so the algorithm may use the input as working memory).  True with
 * *in and *out set (NULL where the node has none), false when the copies are needed.
 */
bool nx_xlocal_in_place(const struct nx_xlocal *j, bool staged, uint8_t **in, uint8_t **out);

/* Ranks' inputs -> in.  0 or a negative errno from the adapter. */
int nx_xlocal_gather(const struct nx_adapter *ad, const struct nx_xlocal *j);

/* out (and, where the kind needs it, in) -> ranks' outputs. */
int nx_xlocal_scatter(const struct nx_adapter *ad, const struct nx_xlocal *j);

#endif
