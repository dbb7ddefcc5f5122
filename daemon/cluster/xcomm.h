/*
 * xcomm.h - the network identity of a communicator that spans nodes.
 *
 * Each node of such a communicator holds its own nx_comm over its local ranks (comm.h:
 * span_size, span_rank) and this record, which every node computes alike from the job's
 * rank table:
 *   key       the same on every node: the world's is NX_XCOMM_WORLD, a split's is
 *             derived from its parent's key, the split's sequence and the color;
 *   nodes     the job nodes that host its ranks, in job order (comm node i);
 *   rank_node the comm node of each of its ranks.
 * DATA and P2P headers carry (job key, comm key): that is how an arriving message finds
 * its communicator (nx_xcomm_route).  Collectives travel on NX_XCOLL_CHANNELS transport
 * channels per communicator and node pair, point-to-point on one per (communicator, tag),
 * so traffic of different communicators or tags never waits behind each other.  The
 * collective channels are consecutive from a multiple of 16, and the point-to-point ones
 * are multiples of 16: QUIC lanes (transport_lanes.h) put channel ch on connection
 * (ch mod 16) mod K, so an op's parts spread over K connections evenly while its first
 * part, and every point-to-point message, stays on the loop thread's.
 *
 * A message can outrun the communicator it is for: the rank table, or a split's last
 * PeerSplit, may reach another node after that node's data.  Such messages are held (at
 * most NX_XCOMM_ORPHAN_BYTES in all, each for at most NX_XCOMM_ORPHAN_S) and handed over
 * when the communicator appears here.
 *
 * A rank that leaves a spanning communicator in order tells its other nodes the same
 * way, with the sequence of the first collective it will never join: those fail there
 * at once, the earlier ones complete.
 *
 * A spanning communicator that fails here for a reason of its own (a mismatch, a
 * timeout, an abort, a protocol error in its data) tells its other nodes with a PeerAbort
 * naming its key, so every rank everywhere ends with the same status and text.
 */
#ifndef NX_XCOMM_H
#define NX_XCOMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/uio.h>

#include "peer.pb-c.h"
#include "wire.h"

struct nx_comm;
struct nx_job;
struct nx_tpeer;
struct nx_xheld;
struct nx_xsend;

#define NX_XCOMM_WORLD 1ull
#define NX_XCOMM_ORPHAN_BYTES (64ull << 20)
#define NX_XCOMM_ORPHAN_S 30.0
/* Collective channels of a communicator: part k of an op keeps to channel k % this
 * (xcoll.h says what that ordering allows).  A power of 2, at most 8 (xcoll_int.h keeps
 * a bit per channel in a byte). */
#define NX_XCOLL_CHANNELS 8u

TAILQ_HEAD(nx_xheld_list, nx_xheld);
TAILQ_HEAD(nx_xsend_list, nx_xsend);

struct nx_xcomm {
    uint64_t key;
    uint64_t chan0;      /* the first of its NX_XCOLL_CHANNELS collective channels */
    uint64_t p2p_seed;   /* what its point-to-point channels derive from */
    uint32_t nnodes, me; /* comm nodes; ours */
    uint32_t *node_job;  /* comm node -> job node */
    uint32_t *rank_node; /* comm rank -> comm node (span_size entries) */
    bool remote_fail;    /* failing because another node said so: do not echo it */
    /* xcoll.c: DATA that came before this node opened its op or part. */
    struct nx_xheld_list held;
    uint64_t held_bytes, held_msgs;
    /* xp2p.c: sends of local ranks to ranks on other nodes. */
    struct nx_xsend_list sends;
};

/* Makes c (a communicator of job j over this node's ranks, whose span ranks are set)
 * span nodes: rank r of the communicator lives at job node job_node[r].  Messages held
 * for (job, key) are delivered now. */
void nx_xcomm_attach(struct nx_comm *c, uint64_t key, const uint32_t *job_node);
/* Frees c->x (with anything held for it). */
void nx_xcomm_detach(struct nx_comm *c);

/* A 64-bit mixing function (splitmix64's finalizer): communicator keys and channels
 * derived from other numbers. */
uint64_t nx_xcomm_mix64(uint64_t x);

/* The key of the communicator made by split seq of parent for color. */
uint64_t nx_xcomm_split_key(uint64_t parent, uint64_t seq, uint32_t color);

/* The spanning communicator (job key, comm key) at this node, or NULL. */
struct nx_comm *nx_xcomm_find(uint64_t job_key, uint64_t comm_key);

/*
 * Where a DATA or P2P message from peer p belongs.  job_node: the job node the message
 * claims to come from (DATA: its src; P2P: the node of its src rank, looked up by the
 * caller once it knows the job, so pass UINT32_MAX and src_rank).  Returns:
 *    1  *c and *node (comm node of the sender) are set;
 *    0  nothing to do now: the message was kept (raw, rawlen) for a communicator not here
 *       yet (raw NULL: nothing kept, for a caller that has the message whole only later),
 *       or its communicator is gone or failed (dropped);
 *   -1  the peer broke the protocol: why says how (drop it).
 */
int nx_xcomm_route(struct nx_tpeer *p, uint64_t channel, const struct nx_wire_msg *w,
                   const void *raw, size_t rawlen, struct nx_comm **c, uint32_t *node,
                   const char **why);

/* Collective channel i (taken modulo NX_XCOLL_CHANNELS) of c. */
uint64_t nx_xcomm_coll_channel(const struct nx_comm *c, uint64_t i);

/* The transport channel of c's point-to-point messages with tag. */
uint64_t nx_xcomm_p2p_channel(const struct nx_comm *c, uint32_t tag);

/* Sends iov to comm node `node` of c on channel.  0 or a negative errno from the
 * transport (-ENOTCONN: the node is lost), or -ESHUTDOWN once this daemon's transport
 * is gone (it is stopping). */
int nx_xcomm_send(struct nx_comm *c, uint32_t node, uint64_t channel, const struct iovec *iov,
                  int iovcnt, uint64_t token);
/* The same with the transport's lend (transport.h) where it has one: 1 when it reads
 * iov[1..] until its on_copied(token), 0 when it copied them. */
int nx_xcomm_lend(struct nx_comm *c, uint32_t node, uint64_t channel, const struct iovec *iov,
                  int iovcnt, uint64_t token);

/* Sends a control message to every other node of c (a lost one is logged). */
void nx_xcomm_send_ctl(struct nx_comm *c, Nexar__PeerMsg *m);

/* "node 1 (127.0.0.1:7001, ranks 2-3)" */
void nx_xcomm_node_name(const struct nx_comm *c, uint32_t node, char *buf, size_t len);
/* Whether rank (of c's span) is on another node; if so "node 1 (127.0.0.1:7001, ranks
 * 2-3)" into buf. */
bool nx_xcomm_rank_node(const struct nx_comm *c, uint32_t rank, char *buf, size_t len);
/* "127.0.0.1:7001, ranks 2-3" */
void nx_xcomm_node_where(const struct nx_comm *c, uint32_t node, char *buf, size_t len);

/* A failure of c here: the other nodes of c are told (PeerAbort with its key) unless the
 * failure came from one of them or the whole job failed.  From nx_comm_fail. */
void nx_xcomm_failed(struct nx_comm *c);

/* A PeerAbort naming a communicator (a->comm) of job j came from the node at address
 * from: its failed ranks are added to c's, and c fails with it, the text saying which node
 * reported it.  A communicator not here yet fails with it when it appears (within
 * NX_XCOMM_ORPHAN_S). */
void nx_xcomm_remote_abort(struct nx_job *j, const Nexar__PeerAbort *a, const char *from);
/* The same for a job whose rank table has not come yet (job_key: the job key the abort
 * names). */
void nx_xcomm_keep_abort(uint64_t job_key, uint64_t key, bool left, uint64_t seq,
                         uint32_t status, const char *from, const char *reason);
/* Job node job_node of j was lost (msg says so): every spanning communicator of j with
 * ranks there counts them failed and fails; the others go on. */
void nx_xcomm_node_lost(struct nx_job *j, uint32_t job_node, const char *msg);
/* Local rank `rank` of c left it in order before collective seq (node/cluster_ops.h,
 * comm_left): the other nodes close c from seq on (a PeerAbort with left). */
void nx_xcomm_left(struct nx_comm *c, uint32_t rank, uint64_t seq, const char *who);

/* Expires orphans; from the cluster's tick. */
void nx_xcomm_tick(double now);
void nx_xcomm_fini(void);

#endif
