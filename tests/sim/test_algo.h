/*
 * test_algo.h - what the xop tests share (test_algo_ref.c): a test case (one op among N
 * simulated nodes), its node-level buffers filled from a seed, and the check of every
 * node's result against a reference computed here, directly from the inputs.
 *
 * The reference is independent of daemon/algo*.c and daemon/adapter/reduce.c: arithmetic from
 * tests/lib/refnum.c (half conversions written from scratch) and plain loops.  Where
 * the documented cross-node order fixes a float result (ring, rd/hd, tree, chain; see
 * docs/algorithms.md), the reference folds in that order, rounding to the dtype at every
 * hop, and the check is bit for bit.  Scan floats: exact for integer-valued inputs,
 * within a stated tolerance of a double-precision prefix for random ones.
 */
#ifndef TEST_ALGO_H
#define TEST_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algo.h"

#define TA_MAXN 16
#define TA_MAXR 64

enum ta_vals {
    TA_EXACT,  /* integer-valued floats (sums, products exact in every order) */
    TA_RANDOM, /* random values: order-aware reference, bit for bit */
    TA_NAN,    /* all_reduce with NaNs of different payloads: same bits everywhere */
};

struct ta_case {
    uint8_t kind, dtype, redop, algo;
    uint64_t count;
    uint32_t nnodes, nranks, root;
    uint32_t rank_node[TA_MAXR];
    uint64_t chunk_bytes, max_inflight;
    uint32_t window;
    uint8_t vals;     /* enum ta_vals */
    uint8_t inplace;  /* in == out where the kind allows */
    uint8_t iov_send; /* messages as an iov of the buffers (desc.iov_send) */
    uint64_t seed;
};

struct ta_bufs {
    uint8_t *in[TA_MAXN], *out[TA_MAXN], *in0[TA_MAXN]; /* in0: pristine copy of in */
    size_t in_bytes[TA_MAXN], out_bytes[TA_MAXN];
};

/* xorshift over a caller's state */
uint64_t ta_rand(uint64_t *s);

/* A random placement of nranks ranks on nnodes nodes (every node one at least);
 * contiguous or shuffled. */
void ta_place(struct ta_case *c, uint32_t nranks, bool shuffle, uint64_t *rng);

/* Allocates and fills the buffers of c. */
void ta_setup(const struct ta_case *c, struct ta_bufs *b);
void ta_free(struct ta_bufs *b);

/* The descriptor of node n for c. */
void ta_desc(const struct ta_case *c, struct ta_bufs *b, uint32_t n, struct nx_xop_desc *d);

/* Checks every node's output; piece_elems as the xops reported.  0, or -1 with why. */
int ta_check(const struct ta_case *c, const struct ta_bufs *b, uint64_t piece_elems,
             char *why, size_t len);

/* "all_reduce ring f32 sum count=7 N=3 P=5 seed=..." */
void ta_name(const struct ta_case *c, char *buf, size_t len);

/* Whether the case makes sense (op valid for dtype and kind). */
bool ta_kind_reduces(uint8_t kind);

#endif

/* ---- the message pump (test_algo_pump.c) ------------------------------------------------
 * N xops in one process.  Sent messages queue per (src, dst) and are delivered one at a
 * time in a seeded random order across pairs, FIFO within a pair (or in any order with
 * chaos); a delivered message with a token queues its acknowledgement, which is delivered
 * at a random later time.  Nodes start at random moments, so messages reach xops that
 * have not started. */
struct ta_pump;

struct ta_pump_opts {
    uint64_t seed;
    bool chaos;    /* any message of a pair, not only the oldest */
    bool misalign; /* hand payloads over at odd addresses */
    /* Called for each message before delivery; return false to drop it (tests that
     * forge or alter messages).  May change *m's fields. */
    bool (*filter)(void *arg, struct nx_xmsg *m, uint32_t *src, uint8_t *data);
    void *filter_arg;
    /* > 0: abort when a node has more unacknowledged bytes than this (one message alone
     * may exceed it), to hold the xops to their max_inflight */
    uint64_t inflight_limit;
    /* The net lends (nx_xnet.lend_min 1): a message of iov is read when the pump copies
     * it, a step of its own at a random time, which fails the test if the bytes changed
     * since the send. */
    bool lend;
    /* Each payload in a buffer of its own that the xop may take (net.take); one it does
     * not take is overwritten and freed after the call. */
    bool take;
    /* Half the messages are offered streamed (nx_xop_stream_begin); one the xop takes goes
     * in pieces of 1 byte to 3000, each from a buffer of its own at a random alignment
     * (overwritten and freed after), with the pump's other events between them. */
    bool stream;
};

struct ta_pump *ta_pump_new(uint32_t nnodes, const struct ta_pump_opts *o);
/* The xop of node n (the pump takes it over; created by the caller). */
void ta_pump_set(struct ta_pump *p, uint32_t n, struct nx_xop *x);
struct nx_xnet ta_pump_net(struct ta_pump *p, uint32_t n);
/* Runs until every node is done or nothing can move.  Returns how many nodes did not
 * finish (0: all did). */
int ta_pump_run(struct ta_pump *p);
/* Node n's end: status and text ("" when none); -1 when not done. */
int ta_pump_status(const struct ta_pump *p, uint32_t n, const char **text);
uint64_t ta_pump_msgs(const struct ta_pump *p);
/* Destroys the xops and frees everything. */
void ta_pump_free(struct ta_pump *p);
