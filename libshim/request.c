/*
 * request.c - the request state machine: chunk plan, staging slots, submission,
 * copy-in / copy-out and completion.
 *
 * A request submits `nunits` descriptors: one per chunk when staged, one in total
 * when direct or without data.  It is complete when nothing is in flight and either
 * every unit completed or a failure was seen (after a failure nothing more is
 * submitted; the completions of what was submitted are still awaited, so the slots
 * come back).
 *
 * Ordering: descriptors of one sequence stream - the collectives of a communicator,
 * or one (peer, tag, direction) of point-to-point - go out op by op: a request may
 * submit only when the previous request of its stream has submitted all its
 * descriptors.  The daemon thus sees every stream's (seq, chunk) pairs in order.
 *
 * Slot fairness (nx_pump): slots are shared between sequence streams.  A free slot
 * goes to the oldest eligible request whose stream holds no slot; if every eligible
 * stream holds one, to the request whose stream holds the fewest (the oldest among
 * equals).  No stream holds more than nx_S.slot_cap slots (nx_stream_slot_cap: at most
 * 4, and one fewer than the slot count when there are several), so another stream can
 * always start while one streams.  This matters across ranks: rank 0 may fill its
 * slots with communicator A's chunks while rank 1 fills its own with B's; if either
 * stream could take every slot, neither op could ever complete (for three streams or
 * more, see Bounce).  A stream that frees a slot while holding none other gets it back
 * first, so it keeps progressing.
 * Receives wait for a sender, possibly one that needs a slot on this very rank first
 * (irecv; send; wait on both ranks): together they hold at most half the slots
 * (nx_S.recv_cap), so sends and collectives always find one.  With a single slot
 * that pattern cannot work, so nexard gives at least two (its config refuses one).
 *
 * Bounce: caps do not stop a cycle when ranks post on three or more streams in orders
 * of their own (threads that each use a communicator): each rank's slots may hold ops
 * that wait for a rank whose slots hold others.  So a staged op whose turn came, and
 * whose stream has held no slot for NX_BOUNCE_AFTER_NS, stops waiting for one: its
 * input is copied into a block of the arena heap and it goes as a direct op (one
 * descriptor, no slot), its output copied back at completion.  Every op then reaches
 * nexard, and the cycle cannot form while the heap has room.  A single-copy op cannot
 * go direct (all its ranks submit that form): it takes a stand-in slot in the heap
 * instead (standin_take).  A bucketed op's iovs are gathered into the block, and
 * nexard runs it as the one all_reduce of their concatenation that its chunks are.
 * Chunks queued behind their own stream's keep to the slots (its freed slot comes back
 * to it first).  One that still waits after NX_SLOT_NOTE_NS (the heap has no room) notes
 * the ops that hold the slots, for its text should it time out (slot_note).
 *
 * Cap: nexard holds at most hdr.max_pending descriptors of a rank and drops one that
 * sends more, so nx_pump submits only while fewer completions are owed (nx_S.owed; a
 * peer-read notice is owed none).  Unslotted ops (barriers, direct and bounced ops) are
 * bounded by nothing else: a rank that posts thousands while its peers are late waits
 * for completions here instead.
 *
 * user_data: bit 63 set names staging slot (bits 0-31) of generation (bits 32-62);
 * clear, it names request-table entry (bits 0-31) of generation (bits 32-62).  A
 * completion naming a stale generation is ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "stream_copy.h"

#define UD_SLOT (1ull << 63)
#define GEN_MASK 0x7fffffffu
#define NONE UINT32_MAX

/* ---- request table ---------------------------------------------------------- */

static int reqtab_grow(void)
{
    uint32_t cap = nx_S.reqtab_cap ? nx_S.reqtab_cap * 2 : 64;
    if (cap > (1u << 30))
        return -1;
    struct nexar_request **t = realloc(nx_S.reqtab, cap * sizeof(*t));
    if (!t)
        return -1;
    nx_S.reqtab = t;
    uint32_t *g = realloc(nx_S.reqgen, cap * sizeof(*g));
    if (!g)
        return -1;
    nx_S.reqgen = g;
    uint32_t *nx = realloc(nx_S.reqnext, cap * sizeof(*nx));
    if (!nx)
        return -1;
    nx_S.reqnext = nx;
    for (uint32_t i = nx_S.reqtab_cap; i < cap; i++) {
        t[i] = NULL;
        g[i] = 0;
        nx[i] = i + 1 < cap ? i + 1 : nx_S.reqtab_free;
    }
    nx_S.reqtab_free = nx_S.reqtab_cap;
    nx_S.reqtab_cap = cap;
    return 0;
}

static int reqtab_get(struct nexar_request *r)
{
    if (nx_S.reqtab_free == NONE && reqtab_grow() < 0)
        return -1;
    uint32_t i = nx_S.reqtab_free;
    nx_S.reqtab_free = nx_S.reqnext[i];
    nx_S.reqtab[i] = r;
    r->tidx = i;
    r->tgen = nx_S.reqgen[i];
    return 0;
}

static void reqtab_put(struct nexar_request *r)
{
    uint32_t i = r->tidx;
    if (i >= nx_S.reqtab_cap || nx_S.reqtab[i] != r)
        return;
    nx_S.reqtab[i] = NULL;
    nx_S.reqgen[i] = (nx_S.reqgen[i] + 1) & GEN_MASK;
    nx_S.reqnext[i] = nx_S.reqtab_free;
    nx_S.reqtab_free = i;
}

int nx_req_init(void)
{
    uint32_t n = nx_S.hdr.slot_count;
    nx_S.reqtab = NULL;
    nx_S.reqgen = nx_S.reqnext = NULL;
    nx_S.reqtab_cap = 0;
    nx_S.reqtab_free = NONE;
    nx_S.slots = calloc(n + NX_VSLOTS, sizeof(*nx_S.slots));
    if (!nx_S.slots)
        return -1;
    for (uint32_t i = 0; i < n; i++)
        nx_S.slots[i].next_free = i + 1 < n ? i + 1 : NONE;
    nx_S.free_head = n ? 0 : NONE;
    nx_S.free_slots = n;
    nx_S.slot_cap = nx_stream_slot_cap(n);
    nx_S.recv_held = 0;
    nx_S.recv_cap = n > 1 ? n / 2 : 1;
    nx_S.pulled_n = 0;
    nx_S.pulled_q = calloc(n + NX_VSLOTS, sizeof(*nx_S.pulled_q));
    return nx_S.pulled_q ? 0 : -1;
}

void nx_req_fini(void)
{
    free(nx_S.pulled_q);
    nx_S.pulled_q = NULL;
    nx_S.pulled_n = 0;
    free(nx_S.slots);
    free(nx_S.reqtab);
    free(nx_S.reqgen);
    free(nx_S.reqnext);
    nx_S.slots = NULL;
    nx_S.reqtab = NULL;
    nx_S.reqgen = nx_S.reqnext = NULL;
    nx_S.reqtab_cap = 0;
    nx_S.reqtab_free = NONE;
    nx_S.free_head = NONE;
    nx_S.free_slots = 0;
}

/* ---- slots ---------------------------------------------------------------------- */

static uint32_t slot_take(void)
{
    uint32_t i = nx_S.free_head;
    nx_S.free_head = nx_S.slots[i].next_free;
    nx_S.free_slots--;
    return i;
}

static void slot_release(struct nx_slot *sl)
{
    uint32_t i = (uint32_t)(sl - nx_S.slots);
    sl->req->held--;
    (*sl->req->stream_held)--;
    if (sl->req->tmpl.kind == NX_K_RECV)
        nx_S.recv_held--;
    sl->req = NULL;
    sl->pulled = false;
    sl->gen = (sl->gen + 1) & GEN_MASK;
    if (i >= nx_S.hdr.slot_count) { /* a stand-in: its heap block goes */
        nx_arena_put(sl->vblock);
        sl->vblock = NULL;
        sl->vbase = NULL;
        return;
    }
    sl->next_free = nx_S.free_head;
    nx_S.free_head = i;
    nx_S.free_slots++;
}

static uint8_t *slot_base(uint32_t i)
{
    if (i >= nx_S.hdr.slot_count)
        return nx_S.slots[i].vbase;
    return nx_S.arena + (uint64_t)i * nx_S.hdr.slot_bytes;
}

/* The slot nexard knows it as. */
static uint32_t slot_tag(uint32_t i)
{
    return i >= nx_S.hdr.slot_count ? nx_S.slots[i].vtag : i;
}

/* ---- lifetime -------------------------------------------------------------------- */

static bool is_p2p(uint8_t kind)
{
    return kind == NX_K_SEND || kind == NX_K_RECV;
}

/* This request will submit nothing more: let the next of its stream go. */
static void req_retire(struct nexar_request *r)
{
    if (!r->submitting)
        return;
    r->submitting = false;
    if (r->key_prev)
        r->key_prev->key_next = r->key_next;
    if (r->key_next)
        r->key_next->key_prev = r->key_prev;
    if (r->key_tail && *r->key_tail == r)
        *r->key_tail = r->key_prev;
    r->key_prev = r->key_next = NULL;
}

static void req_maybe_complete(struct nexar_request *r)
{
    if (r->complete || r->inflight)
        return;
    if (!r->failed && r->done_units < r->nunits)
        return;
    req_retire(r);
    r->complete = true;
    if (!r->failed)
        r->status = NEXAR_OK;
    nx_arena_put(r->bounce); /* nexard is done with it: nothing is in flight */
    r->bounce = NULL;
    nx_list_del(&r->active_link);
    reqtab_put(r);
    nx_dev_complete(r);
    /* Nobody holds a detached request: one that succeeded has nothing left to say. */
    if (r->detached && r->status == NEXAR_OK)
        nx_req_free(r);
}

/* The ops that hold this rank's slots, for an op that waits for one. */
static char *slot_holders(void)
{
    char buf[NX_ERR_TEXT_BYTES / 2];
    size_t n = 0;
    const struct nexar_request *last = NULL;
    buf[0] = '\0';
    for (uint32_t i = 0; i < NX_SLOT_ENTRIES && n < sizeof(buf); i++) {
        const struct nexar_request *h = nx_S.slots[i].req;
        if (!h || h == last)
            continue;
        int k = snprintf(buf + n, sizeof(buf) - n, "%s%s seq %llu on comm %u",
                         last ? ", " : "", nx_kind_name(h->tmpl.kind),
                         (unsigned long long)h->tmpl.seq, h->comm->id);
        n = k < 0 ? sizeof(buf) : n + (size_t)k;
        last = h;
    }
    return strdup(last ? buf : "nothing");
}

/* A deadline elsewhere names this rank as not arrived; only this rank knows that its op
 * waited in its own library for a staging slot (the heap had no room for a bounce),
 * and which ops held them: the text says so after nexard's. */
static const char *slot_note(const struct nexar_request *r, nexar_status_t s,
                             const char *text, char *buf, size_t len)
{
    if (s != NEXAR_ERR_TIMEOUT || !r->slot_note || !text)
        return text;
    uint64_t waited = r->slot_waited_ns ? r->slot_waited_ns : nx_now_ns() - r->slot_wait_ns;
    snprintf(buf, len, "%s; here rank %d's %s seq %llu on comm %u waited %.1f s in its "
             "library for one of its %u staging slots, held by %s", text, r->comm->rank,
             nx_kind_name(r->tmpl.kind), (unsigned long long)r->tmpl.seq, r->comm->id,
             (double)waited / 1e9, nx_S.hdr.slot_count, r->slot_note);
    return buf;
}

void nx_req_fail(struct nexar_request *r, nexar_status_t s, const char *text)
{
    if (!r->failed) {
        char buf[NX_ERR_TEXT_BYTES];
        const char *t = slot_note(r, s, text, buf, sizeof(buf));
        r->failed = true;
        r->status = s;
        free(r->text);
        r->text = t && *t ? strdup(t) : NULL;
    }
    req_retire(r);
    /* (Not a shrink's: the daemon fails nothing when one times out.) */
    bool fails_comm = r->tmpl.kind != NX_K_COMM_SHRINK && r->tmpl.kind != NX_K_COMM_GROW &&
                      (s == NEXAR_ERR_MISMATCH || s == NEXAR_ERR_TIMEOUT ||
                       s == NEXAR_ERR_PEER_LOST || s == NEXAR_ERR_ABORTED);
    /* Mirrors the daemon, which fails the communicator on each of these (a send/recv
     * size mismatch included): later ops then fail here without a round trip. */
    if (fails_comm)
        nx_comm_set_failed(r->comm, s, text);
}

nexar_status_t nx_req_result(const struct nexar_request *r)
{
    if (r->status == NEXAR_OK)
        return NEXAR_OK;
    return nx_fail_text(r->status, r->text);
}

void nx_req_free(struct nexar_request *r)
{
    nx_list_del(&r->comm_link);
    if (r->refs > 0) {
        r->zombie = true; /* another thread still waits on it: it frees it */
        return;
    }
    free(r->text);
    free(r->slot_note);
    free(r->iov);
    free(r);
}

void nx_req_unref(struct nexar_request *r)
{
    if (--r->refs == 0 && r->zombie) {
        r->refs = 0;
        r->zombie = false;
        nx_req_free(r);
    }
}

/* Whether a staged op copies its chunks in with streaming stores (stream_copy.c): only on a
 * communicator that lives on this node, where another CPU reads the slot next.  Measured
 * per kind (docs/performance.md): the ops that move data, and reduce_scatter, gained 1.1-1.9
 * times at 2-32 MiB.  all_reduce and reduce, whose slots nexard folds and writes back,
 * gained at some sizes and lost at others, and a broadcast that the local plan cut small
 * (its readers copy each chunk while it is still in the root's cache) lost: they stay
 * ordinary, as do ops across nodes, whose slots this rank's own nexard reads next on the
 * same CPU (no gain measured). */
static bool stream_in(const struct nexar_request *r, const struct nexar_comm *c)
{
    if (!nx_S.env.stream_copy || !(c->plan & NX_PLAN_LOCAL))
        return false;
    switch (r->tmpl.kind) {
    case NX_K_ALL_GATHER:
    case NX_K_REDUCE_SCATTER:
    case NX_K_ALL_TO_ALL:
    case NX_K_GATHER:
    case NX_K_SCATTER:
        return true;
    case NX_K_BROADCAST:
        return !nx_chunk_is_cut(r->tmpl.kind, (uint32_t)c->size, r->esize,
                                nx_S.hdr.slot_bytes, r->chunk_elems);
    default:
        return false;
    }
}

/* Direct when every buffer the op touches lies in the arena heap, element-aligned. */
static bool plan_direct(struct nexar_request *r)
{
    uint64_t in_off = 0, out_off = 0;
    uint64_t n = r->tmpl.count * r->esize;
    bool has_in = r->shape.in_mul > 0, has_out = r->shape.out_mul > 0;
    if (has_in && (!nx_arena_heap_range(r->in, n * r->shape.in_mul, &in_off) ||
                   in_off % r->esize))
        return false;
    if (has_out && (!nx_arena_heap_range(r->out, n * r->shape.out_mul, &out_off) ||
                    out_off % r->esize))
        return false;
    r->tmpl.in_off = has_in ? in_off : out_off;
    r->tmpl.out_off = has_out ? out_off : in_off;
    return true;
}

nexar_status_t nx_req_start(struct nexar_comm *c, const struct nx_call *op,
                            struct nexar_request **out)
{
    struct nexar_request *r = calloc(1, sizeof(*r));
    struct nx_p2p_stream *st = NULL;
    if (!r)
        return nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", nx_kind_name(op->kind));
    r->comm = c;
    r->in = op->in;
    r->out = op->out;
    r->esize = nx_dtype_size(op->dtype);
    uint32_t root = nx_kind_has_root(op->kind) ? op->peer : 0;
    nx_kind_shape(op->kind, (uint32_t)c->size, (uint32_t)c->rank, root, &r->shape);
    r->tmpl = (struct nx_sqe){
        .comm_id = c->id,
        .kind = op->kind,
        .dtype = r->shape.has_data ? op->dtype : 0,
        .redop = nx_kind_has_redop(op->kind) ? op->redop : 0,
        .count = r->shape.has_data ? op->count : 0,
        .peer = op->peer,
        .tag = op->tag,
    };

    r->mode = NX_MODE_NODATA;
    r->nunits = 1;
    if (op->dev) {
        /* One descriptor naming the record; the daemon reads the buffers on the GPU. */
        r->mode = NX_MODE_DEVICE;
        r->tmpl.flags = NX_SQE_DIRECT | NX_SQE_DEVICE;
        r->tmpl.in_off = nx_dev_rec_off(op->dev);
    } else if (r->shape.has_data) {
        r->chunk_elems = nx_op_chunk_elems(op->kind, (uint32_t)c->size, r->esize,
                                           nx_S.hdr.slot_bytes, op->count, c->plan);
        if (r->chunk_elems == 0) {
            free(r);
            return nx_fail(NEXAR_ERR_UNSUPPORTED,
                           "%s: one element per rank of %s over %d ranks does not fit the "
                           "%llu-byte staging slot of nexard",
                           nx_kind_name(op->kind), nx_dtype_name(op->dtype), c->size,
                           (unsigned long long)nx_S.hdr.slot_bytes);
        }
        if (nx_op_single_copy(op->kind, r->esize, op->count, c->plan)) {
            /* Whatever the buffers: the peers read them where they are (shm_abi.h). */
            r->mode = NX_MODE_STAGED;
            r->single_copy = true;
        } else if (op->count > 0 && op->kind != NX_K_ALL_REDUCE_BUCKETED && plan_direct(r)) {
            r->mode = NX_MODE_DIRECT;
            r->tmpl.flags = NX_SQE_DIRECT;
        } else if (op->count > 0) {
            r->mode = NX_MODE_STAGED;
            r->stream_in = stream_in(r, c);
            r->nunits = nx_chunk_count(op->count, r->chunk_elems);
            if (r->nunits > UINT32_MAX) {
                free(r);
                return nx_fail(NEXAR_ERR_UNSUPPORTED,
                               "%s: %llu elements need more than 2^32 chunks of the "
                               "%llu-byte staging slot; use nexar_alloc() buffers",
                               nx_kind_name(op->kind), (unsigned long long)op->count,
                               (unsigned long long)nx_S.hdr.slot_bytes);
            }
        }
    }
    if (op->kind == NX_K_ALL_REDUCE_BUCKETED && op->niov > 0 && !op->dev) {
        r->iov = malloc(op->niov * sizeof(*r->iov));
        if (!r->iov)
            goto nomem;
        memcpy(r->iov, op->iov, op->niov * sizeof(*r->iov));
        r->niov = op->niov;
    }
    if (is_p2p(op->kind) &&
        !(st = nx_comm_stream(c, op->peer, op->tag, op->kind == NX_K_RECV)))
        goto nomem;
    if (reqtab_get(r) < 0)
        goto nomem;

    /* Nothing can fail from here on: commit the sequence number. */
    r->stream_held = &r->held; /* unslotted kinds: never used */
    if (st) {
        r->tmpl.seq = st->seq++;
        r->key_tail = &st->tail;
        r->stream_held = &st->held;
    } else if (op->kind != NX_K_COMM_FREE && op->kind != NX_K_COMM_ABORT &&
               op->kind != NX_K_COMM_SHRINK && op->kind != NX_K_COMM_GROW) {
        r->tmpl.seq = c->next_seq++;
        r->key_tail = &c->coll_tail;
        r->stream_held = &c->coll_held;
    }
    if (r->key_tail) {
        r->key_prev = *r->key_tail;
        if (r->key_prev)
            r->key_prev->key_next = r;
        *r->key_tail = r;
    }
    r->submitting = true;
    r->dev = op->dev; /* the request owns it from here on */
    nx_list_add_tail(&nx_S.active, &r->active_link);
    nx_list_add_tail(&c->reqs, &r->comm_link);
    r->serial = c->req_serial++;
    *out = r;
    nx_progress();
    return NEXAR_OK;

nomem:
    free(r->iov);
    free(r);
    return nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", nx_kind_name(op->kind));
}

/* ---- submission ----------------------------------------------------------------- */

static bool eligible(const struct nexar_request *r)
{
    return r->submitting && !r->failed && !r->key_prev && r->next_unit < r->nunits;
}

static void note_inflight(struct nexar_request *r)
{
    nx_S.owed++;
    if (r->inflight++ == 0)
        r->last_event_ns = nx_now_ns();
}

/* An op that waited for a slot is on its way: how long it waited. */
static void slot_wait_over(struct nexar_request *r)
{
    if (r->slot_wait_ns && !r->slot_waited_ns)
        r->slot_waited_ns = nx_now_ns() - r->slot_wait_ns;
}

static void submit_unslotted(struct nexar_request *r)
{
    slot_wait_over(r);
    struct nx_sqe e = r->tmpl;
    e.user_data = ((uint64_t)r->tgen << 32) | r->tidx;
    nx_ring_put(&e);
    r->next_unit = 1;
    note_inflight(r);
    req_retire(r);
}

/* Bucketed: n elements from the iov cursor into dst. */
static void iov_gather(struct nexar_request *r, uint8_t *dst, uint64_t n)
{
    size_t i = r->cur_iov;
    uint64_t off = r->cur_off;
    while (n > 0 && i < r->niov) {
        uint64_t avail = r->iov[i].count - off;
        if (avail == 0) {
            i++;
            off = 0;
            continue;
        }
        uint64_t take = avail < n ? avail : n;
        memcpy(dst, (const uint8_t *)r->iov[i].ptr + off * r->esize, take * r->esize);
        dst += take * r->esize;
        off += take;
        n -= take;
    }
    r->cur_iov = i;
    r->cur_off = off;
}

/* Bucketed: n elements from src back to the iovs, starting at (i, off). */
static void iov_scatter(const struct nexar_request *r, size_t i, uint64_t off,
                        const uint8_t *src, uint64_t n)
{
    while (n > 0 && i < r->niov) {
        uint64_t avail = r->iov[i].count - off;
        if (avail == 0) {
            i++;
            off = 0;
            continue;
        }
        uint64_t take = avail < n ? avail : n;
        memcpy((uint8_t *)r->iov[i].ptr + off * r->esize, src, take * r->esize);
        src += take * r->esize;
        off += take;
        n -= take;
    }
}

/* Elements of chunk c, and the byte distance from its input to its output region. */
static uint64_t chunk_len(const struct nexar_request *r, uint64_t c, uint64_t *out_rel)
{
    uint64_t off = c * r->chunk_elems;
    uint64_t n = r->tmpl.count - off < r->chunk_elems ? r->tmpl.count - off : r->chunk_elems;
    *out_rel = r->shape.alias_ok ? 0 : (uint64_t)r->shape.in_mul * n * r->esize;
    return n;
}

/* A staged all_gather's own block goes from input to output here, not through the
 * daemon (shm_abi.h, NX_K_ALL_GATHER): one copy instead of three. */
static uint8_t *own_block(const struct nexar_request *r)
{
    if (r->tmpl.kind != NX_K_ALL_GATHER || r->iov)
        return NULL;
    return r->out + (uint64_t)r->comm->rank * r->tmpl.count * r->esize;
}

static void submit_chunk(struct nexar_request *r, uint32_t si)
{
    struct nx_slot *sl = &nx_S.slots[si];
    uint64_t c = r->next_unit++, out_rel;
    uint64_t n = chunk_len(r, c, &out_rel);
    uint64_t off = c * r->chunk_elems, es = r->esize, count = r->tmpl.count;
    uint8_t *base = slot_base(si);

    sl->req = r;
    sl->chunk = c;
    if (c == 0)
        slot_wait_over(r);
    struct nx_sqe e = r->tmpl;
    e.user_data = UD_SLOT | ((uint64_t)sl->gen << 32) | si;
    if (r->single_copy) {
        e.flags = NX_SQE_CMA;
        e.in_off = r->shape.in_mul ? (uint64_t)(uintptr_t)r->in : 0;
        e.out_off = r->shape.out_mul ? (uint64_t)(uintptr_t)r->out : 0;
        e.tag = slot_tag(si); /* the slot takes nexard's table */
        nx_ring_put(&e);
        nx_ring_publish();
        /* Its own block while the peers start on theirs. */
        uint8_t *own = own_block(r);
        if (own && own != r->in) /* not in place */
            memcpy(own, r->in, count * es);
    } else {
        if (r->iov) {
            sl->iov = r->cur_iov;
            sl->iov_off = r->cur_off;
            iov_gather(r, base, n);
        } else {
            bool stream = r->stream_in && n * es >= NX_STREAM_MIN_BYTES;
            for (uint32_t j = 0; j < r->shape.in_mul; j++) {
                uint8_t *dst = base + j * n * es;
                const uint8_t *src = r->in + (j * count + off) * es;
                if (stream)
                    nx_copy_stream(dst, src, n * es);
                else
                    memcpy(dst, src, n * es);
            }
            uint8_t *own = own_block(r);
            if (own && own != r->in) /* not in place */
                memcpy(own + off * es, r->in + off * es, n * es);
        }
        e.chunk = (uint32_t)c;
        e.in_off = (uint64_t)si * nx_S.hdr.slot_bytes;
        e.out_off = e.in_off + out_rel;
        nx_ring_put(&e);
        /* nx_pump publishes what it queued when it has filled every free slot; a large
         * chunk goes out at once instead, so that nexard and the peers work on it while
         * this rank copies the next (a 2-8 MiB broadcast on one node: twice as fast,
         * performance.md). */
        if (n * es * r->shape.in_mul >= NX_PUBLISH_EACH_BYTES)
            nx_ring_publish();
    }
    r->held++;
    (*r->stream_held)++;
    if (r->tmpl.kind == NX_K_RECV)
        nx_S.recv_held++;
    note_inflight(r);
    if (r->next_unit == r->nunits)
        req_retire(r);
}

static void copy_out(struct nexar_request *r, const struct nx_slot *sl)
{
    uint32_t si = (uint32_t)(sl - nx_S.slots);
    uint64_t out_rel, c = sl->chunk;
    uint64_t n = chunk_len(r, c, &out_rel);
    uint64_t off = c * r->chunk_elems, es = r->esize, count = r->tmpl.count;
    const uint8_t *src = slot_base(si) + out_rel;
    if (r->iov) {
        iov_scatter(r, sl->iov, sl->iov_off, src, n);
        return;
    }
    uint32_t own = own_block(r) ? (uint32_t)r->comm->rank : UINT32_MAX;
    for (uint32_t j = 0; j < r->shape.out_mul; j++)
        if (j != own)
            memcpy(r->out + (j * count + off) * es, src + j * n * es, n * es);
}

/* The eligible staged request that gets the next free slot (see the file comment). */
static struct nexar_request *pick(void)
{
    struct nexar_request *best = NULL;
    for (struct nx_list *l = nx_S.active.next; l != &nx_S.active; l = l->next) {
        struct nexar_request *r = nx_container_of(l, struct nexar_request, active_link);
        if (r->mode != NX_MODE_STAGED || !eligible(r) || *r->stream_held >= nx_S.slot_cap ||
            (r->tmpl.kind == NX_K_RECV && nx_S.recv_held >= nx_S.recv_cap))
            continue;
        if (!best || *r->stream_held < *best->stream_held)
            best = r;
        if (*best->stream_held == 0)
            break;
    }
    return best;
}

/* Bytes of the op's input and output blocks. */
static uint64_t op_bytes(const struct nexar_request *r, uint32_t mul)
{
    return mul * r->tmpl.count * r->esize;
}

/* The op goes direct from a copy of its input in the arena heap (see Bounce); false
 * when it cannot (the heap has no room: it keeps waiting for a slot). */
static bool bounce(struct nexar_request *r)
{
    uint64_t in = op_bytes(r, r->shape.in_mul), out = op_bytes(r, r->shape.out_mul);
    uint64_t out_at = r->shape.alias_ok ? 0 : in;
    uint64_t bytes = r->shape.alias_ok ? (in > out ? in : out) : in + out;
    uint8_t *b = nx_arena_get(bytes);
    uint64_t off;
    if (!b)
        return false;
    if (!nx_arena_heap_range(b, bytes, &off)) {
        nx_arena_put(b);
        return false;
    }
    if (r->iov)
        iov_gather(r, b, r->tmpl.count); /* the cursor is at the start: no chunk went */
    else if (in)
        memcpy(b, r->in, in);
    r->bounce = b;
    r->mode = NX_MODE_DIRECT;
    r->tmpl.flags |= NX_SQE_DIRECT;
    r->tmpl.in_off = off;
    r->tmpl.out_off = off + out_at;
    r->nunits = 1;
    return true;
}

/* A single-copy op cannot go direct (every rank of it submits the single-copy form):
 * it takes a stand-in slot instead, a slot-sized run of the arena heap on a slot
 * boundary, which nexard validates and uses as it would slot `vtag` (the slots and the
 * heap are one arena).  NX_VSLOTS stand-ins at most, and none while the heap has no
 * room; the index of the one taken, or UINT32_MAX. */
static uint32_t standin_take(void)
{
    uint64_t sb = nx_S.hdr.slot_bytes;
    for (uint32_t i = nx_S.hdr.slot_count; i < NX_SLOT_ENTRIES; i++) {
        struct nx_slot *sl = &nx_S.slots[i];
        if (sl->req || sl->vblock)
            continue;
        uint8_t *b = nx_arena_get(2 * sb);
        if (!b)
            return UINT32_MAX;
        uint64_t at = (nx_arena_off(b) + sb - 1) / sb;
        if (at > UINT32_MAX) {
            nx_arena_put(b);
            return UINT32_MAX;
        }
        sl->vblock = b;
        sl->vtag = (uint32_t)at;
        sl->vbase = nx_S.arena + at * sb;
        return i;
    }
    return UINT32_MAX;
}

/* A bounced op ended well: its output, back where the caller wants it. */
static void bounce_out(struct nexar_request *r)
{
    uint64_t out = op_bytes(r, r->shape.out_mul);
    if (r->iov)
        iov_scatter(r, 0, 0, r->bounce, r->tmpl.count);
    else if (out)
        memcpy(r->out, r->bounce + (r->shape.alias_ok ? 0 : op_bytes(r, r->shape.in_mul)),
               out);
}

/* Staged ops whose turn came and whose stream has had no slot for NX_BOUNCE_AFTER_NS:
 * direct from a copy, or a single-copy op on a stand-in slot (which takes ring space).
 * Whether any went either way: a direct one is submitted by nx_pump's next pass, and
 * after a stand-in the next of its stream may go. */
static bool bounce_waiting(uint32_t *space)
{
    bool moved = false;
    uint64_t now = 0;
    for (struct nx_list *l = nx_S.active.next; l != &nx_S.active; l = l->next) {
        struct nexar_request *r = nx_container_of(l, struct nexar_request, active_link);
        if (r->mode != NX_MODE_STAGED || !eligible(r) || r->next_unit > 0)
            continue;
        if (*r->stream_held > 0) { /* its stream's slot comes back to it first */
            r->slot_wait_ns = 0;
            continue;
        }
        if (!now)
            now = nx_now_ns();
        if (!r->slot_wait_ns)
            r->slot_wait_ns = now;
        if (now - r->slot_wait_ns >= NX_SLOT_NOTE_NS && !r->slot_note)
            r->slot_note = slot_holders();
        if (now - r->slot_wait_ns < NX_BOUNCE_AFTER_NS)
            continue;
        if (!r->single_copy) {
            moved |= bounce(r);
            continue;
        }
        uint32_t si = *space > 0 ? standin_take() : UINT32_MAX;
        if (si != UINT32_MAX) {
            submit_chunk(r, si);
            (*space)--;
            moved = true;
        }
    }
    return moved;
}

void nx_pump(void)
{
    if (!nx_S.inited || nx_S.dead)
        return;
    uint32_t ring = nx_ring_sq_space();
    if (nx_S.dead)
        return;
    /* Ranks wait on these (pull.c): before anything new.  Notices are not held in
     * nexard, so the cap on what it holds does not count them. */
    ring -= nx_pull_flush(ring);
    uint32_t max = nx_S.hdr.max_pending;
    uint32_t room = nx_S.owed < max ? max - nx_S.owed : 0;
    uint32_t space = ring < room ? ring : room, given = space;
    bool again = true;
    while (again) {
        again = false;
        for (struct nx_list *l = nx_S.active.next, *nl; l != &nx_S.active; l = nl) {
            nl = l->next;
            struct nexar_request *r = nx_container_of(l, struct nexar_request, active_link);
            if (r->submitting && !r->failed && r->comm->fail &&
                r->tmpl.kind != NX_K_COMM_FREE && r->tmpl.kind != NX_K_COMM_SHRINK) {
                /* Mirror the daemon: a failed communicator fails what is queued.  Not
                 * its free: the daemon must hear that this rank left, or it counts the
                 * rank lost when its socket closes and keeps the communicator. */
                nx_req_fail(r, r->comm->fail, r->comm->fail_text);
                req_maybe_complete(r);
                continue;
            }
            if (r->mode == NX_MODE_STAGED || !eligible(r) || space == 0)
                continue;
            submit_unslotted(r);
            space--;
        }
        while (nx_S.free_slots > 0 && space > 0) {
            struct nexar_request *r = pick();
            if (!r)
                break;
            submit_chunk(r, slot_take());
            space--;
            if (!r->submitting)
                again = true; /* the next request of its stream may go now */
        }
        if (space == 0)
            break;
        if (!again)
            again = bounce_waiting(&space);
    }
    /* Held back by the cap, the next completion wakes us; by the ring, nothing does. */
    nx_S.sq_blocked = ring - (given - space) == 0;
    nx_ring_publish();
}

/* ---- completion ----------------------------------------------------------------- */

void nx_req_on_cqe(const struct nx_cqe *e)
{
    struct nexar_request *r;
    struct nx_slot *sl = NULL;
    uint32_t idx = (uint32_t)e->user_data;
    uint32_t gen = (uint32_t)(e->user_data >> 32) & GEN_MASK;
    if (e->user_data & UD_SLOT) {
        if (idx >= NX_SLOT_ENTRIES || !nx_S.slots[idx].req ||
            nx_S.slots[idx].gen != gen)
            return;
        sl = &nx_S.slots[idx];
        r = sl->req;
    } else {
        if (idx >= nx_S.reqtab_cap || !nx_S.reqtab[idx] || nx_S.reqgen[idx] != gen)
            return;
        r = nx_S.reqtab[idx];
    }
    if (r->inflight == 0)
        return;
    r->inflight--;
    nx_S.owed--;
    r->last_event_ns = nx_now_ns();

    nexar_status_t s = nx_status_from_wire(e->status);
    if (s == NEXAR_OK && nx_kind_is_collective(r->tmpl.kind)) {
        r->comm->algo_seen = true;
        r->comm->last_algo = e->algo;
    }
    if (s != NEXAR_OK) {
        char text[NX_ERR_TEXT_BYTES];
        nx_ring_err_text(e, text, sizeof(text));
        nx_req_fail(r, s, text);
    } else if (sl && e->pull_n) {
        /* Peer reads (pull.c): the chunk is this rank's to copy from its peers' slots, or
         * single copy, their buffers. */
        uint64_t out_rel, n = chunk_len(r, sl->chunk, &out_rel);
        if (r->single_copy)
            out_rel = 0;
        nx_pull_copy(r, sl, e, slot_base((uint32_t)(sl - nx_S.slots)) + out_rel, n);
        if (e->pull_hold) {
            /* Others read this slot: it is nexard's until the second completion. */
            sl->pulled = true;
            r->inflight++;
            nx_S.owed++;
            return;
        }
        r->done_units++;
    } else if (sl) {
        /* (A single-copy op's output never passes through its slot.) */
        if (!r->failed && !sl->pulled && !r->single_copy)
            copy_out(r, sl);
        r->done_units++;
    } else {
        if (r->bounce && !r->failed)
            bounce_out(r);
        r->res_comm = e->res_comm;
        r->res_rank = e->res_rank;
        r->res_size = e->res_size;
        r->res_plan = e->res_local & (NX_PLAN_LOCAL | NX_PLAN_CMA);
        r->done_units = r->nunits;
    }
    if (sl)
        slot_release(sl);
    req_maybe_complete(r);
}

void nx_req_abandon_all(nexar_status_t s, const char *text)
{
    for (uint32_t i = 0; i < NX_SLOT_ENTRIES && nx_S.slots; i++)
        if (nx_S.slots[i].req)
            slot_release(&nx_S.slots[i]);
    for (struct nx_list *l = nx_S.active.next, *nl; l != &nx_S.active; l = nl) {
        nl = l->next;
        struct nexar_request *r = nx_container_of(l, struct nexar_request, active_link);
        nx_req_fail(r, s, text);
        r->inflight = 0;
        req_maybe_complete(r);
    }
    nx_S.owed = 0;
}
