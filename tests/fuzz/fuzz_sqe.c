/*
 * fuzz_sqe.c - libFuzzer target for the submission-descriptor validator.
 *
 * Input: a struct nx_sqe (64 bytes, as a rank writes it into the ring) followed
 * by 24 bytes that choose the limits the daemon validates it against:
 *   u64 arena   slot count (low byte) and heap bytes (the rest)
 *   u64 slot    slot_bytes = 64 << (slot % 20): 64 B .. 32 MiB (low half); the plan
 *               bits NX_PLAN_LOCAL | NX_PLAN_CMA (bits 32-33)
 *   u32 size    comm_size = 1 + size % 1024
 *   u32 rank    comm_rank = rank % comm_size
 * Short inputs are padded with zeros.  The limits are built the way the daemon
 * builds them (arena = slots * slot_bytes + heap), so every input is a descriptor
 * a hostile rank could really submit.
 *
 * Invariants: nx_sqe_validate() either gives a reason, or the descriptor's
 * extents (nx_sqe_extent) are computable and lie inside the arena, and a staged
 * chunk index lies inside the op's chunk plan; a descriptor is single-copy exactly when
 * its op is (nx_op_single_copy), and then names only its table's slot in the arena.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm_abi.h"
#include "fuzz.h"

struct raw_limits {
    uint64_t arena;
    uint64_t slot;
    uint32_t size;
    uint32_t rank;
};

_Static_assert(sizeof(struct nx_sqe) == 64, "nx_sqe is 64 bytes");
_Static_assert(sizeof(struct raw_limits) == 24, "raw limits are 24 bytes");

/* True when [off, off + bytes) lies inside [0, arena). */
static int inside(uint64_t off, uint64_t bytes, uint64_t arena)
{
    return off <= arena && bytes <= arena - off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[sizeof(struct nx_sqe) + sizeof(struct raw_limits)] = {0};
    memcpy(buf, data, size < sizeof buf ? size : sizeof buf);

    struct nx_sqe e;
    struct raw_limits r;
    memcpy(&e, buf, sizeof e);
    memcpy(&r, buf + sizeof e, sizeof r);

    struct nx_sqe_limits lim;
    lim.slot_bytes = 64ull << ((r.slot & 0xffffffffu) % 20);
    uint64_t slots = 1 + (r.arena & 0xff) % 8;
    uint64_t heap = (r.arena >> 8) % (1ull << 30) & ~(uint64_t)63;
    lim.arena_bytes = slots * lim.slot_bytes + heap;
    lim.comm_size = 1 + r.size % 1024;
    lim.comm_rank = r.rank % lim.comm_size;
    lim.comm_plan = (unsigned)(r.slot >> 32) & (NX_PLAN_LOCAL | NX_PLAN_CMA);

    const struct nx_sqe before = e;
    const char *why = NULL;
    int rv = nx_sqe_validate(&e, &lim, &why);
    CHECK(memcmp(&before, &e, sizeof e) == 0); /* validation does not write */
    if (rv != 0) {
        CHECK(rv == -EINVAL);
        CHECK(why != NULL && why[0] != '\0');
        return 0;
    }

    CHECK(e.kind >= 1 && e.kind <= NX_K_MAX);
    uint64_t in_bytes = UINT64_MAX, out_bytes = UINT64_MAX;
    CHECK(nx_sqe_extent(&e, &lim, &in_bytes, &out_bytes));
    if (in_bytes > 0)
        CHECK(inside(e.in_off, in_bytes, lim.arena_bytes));
    if (out_bytes > 0)
        CHECK(inside(e.out_off, out_bytes, lim.arena_bytes));

    struct nx_shape sh;
    CHECK(nx_kind_shape(e.kind, lim.comm_size, lim.comm_rank, e.peer, &sh) ||
          !nx_kind_has_root(e.kind));
    /* A pulled notice names a chunk of an op that nexard, not validation, knows. */
    if (e.kind == NX_K_PULLED)
        CHECK(e.count == 0 && e.flags == 0 && e.in_off == 0 && e.out_off == 0);
    else if (!(e.flags & NX_SQE_DIRECT) && e.kind != NX_K_SPLIT && e.kind != NX_K_BARRIER &&
             e.kind != NX_K_COMM_FREE && e.kind != NX_K_COMM_ABORT) {
        uint32_t esize = nx_dtype_size(e.dtype);
        CHECK(esize != 0);
        uint64_t per = nx_op_chunk_elems(e.kind, lim.comm_size, esize, lim.slot_bytes, e.count,
                                         lim.comm_plan);
        CHECK(per != 0);
        CHECK(e.chunk < nx_chunk_count(e.count, per));
        /* A single-copy op is one chunk naming the rank's own buffer: only its table
         * lies in the arena, in a slot with room for the largest table (two entries a
         * rank) and some scratch. */
        CHECK(!!(e.flags & NX_SQE_CMA) ==
              nx_op_single_copy(e.kind, esize, e.count, lim.comm_plan));
        if (e.flags & NX_SQE_CMA) {
            CHECK(e.chunk == 0 && in_bytes == 0 && out_bytes == 0);
            CHECK(nx_cma_scratch_off(lim.comm_size) < lim.slot_bytes);
            CHECK(inside((uint64_t)e.tag * lim.slot_bytes, lim.slot_bytes, lim.arena_bytes));
            return 0;
        }
        /* A staged chunk fits one slot: input and output side by side, or one
         * region when they may alias. */
        CHECK(in_bytes <= lim.slot_bytes && out_bytes <= lim.slot_bytes);
        if (!sh.alias_ok)
            CHECK(in_bytes + out_bytes <= lim.slot_bytes);
    }
    return 0;
}
