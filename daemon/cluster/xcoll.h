/*
 * xcoll.h - collectives on communicators that span nodes: how the matcher drives the
 * inter-node algorithms (algo.h).  docs/algorithms.md, "Glue", is the long form.
 *
 * The matcher collects this node's ranks for op seq k as for any op.  An op is cut into
 * parts, one per chunk of the ranks' plan (elements [k*C, k*C + C) of every block, C =
 * nx_op_chunk_elems of the communicator's size, the staging slot and the count, the same
 * on every node).  A part starts when every local rank supplied its chunk: the ranks'
 * inputs are combined into node-level buffers the daemon owns (xlocal.h), an xop runs among the
 * communicator's nodes on them, and when it ends the result goes back into each rank's
 * output and their descriptors complete.  Up to XC_PARTS_PER_OP parts of an op, and the
 * parts of the oldest XC_OPS_PER_COMM ops of a communicator, run at once; parts of
 * different communicators run independently, on their own transport channels.
 *
 * Channels: an op of one part sends on the communicator's collective channel 0, part k
 * of a larger op all its messages on channel 1 + k % (NX_XCOLL_CHANNELS - 1) (xcomm.h,
 * part_channel in xcoll.c), so that one large op spreads over channels (and over the
 * transport's connections, where it has several) while each part's messages keep the
 * order its xop relies on.  Nothing else is ordered: parts, ops and notes on different
 * channels may overtake each other, and every message is placed by its header alone
 * (seq, offset -> op, part).  What an overtaking message meets here: data for an op or
 * part not started is held, in arrival order with its channel; data for a part or op that
 * ended is a late credit (the part had everything it needed, or it would not have
 * ended); a confirmation counts whenever it comes; and a device note, the one message
 * whose order against data matters (NX_XSTEP_DEVICE), goes on every channel.
 *
 * On the wire a part is found by its offset: the xop's offsets within the part plus
 * k*C*esize.  DATA for an op or part this node has not reached is held (at most
 * XC_HELD_BYTES and XC_HELD_MSGS per communicator; beyond, the communicator fails naming
 * the node) and fed
 * to the part's xop when it starts; a credit for a part that ended is dropped.
 *
 * Every DATA header carries the op's signature in full: a node that receives another
 * op's data at a sequence fails the communicator with NEXAR_ERR_MISMATCH naming both
 * nodes (with their addresses and ranks) and both signatures, before any payload is
 * used.  For the kinds where a node can finish without hearing from every other
 * (broadcast, reduce, gather, scatter, scan, exscan) the nodes also confirm each op to
 * each other (an empty DATA at NX_XSTEP_CONFIRM, sent as soon as all the node's ranks
 * called it) and an op ends only once every node's confirmation came, so that no node
 * reports success for an op another node did not call.
 *
 * Failures: an xop that fails (a protocol error in the data, a lost node) fails the
 * communicator with its text, naming the node with its address and ranks; the other
 * nodes learn any failure through the communicator's PeerAbort (xcomm.h).
 *
 * xcoll.c runs the parts, xcoll_net.c takes the other nodes' messages, xcoll_sig.c says
 * what an op is on the wire and in texts (xcoll_int.h).  Everything runs on the loop
 * thread.  The xops' done callbacks are queued and handled
 * when the outermost call into this module returns, so no caller ever sees an op or a
 * part vanish under it.
 */
#ifndef NX_XCOLL_H
#define NX_XCOLL_H

#include <stddef.h>
#include <stdint.h>

#include "shm_abi.h"
#include "wire.h"

struct nx_comm;
struct nx_op;
struct nx_tpeer;

#define XC_PARTS_PER_OP 8
/* Parts of a rooted op a node sends without waiting for the others to start them (the
 * xop's gate): as many as a rank has slots.  They cover the round trip of the others'
 * start at the op's beginning, where the ranks call it at about the same time; further
 * ahead, what came before its part would wait whole and be copied again. */
#define XC_UNGATED_PARTS NX_PIPE_SLOTS
#define XC_OPS_PER_COMM 2
#define XC_HELD_BYTES (256ull << 20)
#define XC_HELD_MSGS 65536u
/* The step of a confirmation: an empty DATA message that says "every rank of this node
 * called op seq" with the signature its header carries (never an algorithm step, never
 * NX_XSTEP_CREDIT). */
#define NX_XSTEP_CONFIRM (UINT32_MAX - 1)
/* The step of a device note: an empty DATA message that says "every rank of this node
 * called op seq on device buffers".  A node starts such an op's parts (staged through
 * host memory, node/devstage.h) once every other node sent its note; it sends its own
 * note on every collective channel, ahead of its data on each, and a receiver takes
 * data on a channel only after the sender's note on that channel.  A node whose ranks
 * called it on host buffers (and sends DATA or confirmations, never a note) fails the
 * communicator with NEXAR_ERR_MISMATCH naming a device rank and a host rank, wherever
 * it is seen first.  Neither waits for the deadline.  Device ops need no confirmation:
 * the notes came before any data. */
#define NX_XSTEP_DEVICE (UINT32_MAX - 2)

/* The matcher has new descriptors of op (a collective on a spanning communicator):
 * start the parts that can start; completes and frees op when its last part ended. */
void nx_xcoll_run(struct nx_op *op);

/* op is being freed: its live parts go.  When its communicator failed, the staged
 * chunks those parts had taken complete with the failure. */
void nx_xcoll_op_free(struct nx_op *op);

/* A DATA message from p on channel (raw: the whole message, kept when it is early for a
 * communicator not here yet).  NULL, or why the peer must be dropped. */
const char *nx_xcoll_on_data(struct nx_tpeer *p, uint64_t channel, const struct nx_wire_msg *w,
                             const void *raw, size_t rawlen);

/* A DATA message arriving in pieces (the transport's on_stream; w decoded from its head):
 * a sink that takes its every byte from the first (nx_xcoll_stream_data) when it can go
 * straight into the step its part's xop waits in, else NULL: it then comes whole, to
 * nx_xcoll_on_data, which judges it.  nx_xcoll_stream_end frees the sink (whole 0: the
 * rest never came). */
void *nx_xcoll_stream_begin(struct nx_tpeer *p, uint64_t channel, const struct nx_wire_msg *w);
void nx_xcoll_stream_data(void *sink, const void *data, size_t n);
void nx_xcoll_stream_end(void *sink, int whole);

/* The transport acknowledged a message sent with an NX_TOKEN_XCOLL token. */
void nx_xcoll_on_sent(uint64_t token);
/* The transport copied a message lent with an NX_TOKEN_XCOLL token. */
void nx_xcoll_on_copied(uint64_t token);

/* c's spanning record goes: what was held for it is freed. */
void nx_xcoll_comm_gone(struct nx_comm *c);

/* Where op stands across nodes, for timeouts and nexarctl ops: "part 2/16 (ring): piece
 * 3/4 step 2/2: waiting for node 1 (127.0.0.1:7001, ranks 2-3)"; "" when no part runs. */
void nx_xcoll_describe(const struct nx_op *op, char *buf, size_t len);
/* Staged chunks of local rank r that op's parts hold (taken, not completed). */
uint32_t nx_xcoll_held(const struct nx_op *op, uint32_t r);

/* The inter-node algorithm of op's latest part ("ring"), or NULL before one started. */
const char *nx_xcoll_algo(const struct nx_op *op);

#endif
