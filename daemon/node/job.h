/*
 * job.h - jobs and the formation of their world communicator.
 *
 * A job is named by NEXAR_JOB.  Its first rank creates it and its uid owns it.  The
 * join replies go out together once all world_size ranks are attached; a job that
 * does not form within the timeout fails every waiting rank with NEXAR_ERR_TIMEOUT,
 * naming the ranks that never came.  The job goes away with its last rank.
 *
 * A job whose ranks name a coordinator (NEXAR_COORD) may span nodes: this record is
 * then this node's part of it, and the cluster layer (cluster_ops.h, rendezvous.h)
 * decides when it forms (net != NULL).
 */
#ifndef NX_JOB_H
#define NX_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "netaddr.h"
#include "shm_abi.h"

struct nx_conn;
struct nx_client;
struct nx_comm;
struct nx_jobnet;
struct Nexar__JoinRequest;

/* Extra time a job across nodes waits past its formation deadline for the coordinator's
 * word (the coordinator names the missing ranks; this covers one that went silent). */
#define NX_JOB_COORD_GRACE_S 2.0

enum nx_job_state { NX_JOB_FORMING, NX_JOB_RUNNING, NX_JOB_FAILED };

struct nx_job {
    char *name;
    uint32_t world_size;
    uid_t owner;
    /* Its ranks on this node read each other's buffers with process_vm_readv: every one
     * asked (JoinRequest.single_copy), they share one uid and nexard's pid namespace, and
     * they read each other's slots (peer reads).  Their local communicators' plans say so
     * (nx_comm_set_plan). */
    bool single_copy;
    enum nx_job_state state;
    uint32_t joined; /* ranks attached */
    uint32_t live;   /* clients still alive */
    /* By world rank once formed (world_size, then the joiners taken; NULL before):
     * nx_job_rank() reads either form. */
    struct nx_client **ranks;
    uint32_t nranks;          /* entries of ranks */
    /* While forming: the ranks that joined, by world rank ascending, so that a pending JOIN
     * costs what joined rather than the world size it claims. */
    struct nx_client **pending;
    uint32_t npending;
    /* NEXAR_JOIN=1 processes waiting for a communicator to grow (grow.h), in join order. */
    struct nx_client **joiners;
    uint32_t njoiners;
    uint32_t timeout_ms;
    uint32_t formation_ms;
    double deadline; /* formation */
    struct nx_comm *world;
    char coord[NX_ADDR_MAX]; /* the coordinator its ranks named, canonical; "": local */
    struct nx_jobnet *net; /* the cluster layer's part of a job across nodes (cluster_ops.h,
                            * rendezvous.h); NULL: a local job */
    char *algo;            /* the ranks' NEXAR_ALGO ("" when they gave none) */
    /* The algorithm across nodes per kind (algo.h, NX_ALGO_AUTO: by size): the ranks'
     * NEXAR_ALGO, else the `algo` setting (a multi-node job: the coordinator's word). */
    uint8_t algo_pref[NX_K_MAX + 1];
    LIST_ENTRY(nx_job) link;
};

LIST_HEAD(nx_job_list, nx_job);
extern struct nx_job_list nx_jobs;

/* World rank r of j at this daemon, or NULL (not joined, not here, gone). */
struct nx_client *nx_job_rank(const struct nx_job *j, uint32_t r);

/* Handles a JOIN from conn: replies (now or at formation) or fails the connection. */
void nx_job_join(struct nx_conn *conn, const struct Nexar__JoinRequest *req);

/* A communicator grew to take joiner cl as its rank `rank` (grow.h): cl becomes world rank
 * world_rank of j and gets its JoinReply, with c as its world. */
void nx_job_take_joiner(struct nx_job *j, struct nx_client *cl, struct nx_comm *c,
                        uint32_t rank, uint32_t world_rank, uint32_t nodes, uint32_t local_size,
                        uint32_t local_rank);
/* j's rank table reaches n entries (the new ones empty: joiners of other nodes). */
void nx_job_reserve_ranks(struct nx_job *j, uint32_t n);
/* Joiner cl is not taken: its JoinReply says why, and it is dropped. */
void nx_job_refuse_joiner(struct nx_client *cl, uint32_t status, const char *msg);

/* The client left: lost (it still belonged to communicators) or finished. */
void nx_job_client_gone(struct nx_client *cl, bool lost);

struct nx_job *nx_job_find(const char *name);

/* Forms the job from its attached ranks (all of them, or this node's part of a
 * multi-node job): world communicator, join replies. */
void nx_job_form(struct nx_job *j);

/* Fails the job with status and msg: a forming job refuses its waiting ranks (join
 * replies with the error), a running one fails every communicator.  Once. */
void nx_job_fail(struct nx_job *j, uint32_t status, const char *msg);

/* Refuses one waiting rank of a forming job (the coordinator turned it down). */
void nx_job_refuse_rank(struct nx_job *j, uint32_t rank, uint32_t status, const char *msg);

/* Formation deadlines; called from the daemon's tick. */
void nx_jobs_tick(double now);

void nx_jobs_fini(void);

const char *nx_job_state_name(enum nx_job_state s);

#endif
