/*
 * hostmem.c - pinned host memory for staging device buffers across nodes
 * (node/devstage.h).  It must be pinned: a cudaMemcpyAsync to pageable memory returns only
 * when the copy is done, and the loop thread must never wait for the GPU (exec.c).
 *
 * cudaHostAlloc is slow (it pins page by page) and cudaFreeHost may wait for the device,
 * so blocks are kept in size classes (powers of two from 64 KiB) and reused; they go only
 * at exit.  What is held is bounded by the parts that can be in flight at once
 * (cluster/xcoll.h), each a few times NX_DEV_XCHUNK_BYTES per local rank.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "cuda_int.h"
#include "mem.h"

struct blk {
    void *p;
    size_t size;
    bool used;
};

static struct blk *blks;
static size_t nblks, blks_cap;

static size_t size_class(size_t bytes)
{
    size_t c = 64u << 10;
    while (c < bytes && c < ((size_t)1 << 62))
        c <<= 1;
    return c;
}

void *nx_cuda_host_alloc(size_t bytes)
{
    size_t c = size_class(bytes);
    for (size_t i = 0; i < nblks; i++) {
        if (!blks[i].used && blks[i].size == c) {
            blks[i].used = true;
            return blks[i].p;
        }
    }
    void *p = NULL;
    CU_TRY(cudaHostAlloc(&p, c, cudaHostAllocPortable), fail);
    nx_grow((void **)&blks, &blks_cap, nblks + 1, sizeof(*blks));
    blks[nblks++] = (struct blk){.p = p, .size = c, .used = true};
    return p;
fail:
    return NULL;
}

void nx_cuda_host_free(void *p)
{
    for (size_t i = 0; p && i < nblks; i++) {
        if (blks[i].p == p) {
            blks[i].used = false;
            return;
        }
    }
}

void nx_cuda_hostmem_fini(void)
{
    /* cudaFreeHost waits for the device: with work still queued the blocks go with the
     * process, as does a block a copy still uses. */
    bool idle = nx_cuda_exec_idle();
    for (size_t i = 0; idle && i < nblks; i++)
        if (!blks[i].used)
            cudaFreeHost(blks[i].p);
    free(blks);
    blks = NULL;
    nblks = blks_cap = 0;
}
