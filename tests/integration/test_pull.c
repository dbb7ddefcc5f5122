/*
 * test_pull.c - peer reads (shm_abi.h): ranks of one node read broadcast, all_gather,
 * gather, scatter and all_to_all chunks from each other's staging slots, and fold
 * reduce_scatter chunks from them; with single copy, from each other's buffers, and fold
 * all_reduces and reduces too.
 *
 *   1. 3 ranks: broadcasts, gathers, scatters and reduces (every root), all_gathers,
 *      all_to_alls, reduce_scatters and all_reduces, of 1-, 2-, 4- and 8-byte elements,
 *      from one chunk to many, staged and mixed with nexar_alloc buffers, each checked
 *      bit for bit against the reference; a reduce_scatter and an all_reduce of i32 whose
 *      buffers are not element-aligned (the fold's way around the kernels' alignment),
 *      and both of f32 on a communicator whose ranks run backwards (the fold's order is
 *      the communicator's); nexard's "bytes pulled" grows by exactly what the chunk plan
 *      says the staged ones read (the mixed ones read nothing: a direct part is
 *      nexard's to copy).  With single copy (every rank allows it), the ops that move
 *      64 KiB of block or more (an all_reduce or reduce: 256 KiB) go in one chunk from the sources'
 *      buffers, nexar_alloc ones too.
 *   2. The same with NEXAR_SINGLE_COPY=0 on one rank (the slots, as above), and with
 *      NEXAR_PEER_READS=0 on one rank: exact, and nothing pulled.
 *   3. A reader that never says it read (a raw client beside a real root): nexarctl ops
 *      names it while the root waits, and the root's broadcast fails with TIMEOUT naming
 *      that rank and the chunk; the peer's segment it was given cannot be mapped
 *      writable.
 *   4. Single copy whose root's buffer cannot be read (a raw root naming a PROT_NONE
 *      mapping): the reader's broadcast fails with the cause (rank, pid, errno), its
 *      notice says so, and nexard fails the op on the root too, naming both ranks; a
 *      split broadcast whose (raw) reader's output cannot be written: the root's fails
 *      with the cause, and the reader hears nexard's; the same for an all_reduce whose
 *      raw rank's input cannot be read, or its output written.  Then an all_reduce whose
 *      raw rank aborts the world after it got its table and says it copied half a second
 *      later: the real ranks return ABORTED only after that notice (until then the raw
 *      rank might still write into their buffers), or, when it never says so, at the
 *      deadline after the op's last progress; and one whose raw rank says the live
 *      rank 0 is gone (ESRCH): after a second, INTERNAL with its word, never OK.
 *   5. A rank that read frees the world while another (raw) has not said it read: the
 *      root's broadcast completes all the same.
 *   6. A notice for a chunk nobody gave the client: it is dropped, with the reason in
 *      nexard's log, and the daemon keeps serving.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "ctlrun.h"
#include "frame.h"
#include "itest.h"
#include "nexar.pb-c.h"
#include "rawclient.h"
#include "shm_abi.h"
#include "tjson.h"

#define SLOT_BYTES (1u << 20)
#define WORLD 3

static int fails;
static struct hx_daemon g_d;

struct pcase {
    int coll, dtype;
    size_t count;
    int op; /* reduce_scatter */
};

static const struct pcase cases[] = {
    {TL_BROADCAST, NEXAR_F32, 1000, 0},         /* one small chunk */
    {TL_BROADCAST, NEXAR_U8, 300001, 0},        /* cut in two: 256 KiB and a short one */
    {TL_BROADCAST, NEXAR_F32, (1u << 19) + 11, 0}, /* cut in 256 KiB chunks, pulled; a
                                                     * short last one is not */
    {TL_BROADCAST, NEXAR_F32, (1u << 20) + 3, 0}, /* beyond 4 slots: 1 MiB chunks, pulled */
    {TL_BROADCAST, NEXAR_U8, (5u << 20) + 7, 0},
    {TL_ALL_GATHER, NEXAR_F32, 999, 0},
    {TL_ALL_GATHER, NEXAR_U8, 300001, 0},       /* cut small, odd blocks */
    {TL_ALL_GATHER, NEXAR_F32, (1u << 19) + 5, 0},
    {TL_ALL_GATHER, NEXAR_U8, (3u << 20) + 1, 0},
    {TL_GATHER, NEXAR_F32, 2000, 0},
    {TL_GATHER, NEXAR_F32, (1u << 18) + 9, 0},   /* 3 blocks of 1 MiB in 1 MiB slots */
    {TL_SCATTER, NEXAR_U8, 100001, 0},
    {TL_SCATTER, NEXAR_F32, (1u << 18) + 9, 0},
    {TL_ALL_TO_ALL, NEXAR_U8, 5000, 0},
    {TL_ALL_TO_ALL, NEXAR_F32, (1u << 17) + 1, 0},
    {TL_ALL_TO_ALL, NEXAR_F64, (1u << 16) + 3, 0}, /* 8-byte and 2-byte elements */
    {TL_GATHER, NEXAR_BF16, (1u << 19) + 1, 0},
    /* Blocks of 256 KiB fill a 1 MiB slot of 3 ranks: one chunk, folded by the ranks;
     * smaller chunks (the last ones here) are nexard's. */
    {TL_REDUCE_SCATTER, NEXAR_F32, 1000, NEXAR_SUM},
    {TL_REDUCE_SCATTER, NEXAR_F32, 1u << 16, NEXAR_SUM},
    {TL_REDUCE_SCATTER, NEXAR_U8, 300001, NEXAR_MAX},
    {TL_REDUCE_SCATTER, NEXAR_BF16, (1u << 18) + 3, NEXAR_SUM},
    {TL_REDUCE_SCATTER, NEXAR_F64, (1u << 16) + 1, NEXAR_MIN},
    {TL_REDUCE_SCATTER, NEXAR_I64, 1u << 16, NEXAR_PROD},
    /* With single copy, an all_reduce of 256 KiB or more is folded by its ranks, each its
     * part of every rank's buffer, in pieces of 128 KiB (one here, many there); without,
     * or smaller, nexard folds it. */
    {TL_ALL_REDUCE, NEXAR_F32, 1000, NEXAR_SUM},
    {TL_ALL_REDUCE, NEXAR_F32, 1u << 16, NEXAR_SUM},
    {TL_ALL_REDUCE, NEXAR_U8, 300001, NEXAR_MAX},
    {TL_ALL_REDUCE, NEXAR_BF16, (1u << 18) + 3, NEXAR_SUM},
    {TL_ALL_REDUCE, NEXAR_F16, (1u << 20) + 5, NEXAR_SUM},
    {TL_ALL_REDUCE, NEXAR_F64, (1u << 17) + 1, NEXAR_MIN},
    {TL_ALL_REDUCE, NEXAR_I64, 1u << 16, NEXAR_PROD},
    {TL_ALL_REDUCE, NEXAR_F32, (3u << 20) + 7, NEXAR_SUM},
    /* A reduce the same way, every root: a non-root writes its part into the root's. */
    {TL_REDUCE, NEXAR_F32, 1000, NEXAR_SUM},
    {TL_REDUCE, NEXAR_F64, (1u << 15) + 9, NEXAR_MAX},
    {TL_REDUCE, NEXAR_BF16, (1u << 19) + 1, NEXAR_SUM},
    {TL_REDUCE, NEXAR_I32, (1u << 20) + 3, NEXAR_PROD},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int kind_of(int coll)
{
    switch (coll) {
    case TL_BROADCAST: return NX_K_BROADCAST;
    case TL_ALL_GATHER: return NX_K_ALL_GATHER;
    case TL_GATHER: return NX_K_GATHER;
    case TL_SCATTER: return NX_K_SCATTER;
    case TL_REDUCE_SCATTER: return NX_K_REDUCE_SCATTER;
    case TL_ALL_REDUCE: return NX_K_ALL_REDUCE;
    case TL_REDUCE: return NX_K_REDUCE;
    default: return NX_K_ALL_TO_ALL;
    }
}

/* Blocks the ranks read by peer reads in one chunk (a rank's reads of its own slot
 * included; an all_gather's own block is its shim's). */
static uint64_t reads_per_chunk(uint8_t kind, uint64_t P)
{
    switch (kind) {
    case NX_K_BROADCAST: return P - 1;
    case NX_K_ALL_GATHER: return P * (P - 1);
    case NX_K_GATHER:
    case NX_K_SCATTER: return P;
    default: return P * P; /* all_to_all, reduce_scatter */
    }
}

/* What a single-copy all_reduce of `bytes` moves: each rank reads its part of every
 * rank (its own included) and writes it to every peer, 2P - 1 times the vector. */
static uint64_t ar_moved(uint64_t bytes, uint32_t P)
{
    return (2 * (uint64_t)P - 1) * bytes;
}

/* A single-copy reduce of n elements to root: the parts read as an all_reduce's, and every
 * part but the root's own written once, into the root (pull.c's parts: r/P of the vector
 * on 64 elements, the last one ending at n). */
static uint64_t reduce_moved(uint64_t n, uint32_t es, uint32_t P, uint32_t root)
{
    uint64_t lo = (n / P * root + n % P * root / P) / 64 * 64;
    uint64_t hi = root + 1 == P ? n : (n / P * (root + 1) + n % P * (root + 1) / P) / 64 * 64;
    return (uint64_t)P * n * es + (n - (hi - lo)) * es;
}

/* What nexard's peer reads move for one op of case k, from the chunk plan (pull.c's rule
 * written out again: blocks of NX_PULL_MIN_BYTES or more, two chunks or more; a
 * reduce_scatter from one chunk on, its blocks of NX_PULL_MIN_REDUCE_BYTES or more; a
 * single-copy op, of NX_CMA_MIN_BYTES of block or more, or NX_CMA_MIN_REDUCE_BYTES for
 * an all_reduce or reduce, in one chunk, whatever its buffers; the slots never
 * pull an all_reduce or reduce), rooted at root.  *any_buffers: also an op whose buffers
 * are nexar_alloc's (single copy). */
static uint64_t pulled_bytes(const struct pcase *k, uint32_t P, uint32_t root, unsigned plan,
                             bool *any_buffers)
{
    uint32_t es = nx_dtype_size((uint8_t)k->dtype);
    uint8_t kind = (uint8_t)kind_of(k->coll);
    bool reduce = kind == NX_K_REDUCE_SCATTER;
    *any_buffers = false;
    if (nx_op_single_copy(kind, es, k->count, plan)) {
        *any_buffers = true;
        if (kind == NX_K_REDUCE)
            return reduce_moved(k->count, es, P, root);
        return kind == NX_K_ALL_REDUCE ? ar_moved(k->count * es, P)
                                       : k->count * es * reads_per_chunk(kind, P);
    }
    if (kind == NX_K_ALL_REDUCE || kind == NX_K_REDUCE)
        return 0;
    uint64_t E = nx_op_chunk_elems(kind, P, es, SLOT_BYTES, k->count, plan);
    uint64_t nch = nx_chunk_count(k->count, E), total = 0;
    if (nch < (reduce ? 1u : 2u))
        return 0;
    for (uint64_t c = 0; c < nch; c++) {
        uint64_t n = k->count - c * E < E ? k->count - c * E : E;
        if (n * es >= (reduce ? NX_PULL_MIN_REDUCE_BYTES : NX_PULL_MIN_BYTES))
            total += n * es * reads_per_chunk(kind, P);
    }
    return total;
}

/* Two chunks of 256 KiB blocks, both folded by the ranks (NX_PULL_MIN_REDUCE_BYTES). */
#define UNALIGNED_COUNT (1u << 17)

static uint32_t ua_in(int rank, uint32_t blk, uint32_t i)
{
    return (uint32_t)rank * 2654435761u + blk * 40503u + i * 2246822519u;
}

/* A reduce_scatter (or all_reduce: ar) of i32 whose buffers start one byte past an
 * element boundary (nexar.h asks for aligned ones; the staged path and the ranks' fold
 * cope): exact, as the wrapping sum of ua_in. */
static int unaligned(nexar_comm_t *w, int rank, int P, bool ar)
{
    size_t n = UNALIGNED_COUNT, es = sizeof(uint32_t), blocks = ar ? 1 : (size_t)P;
    uint8_t *in = malloc(n * es * blocks + 1), *out = ar ? in : malloc(n * es + 1);
    const char *what = ar ? "all_reduce" : "reduce_scatter";
    int f = 0;
    if (!in || !out) {
        free(in);
        if (!ar)
            free(out);
        tl_log("FAIL rank %d: no memory for the unaligned %s", rank, what);
        return 1;
    }
    for (uint32_t b = 0; b < (uint32_t)blocks; b++)
        for (uint32_t i = 0; i < n; i++) {
            uint32_t v = ua_in(rank, b, i);
            memcpy(in + 1 + ((size_t)b * n + i) * es, &v, es);
        }
    nexar_status_t s = ar ? nexar_all_reduce(w, in + 1, n, NEXAR_I32, NEXAR_SUM)
                          : nexar_reduce_scatter(w, in + 1, out + 1, n, NEXAR_I32, NEXAR_SUM);
    if (s != NEXAR_OK) {
        tl_log("FAIL rank %d: unaligned %s: %s", rank, what, nexar_last_error());
        f = 1;
    }
    for (uint32_t i = 0; !f && i < n; i++) {
        uint32_t want = 0, got;
        for (int q = 0; q < P; q++)
            want += ua_in(q, ar ? 0 : (uint32_t)rank, i);
        memcpy(&got, out + 1 + (size_t)i * es, es);
        if (got != want) {
            tl_log("FAIL rank %d: unaligned %s element %u: %u, want %u", rank, what, i, got,
                   want);
            f = 1;
        }
    }
    free(in);
    if (!ar)
        free(out);
    return f;
}

/* One chunk of 256 KiB blocks, folded by the ranks. */
#define REVERSED_COUNT (1u << 16)

/* Comm rank q's f32 input: 1 + (i mod 7) at rank 0, 2^-24 at the others.  Where it is 1,
 * a left fold in rank order rounds 1 + 2^-24 (half an ulp of 1) back to 1 at every step;
 * folded from the other end, the small ones add up to 2^-23 first and the sum is
 * 1 + 2^-23. */
static float rev_in(int q, uint32_t i)
{
    return q == 0 ? 1.0f + (float)(i % 7) : 0x1p-24f;
}

/* A reader folds in the communicator's rank order, not in its peers' pull indices (world
 * order): on a communicator whose ranks run backwards, the sum of a reduce_scatter (or
 * all_reduce: ar) must come out as rank order's left fold. */
static int reversed(nexar_comm_t *w, int rank, int P, bool ar)
{
    nexar_comm_t *rev = NULL;
    const char *what = ar ? "all_reduce" : "reduce_scatter";
    if (nexar_comm_split(w, 0, (uint32_t)(P - 1 - rank), &rev) != NEXAR_OK || !rev) {
        tl_log("FAIL rank %d: split in reverse: %s", rank, nexar_last_error());
        return 1;
    }
    int q = P - 1 - rank, f = 0;
    size_t n = REVERSED_COUNT, blocks = ar ? 1 : (size_t)P;
    float *in = malloc(n * sizeof(float) * blocks), *out = ar ? in : malloc(n * sizeof(float));
    if (!in || !out) {
        tl_log("FAIL rank %d: no memory for the reversed %s", rank, what);
        f = 1;
        goto done;
    }
    for (size_t i = 0; i < n * blocks; i++)
        in[i] = rev_in(q, (uint32_t)(i % n));
    if ((ar ? nexar_all_reduce(rev, in, n, NEXAR_F32, NEXAR_SUM)
            : nexar_reduce_scatter(rev, in, out, n, NEXAR_F32, NEXAR_SUM)) != NEXAR_OK) {
        tl_log("FAIL rank %d: reversed %s: %s", rank, what, nexar_last_error());
        f = 1;
        goto done;
    }
    for (uint32_t i = 0; i < n && !f; i++) {
        volatile float want = rev_in(0, i);
        for (int k = 1; k < P; k++)
            want = want + rev_in(k, i);
        if (memcmp(&out[i], (const void *)&want, sizeof(float)) != 0) {
            tl_log("FAIL rank %d (rank %d of the reversed communicator): %s element %u is "
                   "%a, rank order's left fold gives %a", rank, q, what, i, (double)out[i],
                   (double)want);
            f = 1;
        }
    }
done:
    free(in);
    if (!ar)
        free(out);
    if (nexar_comm_free(rev) != NEXAR_OK)
        f = 1;
    return f;
}

static int rank_cases(struct hx_rank *r)
{
    nexar_comm_t *w;
    int f = 0;
    if (r->arg && r->rank == 0)
        setenv(r->arg == (void *)1 ? "NEXAR_PEER_READS" : "NEXAR_SINGLE_COPY", "0", 1);
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    uint64_t seed = 1;
    for (size_t i = 0; i < NCASES; i++) {
        int rooted = cases[i].coll == TL_BROADCAST || cases[i].coll == TL_GATHER ||
                     cases[i].coll == TL_SCATTER || cases[i].coll == TL_REDUCE;
        int roots = rooted ? r->size : 1;
        for (int root = 0; root < roots; root++)
            for (int mode = TL_HEAP; mode <= TL_MIXED; mode += TL_MIXED - TL_HEAP) {
                uint64_t sd = seed++;
                struct tl_case k = {.coll = cases[i].coll, .dtype = cases[i].dtype,
                                    .op = cases[i].op, .count = cases[i].count,
                                    .root = root, .mode = mode,
                                    .call = (int)(sd % 3), /* blocking, wait, test loop */
                                    .seed = sd};
                if (tl_run_case(w, &k) != TL_CASE_OK)
                    f++;
            }
    }
    for (int ar = 0; ar < 2; ar++) {
        f += unaligned(w, r->rank, r->size, ar);
        f += reversed(w, r->rank, r->size, ar);
    }
    nexar_finalize();
    return f ? 1 : 0;
}

static uint64_t stat_pulled(void)
{
    int rc;
    uint64_t v = 0;
    struct tj *j = tl_ctl_json(g_d.dir, g_d.sock, "stats", &rc);
    if (!j || rc != 0 || tj_u64(j, "bytes_pulled", &v) < 0) {
        tl_log("FAIL nexarctl --json stats: exit %d, no bytes_pulled", rc);
        fails++;
    }
    tj_free(j);
    return v;
}

/* off: 0, everything on; 1, NEXAR_PEER_READS=0 on rank 0; 2, NEXAR_SINGLE_COPY=0 on it. */
static void phase_cases(const char *what, int off, uint64_t want)
{
    uint64_t before = stat_pulled();
    struct hx_job_opts o = {.sock = g_d.sock, .size = WORLD, .fn = rank_cases,
                            .arg = (void *)(intptr_t)off, .nexar_timeout_s = 60};
    if (hx_run(&o, 240)) {
        tl_log("FAIL %s: the ranks' results", what);
        fails++;
        return;
    }
    uint64_t got = stat_pulled() - before;
    EXPECT_TRUE(fails, got == want, "%s: nexard counted %llu bytes pulled, the plan says %llu",
                what, (unsigned long long)got, (unsigned long long)want);
    if (got == want)
        tl_log("ok: %s: every result exact, %llu bytes pulled", what, (unsigned long long)got);
}

/* ---- a raw reader beside a real rank ---- */

struct raw {
    int fd, sq_efd;
    uint8_t *base;
    size_t bytes;
    struct nx_shm_hdr h;
    uint32_t comm, tail;
};

/* Joins job as rank `rank` of 2 with peer reads (and single copy: cma), like the shim
 * does. */
static int raw_join_n(struct raw *c, const char *job, uint32_t rank, uint32_t world,
                      bool cma)
{
    memset(c, 0, sizeof(*c));
    c->fd = rc_connect(g_d.sock);
    if (c->fd < 0)
        return -1;
    uint8_t *p = NULL, *pl = NULL;
    size_t n = rc_pack_hello(1, &p);
    struct nx_frame_hdr fh;
    int fds[NX_FRAME_MAX_FDS], nfds = 0;
    int rv = nx_chan_send(c->fd, NX_MSG_HELLO, p, (uint32_t)n, NULL, 0);
    free(p);
    if (rv || nx_chan_recv(c->fd, &fh, &pl, 5000, NULL, 0, &nfds))
        return -1;
    free(pl);
    Nexar__JoinRequest m = NEXAR__JOIN_REQUEST__INIT;
    m.job = (char *)job;
    m.rank = rank;
    m.world_size = world;
    m.local_rank = rank;
    m.timeout_ms = 3000;
    m.coord = (char *)"";
    m.peer_reads = true;
    m.single_copy = cma;
    n = nexar__join_request__get_packed_size(&m);
    p = malloc(n);
    nexar__join_request__pack(&m, p);
    rv = nx_chan_send(c->fd, NX_MSG_JOIN, p, (uint32_t)n, NULL, 0);
    free(p);
    if (rv || nx_chan_recv(c->fd, &fh, &pl, 10000, fds, NX_FRAME_MAX_FDS, &nfds) ||
        fh.type != NX_MSG_JOIN_REPLY)
        return -1;
    Nexar__JoinReply *jr = nexar__join_reply__unpack(NULL, fh.length, pl);
    free(pl);
    if (!jr || jr->status != 0 || jr->pull_count != world || nfds != 2 + (int)world ||
        jr->single_copy != cma || jr->n_pull_pids != (cma ? world : 0u)) {
        tl_log("FAIL raw reader: JOIN_REPLY status %d, %u peer segments, %d fds, single "
               "copy %d", jr ? (int)jr->status : -1, jr ? jr->pull_count : 0, nfds,
               jr ? (int)jr->single_copy : -1);
        if (jr)
            nexar__join_reply__free_unpacked(jr, NULL);
        return -1;
    }
    c->comm = jr->world_comm;
    uint64_t bytes = jr->segment_bytes;
    nexar__join_reply__free_unpacked(jr, NULL);
    /* The peer's segment is read-only: a write mapping must be refused. */
    void *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[3], 0);
    EXPECT_TRUE(fails, w == MAP_FAILED, "a peer's segment could be mapped writable");
    if (w != MAP_FAILED)
        munmap(w, 4096);
    c->bytes = bytes;
    c->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    c->sq_efd = fds[1];
    close(fds[0]);
    for (int i = 2; i < nfds; i++)
        close(fds[i]);
    if (c->base == MAP_FAILED)
        return -1;
    memcpy(&c->h, c->base, sizeof(c->h));
    c->tail = ((struct nx_ring_ctl *)(void *)(c->base + c->h.sq_ctl_off))->tail;
    return 0;
}

static int raw_join(struct raw *c, const char *job, uint32_t rank, bool cma)
{
    return raw_join_n(c, job, rank, 2, cma);
}

static void raw_push(struct raw *c, const struct nx_sqe *s)
{
    struct nx_ring_ctl *ctl = (struct nx_ring_ctl *)(void *)(c->base + c->h.sq_ctl_off);
    struct nx_sqe *sq = (struct nx_sqe *)(void *)(c->base + c->h.sq_off);
    sq[c->tail & (c->h.sq_entries - 1)] = *s;
    nx_store_release(&ctl->tail, ++c->tail);
    uint64_t one = 1;
    if (write(c->sq_efd, &one, sizeof(one)) < 0)
        tl_log("doorbell: %s", strerror(errno));
}

static void raw_close(struct raw *c)
{
    if (c->base && c->base != MAP_FAILED)
        munmap(c->base, c->bytes);
    if (c->sq_efd > 0)
        close(c->sq_efd);
    if (c->fd >= 0)
        close(c->fd);
}

/* A raw rank could not join: the failure (why), and the real ranks that wait for it
 * ended and reaped. */
static void join_failed(const char *why, const pid_t *pids, int n)
{
    tl_log("FAIL: %s", why);
    fails++;
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++)
        hx_wait_pid(pids[i], 30, NULL);
}

/* Rank `rank` of `size`, real, forked, with NEXAR_TIMEOUT timeout_s: fn(r) with r->arg =
 * arg is its exit status. */
static pid_t fork_rank(const char *job, int rank, int size, int timeout_s, hx_rank_fn fn,
                       void *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        char rs[16], ss[16], ts[16];
        snprintf(rs, sizeof(rs), "%d", rank);
        snprintf(ss, sizeof(ss), "%d", size);
        snprintf(ts, sizeof(ts), "%d", timeout_s);
        setenv("NEXAR_SOCKET", g_d.sock, 1);
        setenv("NEXAR_JOB", job, 1);
        setenv("NEXAR_RANK", rs, 1);
        setenv("NEXAR_WORLD_SIZE", ss, 1);
        setenv("NEXAR_TIMEOUT", ts, 1);
        struct hx_rank r = {.rank = rank, .size = size, .job = job, .sock = g_d.sock,
                            .arg = arg};
        _exit(fn(&r));
    }
    return pid;
}

#define BIG_COUNT ((5u << 20) / 4) /* f32: 5 MiB, 5 chunks of one 1 MiB slot */

static int root_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    float *buf = malloc(BIG_COUNT * sizeof(float));
    for (size_t i = 0; i < BIG_COUNT; i++)
        buf[i] = (float)i;
    nexar_status_t s = nexar_broadcast(w, buf, BIG_COUNT, NEXAR_F32, 0);
    const char *text = nexar_last_error();
    int bad = 0;
    if (s != NEXAR_ERR_TIMEOUT ||
        !strstr(text, "rank(s) 1 did not finish reading chunk 1 of 5 from the other ranks' "
                      "slots") ||
        !strstr(text, "broadcast seq 0")) {
        tl_log("FAIL root: broadcast gave %s: \"%s\"", nexar_strerror(s), text);
        bad = 1;
    } else {
        tl_log("ok: a reader that never reads: \"%s\"", text);
    }
    free(buf);
    nexar_finalize();
    return bad;
}

static void phase_silent_reader(void)
{
    char job[96];
    hx_job_name(job, sizeof(job), "silent");
    /* The real root is rank 0 of 2, forked here; this process is rank 1. */
    pid_t pid = fork_rank(job, 0, 2, 2, root_rank, NULL);
    struct raw c;
    if (raw_join(&c, job, 1, false)) {
        join_failed("the raw reader could not join", (pid_t[]){pid}, 1);
        return;
    }
    /* Its chunks, staged, as the non-root: nexard answers each with a peer-read table,
     * and this client never says NX_K_PULLED. */
    uint64_t per = nx_op_chunk_elems(NX_K_BROADCAST, 2, 4, c.h.slot_bytes, BIG_COUNT, true);
    for (uint32_t k = 0; k * per < BIG_COUNT && k < c.h.slot_count; k++) {
        struct nx_sqe s = {.user_data = 100 + k, .comm_id = c.comm, .kind = NX_K_BROADCAST,
                           .dtype = NEXAR_F32, .count = BIG_COUNT, .chunk = k,
                           .in_off = k * c.h.slot_bytes, .out_off = k * c.h.slot_bytes};
        raw_push(&c, &s);
    }
    /* While the root waits, nexarctl ops names the reader that holds the op up. */
    struct tj *v = NULL;
    uint64_t waiting = 99, done = 0;
    const char *algo = NULL;
    for (double end = tl_now() + 1.5; tl_now() < end; usleep(50000)) {
        int rc;
        tj_free(v);
        v = tl_ctl_json(g_d.dir, g_d.sock, "ops", &rc);
        algo = v ? tj_str(v, "ops[0].algorithm") : NULL;
        if (v && tj_len(v, "ops[0].waiting_for") == 1 &&
            tj_u64(v, "ops[0].waiting_for[0]", &waiting) == 0 &&
            tj_u64(v, "ops[0].chunks_done", &done) == 0 && done == 3)
            break;
    }
    EXPECT_TRUE(fails, algo && !strcmp(algo, "local-peer-reads") && waiting == 1 && done == 3,
                "nexarctl ops while the reader is silent: algorithm %s, waiting for rank %llu, "
                "%llu chunks run (expected local-peer-reads, rank 1, 3: the root's slots)",
                algo ? algo : "(none)", (unsigned long long)waiting, (unsigned long long)done);
    if (algo && !strcmp(algo, "local-peer-reads") && waiting == 1)
        tl_log("ok: nexarctl ops: local-peer-reads, %llu chunks run, waiting for rank 1",
               (unsigned long long)done);
    tj_free(v);
    int ws = 0;
    if (hx_wait_pid(pid, 60, &ws) || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        tl_log("FAIL: the root of the broadcast with a silent reader");
        fails++;
    }
    raw_close(&c);
}

/* The next completion of a raw client, with its error text ("" without one); -1 when none
 * came within timeout_ms. */
static int raw_cqe(struct raw *c, struct nx_cqe *out, char *text, size_t len, int timeout_ms)
{
    struct nx_ring_ctl *ctl = (struct nx_ring_ctl *)(void *)(c->base + c->h.cq_ctl_off);
    const struct nx_cqe *cq = (const struct nx_cqe *)(const void *)(c->base + c->h.cq_off);
    const struct nx_err_entry *err =
        (const struct nx_err_entry *)(const void *)(c->base + c->h.err_off);
    for (double end = tl_now() + timeout_ms / 1000.0; tl_now() < end; usleep(1000)) {
        uint32_t head = ctl->head;
        if (nx_load_acquire(&ctl->tail) == head)
            continue;
        *out = cq[head & (c->h.cq_entries - 1)];
        nx_store_release(&ctl->head, head + 1);
        text[0] = '\0';
        if (out->err_seq != NX_NO_ERR_TEXT) {
            const struct nx_err_entry *e = &err[out->err_seq % c->h.err_entries];
            if (nx_load_acquire(&e->seq) == out->err_seq)
                snprintf(text, len, "%s", e->text);
        }
        return 0;
    }
    return -1;
}

/* ---- single copy: a buffer that cannot be read or written ---- */

#define FAULT_COUNT (1u << 17) /* f32: 512 KiB, a single-copy broadcast read whole */
#define SPLIT_COUNT (1u << 18) /* f32: 1 MiB, split: the root writes half (pull.c) */
#define AR_FAULT_COUNT (1u << 17) /* f32: 512 KiB, a single-copy all_reduce: 2 parts */

/* Which copy fails: the raw rank 1 (the parent) names a buffer that cannot be read as a
 * broadcast's root, or written as a split broadcast's reader; or, in an all_reduce, an
 * input that cannot be read, or (hostile: in place it is one buffer) an output that cannot
 * be written. */
enum fault { F_ROOT, F_READER, F_AR_READ, F_AR_WRITE };

/* Rank 0, real, of the op whose raw rank 1 makes `fault`: the op fails with the cause
 * (its bytes, rank 1, its pid, the errno), and the next op with nexard's. */
static int fault_rank(struct hx_rank *r)
{
    enum fault fault = (enum fault)(intptr_t)r->arg;
    bool ar = fault >= F_AR_READ, read = fault == F_ROOT || fault == F_AR_READ;
    uint32_t count = ar ? AR_FAULT_COUNT : fault == F_ROOT ? FAULT_COUNT : SPLIT_COUNT;
    /* An all_reduce's rank 0 reads and writes its part, the first half. */
    size_t bytes = count * sizeof(float) / (fault == F_ROOT ? 1 : 2);
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    float *buf = calloc(count, sizeof(float));
    char want[192];
    snprintf(want, sizeof(want), "%s seq 0: %s %zu bytes %s rank 1's buffer (pid %d) "
             "with process_vm_%s: Bad address; NEXAR_SINGLE_COPY=0 turns single copy off",
             ar ? "all_reduce" : "broadcast", read ? "reading" : "writing", bytes,
             read ? "of" : "into", (int)getppid(), read ? "readv" : "writev");
    nexar_status_t s = ar ? nexar_all_reduce(w, buf, count, NEXAR_F32, NEXAR_SUM)
                          : nexar_broadcast(w, buf, count, NEXAR_F32, fault == F_ROOT ? 1 : 0);
    const char *text = nexar_last_error();
    int bad = s != NEXAR_ERR_INTERNAL || !strstr(text, want);
    if (bad)
        tl_log("FAIL single-copy fault %d: the op gave %s: \"%s\", expected \"%s\"", fault,
               nexar_strerror(s), text, want);
    else
        tl_log("ok: a single-copy rank that cannot copy: \"%s\"", text);
    s = nexar_barrier(w);
    text = nexar_last_error();
    if (s != NEXAR_ERR_INTERNAL || !strstr(text, ar ? "all_reduce seq 0 on comm"
                                                    : "broadcast seq 0 on comm")) {
        tl_log("FAIL single-copy fault %d: the next op gave %s: \"%s\"", fault,
               nexar_strerror(s), text);
        bad = 1;
    }
    free(buf);
    nexar_finalize();
    return bad;
}

/* The raw side of fault_rank.  It gets its table first unless it roots the broadcast
 * (it never copies), and then nexard's failure, which names both ranks: a source whose
 * data did not arrive never hears OK. */
static void phase_cma_fault(enum fault fault)
{
    static const char *const names[] = {"cmaread", "cmawrite", "cmaarread", "cmaarwrite"};
    char job[96];
    hx_job_name(job, sizeof(job), names[fault]);
    bool ar = fault >= F_AR_READ, read = fault == F_ROOT || fault == F_AR_READ;
    uint32_t count = ar ? AR_FAULT_COUNT : fault == F_ROOT ? FAULT_COUNT : SPLIT_COUNT;
    size_t len = count * sizeof(float);
    pid_t pid = fork_rank(job, 0, 2, 10, fault_rank, (void *)(intptr_t)fault);
    struct raw c;
    if (raw_join(&c, job, 1, true)) {
        join_failed("the raw rank could not join with single copy", (pid_t[]){pid}, 1);
        return;
    }
    /* Mapped, but never readable nor writable (or, F_AR_WRITE, never writable):
     * process_vm_readv / writev get EFAULT. */
    void *hole = mmap(NULL, len, fault == F_AR_WRITE ? PROT_READ : PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *fine = calloc(count, sizeof(float));
    struct nx_sqe s = {.user_data = 77, .comm_id = c.comm,
                       .kind = ar ? NX_K_ALL_REDUCE : NX_K_BROADCAST, .dtype = NEXAR_F32,
                       .count = count, .flags = NX_SQE_CMA, .peer = fault == F_ROOT ? 1 : 0};
    if (fault == F_ROOT || ar)
        s.in_off = (uint64_t)(uintptr_t)(fault == F_AR_WRITE ? fine : hole);
    if (fault != F_ROOT)
        s.out_off = (uint64_t)(uintptr_t)hole;
    raw_push(&c, &s);
    struct nx_cqe e;
    char text[NX_ERR_TEXT_BYTES];
    int got = raw_cqe(&c, &e, text, sizeof(text), 10000);
    /* An all_reduce's table: its part of both ranks, and the write to rank 0. */
    bool table = got == 0 && e.status == 0 && e.pull_n == (ar ? 3u : 1u) && e.pull_hold == 1;
    if (fault != F_ROOT && table)
        got = raw_cqe(&c, &e, text, sizeof(text), 10000);
    char want[128];
    snprintf(want, sizeof(want), "rank 0 could not %s rank 1's buffer with process_vm_%s: "
             "Bad address", read ? "read" : "write into", read ? "readv" : "writev");
    EXPECT_TRUE(fails, (fault == F_ROOT || table) && got == 0 &&
                e.status == NEXAR_ERR_INTERNAL && strstr(text, want),
                "the raw rank of fault %d: table %d, then %s status %u: \"%s\"", fault, table,
                got ? "no completion" : "a completion with", got ? 0 : e.status,
                got ? "" : text);
    if (got == 0 && e.status == NEXAR_ERR_INTERNAL)
        tl_log("ok: the raw rank hears it too: \"%s\"", text);
    int ws = 0;
    if (hx_wait_pid(pid, 60, &ws) || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        tl_log("FAIL: the real rank of the single-copy fault %d", fault);
        fails++;
    }
    munmap(hole, len);
    free(fine);
    raw_close(&c);
}

/* ---- a failed op's held ranks wait for the copies into them ---- */

/* The raw rank's single-copy all_reduce of count f32 in place at buf, and its table of
 * want entries (its part of every rank, a write a peer), held. */
static void raw_ar_table(struct raw *c, float *buf, uint32_t count, uint32_t want)
{
    struct nx_sqe s = {.user_data = 9, .comm_id = c->comm, .kind = NX_K_ALL_REDUCE,
                       .dtype = NEXAR_F32, .count = count, .flags = NX_SQE_CMA,
                       .in_off = (uint64_t)(uintptr_t)buf, .out_off = (uint64_t)(uintptr_t)buf};
    raw_push(c, &s);
    struct nx_cqe e;
    char text[NX_ERR_TEXT_BYTES];
    int got = raw_cqe(c, &e, text, sizeof(text), 10000);
    EXPECT_TRUE(fails, got == 0 && e.status == 0 && e.pull_n == want && e.pull_hold == 1,
                "the raw rank's all_reduce table: %s, status %u, %u entries (want %u)",
                got ? "none" : "came", got ? 0 : e.status, got ? 0 : e.pull_n, want);
}

/* When each real rank's all_reduce returned, when the raw rank aborted, and when it said
 * it had copied. */
struct drain_times {
    double ret[3], abort, notice;
};
static struct drain_times *drain_t;

/* Ranks 0 and 2, real, of a single-copy all_reduce whose raw rank 1 (the parent) aborts
 * the world after it got its table, and says it copied half a second later.  The real
 * ranks' op fails with ABORTED, and returns only after that notice: until then the raw
 * rank might still write into their buffers. */
static int drain_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    float *buf = calloc(AR_FAULT_COUNT, sizeof(float));
    nexar_status_t s = nexar_all_reduce(w, buf, AR_FAULT_COUNT, NEXAR_F32, NEXAR_SUM);
    drain_t->ret[r->rank] = tl_now();
    int bad = s != NEXAR_ERR_ABORTED;
    if (bad)
        tl_log("FAIL rank %d: the aborted single-copy all_reduce gave %s: \"%s\"", r->rank,
               nexar_strerror(s), nexar_last_error());
    free(buf);
    nexar_finalize();
    return bad;
}

/* silent: the raw rank never says it copied; the real ranks still return, at the
 * communicator's deadline (the raw rank's 3 s) after the op's last progress. */
static void phase_drain(bool silent)
{
    char job[96];
    hx_job_name(job, sizeof(job), silent ? "drainsilent" : "drain");
    drain_t = mmap(NULL, sizeof(*drain_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    memset(drain_t, 0, sizeof(*drain_t));
    pid_t p0 = fork_rank(job, 0, 3, 10, drain_rank, NULL);
    pid_t p2 = fork_rank(job, 2, 3, 10, drain_rank, NULL);
    struct raw c;
    float *mine = calloc(AR_FAULT_COUNT, sizeof(float)); /* the real ranks copy here */
    if (raw_join_n(&c, job, 1, 3, true)) {
        join_failed("the raw rank could not join with single copy", (pid_t[]){p0, p2}, 2);
        free(mine);
        return;
    }
    raw_ar_table(&c, mine, AR_FAULT_COUNT, 5);
    struct nx_sqe a = {.user_data = 10, .comm_id = c.comm, .kind = NX_K_COMM_ABORT};
    drain_t->abort = tl_now();
    raw_push(&c, &a);
    if (!silent) {
        usleep(500 * 1000);
        drain_t->notice = tl_now();
        struct nx_sqe n = {.comm_id = c.comm, .kind = NX_K_PULLED};
        raw_push(&c, &n);
    }
    int ws0 = 0, ws2 = 0;
    bool ok0 = hx_wait_pid(p0, 30, &ws0) == 0 && WIFEXITED(ws0) && WEXITSTATUS(ws0) == 0;
    bool ok2 = hx_wait_pid(p2, 30, &ws2) == 0 && WIFEXITED(ws2) && WEXITSTATUS(ws2) == 0;
    double last = drain_t->ret[0] > drain_t->ret[2] ? drain_t->ret[0] : drain_t->ret[2];
    if (silent) {
        /* The op's last progress was the real ranks' notices, before the abort. */
        bool bounded = last > 0 && last - drain_t->abort < 3.0 + 1.5;
        EXPECT_TRUE(fails, ok0 && ok2 && bounded, "an aborted single-copy all_reduce whose "
                    "raw rank never says it copied: ranks 0 and 2 %s, %s, the last returned "
                    "%.3f s after the abort (the deadline is 3 s)", ok0 ? "ok" : "failed",
                    ok2 ? "ok" : "failed", last - drain_t->abort);
        if (ok0 && ok2 && bounded)
            tl_log("ok: ... and whose raw rank never says so, %.3f s after the abort (the "
                   "deadline: 3 s from the last progress)", last - drain_t->abort);
    } else {
        bool after = drain_t->ret[0] >= drain_t->notice && drain_t->ret[2] >= drain_t->notice;
        EXPECT_TRUE(fails, ok0 && ok2 && after, "an aborted single-copy all_reduce: ranks 0 "
                    "and 2 %s, %s, returned %.3f and %.3f s after the raw rank's notice (must "
                    "be >= 0)", ok0 ? "ok" : "failed", ok2 ? "ok" : "failed",
                    drain_t->ret[0] - drain_t->notice, drain_t->ret[2] - drain_t->notice);
        if (ok0 && ok2 && after)
            tl_log("ok: an aborted single-copy all_reduce returns ABORTED only once the rank "
                   "still copying said it was done (%.3f s after its notice)",
                   drain_t->ret[0] - drain_t->notice);
    }
    raw_close(&c);
    free(mine);
    munmap(drain_t, sizeof(*drain_t));
}

/* ---- a reader that says a live peer is gone ---- */

/* f32: 32 MiB, so that rank 0 still folds its half when the raw rank's notice comes. */
#define FALSE_GONE_COUNT (8u << 20)

/* Rank 0, real, of a single-copy all_reduce whose raw rank 1 says rank 0's process is gone
 * (ESRCH) although it is not: nexard waits a second for a hang-up that never comes, and
 * then the op fails with the raw rank's word; it never completes as if every part had
 * arrived. */
static int false_gone_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    float *buf = calloc(FALSE_GONE_COUNT, sizeof(float));
    nexar_status_t s = nexar_all_reduce(w, buf, FALSE_GONE_COUNT, NEXAR_F32, NEXAR_SUM);
    const char *want = "rank 1 could not read rank 0's buffer with process_vm_readv: No such "
                       "process";
    int bad = s != NEXAR_ERR_INTERNAL || !strstr(nexar_last_error(), want);
    if (bad)
        tl_log("FAIL rank 0: an all_reduce whose peer claimed it gone gave %s: \"%s\"",
               nexar_strerror(s), nexar_last_error());
    else
        tl_log("ok: a reader that calls a live peer gone: \"%s\"", nexar_last_error());
    free(buf);
    nexar_finalize();
    return bad;
}

static void phase_false_gone(void)
{
    char job[96];
    hx_job_name(job, sizeof(job), "falsegone");
    pid_t pid = fork_rank(job, 0, 2, 10, false_gone_rank, NULL);
    struct raw c;
    float *mine = calloc(FALSE_GONE_COUNT, sizeof(float)); /* rank 0 writes its part here */
    if (raw_join(&c, job, 1, true)) {
        join_failed("the raw rank could not join with single copy", (pid_t[]){pid}, 1);
        free(mine);
        return;
    }
    raw_ar_table(&c, mine, FALSE_GONE_COUNT, 3);
    struct nx_sqe n = {.comm_id = c.comm, .kind = NX_K_PULLED, .tag = ESRCH, .peer = 0};
    raw_push(&c, &n);
    int ws = 0;
    if (hx_wait_pid(pid, 30, &ws) || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        tl_log("FAIL: the real rank of the all_reduce whose peer claimed it gone");
        fails++;
    }
    raw_close(&c);
    free(mine);
}

/* ---- a reader that leaves while another still reads ---- */

#define LEAVE_COUNT (1u << 17) /* f32: 512 KiB, a single-copy broadcast read whole */

/* Ranks 0 (root) and 1, real: the broadcast, checked, then at once nexar_finalize, which
 * frees the world.  Rank 1 thus leaves while rank 2 (raw) has not said it read. */
static int leave_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    float *buf = malloc(LEAVE_COUNT * sizeof(float));
    for (size_t i = 0; i < LEAVE_COUNT; i++)
        buf[i] = r->rank == 0 ? (float)i * 0.5f : -1.0f;
    nexar_status_t s = nexar_broadcast(w, buf, LEAVE_COUNT, NEXAR_F32, 0);
    size_t wrong = 0;
    for (size_t i = 0; s == NEXAR_OK && i < LEAVE_COUNT; i++)
        wrong += buf[i] != (float)i * 0.5f;
    if (s != NEXAR_OK || wrong)
        tl_log("FAIL rank %d: broadcast gave %s (\"%s\"), %zu elements wrong", r->rank,
               nexar_strerror(s), s ? nexar_last_error() : "", wrong);
    free(buf);
    nexar_finalize();
    return s != NEXAR_OK || wrong;
}

/* A rank whose op is done may free the communicator while its peers still read each
 * other: the op no longer needs it.  (nexard once failed the communicator then, "freed
 * communicator 1 while operations on it were in flight", and the root's broadcast, whose
 * data had all arrived, with it.) */
static void phase_reader_leaves(void)
{
    char job[96];
    hx_job_name(job, sizeof(job), "leave");
    pid_t p0 = fork_rank(job, 0, 3, 10, leave_rank, NULL);
    pid_t p1 = fork_rank(job, 1, 3, 10, leave_rank, NULL);
    struct raw c;
    if (raw_join_n(&c, job, 2, 3, true)) {
        join_failed("the raw reader could not join with single copy", (pid_t[]){p0, p1}, 2);
        return;
    }
    static float out[LEAVE_COUNT]; /* never read: this client only says it read */
    struct nx_sqe s = {.user_data = 5, .comm_id = c.comm, .kind = NX_K_BROADCAST,
                       .dtype = NEXAR_F32, .count = LEAVE_COUNT, .flags = NX_SQE_CMA,
                       .out_off = (uint64_t)(uintptr_t)out};
    raw_push(&c, &s);
    struct nx_cqe e;
    char text[NX_ERR_TEXT_BYTES];
    int got = raw_cqe(&c, &e, text, sizeof(text), 10000);
    EXPECT_TRUE(fails, got == 0 && e.status == 0 && e.pull_n == 1,
                "the raw reader's table: %s, status %u, %u entries", got ? "none" : "came",
                got ? 0 : e.status, got ? 0 : e.pull_n);
    /* Rank 1 has read by now and leaves; this one says it read a while later. */
    int ws1 = 0, ws0 = 0;
    bool r1 = hx_wait_pid(p1, 30, &ws1) == 0 && WIFEXITED(ws1) && WEXITSTATUS(ws1) == 0;
    usleep(200 * 1000);
    /* Meanwhile nexarctl ops names the op's path and the reader that holds it up. */
    int rc;
    struct tj *v = tl_ctl_json(g_d.dir, g_d.sock, "ops", &rc);
    const char *algo = v ? tj_str(v, "ops[0].algorithm") : NULL;
    uint64_t waiting = 99;
    bool named = algo && !strcmp(algo, "local-single-copy") &&
                 tj_len(v, "ops[0].waiting_for") == 1 &&
                 tj_u64(v, "ops[0].waiting_for[0]", &waiting) == 0 && waiting == 2;
    EXPECT_TRUE(fails, named, "nexarctl ops while the single-copy reader is silent: algorithm "
                "%s, waiting for rank %llu (expected local-single-copy, rank 2)",
                algo ? algo : "(none)", (unsigned long long)waiting);
    if (named)
        tl_log("ok: nexarctl ops: local-single-copy, waiting for rank 2");
    tj_free(v);
    struct nx_sqe n = {.comm_id = c.comm, .kind = NX_K_PULLED};
    raw_push(&c, &n);
    bool r0 = hx_wait_pid(p0, 30, &ws0) == 0 && WIFEXITED(ws0) && WEXITSTATUS(ws0) == 0;
    EXPECT_TRUE(fails, r0 && r1, "a reader that left before another read: root %s, reader %s",
                r0 ? "ok" : "failed", r1 ? "ok" : "failed");
    if (r0 && r1)
        tl_log("ok: a reader frees the world while another still reads; the root's "
               "broadcast completes");
    raw_close(&c);
}

/* A notice for a chunk of an op that is not running: the client is dropped, with why. */
static void phase_bogus_notice(void)
{
    char job[96];
    hx_job_name(job, sizeof(job), "bogus");
    struct raw a, b;
    /* Two raw ranks: the JoinReply of the first comes when the second joined. */
    pid_t pid = fork();
    if (pid == 0) {
        if (raw_join(&b, job, 1, false))
            _exit(1);
        pause(); /* killed below */
        _exit(0);
    }
    if (raw_join(&a, job, 0, false)) {
        join_failed("the raw ranks could not join", (pid_t[]){pid}, 1);
        return;
    }
    struct nx_sqe s = {.user_data = 1, .comm_id = a.comm, .kind = NX_K_PULLED, .seq = 4,
                       .chunk = 2};
    raw_push(&a, &s);
    if (rc_wait_closed(a.fd, 5000) != 0) {
        tl_log("FAIL: a client that said it read a chunk of an op not running was not "
               "dropped");
        fails++;
    }
    raw_close(&a);
    kill(pid, SIGKILL);
    hx_wait_pid(pid, 30, NULL);
    /* nexard says why in its log. */
    FILE *f = fopen(g_d.log, "r");
    char line[1024];
    int seen = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "said it read chunk 2 of op 4 on comm") && strstr(line, "not running"))
            seen = 1;
    if (f)
        fclose(f);
    EXPECT_TRUE(fails, seen, "nexard's log names no reason for the dropped client");
    if (seen)
        tl_log("ok: a notice for an op not running drops the client, with the reason");
    double t = hx_timed_allreduces(g_d.sock, 50);
    EXPECT_TRUE(fails, t >= 0, "nexard stopped serving after the bogus notice");
}

int main(void)
{
    hx_require_nexard();
    if (hx_daemon_start(&g_d, (const char *const[]){"--slot-bytes", "1048576", "--slots", "4",
                                                    NULL}))
        return 1;
    /* Each case runs once a root, staged and mixed with nexar_alloc buffers. */
    uint64_t want_cma = 0, want_slots = 0, cma_ops = 0;
    for (size_t i = 0; i < NCASES; i++) {
        uint64_t roots = cases[i].coll == TL_BROADCAST || cases[i].coll == TL_GATHER ||
                                 cases[i].coll == TL_SCATTER || cases[i].coll == TL_REDUCE
                             ? WORLD
                             : 1;
        for (uint32_t root = 0; root < roots; root++) {
            bool any;
            uint64_t b =
                pulled_bytes(&cases[i], WORLD, root, NX_PLAN_LOCAL | NX_PLAN_CMA, &any);
            want_cma += b * (any ? 2 : 1);
            cma_ops += any && root == 0;
            want_slots += pulled_bytes(&cases[i], WORLD, root, NX_PLAN_LOCAL, &any);
        }
    }
    /* The unaligned and reversed ones: a reduce_scatter either way, an all_reduce with
     * single copy only. */
    uint64_t rs = (uint64_t)WORLD * WORLD * (UNALIGNED_COUNT + REVERSED_COUNT) * 4;
    want_cma += rs + ar_moved((UNALIGNED_COUNT + REVERSED_COUNT) * 4, WORLD);
    want_slots += rs;
    EXPECT_TRUE(fails, want_slots > rs && cma_ops >= 8 && want_cma != want_slots,
                "the cases pull nothing, or nothing single-copy: the test tests nothing");
    phase_cases("peer reads and single copy on", 0, want_cma);
    phase_cases("NEXAR_SINGLE_COPY=0 on rank 0: peer reads of slots", 2, want_slots);
    phase_cases("NEXAR_PEER_READS=0 on rank 0", 1, 0);
    phase_silent_reader();
    for (int f = F_ROOT; f <= F_AR_WRITE; f++)
        phase_cma_fault((enum fault)f);
    phase_drain(false);
    phase_drain(true);
    phase_false_gone();
    phase_reader_leaves();
    phase_bogus_notice();
    if (hx_daemon_stop(&g_d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
