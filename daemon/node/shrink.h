/*
 * shrink.h - nexar_comm_shrink on one node: the survivors of a communicator agree on a new
 * one that holds exactly them, in the order of their ranks in the old one.
 *
 * Every rank of c that is still attached (not dead, not gone through nexar_comm_free) must
 * call it; a rank that dies meanwhile is left out instead of waited for.  When the last
 * survivor has called, the new communicator is made and every caller's descriptor completes
 * with it.  When one still does not call within the communicator's deadline, every caller
 * gets NEXAR_ERR_TIMEOUT naming the ranks that did not.  Shrinking a healthy communicator
 * gives a copy of it.  Across nodes, this node's part says when its ranks are all in, and
 * the daemons agree on the failed set first (cluster/xshrink.h).
 */
#ifndef NX_SHRINK_H
#define NX_SHRINK_H

#include <stddef.h>
#include <stdint.h>

struct nx_comm;
struct nx_client;

/* Local rank r of c (client cl) calls shrink; user_data is its descriptor's. */
void nx_shrink_submit(struct nx_comm *c, uint32_t r, struct nx_client *cl, uint64_t user_data);

/* Across nodes, once the daemons agreed (cluster/xshrink.c): failed[0..nfailed) (ascending,
 * as c numbers its ranks) are out, key names the new communicator on every node.  Makes
 * this node's part and completes its callers. */
void nx_shrink_decide(struct nx_comm *c, const uint32_t *failed, size_t nfailed, uint64_t key);

/* A rank of c left or died: the shrink in progress no longer waits for it. */
void nx_shrink_rank_gone(struct nx_comm *c);

/* c goes away: forget its shrink (its callers are gone with it). */
void nx_shrink_forget(struct nx_comm *c);

/* Deadlines. */
void nx_shrink_tick(double now);

#endif
