/*
 * xp2p.h - send/recv between ranks on different nodes of a spanning communicator.
 *
 * The sending node streams the message as P2P pieces (proto/wire.h), one per chunk of
 * the rank's plan, on the communicator's channel for that tag, at most XP_WINDOW pieces
 * of a message unacknowledged.  The receiving node matches them with the receive exactly
 * like a local send's chunks (p2p.c, nx_p2p_remote_piece) and acknowledges each piece
 * once it reached the receive, or at once while its buffer for early sends lasts
 * (p2p_eager_bytes per communicator).  A send's chunk completes when its piece is
 * acknowledged: sends do not wait for receives while the receiver has room, and what a
 * receiver holds stays bounded when it has none.
 *
 * The k-th send from a to b with tag t still matches the k-th receive at b from a with
 * tag t; a size that differs fails the communicator with NEXAR_ERR_MISMATCH on every
 * node; a piece left unacknowledged past the communicator's deadline fails it with
 * NEXAR_ERR_TIMEOUT ("no matching recv"), as does a device send whose next piece is still
 * being copied off the GPU by then (the copy waits for the rank's ready event).
 */
#ifndef NX_XP2P_H
#define NX_XP2P_H

#include <stddef.h>
#include <stdint.h>

#include "shm_abi.h"
#include "wire.h"

struct nx_client;
struct nx_comm;
struct nx_tpeer;

#define XP_WINDOW 4u

/* A send descriptor (validated) of local rank `rank` whose destination is on another
 * node. */
void nx_xp2p_submit(struct nx_comm *c, uint32_t rank, struct nx_client *cl,
                    const struct nx_sqe *e);

/* A P2P message from p (a piece, or an acknowledgement of ours).  NULL, or why the peer
 * must be dropped. */
const char *nx_xp2p_on_msg(struct nx_tpeer *p, uint64_t channel, const struct nx_wire_msg *w,
                           const void *raw, size_t rawlen);

/* Tells the node of rank src that the piece at byte offset of its send (described by
 * send: dtype, count, dst in peer, tag, message number in seq) reached this node for
 * good (p2p.c). */
void nx_xp2p_ack(struct nx_comm *c, const struct nx_sqe *send, uint32_t src, uint64_t offset);

/* c failed: every send in flight completes with its failure. */
void nx_xp2p_fail_all(struct nx_comm *c);

/* Deadlines of unacknowledged pieces; from the matcher's tick. */
void nx_xp2p_tick(struct nx_comm *c, double now);

#endif
