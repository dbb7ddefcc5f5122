/*
 * shm_abi.h - the shared-memory segment between one rank and nexard.
 *
 * The daemon creates one memfd per client, sizes it, seals it against shrinking
 * and growing (so a hostile client cannot make the daemon's mapping SIGBUS) and
 * passes it with two eventfds over the control socket (SCM_RIGHTS):
 *   sq_efd: the rank rings it after filling submission entries;
 *   cq_efd: the daemon rings it after posting completion entries.
 *
 * Layout (all offsets from the segment base, all 64-byte aligned):
 *   nx_shm_hdr                      written once by the daemon before passing the fd
 *   nx_ring_ctl sq_ctl, cq_ctl      producer / consumer indices, one cache line each
 *   nx_sqe sq[sq_entries]           rank -> daemon op descriptors
 *   nx_cqe cq[cq_entries]           daemon -> rank completions
 *   nx_err_entry err[err_entries]   detailed error texts referenced by completions
 *   arena                           staging slots, then the heap for nexar_alloc()
 *
 * Trust: the daemon keeps its own copy of every header field, reads each ring
 * index exactly once per pass, copies each descriptor out before looking at it,
 * and validates everything (nx_sqe_validate() in shm_validate.c).  The rank trusts
 * the daemon.
 *
 * Version history:
 *   1  first layout.  Compatible addition: NX_SQE_DEVICE and struct nx_dev_op (device
 *      buffers), used only with a daemon that announces NX_FEATURE_DEVICE (frame.h).
 *   3  the chunk plan depends on the count (docs/shm-protocol.md).  Compatible addition:
 *      peer reads (NX_K_PULLED, struct nx_pull, nx_cqe.pull_n / pull_hold), used only
 *      with a shim that asked for them (JoinRequest.peer_reads) and got its peers'
 *      segments.
 *   4  a local all_gather's chunks are at least NX_PIPE_MIN_BYTES of block, not of slot.
 *   5  peer reads of reduce_scatter chunks: the reader folds its table's entries.
 *   6  a local broadcast's chunks are at least NX_PIPE_MIN_BCAST_BYTES, not
 *      NX_PIPE_MIN_BYTES.
 *   7  single-copy ops (NX_SQE_CMA, NX_PLAN_CMA): on a communicator whose plan says so,
 *      a broadcast, all_gather, gather, scatter or all_to_all of NX_CMA_MIN_BYTES of
 *      block or more is one descriptor naming the rank's own buffers, which its peers
 *      read and write with process_vm_readv / writev (struct nx_pull grew at, rank and
 *      flags); nx_cqe.res_local carries the plan's bits; NX_K_PULLED may carry a
 *      failure.
 *   8  single-copy all_reduce, reduce and reduce_scatter (NX_PULL_REDUCE): each rank
 *      folds its part of every rank's input, read with process_vm_readv, in rank order,
 *      and an all_reduce's rank writes the result into every peer's output (a reduce's,
 *      into the root's); a table holds up to NX_PULL_MAX_ENTRIES entries, and the rest
 *      of its slot is the fold's scratch.
 */
#ifndef NX_SHM_ABI_H
#define NX_SHM_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NX_SHM_MAGIC 0x534d584eu /* "NXMS" */
#define NX_SHM_VERSION 11u
#define NX_SHM_ALIGN 64u
#define NX_ERR_TEXT_BYTES 512u
#define NX_PENDING_MIN 16u        /* nx_shm_hdr.max_pending's range (config max_pending) */
#define NX_PENDING_MAX (1u << 24)

/* Op kinds carried in nx_sqe.kind. */
enum nx_kind {
    NX_K_ALL_REDUCE = 1,
    NX_K_BROADCAST = 2,
    NX_K_REDUCE = 3,
    NX_K_ALL_GATHER = 4,
    NX_K_REDUCE_SCATTER = 5,
    NX_K_GATHER = 6,
    NX_K_SCATTER = 7,
    NX_K_ALL_TO_ALL = 8,
    NX_K_SCAN = 9,
    NX_K_EXSCAN = 10,
    NX_K_ALL_REDUCE_BUCKETED = 11, /* the concatenation of the iovs, as one allreduce */
    NX_K_BARRIER = 12,
    NX_K_SEND = 13,
    NX_K_RECV = 14,
    NX_K_SPLIT = 15,      /* peer = color, tag = key; result in the completion */
    NX_K_COMM_FREE = 16,  /* this rank leaves the communicator; not matched */
    NX_K_COMM_ABORT = 17, /* fails the communicator everywhere; not matched */
    NX_K_COMM_SHRINK = 18, /* the survivors' new communicator; not matched (the survivors'
                              sequences differ after a failure); result in the completion */
    NX_K_COMM_GROW = 19,   /* peer = add: the members' new communicator with `add` joiners;
                              not matched; result in the completion */
    NX_K_PULLED = 20,      /* chunk `chunk` of collective seq `seq`: this rank has read what
                              its peer-read completion named (struct nx_pull); no data, not
                              matched, never completed.  tag != 0: it could not (an errno,
                              copying rank `peer`'s part), and the op fails everywhere */
    NX_K_MAX = 20
};

/* nx_sqe.flags */
#define NX_SQE_DIRECT 0x01u /* in_off/out_off address the whole op's buffers in the
                               arena (nexar_alloc); one descriptor, one completion.
                               Without it the descriptor is staged chunk `chunk`. */
#define NX_SQE_DEVICE 0x02u /* with NX_SQE_DIRECT: the op's buffers are device memory,
                               described by the struct nx_dev_op at arena offset in_off
                               (8-byte aligned); out_off and chunk are 0.  One descriptor,
                               one completion. */
#define NX_SQE_CMA 0x04u    /* staged single-copy op (nx_op_single_copy): chunk 0 of a
                               one-chunk plan; in_off and out_off are the addresses of the
                               rank's input and output in its own process (0 where the
                               shape has none), which its peers read and write with
                               process_vm_readv / writev; tag is the index of the slot at
                               whose start nexard may write a peer-read table of one entry
                               per rank.  No data passes through the arena. */

/* A submission: 64 bytes. */
struct nx_sqe {
    uint64_t user_data; /* echoed in the completion */
    uint32_t comm_id;
    uint8_t kind;   /* enum nx_kind */
    uint8_t dtype;  /* nexar_dtype_t */
    uint8_t redop;  /* nexar_op_t, 0 where the kind has none */
    uint8_t flags;  /* NX_SQE_* */
    uint64_t seq;   /* collectives: the op's sequence number on comm, from 0.
                       send/recv: the message's number on (comm, peer, tag), from 0. */
    uint64_t count; /* the op's count argument, in elements */
    uint32_t peer;  /* root; dest (send); src (recv); color (split) */
    uint32_t tag;   /* tag (send/recv); key (split) */
    uint64_t in_off;  /* arena offset of this descriptor's input */
    uint64_t out_off; /* arena offset of this descriptor's output */
    uint32_t chunk;   /* staged: chunk index within the op's plan; direct: 0 */
    uint32_t reserved;
};

/* A completion: 32 bytes. */
struct nx_cqe {
    uint64_t user_data;
    uint32_t status;  /* nexar_status_t */
    uint32_t err_seq; /* when status != 0: err[err_seq % err_entries] holds the text
                         if its seq matches; NX_NO_ERR_TEXT when there is none */
    union {
        struct {
            uint32_t res_comm; /* split, shrink, grow: the new communicator id (split: 0
                                  for NEXAR_UNDEFINED) */
            uint32_t res_rank; /* split, shrink, grow: rank in the new communicator */
            uint32_t res_size; /* split, shrink, grow: size of the new communicator */
        };
        struct {
            /* A staged chunk of an op that only moves data, run by peer reads (see struct
             * nx_pull): nonzero, the number of entries in the table nexard wrote at the
             * descriptor's out_off.  0: an ordinary completion. */
            uint32_t pull_n;
            /* 1: other ranks read this rank's slot too; it stays nexard's until a second
             * completion (pull_n 0) of the same descriptor.  0: this completion ends the
             * descriptor once the rank has read and said NX_K_PULLED. */
            uint32_t pull_hold;
            uint32_t pull_reserved;
        };
    };
    union {
        uint32_t algo;      /* collectives: the algorithm that ran across nodes (a code of
                               nx_algo_code_name), 0 when the op stayed on one node */
        uint32_t res_local; /* split, shrink, grow: the new communicator's plan bits
                               (NX_PLAN_LOCAL: it lives on this node alone; NX_PLAN_CMA) */
    };
};
#define NX_NO_ERR_TEXT UINT32_MAX

struct nx_err_entry {
    uint32_t seq; /* written last, with release order */
    uint32_t status;
    char text[NX_ERR_TEXT_BYTES - 8];
};

/* Producer writes tail, consumer writes head; free-running u32 counters.
 *
 * wake is the consumer's: nonzero while it may be asleep on the ring's doorbell, zero
 * while it polls the ring.  The producer publishes tail, issues a full fence, and rings
 * the doorbell only when it then reads wake != 0; the consumer sets wake, issues a full
 * fence and looks at tail once more before it sleeps.  So an entry is never left behind
 * a sleeping consumer, and a polling one costs no syscall on either side. */
struct nx_ring_ctl {
    _Alignas(64) uint32_t head;
    _Alignas(64) uint32_t tail;
    _Alignas(64) uint32_t wake;
};

struct nx_shm_hdr {
    uint32_t magic;
    uint32_t version;
    uint64_t total_bytes;
    uint32_t sq_entries; /* power of two */
    uint32_t cq_entries; /* power of two */
    uint32_t err_entries;
    uint32_t slot_count; /* staging slots at the start of the arena */
    uint64_t slot_bytes;
    uint64_t sq_ctl_off, cq_ctl_off;
    uint64_t sq_off, cq_off, err_off;
    uint64_t arena_off;   /* descriptor offsets are relative to this */
    uint64_t arena_bytes; /* slot_count * slot_bytes + heap_bytes */
    uint64_t heap_off;    /* arena-relative start of the nexar_alloc heap */
    uint64_t heap_bytes;
    /* The most descriptors the rank may have in the daemon (submitted, completion not
     * consumed; notices such as NX_K_PULLED do not count): past it the daemon drops the
     * rank, so the shim holds further ones back until completions come. */
    uint32_t max_pending;
    uint32_t reserved;
};

/* ---- device op records ----------------------------------------------------------
 * A device descriptor (NX_SQE_DEVICE) points at one of these in the arena.  Memory and
 * events are named by the ids the daemon gave their registrations (DEV_REGISTER on the
 * control socket, nexar.proto).  Buffers are laid out as in the direct form: block j of
 * a buffer at j * count elements.  The daemon copies the record (and the iov table that
 * follows it) out once, when the descriptor arrives, and validates it; the rank may
 * reuse the memory once the descriptor completed.
 */
#define NX_DEV_OP_MAGIC 0x5044584eu  /* "NXDP" */
#define NX_DEV_NO_DONE UINT64_MAX    /* nx_dev_op.done_off: no done word */
#define NX_DEV_MAX_IOV 65536u        /* bucketed: most iovs in one op */

/* A device buffer: mem 0 is "none"; otherwise bytes from off inside registration mem. */
struct nx_dev_buf {
    uint32_t mem;
    uint32_t reserved;
    uint64_t off;
};

/* Bucketed: one iov of the concatenation, count elements. */
struct nx_dev_iov {
    struct nx_dev_buf buf;
    uint64_t count;
};

/* 64 bytes, followed by niov struct nx_dev_iov. */
struct nx_dev_op {
    uint32_t magic;       /* NX_DEV_OP_MAGIC */
    uint32_t niov;        /* bucketed: iovs that follow (their counts sum to count);
                             every other kind: 0 */
    struct nx_dev_buf in; /* shape's input; mem 0 where the shape has none, and bucketed */
    struct nx_dev_buf out;
    uint32_t ready_event; /* registered event: the daemon's stream waits for it before it
                             touches the buffers (the rank recorded it on its stream at
                             call time); 0: none */
    uint32_t reserved;
    uint64_t done_off;    /* arena offset of a uint64_t the daemon sets to done_value
                             (release) when the op's device work finished or failed; the
                             rank's stream waits for it.  NX_DEV_NO_DONE: none. */
    uint64_t done_value;
};

/* The stateless checks of a copied record for descriptor e: magic, reserved fields,
 * niov against the kind, done word inside the arena and 8-byte aligned.  The daemon
 * checks the registrations and extents itself.  0, or -EINVAL with a reason. */
int nx_dev_op_check(const struct nx_sqe *e, const struct nx_dev_op *r, uint64_t arena_bytes,
                    const char **why);

/* Bytes of the record with its iov table; false on overflow. */
bool nx_dev_op_bytes(uint32_t niov, uint64_t *bytes);

/* ---- peer reads ------------------------------------------------------------------
 * On a communicator that lives on one node, the ranks of a job may read each other's
 * staging slots (JoinRequest.peer_reads, JoinReply.pull_index / pull_count and the
 * read-only segment fds that follow the three).  A staged chunk of an op that only moves
 * data (broadcast, all_gather, gather, scatter, all_to_all) then moves without nexard's
 * copy: nexard writes, at each reader's out_off, a table of pull_n entries and completes
 * the reader's descriptor with pull_n set.  The reader copies each entry's bytes from
 * segment `peer` (its index among the job's ranks on the node; its own segment too) at
 * byte offset `off` into block `block` of this chunk of its output, then submits
 * NX_K_PULLED for (comm, seq, chunk).  Once every reader of the chunk has, nexard
 * completes the descriptors of the ranks whose slots others read (pull_hold; or, for a
 * rank that reads nothing, as a broadcast's root or a gather's non-root, its only
 * completion).  So a slot is never reused while another rank reads it, and a chunk moves
 * in two copies instead of three, by the ranks themselves.  A reduce_scatter chunk too
 * (version 5): its table names the reader's block of every rank's input, in rank order,
 * and the reader folds them into its output (block 0) in that order instead of copying
 * them.  The table is little more than the reader trusts of nexard anyway; it checks every
 * entry against the segments it mapped. */
#define NX_PULL_MAX_RANKS 32u          /* a job with more ranks on a node does not pull */
#define NX_PULL_MAX_ERRNO 4095u        /* NX_K_PULLED.tag: a failure's errno, at most
                                          (| NX_PULL_FAIL_WRITE) */
#define NX_PULL_MIN_BYTES (64u << 10)  /* smaller chunk blocks are copied by nexard */
#define NX_PULL_MIN_REDUCE_BYTES (256u << 10) /* reduce_scatter: smaller ones it folds */

struct nx_pull {
    uint32_t peer;  /* index of the segment among the job's ranks on this node */
    uint32_t block; /* output block of the chunk (broadcast, scatter, reduce_scatter: 0;
                       all_gather, gather, all_to_all: the source's rank); with
                       NX_PULL_WRITE, the input block this rank writes from */
    uint64_t off;   /* byte offset in that segment; single-copy (NX_SQE_CMA): the address
                       in the peer's process to read from (write to) */
    uint64_t bytes; /* the chunk's block (elements x element size); single copy: a part */
    uint64_t at;    /* single copy: where in the block the part starts (bytes); else 0 */
    uint32_t rank;  /* the peer's rank in the communicator (for error texts) */
    uint32_t flags; /* NX_PULL_WRITE, single copy only */
};
/* The entry is a write: `bytes` from this rank's input block `block` at `at`, to address
 * `off` in the peer's process (process_vm_writev).  A single-copy broadcast of
 * NX_CMA_SPLIT_BYTES or more is split so: each reader reads the first (P-1)/P of the
 * block while the root writes the rest into every reader, so that both CPUs copy; a
 * gather's ranks write their blocks into the root's output at once, instead of the root
 * reading them one after the other.  A rank written into is held like a source (its
 * completion waits for the writers' notices). */
#define NX_PULL_WRITE 1u
#define NX_CMA_SPLIT_BYTES (1u << 20)
/* The entry is a source of a fold (single copy, version 8): a single-copy all_reduce's,
 * reduce's or reduce_scatter's table starts with one such entry a rank of the
 * communicator, in rank order (its own among them, `off` then an address in its own
 * input), all naming the same part (`block`, `at`, `bytes`) of the rank's output.  The
 * rank folds them into that part in table order with nexard's kernels (reduce.h),
 * reading its peers' with process_vm_readv into the scratch that follows the table in its
 * slot.  An all_reduce's table goes on with NX_PULL_WRITE entries, one a peer, for the
 * same part: the rank writes its folded part into each peer's output, so that each part
 * is read, folded and written once, by one rank, piece by piece while it is in the
 * cache.  A reduce's non-root has one such entry, the root's, and no output of its own:
 * it folds into the scratch.  No two ranks touch the same bytes, in place or not: rank r
 * reads and writes part r of every buffer, and only that. */
#define NX_PULL_REDUCE 2u
/* A table's most entries: a rank's part of every rank, then every peer's to write. */
#define NX_PULL_MAX_ENTRIES (2u * NX_PULL_MAX_RANKS)
/* NX_K_PULLED.tag: a failed write, with the errno in the low bits. */
#define NX_PULL_FAIL_WRITE 0x1000u

/* ---- single copy -----------------------------------------------------------------
 * When every rank of a job on this node asked for it (JoinRequest.single_copy: the shim's
 * own process_vm_readv works, it is dumpable, and Yama lets its peers read it), all share
 * one uid and one pid namespace with nexard, a communicator on this node alone whose
 * ranks all read peers gets NX_PLAN_CMA (JoinReply.single_copy; nx_cqe.res_local of a
 * split or shrink).  Its ops that only move data, of at least NX_CMA_MIN_BYTES of block,
 * are then one NX_SQE_CMA descriptor a rank, with a one-chunk plan: nexard writes each
 * reader's table of its sources' buffer addresses, as for peer reads, and the reader
 * copies each block once, with process_vm_readv from the source (JoinReply.pull_pids),
 * straight into its output (a large broadcast and a gather also write, struct nx_pull).
 * One copy a block instead of two: Open MPI's shared memory moves these ops the same way. */
#define NX_PLAN_LOCAL 1u
#define NX_PLAN_CMA 2u
#define NX_CMA_MIN_BYTES (64u << 10)
/* A single-copy all_reduce's or reduce's vector (version 8; a reduce_scatter's block is
 * single-copy from NX_CMA_MIN_BYTES): smaller ones go through the slots, where nexard's
 * fold on its loop costs fewer hand-offs. */
#define NX_CMA_MIN_REDUCE_BYTES (256u << 10)

/* Where the fold's scratch starts in a single-copy table's slot, for a communicator of
 * `size` ranks: after the largest table, on a cache line.  A slot is at least 4 KiB and a
 * table at most 2560 bytes, so a piece of one element a source always fits. */
static inline uint64_t nx_cma_scratch_off(uint32_t size)
{
    return ((uint64_t)2 * size * sizeof(struct nx_pull) + 63u) / 64u * 64u;
}

/* Whether an op is single-copy: plan has NX_PLAN_CMA, kind is a broadcast, all_gather,
 * gather, scatter, all_to_all or reduce_scatter and its block (count x esize) is
 * NX_CMA_MIN_BYTES or more, or an all_reduce or reduce of NX_CMA_MIN_REDUCE_BYTES or
 * more.  The shim and nexard decide alike; nexard drops a rank whose descriptor says
 * otherwise. */
bool nx_op_single_copy(uint8_t kind, uint32_t esize, uint64_t count, unsigned plan);

/* The geometry the daemon chose; everything else is computed from it. */
struct nx_shm_geom {
    uint32_t sq_entries, cq_entries, err_entries, slot_count;
    uint64_t slot_bytes, heap_bytes;
    uint32_t max_pending; /* NX_PENDING_MIN .. NX_PENDING_MAX */
};

/* Fills *h (offsets, sizes, magic) from g; returns total bytes, 0 when g is invalid. */
uint64_t nx_shm_layout(const struct nx_shm_geom *g, struct nx_shm_hdr *h);

/* Checks a header the rank received; 0 or -EPROTO. */
int nx_shm_hdr_check(const struct nx_shm_hdr *h, uint64_t mapped_bytes);

/* ---- element geometry of an op -------------------------------------------------
 * Every kind moves data in "units" of count elements.  in_mul / out_mul say how
 * many blocks of `count` elements the input and output hold on one rank
 * (all_gather: in 1, out size).  A chunk covers elements [off, off + n) of every
 * block; a staged chunk lays block j at j * n elements of its slot region, a direct
 * buffer at j * count + off.  A staged all_gather's own block (j = the rank) is the
 * rank's to copy from its input to its output: the daemon may leave it unwritten in the
 * slot, which saves two of its three copies.
 */
struct nx_shape {
    uint32_t in_mul, out_mul;
    bool alias_ok; /* staged input and output may share one region */
    bool has_data;
};

/* Shape of kind for a communicator of `size` ranks, as seen by `rank` with `root`:
 *   all_reduce, bucketed, scan, exscan   in 1   out 1      alias
 *   broadcast                            root: in 1 out 0; others: in 0 out 1; alias
 *   reduce                               root: in 1 out 1 alias; others: in 1 out 0
 *   all_gather                           in 1   out size
 *   gather                               root: in 1 out size; others: in 1 out 0
 *   reduce_scatter                       in size  out 1
 *   scatter                              root: in size out 1; others: in 0 out 1
 *   all_to_all                           in size  out size
 *   send / recv                          in 1 out 0 / in 0 out 1
 *   barrier, split, free, abort          no data
 * Returns false for an unknown kind. */
bool nx_kind_shape(uint8_t kind, uint32_t size, uint32_t rank, uint32_t root,
                   struct nx_shape *out);

/* The most elements one chunk of a staged op can have: the largest n whose input and
 * output regions fit one slot on every rank (the root's shape is the largest).  It
 * depends only on (kind, size, esize, slot_bytes).  Returns 0 when not even one element
 * fits, UINT64_MAX for a kind without data. */
uint64_t nx_chunk_elems(uint8_t kind, uint32_t size, uint32_t esize, uint64_t slot_bytes);

/* The chunk plan of a collective with `count` elements per block on a communicator
 * whose plan bits are `plan` (NX_PLAN_LOCAL: its ranks were told it lives on one node,
 * JoinReply.local_plan or nx_cqe.res_local; a single-copy op has one chunk of `count`):
 * what nx_chunk_elems allows, except that a local broadcast or
 * all_gather that fits in NX_PIPE_SLOTS slots is cut into up to NX_PIPE_CHUNKS chunks (a
 * multiple of NX_PIPE_ALIGN elements, at least NX_PIPE_MIN_BYTES of block each, a
 * broadcast's NX_PIPE_MIN_BCAST_BYTES; an all_gather into at least two), so that the
 * root's or owner's copy into its slot, the copy to the other ranks and their copies out
 * overlap instead of following one another.  The minimum is of block, not of slot: each
 * chunk costs the same hand-offs, and an all_gather's slot holds 1 + size blocks of it.
 * A broadcast's readers copy each chunk out of the root's slot while the root copies the
 * next in (peer reads), and smaller chunks overlapped more of it; an all_gather's did not
 * gain from them.  Local reductions measured no gain from smaller chunks, or a loss
 * (docs/performance.md), and keep nx_chunk_elems.  An all_reduce, all_gather,
 * reduce_scatter or all_to_all on a communicator whose plan is not local (one spanning
 * nodes, or made from one) is cut into chunks of at most NX_SPAN_CHUNK_BYTES of slot: the
 * ranks' copies in and out and nexard's passes over a chunk then meet it in the cache,
 * and the slots hold at most `slots` of them of an op ahead (1.1-1.7 times the rate of
 * whole slots at 8-32 MiB, docs/performance.md); a rooted kind (broadcast, reduce, gather,
 * scatter, scan, exscan) too where a block is more than NX_SPAN_WHOLE_BYTES, and whole
 * slots below (nexard gates a rooted op's later parts, a round trip each, which
 * shorter ops would not hide).  Every rank and the daemon compute the same plan from the
 * op's signature. */
#define NX_PIPE_SLOTS 4u
#define NX_PIPE_CHUNKS 16u
#define NX_PIPE_MIN_BYTES (512u << 10)
#define NX_PIPE_MIN_BCAST_BYTES (256u << 10)
#define NX_PIPE_ALIGN 64u
#define NX_SPAN_CHUNK_BYTES (512u << 10)
#define NX_SPAN_WHOLE_BYTES (2u << 20)
uint64_t nx_op_chunk_elems(uint8_t kind, uint32_t size, uint32_t esize, uint64_t slot_bytes,
                           uint64_t count, unsigned plan);

/* The most staging slots one sequence stream of a rank holds at once (the collectives of
 * a communicator, or one point-to-point stream; libshim/request.c, "Slot fairness"): one
 * fewer than slot_count where there are several, and at most NX_MAX_SLOTS_PER_STREAM.
 * nexard reads it to tell a rank that does not submit a chunk from one that cannot. */
#define NX_MAX_SLOTS_PER_STREAM 4u
uint32_t nx_stream_slot_cap(uint32_t slot_count);

/* Whether an op's chunks (`chunk_elems`, from nx_op_chunk_elems) are smaller than a whole
 * slot: the local plan cut them to overlap the copies.  The shim does not stream the copy
 * into the slot of such a broadcast: its readers copy each chunk out while it is still in
 * the root's cache, and streaming measured a loss on it (docs/performance.md). */
bool nx_chunk_is_cut(uint8_t kind, uint32_t size, uint32_t esize, uint64_t slot_bytes,
                     uint64_t chunk_elems);

/* Number of chunks of an op: at least 1 (a count-0 op still has one empty chunk). */
uint64_t nx_chunk_count(uint64_t count, uint64_t chunk_elems);

/* "ring", "rd", "hd", "tree", "pairwise", "dissemination", "hillis-steele" for codes
 * 1..7 (daemon/algo/algo.h's enum nx_algo), "local" for 0, "?" beyond. */
const char *nx_algo_code_name(uint32_t code);

/* Element size of a dtype, 0 when unknown. */
uint32_t nx_dtype_size(uint8_t dtype);

/* Short names for messages: "all_reduce", "f32", "sum"; "?" when unknown. */
const char *nx_kind_name(uint8_t kind);
const char *nx_dtype_name(uint8_t dtype);
const char *nx_redop_name(uint8_t redop);

/* Generic text of a nexar_status_t ("peer lost"); the shim's nexar_strerror(). */
const char *nx_status_text(uint32_t status);

/* Kinds that take a reduction operator / a root. */
bool nx_kind_has_redop(uint8_t kind);
bool nx_kind_has_root(uint8_t kind);
/* all_reduce .. barrier: matched by sequence across the communicator (not send, recv,
 * split, free, abort). */
static inline bool nx_kind_is_collective(uint8_t kind)
{
    return kind >= NX_K_ALL_REDUCE && kind <= NX_K_BARRIER;
}

/* ---- ring operations -------------------------------------------------------
 * Producers: reserve, fill, publish.  Consumers: peek the published count, copy,
 * release.  Indices are free-running; the ring position is index & (entries - 1).
 */
static inline uint32_t nx_load_acquire(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void nx_store_release(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
/* The wake handshake of nx_ring_ctl: a store, then a full fence.  ThreadSanitizer has
 * no model of fences (gcc refuses them under -fsanitize=thread): its builds use
 * sequentially consistent accesses instead, which it understands. */
#if defined(__SANITIZE_THREAD__)
static inline void nx_wake_set(uint32_t *wake, uint32_t v)
{
    __atomic_store_n(wake, v, __ATOMIC_SEQ_CST);
}
static inline bool nx_wake_needed(const uint32_t *wake)
{
    return __atomic_load_n(wake, __ATOMIC_SEQ_CST) != 0;
}
#else
static inline void nx_wake_set(uint32_t *wake, uint32_t v)
{
    __atomic_store_n(wake, v, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
/* The producer's side, after publishing tail: must the doorbell ring? */
static inline bool nx_wake_needed(const uint32_t *wake)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return __atomic_load_n(wake, __ATOMIC_RELAXED) != 0;
}
#endif

/* Validation of one copied descriptor against what the daemon knows about the
 * client.  Returns 0, or -EINVAL and a reason in why (a static string). */
struct nx_sqe_limits {
    uint64_t arena_bytes;
    uint64_t slot_bytes;
    uint32_t comm_size; /* size of the communicator the sqe names */
    uint32_t comm_rank; /* this client's rank in it */
    unsigned comm_plan; /* its plan bits, NX_PLAN_* (nx_op_chunk_elems) */
};
int nx_sqe_validate(const struct nx_sqe *e, const struct nx_sqe_limits *lim,
                    const char **why);

/* Byte extent of the input and output of descriptor e in the arena (whole op when
 * direct, the chunk otherwise; a device descriptor's record; none for a single-copy one,
 * whose table takes the start of slot `tag`).  False on overflow. */
bool nx_sqe_extent(const struct nx_sqe *e, const struct nx_sqe_limits *lim,
                   uint64_t *in_bytes, uint64_t *out_bytes);

#endif /* NX_SHM_ABI_H */
