/*
 * job.h - jobs and the formation of their world communicator.
 *
 * A job is named by NEXAR_JOB.  Its first rank creates it and its uid owns it.  The
 * join replies go out together once all world_size ranks are attached; a job that
 * does not form within the timeout fails every waiting rank with NEXAR_ERR_TIMEOUT,
 * naming the ranks that never came.  The job goes away with its last rank.
 */
#ifndef NX_JOB_H
#define NX_JOB_H

#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

struct nx_conn;
struct nx_client;
struct nx_comm;
struct Nexar__JoinRequest;

enum nx_job_state { NX_JOB_FORMING, NX_JOB_RUNNING, NX_JOB_FAILED };

struct nx_job {
    char *name;
    uint32_t world_size;
    uid_t owner;
    enum nx_job_state state;
    uint32_t joined; /* ranks attached */
    uint32_t live;   /* clients still alive */
    struct nx_client **ranks; /* by world rank */
    uint32_t timeout_ms;
    double deadline; /* formation */
    struct nx_comm *world;
    LIST_ENTRY(nx_job) link;
};

LIST_HEAD(nx_job_list, nx_job);
extern struct nx_job_list nx_jobs;

/* Handles a JOIN from conn: replies (now or at formation) or fails the connection. */
void nx_job_join(struct nx_conn *conn, const struct Nexar__JoinRequest *req);

/* The client left (died or was dropped). */
void nx_job_client_gone(struct nx_client *cl);

/* Formation deadlines; called from the daemon's tick. */
void nx_jobs_tick(double now);

void nx_jobs_fini(void);

const char *nx_job_state_name(enum nx_job_state s);

#endif
