/* algo.c - an xop's life: creation and validation of its descriptor, the public entry
 * points, failure and introspection.  The pipeline runs in algo_run.c, the plans are
 * built with algo_plan.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo_int.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "shm_abi.h"
#include "wire.h"

#define LOG_SUB "algo"

/* Room the glue needs around a payload: envelope and DATA header. */
#define MSG_OVERHEAD (NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES)

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Which of in/out this node needs for a kind with data (true: required). */
static void needs(const struct nx_xop *x, bool *in, bool *out)
{
    bool root = x->d.me == x->root_node;
    *in = *out = true;
    switch (x->d.kind) {
    case NX_K_BROADCAST:
        *in = root;
        *out = !root;
        break;
    case NX_K_REDUCE:
    case NX_K_GATHER:
        *out = root;
        break;
    case NX_K_SCATTER:
        *in = root;
        break;
    case NX_K_BARRIER:
        *in = *out = false;
        break;
    default:
        break;
    }
}

static int check_desc(struct nx_xop *x, char *err, size_t errlen)
{
    const struct nx_xop_desc *d = &x->d;
    if (d->nnodes == 0 || d->me >= d->nnodes)
        return bad(err, errlen, "node %u of %u", d->me, d->nnodes);
    if (d->nranks < d->nnodes || !d->rank_node)
        return bad(err, errlen, "%u ranks on %u nodes", d->nranks, d->nnodes);
    if (!d->ad)
        return bad(err, errlen, "no adapter");
    if (d->kind == NX_K_BARRIER) {
        x->d.count = 0;
        x->d.dtype = NEXAR_U8; /* no data; one byte keeps the geometry code simple */
    }
    x->es = nx_dtype_size(d->dtype);
    if (x->es == 0)
        return bad(err, errlen, "unknown dtype %u", d->dtype);
    if (nx_kind_has_redop(d->kind) && d->redop >= NEXAR_OP_COUNT)
        return bad(err, errlen, "unknown reduce op %u", d->redop);
    if (nx_kind_has_root(d->kind) && d->root >= d->nranks)
        return bad(err, errlen, "root rank %u of %u", d->root, d->nranks);
    if (d->algo >= NX_ALGO_COUNT)
        return bad(err, errlen, "unknown algorithm %u", d->algo);
    return 0;
}

/* Copies the rank table and builds the per-node rank lists.  Every array an op keeps
 * sized by its window, ranks or nodes, and the scratch of scan_peers, is carved from one
 * block (x->geo): a small op allocated a dozen of them before. */
static int place_ranks(struct nx_xop *x, char *err, size_t errlen)
{
    uint32_t N = x->d.nnodes, P = x->d.nranks;
    x->window = x->d.window ? x->d.window : NX_XOP_DEFAULT_WINDOW;
    x->geo = nx_xcalloc((size_t)x->window * sizeof(*x->slots) + (size_t)N * sizeof(uint64_t) +
                            ((size_t)3 * P + 3 * N + 1) * sizeof(uint32_t) + 2 * (size_t)N,
                        1);
    x->slots = x->geo;
    x->credit = (uint64_t *)(x->slots + x->window);
    x->rank_node = (uint32_t *)(x->credit + N);
    x->lidx = x->rank_node + P;
    x->nr_rank = x->lidx + P;
    x->nr_off = x->nr_rank + P;
    x->in_peers = x->nr_off + N + 1;
    uint32_t *fill = x->in_peers + N;
    x->geo_from = (bool *)(fill + N);
    x->started = x->geo_from + N;
    for (uint32_t r = 0; r < P; r++) {
        uint32_t n = x->d.rank_node[r];
        if (n >= N)
            return bad(err, errlen, "rank %u on node %u of %u", r, n, N);
        x->rank_node[r] = n;
        x->nr_off[n + 1]++;
    }
    for (uint32_t n = 0; n < N; n++) {
        if (x->nr_off[n + 1] == 0)
            return bad(err, errlen, "node %u has no rank", n);
        if (x->nr_off[n + 1] > x->max_local)
            x->max_local = x->nr_off[n + 1];
        x->nr_off[n + 1] += x->nr_off[n];
    }
    for (uint32_t r = 0; r < P; r++) {
        uint32_t n = x->rank_node[r];
        x->lidx[r] = fill[n]++;
        x->nr_rank[x->nr_off[n] + x->lidx[r]] = r;
    }
    x->d.rank_node = x->rank_node;
    return 0;
}

/* Walks piece 0's schedule: the largest message, and who talks to whom. */
static int scan_peers(struct nx_xop *x, char *err, size_t errlen)
{
    uint32_t N = x->d.nnodes;
    struct nx_xpiece pc = {.idx = 0, .e0 = 0, .n = x->d.count < x->piece_elems
                                                        ? x->d.count : x->piece_elems};
    bool *from = x->geo_from;
    uint64_t biggest = 0;
    for (uint32_t s = 0; s < x->nsteps; s++) {
        nx_xplan_clear(&x->vplan);
        x->alg->plan(x, &pc, s, &x->vplan);
        for (uint32_t i = 0; i < x->vplan.nsend; i++)
            if (x->vplan.send[i].bytes > biggest)
                biggest = x->vplan.send[i].bytes;
        for (uint32_t i = 0; i < x->vplan.nrecv; i++)
            from[x->vplan.recv[i].peer] = true;
    }
    for (uint32_t n = 0; n < N; n++)
        if (from[n] && n != x->d.me)
            x->in_peers[x->n_in++] = n;
    if (x->net.msg_max && biggest > (uint64_t)x->net.msg_max - MSG_OVERHEAD)
        return bad(err, errlen, "%s: a message of %llu bytes exceeds the transport's %u",
                   x->alg->name, (unsigned long long)biggest, x->net.msg_max - MSG_OVERHEAD);
    return 0;
}

int nx_xop_create(const struct nx_xop_desc *desc, const struct nx_xnet *net,
                  struct nx_xop **out, char *err, size_t errlen)
{
    struct nx_xop *x = nx_xcalloc(1, sizeof(*x));
    int rv;
    x->d = *desc;
    x->bs = desc->stride ? desc->stride : desc->count;
    x->net = *net;
    x->what = desc->what || !net->what ? nx_xstrdup(desc->what ? desc->what
                                                              : nx_kind_name(desc->kind))
                                         : NULL;
    x->d.what = x->what;
    if ((rv = check_desc(x, err, errlen)) < 0 || (rv = place_ranks(x, err, errlen)) < 0)
        goto fail;
    x->root_node = nx_kind_has_root(x->d.kind) ? x->rank_node[x->d.root] : 0;

    uint64_t total;
    uint64_t blocks = (uint64_t)x->d.nranks * x->max_local;
    if (__builtin_mul_overflow(x->d.count, (uint64_t)x->es, &total) ||
        __builtin_mul_overflow(total, blocks, &total) || total > (UINT64_MAX >> 2)) {
        rv = bad(err, errlen, "count %llu overflows the buffers",
                 (unsigned long long)x->d.count);
        goto fail;
    }
    bool need_in, need_out;
    needs(x, &need_in, &need_out);
    if (x->d.count > 0 && ((need_in && !x->d.in) || (need_out && !x->d.out))) {
        rv = bad(err, errlen, "%s on node %u needs %s buffer", nx_kind_name(x->d.kind),
                 x->d.me, need_in && !x->d.in ? "an input" : "an output");
        goto fail;
    }

    x->algo = x->d.algo;
    if (x->algo == NX_ALGO_AUTO) {
        uint64_t per = x->d.count * x->es;
        if (x->d.kind == NX_K_ALL_GATHER || x->d.kind == NX_K_REDUCE_SCATTER)
            per *= x->d.nranks;
        x->algo = nx_algo_choose(x->d.kind, x->d.nnodes, per);
    }
    x->alg = nx_xalgo_lookup(x->d.kind, x->algo);
    if (!x->alg) {
        rv = bad(err, errlen, "no %s algorithm for %s", nx_algo_name(x->algo),
                 nx_kind_name(x->d.kind));
        goto fail;
    }
    uint64_t chunk = x->d.chunk_bytes ? x->d.chunk_bytes : NX_XOP_DEFAULT_CHUNK;
    x->chunk_elems = chunk / x->es ? chunk / x->es : 1;
    /* No piece needs to be longer than the op: keeps scratch and piece byte sizes small
     * (and far from overflowing) whatever chunk_bytes says. */
    if (x->chunk_elems > x->d.count)
        x->chunk_elems = x->d.count ? x->d.count : 1;
    x->max_inflight = x->d.max_inflight ? x->d.max_inflight : NX_XOP_DEFAULT_INFLIGHT;
    if ((rv = x->alg->init(x, err, errlen)) < 0)
        goto fail;
    x->npieces = x->d.count == 0 ? 1 : (x->d.count + x->piece_elems - 1) / x->piece_elems;
    if ((rv = scan_peers(x, err, errlen)) < 0)
        goto fail;

    x->sig = x->d.sig ? x->d.sig
                      : nx_xop_sig(x->d.kind, x->d.dtype, x->d.count, x->d.root, x->d.redop);
    x->next_token = 1;
    x->st.pieces = x->npieces;
    x->st.piece_elems = x->piece_elems;
    x->st.steps = x->nsteps;
    *out = x;
    return 0;
fail:
    x->state = XS_DONE;
    nx_xrun_free(x);
    *out = NULL;
    return rv;
}

/* Public entry points keep a depth count so that a done callback may destroy the xop:
 * the free waits until the outermost call returns. */
static void enter(struct nx_xop *x)
{
    x->depth++;
}

static void leave(struct nx_xop *x)
{
    if (--x->depth == 0 && x->destroy_req)
        nx_xrun_free(x);
}

void nx_xop_start(struct nx_xop *x)
{
    if (x->state != XS_IDLE)
        return;
    enter(x);
    x->state = XS_RUNNING;
    if (x->d.gate)
        nx_xrun_say_started(x);
    if (x->state == XS_RUNNING)
        nx_xrun_progress(x);
    leave(x);
}

void nx_xop_on_data(struct nx_xop *x, uint32_t src, uint32_t step, uint32_t sig,
                    uint64_t offset, const void *data, size_t len)
{
    if (x->state == XS_DONE)
        return;
    enter(x);
    if (src >= x->d.nnodes || src == x->d.me) {
        nx_xop_fail(x, NEXAR_ERR_INTERNAL, "a message from node %u (of %u; this is node %u)",
                    src, x->d.nnodes, x->d.me);
    } else if (sig != x->sig) {
        char mine[160];
        snprintf(mine, sizeof(mine), "%s(count=%llu, %s%s%s)", nx_kind_name(x->d.kind),
                 (unsigned long long)x->d.count, nx_dtype_name(x->d.dtype),
                 nx_kind_has_redop(x->d.kind) ? ", " : "",
                 nx_kind_has_redop(x->d.kind) ? nx_redop_name(x->d.redop) : "");
        nx_xop_fail(x, NEXAR_ERR_MISMATCH,
                    "node %u called another collective (signature %08x) than node %u's "
                    "%s (signature %08x)", src, sig, x->d.me, mine, x->sig);
    } else if (step == NX_XSTEP_CREDIT) {
        uint64_t pbytes = x->piece_elems * x->es;
        if (len != 0 || offset % pbytes != 0 || offset / pbytes >= x->npieces)
            nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                        "node %u sent a bad credit (offset %llu, %zu bytes; %llu pieces of "
                        "%llu bytes)", src, (unsigned long long)offset, len,
                        (unsigned long long)x->npieces, (unsigned long long)pbytes);
        else
            nx_xrun_credit(x, src, offset / pbytes);
    } else {
        nx_xrun_data(x, src, step, offset, data, len);
    }
    leave(x);
}

bool nx_xop_stream_begin(struct nx_xop *x, uint32_t src, uint32_t step, uint32_t sig,
                         uint64_t offset, size_t len, struct nx_xstream *s)
{
    /* A half-type reduction keeps the payload of some NaN operand, which one depending on
     * how the kernel's loop cut the elements (reduce.h): cut by packets too, two nodes
     * could differ.  The daemon's xops reduce halves as f32 partials anyway. */
    if (x->state != XS_RUNNING || src >= x->d.nnodes || src == x->d.me || sig != x->sig ||
        x->d.ad->use_stream || nx_xop_half_reduce(x))
        return false;
    return nx_xrun_stream_begin(x, src, step, offset, len, s);
}

void nx_xop_stream_data(struct nx_xop *x, struct nx_xstream *s, const void *data, size_t n)
{
    if (x->state != XS_RUNNING)
        return; /* it ended, with its own reason: the rest goes nowhere */
    enter(x);
    nx_xrun_stream_data(x, s, data, n);
    leave(x);
}

void nx_xop_stream_broken(struct nx_xop *x, const struct nx_xstream *s)
{
    if (x->state == XS_RUNNING)
        nx_xrun_stream_broken(x, s);
}

void nx_xop_on_sent(struct nx_xop *x, uint32_t token)
{
    if (x->state == XS_DONE)
        return;
    enter(x);
    nx_xrun_sent(x, token);
    leave(x);
}

void nx_xop_on_copied(struct nx_xop *x, uint32_t token)
{
    if (x->state == XS_DONE)
        return; /* ended: settled then */
    enter(x);
    nx_xrun_copied(x, token);
    leave(x);
}

void nx_xop_abort(struct nx_xop *x, uint32_t status, const char *text)
{
    enter(x);
    nx_xop_fail(x, status ? status : NEXAR_ERR_INTERNAL, "%s", text ? text : "aborted");
    leave(x);
}

void nx_xop_destroy(struct nx_xop *x)
{
    if (!x)
        return;
    /* Now, not at the deferred free: the caller frees the buffers once this returns. */
    nx_xrun_settle(x);
    if (x->depth > 0)
        x->destroy_req = true;
    else
        nx_xrun_free(x);
}

void nx_xop_fail(struct nx_xop *x, uint32_t status, const char *fmt, ...)
{
    if (x->state == XS_DONE)
        return;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    x->state = XS_DONE;
    x->status = status;
    char what[256];
    if (x->what)
        snprintf(what, sizeof(what), "%s", x->what);
    else
        x->net.what(x->net.arg, what, sizeof(what));
    x->text = nx_xasprintf("%s: %s", what, msg);
    NX_DEBUG(LOG_SUB, "%s", x->text);
    nx_xrun_settle(x); /* what the net still reads of the buffers goes back with them */
    enter(x);
    x->net.done(x->net.arg, x, status, x->text);
    leave(x);
}

void nx_xop_fail_adapter(struct nx_xop *x, const char *what, int rv)
{
    nx_xop_fail(x, NEXAR_ERR_INTERNAL, "node %u: adapter %s failed in %s: %s", x->d.me,
                x->d.ad->name, what, strerror(rv < 0 ? -rv : rv));
}

const char *nx_xop_algo_name(const struct nx_xop *x)
{
    return nx_algo_name(x->algo);
}

void nx_xop_stats(const struct nx_xop *x, struct nx_xop_stats *out)
{
    *out = x->st;
}

void nx_xop_describe(const struct nx_xop *x, char *buf, size_t len)
{
    if (x->state == XS_IDLE) {
        snprintf(buf, len, "not started");
        return;
    }
    if (x->lo >= x->npieces || (x->state == XS_DONE && x->status == 0)) {
        snprintf(buf, len, "done");
        return;
    }
    const struct nx_xslot *sl = &x->slots[x->lo % x->window];
    int n = snprintf(buf, len, "piece %llu/%llu step %u/%u", (unsigned long long)x->lo + 1,
                     (unsigned long long)x->npieces, sl->step + 1, x->nsteps);
    if (n < 0 || (size_t)n >= len)
        return;
    if (sl->phase == XP_SEND) {
        uint32_t peer = sl->send_i < sl->plan.nsend ? sl->plan.send[sl->send_i].peer : 0;
        snprintf(buf + n, len - n, ": sending to node %u (%s)", peer,
                 x->inflight >= x->max_inflight      ? "unacknowledged bytes at the limit"
                 : x->d.gate && !x->started[peer] ? "waiting for it to start the part"
                                                     : "waiting for its credit");
    } else if (sl->phase == XP_RECV && sl->lent) { /* what came waits for it, too */
        snprintf(buf + n, len - n, ": waiting for the transport to copy %u message%s it sent",
                 sl->lent, sl->lent == 1 ? "" : "s");
    } else if (sl->phase == XP_RECV) {
        size_t off = (size_t)n;
        off += (size_t)snprintf(buf + off, len - off, ": waiting for node");
        for (uint32_t i = 0; i < sl->plan.nrecv && off < len; i++) {
            const struct nx_xfer *f = &sl->plan.recv[i];
            if (!f->done)
                off += (size_t)snprintf(buf + off, len - off, " %u%s", f->peer,
                                        f->torn       ? " (its message broke off midway)"
                                        : f->streamed ? " (its message is arriving)"
                                                      : "");
        }
    }
}
