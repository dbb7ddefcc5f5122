/* xcoll.c - see xcoll.h. */
#include "xcoll.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "algo.h"
#include "client.h"
#include "cluster.h"
#include "comm.h"
#include "context.h"
#include "devop.h"
#include "job.h"
#include "log.h"
#include "op.h"
#include "mem.h"
#include "nexar.h"
#include "rendezvous.h"
#include "xcomm.h"
#include "devstage.h"
#include "xlocal.h"

#define ID_BUCKETS 256u
#define ID_LIMIT (1u << 29) /* a part's id fills token bits 32..60 */

/* A DATA message that came before its part started here. */
struct nx_xheld {
    TAILQ_ENTRY(nx_xheld) link;
    struct nx_data_hdr h;
    uint32_t src; /* comm node */
    size_t len;
    uint8_t data[];
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
    uint32_t confirms;
    uint8_t *confirmed; /* per comm node */
    bool dev_agreed;    /* device op: every node's ranks called it on device buffers */
};

static int depth;
static TAILQ_HEAD(, xpart) ended_q = TAILQ_HEAD_INITIALIZER(ended_q);
static LIST_HEAD(, xpart) by_id[ID_BUCKETS];
static uint32_t next_id = 1;

static void start_parts(struct nx_op *op);
static void complete_part(struct xpart *p);
static void dev_run(struct nx_op *op);
static void dev_complete(struct nx_op *op, uint32_t status, const char *text);
static void enter(void);
static void leave(void);

/* ---- helpers -------------------------------------------------------------------- */

static uint32_t esize(const struct nx_op *op)
{
    uint32_t es = nx_dtype_size(op->sig.dtype);
    return es ? es : 1; /* barrier */
}

static bool is_dev(const struct nx_op *op)
{
    return (op->sig.flags & NX_SQE_DEVICE) != 0;
}

/* Element size on the wire: f32 for half-type reductions (xlocal.h). */
static uint32_t wire_esize(const struct nx_op *op)
{
    return nx_xlocal_wide(op->sig.kind, op->sig.dtype) ? 4 : esize(op);
}

/* Byte offset of part k within a block; an op of one part adds nothing (its chunk size
 * may be "unbounded" for kinds without data). */
static uint64_t part_base(const struct nx_op *op, uint64_t k)
{
    return op->nchunks > 1 ? k * op->chunk_elems * wire_esize(op) : 0;
}

static uint64_t part_of(const struct nx_op *op, uint64_t offset)
{
    return op->nchunks > 1 ? offset / (op->chunk_elems * wire_esize(op)) : 0;
}

/* A node's part of these may end without a message from every other node (a broadcast's
 * root only sends, a reduce leaf hears nothing back, a scan's first node only sends): a
 * node that called something else would be found only by the others.  So the nodes
 * confirm the op to each other before it ends anywhere. */
static bool needs_confirm(uint8_t kind)
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
static bool op_confirms(const struct nx_op *op)
{
    return needs_confirm(op->sig.kind) && !is_dev(op);
}

/* The op's signature as DATA headers carry it in full. */
static void sig_put(const struct nx_op *op, struct nx_data_hdr *h)
{
    const struct nx_sqe *e = &op->sig;
    h->kind = e->kind;
    h->dtype = e->kind == NX_K_BARRIER ? 0 : e->dtype;
    h->redop = nx_kind_has_redop(e->kind) ? e->redop : 0;
    h->root = nx_kind_has_root(e->kind) ? e->peer : 0;
    h->count = e->kind == NX_K_BARRIER ? 0 : e->count;
}

static bool sig_same(const struct nx_op *op, const struct nx_data_hdr *h)
{
    struct nx_data_hdr mine;
    sig_put(op, &mine);
    return mine.kind == h->kind && mine.dtype == h->dtype && mine.redop == h->redop &&
           mine.root == h->root && mine.count == h->count;
}

static uint32_t op_sig(const struct nx_op *op)
{
    const struct nx_sqe *e = &op->sig;
    return nx_xop_sig(e->kind, e->dtype, e->count, nx_kind_has_root(e->kind) ? e->peer : 0,
                      e->redop);
}

static void what_of(const struct nx_op *op, uint64_t k, char *buf, size_t len)
{
    const struct nx_comm *c = op->comm;
    int n = snprintf(buf, len, "%s seq %" PRIu64 " on comm %u (job \"%s\")",
                     nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name);
    if (op->nchunks > 1 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - n, " part %" PRIu64 "/%" PRIu64, k + 1, op->nchunks);
}

/* Whom "node i" means in an xop's text: " (127.0.0.1:7001, ranks 2-3)" with one other
 * node, " (node 1: 127.0.0.1:7001, ranks 2-3; node 2: ...)" with more. */
static void legend(const struct nx_comm *c, char *buf, size_t len)
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

static void complete(struct nx_client *cl, uint64_t user_data, uint32_t status, const char *text,
                     uint32_t algo)
{
    struct nx_done d = {.user_data = user_data, .status = status, .algo = algo};
    nx_client_complete(cl, &d, text);
    cl->pending--;
}

/* ---- part lifecycle ----------------------------------------------------------------- */

static struct xpart *part_by_id(uint32_t id)
{
    struct xpart *p;
    LIST_FOREACH(p, &by_id[id % ID_BUCKETS], id_link)
        if (p->id == id)
            return p;
    return NULL;
}

static uint32_t new_id(void)
{
    for (;;) {
        uint32_t id = next_id++ % ID_LIMIT;
        if (id && !part_by_id(id))
            return id;
    }
}

static void part_free(struct xpart *p)
{
    if (p->queued)
        TAILQ_REMOVE(&ended_q, p, q_link);
    LIST_REMOVE(p, op_link);
    LIST_REMOVE(p, id_link);
    p->op->xr->live--;
    nx_xop_destroy(p->x);
    nx_devstage_release(p->dev);
    if (!p->in_place) {
        free(p->in);
        free(p->out);
    }
    free(p->io);
    free(p->user_data);
    free(p->staged);
    free(p->text);
    free(p);
}

/* An xop ended (or could not start): handled once the outermost call returns. */
static void part_ended(struct xpart *p, uint32_t status, const char *text)
{
    if (p->ended)
        return;
    p->ended = true;
    p->status = status;
    p->text = text ? nx_xstrdup(text) : NULL;
    if (status != NEXAR_OK)
        p->op->xr->failed = true; /* start nothing more of it */
    TAILQ_INSERT_TAIL(&ended_q, p, q_link);
    p->queued = true;
}

static int xop_send(void *arg, struct nx_xop *x, const struct nx_xmsg *m)
{
    struct xpart *p = arg;
    struct nx_op *op = p->op;
    struct nx_comm *c = op->comm;
    uint8_t hdr[NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES];
    struct nx_data_hdr h = {
        .job = c->job->net->key,
        .comm = c->x->key,
        .seq = op->seq,
        .step = m->step,
        .sig = m->sig,
        .offset = m->offset + part_base(op, p->index),
        .length = (uint32_t)m->len,
        .src = c->x->node_job[c->x->me],
    };
    sig_put(op, &h);
    size_t hl = nx_wire_put_data(hdr, NX_WIRE_DATA, 0, &h);
    struct iovec stack[9], *iov = stack;
    int n = 1 + (m->iov ? m->iovcnt : m->len > 0);
    if (n > 9)
        iov = nx_xcalloc((size_t)n, sizeof(*iov));
    iov[0] = (struct iovec){hdr, hl};
    if (m->iov)
        memcpy(iov + 1, m->iov, (size_t)m->iovcnt * sizeof(*iov));
    else if (m->len)
        iov[1] = (struct iovec){(void *)m->data, m->len};
    uint64_t token = m->token ? NX_TOKEN_XCOLL | (uint64_t)p->id << 32 | m->token : 0;
    int rv = nx_xcomm_send(c, m->dst, c->x->channel, iov, n, token);
    if (iov != stack)
        free(iov);
    return rv;
}

static void xop_what(void *arg, char *buf, size_t len)
{
    struct xpart *p = arg;
    what_of(p->op, p->index, buf, len);
}

static void xop_done(void *arg, struct nx_xop *x, uint32_t status, const char *text)
{
    part_ended(arg, status, text);
}

static void xlocal_of(const struct xpart *p, struct nx_xlocal *j)
{
    const struct nx_op *op = p->op;
    const struct nx_comm *c = op->comm;
    *j = (struct nx_xlocal){
        .kind = op->sig.kind,
        .dtype = op->sig.dtype,
        .redop = op->sig.redop,
        .P = nx_comm_span_size(c),
        .L = c->size,
        .n = p->n,
        .wide = nx_xlocal_wide(op->sig.kind, op->sig.dtype),
        .io = p->io,
        .in = p->in,
        .out = p->out_is_in ? p->in : p->out,
    };
    if (nx_kind_has_root(op->sig.kind)) {
        uint32_t root = op->sig.peer;
        j->root_here = c->x->rank_node[root] == c->x->me;
        for (uint32_t i = 0; i < c->size; i++)
            if (nx_comm_span_rank(c, i) == root)
                j->root_local = i;
    }
}

/* Node-level buffers, the local combine and the xop.  0, or -1 with the reason. */
static int part_setup(struct xpart *p, char *err, size_t errlen)
{
    struct nx_op *op = p->op;
    struct nx_comm *c = op->comm;
    struct nx_xlocal j;
    xlocal_of(p, &j);
    /* Node-level elements: f32 partials for half-type reductions. */
    uint8_t ndtype = j.wide ? NEXAR_F32 : op->sig.dtype;
    uint32_t es = wire_esize(op);
    bool staged = c->size == 1 && (p->staged[0] || p->dev); /* this part's own memory */
    if (p->n && nx_xlocal_in_place(&j, staged, &p->in, &p->out)) {
        p->in_place = true;
    } else {
        uint64_t in_n, out_n;
        nx_xlocal_sizes(&j, &in_n, &out_n, &p->out_is_in);
        p->in = in_n ? nx_xmalloc(in_n * es) : NULL;
        p->out = out_n ? nx_xmalloc(out_n * es) : NULL;
        xlocal_of(p, &j);
        if (nx_xlocal_gather(&nx_adapter_cpu, &j) < 0) {
            snprintf(err, errlen, "the node-local combine of its ranks failed");
            return -1;
        }
    }
    struct nx_xop_desc d = {
        .kind = op->sig.kind,
        .dtype = ndtype,
        .redop = op->sig.redop,
        .algo = c->job->algo_pref[op->sig.kind],
        .count = p->n,
        .root = nx_kind_has_root(op->sig.kind) ? op->sig.peer : 0,
        .nnodes = c->x->nnodes,
        .me = c->x->me,
        .nranks = nx_comm_span_size(c),
        .rank_node = c->x->rank_node,
        .in = p->in,
        .out = p->out_is_in ? p->in : p->out,
        .stride = p->in_place ? p->io[0].out_stride : 0,
        .ad = &nx_adapter_cpu,
        .sig = op->xr->sig,
        .iov_send = 1, /* host buffers; the transport copies as it sends */
    };
    struct nx_xnet net = {.arg = p, .msg_max = NX_TMSG_MAX, .send = xop_send, .done = xop_done,
                          .what = xop_what};
    char why[192];
    if (nx_xop_create(&d, &net, &p->x, why, sizeof(why)) < 0) {
        char what[192];
        what_of(op, p->index, what, sizeof(what));
        snprintf(err, errlen, "%s: %s", what, why);
        return -1;
    }
    /* What the op reports: its first part's choice (the others are as large, but for a
     * shorter last one). */
    if (p->index == 0) {
        op->xr->algo = nx_xop_algo_name(p->x);
        op->algo = (uint32_t)nx_algo_parse(op->xr->algo);
    }
    return 0;
}

/* The held messages of p's op that belong to p, in arrival order. */
static void feed_held(struct xpart *p)
{
    struct nx_op *op = p->op;
    struct nx_xcomm *x = op->comm->x;
    struct nx_xheld *h, *tmp;
    for (h = TAILQ_FIRST(&x->held); h; h = tmp) {
        tmp = TAILQ_NEXT(h, link);
        if (h->h.seq != op->seq || h->h.step == NX_XSTEP_CONFIRM ||
            h->h.step == NX_XSTEP_DEVICE || part_of(op, h->h.offset) != p->index)
            continue;
        TAILQ_REMOVE(&x->held, h, link);
        x->held_bytes -= h->len;
        x->held_msgs--;
        nx_xop_on_data(p->x, h->src, h->h.step, h->h.sig,
                       h->h.offset - part_base(op, p->index), h->data, h->len);
        free(h);
    }
}

/* The node-level buffers are built and the xop starts. */
static void part_run(struct xpart *p)
{
    char err[512];
    if (part_setup(p, err, sizeof(err)) < 0) {
        part_ended(p, NEXAR_ERR_INTERNAL, err);
        return;
    }
    feed_held(p);
    nx_xop_start(p->x);
}

/* A device backend's copy failed: the part ends with what failed, and where. */
static void part_dev_failed(struct xpart *p, const char *dir, uint32_t status, const char *text)
{
    char what[192], node[192], buf[800];
    struct nx_comm *c = p->op->comm;
    what_of(p->op, p->index, what, sizeof(what));
    nx_xcomm_node_name(c, c->x->me, node, sizeof(node));
    snprintf(buf, sizeof(buf), "%s: staging device buffers %s failed on %s: %s", what, dir,
             node, text ? text : nx_status_text(status));
    part_ended(p, status, buf);
    p->text_whole = true;
}

/* The part's device inputs are in host memory (devstage.h). */
static void part_dev_in(void *arg, uint32_t status, const char *text)
{
    struct xpart *p = arg;
    enter();
    if (status != NEXAR_OK)
        part_dev_failed(p, "in", status, text);
    else
        part_run(p);
    leave();
}

static void part_start(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    struct nx_xrun *xr = op->xr;
    uint64_t k = op->next_chunk++, off = k * op->chunk_elems;
    struct xpart *p = nx_xcalloc(1, sizeof(*p));
    p->op = op;
    p->index = k;
    p->n = op->sig.count > off ? op->sig.count - off : 0;
    if (p->n > op->chunk_elems)
        p->n = op->chunk_elems;
    p->id = new_id();
    p->io = nx_xcalloc(c->size, sizeof(*p->io));
    p->user_data = nx_xcalloc(c->size, sizeof(*p->user_data));
    p->staged = nx_xcalloc(c->size, sizeof(*p->staged));
    if (!is_dev(op)) /* a device part's io is its host staging (below) */
        nx_op_chunk_io(op, off, p->n, p->io);
    /* The staged chunks are the part's now: completed when it ends. */
    for (uint32_t r = 0; r < c->size && !is_dev(op); r++) {
        struct nx_part *rp = &op->parts[r];
        if (nx_part_direct(rp))
            continue;
        p->user_data[r] = rp->q[rp->q_head++].user_data;
        p->staged[r] = true;
    }
    LIST_INSERT_HEAD(&xr->parts, p, op_link);
    LIST_INSERT_HEAD(&by_id[p->id % ID_BUCKETS], p, id_link);
    xr->live++;
    op->started = nx_now();
    nxd.stats.chunks++;
    if (is_dev(op)) {
        char err[256], what[192], text[480];
        p->dev = nx_devstage_in(op, off, p->n, p->io, part_dev_in, p, err, sizeof(err));
        if (!p->dev) {
            what_of(op, k, what, sizeof(what));
            snprintf(text, sizeof(text), "%s: %s", what, err);
            part_ended(p, NEXAR_ERR_NOMEM, text);
        }
        return; /* the xop starts when the copies are in */
    }
    part_run(p);
}

/* Every other node of the communicator hears that this node ran the op to its end
 * (NX_XSTEP_CONFIRM), or that its ranks all called it on device buffers
 * (NX_XSTEP_DEVICE). */
static void send_note(struct nx_op *op, uint32_t step)
{
    struct nx_comm *c = op->comm;
    uint8_t hdr[NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES];
    struct nx_data_hdr h = {.job = c->job->net->key, .comm = c->x->key, .seq = op->seq,
                            .step = step, .sig = op->xr->sig,
                            .src = c->x->node_job[c->x->me]};
    sig_put(op, &h);
    struct iovec iov = {hdr, nx_wire_put_data(hdr, NX_WIRE_DATA, 0, &h)};
    /* A node lost on the way fails the job through the rendezvous. */
    for (uint32_t i = 0; i < c->x->nnodes; i++)
        if (i != c->x->me)
            nx_xcomm_send(c, i, c->x->channel, &iov, 1, 0);
}

/* Only the oldest ops of a communicator run: what other nodes may send ahead stays
 * bounded (XC_HELD_BYTES) whatever the ranks queue. */
static bool may_run(const struct nx_op *op)
{
    unsigned i = 0;
    const struct nx_op *it;
    TAILQ_FOREACH(it, &op->comm->match.ops, link) {
        if (it == op)
            return true;
        if (++i >= XC_OPS_PER_COMM)
            return false;
    }
    return false;
}

static void drop_held(struct nx_comm *c, bool all, uint64_t seq)
{
    struct nx_xcomm *x = c->x;
    struct nx_xheld *h, *tmp;
    for (h = TAILQ_FIRST(&x->held); h; h = tmp) {
        tmp = TAILQ_NEXT(h, link);
        if (!all && h->h.seq != seq)
            continue;
        TAILQ_REMOVE(&x->held, h, link);
        x->held_bytes -= h->len;
        x->held_msgs--;
        free(h);
    }
}

/* The ops behind a finished one may run now. */
static void kick(struct nx_comm *c)
{
    unsigned i = 0;
    struct nx_op *it;
    TAILQ_FOREACH(it, &c->match.ops, link) {
        if (i++ >= XC_OPS_PER_COMM)
            break;
        /* A newly allowed op has no part ending yet, so this never frees it. */
        if (it->xr && !it->xr->failed && (!is_dev(it) || it->xr->dev_agreed))
            start_parts(it);
    }
}

static void start_parts(struct nx_op *op)
{
    struct nx_xrun *xr = op->xr;
    if (is_dev(op) && !xr->dev_agreed)
        return dev_run(op);
    while (!xr->failed && op->next_chunk < op->nchunks && xr->live < XC_PARTS_PER_OP &&
           may_run(op) && (is_dev(op) || nx_op_chunk_ready(op)))
        part_start(op);
    if (xr->failed || xr->done < op->nchunks)
        return;
    struct nx_comm *c = op->comm;
    if (op_confirms(op)) {
        if (!xr->confirm_sent) {
            xr->confirm_sent = true;
            send_note(op, NX_XSTEP_CONFIRM);
        }
        if (xr->confirms + 1 < c->x->nnodes)
            return;
        if (!LIST_EMPTY(&xr->parts))
            complete_part(LIST_FIRST(&xr->parts)); /* the last one, kept for this */
    }
    if (nx_kind_has_redop(op->sig.kind))
        nxd.stats.bytes_reduced += op->sig.count * esize(op) * c->size;
    else
        nxd.stats.bytes_copied += op->sig.count * esize(op) * c->size;
    drop_held(c, false, op->seq); /* stale now */
    if (is_dev(op))
        dev_complete(op, NEXAR_OK, NULL);
    nx_op_finish(op);
    kick(c);
}

/* The part's staged chunks complete; the part goes. */
static void complete_part(struct xpart *p)
{
    struct nx_op *op = p->op;
    for (uint32_t r = 0; r < op->comm->size; r++)
        if (p->staged[r])
            complete(op->parts[r].client, p->user_data[r], NEXAR_OK, NULL, op->algo);
    part_free(p);
}

static void part_fail_text(struct xpart *p, char *buf, size_t len)
{
    char leg[512] = "";
    if (!p->text_whole)
        legend(p->op->comm, leg, sizeof(leg));
    snprintf(buf, len, "%s%s", p->text ? p->text : nx_status_text(p->status), leg);
}

static void part_done(struct xpart *p);
static void part_dev_out(void *arg, uint32_t status, const char *text);

static void handle_ended(struct xpart *p)
{
    struct nx_op *op = p->op;
    struct nx_comm *c = op->comm;
    if (p->status != NEXAR_OK) {
        char text[1024];
        part_fail_text(p, text, sizeof(text));
        if (p->status == NEXAR_ERR_MISMATCH)
            nxd.stats.mismatches++;
        nx_comm_fail(c, p->status, "%s", text); /* frees op, p with it */
        return;
    }
    if (!p->in_place) {
        struct nx_xlocal j;
        xlocal_of(p, &j);
        nx_xlocal_scatter(&nx_adapter_cpu, &j);
    }
    if (p->dev)
        return nx_devstage_out(p->dev, part_dev_out, p);
    part_done(p);
}

/* The part's outputs are back in the ranks' device buffers. */
static void part_dev_out(void *arg, uint32_t status, const char *text)
{
    struct xpart *p = arg;
    enter();
    if (status != NEXAR_OK) {
        p->ended = false; /* ended again, with the copy's failure */
        part_dev_failed(p, "out", status, text);
    } else {
        part_done(p);
    }
    leave();
}

/* The part ran to its end here and its results are in the ranks' buffers. */
static void part_done(struct xpart *p)
{
    struct nx_op *op = p->op;
    op->xr->done++;
    if (op_confirms(op) && op->xr->done == op->nchunks) {
        /* The ranks' last chunks complete once every node confirmed (start_parts). */
        nx_xop_destroy(p->x);
        p->x = NULL;
    } else {
        complete_part(p);
    }
    op->started = nx_now();
    start_parts(op);
}

static void enter(void)
{
    depth++;
}

/* The outermost return handles the ended parts, at depth 1 so that nothing it calls
 * drains again. */
static void leave(void)
{
    if (--depth > 0)
        return;
    depth++;
    struct xpart *p;
    while ((p = TAILQ_FIRST(&ended_q))) {
        TAILQ_REMOVE(&ended_q, p, q_link);
        p->queued = false;
        handle_ended(p);
    }
    depth--;
}

/* ---- the matcher's side ------------------------------------------------------------- */

/* Another node called something else at op's sequence: both signatures, both nodes. */
static void mismatch(struct nx_comm *c, struct nx_op *op, uint32_t node,
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

/* Whether a message from node (a device note, or not) fits op: a device note only a device
 * op; anything else a host op, or a device op once that node's note came (a node sends
 * its note before its data, on the same ordered channel). */
static bool dev_agrees(const struct nx_op *op, uint32_t node, bool note)
{
    return note ? is_dev(op) : !is_dev(op) || op->xr->confirmed[node];
}

/* Node `node` called op on host buffers where this node's ranks called it on device
 * buffers, or the other way round.  The text is the same whichever node sees it first:
 * the device side first, each node by its first rank. */
static void mismatch_dev(struct nx_comm *c, struct nx_op *op, uint32_t node)
{
    uint32_t dn = is_dev(op) ? c->x->me : node, hn = is_dev(op) ? node : c->x->me;
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

/* Every local rank's part of a device op completes (its done word, its completion). */
static void dev_complete(struct nx_op *op, uint32_t status, const char *text)
{
    for (uint32_t r = 0; r < op->comm->size; r++) {
        struct nx_part *p = &op->parts[r];
        if (p->dev && nx_dev_part_complete(p->dev, status, text))
            p->client->pending--;
    }
}

/*
 * A device op across nodes runs only once every node said that all its ranks called it on
 * device buffers (NX_XSTEP_DEVICE): a node whose ranks called it on host buffers fails
 * the communicator with a mismatch instead, and none waits for the deadline.  Its parts
 * then stage through host memory (devstage.h); a backend that cannot ends it with
 * NEXAR_ERR_UNSUPPORTED, and the communicator stays usable.
 */
static void dev_run(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    struct nx_xrun *xr = op->xr;
    if (xr->failed || op->arrived < c->size)
        return;
    if (!xr->confirm_sent) {
        xr->confirm_sent = true;
        send_note(op, NX_XSTEP_DEVICE);
    }
    if (xr->confirms + 1 < c->x->nnodes)
        return;
    if (nx_devstage_available()) {
        xr->dev_agreed = true;
        return start_parts(op);
    }
    char text[320];
    snprintf(text, sizeof(text),
             "%s on device buffers on communicator %u (job \"%s\"), which spans %u nodes: "
             "this nexard's device backend (%s) cannot stage them across nodes",
             nx_kind_name(op->sig.kind), c->id, c->job->name, c->x->nnodes, nx_device->name);
    dev_complete(op, NEXAR_ERR_UNSUPPORTED, text);
    drop_held(c, false, op->seq);
    nx_op_finish(op);
}

static void confirmed_by(struct nx_op *op, uint32_t node)
{
    struct nx_xrun *xr = op->xr;
    xr->confirmed[node] = 1;
    xr->confirms++;
    if (xr->confirm_sent)
        start_parts(op); /* may finish it */
}

void nx_xcoll_run(struct nx_op *op)
{
    enter();
    if (!op->xr) {
        struct nx_comm *c = op->comm;
        struct nx_xrun *xr = nx_xcalloc(1, sizeof(*xr));
        LIST_INIT(&xr->parts);
        xr->sig = op_sig(op);
        xr->confirmed = nx_xcalloc(c->x->nnodes, 1);
        op->xr = xr;
        /* Another node may have started something else at this sequence already; what
         * it confirmed is counted now. */
        struct nx_xheld *h, *tmp;
        for (h = TAILQ_FIRST(&c->x->held); h; h = tmp) {
            tmp = TAILQ_NEXT(h, link);
            if (h->h.seq != op->seq)
                continue;
            if (!sig_same(op, &h->h)) {
                mismatch(c, op, h->src, &h->h); /* frees op */
                leave();
                return;
            }
            bool note = h->h.step == NX_XSTEP_DEVICE;
            if (!dev_agrees(op, h->src, note)) {
                mismatch_dev(c, op, h->src); /* frees op */
                leave();
                return;
            }
            if (h->h.step != NX_XSTEP_CONFIRM && !note)
                continue;
            TAILQ_REMOVE(&c->x->held, h, link);
            c->x->held_msgs--;
            xr->confirmed[h->src] = 1;
            xr->confirms++;
            free(h);
        }
    }
    start_parts(op);
    leave();
}

void nx_xcoll_op_free(struct nx_op *op)
{
    struct nx_xrun *xr = op->xr;
    struct nx_comm *c = op->comm;
    while (!LIST_EMPTY(&xr->parts)) {
        struct xpart *p = LIST_FIRST(&xr->parts);
        for (uint32_t r = 0; r < c->size; r++)
            if (p->staged[r] && op->parts[r].client)
                complete(op->parts[r].client, p->user_data[r],
                         c->failed_status ? c->failed_status : NEXAR_ERR_INTERNAL,
                         c->failed_text, 0);
        part_free(p);
    }
    free(xr->confirmed);
    free(xr);
    op->xr = NULL;
}

/* ---- the network's side ------------------------------------------------------------- */

/* Every local rank is past seq: its op ended here (or failed). */
static bool ended_here(const struct nx_comm *c, uint64_t seq)
{
    for (uint32_t r = 0; r < c->size; r++)
        if (c->match.next_seq[r] <= seq)
            return false;
    return true;
}

static void hold(struct nx_comm *c, uint32_t node, const struct nx_data_hdr *h,
                 const void *data, size_t len)
{
    struct nx_xcomm *x = c->x;
    if (x->held_bytes + len > XC_HELD_BYTES || x->held_msgs >= XC_HELD_MSGS) {
        char who[160];
        nx_xcomm_node_name(c, node, who, sizeof(who));
        nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                     "comm %u (job \"%s\"): %s sent more than %llu MiB or %u messages for "
                     "ops this node's ranks have not reached (at seq %" PRIu64 ")",
                     c->id, c->job->name, who, (unsigned long long)(XC_HELD_BYTES >> 20),
                     XC_HELD_MSGS, h->seq);
        return;
    }
    struct nx_xheld *e = nx_xmalloc(sizeof(*e) + len);
    *e = (struct nx_xheld){.h = *h, .src = node, .len = len};
    memcpy(e->data, data, len);
    TAILQ_INSERT_TAIL(&x->held, e, link);
    x->held_bytes += len;
    x->held_msgs++;
}

static struct xpart *live_part(const struct nx_xrun *xr, uint64_t k)
{
    struct xpart *p;
    LIST_FOREACH(p, &xr->parts, op_link)
        if (p->index == k)
            return p;
    return NULL;
}

/* A DATA message for c from comm node `node`. */
static void deliver(struct nx_comm *c, uint32_t node, const struct nx_data_hdr *h,
                    const void *data, size_t len)
{
    bool confirm = h->step == NX_XSTEP_CONFIRM, note = h->step == NX_XSTEP_DEVICE;
    if ((confirm || note) && (len || h->offset || (confirm && !needs_confirm(h->kind)))) {
        char who[160];
        nx_xcomm_node_name(c, node, who, sizeof(who));
        nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                     "comm %u (job \"%s\"): %s sent a malformed confirmation of seq %" PRIu64,
                     c->id, c->job->name, who, h->seq);
        return;
    }
    struct nx_op *op = nx_match_op_find(&c->match, h->seq);
    if (!op) {
        if (!ended_here(c, h->seq))
            hold(c, node, h, data, len);
        return; /* else a late credit */
    }
    if (!op->xr || !sig_same(op, h))
        return mismatch(c, op, node, h); /* another op here (or a split) */
    if (!dev_agrees(op, node, note))
        return mismatch_dev(c, op, node);
    if (confirm || note) {
        if (op->xr->confirmed[node]) {
            char who[160];
            nx_xcomm_node_name(c, node, who, sizeof(who));
            nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                         "comm %u (job \"%s\"): %s confirmed seq %" PRIu64 " twice", c->id,
                         c->job->name, who, h->seq);
            return;
        }
        return confirmed_by(op, node);
    }
    uint64_t k = part_of(op, h->offset);
    if (k >= op->nchunks) {
        char who[160];
        nx_xcomm_node_name(c, node, who, sizeof(who));
        nx_comm_fail(c, NEXAR_ERR_INTERNAL,
                     "%s seq %" PRIu64 " on comm %u (job \"%s\"): %s sent data at byte %" PRIu64
                     ", past the op's %" PRIu64 " parts (do the nodes' slot_bytes differ?)",
                     nx_kind_name(op->sig.kind), op->seq, c->id, c->job->name, who, h->offset,
                     op->nchunks);
        return;
    }
    struct xpart *p = live_part(op->xr, k);
    if (p) {
        if (p->ended)
            return;
        if (!p->x) /* a device part still copying in: fed when its xop starts */
            return hold(c, node, h, data, len);
        nx_xop_on_data(p->x, node, h->step, h->sig, h->offset - part_base(op, k), data, len);
        return;
    }
    if (k >= op->next_chunk)
        hold(c, node, h, data, len);
    /* else that part ended here: a late credit */
}

const char *nx_xcoll_on_data(struct nx_tpeer *tp, uint64_t channel, const struct nx_wire_msg *w,
                             const void *raw, size_t rawlen)
{
    struct nx_comm *c;
    uint32_t node;
    const char *why = NULL;
    int r = nx_xcomm_route(tp, channel, w, raw, rawlen, &c, &node, &why);
    if (r <= 0)
        return r < 0 ? why : NULL;
    enter();
    deliver(c, node, &w->hdr, w->body, w->body_len);
    leave();
    return NULL;
}

void nx_xcoll_on_sent(uint64_t token)
{
    struct xpart *p = part_by_id((uint32_t)(token >> 32) % ID_LIMIT);
    if (!p || p->ended || !p->x)
        return;
    enter();
    nx_xop_on_sent(p->x, (uint32_t)token);
    leave();
}

void nx_xcoll_comm_gone(struct nx_comm *c)
{
    drop_held(c, true, 0);
}

/* ---- inspection --------------------------------------------------------------------- */

void nx_xcoll_describe(const struct nx_op *op, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!op->xr)
        return;
    const struct xpart *oldest = NULL, *p;
    LIST_FOREACH(p, &op->xr->parts, op_link)
        if (!oldest || p->index < oldest->index)
            oldest = p;
    if (op->xr->confirm_sent && !op->xr->dev_agreed) {
        size_t off = (size_t)snprintf(buf, len, "waiting for the %s of",
                                      is_dev(op) ? "device note" : "confirmation");
        for (uint32_t i = 0; i < op->comm->x->nnodes && off < len; i++) {
            if (i == op->comm->x->me || op->xr->confirmed[i])
                continue;
            buf[off++] = ' ';
            if (off < len)
                nx_xcomm_node_name(op->comm, i, buf + off, len - off);
            off += strlen(buf + off);
        }
        return;
    }
    if (oldest && oldest->dev && (!oldest->x || oldest->ended)) {
        snprintf(buf, len, "part %" PRIu64 "/%" PRIu64 ": copying device buffers %s",
                 oldest->index + 1, op->nchunks, oldest->ended ? "back" : "in");
        return;
    }
    if (!oldest || !oldest->x)
        return;
    char st[256], leg[512];
    nx_xop_describe(oldest->x, st, sizeof(st));
    legend(op->comm, leg, sizeof(leg));
    snprintf(buf, len, "part %" PRIu64 "/%" PRIu64 " (%s): %s%s", oldest->index + 1,
             op->nchunks, nx_xop_algo_name(oldest->x), st, leg);
}

const char *nx_xcoll_algo(const struct nx_op *op)
{
    return op->xr ? op->xr->algo : NULL;
}
