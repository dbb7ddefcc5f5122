/* workers.c - see workers.h.  One job at a time, posted under a mutex with a generation
 * number; the callers split only work that takes longer than a condition variable's
 * wake-up (coll_local: 512 KiB touched or more, 4 MiB when the CPUs are crowded). */
#include "workers.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mem.h"

static struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t *threads;
    uint32_t n; /* parts, including the loop thread's */
    uint64_t gen;
    int (*fn)(void *, uint32_t);
    void *arg;
    uint32_t parts, pending;
    int result;
    int stop;
    uint32_t ncpu, ranks;
    uint64_t splits;
} W = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .go = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .n = 1,
};

static void *worker(void *p)
{
    uint32_t me = (uint32_t)(uintptr_t)p;
    uint64_t seen = 0;
    pthread_mutex_lock(&W.mu);
    for (;;) {
        while (!W.stop && W.gen == seen)
            pthread_cond_wait(&W.go, &W.mu);
        if (W.stop)
            break;
        seen = W.gen;
        if (me >= W.parts)
            continue;
        int (*fn)(void *, uint32_t) = W.fn;
        void *arg = W.arg;
        pthread_mutex_unlock(&W.mu);
        int rv = fn(arg, me);
        pthread_mutex_lock(&W.mu);
        if (rv && !W.result)
            W.result = rv;
        if (--W.pending == 0)
            pthread_cond_signal(&W.done);
    }
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

int nx_workers_init(uint32_t n)
{
    cpu_set_t set;
    W.ncpu = sched_getaffinity(0, sizeof(set), &set) == 0 ? (uint32_t)CPU_COUNT(&set) : 1;
    if (n <= 1)
        return 0;
    W.threads = nx_xcalloc(n - 1, sizeof(*W.threads));
    for (uint32_t i = 1; i < n; i++) {
        int rv = pthread_create(&W.threads[i - 1], NULL, worker, (void *)(uintptr_t)i);
        if (rv) {
            NX_WARN("workers", "cannot start worker %u: %s; running with %u", i, strerror(rv),
                    W.n);
            break;
        }
        W.n = i + 1;
    }
    NX_DEBUG("workers", "%u threads share large chunks", W.n);
    return 0;
}

void nx_workers_fini(void)
{
    pthread_mutex_lock(&W.mu);
    W.stop = 1;
    pthread_cond_broadcast(&W.go);
    pthread_mutex_unlock(&W.mu);
    for (uint32_t i = 1; i < W.n; i++)
        pthread_join(W.threads[i - 1], NULL);
    free(W.threads);
    W.threads = NULL;
    W.n = 1;
    W.stop = 0;
}

uint32_t nx_workers_parts(void)
{
    return W.n;
}

void nx_workers_set_ranks(uint32_t n)
{
    W.ranks = n;
}

bool nx_workers_crowded(void)
{
    return W.ranks + 1 >= W.ncpu;
}

uint64_t nx_workers_splits(void)
{
    return W.splits;
}

int nx_workers_run(int (*fn)(void *arg, uint32_t part), void *arg, uint32_t parts)
{
    if (parts > W.n)
        parts = W.n;
    if (parts <= 1)
        return fn(arg, 0);
    W.splits++;
    pthread_mutex_lock(&W.mu);
    W.fn = fn;
    W.arg = arg;
    W.parts = parts;
    W.pending = parts - 1;
    W.result = 0;
    W.gen++;
    pthread_cond_broadcast(&W.go);
    pthread_mutex_unlock(&W.mu);

    int rv = fn(arg, 0);

    pthread_mutex_lock(&W.mu);
    while (W.pending)
        pthread_cond_wait(&W.done, &W.mu);
    if (!rv)
        rv = W.result;
    pthread_mutex_unlock(&W.mu);
    return rv;
}
