/*
 * arena.c - nexar_alloc()/nexar_free(): first fit over the heap part of the arena.
 *
 * The block list lives in private memory (a sorted array of {off, len, used} that
 * covers the heap exactly), never in the shared segment: the daemon could not
 * corrupt it, and a buffer handed to the user never carries hidden headers.  Every
 * block is a multiple of 64 bytes, so every buffer is 64-byte aligned.  Freed
 * blocks are merged with free neighbours at once.
 */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define NX_ARENA_ALIGN 64u

int nx_arena_init(uint64_t heap_bytes)
{
    struct nx_arena *a = &nx_S.heap;
    memset(a, 0, sizeof(*a));
    heap_bytes &= ~(uint64_t)(NX_ARENA_ALIGN - 1);
    if (heap_bytes == 0)
        return 0;
    a->blk = malloc(16 * sizeof(*a->blk));
    if (!a->blk)
        return -1;
    a->cap = 16;
    a->n = 1;
    a->blk[0] = (struct nx_arena_blk){.off = 0, .len = heap_bytes, .used = false};
    return 0;
}

void nx_arena_fini(void)
{
    free(nx_S.heap.blk);
    memset(&nx_S.heap, 0, sizeof(nx_S.heap));
}

static uint8_t *heap_base(void)
{
    return nx_S.arena + nx_S.hdr.heap_off;
}

bool nx_arena_heap_range(const void *p, uint64_t bytes, uint64_t *off)
{
    if (!nx_S.seg || !p)
        return false;
    uintptr_t base = (uintptr_t)heap_base();
    uintptr_t q = (uintptr_t)p;
    if (q < base || bytes > nx_S.hdr.heap_bytes || q - base > nx_S.hdr.heap_bytes - bytes)
        return false;
    *off = nx_S.hdr.heap_off + (uint64_t)(q - base);
    return true;
}

/* Inserts a block at index i (room must exist). */
static void blk_insert(struct nx_arena *a, size_t i, struct nx_arena_blk b)
{
    memmove(&a->blk[i + 1], &a->blk[i], (a->n - i) * sizeof(*a->blk));
    a->blk[i] = b;
    a->n++;
}

static void blk_remove(struct nx_arena *a, size_t i)
{
    memmove(&a->blk[i], &a->blk[i + 1], (a->n - i - 1) * sizeof(*a->blk));
    a->n--;
}

/* Index of the block that starts at off, or SIZE_MAX. */
static size_t blk_find(const struct nx_arena *a, uint64_t off)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->blk[mid].off == off)
            return mid;
        if (a->blk[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

/* First fit; need is a multiple of the alignment.  0, -1 out of memory, -2 no room. */
static int take(uint64_t need, void **ptr)
{
    struct nx_arena *a = &nx_S.heap;
    /* Room for a split first, so that a failure leaves the list untouched. */
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        struct nx_arena_blk *nb = realloc(a->blk, cap * sizeof(*nb));
        if (!nb)
            return -1;
        a->blk = nb;
        a->cap = cap;
    }
    for (size_t i = 0; i < a->n; i++) {
        struct nx_arena_blk *b = &a->blk[i];
        if (b->used || b->len < need)
            continue;
        if (b->len > need)
            blk_insert(a, i + 1,
                       (struct nx_arena_blk){.off = b->off + need, .len = b->len - need});
        b = &a->blk[i];
        b->len = need;
        b->used = true;
        *ptr = heap_base() + b->off;
        return 0;
    }
    return -2;
}

/* Frees the block at p; false when p is not a live block. */
static bool give(const void *p)
{
    struct nx_arena *a = &nx_S.heap;
    uint64_t off;
    size_t i = SIZE_MAX;
    if (nx_S.inited && nx_arena_heap_range(p, 0, &off))
        i = blk_find(a, off - nx_S.hdr.heap_off);
    if (i == SIZE_MAX || !a->blk[i].used)
        return false;
    a->blk[i].used = false;
    if (i + 1 < a->n && !a->blk[i + 1].used) {
        a->blk[i].len += a->blk[i + 1].len;
        blk_remove(a, i + 1);
    }
    if (i > 0 && !a->blk[i - 1].used) {
        a->blk[i - 1].len += a->blk[i].len;
        blk_remove(a, i);
    }
    return true;
}

static uint64_t round_up(uint64_t bytes)
{
    uint64_t need = bytes ? bytes : 1;
    return (need + NX_ARENA_ALIGN - 1) & ~(uint64_t)(NX_ARENA_ALIGN - 1);
}

nexar_status_t nexar_alloc(size_t bytes, void **ptr)
{
    if (!ptr)
        return nx_fail(NEXAR_ERR_INVALID, "nexar_alloc: ptr is NULL");
    *ptr = NULL;
    nx_lock();
    nexar_status_t s = NEXAR_OK;
    if (!nx_S.inited) {
        s = nx_fail(NEXAR_ERR_INVALID, "nexar_alloc: nexar_init() has not been called");
        goto out;
    }
    /* The heap's free list is private memory: a child's copy would hand out blocks of
     * the segment the parent uses too. */
    if ((s = nx_fork_check("nexar_alloc")) != NEXAR_OK)
        goto out;
    if ((uint64_t)bytes > UINT64_MAX - NX_ARENA_ALIGN) {
        s = nx_fail(NEXAR_ERR_NOMEM, "nexar_alloc: %zu bytes cannot come from the arena", bytes);
        goto out;
    }
    uint64_t need = round_up(bytes);
    int rv = take(need, ptr);
    if (rv == -1)
        s = nx_fail(NEXAR_ERR_NOMEM, "nexar_alloc: out of memory");
    else if (rv < 0)
        s = nx_fail(NEXAR_ERR_NOMEM,
                    "nexar_alloc: the shared arena has no free block of %llu bytes (heap %llu "
                    "bytes); plain memory still works, with a staging copy",
                    (unsigned long long)need, (unsigned long long)nx_S.hdr.heap_bytes);
out:
    nx_unlock();
    return s;
}

nexar_status_t nexar_free(void *ptr)
{
    if (!ptr)
        return NEXAR_OK;
    nx_lock();
    bool ok = give(ptr);
    nx_unlock();
    if (!ok)
        return nx_fail(NEXAR_ERR_INVALID,
                       "nexar_free: %p is not a live buffer from nexar_alloc()", ptr);
    return NEXAR_OK;
}

void *nx_arena_get(uint64_t bytes)
{
    void *p = NULL;
    if (bytes > UINT64_MAX - NX_ARENA_ALIGN || take(round_up(bytes), &p) < 0)
        return NULL;
    return p;
}

void nx_arena_put(void *p)
{
    if (p)
        give(p);
}

uint64_t nx_arena_off(const void *p)
{
    return (uint64_t)((const uint8_t *)p - nx_S.arena);
}
