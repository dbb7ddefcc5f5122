/*
 * xgrow.h - nexar_comm_grow on a communicator that spans nodes (docs/recovery.md).
 *
 * Each node's part (node/grow.c) says when its members have all called grow, with their
 * add (nx_xgrow_ready; again when more joiners come there).  The node sends READY with
 * that add, the joiners waiting there and the world ranks it knows to every other node of
 * the communicator.  Node 0 of the communicator decides once all are ready and enough
 * joiners wait: how many each node gives (in node order, each its own in the order they
 * came), the first world rank they get, and the new key; or MISMATCH when the adds
 * differ.  Each node then makes its part (nx_grow_decide).  Joiners come to a node that
 * already has ranks of the job.
 */
#ifndef NX_XGROW_H
#define NX_XGROW_H

#include <stdint.h>

#include "peer.pb-c.h"

struct nx_comm;
struct nx_job;
struct nx_tpeer;

/* cluster_ops.grow_ready: every member of c here called grow with add. */
void nx_xgrow_ready(struct nx_comm *c, uint32_t add);
/* cluster_ops.grow_attach: nc is this node's part of the grown communicator. */
void nx_xgrow_attach(struct nx_comm *nc, uint64_t key, const uint32_t *job_node);
void nx_xgrow_comm_gone(struct nx_comm *c);
/* The coordinator told of joiners somewhere in j: a grow waiting for them may go on. */
void nx_xgrow_joiners_noted(struct nx_job *j);
/* A PeerGrow from p: NULL, or why p is dropped. */
const char *nx_xgrow_on_msg(struct nx_tpeer *p, const Nexar__PeerGrow *m);
void nx_xgrow_tick(double now);
void nx_xgrow_fini(void);

#endif
