/*
 * algo_int.h - what the algorithm files share with the xop engine (algo.c, algo_run.c).
 *
 * An algorithm is a schedule: for piece p and step s it lists the messages each node
 * sends (to whom, which buffer regions, concatenated) and receives (from whom, into which
 * regions, copied or reduced).  The engine runs the schedule for every piece of the
 * pipeline, keeps early messages, validates what arrives against the same schedule,
 * and does the flow control; the algorithms never see a message.
 *
 * Rules a schedule keeps (the engine relies on them):
 *  - at most one send per destination and one receive per source in a step (bundle);
 *  - the sender's regions and the receiver's regions of one message have the same total
 *    length, computed from geometry both sides know;
 *  - a step's sends read the values from before the step's receives are applied;
 *  - every piece has the same pattern of peers (only lengths differ), so the flow-control
 *    neighbours can be found from piece 0.
 */
#ifndef NX_ALGO_INT_H
#define NX_ALGO_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "algo.h"
#include "nexar.h"

enum nx_xbuf { XB_IN, XB_OUT, XB_SCR };

enum nx_xact {
    XA_COPY,         /* region = payload */
    XA_REDUCE,       /* region = region op payload */
    XA_REDUCE_FIRST, /* region = payload op region (the payload is the lower operand) */
};

struct nx_xreg {
    uint8_t buf;  /* enum nx_xbuf */
    uint8_t act;  /* receives: enum nx_xact */
    uint8_t keep; /* receives: the next region reads the same payload bytes again */
    uint64_t off, n; /* elements from the buffer's base (XB_SCR: the piece's scratch) */
};

struct nx_xfer {
    uint32_t peer;
    uint32_t reg0, nreg; /* regions [reg0, reg0 + nreg) of the plan */
    uint64_t bytes;      /* payload length */
    bool done;           /* receive consumed (engine's bookkeeping) */
    bool streamed;       /* receive: its message is going in as it arrives (algo_stream.c) */
    bool torn;           /* and that broke off: the step waits, and a second copy fails */
};

/* Most steps send to and receive from a node or two, in a few regions: those fit in the
 * plan itself, so that a small op does not allocate and free its plans' arrays. */
#define NX_XPLAN_INL_XFERS 2
#define NX_XPLAN_INL_REGS 4

struct nx_xplan {
    struct nx_xfer *send, *recv; /* send_inl / recv_inl until they outgrow them */
    uint32_t nsend, nrecv;
    size_t cap_send, cap_recv;
    struct nx_xreg *reg; /* reg_inl, likewise */
    uint32_t nreg;
    size_t cap_reg;
    struct nx_xfer *cur; /* the transfer regions are being added to */
    struct nx_xfer send_inl[NX_XPLAN_INL_XFERS], recv_inl[NX_XPLAN_INL_XFERS];
    struct nx_xreg reg_inl[NX_XPLAN_INL_REGS];
};

/* One piece of the pipeline: elements [e0, e0 + n) of every block. */
struct nx_xpiece {
    uint64_t idx, e0, n;
    uint8_t *scr; /* scratch of the algorithm's scratch_elems(n) elements, or NULL */
};

struct nx_xalgo {
    const char *name;
    /* Sets x->nsteps, x->piece_elems (from x->chunk_elems) and x->scratch_elems, and any
     * private geometry (x->priv, freed with free()).  0, or -EINVAL with a reason. */
    int (*init)(struct nx_xop *x, char *err, size_t errlen);
    /* Fills pl (already cleared) with step s of piece pc. */
    void (*plan)(struct nx_xop *x, const struct nx_xpiece *pc, uint32_t s,
                 struct nx_xplan *pl);
    /* Local work before step 0 and after the last step of a piece; may be NULL.
     * 0 or a negative errno from the adapter. */
    int (*begin)(struct nx_xop *x, const struct nx_xpiece *pc);
    int (*end)(struct nx_xop *x, const struct nx_xpiece *pc);
};

/* A received message kept until its piece reaches its step. */
struct nx_xearly {
    struct nx_xearly *next;
    uint64_t piece;
    uint32_t step, src;
    size_t len;
    const uint8_t *data; /* in buf (the net's, taken: net.take), or in inl */
    void *buf;
    uint8_t inl[];
};

enum nx_xphase { XP_IDLE, XP_SEND, XP_RECV, XP_DONE };

struct nx_xslot {
    struct nx_xpiece pc;
    uint32_t step;
    uint8_t phase;   /* enum nx_xphase */
    uint32_t send_i; /* next send of plan */
    uint32_t recv_left;
    struct nx_xplan plan; /* of the current step */
    uint8_t *scr;         /* scratch_bytes, kept for the slot's next pieces */
    /* Messages of the current step the net still reads (lent, not yet copied): until
     * none is, the step receives nothing into its regions and does not end. */
    uint32_t lent;
};

struct nx_xinflight {
    uint32_t token;
    bool lent;      /* not yet copied: counted in its piece's slot */
    uint64_t piece;
    uint64_t bytes;
};

enum nx_xstate { XS_IDLE, XS_RUNNING, XS_DONE };

struct nx_xop {
    struct nx_xop_desc d; /* rank_node and what point at the copies below */
    struct nx_xnet net;
    const struct nx_xalgo *alg;
    uint8_t algo; /* enum nx_algo, resolved */
    uint32_t es;  /* element size */
    uint64_t bs;  /* block stride in in and out: d.stride, or d.count */
    uint32_t sig;
    uint32_t root_node;
    char *what;

    /* rank placement: the ranks of node n are nr_rank[nr_off[n] .. nr_off[n + 1]),
     * ascending; rank r is the lidx[r]-th of its node. */
    uint32_t *rank_node, *nr_off, *nr_rank, *lidx;
    void *geo;      /* the one block these, slots, credit and in_peers are carved from */
    bool *geo_from; /* scan_peers' scratch in it */
    uint32_t max_local; /* most ranks on one node */

    /* geometry, set by alg->init */
    uint32_t nsteps;
    uint64_t chunk_elems, piece_elems, npieces, scratch_elems;
    void *priv;

    /* pipeline */
    uint32_t window;
    uint64_t lo, credit_sent;      /* pieces [0, lo) done here; last lo announced */
    uint64_t *credit;              /* per node: pieces it has done (that we know of) */
    bool *started;                 /* per node: it said it started (d.gate) */
    uint32_t *in_peers, n_in;      /* nodes that send to us: they get our credits */
    struct nx_xslot *slots;        /* window entries; piece p is in slots[p % window] */
    struct nx_xearly *early;
    uint64_t early_bytes;

    /* sends */
    uint64_t max_inflight, inflight;
    struct nx_xinflight *infl;
    size_t ninfl, cap_infl;
    uint32_t next_token;
    uint8_t *stage, *tmp; /* host staging for one payload, and reduce-first scratch */
    size_t stage_cap, tmp_cap;
    struct nx_xplan vplan; /* validation of messages for later steps */

    /* lifecycle */
    uint8_t state;     /* enum nx_xstate */
    int depth;         /* public calls on the stack */
    bool destroy_req;  /* nx_xop_destroy inside a callback: free on the way out */
    uint32_t status;
    char *text;
    struct nx_xop_stats st;
};

/* ---- the engine (algo_run.c) ---------------------------------------------------- */

void nx_xrun_progress(struct nx_xop *x);
/* The slot piece p runs in; the receive of a plan from src (NULL: none). */
struct nx_xslot *nx_xrun_slot(struct nx_xop *x, uint64_t p);
struct nx_xfer *nx_xrun_recv_of(struct nx_xplan *pl, uint32_t src);
/* Streamed receives (algo_stream.c). */
bool nx_xrun_stream_begin(struct nx_xop *x, uint32_t src, uint32_t step, uint64_t offset,
                          size_t len, struct nx_xstream *s);
void nx_xrun_stream_data(struct nx_xop *x, struct nx_xstream *s, const uint8_t *d, size_t n);
void nx_xrun_stream_broken(struct nx_xop *x, const struct nx_xstream *s);
void nx_xrun_data(struct nx_xop *x, uint32_t src, uint32_t step, uint64_t offset,
                  const void *data, size_t len);
void nx_xrun_credit(struct nx_xop *x, uint32_t src, uint64_t done);
/* d.gate: tells the nodes that send to this one that it started (a credit at 0). */
void nx_xrun_say_started(struct nx_xop *x);
void nx_xrun_sent(struct nx_xop *x, uint32_t token);
void nx_xrun_copied(struct nx_xop *x, uint32_t token);
/* Waits until the net has copied every message the xop lent it (net.settle). */
void nx_xrun_settle(struct nx_xop *x);
void nx_xrun_free(struct nx_xop *x);

/* Ends the xop with status and a formatted text (prefixed with x->what). */
void nx_xop_fail(struct nx_xop *x, uint32_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The xop reduces f16/bf16 (the daemon's glue never gives it that: it reduces halves as f32
 * partials, xlocal.h).  Those kernels want two-byte sources and keep the payload of some
 * NaN operand (reduce.h). */
static inline bool nx_xop_half_reduce(const struct nx_xop *x)
{
    return (x->d.dtype == NEXAR_F16 || x->d.dtype == NEXAR_BF16) &&
           nx_kind_has_redop(x->d.kind);
}

/* A failed adapter op: NEXAR_ERR_INTERNAL naming the op and the adapter. */
void nx_xop_fail_adapter(struct nx_xop *x, const char *what, int rv);

/* ---- plan building (algo_plan.c) ------------------------------------------------------------- */

void nx_xplan_clear(struct nx_xplan *pl);
/* Frees what the plan allocated, leaving it unusable (the xop is going away). */
void nx_xplan_free(struct nx_xplan *pl);
/* Starts a transfer; the regions added next belong to it. */
void nx_xplan_send(struct nx_xplan *pl, uint32_t peer);
void nx_xplan_recv(struct nx_xplan *pl, uint32_t peer);
/* Adds a region of n elements (n == 0: nothing) to the current transfer. */
void nx_xplan_reg(struct nx_xop *x, struct nx_xplan *pl, uint8_t buf, uint64_t off,
                  uint64_t n, uint8_t act);
/* The same, and the next region reads the same payload bytes (receives only). */
void nx_xplan_reg_keep(struct nx_xop *x, struct nx_xplan *pl, uint8_t buf, uint64_t off,
                       uint64_t n, uint8_t act);
/* Regions of every block of node g's ranks (ascending rank), block stride count, elements
 * [e0, e0 + n) of each; the layout of P-block buffers. */
void nx_xplan_group(struct nx_xop *x, struct nx_xplan *pl, uint8_t buf, uint32_t g,
                    uint64_t e0, uint64_t n, uint8_t act);

/* ---- local data movement through the adapter (algo_plan.c) -------------------------------- */

/* dst = src, n elements, both node buffers or scratch.  0 or the adapter's error. */
int nx_xcopy(struct nx_xop *x, void *dst, const void *src, uint64_t n);
/* dst = src op dst: src is the lower operand (host memory). */
int nx_xreduce_first(struct nx_xop *x, void *dst, const void *src, uint64_t n);
/* begin hook of the in-place kinds: out = in over the piece (nothing when they alias). */
int nx_xbegin_copy(struct nx_xop *x, const struct nx_xpiece *pc);
/* begin hook of all_gather (algo_ring.c): this node's blocks into the P-block output. */
int nx_xag_begin(struct nx_xop *x, const struct nx_xpiece *pc);
/* end hook of reduce_scatter (algo_ring.c): this node's blocks from in to out. */
int nx_xrs_end(struct nx_xop *x, const struct nx_xpiece *pc);
/* Address of element off of a buffer (XB_SCR: of the piece's scratch). */
uint8_t *nx_xbuf_at(struct nx_xop *x, const struct nx_xpiece *pc, uint8_t buf, uint64_t off);

/* ---- geometry helpers ----------------------------------------------------------------- */

/* Start of part i of n elements split into k balanced parts (part sizes differ by <= 1). */
static inline uint64_t nx_xsplit(uint64_t n, uint32_t k, uint32_t i)
{
    return (uint64_t)(((unsigned __int128)n * i) / k);
}

static inline uint32_t nx_xmod(int64_t a, uint32_t n)
{
    int64_t m = a % (int64_t)n;
    return (uint32_t)(m < 0 ? m + n : m);
}

/* Position of node n in a tree or chain rooted at the root node, and back. */
static inline uint32_t nx_xvrank(const struct nx_xop *x, uint32_t n)
{
    return nx_xmod((int64_t)n - x->root_node, x->d.nnodes);
}
static inline uint32_t nx_xreal(const struct nx_xop *x, uint32_t v)
{
    return (uint32_t)(((uint64_t)v + x->root_node) % x->d.nnodes);
}

/* Ranks on node n. */
static inline uint32_t nx_xlocal(const struct nx_xop *x, uint32_t n)
{
    return x->nr_off[n + 1] - x->nr_off[n];
}

/* ceil(log2(n)) for n >= 1. */
static inline uint32_t nx_xlog2up(uint32_t n)
{
    uint32_t k = 0;
    while ((1ull << k) < n)
        k++;
    return k;
}

/* max(1, chunk / units) elements: pieces whose largest message is about one chunk. */
static inline uint64_t nx_xpiece_for(const struct nx_xop *x, uint64_t units)
{
    uint64_t pe = units ? x->chunk_elems / units : x->chunk_elems;
    return pe ? pe : 1;
}

/* ---- the algorithms ------------------------------------------------------------------- */

/* The schedule of (kind, algo), NULL when there is none (algo_choose.c). */
const struct nx_xalgo *nx_xalgo_lookup(uint8_t kind, enum nx_algo algo);

extern const struct nx_xalgo nx_xalgo_ring_allreduce, nx_xalgo_ring_reduce_scatter,
    nx_xalgo_ring_all_gather, nx_xalgo_chain_broadcast, nx_xalgo_chain_reduce,
    nx_xalgo_rd_allreduce, nx_xalgo_hd_allreduce, nx_xalgo_bruck_all_gather,
    nx_xalgo_hd_reduce_scatter,
    nx_xalgo_tree_broadcast, nx_xalgo_tree_reduce, nx_xalgo_tree_gather,
    nx_xalgo_tree_scatter, nx_xalgo_pairwise_a2a, nx_xalgo_dissemination,
    nx_xalgo_hillis_steele;

#endif /* NX_ALGO_INT_H */
