/*
 * test_shm_abi.c - unit tests of proto/shm_abi.c and proto/shm_validate.c: the
 * segment layout and its check, the op shapes and chunk plan, the name tables,
 * and the daemon's validation of submission descriptors.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"
#include "nexar.h"
#include "shm_abi.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* ---- layout ------------------------------------------------------------------ */

static const struct nx_shm_geom default_geom = {
    .sq_entries = 256, .cq_entries = 256, .err_entries = 64, .slot_count = 4,
    .slot_bytes = 4 * MIB, .heap_bytes = 256 * MIB, .max_pending = 4096,
};

struct region {
    const char *name;
    uint64_t off, bytes;
};

static void check_layout(const struct nx_shm_geom *g)
{
    struct nx_shm_hdr h;
    memset(&h, 0xa5, sizeof h);
    uint64_t total = nx_shm_layout(g, &h);
    EXPECT(total != 0);
    if (total == 0)
        return;
    EXPECT_EQ(h.total_bytes, total);
    EXPECT_EQ(h.magic, NX_SHM_MAGIC);
    EXPECT_EQ(h.version, NX_SHM_VERSION);
    EXPECT_EQ(h.sq_entries, g->sq_entries);
    EXPECT_EQ(h.cq_entries, g->cq_entries);
    EXPECT_EQ(h.err_entries, g->err_entries);
    EXPECT_EQ(h.slot_count, g->slot_count);
    EXPECT_EQ(h.slot_bytes, g->slot_bytes);
    EXPECT_EQ(h.heap_off, (uint64_t)g->slot_count * g->slot_bytes);
    EXPECT_EQ(h.heap_bytes, g->heap_bytes);
    EXPECT_EQ(h.arena_bytes, h.heap_off + g->heap_bytes);
    EXPECT_EQ(total % 4096, 0);
    EXPECT_EQ(h.arena_off % 4096, 0); /* data pages never share a page with rings */

    /* In order, aligned, not overlapping, inside the segment. */
    const struct region r[] = {
        {"hdr", 0, sizeof(struct nx_shm_hdr)},
        {"sq_ctl", h.sq_ctl_off, sizeof(struct nx_ring_ctl)},
        {"cq_ctl", h.cq_ctl_off, sizeof(struct nx_ring_ctl)},
        {"sq", h.sq_off, (uint64_t)g->sq_entries * sizeof(struct nx_sqe)},
        {"cq", h.cq_off, (uint64_t)g->cq_entries * sizeof(struct nx_cqe)},
        {"err", h.err_off, (uint64_t)g->err_entries * sizeof(struct nx_err_entry)},
        {"arena", h.arena_off, h.arena_bytes},
    };
    const size_t n = sizeof r / sizeof r[0];
    for (size_t i = 0; i < n; i++) {
        if (r[i].off % NX_SHM_ALIGN) {
            fprintf(stderr, "layout: %s at %llu is not 64-byte aligned\n", r[i].name,
                    (unsigned long long)r[i].off);
            failures++;
        }
        if (i + 1 < n && r[i].off + r[i].bytes > r[i + 1].off) {
            fprintf(stderr, "layout: %s [%llu, +%llu) overlaps %s at %llu\n", r[i].name,
                    (unsigned long long)r[i].off, (unsigned long long)r[i].bytes,
                    r[i + 1].name, (unsigned long long)r[i + 1].off);
            failures++;
        }
    }
    EXPECT(h.arena_off + h.arena_bytes <= total);
    EXPECT(total - (h.arena_off + h.arena_bytes) < 4096);

    /* The header just laid out passes the rank's check. */
    EXPECT_EQ(nx_shm_hdr_check(&h, total), 0);
}

static void test_layout(void)
{
    check_layout(&default_geom);
    static const uint32_t rings[] = {8, 16, 256, 1024, 65536};
    static const uint64_t slots[] = {4096, 4096 + 64, MIB, 4 * MIB, GIB};
    for (size_t a = 0; a < 5; a++) {
        for (size_t b = 0; b < 5; b++) {
            struct nx_shm_geom g = default_geom;
            g.sq_entries = rings[a];
            g.cq_entries = rings[4 - a];
            g.slot_bytes = slots[b];
            g.slot_count = (uint32_t)(1 + a * 15);
            g.err_entries = (uint32_t)(1 + b * 1000);
            g.heap_bytes = b * 64 * 1000;
            check_layout(&g);
        }
    }
    /* The bounds themselves. */
    struct nx_shm_geom g = default_geom;
    g.slot_count = 64;
    g.err_entries = 4096;
    g.heap_bytes = 64 * GIB;
    check_layout(&g);
    g = default_geom;
    g.heap_bytes = 0;
    check_layout(&g);
}

static void test_layout_rejects(void)
{
    struct {
        const char *what;
        struct nx_shm_geom g;
    } bad[32];
    int n = 0;
#define BAD(field, value)                                                          \
    do {                                                                           \
        bad[n].what = #field " = " #value;                                         \
        bad[n].g = default_geom;                                                   \
        bad[n].g.field = (value);                                                  \
        n++;                                                                       \
    } while (0)
    BAD(sq_entries, 0);
    BAD(sq_entries, 4);
    BAD(sq_entries, 100);
    BAD(sq_entries, 131072);
    BAD(cq_entries, 0);
    BAD(cq_entries, 255);
    BAD(cq_entries, 131072);
    BAD(err_entries, 0);
    BAD(err_entries, 4097);
    BAD(slot_count, 0);
    BAD(slot_count, 65);
    BAD(slot_bytes, 0);
    BAD(slot_bytes, 4032);
    BAD(slot_bytes, 4096 + 32);
    BAD(slot_bytes, GIB + 64);
    BAD(heap_bytes, 100);
    BAD(heap_bytes, 64 * GIB + 64);
    BAD(heap_bytes, UINT64_MAX);
    BAD(slot_bytes, UINT64_MAX);
    BAD(max_pending, 0);
    BAD(max_pending, 15);
    BAD(max_pending, (1u << 24) + 1);
#undef BAD
    for (int i = 0; i < n; i++) {
        struct nx_shm_hdr h;
        if (nx_shm_layout(&bad[i].g, &h) != 0) {
            fprintf(stderr, "nx_shm_layout accepted %s\n", bad[i].what);
            failures++;
        }
    }
}

static void test_hdr_check(void)
{
    struct nx_shm_hdr good, h;
    uint64_t total = nx_shm_layout(&default_geom, &good);
    EXPECT(total != 0);

    EXPECT_EQ(nx_shm_hdr_check(&good, total), 0);
    EXPECT_EQ(nx_shm_hdr_check(&good, total + 4096), 0);
    EXPECT_EQ(nx_shm_hdr_check(&good, total - 1), -EPROTO); /* mapping too small */
    EXPECT_EQ(nx_shm_hdr_check(&good, 0), -EPROTO);

#define TAMPER(stmt)                                                               \
    do {                                                                           \
        h = good;                                                                  \
        stmt;                                                                      \
        if (nx_shm_hdr_check(&h, total + GIB) != -EPROTO) {                         \
            fprintf(stderr, "nx_shm_hdr_check accepted: %s\n", #stmt);             \
            failures++;                                                            \
        }                                                                          \
    } while (0)
    TAMPER(h.magic ^= 1);
    TAMPER(h.version = NX_SHM_VERSION + 1);
    TAMPER(h.total_bytes += 4096);
    TAMPER(h.total_bytes = 0);
    TAMPER(h.sq_entries = 100);
    TAMPER(h.sq_entries = 512);
    TAMPER(h.cq_entries = 128);
    TAMPER(h.err_entries = 0);
    TAMPER(h.slot_count = 0);
    TAMPER(h.slot_count = 1000);
    TAMPER(h.slot_bytes = 123);
    TAMPER(h.sq_ctl_off += 64);
    TAMPER(h.cq_ctl_off = h.sq_ctl_off);
    TAMPER(h.sq_off += 64);
    TAMPER(h.cq_off -= 64);
    TAMPER(h.err_off = 0);
    TAMPER(h.arena_off += 4096);
    TAMPER(h.arena_bytes += 64);
    TAMPER(h.heap_off -= 64);
    TAMPER(h.heap_bytes = UINT64_MAX);
    TAMPER(h.max_pending = 8);
    TAMPER(h.max_pending = UINT32_MAX);
    TAMPER(h.reserved = 1);
#undef TAMPER
}

/* ---- shapes and chunk plan -------------------------------------------------------- */

/* The table of shm_abi.h, written out again: in_mul, out_mul, alias, has_data,
 * for root (rank == root) and for a non-root, with S standing for the size. */
#define S 1000u
static const struct {
    uint8_t kind;
    struct nx_shape root, other;
} shape_table[] = {
    {NX_K_ALL_REDUCE, {1, 1, true, true}, {1, 1, true, true}},
    {NX_K_BROADCAST, {1, 0, true, true}, {0, 1, true, true}},
    {NX_K_REDUCE, {1, 1, true, true}, {1, 0, true, true}},
    {NX_K_ALL_GATHER, {1, S, false, true}, {1, S, false, true}},
    {NX_K_REDUCE_SCATTER, {S, 1, false, true}, {S, 1, false, true}},
    {NX_K_GATHER, {1, S, false, true}, {1, 0, false, true}},
    {NX_K_SCATTER, {S, 1, false, true}, {0, 1, false, true}},
    {NX_K_ALL_TO_ALL, {S, S, false, true}, {S, S, false, true}},
    {NX_K_SCAN, {1, 1, true, true}, {1, 1, true, true}},
    {NX_K_EXSCAN, {1, 1, true, true}, {1, 1, true, true}},
    {NX_K_ALL_REDUCE_BUCKETED, {1, 1, true, true}, {1, 1, true, true}},
    {NX_K_BARRIER, {0, 0, false, false}, {0, 0, false, false}},
    {NX_K_SEND, {1, 0, true, true}, {1, 0, true, true}},
    {NX_K_RECV, {0, 1, true, true}, {0, 1, true, true}},
    {NX_K_SPLIT, {0, 0, false, false}, {0, 0, false, false}},
    {NX_K_COMM_FREE, {0, 0, false, false}, {0, 0, false, false}},
    {NX_K_COMM_ABORT, {0, 0, false, false}, {0, 0, false, false}},
    {NX_K_COMM_SHRINK, {0, 0, false, false}, {0, 0, false, false}},
    {NX_K_COMM_GROW, {0, 0, false, false}, {0, 0, false, false}},
    {NX_K_PULLED, {0, 0, false, false}, {0, 0, false, false}},
};
#define N_KINDS (sizeof shape_table / sizeof shape_table[0])

static uint32_t mul_for(uint32_t m, uint32_t size)
{
    return m == S ? size : m;
}

static void expect_shape(uint8_t kind, uint32_t size, uint32_t rank, uint32_t root,
                         struct nx_shape want)
{
    struct nx_shape got;
    memset(&got, 0x5a, sizeof got);
    if (!nx_kind_shape(kind, size, rank, root, &got)) {
        fprintf(stderr, "nx_kind_shape(%s) returned false\n", nx_kind_name(kind));
        failures++;
        return;
    }
    want.in_mul = mul_for(want.in_mul, size);
    want.out_mul = mul_for(want.out_mul, size);
    if (got.in_mul != want.in_mul || got.out_mul != want.out_mul ||
        got.alias_ok != want.alias_ok || got.has_data != want.has_data) {
        fprintf(stderr,
                "nx_kind_shape(%s, size %u, rank %u, root %u) = {in %u, out %u, alias %d, "
                "data %d}, expected {in %u, out %u, alias %d, data %d}\n",
                nx_kind_name(kind), size, rank, root, got.in_mul, got.out_mul,
                got.alias_ok, got.has_data, want.in_mul, want.out_mul, want.alias_ok,
                want.has_data);
        failures++;
    }
}

static void test_shapes(void)
{
    EXPECT_EQ(N_KINDS, NX_K_MAX);
    for (size_t i = 0; i < N_KINDS; i++) {
        EXPECT_EQ(shape_table[i].kind, i + 1);
        for (uint32_t size = 1; size <= 9; size++) {
            for (uint32_t root = 0; root < size; root++) {
                for (uint32_t rank = 0; rank < size; rank++) {
                    expect_shape(shape_table[i].kind, size, rank, root,
                                 rank == root ? shape_table[i].root : shape_table[i].other);
                }
            }
        }
    }
    struct nx_shape s;
    EXPECT(!nx_kind_shape(0, 4, 0, 0, &s));
    EXPECT(!nx_kind_shape(NX_K_MAX + 1, 4, 0, 0, &s));
    EXPECT(!nx_kind_shape(255, 4, 0, 0, &s));
}

/* Bytes of one rank's staged region for n elements of each block. */
static uint64_t staged_bytes(const struct nx_shape *s, uint64_t n, uint32_t esize)
{
    uint64_t units = s->alias_ok ? (s->in_mul > s->out_mul ? s->in_mul : s->out_mul)
                                 : (uint64_t)s->in_mul + s->out_mul;
    return units * n * esize;
}

static void test_chunk_elems(void)
{
    static const uint64_t slot_sizes[] = {4096, 4096 + 64, 65536, 4 * MIB, 3 * MIB + 192};
    for (size_t i = 0; i < N_KINDS; i++) {
        uint8_t kind = shape_table[i].kind;
        for (uint8_t dt = 0; dt < NEXAR_DTYPE_COUNT; dt++) {
            uint32_t es = nx_dtype_size(dt);
            for (uint32_t size = 1; size <= 9; size++) {
                for (size_t k = 0; k < sizeof slot_sizes / sizeof slot_sizes[0]; k++) {
                    uint64_t slot = slot_sizes[k];
                    uint64_t n = nx_chunk_elems(kind, size, es, slot);
                    if (!shape_table[i].root.has_data) {
                        EXPECT_EQ(n, UINT64_MAX);
                        continue;
                    }
                    /* The largest n whose regions fit one slot on every rank. */
                    uint64_t worst = 0;
                    for (uint32_t rank = 0; rank < size; rank++) {
                        struct nx_shape s;
                        EXPECT(nx_kind_shape(kind, size, rank, 0, &s));
                        uint64_t b = staged_bytes(&s, 1, es);
                        if (b > worst)
                            worst = b;
                    }
                    EXPECT_EQ(n, slot / worst);
                    EXPECT(n > 0);
                    for (uint32_t rank = 0; rank < size; rank++) {
                        struct nx_shape s;
                        nx_kind_shape(kind, size, rank, size - 1, &s);
                        if (staged_bytes(&s, n, es) > slot) {
                            fprintf(stderr, "chunk of %s %s size %u rank %u: %llu elems "
                                    "overflow a %llu-byte slot\n", nx_kind_name(kind),
                                    nx_dtype_name(dt), size, rank,
                                    (unsigned long long)n, (unsigned long long)slot);
                            failures++;
                        }
                    }
                }
            }
        }
    }
    /* Degenerate arguments. */
    EXPECT_EQ(nx_chunk_elems(NX_K_ALL_REDUCE, 4, 0, 4096), 0);
    EXPECT_EQ(nx_chunk_elems(NX_K_ALL_REDUCE, 0, 4, 4096), 0);
    EXPECT_EQ(nx_chunk_elems(0, 4, 4, 4096), 0);
    EXPECT_EQ(nx_chunk_elems(NX_K_MAX + 1, 4, 4, 4096), 0);
    EXPECT_EQ(nx_chunk_elems(NX_K_ALL_TO_ALL, 9, 8, 64), 0); /* 144 bytes per element */
    EXPECT_EQ(nx_chunk_elems(NX_K_ALL_TO_ALL, 9, 8, 144), 1);
    EXPECT_EQ(nx_chunk_elems(NX_K_ALL_REDUCE, 4, 4, 4 * MIB), MIB);
    EXPECT_EQ(nx_chunk_elems(NX_K_ALL_GATHER, 4, 4, 4 * MIB), 4 * MIB / 20);
}

/* The plan by count: the slot's capacity, but for a local broadcast or all_gather of at
 * most NX_PIPE_SLOTS slots, up to NX_PIPE_CHUNKS chunks of NX_PIPE_ALIGN elements each at
 * least NX_PIPE_MIN_BYTES of block, a broadcast's NX_PIPE_MIN_BCAST_BYTES (an all_gather
 * in at least two); and across nodes, for the kinds where every node sends and receives
 * alike, the most elements (a multiple of NX_PIPE_ALIGN where one fits) that take at most
 * NX_SPAN_CHUNK_BYTES of slot. */
static void test_op_chunk_elems(void)
{
    static const uint64_t counts[] = {0, 1, 1000, 65536, 131073, 1u << 20, 3u << 20,
                                      (8u << 20) + 5, 1ull << 30};
    static const uint64_t slots[] = {4096, 65536, 4 * MIB, 3 * MIB + 192};
    for (size_t i = 0; i < N_KINDS; i++) {
        uint8_t kind = shape_table[i].kind;
        bool piped = kind == NX_K_BROADCAST || kind == NX_K_ALL_GATHER;
        bool alike = kind == NX_K_ALL_REDUCE || kind == NX_K_ALL_REDUCE_BUCKETED ||
                     kind == NX_K_ALL_GATHER || kind == NX_K_REDUCE_SCATTER ||
                     kind == NX_K_ALL_TO_ALL;
        bool p2p = kind == NX_K_SEND || kind == NX_K_RECV;
        for (uint8_t dt = 0; dt < NEXAR_DTYPE_COUNT; dt++) {
            uint32_t es = nx_dtype_size(dt);
            for (uint32_t size = 1; size <= 9; size += 4) {
                for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++) {
                    uint64_t cap = nx_chunk_elems(kind, size, es, slots[k]);
                    /* Slot bytes an element takes: what a slot of it holds is its
                     * capacity. */
                    uint64_t per = cap == 0 || cap == UINT64_MAX ? 0 : slots[k] / cap;
                    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                        uint64_t cnt = counts[c];
                        uint64_t s = nx_op_chunk_elems(kind, size, es, slots[k], cnt, false);
                        /* a rooted kind's op of blocks of at most NX_SPAN_WHOLE_BYTES
                         * keeps the capacity */
                        bool whole = !alike && cnt <= NX_SPAN_WHOLE_BYTES / es;
                        if (p2p || per == 0 || whole) {
                            EXPECT_EQ(s, cap);
                        } else {
                            EXPECT(s >= 1 && s <= cap);
                            EXPECT(s * per <= NX_SPAN_CHUNK_BYTES || s == 1);
                            EXPECT(s == cap || s % NX_PIPE_ALIGN == 0 ||
                                   NX_PIPE_ALIGN * per > NX_SPAN_CHUNK_BYTES);
                            /* the most: one more step (of alignment, where s is aligned)
                             * would not fit */
                            uint64_t step = s % NX_PIPE_ALIGN == 0 ? NX_PIPE_ALIGN : 1;
                            EXPECT(s == cap || (s + step) * per > NX_SPAN_CHUNK_BYTES);
                        }
                        uint64_t n = nx_op_chunk_elems(kind, size, es, slots[k], cnt, true);
                        EXPECT_EQ(nx_chunk_is_cut(kind, size, es, slots[k], n), n != cap);
                        EXPECT(!nx_chunk_is_cut(kind, size, es, slots[k], cap));
                        if (!piped || cap == 0 || cap == UINT64_MAX ||
                            cnt > (uint64_t)NX_PIPE_SLOTS * cap) {
                            EXPECT_EQ(n, cap);
                            continue;
                        }
                        EXPECT(n >= 1 && n <= cap);
                        if (n == cap)
                            continue;
                        EXPECT_EQ(n % NX_PIPE_ALIGN, 0);
                        /* At least the minimum of block, or as near as the alignment
                         * allows; an all_gather in two chunks when the minimum would
                         * leave it one. */
                        bool halved = kind == NX_K_ALL_GATHER && n >= (cnt + 1) / 2 &&
                                      n < (cnt + 1) / 2 + NX_PIPE_ALIGN;
                        uint64_t min = kind == NX_K_BROADCAST ? NX_PIPE_MIN_BCAST_BYTES
                                                              : NX_PIPE_MIN_BYTES;
                        EXPECT((n + NX_PIPE_ALIGN) * es > min ||
                               n == NX_PIPE_ALIGN || halved);
                        EXPECT(nx_chunk_count(cnt, n) <= NX_PIPE_CHUNKS);
                    }
                }
            }
        }
    }
    /* broadcast of f32 on 2 ranks of one node, 4 MiB slots (one region: 1 Mi elements a
     * chunk at most): a small op in one chunk, 2 MiB in 8 chunks of 256 KiB, 8 MiB in 16
     * of 512 KiB, 16 MiB in 16 of 1 MiB, 32 MiB (beyond 4 slots) in 8 of 4 MiB; across
     * nodes 2 MiB in one part of 4 MiB (a rooted op of blocks of at most 2 MiB keeps whole
     * slots). */
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, 4 * MIB, 1000, true), 64 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, 4 * MIB, 512 * 1024, true), 64 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, 4 * MIB, 2 * MIB, true), 128 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, 4 * MIB, 4 * MIB, true), 256 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, 4 * MIB, 8 * MIB, true), MIB);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, 4 * MIB, MIB / 2, false), MIB);
    EXPECT(nx_chunk_is_cut(NX_K_BROADCAST, 2, 4, 4 * MIB, 64 * 1024));
    EXPECT(!nx_chunk_is_cut(NX_K_BROADCAST, 2, 4, 4 * MIB, MIB));
    /* all_gather on 2 ranks (3 regions of a chunk in the slot: 1398101 u8 a chunk at
     * most): 1 MiB blocks in 2 chunks of 512 KiB, 512 KiB blocks in 2 of 256 KiB, 4 MiB
     * of f32 in 8 of 512 KiB, 6 MiB of f32 (beyond 4 slots) in whole slots; across nodes
     * whole slots. */
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_GATHER, 2, 1, 4 * MIB, MIB, true), 512 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_GATHER, 2, 1, 4 * MIB, MIB / 2, true), 256 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_GATHER, 2, 4, 4 * MIB, MIB, true), 128 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_GATHER, 2, 4, 4 * MIB, 3 * MIB / 2, true),
              4 * MIB / 12);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_REDUCE, 2, 4, 4 * MIB, 2 * MIB, true), MIB);
    /* Across nodes, 4 MiB slots: an all_gather of u8 on 2 ranks in chunks of 174720 (3
     * regions: 512 KiB / 3 = 174762, down to a multiple of 64), an all_reduce of f32
     * (one region) in 128 Ki elements, a reduce_scatter of f64 on 4 ranks (4 input blocks
     * and 1 output: 40 bytes an element, 13107) in 13056, an all_to_all of f32 on 3 (6
     * regions: 512 KiB / 24 = 21845) in 21824; a rooted kind as those where a block is
     * more than 2 MiB (a reduce of f32 in 128 Ki elements, a gather of f32 on 2, 12 bytes
     * of slot an element, in 43648) and in whole slots below, a gather of 1 MiB blocks
     * (3 MiB of slot) too; a point-to-point send in whole slots. */
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_GATHER, 2, 1, 4 * MIB, MIB, false), 174720);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_REDUCE, 2, 4, 4 * MIB, 2 * MIB, false), 128 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_REDUCE_SCATTER, 4, 8, 4 * MIB, MIB, false), 13056);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_TO_ALL, 3, 4, 4 * MIB, MIB, false), 21824);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_REDUCE, 2, 4, 4 * MIB, 2 * MIB, false), 128 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_REDUCE, 2, 4, 4 * MIB, MIB / 2, false), MIB);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_REDUCE, 2, 4, 4 * MIB, MIB / 2 + 1, false), 128 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_GATHER, 2, 4, 4 * MIB, 2 * MIB, false), 43648);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_GATHER, 2, 4, 4 * MIB, MIB / 4, false), 4 * MIB / 12);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, 4 * MIB, 8 * MIB, false), 128 * 1024);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_SEND, 1, 4, 4 * MIB, 1000, false), MIB);
    /* A slot smaller than the span chunk leaves the capacity. */
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_REDUCE, 2, 4, 65536, 2 * MIB, false), 16384);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_SEND, 1, 4, 4 * MIB, 1000, true), MIB);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_BARRIER, 4, 4, 4 * MIB, 0, true), UINT64_MAX);
    EXPECT_EQ(nx_op_chunk_elems(NX_K_ALL_TO_ALL, 9, 8, 64, 100, true), 0);
}

/* A stream's slots: one fewer than several, one of one, never more than 4. */
static void test_stream_slot_cap(void)
{
    EXPECT_EQ(nx_stream_slot_cap(0), 1);
    EXPECT_EQ(nx_stream_slot_cap(1), 1);
    EXPECT_EQ(nx_stream_slot_cap(2), 1);
    EXPECT_EQ(nx_stream_slot_cap(4), 3);
    EXPECT_EQ(nx_stream_slot_cap(5), 4);
    EXPECT_EQ(nx_stream_slot_cap(64), NX_MAX_SLOTS_PER_STREAM);
}

static void test_chunk_count(void)
{
    EXPECT_EQ(nx_chunk_count(0, 100), 1);
    EXPECT_EQ(nx_chunk_count(1, 100), 1);
    EXPECT_EQ(nx_chunk_count(100, 100), 1);
    EXPECT_EQ(nx_chunk_count(101, 100), 2);
    EXPECT_EQ(nx_chunk_count(200, 100), 2);
    EXPECT_EQ(nx_chunk_count(201, 100), 3);
    EXPECT_EQ(nx_chunk_count(5, 0), 0);
    EXPECT_EQ(nx_chunk_count(UINT64_MAX, 1), UINT64_MAX);
    EXPECT_EQ(nx_chunk_count(UINT64_MAX, UINT64_MAX), 1);
    EXPECT_EQ(nx_chunk_count(7, UINT64_MAX), 1);
}

/* ---- names and tables ---------------------------------------------------------------- */

static void test_tables(void)
{
    static const uint32_t sizes[NEXAR_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};
    static const char *const dnames[NEXAR_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16", "i8",
                                                          "u8",  "i32", "u32", "i64",  "u64"};
    for (uint8_t d = 0; d < NEXAR_DTYPE_COUNT; d++) {
        EXPECT_EQ(nx_dtype_size(d), sizes[d]);
        EXPECT(strcmp(nx_dtype_name(d), dnames[d]) == 0);
    }
    EXPECT_EQ(nx_dtype_size(NEXAR_DTYPE_COUNT), 0);
    EXPECT_EQ(nx_dtype_size(255), 0);
    EXPECT(strcmp(nx_dtype_name(NEXAR_DTYPE_COUNT), "?") == 0);

    EXPECT(strcmp(nx_redop_name(NEXAR_SUM), "sum") == 0);
    EXPECT(strcmp(nx_redop_name(NEXAR_PROD), "prod") == 0);
    EXPECT(strcmp(nx_redop_name(NEXAR_MIN), "min") == 0);
    EXPECT(strcmp(nx_redop_name(NEXAR_MAX), "max") == 0);
    EXPECT(strcmp(nx_redop_name(NEXAR_OP_COUNT), "?") == 0);

    static const char *const knames[NX_K_MAX + 1] = {
        "?", "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "gather",
        "scatter", "all_to_all", "scan", "exscan", "all_reduce_bucketed", "barrier", "send",
        "recv", "split", "comm_free", "comm_abort", "comm_shrink",
        "comm_grow", "pulled"};
    for (unsigned k = 0; k <= NX_K_MAX; k++)
        EXPECT(strcmp(nx_kind_name((uint8_t)k), knames[k]) == 0);
    EXPECT(strcmp(nx_kind_name(NX_K_MAX + 1), "?") == 0);
    EXPECT(strcmp(nx_kind_name(255), "?") == 0);

    for (unsigned k = 0; k <= 255; k++) {
        bool redop = k == NX_K_ALL_REDUCE || k == NX_K_ALL_REDUCE_BUCKETED ||
                     k == NX_K_REDUCE || k == NX_K_REDUCE_SCATTER || k == NX_K_SCAN ||
                     k == NX_K_EXSCAN;
        bool root = k == NX_K_BROADCAST || k == NX_K_REDUCE || k == NX_K_GATHER ||
                    k == NX_K_SCATTER;
        EXPECT_EQ(nx_kind_has_redop((uint8_t)k), redop);
        EXPECT_EQ(nx_kind_has_root((uint8_t)k), root);
    }
}

/* ---- descriptor validation --------------------------------------------------------------- */

/* 4 ranks, this one rank 1; 4 slots of 64 KiB and a 1 MiB heap. */
static const struct nx_sqe_limits lim4 = {
    .arena_bytes = 4 * 65536 + MIB, .slot_bytes = 65536, .comm_size = 4, .comm_rank = 1,
};

static struct nx_sqe sqe(uint8_t kind, uint8_t dtype, uint8_t redop, uint64_t count)
{
    struct nx_sqe e;
    memset(&e, 0, sizeof e);
    e.user_data = 7;
    e.comm_id = 1;
    e.kind = kind;
    e.dtype = dtype;
    e.redop = redop;
    e.count = count;
    return e;
}

static void expect_ok(const struct nx_sqe *e, const struct nx_sqe_limits *lim, int line)
{
    const char *why = NULL;
    int rv = nx_sqe_validate(e, lim, &why);
    if (rv != 0) {
        fprintf(stderr, "%s:%d: %s rejected: %d (%s)\n", __FILE__, line,
                nx_kind_name(e->kind), rv, why ? why : "no reason");
        failures++;
    }
}

static void expect_bad(const struct nx_sqe *e, const struct nx_sqe_limits *lim,
                       const char *word, int line)
{
    const char *why = NULL;
    int rv = nx_sqe_validate(e, lim, &why);
    if (rv != -EINVAL || !why || !strstr(why, word)) {
        fprintf(stderr, "%s:%d: %s: got %d (%s), expected -EINVAL mentioning \"%s\"\n",
                __FILE__, line, nx_kind_name(e->kind), rv, why ? why : "no reason", word);
        failures++;
    }
    /* A NULL reason pointer is allowed. */
    EXPECT_EQ(nx_sqe_validate(e, lim, NULL), -EINVAL);
}

#define OK(e, lim) expect_ok(&(e), (lim), __LINE__)
#define BAD(e, lim, word) expect_bad(&(e), (lim), (word), __LINE__)

static void test_validate_accepts(void)
{
    const uint64_t slot = lim4.slot_bytes;
    struct nx_sqe e;

    /* A peer-read notice names (comm, seq, chunk) and nothing else. */
    e = sqe(NX_K_PULLED, 0, 0, 0);
    e.seq = 9;
    e.chunk = 12345;
    OK(e, &lim4);
    e.count = 4;
    BAD(e, &lim4, "pulled notice");
    e.count = 0;
    e.out_off = 64;
    BAD(e, &lim4, "pulled notice");
    e.out_off = 0;
    e.flags = NX_SQE_DIRECT;
    BAD(e, &lim4, "pulled notice");

    /* Every data kind, staged in slot 2, chunk 0 of a 3-chunk op. */
    for (size_t i = 0; i < N_KINDS; i++) {
        uint8_t kind = shape_table[i].kind;
        if (!shape_table[i].root.has_data)
            continue;
        for (uint8_t dt = 0; dt < NEXAR_DTYPE_COUNT; dt++) {
            uint64_t per = nx_chunk_elems(kind, 4, nx_dtype_size(dt), slot);
            e = sqe(kind, dt, nx_kind_has_redop(kind) ? NEXAR_MAX : 0, 2 * per + 1);
            e.peer = (nx_kind_has_root(kind) || kind == NX_K_SEND || kind == NX_K_RECV) ? 3 : 0;
            e.tag = 99;
            e.in_off = e.out_off = 2 * slot;
            for (uint32_t c = 0; c < 3; c++) {
                e.chunk = c;
                OK(e, &lim4);
            }
            /* As the root too. */
            e.peer = nx_kind_has_root(kind) ? 1 : e.peer;
            OK(e, &lim4);
        }
    }

    /* No-data kinds. */
    e = sqe(NX_K_BARRIER, 0, 0, 0);
    OK(e, &lim4);
    e = sqe(NX_K_SPLIT, 0, 0, 0);
    e.peer = 12345; /* color: any value */
    e.tag = 7;      /* key */
    OK(e, &lim4);
    e.peer = NEXAR_UNDEFINED;
    OK(e, &lim4);
    e = sqe(NX_K_COMM_FREE, 0, 0, 0);
    OK(e, &lim4);
    e = sqe(NX_K_COMM_ABORT, 0, 0, 0);
    OK(e, &lim4);

    /* count 0: one empty chunk. */
    e = sqe(NX_K_ALL_REDUCE, NEXAR_F32, NEXAR_SUM, 0);
    OK(e, &lim4);

    /* Direct: the whole op's buffers in the heap, ending exactly at the arena's end. */
    e = sqe(NX_K_ALL_GATHER, NEXAR_F64, 0, 1000);
    e.flags = NX_SQE_DIRECT;
    e.in_off = lim4.arena_bytes - 8000 - 32000;
    e.out_off = lim4.arena_bytes - 32000;
    OK(e, &lim4);
    e = sqe(NX_K_ALL_REDUCE, NEXAR_BF16, NEXAR_SUM, MIB / 2);
    e.flags = NX_SQE_DIRECT;
    e.in_off = e.out_off = 4 * slot;
    OK(e, &lim4);

    /* Offsets are multiples of the element size, not of 64. */
    e = sqe(NX_K_ALL_REDUCE, NEXAR_F32, NEXAR_SUM, 10);
    e.in_off = e.out_off = 4;
    OK(e, &lim4);
    e = sqe(NX_K_ALL_REDUCE, NEXAR_U8, NEXAR_SUM, 10);
    e.in_off = e.out_off = 3;
    OK(e, &lim4);
}

static void test_validate_rejects(void)
{
    const uint64_t slot = lim4.slot_bytes;
    struct nx_sqe good = sqe(NX_K_ALL_REDUCE, NEXAR_F32, NEXAR_SUM, 100);
    struct nx_sqe e;
    OK(good, &lim4);

    /* Kind. */
    e = good, e.kind = 0;
    BAD(e, &lim4, "kind");
    e = good, e.kind = NX_K_MAX + 1;
    BAD(e, &lim4, "kind");
    e = good, e.kind = 255;
    BAD(e, &lim4, "kind");

    /* Flags and the reserved field. */
    e = good, e.flags = 0x02;
    BAD(e, &lim4, "flags");
    e = good, e.flags = 0x80 | NX_SQE_DIRECT;
    BAD(e, &lim4, "flags");
    e = good, e.reserved = 1;
    BAD(e, &lim4, "reserved");

    /* Dtype. */
    e = good, e.dtype = NEXAR_DTYPE_COUNT;
    BAD(e, &lim4, "dtype");
    e = good, e.dtype = 255;
    BAD(e, &lim4, "dtype");

    /* Reduction op: out of range, or given to a kind without one. */
    e = good, e.redop = NEXAR_OP_COUNT;
    BAD(e, &lim4, "op");
    e = sqe(NX_K_BROADCAST, NEXAR_F32, NEXAR_PROD, 10);
    BAD(e, &lim4, "op");
    e = sqe(NX_K_ALL_GATHER, NEXAR_F32, NEXAR_MAX, 10);
    BAD(e, &lim4, "op");
    e = sqe(NX_K_BARRIER, 0, 1, 0);
    BAD(e, &lim4, "op");

    /* Root and peer. */
    static const uint8_t rooted[] = {NX_K_BROADCAST, NX_K_REDUCE, NX_K_GATHER, NX_K_SCATTER,
                                     NX_K_SEND, NX_K_RECV};
    for (size_t i = 0; i < sizeof rooted; i++) {
        e = sqe(rooted[i], NEXAR_I32, rooted[i] == NX_K_REDUCE ? NEXAR_SUM : 0, 10);
        e.peer = 3;
        OK(e, &lim4);
        e.peer = 4;
        BAD(e, &lim4, "out of range");
        e.peer = UINT32_MAX;
        BAD(e, &lim4, "out of range");
    }

    /* Communicator geometry. */
    struct nx_sqe_limits l = lim4;
    l.comm_size = 0;
    l.comm_rank = 0;
    BAD(good, &l, "communicator");
    l = lim4;
    l.comm_rank = 4;
    BAD(good, &l, "communicator");

    /* Count or chunk on an op without data. */
    e = sqe(NX_K_BARRIER, 0, 0, 1);
    BAD(e, &lim4, "without data");
    e = sqe(NX_K_SPLIT, 0, 0, 0);
    e.chunk = 1;
    BAD(e, &lim4, "without data");

    /* A slot too small for one element of every rank's share. */
    l = lim4;
    l.slot_bytes = 64;
    l.comm_size = 9;
    e = sqe(NX_K_ALL_TO_ALL, NEXAR_F64, 0, 1);
    BAD(e, &l, "slot too small");

    /* Count overflow. */
    e = good, e.count = UINT64_MAX / 2;
    BAD(e, &lim4, "overflow");
    e = sqe(NX_K_ALL_TO_ALL, NEXAR_U64, 0, UINT64_MAX / 8);
    e.flags = NX_SQE_DIRECT;
    BAD(e, &lim4, "overflow");

    /* Chunks: beyond the plan when staged, non-zero when direct. */
    uint64_t per = nx_chunk_elems(NX_K_ALL_REDUCE, 4, 4, slot);
    e = good, e.count = 3 * per, e.chunk = 2;
    OK(e, &lim4);
    e.chunk = 3;
    BAD(e, &lim4, "chunk");
    e.count = 3 * per + 1;
    OK(e, &lim4);
    e = good, e.count = 0, e.chunk = 1;
    BAD(e, &lim4, "chunk");
    e = good, e.chunk = UINT32_MAX;
    BAD(e, &lim4, "chunk");
    e = good, e.flags = NX_SQE_DIRECT, e.chunk = 1;
    BAD(e, &lim4, "chunk");

    /* Misaligned offsets. */
    e = good, e.in_off = e.out_off = 2;
    BAD(e, &lim4, "aligned");
    e = good, e.in_off = 2, e.out_off = 0;
    BAD(e, &lim4, "aligned");
    e = good, e.in_off = 0, e.out_off = 6;
    BAD(e, &lim4, "aligned");
    e = sqe(NX_K_ALL_GATHER, NEXAR_F64, 0, 10);
    e.out_off = 4 * slot + 4;
    BAD(e, &lim4, "aligned");
    /* ...but an output this rank does not write is not checked. */
    e = sqe(NX_K_REDUCE, NEXAR_F64, NEXAR_SUM, 10);
    e.peer = 0; /* rank 1 is not the root: no output */
    e.out_off = 3;
    OK(e, &lim4);

    /* Extents outside the arena, by one byte and by wrapping around. */
    e = sqe(NX_K_ALL_REDUCE, NEXAR_F32, NEXAR_SUM, 1000);
    e.flags = NX_SQE_DIRECT;
    e.in_off = e.out_off = lim4.arena_bytes - 4000;
    OK(e, &lim4);
    e.in_off = e.out_off = lim4.arena_bytes - 3996;
    BAD(e, &lim4, "input outside");
    e.in_off = lim4.arena_bytes - 4000;
    BAD(e, &lim4, "output outside");
    e.in_off = e.out_off = UINT64_MAX - 3;
    BAD(e, &lim4, "outside");
    e = sqe(NX_K_ALL_GATHER, NEXAR_F32, 0, 1000);
    e.flags = NX_SQE_DIRECT;
    e.out_off = lim4.arena_bytes - 4 * 4000 + 4;
    BAD(e, &lim4, "output outside");
    /* A staged chunk is bounded by the arena too. */
    e = good;
    e.in_off = e.out_off = lim4.arena_bytes;
    BAD(e, &lim4, "outside");
}

static void test_extent(void)
{
    const uint64_t slot = lim4.slot_bytes;
    uint64_t ib, ob;
    uint64_t per = nx_chunk_elems(NX_K_ALL_REDUCE, 4, 4, slot);
    EXPECT_EQ(per, slot / 4);

    /* Staged: full chunks, then the rest. */
    struct nx_sqe e = sqe(NX_K_ALL_REDUCE, NEXAR_F32, NEXAR_SUM, 2 * per + 5);
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, slot);
    EXPECT_EQ(ob, slot);
    e.chunk = 2;
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, 20);
    EXPECT_EQ(ob, 20);

    /* Direct: the whole buffers. */
    e = sqe(NX_K_ALL_GATHER, NEXAR_F64, 0, 1000);
    e.flags = NX_SQE_DIRECT;
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, 8000);
    EXPECT_EQ(ob, 4 * 8000);
    e.kind = NX_K_REDUCE_SCATTER;
    e.redop = NEXAR_SUM;
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, 4 * 8000);
    EXPECT_EQ(ob, 8000);

    /* Rooted kinds depend on whether this rank (1) is the root. */
    e = sqe(NX_K_GATHER, NEXAR_I8, 0, 10);
    e.flags = NX_SQE_DIRECT;
    e.peer = 1;
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, 10);
    EXPECT_EQ(ob, 40);
    e.peer = 0;
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, 10);
    EXPECT_EQ(ob, 0);

    /* No data; count 0. */
    e = sqe(NX_K_BARRIER, 0, 0, 0);
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, 0);
    EXPECT_EQ(ob, 0);
    e = sqe(NX_K_ALL_REDUCE, NEXAR_F32, NEXAR_SUM, 0);
    EXPECT(nx_sqe_extent(&e, &lim4, &ib, &ob));
    EXPECT_EQ(ib, 0);
    EXPECT_EQ(ob, 0);

    /* Overflow and unknown kinds. */
    e = sqe(NX_K_ALL_TO_ALL, NEXAR_U64, 0, UINT64_MAX / 4);
    e.flags = NX_SQE_DIRECT;
    EXPECT(!nx_sqe_extent(&e, &lim4, &ib, &ob));
    e = sqe(NX_K_MAX + 1, NEXAR_F32, 0, 1);
    EXPECT(!nx_sqe_extent(&e, &lim4, &ib, &ob));
}

/* Single copy (NX_PLAN_CMA): which ops, their one-chunk plan, their descriptors, and a
 * reader's failure notice. */
static void test_single_copy(void)
{
    static const uint8_t yes[] = {NX_K_BROADCAST, NX_K_ALL_GATHER, NX_K_GATHER, NX_K_SCATTER,
                                  NX_K_ALL_TO_ALL, NX_K_REDUCE_SCATTER, NX_K_ALL_REDUCE,
                                  NX_K_REDUCE};
    const unsigned both = NX_PLAN_LOCAL | NX_PLAN_CMA;
    for (uint8_t kind = 1; kind <= NX_K_MAX; kind++) {
        bool fold = kind == NX_K_ALL_REDUCE || kind == NX_K_REDUCE;
        bool moves = memchr(yes, kind, sizeof yes) != NULL;
        for (uint8_t dt = 0; dt < NEXAR_DTYPE_COUNT; dt++) {
            uint32_t es = nx_dtype_size(dt);
            /* every element size divides both */
            uint64_t least = (fold ? NX_CMA_MIN_REDUCE_BYTES : NX_CMA_MIN_BYTES) / es;
            EXPECT_EQ(nx_op_single_copy(kind, es, least, both), moves);
            EXPECT_EQ(nx_op_single_copy(kind, es, least * 1000, both), moves);
            EXPECT(!nx_op_single_copy(kind, es, least - 1, both));
            EXPECT(!nx_op_single_copy(kind, es, least, NX_PLAN_LOCAL));
            EXPECT(!nx_op_single_copy(kind, es, least, 0));
            uint64_t cnt = least * 40; /* beyond any slot here */
            uint64_t n = nx_op_chunk_elems(kind, 4, es, 65536, cnt, both);
            if (moves)
                EXPECT_EQ(n, cnt);
            else
                EXPECT_EQ(n, nx_op_chunk_elems(kind, 4, es, 65536, cnt, NX_PLAN_LOCAL));
        }
    }
    EXPECT(!nx_op_single_copy(NX_K_BROADCAST, 0, 1u << 20, both));

    /* Rank 1 of 4: a broadcast's non-root supplies no input, rooted at itself it does. */
    struct nx_sqe_limits lim = lim4;
    lim.comm_plan = both;
    struct nx_sqe e = sqe(NX_K_BROADCAST, NEXAR_F32, 0, 1u << 16);
    e.flags = NX_SQE_CMA;
    e.out_off = 0x7f1234570000ull;
    e.tag = 2; /* its table in slot 2 */
    OK(e, &lim);
    uint64_t ib = 1, ob = 1;
    EXPECT(nx_sqe_extent(&e, &lim, &ib, &ob));
    EXPECT_EQ(ib, 0);
    EXPECT_EQ(ob, 0);
    e.in_off = 0x7f1234560000ull;
    BAD(e, &lim, "buffer address");
    e.peer = 1; /* the root: an input, no output */
    BAD(e, &lim, "buffer address");
    e.out_off = 0;
    OK(e, &lim);
    e.in_off = 0;
    BAD(e, &lim, "buffer address");
    e.in_off = 0x7f1234560000ull;
    e.chunk = 1;
    BAD(e, &lim, "chunk index on a single-copy");
    e.chunk = 0;
    e.tag = (uint32_t)(lim.arena_bytes / lim.slot_bytes); /* past the arena */
    BAD(e, &lim, "table slot");
    e.tag = 0;
    OK(e, &lim);
    struct nx_sqe_limits tiny = lim; /* a slot too small for 8 entries and scratch */
    tiny.slot_bytes = 320;
    BAD(e, &tiny, "table slot");
    tiny.slot_bytes = 384;
    OK(e, &tiny);
    e.flags = NX_SQE_CMA | NX_SQE_DIRECT;
    BAD(e, &lim, "single-copy flag with");
    e.flags = 0; /* staged through the slots: not what the plan says */
    BAD(e, &lim, "without the single-copy flag");
    e.flags = NX_SQE_DIRECT;
    BAD(e, &lim, "without the single-copy flag");
    e.flags = NX_SQE_CMA;
    e.count = 1000; /* below NX_CMA_MIN_BYTES */
    BAD(e, &lim, "not single-copy");
    e.count = 1u << 16;
    lim.comm_plan = NX_PLAN_LOCAL;
    BAD(e, &lim, "not single-copy");
    e.flags = 0;
    e.in_off = 0;
    e.chunk = 0;
    OK(e, &lim);
    /* A reduction below its least size is not: its descriptors stay staged on a
     * single-copy plan; from there on it is. */
    lim.comm_plan = both;
    e = sqe(NX_K_REDUCE_SCATTER, NEXAR_F32, NEXAR_SUM, NX_CMA_MIN_BYTES / 4 - 1);
    OK(e, &lim);
    e.flags = NX_SQE_CMA;
    BAD(e, &lim, "not single-copy");
    e.count++;
    e.in_off = 0x7f1234560000ull;
    e.out_off = 0x7f1234570000ull;
    OK(e, &lim);
    e.flags = 0;
    BAD(e, &lim, "without the single-copy flag");
    e = sqe(NX_K_ALL_REDUCE, NEXAR_F64, NEXAR_MAX, NX_CMA_MIN_REDUCE_BYTES / 8);
    e.flags = NX_SQE_CMA;
    e.in_off = e.out_off = 0x7f1234560000ull; /* in place, as nexar_all_reduce always is */
    OK(e, &lim);
    e.count--;
    BAD(e, &lim, "not single-copy");

    /* Nor is an op without data (the fuzzer's find: a shrink flagged single-copy). */
    static const uint8_t nodata[] = {NX_K_BARRIER, NX_K_SPLIT, NX_K_COMM_FREE,
                                     NX_K_COMM_ABORT, NX_K_COMM_SHRINK, NX_K_COMM_GROW};
    for (size_t i = 0; i < sizeof nodata; i++) {
        e = sqe(nodata[i], 0, 0, 0);
        e.peer = nodata[i] == NX_K_COMM_GROW ? 1 : 0;
        OK(e, &lim);
        e.flags = NX_SQE_CMA;
        BAD(e, &lim, "single-copy flag on an op without data");
    }

    /* A reader that could not read: an errno, and the rank it read from; or write. */
    e = sqe(NX_K_PULLED, 0, 0, 0);
    e.tag = 14; /* EFAULT */
    e.peer = 3;
    OK(e, &lim);
    e.tag = 14 | NX_PULL_FAIL_WRITE;
    OK(e, &lim);
    e.tag = NX_PULL_FAIL_WRITE; /* a write that failed without an errno */
    BAD(e, &lim, "failure names no errno or no rank");
    e.tag = 14;
    e.peer = 4;
    BAD(e, &lim, "failure names no errno or no rank");
    e.peer = 0;
    e.tag = NX_PULL_MAX_ERRNO + 1;
    BAD(e, &lim, "failure names no errno or no rank");
    e.tag = 0;
    e.peer = 2;
    BAD(e, &lim, "pulled notice");
}

int main(void)
{
    test_layout();
    test_layout_rejects();
    test_hdr_check();
    test_shapes();
    test_chunk_elems();
    test_op_chunk_elems();
    test_chunk_count();
    test_stream_slot_cap();
    test_tables();
    test_validate_accepts();
    test_validate_rejects();
    test_extent();
    test_single_copy();
    if (failures) {
        fprintf(stderr, "test_shm_abi: %d failures\n", failures);
        return 1;
    }
    printf("test_shm_abi: ok\n");
    return 0;
}
