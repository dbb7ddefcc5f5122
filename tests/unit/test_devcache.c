/*
 * test_devcache.c - the shim's device bookkeeping (libshim/devcache.c), which decides
 * when an allocation is registered with nexard, when a registration is stale and when it
 * may be unregistered; and the id pools behind the done words and ready events.
 * Compiled from the shim's source: no CUDA and no daemon involved.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "devcache.h"

static size_t reap_all(struct nx_devcache *c, uint32_t *ids, size_t cap)
{
    size_t n = 0, k;
    while ((k = nx_devcache_reap(c, ids + n, cap - n)) > 0)
        n += k;
    return n;
}

static void test_lookup(void)
{
    struct nx_devcache c = {0};
    uint32_t ids[16];
    EXPECT(nx_devcache_find(&c, 0x1000, 0x1000, 7) == NULL);
    EXPECT(nx_devcache_add(&c, 0x1000, 0x1000, 7, 100) != NULL);
    EXPECT(nx_devcache_add(&c, 0x4000, 0x2000, 8, 101) != NULL);
    struct nx_devreg *r = nx_devcache_find(&c, 0x1000, 0x1000, 7);
    EXPECT(r && r->id == 100 && !r->stale);
    r = nx_devcache_find(&c, 0x4000, 0x2000, 8);
    EXPECT(r && r->id == 101);
    EXPECT(reap_all(&c, ids, 16) == 0); /* nothing stale */

    /* 0x1000 freed and the range reused by a bigger allocation: 7 is stale, 8 too. */
    EXPECT(nx_devcache_find(&c, 0x0, 0x5000, 9) == NULL);
    EXPECT(nx_devcache_add(&c, 0x0, 0x5000, 9, 102) != NULL);
    EXPECT(reap_all(&c, ids, 16) == 2);
    EXPECT((ids[0] == 100 && ids[1] == 101) || (ids[0] == 101 && ids[1] == 100));
    r = nx_devcache_find(&c, 0x0, 0x5000, 9);
    EXPECT(r && r->id == 102);

    /* Same address, same size, another buffer id: a new allocation. */
    EXPECT(nx_devcache_find(&c, 0x0, 0x5000, 10) == NULL);
    EXPECT(reap_all(&c, ids, 16) == 1 && ids[0] == 102);
    nx_devcache_fini(&c);
}

static void test_refs(void)
{
    struct nx_devcache c = {0};
    uint32_t ids[16];
    nx_devcache_add(&c, 0x1000, 0x1000, 1, 10);
    nx_devcache_ref(&c, 10);
    nx_devcache_ref(&c, 10);
    nx_devcache_ref(&c, 999); /* unknown: ignored */
    nx_devcache_find(&c, 0x1000, 0x800, 2); /* replaced while two ops use it */
    EXPECT(reap_all(&c, ids, 16) == 0);
    nx_devcache_unref(&c, 10);
    EXPECT(reap_all(&c, ids, 16) == 0);
    nx_devcache_unref(&c, 10);
    EXPECT(reap_all(&c, ids, 16) == 1 && ids[0] == 10);
    nx_devcache_unref(&c, 10); /* gone: ignored */
    EXPECT(c.n == 0);
    nx_devcache_fini(&c);
}

static void test_trim_and_drop(void)
{
    struct nx_devcache c = {0};
    uint32_t ids[64];
    for (uint32_t i = 0; i < 10; i++)
        nx_devcache_add(&c, 0x10000ull * (i + 1), 0x1000, i + 1, 100 + i);
    nx_devcache_find(&c, 0x10000, 0x1000, 1); /* id 100 used recently */
    nx_devcache_ref(&c, 101);                 /* id 101 in use: never trimmed */
    nx_devcache_trim(&c, 4);
    size_t n = reap_all(&c, ids, 64);
    EXPECT(n == 6);
    for (size_t i = 0; i < n; i++)
        EXPECT(ids[i] != 100 && ids[i] != 101);
    EXPECT(c.n == 4);
    /* In batches smaller than what is stale. */
    nx_devcache_drop_all(&c);
    EXPECT(nx_devcache_reap(&c, ids, 2) == 2);
    EXPECT(nx_devcache_reap(&c, ids, 2) == 1); /* 101 is still referenced */
    EXPECT(nx_devcache_reap(&c, ids, 2) == 0);
    nx_devcache_unref(&c, 101);
    EXPECT(nx_devcache_reap(&c, ids, 2) == 1 && ids[0] == 101);
    nx_devcache_fini(&c);
}

static void test_idpool(void)
{
    struct nx_idpool p;
    nx_idpool_init(&p, 40);
    for (int64_t i = 0; i < 40; i++)
        EXPECT(nx_idpool_get(&p) == i);
    EXPECT(nx_idpool_get(&p) == -1);
    EXPECT(p.inuse == 40);
    nx_idpool_put(&p, 17);
    nx_idpool_put(&p, 3);
    nx_idpool_put(&p, 3); /* twice: ignored */
    nx_idpool_put(&p, 400); /* never handed out: ignored */
    EXPECT(p.inuse == 38);
    EXPECT(nx_idpool_get(&p) == 3); /* lowest first */
    EXPECT(nx_idpool_get(&p) == 17);
    EXPECT(nx_idpool_get(&p) == -1);
    nx_idpool_fini(&p);
}

int main(void)
{
    test_lookup();
    test_refs();
    test_trim_and_drop();
    test_idpool();
    if (failures) {
        fprintf(stderr, "test_devcache: %d failures\n", failures);
        return 1;
    }
    printf("test_devcache: ok\n");
    return 0;
}
