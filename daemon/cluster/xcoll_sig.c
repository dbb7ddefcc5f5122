/* xcoll_sig.c - an op across nodes as the nodes see it: its element sizes and part
 * offsets on the wire, its signature, its name in texts, and the mismatches between
 * what nodes called (xcoll_int.h). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "nexar.h"
#include "op.h"
#include "xcoll.h"
#include "xcoll_int.h"
#include "xcomm.h"
#include "xlocal.h"

uint32_t xc_esize(const struct nx_op *op)
{
    uint32_t es = nx_dtype_size(op->sig.dtype);
    return es ? es : 1; /* barrier */
}

bool xc_is_dev(const struct nx_op *op)
{
    return (op->sig.flags & NX_SQE_DEVICE) != 0;
}

/* Element size on the wire: f32 for half-type reductions (xlocal.h). */
uint32_t xc_wire_esize(const struct nx_op *op)
{
    return nx_xlocal_wide(op->sig.kind, op->sig.dtype) ? 4 : xc_esize(op);
}

/* Byte offset of part k within a block; an op of one part adds nothing (its chunk size
 * may be "unbounded" for kinds without data). */
uint64_t xc_part_base(const struct nx_op *op, uint64_t k)
{
    return op->nchunks > 1 ? k * op->chunk_elems * xc_wire_esize(op) : 0;
}

uint64_t xc_part_of(const struct nx_op *op, uint64_t offset)
{
    return op->nchunks > 1 ? offset / (op->chunk_elems * xc_wire_esize(op)) : 0;
}

/* A node's part of these may end without a message from every other node (a broadcast's
 * root only sends, a reduce leaf hears nothing back, a scan's first node only sends): a
 * node that called something else would be found only by the others.  So the nodes
 * confirm the op to each other before it ends anywhere. */
bool xc_needs_confirm(uint8_t kind)
{
    switch (kind) {
    case NX_K_BROADCAST:
    case NX_K_REDUCE:
    case NX_K_GATHER:
    case NX_K_SCATTER:
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        return true;
    default:
        return false;
    }
}

/* A device op's nodes agreed on it before any data moved (dev_run): no confirmation. */
bool xc_op_confirms(const struct nx_op *op)
{
    return xc_needs_confirm(op->sig.kind) && !xc_is_dev(op);
}

/* The op's signature as DATA headers carry it in full. */
void xc_sig_put(const struct nx_op *op, struct nx_data_hdr *h)
{
    const struct nx_sqe *e = &op->sig;
    h->kind = e->kind;
    h->dtype = e->kind == NX_K_BARRIER ? 0 : e->dtype;
    h->redop = nx_kind_has_redop(e->kind) ? e->redop : 0;
    h->root = nx_kind_has_root(e->kind) ? e->peer : 0;
    h->count = e->kind == NX_K_BARRIER ? 0 : e->count;
}

bool xc_sig_same(const struct nx_op *op, const struct nx_data_hdr *h)
{
    struct nx_data_hdr mine;
    xc_sig_put(op, &mine);
    return mine.kind == h->kind && mine.dtype == h->dtype && mine.redop == h->redop &&
           mine.root == h->root && mine.count == h->count;
}

uint32_t xc_op_sig(const struct nx_op *op)
{
    const struct nx_sqe *e = &op->sig;
    return nx_xop_sig(e->kind, e->dtype, e->count, nx_kind_has_root(e->kind) ? e->peer : 0,
                      e->redop);
}

void xc_what_of(const struct nx_op *op, uint64_t k, char *buf, size_t len)
{
    const struct nx_comm *c = op->comm;
    int n = snprintf(buf, len, "%s seq %" PRIu64 " on comm %u (job \"%s\")",
                     nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name);
    if (op->nchunks > 1 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - n, " part %" PRIu64 "/%" PRIu64, k + 1, op->nchunks);
}

/* Whom "node i" means in an xop's text: " (127.0.0.1:7001, ranks 2-3)" with one other
 * node, " (node 1: 127.0.0.1:7001, ranks 2-3; node 2: ...)" with more. */
void xc_legend(const struct nx_comm *c, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, " (");
    bool one = c->x->nnodes == 2;
    for (uint32_t i = 0; i < c->x->nnodes && off + 2 < len; i++) {
        if (i == c->x->me)
            continue;
        if (off > 2)
            off += (size_t)snprintf(buf + off, len - off, "; ");
        if (!one && off < len)
            off += (size_t)snprintf(buf + off, len - off, "node %u: ", i);
        if (off < len)
            nx_xcomm_node_where(c, i, buf + off, len - off);
        off += strlen(buf + off);
    }
    if (off + 2 < len)
        snprintf(buf + off, len - off, ")");
}

/* Another node called something else at op's sequence: both signatures, both nodes. */
void xc_mismatch(struct nx_comm *c, struct nx_op *op, uint32_t node,
                     const struct nx_data_hdr *h)
{
    char ours[160], theirs[160], who[160], me[160];
    struct nx_sqe e = {.kind = h->kind, .dtype = h->dtype, .redop = h->redop,
                       .peer = h->root, .count = h->count};
    nx_sig_format(&op->sig, ours, sizeof(ours));
    if (h->kind >= NX_K_ALL_REDUCE && h->kind <= NX_K_BARRIER)
        nx_sig_format(&e, theirs, sizeof(theirs));
    else
        snprintf(theirs, sizeof(theirs), "an op of kind %u", h->kind);
    nx_xcomm_node_name(c, node, who, sizeof(who));
    nx_xcomm_node_name(c, c->x->me, me, sizeof(me));
    nxd.stats.mismatches++;
    nx_comm_fail(c, NEXAR_ERR_MISMATCH,
                 "%s seq %" PRIu64 " on comm %u (job \"%s\"): %s called %s but %s called %s",
                 nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, who, theirs, me,
                 ours);
}

/* The lowest rank of the communicator on its node `node`. */
static uint32_t first_rank_on(const struct nx_comm *c, uint32_t node)
{
    uint32_t P = nx_comm_span_size(c);
    for (uint32_t r = 0; r < P; r++)
        if (c->x->rank_node[r] == node)
            return r;
    return 0;
}

/* Whether a message from node on collective channel ci (a device note, or not) fits op:
 * a device note only a device op; anything else a host op, or a device op once that
 * node's note came on channel ci.  A node sends its note on every channel before any of
 * its data (send_note, dev_run), and the transport keeps each channel in order, so the
 * note on a data message's own channel always came first, however the channels overtake
 * each other; a note on another channel proves nothing about this one.  Held messages
 * keep their arrival order and channel, so the same holds when they are replayed. */
bool xc_dev_agrees(const struct nx_op *op, uint32_t node, bool note, unsigned ci)
{
    return note ? xc_is_dev(op) : !xc_is_dev(op) || (op->xr->confirmed[node] >> ci & 1);
}

/* Node `node` called op on host buffers where this node's ranks called it on device
 * buffers, or the other way round.  The text is the same whichever node sees it first:
 * the device side first, each node by its first rank. */
void xc_mismatch_dev(struct nx_comm *c, struct nx_op *op, uint32_t node)
{
    uint32_t dn = xc_is_dev(op) ? c->x->me : node, hn = xc_is_dev(op) ? node : c->x->me;
    struct nx_sqe ds = op->sig, hs = op->sig;
    ds.flags |= NX_SQE_DEVICE;
    hs.flags &= (uint8_t)~NX_SQE_DEVICE;
    char dsig[160], hsig[160], dw[256], hw[256];
    nx_sig_format(&ds, dsig, sizeof(dsig));
    nx_sig_format(&hs, hsig, sizeof(hsig));
    nx_xcomm_node_name(c, dn, dw, sizeof(dw));
    nx_xcomm_node_name(c, hn, hw, sizeof(hw));
    nxd.stats.mismatches++;
    nx_comm_fail(c, NEXAR_ERR_MISMATCH,
                 "%s seq %" PRIu64 " on comm %u (job \"%s\"): rank %u on %s called %s but "
                 "rank %u on %s called %s: one op takes device buffers on every rank or host "
                 "buffers on every rank",
                 nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name,
                 first_rank_on(c, dn), dw, dsig, first_rank_on(c, hn), hw, hsig);
}
