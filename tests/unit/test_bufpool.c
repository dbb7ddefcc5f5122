/*
 * test_bufpool.c - the pool of large buffers (daemon/base/bufpool.c) that QUIC endpoints
 * and lanes take message buffers from: which kept buffer a request gets, what a full or
 * heavy pool keeps, and, locked, four threads taking and giving back at once (also run
 * under TSan, suite threads).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bufpool.h"
#include "expect.h"

#define MiB (1u << 20)

static int holds(const struct nx_bufpool *bp, const void *p)
{
    for (int i = 0; i < bp->n; i++)
        if (bp->ptr[i] == p)
            return 1;
    return 0;
}

static void *put_new(struct nx_bufpool *bp, size_t cap)
{
    void *p = malloc(cap);
    nx_bufpool_put(bp, p, cap);
    return p;
}

static void test_choice(void)
{
    struct nx_bufpool bp;
    size_t cap;
    nx_bufpool_init(&bp, 8, 64 * MiB, 0);
    /* Small buffers are never kept. */
    void *s = nx_bufpool_get(&bp, 1000, &cap);
    EXPECT(s && cap == 1000);
    nx_bufpool_put(&bp, s, cap);
    EXPECT(bp.n == 0 && bp.bytes == 0);
    void *b1 = put_new(&bp, 1 * MiB), *b2 = put_new(&bp, 2 * MiB), *b4 = put_new(&bp, 4 * MiB);
    EXPECT(bp.n == 3 && bp.bytes == 7 * MiB);
    /* The smallest that fits. */
    EXPECT(nx_bufpool_get(&bp, 3 * MiB / 2, &cap) == b2 && cap == 2 * MiB);
    EXPECT(bp.n == 2 && bp.bytes == 5 * MiB && !holds(&bp, b2));
    /* Not one over twice the request: a fresh one, the 4 MiB stays. */
    void *f = nx_bufpool_get(&bp, 1536 * 1024 + 1, &cap);
    EXPECT(f != b4 && f != b1 && cap == 1536 * 1024 + 1 && holds(&bp, b4));
    free(f);
    EXPECT(nx_bufpool_get(&bp, 3 * MiB, &cap) == b4 && cap == 4 * MiB);
    /* A request under the minimum never takes a kept buffer, however close. */
    void *g = nx_bufpool_get(&bp, NX_BUFPOOL_MIN - 1, &cap);
    EXPECT(g != b1 && cap == NX_BUFPOOL_MIN - 1 && holds(&bp, b1));
    free(g);
    EXPECT(nx_bufpool_get(&bp, NX_BUFPOOL_MIN, &cap) == b1 && cap == MiB);
    EXPECT(bp.n == 0 && bp.bytes == 0);
    free(b1);
    free(b2);
    free(b4);
    nx_bufpool_fini(&bp);
}

static void test_bounds(void)
{
    struct nx_bufpool bp;
    /* Full by count: a smaller newcomer goes, a larger one takes the smallest's place. */
    nx_bufpool_init(&bp, 2, 64 * MiB, 0);
    void *a = put_new(&bp, 1 * MiB), *b = put_new(&bp, 2 * MiB);
    put_new(&bp, 1 * MiB); /* freed: not larger than the smallest */
    EXPECT(bp.n == 2 && bp.bytes == 3 * MiB && holds(&bp, a) && holds(&bp, b));
    void *c = put_new(&bp, 3 * MiB);
    EXPECT(bp.n == 2 && bp.bytes == 5 * MiB && holds(&bp, b) && holds(&bp, c) && !holds(&bp, a));
    nx_bufpool_fini(&bp);
    EXPECT(bp.n == 0 && bp.bytes == 0);

    /* Full by bytes: what would pass the bound is freed, the kept ones stay. */
    nx_bufpool_init(&bp, 2, 5 * MiB, 0);
    a = put_new(&bp, 2 * MiB);
    b = put_new(&bp, 2 * MiB);
    EXPECT(bp.n == 2 && bp.bytes == 4 * MiB);
    put_new(&bp, 4 * MiB); /* larger, but 2 + 4 > 5: freed, nothing evicted */
    EXPECT(bp.n == 2 && bp.bytes == 4 * MiB && holds(&bp, a) && holds(&bp, b));
    c = put_new(&bp, 3 * MiB); /* 2 + 3 <= 5: in place of a 2 MiB one */
    EXPECT(bp.n == 2 && bp.bytes == 5 * MiB && holds(&bp, c));
    nx_bufpool_fini(&bp);

    nx_bufpool_init(&bp, 4, 3 * MiB, 0);
    put_new(&bp, 2 * MiB);
    put_new(&bp, 2 * MiB); /* not full by count, but 4 > 3 */
    EXPECT(bp.n == 1 && bp.bytes == 2 * MiB);
    nx_bufpool_fini(&bp);
    /* keep is clamped to what the pool can hold. */
    nx_bufpool_init(&bp, 1000, 1024u * MiB, 0);
    EXPECT(bp.keep == NX_BUFPOOL_SLOTS);
    nx_bufpool_fini(&bp);
}

/* Locked: every buffer a thread takes is its own until it gives it back. */
#define THREADS 4
#define ROUNDS 3000
static struct nx_bufpool shared;

static void *churn(void *arg)
{
    uintptr_t me = (uintptr_t)arg;
    unsigned seed = (unsigned)me * 7919u + 1;
    void *held[3] = {0};
    size_t caps[3] = {0}, lens[3] = {0};
    long bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        int k = r % 3;
        if (held[k]) {
            uint64_t tag[2];
            memcpy(&tag[0], held[k], 8);
            memcpy(&tag[1], (char *)held[k] + lens[k] - 8, 8);
            bad += tag[0] != me * ROUNDS + (uint64_t)r - 3 || tag[1] != tag[0];
            nx_bufpool_put(&shared, held[k], caps[k]);
        }
        lens[k] = NX_BUFPOOL_MIN + (size_t)(rand_r(&seed) % (3 * MiB));
        held[k] = nx_bufpool_get(&shared, lens[k], &caps[k]);
        bad += caps[k] < lens[k] || caps[k] > 2 * lens[k];
        uint64_t tag = me * ROUNDS + (uint64_t)r;
        memcpy(held[k], &tag, 8);
        memcpy((char *)held[k] + lens[k] - 8, &tag, 8);
    }
    for (int k = 0; k < 3; k++)
        nx_bufpool_put(&shared, held[k], caps[k]);
    return (void *)bad;
}

static void test_threads(void)
{
    pthread_t th[THREADS];
    nx_bufpool_init(&shared, 8, 16 * MiB, 1);
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, churn, (void *)(i + 1));
    long bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *rv;
        pthread_join(th[i], &rv);
        bad += (long)rv;
    }
    EXPECT(bad == 0);
    size_t sum = 0;
    for (int i = 0; i < shared.n; i++)
        sum += shared.cap[i];
    EXPECT(shared.n <= 8 && shared.bytes == sum && sum <= 16 * MiB);
    printf("threads: %d x %d get/put, %d kept (%.1f MiB), every buffer held by one thread\n",
           THREADS, ROUNDS, shared.n, shared.bytes / (double)MiB);
    nx_bufpool_fini(&shared);
}

int main(void)
{
    test_choice();
    test_bounds();
    test_threads();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_bufpool: ok\n");
    return 0;
}
