/* coll_local.c - see coll_local.h.  All ranks' buffers are mapped in this process, so
 * every collective is a direct gather/compute/scatter over them: each byte is read
 * once and written once per destination, which is what bounds a node-local collective. */
#include "coll_local.h"

#include <errno.h>
#include <stdlib.h>

#include "mem.h"
#include "shm_abi.h"
#include "workers.h"

/* Below this many bytes touched a chunk runs on the loop thread alone: waking workers
 * costs tens of microseconds.  When the ranks already hold the CPUs (nx_workers_crowded)
 * a woken worker must take a CPU from a rank, and only chunks of 4 MiB or more still
 * gained from it: measured on 2 CPUs with 2 ranks, broadcast and all_gather of 512 KiB
 * ran 1.6-1.9 times faster unsplit, 1 MiB broadcasts and 2 MiB all_gathers (4 MiB
 * touched) faster split (performance.md). */
#define SPLIT_MIN_BYTES (512u << 10)
#define SPLIT_MIN_BYTES_CROWDED (4u << 20)
/* Parts start on 256-byte boundaries (cache lines and every SIMD width). */
#define SPLIT_ALIGN 256u

#define MAX_STACK_RANKS 64

static uint8_t *blk(uint8_t *base, uint64_t stride, uint32_t j, uint32_t es)
{
    return base + (uint64_t)j * stride * es;
}

/* Reduction over ranks of block `b` of every input into the given outputs. */
static int reduce_block(const struct nx_adapter *ad, const struct nx_chunk_job *jb,
                        uint32_t b, void **dsts, size_t ndst, const void **srcs)
{
    uint32_t es = nx_dtype_size(jb->dtype);
    for (uint32_t r = 0; r < jb->size; r++)
        srcs[r] = blk(jb->io[r].in, jb->io[r].in_stride, b, es);
    return ad->reduce_fanout(dsts, ndst, srcs, jb->size, jb->n, jb->dtype, jb->redop);
}

static int run(const struct nx_adapter *ad, const struct nx_chunk_job *jb, void **dsts,
               const void **srcs)
{
    uint32_t P = jb->size, es = nx_dtype_size(jb->dtype);
    size_t bytes = jb->n * es;
    struct nx_rank_io *io = jb->io;
    int rv = 0;

    switch (jb->kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
        for (uint32_t r = 0; r < P; r++)
            dsts[r] = io[r].out;
        return reduce_block(ad, jb, 0, dsts, P, srcs);
    case NX_K_REDUCE:
        dsts[0] = io[jb->root].out;
        return reduce_block(ad, jb, 0, dsts, 1, srcs);
    case NX_K_REDUCE_SCATTER:
        for (uint32_t r = 0; r < P && rv == 0; r++) {
            dsts[0] = io[r].out;
            rv = reduce_block(ad, jb, r, dsts, 1, srcs);
        }
        return rv;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        for (uint32_t r = 0; r < P; r++) {
            dsts[r] = io[r].out;
            srcs[r] = io[r].in;
        }
        return ad->scan_fanout(dsts, srcs, P, jb->n, jb->dtype, jb->redop,
                               jb->kind == NX_K_EXSCAN);
    case NX_K_BROADCAST:
        for (uint32_t r = 0; r < P && rv == 0; r++)
            if (r != jb->root)
                rv = ad->receive_to_device(io[r].out, io[jb->root].in, bytes);
        return rv;
    case NX_K_ALL_GATHER:
    case NX_K_GATHER:
        for (uint32_t r = 0; r < P && rv == 0; r++) {
            if (jb->kind == NX_K_GATHER && r != jb->root)
                continue;
            for (uint32_t j = 0; j < P && rv == 0; j++)
                if (j != r || !io[r].own_by_rank)
                    rv = ad->receive_to_device(blk(io[r].out, io[r].out_stride, j, es),
                                               io[j].in, bytes);
        }
        return rv;
    case NX_K_SCATTER:
        for (uint32_t r = 0; r < P && rv == 0; r++)
            rv = ad->receive_to_device(io[r].out,
                                       blk(io[jb->root].in, io[jb->root].in_stride, r, es),
                                       bytes);
        return rv;
    case NX_K_ALL_TO_ALL:
        for (uint32_t r = 0; r < P && rv == 0; r++)
            for (uint32_t j = 0; j < P && rv == 0; j++)
                rv = ad->receive_to_device(blk(io[r].out, io[r].out_stride, j, es),
                                           blk(io[j].in, io[j].in_stride, r, es), bytes);
        return rv;
    default:
        return -EINVAL;
    }
}

static int run_whole(const struct nx_adapter *ad, const struct nx_chunk_job *jb)
{
    void *dst_stack[MAX_STACK_RANKS];
    const void *src_stack[MAX_STACK_RANKS];
    void **dsts = dst_stack;
    const void **srcs = src_stack;
    int rv;

    if (jb->n == 0)
        return 0;
    if (jb->size > MAX_STACK_RANKS) {
        dsts = nx_xcalloc(jb->size, sizeof(*dsts));
        srcs = nx_xcalloc(jb->size, sizeof(*srcs));
    }
    rv = run(ad, jb, dsts, srcs);
    if (dsts != dst_stack) {
        free(dsts);
        free(srcs);
    }
    return rv;
}

/*
 * Every kind is elementwise across the ranks' blocks: element e of any output depends
 * only on element e of the inputs' blocks.  So a chunk splits into element ranges, each
 * a smaller chunk with the same strides, run in parallel by the workers.
 */
struct split {
    const struct nx_adapter *ad;
    const struct nx_chunk_job *jb;
    uint64_t per_part; /* elements */
};

static int run_part(void *arg, uint32_t part)
{
    const struct split *s = arg;
    const struct nx_chunk_job *jb = s->jb;
    uint64_t lo = part * s->per_part;
    if (lo >= jb->n)
        return 0;
    uint64_t n = jb->n - lo < s->per_part ? jb->n - lo : s->per_part;
    uint32_t es = nx_dtype_size(jb->dtype);
    struct nx_rank_io io_stack[MAX_STACK_RANKS], *io = io_stack;
    if (jb->size > MAX_STACK_RANKS)
        io = nx_xcalloc(jb->size, sizeof(*io));
    for (uint32_t r = 0; r < jb->size; r++) {
        io[r] = jb->io[r];
        if (io[r].in)
            io[r].in += lo * es;
        if (io[r].out)
            io[r].out += lo * es;
    }
    struct nx_chunk_job sub = *jb;
    sub.n = n;
    sub.io = io;
    int rv = run_whole(s->ad, &sub);
    if (io != io_stack)
        free(io);
    return rv;
}

int nx_coll_local_run(const struct nx_adapter *ad, const struct nx_chunk_job *jb)
{
    uint32_t es = nx_dtype_size(jb->dtype);
    uint64_t touched = jb->n * es * jb->size * 2;
    uint32_t parts = nx_workers_parts();
    /* A stream adapter queues its work from this thread: the GPU does the splitting. */
    uint64_t min = nx_workers_crowded() ? SPLIT_MIN_BYTES_CROWDED : SPLIT_MIN_BYTES;
    if (ad->use_stream || parts <= 1 || touched < min ||
        jb->n * es < (uint64_t)parts * SPLIT_ALIGN)
        return run_whole(ad, jb);
    uint64_t per_elems = SPLIT_ALIGN / es;
    uint64_t per_part = (jb->n + parts - 1) / parts;
    per_part = (per_part + per_elems - 1) / per_elems * per_elems;
    struct split s = {.ad = ad, .jb = jb, .per_part = per_part};
    return nx_workers_run(run_part, &s, parts);
}

const char *nx_coll_local_algo(uint8_t kind)
{
    switch (kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
    case NX_K_REDUCE:
    case NX_K_REDUCE_SCATTER:
        return "local-fanout-reduce";
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        return "local-prefix";
    case NX_K_BARRIER:
    case NX_K_SPLIT:
        return "local-match";
    default:
        return "local-copy";
    }
}
