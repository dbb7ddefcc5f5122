/* shm_validate.c - the daemon's check of one descriptor copied out of a ring.
 * Stateless: the per-client checks (chunk order, sequence, comm membership) are the
 * daemon's; everything decidable from the descriptor and the segment is here. */
#include "shm_abi.h"

#include <errno.h>

#include "nexar.h"

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static bool extent_for(const struct nx_sqe *e, const struct nx_sqe_limits *lim,
                       const struct nx_shape *s, uint64_t *in_bytes, uint64_t *out_bytes)
{
    uint32_t es = nx_dtype_size(e->dtype);
    uint64_t elems, ib, ob;
    if (!s->has_data) {
        *in_bytes = *out_bytes = 0;
        return true;
    }
    if (e->flags & NX_SQE_DIRECT) {
        elems = e->count;
    } else {
        uint64_t per = nx_op_chunk_elems(e->kind, lim->comm_size, es, lim->slot_bytes,
                                         e->count, lim->comm_plan);
        uint64_t first;
        if (per == 0 || !mul_ok(per, e->chunk, &first))
            return false;
        elems = first >= e->count ? 0 : e->count - first;
        if (elems > per)
            elems = per;
    }
    if (!mul_ok(elems, s->in_mul, &ib) || !mul_ok(ib, es, &ib) ||
        !mul_ok(elems, s->out_mul, &ob) || !mul_ok(ob, es, &ob))
        return false;
    *in_bytes = ib;
    *out_bytes = ob;
    return true;
}

bool nx_sqe_extent(const struct nx_sqe *e, const struct nx_sqe_limits *lim,
                   uint64_t *in_bytes, uint64_t *out_bytes)
{
    struct nx_shape s;
    if (e->flags & NX_SQE_DEVICE) { /* in the arena: only the record's fixed part */
        *in_bytes = sizeof(struct nx_dev_op);
        *out_bytes = 0;
        return true;
    }
    if (e->flags & NX_SQE_CMA) { /* its buffers are in its process; its table in slot tag */
        *in_bytes = *out_bytes = 0;
        return true;
    }
    if (!nx_kind_shape(e->kind, lim->comm_size, lim->comm_rank, e->peer, &s))
        return false;
    return extent_for(e, lim, &s, in_bytes, out_bytes);
}

static bool inside(uint64_t off, uint64_t len, uint64_t limit)
{
    return len == 0 || (off <= limit && len <= limit - off);
}

#define REJECT(reason)                                                                     \
    do {                                                                                   \
        *why = (reason);                                                                   \
        return -EINVAL;                                                                    \
    } while (0)

/* A device descriptor carries no data in the arena, only its record. */
static int device_desc(const struct nx_sqe *e, const struct nx_sqe_limits *lim,
                       const char **why)
{
    if (e->count == 0)
        REJECT("a device descriptor with count 0");
    if (e->chunk != 0 || e->out_off != 0)
        REJECT("chunk or out_off on a device descriptor");
    if (e->in_off % 8)
        REJECT("device op record not 8-byte aligned");
    if (!inside(e->in_off, sizeof(struct nx_dev_op), lim->arena_bytes))
        REJECT("device op record outside the arena");
    return 0;
}

bool nx_dev_op_bytes(uint32_t niov, uint64_t *bytes)
{
    uint64_t t;
    if (!mul_ok(niov, sizeof(struct nx_dev_iov), &t))
        return false;
    *bytes = sizeof(struct nx_dev_op) + t;
    return true;
}

int nx_dev_op_check(const struct nx_sqe *e, const struct nx_dev_op *r, uint64_t arena_bytes,
                    const char **why)
{
    const char *dummy;
    uint64_t bytes;
    if (!why)
        why = &dummy;
    if (r->magic != NX_DEV_OP_MAGIC)
        REJECT("device op record has a bad magic");
    if (r->reserved != 0 || r->in.reserved != 0 || r->out.reserved != 0)
        REJECT("device op record: reserved field not zero");
    if (e->kind == NX_K_ALL_REDUCE_BUCKETED) {
        if (r->niov == 0 || r->niov > NX_DEV_MAX_IOV)
            REJECT("device op record: bucketed iov count out of range");
        if (r->in.mem != 0 || r->out.mem != 0)
            REJECT("device op record: bucketed names its buffers in the iovs");
    } else if (r->niov != 0) {
        REJECT("device op record: iovs on a kind that is not bucketed");
    }
    if (!nx_dev_op_bytes(r->niov, &bytes) || !inside(e->in_off, bytes, arena_bytes))
        REJECT("device op record: iov table outside the arena");
    if (r->done_off != NX_DEV_NO_DONE &&
        (r->done_off % 8 || !inside(r->done_off, sizeof(uint64_t), arena_bytes)))
        REJECT("device op record: done word misaligned or outside the arena");
    return 0;
}

int nx_sqe_validate(const struct nx_sqe *e, const struct nx_sqe_limits *lim,
                    const char **why)
{
    struct nx_shape s;
    const char *dummy;
    if (!why)
        why = &dummy;
    if (e->kind < 1 || e->kind > NX_K_MAX)
        REJECT("unknown op kind");
    if (e->flags & ~(NX_SQE_DIRECT | NX_SQE_DEVICE | NX_SQE_CMA))
        REJECT("unknown descriptor flags");
    if ((e->flags & NX_SQE_CMA) && (e->flags & (NX_SQE_DIRECT | NX_SQE_DEVICE)))
        REJECT("single-copy flag with NX_SQE_DIRECT or NX_SQE_DEVICE");
    if ((e->flags & NX_SQE_DEVICE) && !(e->flags & NX_SQE_DIRECT))
        REJECT("device descriptor flags without NX_SQE_DIRECT");
    if (e->reserved != 0)
        REJECT("reserved field not zero");
    if (e->dtype >= NEXAR_DTYPE_COUNT)
        REJECT("unknown dtype");
    if (nx_kind_has_redop(e->kind) ? e->redop >= NEXAR_OP_COUNT : e->redop != 0)
        REJECT("bad reduction op");
    if (lim->comm_size == 0 || lim->comm_rank >= lim->comm_size)
        REJECT("bad communicator geometry");
    if ((nx_kind_has_root(e->kind) || e->kind == NX_K_SEND || e->kind == NX_K_RECV) &&
        e->peer >= lim->comm_size)
        REJECT("root or peer out of range");
    if (!nx_kind_shape(e->kind, lim->comm_size, lim->comm_rank, e->peer, &s))
        REJECT("unknown op kind");

    if (e->kind == NX_K_PULLED) {
        /* Names a chunk of an op; nexard checks that it was given to this rank to read.
         * A reader that could not read says which rank's block failed (peer) and why
         * (tag: an errno). */
        if (e->flags || e->count || e->dtype || e->in_off || e->out_off ||
            (!e->tag && e->peer))
            REJECT("a pulled notice carries only comm, seq, chunk and a failure");
        if ((e->tag & ~NX_PULL_FAIL_WRITE) > NX_PULL_MAX_ERRNO || e->peer >= lim->comm_size ||
            (e->tag && !(e->tag & ~NX_PULL_FAIL_WRITE)))
            REJECT("a pulled notice's failure names no errno or no rank");
        return 0;
    }
    if (!s.has_data) {
        if (e->count != 0 || e->chunk != 0)
            REJECT("count or chunk on an op without data");
        if (e->flags & NX_SQE_DEVICE)
            REJECT("device flag on an op without data");
        if (e->flags & NX_SQE_CMA)
            REJECT("single-copy flag on an op without data");
        return 0;
    }

    uint32_t es = nx_dtype_size(e->dtype);
    uint64_t total;
    uint32_t mul = s.in_mul > s.out_mul ? s.in_mul : s.out_mul;
    if (!mul_ok(e->count, mul ? mul : 1, &total) || !mul_ok(total, es, &total))
        REJECT("count overflows");
    if (e->flags & NX_SQE_DEVICE)
        return device_desc(e, lim, why);
    if (nx_op_single_copy(e->kind, es, e->count, lim->comm_plan) != !!(e->flags & NX_SQE_CMA))
        REJECT(e->flags & NX_SQE_CMA ? "single-copy flag on an op that is not single-copy"
                                     : "a single-copy op without the single-copy flag");
    if (e->flags & NX_SQE_CMA) {
        if (e->chunk != 0)
            REJECT("chunk index on a single-copy descriptor");
        if ((s.in_mul == 0) != (e->in_off == 0) || (s.out_mul == 0) != (e->out_off == 0))
            REJECT("single-copy buffer address where the shape has none, or none where it "
                   "has one");
        uint64_t slot_off;
        if (!mul_ok(e->tag, lim->slot_bytes, &slot_off) ||
            /* the largest table nexard writes there, and room for a fold's scratch */
            nx_cma_scratch_off(lim->comm_size) >= lim->slot_bytes ||
            !inside(slot_off, lim->slot_bytes, lim->arena_bytes))
            REJECT("single-copy table slot outside the arena, or too small");
        return 0;
    }
    uint64_t per = nx_op_chunk_elems(e->kind, lim->comm_size, es, lim->slot_bytes, e->count,
                                     lim->comm_plan);
    if (per == 0)
        REJECT("staging slot too small for one element of this op");
    if (e->flags & NX_SQE_DIRECT) {
        if (e->chunk != 0)
            REJECT("chunk index on a direct descriptor");
    } else if (e->chunk >= nx_chunk_count(e->count, per)) {
        REJECT("chunk index beyond the op's plan");
    }

    uint64_t ib, ob;
    if (!extent_for(e, lim, &s, &ib, &ob))
        REJECT("extent overflows");
    if ((ib && e->in_off % es) || (ob && e->out_off % es))
        REJECT("offset not aligned to the element size");
    if (!inside(e->in_off, ib, lim->arena_bytes))
        REJECT("input outside the arena");
    if (!inside(e->out_off, ob, lim->arena_bytes))
        REJECT("output outside the arena");
    return 0;
}
