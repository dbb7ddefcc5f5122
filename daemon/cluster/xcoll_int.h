/*
 * xcoll_int.h - what the files of cluster/xcoll share: an op's parts and run, and the
 * functions one file calls in another.  xcoll.c runs the parts (their lifecycle, the
 * matcher's side), xcoll_sig.c says what an op is across nodes (signatures, offsets,
 * texts, mismatches), xcoll_net.c takes the other nodes' messages.
 */
#ifndef NX_XCOLL_INT_H
#define NX_XCOLL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "coll_local.h"
#include "wire.h"

struct nx_comm;
struct nx_devstage;
struct nx_op;
struct nx_xop;

#define ID_LIMIT (1u << 29) /* a part's id fills token bits 32..60 */

/* A DATA message that came before its part started here. */
struct nx_xheld {
    TAILQ_ENTRY(nx_xheld) link;
    struct nx_data_hdr h;
    uint32_t src; /* comm node */
    uint8_t ci;   /* which of the communicator's collective channels it came on */
    size_t len;
    const uint8_t *data; /* the payload: in buf, or in inl */
    void *buf;           /* the transport's buffer it came in, taken (free()); NULL: inl */
    uint8_t inl[];
};

/* One part of an op: one xop over node-level buffers. */
struct xpart {
    struct nx_op *op;
    uint64_t index, n; /* part k; elements per block */
    uint32_t id;       /* for transport tokens */
    struct nx_xop *x;
    uint8_t *in, *out;
    bool out_is_in;
    bool in_place; /* in and out are the one local rank's own regions */
    struct nx_rank_io *io; /* per local rank: its chunk's buffers */
    uint64_t *user_data;   /* per local rank: its staged chunk's descriptor */
    bool *staged;
    struct nx_devstage *dev; /* device op: its host staging (devstage.h) */
    bool ended;
    uint32_t status;
    char *text;
    bool text_whole; /* names the node itself: no legend of the others */
    LIST_ENTRY(xpart) op_link;
    LIST_ENTRY(xpart) id_link;
    TAILQ_ENTRY(xpart) q_link;
    bool queued;
};

struct nx_xrun {
    uint64_t done;  /* parts ended well */
    uint32_t live;  /* parts with an xop */
    uint32_t sig;   /* of the whole op, carried by every message */
    bool failed;
    const char *algo;
    LIST_HEAD(, xpart) parts;
    /* Kinds where a node may finish without hearing from every other (needs_confirm):
     * the op ends only when every node said it ran the same op. */
    bool confirm_sent;
    uint32_t confirms;  /* nodes heard from */
    /* Per comm node, a bit per collective channel (1 << ci) that brought its confirmation
     * or device note: a confirmation comes once, a note on every channel (send_note). */
    uint8_t *confirmed;
    bool dev_agreed;    /* device op: every node's ranks called it on device buffers */
    bool dev_completed; /* device op: its ranks' parts completed */
};

/* ---- xcoll.c ------------------------------------------------------------------------ */

/* Calls into the module nest: the outermost xc_leave handles the parts that ended. */
void xc_enter(void);
void xc_leave(void);
/* The live part with this id, or NULL. */
struct xpart *xc_part_by_id(uint32_t id);
/* Node `node` confirmed op (NX_XSTEP_CONFIRM) or sent its device note, on collective
 * channel ci; only its first such message counts the node. */
void xc_confirmed_by(struct nx_op *op, uint32_t node, unsigned ci);
/* From inside nx_xcoll_on_data (the transport's message) or feed_held (a held one): the
 * buffer data lies in, the caller's from then on (free()), so that what must be kept is
 * not copied; NULL: copy it.  Only once per message. */
void *xc_take(const void *data, size_t len);
/* The held message feed_held hands an xop now (NULL after). */
void xc_feeding_held(struct nx_xheld *h);
/* Frees a held message and what it holds. */
void xc_held_free(struct nx_xheld *h);
/* Frees what c holds for seq (all: for every op). */
void xc_drop_held(struct nx_comm *c, bool all, uint64_t seq);

/* ---- xcoll_sig.c -------------------------------------------------------------------- */

uint32_t xc_esize(const struct nx_op *op);
bool xc_is_dev(const struct nx_op *op);
uint32_t xc_wire_esize(const struct nx_op *op);
uint64_t xc_part_base(const struct nx_op *op, uint64_t k);
uint64_t xc_part_of(const struct nx_op *op, uint64_t offset);
bool xc_needs_confirm(uint8_t kind);
bool xc_op_confirms(const struct nx_op *op);
void xc_sig_put(const struct nx_op *op, struct nx_data_hdr *h);
bool xc_sig_same(const struct nx_op *op, const struct nx_data_hdr *h);
uint32_t xc_op_sig(const struct nx_op *op);
void xc_what_of(const struct nx_op *op, uint64_t k, char *buf, size_t len);
void xc_legend(const struct nx_comm *c, char *buf, size_t len);
void xc_mismatch(struct nx_comm *c, struct nx_op *op, uint32_t node,
                 const struct nx_data_hdr *h);
bool xc_dev_agrees(const struct nx_op *op, uint32_t node, bool note, unsigned ci);
void xc_mismatch_dev(struct nx_comm *c, struct nx_op *op, uint32_t node);

#endif
