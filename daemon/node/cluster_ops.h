/*
 * cluster_ops.h - how the node layer reaches the cluster layer above it.
 *
 * The node layer (clients, jobs, communicators, the matcher, send/recv) serves this
 * node's ranks and knows nothing of other nodes.  Where a job or a communicator spans
 * nodes it calls these ops, which the cluster layer (cluster/cluster.c) installs at
 * start-up with nx_cluster_ops_set().  Until then, and in a unit test that links the node
 * layer alone, nx_cluster_ops is the table of a node without a network: every job is
 * local, no communicator spans nodes, and a rank that names a coordinator is refused.
 *
 * The node layer tells "spans nodes" from its own records: a job with net != NULL, a
 * communicator with x != NULL.  Both are the cluster layer's (opaque here), set only by
 * these ops.  Every op runs on the loop thread.
 */
#ifndef NX_CLUSTER_OPS_H
#define NX_CLUSTER_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm_abi.h"

struct nx_client;
struct nx_comm;
struct nx_job;
struct nx_op;

struct nx_cluster_ops {
    /* ---- jobs (the rendezvous) ---- */

    /* A joining rank's coordinator (NEXAR_COORD; guessed: torchrun's MASTER_ADDR).
     * Returns 0 with the canonical address in canon ("" for a local job), or a
     * nexar_status_t with the reason in msg. */
    uint32_t (*check_coord)(const char *coord, bool guessed, char *canon, size_t canonlen,
                            char *msg, size_t msglen);
    /* The formation deadline of a job across nodes whose ranks asked for timeout_ms (0:
     * the daemon's default). */
    uint32_t (*formation_ms)(uint32_t timeout_ms);
    /* j (just created, j->coord set) is a job across nodes: j->net is set. */
    void (*job_init)(struct nx_job *j);
    /* j goes: j->net is freed and cleared.  Also for a local job (nothing to do). */
    void (*job_fini)(struct nx_job *j);
    /* A local rank attached to j (a job across nodes). */
    void (*rank_joined)(struct nx_job *j, uint32_t rank, uid_t uid, uint32_t timeout_ms);
    /* A local rank of j (a job across nodes) left: lost, or gone after it finished. */
    void (*rank_left)(struct nx_job *j, uint32_t rank, bool lost, const char *who);
    /* j's world communicator was just made over this node's ranks, whose world ranks are
     * wr[0..j->world->size): it is made to span the job's nodes.  Returns the number of
     * nodes (1: a local job). */
    uint32_t (*world_formed)(struct nx_job *j, const uint32_t *wr);
    /* This node's index among j's nodes (0 for a local job). */
    uint32_t (*job_node)(const struct nx_job *j);

    /* ---- communicators ---- */

    /* c failed here (c->failed_status set): its pending split completes, the other nodes
     * are told. */
    void (*comm_failed)(struct nx_comm *c);
    /* c is being freed (no local rank is left): its records go. */
    void (*comm_gone)(struct nx_comm *c);
    /* c has work waiting for other nodes that a rank freeing c would break. */
    bool (*comm_busy)(const struct nx_comm *c);
    /* Local rank `rank` of c (spanning) left in order, with nothing of it in flight; its
     * next collective would have been seq.  who names it.  The other nodes close c from
     * seq on (nx_comm_close_from). */
    void (*comm_left)(struct nx_comm *c, uint32_t rank, uint64_t seq, const char *who);

    /* ---- collectives on a communicator spanning nodes (c->x) ---- */

    /* The matcher has new descriptors of op: run what can run. */
    void (*coll_run)(struct nx_op *op);
    /* op is being freed. */
    void (*coll_free)(struct nx_op *op);
    /* Where op stands across nodes, for timeouts and nexarctl ("" when nothing runs). */
    void (*coll_describe)(const struct nx_op *op, char *buf, size_t len);
    /* Staged chunks of local rank r (the comm's index) that op's parts across nodes hold:
     * taken from its queue, not completed, each a slot of that rank. */
    uint32_t (*coll_held)(const struct nx_op *op, uint32_t r);
    /* A split of a spanning communicator is complete here: its completions are the
     * cluster's now (the op may be freed on return). */
    void (*split_take)(struct nx_op *op);

    /* ---- send/recv ---- */

    /* A validated send of local rank `rank`: true when its destination is on another
     * node and the cluster took it. */
    bool (*p2p_send)(struct nx_comm *c, uint32_t rank, struct nx_client *cl,
                     const struct nx_sqe *e);
    /* The piece at byte offset of a send from rank src on another node reached its
     * receive here for good (send: that send's descriptor as its node described it). */
    void (*p2p_ack)(struct nx_comm *c, const struct nx_sqe *send, uint32_t src,
                    uint64_t offset);
    /* c failed: sends to other nodes complete with its failure. */
    void (*p2p_fail_all)(struct nx_comm *c);
    /* Deadlines of sends to other nodes. */
    void (*p2p_tick)(struct nx_comm *c, double now);
    /* Whether rank (of c's span) is on another node; if so its name into buf ("node 1
     * (127.0.0.1:7001, ranks 2-3)"), for texts. */
    bool (*rank_node)(const struct nx_comm *c, uint32_t rank, char *buf, size_t len);

    /* Sends now what the ops just served queued (after a batch of submissions). */
    void (*progress)(void);
    /* nexar_comm_shrink across nodes (shrink.h): every rank of c attached here called it,
     * with c->failed as this node knows it (again whenever that grows) ... */
    void (*shrink_ready)(struct nx_comm *c);
    /* ... and after the agreement (nx_shrink_decide), nc is this node's part of the
     * shrunk communicator: survivors[0..n) are its ranks as c numbered them. */
    void (*shrink_attach)(struct nx_comm *nc, struct nx_comm *c, const uint32_t *survivors,
                          uint32_t n, uint64_t key);
    /* nexar_comm_grow across nodes (grow.h): every member of c here called it with add
     * (again when more joiners come) ... */
    void (*grow_ready)(struct nx_comm *c, uint32_t add);
    /* ... and after the decision (nx_grow_decide), nc is this node's part of the grown
     * communicator, whose ranks live at job_node[0..span size). */
    void (*grow_attach)(struct nx_comm *nc, uint64_t key, const uint32_t *job_node);
    /* The joiners of j here changed (one came, left or was taken): the coordinator hears
     * the count, and for a job not here yet (a replacement node, NEXAR_JOIN=1 with
     * NEXAR_COORD) makes this daemon a node of it (cluster/rdv_join.h). */
    void (*joiners_changed)(struct nx_job *j, uid_t uid);
};

/* The installed table; never NULL. */
extern const struct nx_cluster_ops *nx_cluster_ops;
/* The table of a node without a network (the default). */
extern const struct nx_cluster_ops nx_cluster_ops_local;

/* Installs ops (NULL: back to nx_cluster_ops_local). */
void nx_cluster_ops_set(const struct nx_cluster_ops *ops);

#endif
