/* shm_abi.c - segment layout and the element geometry both sides compute alike. */
#include "shm_abi.h"

#include <errno.h>
#include <string.h>

#include "nexar.h"

_Static_assert(sizeof(struct nx_sqe) == 64, "sqe is 64 bytes");
_Static_assert(sizeof(struct nx_cqe) == 32, "cqe is 32 bytes");
_Static_assert(sizeof(struct nx_err_entry) == NX_ERR_TEXT_BYTES, "err entry size");
_Static_assert(sizeof(struct nx_ring_ctl) == 192, "ring ctl is three cache lines");
_Static_assert(sizeof(struct nx_dev_op) == 64, "device op record is 64 bytes");
_Static_assert(sizeof(struct nx_dev_iov) == 24, "device iov is 24 bytes");

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

static bool pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

#define NX_PAGE 4096u
#define NX_SLOT_MIN 4096u
#define NX_SLOT_MAX (1ull << 30)
#define NX_HEAP_MAX (64ull << 30)

uint64_t nx_shm_layout(const struct nx_shm_geom *g, struct nx_shm_hdr *h)
{
    if (!pow2_in(g->sq_entries, 8, 65536) || !pow2_in(g->cq_entries, 8, 65536) ||
        g->err_entries < 1 || g->err_entries > 4096 || g->slot_count < 1 ||
        g->slot_count > 64 || g->slot_bytes < NX_SLOT_MIN || g->slot_bytes > NX_SLOT_MAX ||
        g->slot_bytes % NX_SHM_ALIGN || g->heap_bytes > NX_HEAP_MAX ||
        g->heap_bytes % NX_SHM_ALIGN || g->max_pending < NX_PENDING_MIN ||
        g->max_pending > NX_PENDING_MAX)
        return 0;

    memset(h, 0, sizeof(*h));
    h->magic = NX_SHM_MAGIC;
    h->version = NX_SHM_VERSION;
    h->sq_entries = g->sq_entries;
    h->cq_entries = g->cq_entries;
    h->err_entries = g->err_entries;
    h->slot_count = g->slot_count;
    h->slot_bytes = g->slot_bytes;
    h->max_pending = g->max_pending;

    uint64_t off = align_up(sizeof(*h), NX_SHM_ALIGN);
    h->sq_ctl_off = off;
    off += sizeof(struct nx_ring_ctl);
    h->cq_ctl_off = off;
    off += sizeof(struct nx_ring_ctl);
    h->sq_off = off;
    off += (uint64_t)g->sq_entries * sizeof(struct nx_sqe);
    h->cq_off = align_up(off, NX_SHM_ALIGN);
    off = h->cq_off + (uint64_t)g->cq_entries * sizeof(struct nx_cqe);
    h->err_off = align_up(off, NX_SHM_ALIGN);
    off = h->err_off + (uint64_t)g->err_entries * sizeof(struct nx_err_entry);
    /* Page-aligned arena: the data pages never share a page with the rings. */
    h->arena_off = align_up(off, NX_PAGE);
    h->heap_off = (uint64_t)g->slot_count * g->slot_bytes;
    h->heap_bytes = g->heap_bytes;
    h->arena_bytes = h->heap_off + g->heap_bytes;
    h->total_bytes = align_up(h->arena_off + h->arena_bytes, NX_PAGE);
    return h->total_bytes;
}

int nx_shm_hdr_check(const struct nx_shm_hdr *h, uint64_t mapped_bytes)
{
    struct nx_shm_geom g = {
        .sq_entries = h->sq_entries,
        .cq_entries = h->cq_entries,
        .err_entries = h->err_entries,
        .slot_count = h->slot_count,
        .slot_bytes = h->slot_bytes,
        .heap_bytes = h->heap_bytes,
        .max_pending = h->max_pending,
    };
    struct nx_shm_hdr want;
    if (h->magic != NX_SHM_MAGIC || h->version != NX_SHM_VERSION)
        return -EPROTO;
    if (nx_shm_layout(&g, &want) == 0 || want.total_bytes > mapped_bytes)
        return -EPROTO;
    if (memcmp(&want, h, sizeof(want)) != 0)
        return -EPROTO;
    return 0;
}

bool nx_kind_shape(uint8_t kind, uint32_t size, uint32_t rank, uint32_t root,
                   struct nx_shape *s)
{
    bool is_root = rank == root;
    *s = (struct nx_shape){.in_mul = 1, .out_mul = 1, .alias_ok = true, .has_data = true};
    switch (kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        return true;
    case NX_K_BROADCAST:
        s->in_mul = is_root ? 1 : 0;
        s->out_mul = is_root ? 0 : 1;
        return true;
    case NX_K_REDUCE:
        s->out_mul = is_root ? 1 : 0;
        return true;
    case NX_K_ALL_GATHER:
        s->out_mul = size;
        s->alias_ok = false;
        return true;
    case NX_K_GATHER:
        s->out_mul = is_root ? size : 0;
        s->alias_ok = false;
        return true;
    case NX_K_REDUCE_SCATTER:
        s->in_mul = size;
        s->alias_ok = false;
        return true;
    case NX_K_SCATTER:
        s->in_mul = is_root ? size : 0;
        s->alias_ok = false;
        return true;
    case NX_K_ALL_TO_ALL:
        s->in_mul = size;
        s->out_mul = size;
        s->alias_ok = false;
        return true;
    case NX_K_SEND:
        s->out_mul = 0;
        return true;
    case NX_K_RECV:
        s->in_mul = 0;
        return true;
    case NX_K_BARRIER:
    case NX_K_SPLIT:
    case NX_K_COMM_FREE:
    case NX_K_COMM_ABORT:
    case NX_K_COMM_SHRINK:
    case NX_K_COMM_GROW:
    case NX_K_PULLED:
        *s = (struct nx_shape){0};
        return true;
    default:
        return false;
    }
}

static uint64_t shape_units(const struct nx_shape *s)
{
    if (s->alias_ok)
        return s->in_mul > s->out_mul ? s->in_mul : s->out_mul;
    return (uint64_t)s->in_mul + s->out_mul;
}

/* The slot bytes one element of a chunk takes in kind's largest shape (one element per
 * input and output block): 0 for a bad esize, size or kind, UINT64_MAX for a kind
 * without data. */
static uint64_t slot_elem_bytes(uint8_t kind, uint32_t size, uint32_t esize)
{
    struct nx_shape as_root, as_other;
    if (esize == 0 || size == 0)
        return 0;
    /* rank 0 with root 0 is a root; rank 1 with root 0 is not (size 1 has no other:
     * reusing the root shape is harmless). */
    if (!nx_kind_shape(kind, size, 0, 0, &as_root) ||
        !nx_kind_shape(kind, size, size > 1 ? 1 : 0, 0, &as_other))
        return 0;
    if (!as_root.has_data)
        return UINT64_MAX;
    uint64_t units = shape_units(&as_root);
    uint64_t other = shape_units(&as_other);
    return (uint64_t)esize * (other > units ? other : units);
}

uint64_t nx_chunk_elems(uint8_t kind, uint32_t size, uint32_t esize, uint64_t slot_bytes)
{
    uint64_t per_elem = slot_elem_bytes(kind, size, esize);
    return per_elem == 0 || per_elem == UINT64_MAX ? per_elem : slot_bytes / per_elem;
}

bool nx_op_single_copy(uint8_t kind, uint32_t esize, uint64_t count, unsigned plan)
{
    if (!(plan & NX_PLAN_CMA) || esize == 0)
        return false;
    switch (kind) {
    case NX_K_BROADCAST:
    case NX_K_ALL_GATHER:
    case NX_K_GATHER:
    case NX_K_SCATTER:
    case NX_K_ALL_TO_ALL:
    case NX_K_REDUCE_SCATTER:
        return count >= NX_CMA_MIN_BYTES / esize + (NX_CMA_MIN_BYTES % esize != 0);
    case NX_K_ALL_REDUCE:
    case NX_K_REDUCE:
        return count >= NX_CMA_MIN_REDUCE_BYTES / esize +
                            (NX_CMA_MIN_REDUCE_BYTES % esize != 0);
    default:
        return false;
    }
}

/* The chunk of an op on a communicator that is not local: at most NX_SPAN_CHUNK_BYTES of
 * slot, a multiple of NX_PIPE_ALIGN elements where that leaves any.  A kind where some
 * node only sends or only receives (broadcast, reduce, gather, scatter, scan, exscan)
 * keeps the capacity while a block is at most NX_SPAN_WHOLE_BYTES: cut, it waits for the
 * other nodes to start each part from the fifth on (docs/algorithms.md), a round trip
 * that parts this short do not hide.  Point to point is cut by nexard with
 * nx_chunk_elems (node/p2p.c). */
static uint64_t span_chunk_elems(uint8_t kind, uint32_t esize, uint64_t count, uint64_t cap,
                                 uint64_t per_elem)
{
    switch (kind) {
    case NX_K_SEND:
    case NX_K_RECV:
        return cap;
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
    case NX_K_ALL_GATHER:
    case NX_K_REDUCE_SCATTER:
    case NX_K_ALL_TO_ALL:
        break;
    default:
        if (count <= NX_SPAN_WHOLE_BYTES / esize)
            return cap;
        break;
    }
    uint64_t want = NX_SPAN_CHUNK_BYTES / per_elem;
    if (want >= NX_PIPE_ALIGN)
        want -= want % NX_PIPE_ALIGN;
    else if (want == 0)
        want = 1;
    return want < cap ? want : cap;
}

uint64_t nx_op_chunk_elems(uint8_t kind, uint32_t size, uint32_t esize, uint64_t slot_bytes,
                           uint64_t count, unsigned plan)
{
    uint64_t per_elem = slot_elem_bytes(kind, size, esize);
    if (per_elem == 0 || per_elem == UINT64_MAX)
        return per_elem;
    if (nx_op_single_copy(kind, esize, count, plan))
        return count;
    uint64_t cap = slot_bytes / per_elem;
    if (!(plan & NX_PLAN_LOCAL))
        return span_chunk_elems(kind, esize, count, cap, per_elem);
    if ((kind != NX_K_BROADCAST && kind != NX_K_ALL_GATHER) || cap == 0 ||
        count > NX_PIPE_SLOTS * cap)
        return cap;
    uint64_t want = count / NX_PIPE_CHUNKS + (count % NX_PIPE_CHUNKS != 0);
    uint64_t min = kind == NX_K_BROADCAST ? NX_PIPE_MIN_BCAST_BYTES : NX_PIPE_MIN_BYTES;
    uint64_t least = min / esize + (min % esize != 0);
    /* An all_gather of at most two such chunks still gets two, which its peer reads
     * need (daemon/node/pull.c). */
    uint64_t half = count > 1 ? count / 2 + count % 2 : 1;
    if (kind == NX_K_ALL_GATHER && least > half)
        least = half;
    if (want < least)
        want = least;
    want = (want + NX_PIPE_ALIGN - 1) / NX_PIPE_ALIGN * NX_PIPE_ALIGN;
    return want < cap ? want : cap;
}

uint32_t nx_stream_slot_cap(uint32_t slot_count)
{
    uint32_t cap = slot_count > 1 ? slot_count - 1 : 1;
    return cap < NX_MAX_SLOTS_PER_STREAM ? cap : NX_MAX_SLOTS_PER_STREAM;
}

bool nx_chunk_is_cut(uint8_t kind, uint32_t size, uint32_t esize, uint64_t slot_bytes,
                     uint64_t chunk_elems)
{
    return chunk_elems != nx_chunk_elems(kind, size, esize, slot_bytes);
}

uint64_t nx_chunk_count(uint64_t count, uint64_t chunk_elems)
{
    if (chunk_elems == 0)
        return 0;
    if (count == 0)
        return 1;
    return count / chunk_elems + (count % chunk_elems != 0);
}

const char *nx_algo_code_name(uint32_t code)
{
    static const char *const names[] = {"local", "ring", "rd", "hd", "tree", "pairwise",
                                        "dissemination", "hillis-steele"};
    return code < sizeof(names) / sizeof(names[0]) ? names[code] : "?";
}

uint32_t nx_dtype_size(uint8_t dtype)
{
    static const uint8_t sizes[NEXAR_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};
    return dtype < NEXAR_DTYPE_COUNT ? sizes[dtype] : 0;
}

const char *nx_kind_name(uint8_t kind)
{
    static const char *const names[] = {
        [NX_K_ALL_REDUCE] = "all_reduce",
        [NX_K_BROADCAST] = "broadcast",
        [NX_K_REDUCE] = "reduce",
        [NX_K_ALL_GATHER] = "all_gather",
        [NX_K_REDUCE_SCATTER] = "reduce_scatter",
        [NX_K_GATHER] = "gather",
        [NX_K_SCATTER] = "scatter",
        [NX_K_ALL_TO_ALL] = "all_to_all",
        [NX_K_SCAN] = "scan",
        [NX_K_EXSCAN] = "exscan",
        [NX_K_ALL_REDUCE_BUCKETED] = "all_reduce_bucketed",
        [NX_K_BARRIER] = "barrier",
        [NX_K_SEND] = "send",
        [NX_K_RECV] = "recv",
        [NX_K_SPLIT] = "split",
        [NX_K_COMM_FREE] = "comm_free",
        [NX_K_COMM_ABORT] = "comm_abort",
        [NX_K_COMM_SHRINK] = "comm_shrink",
        [NX_K_COMM_GROW] = "comm_grow",
        [NX_K_PULLED] = "pulled",
    };
    return kind >= 1 && kind <= NX_K_MAX ? names[kind] : "?";
}

const char *nx_dtype_name(uint8_t dtype)
{
    static const char *const names[NEXAR_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16", "i8",
                                                         "u8",  "i32", "u32", "i64",  "u64"};
    return dtype < NEXAR_DTYPE_COUNT ? names[dtype] : "?";
}

const char *nx_redop_name(uint8_t redop)
{
    static const char *const names[NEXAR_OP_COUNT] = {"sum", "prod", "min", "max"};
    return redop < NEXAR_OP_COUNT ? names[redop] : "?";
}

bool nx_kind_has_redop(uint8_t kind)
{
    switch (kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
    case NX_K_REDUCE:
    case NX_K_REDUCE_SCATTER:
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        return true;
    default:
        return false;
    }
}

bool nx_kind_has_root(uint8_t kind)
{
    return kind == NX_K_BROADCAST || kind == NX_K_REDUCE || kind == NX_K_GATHER ||
           kind == NX_K_SCATTER;
}

const char *nx_status_text(uint32_t status)
{
    static const char *const texts[] = {
        [NEXAR_OK] = "success",
        [NEXAR_ERR_INVALID] = "invalid argument",
        [NEXAR_ERR_UNAVAILABLE] = "nexard unavailable",
        [NEXAR_ERR_MISMATCH] = "ranks called mismatched operations",
        [NEXAR_ERR_TIMEOUT] = "operation timed out",
        [NEXAR_ERR_PEER_LOST] = "a peer rank was lost",
        [NEXAR_ERR_ABORTED] = "communicator aborted",
        [NEXAR_ERR_NOMEM] = "out of memory",
        [NEXAR_ERR_UNSUPPORTED] = "unsupported",
        [NEXAR_ERR_PERMISSION] = "permission denied",
        [NEXAR_ERR_INTERNAL] = "internal error",
    };
    return status < sizeof(texts) / sizeof(texts[0]) ? texts[status] : "unknown status";
}
