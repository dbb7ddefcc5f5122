/*
 * algo.h - the inter-node collective algorithms: one op among the daemons of a job,
 * one participant per node, on node-level buffers.
 *
 * Hierarchy: the daemon first combines the ranks of its node through shared memory
 * (coll_local.c), then runs an "xop" - this module - among the nodes, then writes the
 * result back to its ranks.  An xop is a pure state machine: it knows no sockets, no
 * clients and no transport.  It sends through the nx_xnet callbacks, is fed the DATA
 * messages addressed to it (nx_xop_on_data) and the acknowledgements of its own sends
 * (nx_xop_on_sent), and touches the node-level buffers only through the adapter.
 * docs/algorithms.md describes every algorithm, the chunking, the flow control, the
 * reduction order and rounding rules, and how the matcher drives xops.
 *
 * Threading: an xop lives on one thread (the daemon's loop); no call may run
 * concurrently with another on the same xop.  Calls on different xops are independent.
 *
 * Node-level buffer layouts (c = count, P = nranks, L = the ranks of this node, in
 * ascending rank order; "block" = c elements).  The rank->node table places blocks: the
 * ranks of one node need not be contiguous.
 *
 *   kind                  in                              out
 *   all_reduce, bucketed  c (the node's partial)          c (may equal in)
 *   broadcast             root node: c                    other nodes: c (root: NULL,
 *                                                         in, or a copy is made)
 *   reduce                c (the node's partial) [W]      root node: c (may equal in)
 *   all_gather            L blocks                        P blocks, rank order
 *   gather                L blocks                        root node: P blocks
 *   reduce_scatter        P blocks (node's partial) [W]   L blocks
 *   scatter               root node: P blocks             L blocks
 *   all_to_all            L x P blocks: local rank i's    L x P blocks: local rank i's
 *                         block j goes to rank j          block j came from rank j
 *   scan, exscan          L blocks (the ranks' inputs)    L blocks (the ranks' results)
 *   barrier               -                               -
 *
 * [W]: in is working memory there (overwritten).  Everywhere else in is only read.  For
 * scan/exscan the xop does the node-local prefix itself, since ranks of a node need not
 * be contiguous.  Buffers are host memory the daemon owns, touched only through the
 * adapter's synchronous ops; they must stay valid until the xop completed.
 */
#ifndef NX_ALGO_H
#define NX_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "adapter.h"
#include "shm_abi.h"

/* Algorithms.  Not every one exists for every kind (nx_algo_supported). */
enum nx_algo {
    NX_ALGO_AUTO = 0,      /* nx_algo_choose() by kind, node count and size */
    NX_ALGO_RING,          /* ring reduce-scatter + all-gather; chain for bcast/reduce */
    NX_ALGO_RD,            /* recursive doubling (all_gather: Bruck, any node count) */
    NX_ALGO_HD,            /* recursive halving (reduce-scatter) + doubling (all-gather) */
    NX_ALGO_TREE,          /* binomial tree */
    NX_ALGO_PAIRWISE,      /* pairwise exchange */
    NX_ALGO_DISSEMINATION, /* dissemination barrier */
    NX_ALGO_HILLIS_STEELE, /* Hillis-Steele prefix */
    NX_ALGO_COUNT
};

/* The step of a flow-control message ("credit"): empty payload, offset = the byte offset
 * of the first piece the sender has not finished (a piece boundary, like a DATA offset,
 * and always inside the op); never an algorithm step.  See docs/algorithms.md. */
#define NX_XSTEP_CREDIT UINT32_MAX

#define NX_XOP_DEFAULT_CHUNK (512u << 10)     /* bytes per message, roughly */
#define NX_XOP_DEFAULT_WINDOW 4u              /* pieces in flight */
#define NX_XOP_DEFAULT_INFLIGHT (32u << 20)   /* unacknowledged bytes sent */

struct nx_xop;

struct nx_xop_desc {
    uint8_t kind;  /* enum nx_kind (shm_abi.h): every collective kind but split */
    uint8_t dtype; /* nexar_dtype_t; ignored for barrier */
    uint8_t redop; /* nexar_op_t where the kind reduces */
    uint8_t algo;  /* enum nx_algo; AUTO chooses */
    uint64_t count;     /* elements per block (the API's count) */
    uint32_t root;      /* root RANK for kinds with a root (its node is rank_node[root]) */
    uint32_t nnodes;    /* nodes taking part, >= 1 */
    uint32_t me;        /* this node's index, < nnodes */
    uint32_t nranks;    /* ranks of the communicator, >= nnodes */
    const uint32_t *rank_node; /* nranks entries, each < nnodes, every node has a rank;
                                  copied by nx_xop_create */
    void *in, *out;     /* node-level buffers, layouts above; NULL where none */
    uint64_t stride;    /* elements from one block's start to the next in in and out; 0:
                           count (back to back).  A part of an op on a rank's own direct
                           buffers sees its blocks the op's count apart. */
    const struct nx_adapter *ad;
    uint64_t chunk_bytes;  /* pipeline: bytes per message, roughly; 0: default */
    uint32_t window;       /* pieces in flight per node; 0: default */
    uint64_t max_inflight; /* bytes sent but not yet acknowledged; 0: default */
    const char *what;      /* prefix of error texts ("all_reduce seq 4 on comm 2 (job
                              \"x\")"); copied; NULL: net.what, else the kind's name */
    uint32_t sig;          /* the signature carried and checked; 0: nx_xop_sig() of this
                              descriptor.  An op cut into several xops passes the sig of
                              the whole op, so that a different total count shows. */
    int iov_send;          /* nonzero: messages go to the net as an iov of the node-level
                              buffers (host memory, copied by the net before send
                              returns) instead of one staged copy */
    bool gate;             /* this node sends a node nothing before that node said it
                              started the xop (a credit at offset 0, which it sends to the
                              nodes that send to it): nothing then arrives before the xop
                              exists.  Every node of the xop must agree on it. */
};

/* One DATA message for the glue to put on the wire (proto/wire.h: the glue adds job,
 * comm, seq and src; step, sig, offset and length come from here). */
struct nx_xmsg {
    uint32_t dst;      /* node index */
    uint32_t step;     /* algorithm step, or NX_XSTEP_CREDIT */
    uint32_t sig;      /* nx_xop_sig() of the op */
    uint64_t offset;   /* byte offset of the piece in one block (credit: see above) */
    const void *data;  /* host memory, valid during the call only (NULL with iov) */
    size_t len;        /* payload bytes in all */
    const struct iovec *iov; /* desc.iov_send: the payload, iovcnt pieces of len in all */
    int iovcnt;
    uint32_t token;    /* nonzero: report nx_xop_on_sent(token) when acknowledged */
    /* With iov: the net may lend it (send returns 1), reading it after send returns until
     * nx_xop_on_copied(token).  The xop writes none of it meanwhile. */
    bool lend;
};

struct nx_xnet {
    void *arg;
    /* The largest message the network carries, bytes (the transport's NX_TMSG_MAX); 0:
     * no limit.  An xop whose plan needs a bigger one is refused at creation. */
    uint32_t msg_max;
    /* Queues one message.  0 (1: lent, see nx_xmsg.lend), or a negative errno: the xop
     * then fails with
     * NEXAR_ERR_PEER_LOST (-ENOTCONN: the peer node is lost), NEXAR_ERR_UNAVAILABLE
     * (-ESHUTDOWN: this node's daemon is stopping) or NEXAR_ERR_INTERNAL.  Must not call
     * back into the xop. */
    int (*send)(void *arg, struct nx_xop *x, const struct nx_xmsg *m);
    /* The xop ended: status is a nexar_status_t; text says why (which node, which
     * step) when status != 0, NULL otherwise.  Called once, never from inside
     * nx_xop_create or nx_xop_destroy.  The callee may call nx_xop_destroy(x). */
    void (*done)(void *arg, struct nx_xop *x, uint32_t status, const char *text);
    /* Optional: names the op for an error text, in place of desc.what.  Called only when
     * a text is written, so a caller whose name costs a format pays nothing per op. */
    void (*what)(void *arg, char *buf, size_t len);
    /* Nonzero: a message of iov (desc.iov_send) of this many bytes or more may be lent
     * (nx_xmsg.lend), for a net that copies on a thread of its own; below, the hand-off
     * back costs more than the copy.  0: the net never lends. */
    size_t lend_min;
    /* With lending: returns once every lent message is copied, for an xop that fails or
     * goes with some still lent (its buffers are then given back). */
    void (*settle)(void *arg);
    /* Optional: from inside nx_xop_on_data, the buffer the payload lies in, which the
     * xop then keeps (and free()s) instead of copying what it must keep; NULL: none. */
    void *(*take)(void *arg, const void *data, size_t len);
};

/* Creates an xop (idle until nx_xop_start).  0 and *out, or -EINVAL with a reason in
 * err (bad geometry, unsupported kind/algorithm pair, sizes that overflow).  desc and
 * net are copied; desc->rank_node too. */
int nx_xop_create(const struct nx_xop_desc *desc, const struct nx_xnet *net,
                  struct nx_xop **out, char *err, size_t errlen);

/* Starts sending.  Messages may be fed before start: they are validated and kept. */
void nx_xop_start(struct nx_xop *x);

/*
 * A DATA message for this xop from node src (the glue matched job, comm and seq).
 * Validated against the xop's geometry before anything is used: sig (a difference fails
 * the op with NEXAR_ERR_MISMATCH), src, step, offset, length, the flow-control window
 * and duplicates; a violation fails the op with NEXAR_ERR_INTERNAL and a text naming the
 * node.  data is only read during the call.  Ignored after the xop ended.
 */
void nx_xop_on_data(struct nx_xop *x, uint32_t src, uint32_t step, uint32_t sig,
                    uint64_t offset, const void *data, size_t len);

/*
 * A DATA message taken as it arrives (the transport's streamed receives) rather than
 * whole.  nx_xop_stream_begin: whether it can go straight into its step now: the piece
 * waits in that step for it, none of the step's messages is lent, and src, sig, offset
 * and len agree with the xop.  If not, the caller lets it come whole (nx_xop_on_data),
 * which judges it.  If so, nx_xop_stream_data takes its len payload bytes in order, in
 * pieces of any size (valid during the call), and the receive counts once the last came.
 * nx_xop_stream_broken: the rest will not come (the connection closed): the step waits,
 * and the same message coming again fails the op, since part of it is in already.
 * The xnet's adapter must be the host's (no streams); elsewhere begin says no.
 */
struct nx_xstream {
    uint64_t piece, len, got; /* got: bytes applied; carry holds up to an element more */
    uint32_t src, step;
    uint32_t ncarry;
    union {
        uint8_t b[16];
        uint64_t align;
    } carry; /* an element cut between two pieces */
};
bool nx_xop_stream_begin(struct nx_xop *x, uint32_t src, uint32_t step, uint32_t sig,
                         uint64_t offset, size_t len, struct nx_xstream *s);
void nx_xop_stream_data(struct nx_xop *x, struct nx_xstream *s, const void *data, size_t n);
void nx_xop_stream_broken(struct nx_xop *x, const struct nx_xstream *s);

/* The message sent with token was acknowledged.  Unknown tokens are ignored. */
void nx_xop_on_sent(struct nx_xop *x, uint32_t token);

/* The net copied the message lent with token.  Unknown tokens are ignored. */
void nx_xop_on_copied(struct nx_xop *x, uint32_t token);

/* Ends the xop now with status (e.g. NEXAR_ERR_PEER_LOST, NEXAR_ERR_TIMEOUT) and text,
 * unless it already ended. */
void nx_xop_abort(struct nx_xop *x, uint32_t status, const char *text);

/* Frees the xop; safe from inside the done callback.  NULL is a no-op.  Once it returns
 * the net reads none of the xop's buffers (net.settle). */
void nx_xop_destroy(struct nx_xop *x);

/* The op's signature hash, carried in every DATA message: kind, dtype, count, root and
 * reduce op (only the fields the kind uses). */
uint32_t nx_xop_sig(uint8_t kind, uint8_t dtype, uint64_t count, uint32_t root,
                    uint8_t redop);

/* The algorithm that runs ("ring"), for nexarctl ops and the bench. */
const char *nx_xop_algo_name(const struct nx_xop *x);

/* "piece 3/10 step 2/6: waiting for node 4" (or "done", "not started"), for nexarctl
 * ops and timeout texts. */
void nx_xop_describe(const struct nx_xop *x, char *buf, size_t len);

struct nx_xop_stats {
    uint64_t pieces, piece_elems;   /* the pipeline's geometry */
    uint32_t steps;                 /* steps per piece */
    uint64_t msgs_sent, bytes_sent, msgs_recv, bytes_recv, credits_sent;
    uint64_t early_msgs;            /* messages kept because they came early */
    uint64_t msgs_lent;             /* messages the net copied on a thread of its own */
    uint64_t msgs_streamed;         /* of msgs_recv, those taken as they arrived */
    uint64_t early_peak_bytes;      /* the most such bytes kept at once */
};
void nx_xop_stats(const struct nx_xop *x, struct nx_xop_stats *out);

/* The algorithm chosen for kind among nnodes nodes moving bytes per node (count x
 * element size x the blocks of the kind's larger buffer): ring for bandwidth, rd/hd or
 * tree for latency (thresholds in docs/algorithms.md). */
enum nx_algo nx_algo_choose(uint8_t kind, uint32_t nnodes, uint64_t bytes);

/* Whether algo is implemented for kind (AUTO always is). */
int nx_algo_supported(uint8_t kind, enum nx_algo algo);

/* "auto", "ring", "rd", "hd", "tree", "pairwise", "dissemination", "hillis-steele". */
const char *nx_algo_name(enum nx_algo algo);

/* The inverse of nx_algo_name; -1 when unknown. */
int nx_algo_parse(const char *name);

/*
 * Algorithm choices per kind, as NEXAR_ALGO and the `algo` setting give them:
 * "kind=algo[,kind=algo...]" with nx_kind_name's kinds ("all_reduce", "broadcast", ...)
 * and nx_algo_name's algorithms; a kind not named is chosen automatically.  Fills
 * pref[kind] (NX_ALGO_AUTO where not named); 0, or -EINVAL with the reason in err (an
 * unknown kind or algorithm, an algorithm the kind does not have, a kind named twice).
 * NULL or "" gives all automatic.
 */
int nx_algo_pref_parse(const char *s, uint8_t pref[NX_K_MAX + 1], char *err, size_t errlen);
/* The inverse: "kind=algo,..." of the kinds not automatic; "" when all are. */
void nx_algo_pref_format(const uint8_t pref[NX_K_MAX + 1], char *buf, size_t len);

#endif /* NX_ALGO_H */
