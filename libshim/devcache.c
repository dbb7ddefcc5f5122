/* devcache.c - see devcache.h.  Linear scans: a rank holds a handful of allocations
 * (caching allocators hand out slices of a few large ones). */
#include "devcache.h"

#include <stdlib.h>
#include <string.h>

static bool overlaps(const struct nx_devreg *r, uint64_t base, uint64_t size)
{
    return base < r->base + r->size && r->base < base + size;
}

struct nx_devreg *nx_devcache_find(struct nx_devcache *c, uint64_t base, uint64_t size,
                                   uint64_t buffer_id)
{
    struct nx_devreg *hit = NULL;
    for (size_t i = 0; i < c->n; i++) {
        struct nx_devreg *r = &c->v[i];
        if (r->stale || !overlaps(r, base, size))
            continue;
        if (r->buffer_id == buffer_id && r->base == base && r->size == size)
            hit = r;
        else
            r->stale = true; /* the bytes belong to another allocation now */
    }
    if (hit)
        hit->last_use = ++c->clock;
    return hit;
}

struct nx_devreg *nx_devcache_add(struct nx_devcache *c, uint64_t base, uint64_t size,
                                  uint64_t buffer_id, uint32_t id)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        struct nx_devreg *v = realloc(c->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        c->v = v;
        c->cap = cap;
    }
    struct nx_devreg *r = &c->v[c->n++];
    *r = (struct nx_devreg){.base = base, .size = size, .buffer_id = buffer_id, .id = id,
                            .last_use = ++c->clock};
    return r;
}

static struct nx_devreg *by_id(struct nx_devcache *c, uint32_t id)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id == id)
            return &c->v[i];
    return NULL;
}

void nx_devcache_ref(struct nx_devcache *c, uint32_t id)
{
    struct nx_devreg *r = by_id(c, id);
    if (r)
        r->refs++;
}

void nx_devcache_unref(struct nx_devcache *c, uint32_t id)
{
    struct nx_devreg *r = by_id(c, id);
    if (r && r->refs > 0)
        r->refs--;
}

void nx_devcache_trim(struct nx_devcache *c, size_t max)
{
    for (;;) {
        size_t live = 0;
        struct nx_devreg *old = NULL;
        for (size_t i = 0; i < c->n; i++) {
            struct nx_devreg *r = &c->v[i];
            if (r->stale)
                continue;
            live++;
            if (r->refs == 0 && (!old || r->last_use < old->last_use))
                old = r;
        }
        if (live <= max || !old)
            return;
        old->stale = true;
    }
}

size_t nx_devcache_sweep(struct nx_devcache *c, nx_devcache_alive_fn alive, void *arg,
                         size_t max)
{
    size_t gone = 0;
    if (c->n == 0)
        return 0;
    size_t i = c->sweep_next % c->n;
    for (size_t seen = 0, asked = 0; seen < c->n && asked < max; seen++, i = (i + 1) % c->n) {
        struct nx_devreg *r = &c->v[i];
        if (r->stale || r->refs)
            continue;
        asked++;
        if (!alive(arg, r)) {
            r->stale = true;
            gone++;
        }
    }
    c->sweep_next = i;
    return gone;
}

size_t nx_devcache_reap(struct nx_devcache *c, uint32_t *out, size_t cap)
{
    size_t k = 0, j = 0;
    for (size_t i = 0; i < c->n; i++) {
        struct nx_devreg *r = &c->v[i];
        if (r->stale && r->refs == 0 && k < cap) {
            out[k++] = r->id;
            continue;
        }
        c->v[j++] = *r;
    }
    c->n = j;
    return k;
}

void nx_devcache_drop_all(struct nx_devcache *c)
{
    for (size_t i = 0; i < c->n; i++)
        c->v[i].stale = true;
}

void nx_devcache_fini(struct nx_devcache *c)
{
    free(c->v);
    memset(c, 0, sizeof(*c));
}

void nx_idpool_init(struct nx_idpool *p, uint32_t limit)
{
    memset(p, 0, sizeof(*p));
    p->limit = limit;
}

int64_t nx_idpool_get(struct nx_idpool *p)
{
    for (uint32_t i = 0; i < p->cap; i++) {
        if (!p->used[i]) {
            p->used[i] = 1;
            p->inuse++;
            return i;
        }
    }
    if (p->cap >= p->limit)
        return -1;
    uint32_t cap = p->cap ? p->cap * 2 : 16;
    if (cap > p->limit)
        cap = p->limit;
    uint8_t *u = realloc(p->used, cap);
    if (!u)
        return -1;
    memset(u + p->cap, 0, cap - p->cap);
    p->used = u;
    uint32_t id = p->cap;
    p->cap = cap;
    p->used[id] = 1;
    p->inuse++;
    return id;
}

void nx_idpool_put(struct nx_idpool *p, uint32_t id)
{
    if (id < p->cap && p->used[id]) {
        p->used[id] = 0;
        p->inuse--;
    }
}

void nx_idpool_fini(struct nx_idpool *p)
{
    free(p->used);
    memset(p, 0, sizeof(*p));
}
