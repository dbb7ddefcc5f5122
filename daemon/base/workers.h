/*
 * workers.h - a few threads that help the loop thread with one large, splittable piece of
 * work (the copies and reductions of a big chunk), so that a node-local collective uses
 * more than one core as Open MPI's ranks do.
 *
 * nx_workers_run() is synchronous: the loop thread runs part 0 itself, the workers the
 * others, and it returns when every part is done.  Nothing else is shared with the
 * workers, so the rest of the daemon stays single-threaded.
 */
#ifndef NX_WORKERS_H
#define NX_WORKERS_H

#include <stdbool.h>
#include <stdint.h>

/* Starts n - 1 helper threads (n = parts the work may be split into; 1: none). */
int nx_workers_init(uint32_t n);
void nx_workers_fini(void);

/* How many parts nx_workers_run() can run at once (1 without workers). */
uint32_t nx_workers_parts(void);

/* The node's ranks, each of which may hold a CPU while it waits (it spins first). */
void nx_workers_set_ranks(uint32_t n);

/* True when those ranks and the loop thread already have one of the daemon's CPUs each:
 * a worker woken then has to take a CPU from someone, which costs more than a small
 * piece of work saves. */
bool nx_workers_crowded(void);

/* How many runs were split over more than one thread since the start. */
uint64_t nx_workers_splits(void);

/* Runs fn(arg, i) for i in [0, parts), parts <= nx_workers_parts(); returns when all
 * returned.  The result is the first non-zero one, or 0. */
int nx_workers_run(int (*fn)(void *arg, uint32_t part), void *arg, uint32_t parts);

#endif
