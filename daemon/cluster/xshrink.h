/*
 * xshrink.h - nexar_comm_shrink on a communicator that spans nodes: the daemons' agreement
 * on one failed set (docs/recovery.md).
 *
 * Each node's part (node/shrink.c) says when every rank attached there has called shrink
 * (nx_xshrink_ready).  The node then sends READY, with the ranks it knows failed, to the
 * other nodes of the communicator, and again whenever that set grows.  The leader, the
 * lowest node of the communicator that still has a rank not known failed, decides once
 * every such node is ready: the union of the failed sets, and the new communicator's key,
 * go to every node with a survivor, and each makes its part (nx_shrink_decide).  A rank
 * or node that fails while they agree is added to the set instead of waited for; a lost
 * leader is replaced by the next node, which has every READY already (they go to all).
 * Nothing waits past the communicator's deadline: node/shrink.c times its callers out.
 */
#ifndef NX_XSHRINK_H
#define NX_XSHRINK_H

#include <stdint.h>

#include "peer.pb-c.h"

struct nx_comm;
struct nx_tpeer;

/* cluster_ops.shrink_ready: every rank of c attached here called shrink. */
void nx_xshrink_ready(struct nx_comm *c);
/* cluster_ops.shrink_attach: nc is this node's part of the shrunk communicator. */
void nx_xshrink_attach(struct nx_comm *nc, struct nx_comm *c, const uint32_t *survivors,
                       uint32_t n, uint64_t key);
/* c->failed grew (a PeerAbort, a lost node): resend READY, maybe decide now. */
void nx_xshrink_failed_grew(struct nx_comm *c);
/* c goes away here. */
void nx_xshrink_comm_gone(struct nx_comm *c);
/* A PeerShrink from p: NULL, or why p is dropped. */
const char *nx_xshrink_on_msg(struct nx_tpeer *p, const Nexar__PeerShrink *m);
/* Forgets agreements whose communicator never came. */
void nx_xshrink_tick(double now);
void nx_xshrink_fini(void);

#endif
