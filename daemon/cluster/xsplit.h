/*
 * xsplit.h - comm_split of a communicator that spans nodes.
 *
 * The local matcher gathers the split of this node's ranks as for any collective.  When
 * it is complete here, this module takes it over: it sends the communicator's other
 * nodes the color and key of each local rank (PeerSplit, keyed by the communicator's key
 * and the op sequence), and once every rank of the communicator is known it computes the
 * groups exactly as a split on one node does (by color, ordered by key then old rank).
 * Every node computes the same answer.  A group whose ranks are all on this node becomes
 * a local communicator; a group with ranks on several nodes becomes a spanning
 * communicator (xcomm.h) whose key every node derives from the parent's key, the split's
 * sequence and the color; color NEXAR_UNDEFINED gives no communicator.  A PeerSplit for a
 * communicator this node has not made yet (its ranks are still in the split that makes
 * it) is kept until the communicator appears.
 *
 * A node that never sends its part fails the communicator with NEXAR_ERR_TIMEOUT after
 * the communicator's deadline, naming the nodes; a failure of the communicator
 * completes a pending split with that failure.
 */
#ifndef NX_XSPLIT_H
#define NX_XSPLIT_H

#include <stdbool.h>

#include "peer.pb-c.h"

struct nx_comm;
struct nx_op;
struct nx_tpeer;

/* The matcher finished op (a split on a spanning communicator) locally: the split's
 * completions are ours now.  The op itself may be freed on return. */
void nx_xsplit_take(struct nx_op *op);

/* c just became a spanning communicator here: splits of it that came early run now. */
void nx_xsplit_comm_attached(struct nx_comm *c);

/* A PeerSplit from p.  NULL, or why the peer must be dropped. */
const char *nx_xsplit_on_msg(struct nx_tpeer *p, const Nexar__PeerSplit *m);

/* comm failed: pending splits complete with its failure.  comm_gone: comm is being
 * freed (no local rank is left), its records go. */
void nx_xsplit_fail(struct nx_comm *c);
void nx_xsplit_comm_gone(struct nx_comm *c);
/* Whether comm has a split waiting for other nodes (a rank that frees comm now breaks it). */
bool nx_xsplit_pending(const struct nx_comm *c);

void nx_xsplit_tick(double now);
void nx_xsplit_fini(void);

#endif
