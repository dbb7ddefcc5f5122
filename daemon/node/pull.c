/*
 * pull.c - chunks that the ranks move themselves, by reading each other's staging slots
 * (peer reads, shm_abi.h).  nexard's copy of a broadcast, all_gather, gather, scatter or
 * all_to_all chunk was the middle one of three (into the source's slot, into the reader's
 * slot, out of it): here the reader copies from the source's slot straight into its
 * output, so a chunk costs two copies, made by the ranks in parallel, and nexard only
 * says where to read and when a slot may be reused.  A reduce_scatter chunk goes the same
 * way: each rank folds its block of every rank's slot into its output, so the reduction
 * runs on all the ranks' CPUs at once instead of nexard's, and no copy out follows it.
 * A single-copy op (NX_SQE_CMA) goes the same way with one chunk, its table naming the
 * sources' buffers in their processes instead of their slots: one copy a block.
 */
#include "op.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "comm.h"
#include "context.h"
#include "mem.h"
#include "nexar.h"

static bool part_pulls(const struct nx_part *p, uint64_t in_bytes, bool cma)
{
    if (nx_part_direct(p) || p->q_head == p->q_len || p->client->pull_index == NX_PULL_NONE)
        return false;
    if (cma) /* its input is in its process, where process_vm_readv checks every byte */
        return true;
    /* A source's input must lie in its slots, which end where the heap starts: that is
     * all a reader maps. */
    const struct nx_staged *st = &p->q[p->q_head];
    uint64_t slots_end = p->client->seg.hdr.heap_off;
    return st->in_off <= slots_end && in_bytes <= slots_end - st->in_off;
}

/* Whether reader r reads from source s's slot in kind's chunk, and which block of its
 * output (*out_blk) that is, from which block of s's input (*in_blk).  A rank may read its
 * own slot (gather's root, scatter's root, all_to_all): that makes it no source.  Every
 * rank of a kind here reads or is read (nx_pull_chunk completes it either way). */
static bool reads(uint8_t kind, uint32_t root, uint32_t r, uint32_t s, uint32_t *out_blk,
                  uint32_t *in_blk)
{
    *out_blk = s;
    *in_blk = 0;
    switch (kind) {
    case NX_K_BROADCAST:
        *out_blk = 0;
        return r != root && s == root;
    case NX_K_ALL_GATHER: /* the rank's own block is its shim's (shm_abi.h) */
        return r != s;
    case NX_K_GATHER:
        return r == root;
    case NX_K_SCATTER:
        *out_blk = 0;
        *in_blk = r;
        return s == root;
    case NX_K_ALL_TO_ALL:
        *in_blk = r;
        return true;
    /* A reducing reader's entries come in rank order, its own block among them: the shim
     * folds them in that order, as nexard's kernel would (reduce.h).  (An all_reduce's
     * staged output shares its slot with the input its peers read: no room for a table.) */
    case NX_K_REDUCE_SCATTER:
        *out_blk = 0;
        *in_blk = r;
        return true;
    default:
        return false;
    }
}

static bool kind_pulls(uint8_t kind)
{
    uint32_t o, i;
    return reads(kind, 0, 1, 0, &o, &i) || reads(kind, 0, 0, 0, &o, &i);
}

static bool qualifies(const struct nx_op *op, uint64_t n)
{
    const struct nx_comm *c = op->comm;
    uint8_t kind = op->sig.kind;
    uint32_t es = nx_dtype_size(op->sig.dtype);
    uint64_t bytes = n * es;
    /* A reduction gains from one chunk on: the fold moves from nexard to every rank at
     * once, and no copy out follows it.  Below 256 KiB of block nexard's fold on its loop
     * was faster than the reader's notice and the second completion (performance.md). */
    bool reduce = kind == NX_K_REDUCE_SCATTER, cma = op->sig.flags & NX_SQE_CMA;
    /* A single-copy op is one chunk: its readers copy it from the sources' buffers, so
     * no slot is refilled behind them.  Which ops are is nx_op_single_copy's to say (an
     * all_reduce among them, which the slots never pull). */
    if (c->x || !c->plan_local || (op->sig.flags & NX_SQE_DEVICE) || c->size < 2 ||
        c->size > NX_PULL_MAX_RANKS)
        return false;
    if (!cma && (!kind_pulls(kind) ||
                 bytes < (reduce ? NX_PULL_MIN_REDUCE_BYTES : NX_PULL_MIN_BYTES) ||
                 op->nchunks < (reduce ? 1u : 2u)))
        return false;
    for (uint32_t r = 0; r < c->size; r++) {
        struct nx_shape sh;
        nx_kind_shape(kind, c->size, r, op->sig.peer, &sh);
        if (!part_pulls(&op->parts[r], sh.in_mul * bytes, cma))
            return false;
    }
    return true;
}

static void ring_alloc(struct nx_op *op)
{
    if (op->pull_owe)
        return;
    /* A source holds a slot for every chunk of it still read, so no more than its slots
     * can be: nx_pull_room enforces it for a rank that claims otherwise. */
    op->pull_win = nxd.cfg.slots;
    op->pull_owe = nx_xcalloc(op->pull_win, sizeof(*op->pull_owe));
    op->pull_src = nx_xcalloc(op->pull_win, sizeof(*op->pull_src));
    op->pull_ud = nx_xcalloc((size_t)op->pull_win * op->comm->size, sizeof(*op->pull_ud));
    op->pull_rel = op->next_chunk;
}

bool nx_pull_room(const struct nx_op *op)
{
    return !op->pull_owe || op->next_chunk - op->pull_rel < op->pull_win;
}

/* Reader r's entries of a chunk of peer reads of slots: each block it reads, by offset in
 * the source's segment. */
static uint32_t slot_table(const struct nx_op *op, uint32_t r, uint64_t bytes,
                           struct nx_pull *t)
{
    uint32_t k = 0, ob, ib;
    for (uint32_t s = 0; s < op->comm->size; s++) {
        if (!reads(op->sig.kind, op->sig.peer, r, s, &ob, &ib))
            continue;
        const struct nx_part *ps = &op->parts[s];
        t[k++] = (struct nx_pull){
            .peer = ps->client->pull_index,
            .block = ob,
            .off = ps->client->seg.hdr.arena_off + ps->q[ps->q_head].in_off + ib * bytes,
            .bytes = bytes,
            .rank = s,
        };
    }
    return k;
}

/* Where rank r's part of an all_reduce of n elements starts: r/P of it, on 64 elements
 * (a cache line of the widest), the last part ending at n. */
static uint64_t part_start(uint64_t n, uint32_t r, uint32_t P)
{
    if (r >= P)
        return n;
    return (n / P * r + n % P * r / P) / 64 * 64;
}

/* Rank r's entries of a single-copy op, by address in its peers' processes.  A large
 * broadcast is split: each reader reads the first (P-1)/P of the block from the root while
 * the root writes the rest into every reader (page-aligned), so that every CPU copies as
 * much.  A gather's ranks write their blocks into the root's output, all at once.  The
 * other kinds read, as from slots. */
static uint32_t cma_table(const struct nx_op *op, uint32_t r, uint64_t bytes,
                          struct nx_pull *t)
{
    uint32_t P = op->comm->size, root = op->sig.peer, k = 0, ob, ib;
#define PART(x) (&op->parts[x].q[op->parts[x].q_head])
#define PI(x) (op->parts[x].client->pull_index)
    if (op->sig.kind == NX_K_BROADCAST && bytes >= NX_CMA_SPLIT_BYTES) {
        uint64_t cut = bytes / P * (P - 1) / 4096 * 4096;
        if (r != root) {
            t[k++] = (struct nx_pull){.peer = PI(root), .off = PART(root)->in_off,
                                      .bytes = cut, .rank = root};
            return k;
        }
        for (uint32_t s = 0; s < P; s++)
            if (s != root)
                t[k++] = (struct nx_pull){.peer = PI(s), .off = PART(s)->out_off + cut,
                                          .bytes = bytes - cut, .at = cut, .rank = s,
                                          .flags = NX_PULL_WRITE};
        return k;
    }
    if (op->sig.kind == NX_K_ALL_REDUCE || op->sig.kind == NX_K_REDUCE ||
        op->sig.kind == NX_K_REDUCE_SCATTER) {
        /* Part r of every buffer is rank r's alone: it folds part r of every rank's input
         * in rank order, and an all_reduce's rank writes the result into every peer's
         * output, a reduce's into the root's.  Their parts are cut on 64 elements; a
         * reduce_scatter's part is the rank's block. */
        bool ar = op->sig.kind != NX_K_REDUCE_SCATTER;
        uint32_t es = nx_dtype_size(op->sig.dtype);
        uint64_t n = bytes / es, lo = ar ? part_start(n, r, P) : 0,
                 hi = ar ? part_start(n, r + 1, P) : n;
        uint64_t at = lo * es, len = (hi - lo) * es, src = ar ? at : (uint64_t)r * bytes;
        if (len == 0)
            return 0;
        for (uint32_t s = 0; s < P; s++)
            t[k++] = (struct nx_pull){.peer = PI(s), .off = PART(s)->in_off + src,
                                      .bytes = len, .at = at, .rank = s,
                                      .flags = NX_PULL_REDUCE};
        for (uint32_t s = 0; ar && s < P; s++)
            if (s != r && (op->sig.kind == NX_K_ALL_REDUCE || s == root))
                t[k++] = (struct nx_pull){.peer = PI(s), .off = PART(s)->out_off + at,
                                          .bytes = len, .at = at, .rank = s,
                                          .flags = NX_PULL_WRITE};
        return k;
    }
    if (op->sig.kind == NX_K_GATHER) {
        if (r != root) /* its block into the root's output */
            t[k++] = (struct nx_pull){.peer = PI(root), .off = PART(root)->out_off + r * bytes,
                                      .bytes = bytes, .rank = root, .flags = NX_PULL_WRITE};
        else /* the root's own block, in its process */
            t[k++] = (struct nx_pull){.peer = PI(r), .block = r, .off = PART(r)->in_off,
                                      .bytes = bytes, .rank = r};
        return k;
    }
    for (uint32_t s = 0; s < P; s++)
        if (reads(op->sig.kind, root, r, s, &ob, &ib))
            t[k++] = (struct nx_pull){.peer = PI(s), .block = ob,
                                      .off = PART(s)->in_off + ib * bytes, .bytes = bytes,
                                      .rank = s};
#undef PART
#undef PI
    return k;
}

bool nx_pull_chunk(struct nx_op *op, uint64_t n)
{
    struct nx_comm *c = op->comm;
    if (!qualifies(op, n))
        return false;
    ring_alloc(op);
    bool cma = op->sig.flags & NX_SQE_CMA;
    uint32_t P = c->size, w = (uint32_t)(op->next_chunk % op->pull_win);
    uint32_t owe = 0, src = 0, nent[NX_PULL_MAX_RANKS] = {0};
    uint64_t bytes = n * nx_dtype_size(op->sig.dtype), moved = 0;
    /* Tables first, for every reader, while every part's oldest descriptor is this chunk.
     * A rank another reads from, or writes into, is held until they all said so. */
    for (uint32_t r = 0; r < P; r++) {
        struct nx_part *p = &op->parts[r];
        const struct nx_staged *st = &p->q[p->q_head];
        struct nx_pull t[NX_PULL_MAX_ENTRIES];
        uint32_t k = cma ? cma_table(op, r, bytes, t) : slot_table(op, r, bytes, t);
        uint8_t *at = p->client->seg.arena +
                      (cma ? (uint64_t)st->table_slot * p->client->seg.hdr.slot_bytes
                           : st->out_off);
        memcpy(at, t, (size_t)k * sizeof(*t));
        for (uint32_t i = 0; i < k; i++) {
            moved += t[i].bytes;
            if (t[i].rank != r)
                src |= 1u << t[i].rank;
        }
        if (k) {
            owe |= 1u << r;
            nent[r] = k;
        }
    }
    for (uint32_t r = 0; r < P; r++) {
        struct nx_part *p = &op->parts[r];
        uint64_t ud = p->q[p->q_head].user_data;
        bool reader = owe & (1u << r), read = src & (1u << r);
        if (reader) {
            struct nx_done d = {.user_data = ud, .pull_n = nent[r], .pull_hold = read};
            nx_client_complete(p->client, &d, NULL);
        }
        if (read)
            op->pull_ud[(size_t)w * P + r] = ud;
        else
            p->client->pending--;
        p->q_head++;
    }
    op->pull_owe[w] = owe;
    op->pull_src[w] = src;
    nxd.stats.chunks++;
    nxd.stats.bytes_pulled += moved;
    return true;
}

static void complete_held(struct nx_op *op, uint32_t w, uint32_t status, const char *text)
{
    uint32_t P = op->comm->size;
    for (uint32_t r = 0; r < P; r++) {
        if (!(op->pull_src[w] & (1u << r)))
            continue;
        struct nx_client *cl = op->parts[r].client;
        struct nx_done d = {.user_data = op->pull_ud[(size_t)w * P + r], .status = status};
        nx_client_complete(cl, &d, text);
        cl->pending--;
    }
    op->pull_src[w] = 0;
    op->pull_owe[w] = 0;
}

bool nx_pull_release(struct nx_op *op)
{
    if (!op->pull_owe)
        return true;
    /* A reader found a peer gone: the op ends failed, whoever says so first (matcher.c),
     * never as if every part had arrived. */
    if (op->gone_tag)
        return false;
    /* In chunk order, so that a source's slots come back in the order it filled them. */
    while (op->pull_rel < op->next_chunk) {
        uint32_t w = (uint32_t)(op->pull_rel % op->pull_win);
        if (op->pull_owe[w])
            return false;
        complete_held(op, w, NEXAR_OK, NULL);
        op->pull_rel++;
    }
    return true;
}

bool nx_pull_done(struct nx_op *op, uint32_t rank, uint32_t chunk, char *why, size_t len)
{
    if (!op->pull_owe || rank >= 32 || chunk < op->pull_rel || chunk >= op->next_chunk ||
        !(op->pull_owe[chunk % op->pull_win] & (1u << rank))) {
        snprintf(why, len, "said it read chunk %u of op %" PRIu64 " on comm %u, which it was "
                 "not given to read", chunk, op->seq, op->comm->id);
        return false;
    }
    op->pull_owe[chunk % op->pull_win] &= ~(1u << rank);
    op->started = nx_now(); /* the deadline measures lack of progress */
    return true;
}

/* A failed single-copy op whose held ranks wait for the live ranks that still copy.
 * A copy may write into a held rank's buffer (a split broadcast, a gather, an
 * all_reduce): that rank must not hear that its op ended, failed or not, and go on to
 * free or reuse the buffer, while a peer still writes into it.  (A failed op's slots are
 * only read, and a reader of a reused slot fails anyway.) */
struct nx_pull_drain {
    struct nx_pull_drain *next;
    uint64_t seq;
    double since; /* the op's last progress */
    uint32_t owe, held; /* ranks still copying; ranks to complete */
    uint64_t ud[NX_PULL_MAX_RANKS];
};

static void drain_complete(struct nx_comm *c, struct nx_pull_drain *d)
{
    for (uint32_t r = 0; r < c->size && r < NX_PULL_MAX_RANKS; r++) {
        struct nx_client *cl = c->ranks[r].client;
        if (!(d->held & (1u << r)) || !cl)
            continue;
        struct nx_done done = {.user_data = d->ud[r], .status = c->failed_status};
        nx_client_complete(cl, &done, c->failed_text);
        cl->pending--;
    }
}

void nx_pull_fail(struct nx_op *op)
{
    if (!op->pull_owe)
        return;
    struct nx_comm *c = op->comm;
    uint32_t live = 0;
    for (uint32_t r = 0; r < c->size && r < NX_PULL_MAX_RANKS; r++)
        if (c->ranks[r].client)
            live |= 1u << r;
    for (; op->pull_rel < op->next_chunk; op->pull_rel++) {
        uint32_t w = (uint32_t)(op->pull_rel % op->pull_win);
        if (!(op->sig.flags & NX_SQE_CMA) || !(op->pull_owe[w] & live) || !op->pull_src[w]) {
            complete_held(op, w, c->failed_status, c->failed_text);
            continue;
        }
        struct nx_pull_drain *d = nx_xcalloc(1, sizeof(*d));
        d->seq = op->seq;
        /* The deadline measures lack of progress, as the op's did: an op that failed by
         * timing out has no more to wait. */
        d->since = op->started;
        d->owe = op->pull_owe[w] & live;
        d->held = op->pull_src[w];
        for (uint32_t r = 0; r < c->size && r < NX_PULL_MAX_RANKS; r++)
            d->ud[r] = op->pull_ud[(size_t)w * c->size + r];
        d->next = c->match.drains;
        c->match.drains = d;
        op->pull_src[w] = op->pull_owe[w] = 0;
    }
}

/* Completes and frees the drains that no live rank copies into any more, and those whose
 * op made its last progress at `cutoff` or before. */
static void drain_sweep(struct nx_comm *c, double cutoff)
{
    for (struct nx_pull_drain **pp = &c->match.drains, *d; (d = *pp);) {
        if (d->owe && d->since > cutoff) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        drain_complete(c, d);
        free(d);
    }
}

void nx_pull_drain_done(struct nx_comm *c, uint64_t seq, uint32_t rank)
{
    for (struct nx_pull_drain *d = c->match.drains; d; d = d->next)
        if (d->seq == seq && rank < NX_PULL_MAX_RANKS)
            d->owe &= ~(1u << rank);
    drain_sweep(c, -INFINITY);
}

void nx_pull_drain_leave(struct nx_comm *c, uint32_t rank)
{
    if (rank >= NX_PULL_MAX_RANKS)
        return;
    for (struct nx_pull_drain *d = c->match.drains; d; d = d->next) {
        d->owe &= ~(1u << rank);
        d->held &= ~(1u << rank);
    }
    drain_sweep(c, -INFINITY);
}

void nx_pull_drain_tick(struct nx_comm *c, double now, bool all)
{
    /* A rank that does not come back to copy within the deadline of the op's last
     * progress is hung: its peers may not wait for it forever (docs/shm-protocol.md says
     * what that leaves). */
    drain_sweep(c, all ? INFINITY : now - c->timeout_ms / 1000.0);
}

bool nx_pull_involves(const struct nx_op *op, uint32_t rank)
{
    if (!op->pull_owe || rank >= 32)
        return false;
    for (uint64_t c = op->pull_rel; c < op->next_chunk; c++) {
        uint32_t w = (uint32_t)(c % op->pull_win);
        if ((op->pull_owe[w] | op->pull_src[w]) & (1u << rank))
            return true;
    }
    return false;
}

uint32_t nx_pull_owing(const struct nx_op *op)
{
    if (!op->pull_owe || op->pull_rel >= op->next_chunk)
        return 0;
    return op->pull_owe[op->pull_rel % op->pull_win];
}

void nx_pull_waiting(const struct nx_op *op, char *buf, size_t len)
{
    size_t off = 0;
    uint32_t owe = nx_pull_owing(op);
    buf[0] = '\0';
    for (uint32_t r = 0; r < op->comm->size && r < 32 && off < len; r++)
        if (owe & (1u << r))
            off += (size_t)snprintf(buf + off, len - off, "%s%u", off ? ", " : "", r);
}
