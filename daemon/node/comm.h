/*
 * comm.h - communicators: an ordered set of ranks of one job, with its op matcher and
 * its point-to-point queues.  A communicator fails as a whole (mismatch, timeout, a
 * lost rank, abort): every pending op completes with the failure, and so does every
 * later one.
 */
#ifndef NX_COMM_H
#define NX_COMM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "p2p.h"
#include "shm_abi.h"
#include "matcher.h"

struct nx_job;
struct nx_client;
struct nx_xcomm;

struct nx_comm_rank {
    struct nx_client *client; /* NULL once it left */
    uint32_t world_rank;
    /* Collectives (not send/recv) this rank entered and that completed (nexarctl
     * comms); an op counts once, however many chunks it is staged in. */
    uint64_t ops_submitted, ops_completed;
    uint64_t bytes_in; /* payload handed in on this communicator (send/recv included) */
};

struct nx_comm {
    uint32_t id;
    struct nx_job *job;
    uint32_t size;
    uint32_t live; /* ranks that have not left */
    uint32_t timeout_ms;
    struct nx_comm_rank *ranks;
    uint32_t failed_status; /* 0 while healthy */
    char *failed_text;
    /* The ranks (as the ranks number them) known to have failed: dead processes, lost
     * nodes; ascending, each once (nexar_comm_failed_ranks). */
    uint32_t *failed;
    uint32_t nfailed;
    uint32_t shrunk_from; /* the communicator nexar_comm_shrink made it from; 0: none */
    uint32_t shrinks;     /* shrinks of it completed (the round of the next one) */
    uint32_t grown_from;  /* the communicator nexar_comm_grow made it from; 0: none */
    uint32_t grows;       /* grows of it completed (the round of the next one) */
    struct nx_matcher match;
    struct nx_p2p p2p;
    /* A communicator spanning nodes (a multi-node job's world) holds only this node's
     * ranks: ranks[i] is rank span_rank[i] of span_size as the ranks see it.  On one
     * node nodes is 1, span_size is size and span_rank NULL (the identity). */
    uint32_t nodes;
    /* Its ranks were told it lives on this node alone (JoinReply.local_plan, res_local):
     * the chunk plan of its ops is local (nx_op_chunk_elems).  Set where the ranks are
     * told, never changed, so that they and this daemon always cut an op alike. */
    bool plan_local;
    /* Its plan is single-copy too (shm_abi.h, NX_PLAN_CMA): local, its job's ranks here
     * may read each other's memory, and every one of its ranks reads peers. */
    bool plan_cma;
    uint32_t span_size;
    uint32_t *span_rank;
    struct nx_xcomm *x; /* spanning: its network identity (xcomm.h); NULL on one node */
    /* A rank on another node left c after its collectives before closed_from: a later
     * collective can never complete and fails at once with closed_text. */
    uint64_t closed_from; /* UINT64_MAX while every rank stays */
    uint32_t closed_status;
    char *closed_text;
    LIST_ENTRY(nx_comm) link;
};

LIST_HEAD(nx_comm_list, nx_comm);
extern struct nx_comm_list nx_comms;
extern uint32_t nx_comm_count;

/* New communicator over clients[0..size) (rank order) of job. */
struct nx_comm *nx_comm_new(struct nx_job *job, uint32_t size, struct nx_client *const *clients,
                            const uint32_t *world_ranks, uint32_t timeout_ms);

/* Makes c one spanning `nodes` nodes, of span_size ranks, whose local ranks are
 * span_rank[0..c->size) as the ranks see them. */
void nx_comm_span(struct nx_comm *c, uint32_t nodes, uint32_t span_size,
                  const uint32_t *span_rank);

/* The size and rank as the ranks see them (differs from size / local index only on a
 * communicator spanning nodes). */
/* Sets c's plan as its ranks are told it (plan_local, and plan_cma from it). */
void nx_comm_set_plan(struct nx_comm *c, bool local);

/* c's plan bits, NX_PLAN_*: what nx_op_chunk_elems and the ranks' res_local take. */
static inline unsigned nx_comm_plan(const struct nx_comm *c)
{
    return (c->plan_local ? NX_PLAN_LOCAL : 0u) | (c->plan_cma ? NX_PLAN_CMA : 0u);
}

static inline uint32_t nx_comm_span_size(const struct nx_comm *c)
{
    return c->span_size;
}
static inline uint32_t nx_comm_span_rank(const struct nx_comm *c, uint32_t r)
{
    return c->span_rank ? c->span_rank[r] : r;
}

/* A rank on another node left c after op seq - 1 (nx_cluster_ops.comm_left there): a
 * pending or later collective from seq on fails c with status and text (the first
 * such word stands). */
void nx_comm_close_from(struct nx_comm *c, uint64_t seq, uint32_t status, const char *text);

/* Local rank r of c as its texts name it: "rank 3", its rank in c as the ranks see it,
 * with "(world rank 7)" when that differs. */
const char *nx_comm_rank_name(const struct nx_comm *c, uint32_t r, char *buf, size_t len);

/* Adds rank (as the ranks number it) to c's failed ranks. */
void nx_comm_mark_failed(struct nx_comm *c, uint32_t rank);

/* Fails comm (first failure wins): completes everything pending with status/text. */
void nx_comm_fail(struct nx_comm *comm, uint32_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The rank left (comm_free) or died (lost=true: the comm fails with PEER_LOST, the text
 * naming who and how it went). */
void nx_comm_leave(struct nx_comm *comm, uint32_t rank, bool lost, const char *who,
                   const char *how);

void nx_comms_fini(void);

#endif
