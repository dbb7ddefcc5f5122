/*
 * grow.h - nexar_comm_grow on one node: the members of a communicator and `add` processes
 * that joined the running job (NEXAR_JOIN=1) make a new communicator.  Members keep their
 * ranks; joiners come after them in the order they joined, and get it as their world from
 * nexar_init().
 *
 * Every rank of c still attached calls it with the same add (> 0; different values fail
 * every caller with NEXAR_ERR_MISMATCH naming both).  It completes once they all have and
 * `add` joiners wait; until c's deadline, then every caller gets NEXAR_ERR_TIMEOUT saying
 * how many joiners came.  A joiner that no communicator takes within the job's deadline
 * gets NEXAR_ERR_TIMEOUT from nexar_init.  Across nodes, node 0 of c decides which nodes'
 * joiners to take (cluster/xgrow.h); joiners come to a node that has ranks of the job.
 */
#ifndef NX_GROW_H
#define NX_GROW_H

#include <stdint.h>

struct nx_comm;
struct nx_client;
struct nx_job;

/* Local rank r of c (client cl) calls grow by add; user_data is its descriptor's. */
void nx_grow_submit(struct nx_comm *c, uint32_t r, struct nx_client *cl, uint64_t user_data,
                    uint32_t add);
/* Across nodes, once node 0 of c decided (cluster/xgrow.c): job_node[0..n) is the job node
 * of each rank of the grown communicator (c's S ranks, then the joiners, each node's in the
 * order they came), key its key, first_rank the world rank of its first joiner; this node
 * is job node me.  Or status and text, which fail every caller.  Makes this node's part
 * and completes its callers. */
void nx_grow_decide(struct nx_comm *c, uint64_t key, uint32_t first_rank,
                    const uint32_t *job_node, uint32_t n, uint32_t me, uint32_t status,
                    const char *text);
/* The same at a node of j without a rank of the communicator that grew (a replacement
 * node): only its joiners. */
void nx_grow_take_remote(struct nx_job *j, uint64_t key, uint32_t first_rank,
                         const uint32_t *job_node, uint32_t n, uint32_t S, uint32_t me);
/* c failed: a grow in progress fails with it. */
void nx_grow_comm_failed(struct nx_comm *c);
/* A joiner of j came: a grow waiting for one may complete. */
void nx_grow_joiner_came(struct nx_job *j);
/* A rank of c left or died: the grow in progress no longer waits for it. */
void nx_grow_rank_gone(struct nx_comm *c);
/* c goes away. */
void nx_grow_forget(struct nx_comm *c);
/* Deadlines: grows, and joiners no grow took. */
void nx_grow_tick(double now);

#endif
