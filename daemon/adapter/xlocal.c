/* xlocal.c - see xlocal.h. */
#include "xlocal.h"

#include <errno.h>
#include <stdlib.h>

#include "mem.h"
#include "nexar.h"
#include "shm_abi.h"

#define MAX_STACK_RANKS 64

static uint8_t *blk(uint8_t *base, uint64_t stride, uint64_t j, uint32_t es)
{
    return base + j * stride * es;
}

void nx_xlocal_sizes(const struct nx_xlocal *j, uint64_t *in, uint64_t *out, bool *out_is_in)
{
    uint64_t n = j->n, L = j->L, P = j->P;
    *in = *out = 0;
    *out_is_in = false;
    switch (j->kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
        *in = n;
        *out_is_in = true;
        break;
    case NX_K_REDUCE:
        *in = n;
        *out_is_in = j->root_here;
        break;
    case NX_K_BROADCAST:
        *in = j->root_here ? n : 0;
        *out = j->root_here ? 0 : n;
        break;
    case NX_K_ALL_GATHER:
    case NX_K_GATHER:
        *in = L * n;
        *out = j->kind == NX_K_GATHER && !j->root_here ? 0 : P * n;
        break;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        *in = *out = L * n;
        break;
    case NX_K_REDUCE_SCATTER:
        *in = P * n;
        *out = L * n;
        break;
    case NX_K_SCATTER:
        *in = j->root_here ? P * n : 0;
        *out = L * n;
        break;
    case NX_K_ALL_TO_ALL:
        *in = *out = L * P * n;
        break;
    default: /* barrier */
        break;
    }
}

bool nx_xlocal_wide(uint8_t kind, uint8_t dtype)
{
    return (dtype == NEXAR_F16 || dtype == NEXAR_BF16) && nx_kind_has_redop(kind);
}

bool nx_xlocal_in_place(const struct nx_xlocal *j, bool staged, uint8_t **in, uint8_t **out)
{
    if (j->L != 1 || j->wide)
        return false;
    const struct nx_rank_io *io = &j->io[0];
    *in = io->in;
    *out = io->out;
    switch (j->kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
    case NX_K_BARRIER:
        return true;
    case NX_K_BROADCAST:
        if (j->root_here)
            *out = NULL; /* the root keeps its data */
        return true;
    case NX_K_REDUCE: /* the input is working memory */
        return staged;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        /* One rank: its prefix is its input (an exscan's, the identity), written after
         * the input went into the run's total, and the end folds into that (algo_scan.c):
         * the input may be the output.  A staged scan's slot has one region for both. */
        return true;
    case NX_K_REDUCE_SCATTER: /* the input is working memory, P blocks */
        return staged;
    case NX_K_ALL_GATHER:
    case NX_K_GATHER:
    case NX_K_SCATTER:
    case NX_K_ALL_TO_ALL: /* blocks at the rank's stride: nothing is written in between */
        return true;
    default:
        return false;
    }
}

/* dst = the reduction over the local ranks of block b of their inputs. */
static int reduce_block(const struct nx_adapter *ad, const struct nx_xlocal *j, uint64_t b,
                        uint8_t *dst, const void **srcs)
{
    uint32_t es = nx_dtype_size(j->dtype);
    for (uint32_t i = 0; i < j->L; i++)
        srcs[i] = blk(j->io[i].in, j->io[i].in_stride, b, es);
    if (j->L == 1)
        return ad->receive_to_device(dst, srcs[0], j->n * es);
    void *d = dst;
    return ad->reduce_fanout(&d, 1, srcs, j->L, j->n, j->dtype, j->redop);
}

static int gather(const struct nx_adapter *ad, const struct nx_xlocal *j, const void **srcs)
{
    uint32_t es = nx_dtype_size(j->dtype);
    uint64_t bytes = j->n * es, P = j->P;
    const struct nx_rank_io *io = j->io;
    int rv = 0;
    switch (j->kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
    case NX_K_REDUCE:
        return reduce_block(ad, j, 0, j->in, srcs);
    case NX_K_REDUCE_SCATTER:
        for (uint64_t b = 0; b < P && rv == 0; b++)
            rv = reduce_block(ad, j, b, j->in + b * bytes, srcs);
        return rv;
    case NX_K_BROADCAST:
        return j->root_here ? ad->stage_for_send(j->in, io[j->root_local].in, bytes) : 0;
    case NX_K_ALL_GATHER:
    case NX_K_GATHER:
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            rv = ad->stage_for_send(j->in + i * bytes, io[i].in, bytes);
        return rv;
    case NX_K_SCATTER:
        if (!j->root_here)
            return 0;
        for (uint64_t b = 0; b < P && rv == 0; b++)
            rv = ad->stage_for_send(j->in + b * bytes,
                                    blk(io[j->root_local].in, io[j->root_local].in_stride, b, es),
                                    bytes);
        return rv;
    case NX_K_ALL_TO_ALL:
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            for (uint64_t b = 0; b < P && rv == 0; b++)
                rv = ad->stage_for_send(j->in + (i * P + b) * bytes,
                                        blk(io[i].in, io[i].in_stride, b, es), bytes);
        return rv;
    case NX_K_BARRIER:
        return 0;
    default:
        return -EINVAL;
    }
}

/* f32 dst = the reduction over the local ranks of block b, widened. */
static int reduce_block_wide(const struct nx_adapter *ad, const struct nx_xlocal *j, uint64_t b,
                             float *dst, float *tmp)
{
    uint32_t es = nx_dtype_size(j->dtype);
    int rv = ad->widen_half(dst, blk(j->io[0].in, j->io[0].in_stride, b, es), j->n, j->dtype);
    for (uint32_t i = 1; i < j->L && rv == 0; i++) {
        rv = ad->widen_half(tmp, blk(j->io[i].in, j->io[i].in_stride, b, es), j->n, j->dtype);
        if (rv == 0)
            rv = ad->reduce_inplace(dst, tmp, j->n, NEXAR_F32, j->redop);
    }
    return rv;
}

static int gather_wide(const struct nx_adapter *ad, const struct nx_xlocal *j)
{
    float *in = (float *)j->in, *tmp = j->L > 1 ? nx_xmalloc(j->n * sizeof(float)) : NULL;
    int rv = 0;
    switch (j->kind) {
    case NX_K_REDUCE_SCATTER:
        for (uint64_t b = 0; b < j->P && rv == 0; b++)
            rv = reduce_block_wide(ad, j, b, in + b * j->n, tmp);
        break;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            rv = ad->widen_half(in + i * j->n, j->io[i].in, j->n, j->dtype);
        break;
    default: /* all_reduce, bucketed, reduce */
        rv = reduce_block_wide(ad, j, 0, in, tmp);
        break;
    }
    free(tmp);
    return rv;
}

static int scatter_wide(const struct nx_adapter *ad, const struct nx_xlocal *j)
{
    const float *res = (const float *)(j->kind == NX_K_ALL_REDUCE ||
                                       j->kind == NX_K_ALL_REDUCE_BUCKETED ||
                                       j->kind == NX_K_REDUCE ? j->in : j->out);
    uint64_t bytes = j->n * nx_dtype_size(j->dtype);
    int rv = 0;
    switch (j->kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED: /* round once, then copy the rounded values */
        rv = ad->narrow_half(j->io[0].out, res, j->n, j->dtype);
        for (uint32_t i = 1; i < j->L && rv == 0; i++)
            rv = ad->receive_to_device(j->io[i].out, j->io[0].out, bytes);
        return rv;
    case NX_K_REDUCE:
        return j->root_here ? ad->narrow_half(j->io[j->root_local].out, res, j->n, j->dtype) : 0;
    default: /* reduce_scatter, scan, exscan: local rank i's block */
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            rv = ad->narrow_half(j->io[i].out, res + i * j->n, j->n, j->dtype);
        return rv;
    }
}

int nx_xlocal_gather(const struct nx_adapter *ad, const struct nx_xlocal *j)
{
    if (j->wide)
        return !ad->widen_half ? -ENOTSUP : j->n ? gather_wide(ad, j) : 0;
    const void *stack[MAX_STACK_RANKS];
    const void **srcs = j->L <= MAX_STACK_RANKS ? stack : nx_xcalloc(j->L, sizeof(*srcs));
    int rv = j->n ? gather(ad, j, srcs) : 0;
    if (srcs != stack)
        free(srcs);
    return rv;
}

int nx_xlocal_scatter(const struct nx_adapter *ad, const struct nx_xlocal *j)
{
    uint32_t es = nx_dtype_size(j->dtype);
    uint64_t bytes = j->n * es, P = j->P;
    const struct nx_rank_io *io = j->io;
    int rv = 0;
    if (j->n == 0)
        return 0;
    if (j->wide)
        return !ad->narrow_half ? -ENOTSUP : scatter_wide(ad, j);
    switch (j->kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            rv = ad->receive_to_device(io[i].out, j->in, bytes);
        return rv;
    case NX_K_REDUCE:
        return j->root_here ? ad->receive_to_device(io[j->root_local].out, j->in, bytes) : 0;
    case NX_K_BROADCAST:
        for (uint32_t i = 0; i < j->L && rv == 0; i++) {
            if (j->root_here && i == j->root_local)
                continue;
            rv = ad->receive_to_device(io[i].out, j->root_here ? j->in : j->out, bytes);
        }
        return rv;
    case NX_K_ALL_GATHER:
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            for (uint64_t b = 0; b < P && rv == 0; b++)
                rv = ad->receive_to_device(blk(io[i].out, io[i].out_stride, b, es),
                                           j->out + b * bytes, bytes);
        return rv;
    case NX_K_GATHER:
        if (!j->root_here)
            return 0;
        for (uint64_t b = 0; b < P && rv == 0; b++)
            rv = ad->receive_to_device(
                blk(io[j->root_local].out, io[j->root_local].out_stride, b, es),
                j->out + b * bytes, bytes);
        return rv;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
    case NX_K_REDUCE_SCATTER:
    case NX_K_SCATTER:
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            rv = ad->receive_to_device(io[i].out, j->out + i * bytes, bytes);
        return rv;
    case NX_K_ALL_TO_ALL:
        for (uint32_t i = 0; i < j->L && rv == 0; i++)
            for (uint64_t b = 0; b < P && rv == 0; b++)
                rv = ad->receive_to_device(blk(io[i].out, io[i].out_stride, b, es),
                                           j->out + (i * P + b) * bytes, bytes);
        return rv;
    case NX_K_BARRIER:
        return 0;
    default:
        return -EINVAL;
    }
}
