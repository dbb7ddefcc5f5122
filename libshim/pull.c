/*
 * pull.c - the rank's side of peer reads (shm_abi.h): the job's other ranks' staging
 * slots, mapped read-only, and the chunks this rank copies out of them itself (or, for a
 * reduce_scatter, folds out of them with nexard's own kernels, reduce.h).
 *
 * The mappings cover a peer's segment up to the end of its slots: its header, rings and
 * slots, not its nexar_alloc heap.  They are read-only, so a rank can never disturb its
 * peers' rings.  Each table entry nexard writes is checked against them before a byte
 * is copied.
 *
 * Single copy (NX_SQE_CMA): the table names the sources' own buffers, in their processes;
 * this rank reads each block with process_vm_readv of the source's pid straight into its
 * output, and the kernel checks every byte of the source's side.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "reduce.h"
#include "shim.h"

/* A segment up to the end of its slots, where the heap starts. */
static uint64_t slots_len(const struct nx_shm_hdr *h)
{
    return h->arena_off + h->heap_off;
}

static nexar_status_t map_one(uint32_t i, int fd)
{
    const struct nx_shm_hdr *own = &nx_S.hdr;
    uint64_t len = slots_len(own);
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < len)
        return nx_fail(NEXAR_ERR_INTERNAL,
                       "nexar_init: the segment of peer %u (peer reads) is smaller than its "
                       "slots; NEXAR_PEER_READS=0 turns peer reads off", i);
    void *m = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return nx_fail(errno == ENOMEM ? NEXAR_ERR_NOMEM : NEXAR_ERR_INTERNAL,
                       "nexar_init: mapping the slots of peer %u for peer reads: %s; "
                       "NEXAR_PEER_READS=0 turns peer reads off", i, strerror(errno));
    struct nx_shm_hdr h;
    memcpy(&h, m, sizeof(h));
    /* nexard gives every rank the same geometry (the header holds nothing else); a table
     * is checked against ours. */
    if (memcmp(&h, own, sizeof(h)) != 0) {
        munmap(m, (size_t)len);
        return nx_fail(NEXAR_ERR_INTERNAL,
                       "nexar_init: the segment of peer %u (peer reads) has another layout "
                       "than this rank's", i);
    }
    nx_S.pull_seg[i] = m;
    nx_S.pull_len[i] = len;
    return NEXAR_OK;
}

nexar_status_t nx_pull_map(struct nx_join *j)
{
    nx_S.pull_count = 0;
    nx_S.pull_index = 0;
    for (uint32_t i = 0; i < j->pull_count; i++) {
        if (i == j->pull_index)
            continue;
        nexar_status_t s = map_one(i, j->pull_fds[i]);
        if (s != NEXAR_OK) {
            nx_S.pull_count = j->pull_count; /* what to undo */
            nx_pull_unmap();
            return s;
        }
    }
    nx_S.pull_count = j->pull_count;
    nx_S.pull_index = j->pull_index;
    for (uint32_t i = 0; i < j->pull_count; i++)
        nx_S.pull_pid[i] = (pid_t)j->pull_pids[i];
    if (j->pull_count) { /* a rank reads its own slot too (gather, scatter, all_to_all) */
        nx_S.pull_seg[j->pull_index] = nx_S.seg;
        nx_S.pull_len[j->pull_index] = slots_len(&nx_S.hdr);
    }
    return NEXAR_OK;
}

void nx_pull_unmap(void)
{
    nx_single_copy_release(); /* no peer reads us any more */
    for (uint32_t i = 0; i < nx_S.pull_count; i++) {
        if (nx_S.pull_seg[i] && nx_S.pull_seg[i] != nx_S.seg)
            munmap((void *)nx_S.pull_seg[i], (size_t)nx_S.pull_len[i]);
        nx_S.pull_seg[i] = NULL;
        nx_S.pull_len[i] = 0;
    }
    nx_S.pull_count = 0;
}

static bool entry_ok(const struct nexar_request *r, const struct nx_pull *p, uint64_t bytes)
{
    return p->peer < nx_S.pull_count && nx_S.pull_seg[p->peer] && !p->flags && !p->at &&
           p->block < r->shape.out_mul && p->bytes == bytes &&
           p->off <= nx_S.pull_len[p->peer] && bytes <= nx_S.pull_len[p->peer] - p->off;
}

/* len bytes between here, in this process, and there, in pid's, with process_vm_readv
 * (into here) or process_vm_writev; 0 or an errno. */
static int cma_move(pid_t pid, void *here, uint64_t there, uint64_t len, bool write)
{
    struct iovec h = {here, len}, t = {(void *)(uintptr_t)there, len};
    while (h.iov_len > 0) {
        ssize_t k = write ? process_vm_writev(pid, &h, 1, &t, 1, 0)
                          : process_vm_readv(pid, &h, 1, &t, 1, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EFAULT;
        h.iov_base = (uint8_t *)h.iov_base + k;
        h.iov_len -= (size_t)k;
        t.iov_base = (uint8_t *)t.iov_base + k;
        t.iov_len -= (size_t)k;
    }
    return 0;
}

/* Whether bytes at address off lie in the input r submitted: an entry of this rank's own
 * names its input by address, which nexard only passed on. */
static bool in_own_input(const struct nexar_request *r, uint64_t off, uint64_t bytes)
{
    uint64_t lo = (uint64_t)(uintptr_t)r->in;
    uint64_t len = (uint64_t)r->shape.in_mul * r->tmpl.count * r->esize;
    return r->in && off >= lo && off - lo <= len && bytes <= len - (off - lo);
}

/* One single-copy entry; 0 or an errno.  A read copies from the peer's process into this
 * rank's output; a write (NX_PULL_WRITE) from its input into the peer's process.  An entry
 * of this rank's own (a gather's root, a scatter's, an all_to_all) must lie in the input
 * it submitted. */
static int copy_one(const struct nexar_request *r, const struct nx_pull *p)
{
    uint64_t block = r->tmpl.count * r->esize;
    bool write = p->flags & NX_PULL_WRITE;
    if (p->flags & ~NX_PULL_WRITE || p->peer >= nx_S.pull_count || !nx_S.pull_pid[p->peer] ||
        p->block >= (write ? r->shape.in_mul : r->shape.out_mul) || p->at > block ||
        p->bytes > block - p->at || (write && p->peer == nx_S.pull_index))
        return EINVAL;
    /* (A write only reads its input: struct iovec has no const.) */
    uint8_t *mine = (write ? (uint8_t *)(uintptr_t)r->in : r->out) + p->block * block + p->at;
    if (p->peer == nx_S.pull_index) {
        if (!in_own_input(r, p->off, p->bytes))
            return EFAULT;
        memmove(mine, (const void *)(uintptr_t)p->off, p->bytes);
        return 0;
    }
    return cma_move(nx_S.pull_pid[p->peer], mine, p->off, p->bytes, write);
}

/* A single-copy all_reduce's, reduce's or reduce_scatter's table (NX_PULL_REDUCE,
 * shm_abi.h): entries 0..P-1 this rank's part of every rank's input in rank order (its own
 * at its rank), then one write a peer (an all_reduce) or to the root (a reduce's
 * non-root); all name the same part of the output.  Checks them all first; 0 or an errno,
 * and *bad the entry that failed. */
static int fold_check(const struct nexar_request *r, const struct nx_pull *t, uint32_t n,
                      uint32_t *bad)
{
    uint32_t P = (uint32_t)r->comm->size, root = r->tmpl.peer;
    uint64_t es = r->esize, block = r->tmpl.count * es;
    uint8_t kind = r->tmpl.kind;
    /* An all_reduce writes to every peer, a reduce's non-root to the root. */
    uint32_t writes = kind == NX_K_ALL_REDUCE ? P - 1
                      : kind == NX_K_REDUCE   ? (uint32_t)r->comm->rank != root
                                              : 0;
    *bad = 0;
    if ((kind != NX_K_ALL_REDUCE && kind != NX_K_REDUCE && kind != NX_K_REDUCE_SCATTER) ||
        P > NX_PULL_MAX_RANKS || n != P + writes)
        return EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        const struct nx_pull *p = &t[i];
        bool src = i < P;
        *bad = i;
        if (p->flags != (src ? NX_PULL_REDUCE : NX_PULL_WRITE) ||
            (src ? p->rank != i ||
                       (p->peer == nx_S.pull_index) != (i == (uint32_t)r->comm->rank)
                 : p->rank >= P || p->peer == nx_S.pull_index ||
                       (kind == NX_K_REDUCE && p->rank != root)) ||
            p->peer >= nx_S.pull_count || !nx_S.pull_pid[p->peer] || p->block != t[0].block ||
            p->block >= (r->shape.out_mul ? r->shape.out_mul : 1) || p->at != t[0].at ||
            p->bytes != t[0].bytes ||
            p->at % es || p->bytes % es || p->at > block || p->bytes > block - p->at)
            return EINVAL;
        if (src && p->peer == nx_S.pull_index && !in_own_input(r, p->off, p->bytes))
            return EFAULT;
    }
    return 0;
}

/* Bytes of a source's piece of the fold: the scratch after the table holds one a source
 * and one for the result, and a piece of 128 KiB stays in the cache from its read to its
 * writes. */
#define FOLD_PIECE (128u << 10)

/* Folds the part piece by piece: reads each peer's piece into the scratch, folds them all
 * with nexard's kernels (reduce.h) into the output (or the scratch: a reduce's non-root
 * has none, and an output that is not element-aligned, as nexar.h asks it to be, goes
 * through it), and writes the folded piece into its peers' outputs while it is in the
 * cache.  0 or an errno, and *bad the failed entry. */
static int fold_all(struct nexar_request *r, const struct nx_cqe *e, uint8_t *table,
                    uint32_t *bad)
{
    uint32_t P = (uint32_t)r->comm->size, n = e->pull_n; /* copy_all bounded n */
    struct nx_pull t[NX_PULL_MAX_ENTRIES];
    memcpy(t, table, (size_t)n * sizeof(*t));
    int err = fold_check(r, t, n, bad);
    if (err)
        return err;
    uint64_t es = r->esize, scr = nx_cma_scratch_off(P);
    uint64_t piece = (nx_S.hdr.slot_bytes - scr) / (P + 1) / es * es;
    if (piece > FOLD_PIECE)
        piece = FOLD_PIECE;
    uint8_t *scratch = table + scr;
    uint8_t *out = r->shape.out_mul ? r->out + t[0].block * r->tmpl.count * es + t[0].at : NULL;
    for (uint64_t done = 0, len; done < t[0].bytes; done += len) {
        len = t[0].bytes - done < piece ? t[0].bytes - done : piece;
        const void *srcs[NX_PULL_MAX_RANKS];
        uint8_t *area = scratch;
        for (uint32_t i = 0; i < P; i++, area += piece) {
            *bad = i;
            if (t[i].peer != nx_S.pull_index) {
                if ((err = cma_move(nx_S.pull_pid[t[i].peer], area, t[i].off + done, len,
                                    false)))
                    return err;
                srcs[i] = area;
                continue;
            }
            const uint8_t *own = (const uint8_t *)(uintptr_t)(t[i].off + done);
            srcs[i] = (uintptr_t)own % es ? memcpy(area, own, len) : own;
        }
        /* In place (an all_reduce's own part), the output is exactly its own source,
         * which the kernels allow. */
        uint8_t *o = out ? out + done : NULL;
        void *d = !o || (uintptr_t)o % es ? (void *)area : (void *)o;
        *bad = 0;
        if (nx_reduce_fanout(&d, 1, srcs, P, len / es, r->tmpl.dtype, r->tmpl.redop) != 0)
            return EINVAL;
        if (o && d != o)
            memcpy(o, d, len);
        for (uint32_t i = P; i < n; i++) {
            *bad = i;
            if ((err = cma_move(nx_S.pull_pid[t[i].peer], d, t[i].off + done, len, true)))
                return err;
        }
    }
    return 0;
}

/* Copies every entry of a single-copy table; 0, or the first failure's errno (with
 * NX_PULL_FAIL_WRITE for a write) and *rank, the peer it copied from or to. */
static uint32_t copy_all(struct nexar_request *r, const struct nx_cqe *e, uint8_t *table,
                         uint32_t *rank)
{
    struct nx_pull p = {0};
    uint32_t k = 0;
    int err = 0;
    if (e->pull_n)
        memcpy(&p, table, sizeof(p));
    if (e->pull_n > NX_PULL_MAX_ENTRIES)
        err = EINVAL;
    else if (p.flags & NX_PULL_REDUCE) /* a fold, all its entries at once */
        err = r->failed ? 0 : fold_all(r, e, table, &k);
    else
        for (; !r->failed && k < e->pull_n; k++) {
            memcpy(&p, table + (size_t)k * sizeof(p), sizeof(p));
            if ((err = p.rank >= (uint32_t)r->comm->size ? EINVAL : copy_one(r, &p)))
                break;
        }
    if (err) {
        if (k < e->pull_n && k < NX_PULL_MAX_ENTRIES)
            memcpy(&p, table + (size_t)k * sizeof(p), sizeof(p));
        bool write = p.flags & NX_PULL_WRITE;
        int pid = p.peer < nx_S.pull_count ? (int)nx_S.pull_pid[p.peer] : 0;
        char text[256];
        if (err == ESRCH) /* killed mid-op: nexard tells the others once it hears */
            snprintf(text, sizeof(text), "%s seq %llu: rank %u (pid %d) is gone: its process "
                     "exited while this rank %s its buffer", nx_kind_name(r->tmpl.kind),
                     (unsigned long long)r->tmpl.seq, p.rank, pid,
                     write ? "wrote into" : "read");
        else
            snprintf(text, sizeof(text), "%s seq %llu: %s %llu bytes %s rank %u's buffer (pid "
                     "%d) with process_vm_%s: %s; NEXAR_SINGLE_COPY=0 turns single copy off",
                     nx_kind_name(r->tmpl.kind), (unsigned long long)r->tmpl.seq,
                     write ? "writing" : "reading", (unsigned long long)p.bytes,
                     write ? "into" : "of", p.rank, pid, write ? "writev" : "readv",
                     err == EINVAL ? "nexard's table names no such block" : strerror(err));
        nx_req_fail(r, err == ESRCH ? NEXAR_ERR_PEER_LOST : NEXAR_ERR_INTERNAL, text);
        *rank = p.rank < (uint32_t)r->comm->size ? p.rank : 0;
        return (err > 0 && err <= (int)NX_PULL_MAX_ERRNO ? (uint32_t)err : EIO) |
               (write ? NX_PULL_FAIL_WRITE : 0);
    }
    return 0;
}

/* Whether the probe let any process of our uid read us (Yama's ptrace_scope 1). */
static bool ptracer_any;

void nx_single_copy_release(void)
{
    if (ptracer_any)
        prctl(PR_SET_PTRACER, 0, 0, 0, 0);
    ptracer_any = false;
}

bool nx_single_copy_probe(void)
{
    if (prctl(PR_GET_DUMPABLE) != 1)
        return false;
    /* Yama: 0 lets a process of the same uid read us; 1 only our ancestors, unless we say
     * otherwise (Open MPI's shared memory does the same); 2 and 3 only an administrator. */
    char v[8] = "";
    int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t k = read(fd, v, sizeof(v) - 1);
        close(fd);
        if (k <= 0 || (v[0] != '0' && v[0] != '1') ||
            (v[0] == '1' && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0))
            return false;
        ptracer_any = v[0] == '1';
    }
    uint64_t src = 0x6e78636d61ull, dst = 0;
    struct iovec to = {&dst, sizeof(dst)}, from = {&src, sizeof(src)};
    return process_vm_readv(getpid(), &to, 1, &from, 1, 0) == (ssize_t)sizeof(dst) &&
           dst == src;
}

/* The notice that this rank read chunk `chunk` of r, or (fail: an errno, with
 * NX_PULL_FAIL_WRITE for a write) could not copy rank `rank`'s part of it: nexard then
 * fails the op everywhere. */
static void notice(const struct nexar_request *r, uint64_t chunk, uint32_t fail, uint32_t rank)
{
    /* One per slot (or stand-in, request.c) at most: a slot is refilled only by
     * nx_pump, which flushes these first, and cannot when there is no room for either. */
    if (nx_S.pulled_n >= NX_SLOT_ENTRIES) {
        nx_shim_die(NEXAR_ERR_INTERNAL, "more peer-read notices queued than slots");
        return;
    }
    nx_S.pulled_q[nx_S.pulled_n++] = (struct nx_sqe){
        .comm_id = r->tmpl.comm_id,
        .kind = NX_K_PULLED,
        .seq = r->tmpl.seq,
        .chunk = (uint32_t)chunk,
        .peer = fail ? rank : 0,
        .tag = fail,
    };
}

/* A reduce_scatter chunk: this rank's block of every rank's slot (entries in rank order),
 * folded into its output as nexard's kernel would have.  The kernels want element-aligned
 * buffers; an output that is not (nexar.h asks that it be) takes the fold in the slot, where
 * the table was, and a copy. */
static bool reduce_into(struct nexar_request *r, uint8_t *dst, uint8_t *table,
                        const void *const *srcs, uint32_t nsrc, uint64_t n)
{
    uint64_t es = r->esize;
    void *d = (uintptr_t)dst % es ? (void *)table : (void *)dst;
    if (nx_reduce_fanout(&d, 1, srcs, nsrc, n, r->tmpl.dtype, r->tmpl.redop) != 0)
        return false;
    if (d != dst)
        memcpy(dst, d, n * es);
    return true;
}

void nx_pull_copy(struct nexar_request *r, const struct nx_slot *sl, const struct nx_cqe *e,
                  uint8_t *table, uint64_t n)
{
    if (r->single_copy) {
        uint32_t rank = 0, fail = copy_all(r, e, table, &rank);
        notice(r, sl->chunk, fail, rank); /* also after a failure: its peers wait for it */
        return;
    }
    uint64_t es = r->esize, count = r->tmpl.count, off = sl->chunk * r->chunk_elems;
    bool reduce = r->tmpl.kind == NX_K_REDUCE_SCATTER;
    const void *srcs[NX_PULL_MAX_RANKS];
    bool ok = e->pull_n <= NX_PULL_MAX_RANKS;
    for (uint32_t k = 0; ok && !r->failed && k < e->pull_n; k++) {
        struct nx_pull p;
        memcpy(&p, table + (size_t)k * sizeof(p), sizeof(p));
        if (!(ok = entry_ok(r, &p, n * es)))
            break;
        if (reduce)
            srcs[k] = nx_S.pull_seg[p.peer] + p.off;
        else
            memcpy(r->out + (p.block * count + off) * es, nx_S.pull_seg[p.peer] + p.off,
                   n * es);
    }
    const char *why = "names bytes outside the slots this rank mapped";
    if (ok && reduce && !r->failed && !reduce_into(r, r->out + off * es, table, srcs,
                                                   e->pull_n, n)) {
        ok = false;
        why = "could not be reduced";
    }
    if (!ok) {
        char text[160];
        snprintf(text, sizeof(text), "%s seq %llu: nexard's peer-read table for chunk %llu "
                 "%s", nx_kind_name(r->tmpl.kind), (unsigned long long)r->tmpl.seq,
                 (unsigned long long)sl->chunk, why);
        nx_req_fail(r, NEXAR_ERR_INTERNAL, text);
    }
    /* Also after a failure: the ranks whose slots nexard holds wait for it. */
    notice(r, sl->chunk, ok ? 0 : EINVAL, 0);
}

uint32_t nx_pull_flush(uint32_t space)
{
    uint32_t n = nx_S.pulled_n < space ? nx_S.pulled_n : space;
    for (uint32_t i = 0; i < n; i++)
        nx_ring_put(&nx_S.pulled_q[i]);
    memmove(nx_S.pulled_q, nx_S.pulled_q + n, (nx_S.pulled_n - n) * sizeof(*nx_S.pulled_q));
    nx_S.pulled_n -= n;
    return n;
}
