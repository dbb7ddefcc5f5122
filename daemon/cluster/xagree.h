/*
 * xagree.h - the agreements in progress between the nodes of a communicator that spans
 * nodes, as grow and shrink run them (xgrow.c, xshrink.c): one per (job, communicator,
 * round), with which job nodes said they are ready.
 *
 * A node's READY may come before its communicator exists here, or after it went, so an
 * agreement is kept a while on its own (NX_XAGREE_KEEP_S past the last local call) and
 * then forgotten by nx_xagree_tick.  Each protocol embeds struct nx_xagree first in its
 * own record and keeps its agreements in a table of its own, whose init and fini hooks
 * make and free the record's other members.
 */
#ifndef NX_XAGREE_H
#define NX_XAGREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct nx_comm;

/* How long an agreement whose communicator is not here (or no longer) is kept. */
#define NX_XAGREE_KEEP_S 30.0

struct nx_xagree {
    uint64_t job_key, comm_key;
    uint32_t round;
    uint32_t nnodes; /* job nodes */
    uint8_t *ready;  /* by job node: it said READY for this round */
    bool local_ready;
    double expires;
    LIST_ENTRY(nx_xagree) link;
};

struct nx_xagree_table {
    LIST_HEAD(, nx_xagree) all;
    size_t size;                         /* of the record that embeds struct nx_xagree */
    void (*init)(struct nx_xagree *a);   /* its other members, once nnodes is set */
    void (*fini)(struct nx_xagree *a);
};

/* The agreement of (job_key, comm_key, round); made (with nnodes job nodes) when create,
 * else NULL when there is none. */
struct nx_xagree *nx_xagree_get(struct nx_xagree_table *t, uint64_t job_key,
                                uint64_t comm_key, uint32_t round, uint32_t nnodes,
                                bool create);
void nx_xagree_free(struct nx_xagree_table *t, struct nx_xagree *a);
/* This node's members of c are all in: keep the agreement until c's deadline and then
 * NX_XAGREE_KEEP_S. */
void nx_xagree_local_ready(struct nx_xagree *a, const struct nx_comm *c);
/* Calls fn for every agreement of the job job_key; fn may free the one it is given. */
void nx_xagree_each_of_job(struct nx_xagree_table *t, uint64_t job_key,
                           void (*fn)(struct nx_xagree *a));
/* c goes away here: its agreements with it. */
void nx_xagree_comm_gone(struct nx_xagree_table *t, const struct nx_comm *c);
/* Forgets the agreements that expired by now. */
void nx_xagree_tick(struct nx_xagree_table *t, double now);
void nx_xagree_fini(struct nx_xagree_table *t);

#endif
