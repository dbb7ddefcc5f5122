/*
 * test_hostile_shm.c - a client that joins like a rank (HELLO / JOIN through
 * nx_chan_send / nx_chan_recv, the memfd and two eventfds by SCM_RIGHTS, the
 * segment mapped) and then lies in shared memory.
 *
 * Positive controls first: the segment is sealed (shrink, grow, seal) and ftruncate
 * fails; a valid barrier descriptor completes with status 0; a ring filled with
 * valid descriptors gets every completion back in order (overflowing the completion
 * ring); a scribbled header changes nothing (the daemon keeps its own copy).
 * Then, each on a fresh client: ring tails far ahead, random descriptors, unknown
 * kind / dtype / op / communicator, root out of range, extents outside the arena,
 * a misaligned direct offset, a count overflow, a chunk out of order, a sequence
 * number going backwards; device descriptors (NX_SQE_DEVICE) without NX_SQE_DIRECT,
 * with their record outside the arena, with a bad record, naming a registration that
 * does not exist.  Each must get that client dropped (the daemon closes its socket)
 * while the daemon keeps answering, a concurrent healthy job finishes exact, and
 * SIGTERM still gives exit 0.  Device registrations the daemon cannot honour (no GPU,
 * a garbage IPC handle, a short handle, an unknown id to unregister) are answered with
 * a status instead, and the client stays.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "bgjob.h"
#include "frame.h"
#include "itest.h"
#include "nexar.pb-c.h"
#include "rawclient.h"
#include "shm_abi.h"

static int fails;
static const char *g_sock;

struct evil {
    int fd, memfd, sq_efd, cq_efd;
    uint8_t *base;
    size_t bytes;
    struct nx_shm_hdr h; /* our copy, taken before any scribbling */
    struct nx_ring_ctl *sq_ctl, *cq_ctl;
    struct nx_sqe *sq;
    struct nx_cqe *cq;
    uint32_t comm, sq_tail, cq_head;
};

/* Joins as rank `rank` of `size` in job (NULL: a job of its own). */
static int evil_join_as(struct evil *e, const char *what, const char *job_in, int rank,
                        int size)
{
    memset(e, 0, sizeof(*e));
    e->fd = e->memfd = e->sq_efd = e->cq_efd = -1;
    char job[96];
    if (job_in)
        snprintf(job, sizeof(job), "%s", job_in);
    else
        hx_job_name(job, sizeof(job), "evil");
    e->fd = rc_connect(g_sock);
    if (e->fd < 0)
        goto fail;
    uint8_t *p = NULL, *pl = NULL;
    size_t n = rc_pack_hello(1, &p);
    struct nx_frame_hdr fh;
    int fds[3] = {-1, -1, -1}, nfds = 0;
    int rv = nx_chan_send(e->fd, NX_MSG_HELLO, p, (uint32_t)n, NULL, 0);
    free(p);
    if (rv || nx_chan_recv(e->fd, &fh, &pl, 5000, NULL, 0, &nfds) || fh.type != NX_MSG_HELLO_REPLY)
        goto fail;
    free(pl);
    pl = NULL;
    n = rc_pack_join(job, rank, size, 5000, &p);
    rv = nx_chan_send(e->fd, NX_MSG_JOIN, p, (uint32_t)n, NULL, 0);
    free(p);
    if (rv || nx_chan_recv(e->fd, &fh, &pl, 5000, fds, 3, &nfds) || fh.type != NX_MSG_JOIN_REPLY)
        goto fail;
    Nexar__JoinReply *jr = nexar__join_reply__unpack(NULL, fh.length, pl);
    free(pl);
    if (!jr || jr->status != 0 || nfds != 3) {
        tl_log("FAIL %s: JOIN_REPLY status %d, %d fds (\"%s\")", what, jr ? (int)jr->status : -1,
               nfds, jr ? jr->error : "");
        if (jr)
            nexar__join_reply__free_unpacked(jr, NULL);
        goto fail;
    }
    e->memfd = fds[0];
    e->sq_efd = fds[1];
    e->cq_efd = fds[2];
    e->comm = jr->world_comm;
    e->bytes = jr->segment_bytes;
    nexar__join_reply__free_unpacked(jr, NULL);
    struct stat stt;
    if (fstat(e->memfd, &stt) || (size_t)stt.st_size < e->bytes || e->bytes < sizeof(e->h)) {
        tl_log("FAIL %s: memfd size %lld < segment_bytes %zu", what, (long long)stt.st_size, e->bytes);
        goto fail;
    }
    e->base = mmap(NULL, e->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, e->memfd, 0);
    if (e->base == MAP_FAILED) {
        e->base = NULL;
        goto fail;
    }
    memcpy(&e->h, e->base, sizeof(e->h));
    struct nx_shm_hdr *h = &e->h;
    if (h->magic != NX_SHM_MAGIC || h->version != NX_SHM_VERSION || h->total_bytes > e->bytes ||
        h->sq_entries == 0 || (h->sq_entries & (h->sq_entries - 1)) || h->cq_entries == 0 ||
        h->sq_off + (uint64_t)h->sq_entries * sizeof(struct nx_sqe) > e->bytes ||
        h->cq_off + (uint64_t)h->cq_entries * sizeof(struct nx_cqe) > e->bytes ||
        h->arena_off + h->arena_bytes > e->bytes) {
        tl_log("FAIL %s: the segment header is inconsistent", what);
        goto fail;
    }
    e->sq_ctl = (struct nx_ring_ctl *)(e->base + h->sq_ctl_off);
    e->cq_ctl = (struct nx_ring_ctl *)(e->base + h->cq_ctl_off);
    e->sq = (struct nx_sqe *)(e->base + h->sq_off);
    e->cq = (struct nx_cqe *)(e->base + h->cq_off);
    e->sq_tail = nx_load_acquire(&e->sq_ctl->tail);
    e->cq_head = nx_load_acquire(&e->cq_ctl->head);
    return 0;
fail:
    tl_log("FAIL %s: could not join as a raw client", what);
    fails++;
    return -1;
}

static int evil_join(struct evil *e, const char *what)
{
    return evil_join_as(e, what, NULL, 0, 1);
}

/* The text of the ERROR frame nexard sends a client it drops ("" if none came first). */
static void read_drop_text(struct evil *e, char *why, size_t len)
{
    struct nx_frame_hdr fh;
    uint8_t *pl = NULL;
    why[0] = '\0';
    if (nx_chan_recv(e->fd, &fh, &pl, 5000, NULL, 0, NULL) == 0 && fh.type == NX_MSG_ERROR) {
        Nexar__ErrorReply *er = nexar__error_reply__unpack(NULL, fh.length, pl);
        if (er && er->error)
            snprintf(why, len, "%s", er->error);
        if (er)
            nexar__error_reply__free_unpacked(er, NULL);
    }
    free(pl);
}

static void evil_close(struct evil *e)
{
    if (e->base)
        munmap(e->base, e->bytes);
    int fds[] = {e->fd, e->memfd, e->sq_efd, e->cq_efd};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void ring_bell(struct evil *e)
{
    uint64_t one = 1;
    ssize_t w = write(e->sq_efd, &one, 8);
    (void)w;
}

static void push(struct evil *e, const struct nx_sqe *s)
{
    e->sq[e->sq_tail & (e->h.sq_entries - 1)] = *s;
    nx_store_release(&e->sq_ctl->tail, ++e->sq_tail);
}

/* The next completion within timeout_ms: 0, or -1. */
static int pop(struct evil *e, struct nx_cqe *out, int timeout_ms)
{
    double end = tl_now() + timeout_ms / 1000.0;
    while (tl_now() < end) {
        if (nx_load_acquire(&e->cq_ctl->tail) != e->cq_head) {
            *out = e->cq[e->cq_head & (e->h.cq_entries - 1)];
            nx_store_release(&e->cq_ctl->head, ++e->cq_head);
            return 0;
        }
        struct pollfd pfd = {.fd = e->cq_efd, .events = POLLIN};
        if (poll(&pfd, 1, 5) > 0) {
            uint64_t v;
            ssize_t r = read(e->cq_efd, &v, 8);
            (void)r;
        }
    }
    return -1;
}

static struct nx_sqe barrier_sqe(struct evil *e, uint64_t seq)
{
    struct nx_sqe s = {.user_data = 0xb000 + seq, .comm_id = e->comm, .kind = NX_K_BARRIER,
                       .seq = seq};
    return s;
}

static int expect_completion(struct evil *e, const char *what, uint64_t user_data)
{
    struct nx_cqe c;
    if (pop(e, &c, 5000)) {
        tl_log("FAIL %s: no completion within 5 s", what);
        fails++;
        return -1;
    }
    if (c.user_data != user_data || c.status != 0) {
        tl_log("FAIL %s: completion user_data 0x%llx status %u, expected 0x%llx status 0", what,
               (unsigned long long)c.user_data, c.status, (unsigned long long)user_data);
        fails++;
        return -1;
    }
    return 0;
}

static void alive(const char *after)
{
    if (rc_ping(g_sock, 5000)) {
        tl_log("FAIL: the daemon no longer answers after: %s", after);
        fails++;
    }
}

/* ---- positive controls ------------------------------------------------------------ */

static void controls(void)
{
    struct evil e;
    if (evil_join(&e, "controls"))
        return;
    int seals = fcntl(e.memfd, F_GET_SEALS);
    int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if (seals < 0 || (seals & want) != want) {
        tl_log("FAIL: segment seals 0x%x, expected SHRINK|GROW|SEAL (0x%x)", seals, want);
        fails++;
    } else if (ftruncate(e.memfd, 4096) == 0 || ftruncate(e.memfd, (off_t)e.bytes * 2) == 0) {
        tl_log("FAIL: ftruncate on the sealed segment succeeded");
        fails++;
    } else {
        tl_log("ok: segment sealed against shrink, grow and re-sealing; ftruncate fails");
    }
    struct nx_sqe s = barrier_sqe(&e, 0);
    push(&e, &s);
    ring_bell(&e);
    if (!expect_completion(&e, "valid barrier descriptor", s.user_data))
        tl_log("ok: a valid barrier descriptor completes with status 0");

    /* fill the submission ring: more completions than the completion ring holds */
    uint32_t n = e.h.sq_entries;
    for (uint32_t i = 0; i < n; i++) {
        s = barrier_sqe(&e, 1 + i);
        push(&e, &s);
    }
    ring_bell(&e);
    uint32_t got = 0;
    double end = tl_now() + 10.0;
    while (got < n && tl_now() < end) {
        struct nx_cqe c;
        if (pop(&e, &c, 100) == 0) {
            if (c.user_data != 0xb000 + 1 + got || c.status != 0) {
                tl_log("FAIL: completion %u of a full ring: user_data 0x%llx status %u", got,
                       (unsigned long long)c.user_data, c.status);
                fails++;
                break;
            }
            got++;
        } else {
            ring_bell(&e); /* consumed everything: ask for the rest */
        }
    }
    if (got == n)
        tl_log("ok: %u descriptors in one go (cq holds %u): all completed in order", n,
               e.h.cq_entries);
    else if (tl_now() >= end) {
        tl_log("FAIL: full submission ring: %u of %u completions in 10 s", got, n);
        fails++;
    }

    /* scribble over the header: the daemon must not read it back */
    memset(e.base, 0xff, sizeof(struct nx_shm_hdr));
    s = barrier_sqe(&e, 1 + n);
    push(&e, &s);
    ring_bell(&e);
    if (!expect_completion(&e, "barrier after the header was scribbled", s.user_data))
        tl_log("ok: a scribbled header changes nothing");

    /* a doorbell storm with an empty ring */
    for (int i = 0; i < 20000; i++)
        ring_bell(&e);
    s = barrier_sqe(&e, 2 + n);
    push(&e, &s);
    ring_bell(&e);
    if (!expect_completion(&e, "barrier after 20000 empty doorbells", s.user_data))
        tl_log("ok: 20000 empty doorbells, then a barrier completes");

    /* a completion-ring head far ahead of the tail: the daemon must survive it */
    e.cq_ctl->head = nx_load_acquire(&e.cq_ctl->tail) + 1000;
    s = barrier_sqe(&e, 3 + n);
    push(&e, &s);
    ring_bell(&e);
    usleep(300000);
    evil_close(&e);
    alive("a completion-ring head far ahead of the tail");
}

/* ---- attacks ---------------------------------------------------------------------- */

enum attack {
    A_TAIL_FAR, A_TAIL_OVER, A_RANDOM, A_KIND, A_KIND0, A_DTYPE, A_REDOP, A_COMM, A_ROOT,
    A_EXTENT, A_MISALIGNED, A_OVERFLOW, A_CHUNK_ORDER, A_SEQ_BACK, A_DEV_NO_DIRECT,
    A_DEV_RECORD_OUT, A_DEV_MAGIC, A_DEV_UNREGISTERED, A_COUNT
};

static const char *const attack_names[] = {
    "ring tail 2^31 ahead", "ring tail sq_entries + 1 ahead", "8 random descriptors",
    "unknown kind 99", "kind 0", "dtype 42", "all_reduce with redop 9",
    "unknown communicator", "broadcast root 5 in a world of 1",
    "staged chunk extent past the arena end", "direct offset not a multiple of the element size",
    "direct count 2^62 (extent overflow)", "staged chunk 1 before chunk 0",
    "sequence number going backwards", "device descriptor without NX_SQE_DIRECT",
    "device op record past the arena end", "device op record with a bad magic",
    "device op naming an unregistered allocation"};

/* What nexard's text to the dropped client says of each, after the rank's name (random
 * descriptors fail on whichever field comes first; a device record is read only where
 * nexard has device support). */
static const char *const attack_reasons[] = {
    "submission ring tail 2147483648 is 2147483648 entries past head 0",
    "submission ring tail 257 is 257 entries past head 0",
    "",
    "bad descriptor of kind 99: unknown op kind",
    "bad descriptor of kind 0: unknown op kind",
    "bad all_reduce descriptor: unknown dtype",
    "bad all_reduce descriptor: bad reduction op",
    "descriptor for communicator ",
    "bad broadcast descriptor: root or peer out of range",
    "bad all_reduce descriptor: input outside the arena",
    "bad all_reduce descriptor: offset not aligned to the element size",
    "bad all_reduce descriptor: count overflows",
    "an op's first descriptor is not chunk 0",
    "op sequence 0 on comm ",
    "bad all_reduce descriptor: device descriptor flags without NX_SQE_DIRECT",
    "bad all_reduce descriptor: device op record outside the arena",
    "device",
    "device"};
_Static_assert(sizeof(attack_reasons) / sizeof(attack_reasons[0]) == A_COUNT,
               "a reason for every attack");

/* A device descriptor whose record (at the heap's start) names registration mem. */
static struct nx_sqe device_sqe(struct evil *e, uint32_t magic, uint32_t mem)
{
    struct nx_dev_op r = {.magic = magic, .in = {.mem = mem}, .out = {.mem = mem},
                          .done_off = NX_DEV_NO_DONE};
    memcpy(e->base + e->h.arena_off + e->h.heap_off, &r, sizeof(r));
    return (struct nx_sqe){.user_data = 7, .comm_id = e->comm, .kind = NX_K_ALL_REDUCE,
                           .dtype = NEXAR_F32, .redop = NEXAR_SUM, .count = 16,
                           .flags = NX_SQE_DIRECT | NX_SQE_DEVICE, .in_off = e->h.heap_off};
}

/* One DEV_REGISTER or DEV_UNREGISTER and its DEV_REPLY; returns the reply's status or -1. */
static int dev_request(struct evil *e, uint16_t type, const ProtobufCMessage *m)
{
    uint8_t buf[256], *pl = NULL;
    struct nx_frame_hdr fh;
    size_t n = protobuf_c_message_pack(m, buf);
    if (nx_chan_send(e->fd, type, buf, (uint32_t)n, NULL, 0) ||
        nx_chan_recv(e->fd, &fh, &pl, 5000, NULL, 0, NULL) || fh.type != NX_MSG_DEV_REPLY) {
        free(pl);
        return -1;
    }
    Nexar__DeviceReply *r = nexar__device_reply__unpack(NULL, fh.length, pl);
    free(pl);
    int st = r ? (int)r->status : -1;
    if (r)
        nexar__device_reply__free_unpacked(r, NULL);
    return st;
}

/* Registrations nexard cannot honour get a refusal, not a drop. */
static void device_controls(void)
{
    struct evil e;
    const char *what = "device registrations that cannot be honoured";
    if (evil_join(&e, what))
        return;
    uint8_t handle[64] = {0};
    Nexar__DeviceRegister m = NEXAR__DEVICE_REGISTER__INIT;
    m.kind = NEXAR__DEVICE_KIND__DEVICE_MEMORY;
    m.ipc_handle.data = handle;
    m.ipc_handle.len = sizeof(handle);
    m.base_addr = 0x7f0000000000ull;
    m.size = 1 << 20;
    m.pci_bus_id = (char *)"0000:ff:1f.7";
    int st1 = dev_request(&e, NX_MSG_DEV_REGISTER, &m.base);
    m.ipc_handle.len = 3;
    int st2 = dev_request(&e, NX_MSG_DEV_REGISTER, &m.base);
    uint32_t ids[2] = {1, 12345};
    Nexar__DeviceUnregister u = NEXAR__DEVICE_UNREGISTER__INIT;
    u.ids = ids;
    u.n_ids = 2;
    int st3 = dev_request(&e, NX_MSG_DEV_UNREGISTER, &u.base);
    if (st1 <= 0 || st2 <= 0 || st3 != 0) {
        tl_log("FAIL %s: replies %d (garbage handle), %d (short handle), %d (unknown ids); "
               "expected a refusal, a refusal and 0", what, st1, st2, st3);
        fails++;
    } else {
        struct nx_sqe b = barrier_sqe(&e, 0);
        push(&e, &b);
        ring_bell(&e);
        if (expect_completion(&e, "a barrier after the refused registrations", b.user_data) == 0)
            tl_log("ok: %s -> refused (%d, %d), unknown ids ignored, client kept", what, st1,
                   st2);
    }
    evil_close(&e);
}

static void attack(enum attack a)
{
    const char *what = attack_names[a];
    struct evil e;
    if (evil_join(&e, what))
        return;
    struct nx_sqe s = {.user_data = 7, .comm_id = e.comm, .kind = NX_K_ALL_REDUCE,
                       .dtype = NEXAR_F32, .redop = NEXAR_SUM, .count = 16};
    uint64_t heap = e.h.heap_off;
    switch (a) {
    case A_TAIL_FAR:
        nx_store_release(&e.sq_ctl->tail, e.sq_tail + 0x80000000u);
        break;
    case A_TAIL_OVER:
        nx_store_release(&e.sq_ctl->tail, e.sq_tail + e.h.sq_entries + 1);
        break;
    case A_RANDOM:
        for (int i = 0; i < 8; i++) {
            uint64_t w[8];
            for (int k = 0; k < 8; k++)
                w[k] = tl_mix64((uint64_t)(i * 8 + k) ^ 0xfeed);
            memcpy(&s, w, sizeof(s));
            if (i == 0)
                s.kind = 0xee;
            push(&e, &s);
        }
        break;
    case A_KIND: s.kind = 99; push(&e, &s); break;
    case A_KIND0: s.kind = 0; push(&e, &s); break;
    case A_DTYPE: s.dtype = 42; push(&e, &s); break;
    case A_REDOP: s.redop = 9; push(&e, &s); break;
    case A_COMM: s.comm_id = e.comm + 1000; push(&e, &s); break;
    case A_ROOT: s.kind = NX_K_BROADCAST; s.redop = 0; s.peer = 5; push(&e, &s); break;
    case A_EXTENT:
        s.in_off = s.out_off = e.h.arena_bytes - 8;
        push(&e, &s);
        break;
    case A_MISALIGNED:
        s.flags = NX_SQE_DIRECT;
        s.in_off = s.out_off = heap + 1;
        push(&e, &s);
        break;
    case A_OVERFLOW:
        s.flags = NX_SQE_DIRECT;
        s.count = 1ull << 62;
        s.in_off = s.out_off = heap;
        push(&e, &s);
        break;
    case A_CHUNK_ORDER: {
        uint64_t per = nx_chunk_elems(NX_K_ALL_REDUCE, 1, 4, e.h.slot_bytes);
        s.count = per * 2;
        s.chunk = 1;
        push(&e, &s);
        break;
    }
    case A_DEV_NO_DIRECT:
        s = device_sqe(&e, NX_DEV_OP_MAGIC, 1);
        s.flags = NX_SQE_DEVICE;
        push(&e, &s);
        break;
    case A_DEV_RECORD_OUT:
        s = device_sqe(&e, NX_DEV_OP_MAGIC, 1);
        s.in_off = e.h.arena_bytes - 8;
        push(&e, &s);
        break;
    case A_DEV_MAGIC:
        s = device_sqe(&e, 0x12345678, 1);
        push(&e, &s);
        break;
    case A_DEV_UNREGISTERED:
        s = device_sqe(&e, NX_DEV_OP_MAGIC, 1);
        push(&e, &s);
        break;
    case A_SEQ_BACK: {
        struct nx_sqe b = barrier_sqe(&e, 0);
        push(&e, &b);
        ring_bell(&e);
        expect_completion(&e, "barrier seq 0 before going backwards", b.user_data);
        b = barrier_sqe(&e, 1);
        push(&e, &b);
        ring_bell(&e);
        expect_completion(&e, "barrier seq 1 before going backwards", b.user_data);
        b = barrier_sqe(&e, 0);
        push(&e, &b);
        break;
    }
    default: break;
    }
    ring_bell(&e);
    /* Before its socket closes, the client hears why (the shim makes the rank's text of
     * it): naming the rank, and the fault. */
    char why[512];
    read_drop_text(&e, why, sizeof(why));
    if (!strstr(why, "a protocol violation by rank 0 (pid ") || !strstr(why, " of job \"") ||
        !strstr(why, attack_reasons[a])) {
        tl_log("FAIL %s: the dropped client was told \"%s\" (expected the rank and \"%s\")",
               what, why, attack_reasons[a]);
        fails++;
    }
    if (rc_wait_closed(e.fd, 5000) != 0) {
        tl_log("FAIL %s: the client was not dropped (its socket still open after 5 s)", what);
        fails++;
    } else {
        tl_log("ok: %s -> client dropped, told \"%s\"", what, why);
    }
    evil_close(&e);
    alive(what);
}

/* The real rank beside the hostile one: its all_reduce fails PEER_LOST with a text that
 * says nexard dropped rank 0, and why. */
static int peer_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    nexar_status_t s = nexar_init(&w);
    if (s != NEXAR_OK) {
        tl_log("FAIL: the real rank's nexar_init: %s", nexar_last_error());
        return 1;
    }
    int32_t v = 1;
    s = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
    const char *text = nexar_last_error();
    const char *want = "nexard dropped it for a protocol violation (bad all_reduce "
                       "descriptor: unknown dtype)";
    if (s != NEXAR_ERR_PEER_LOST || !strstr(text, "rank 0 (pid ") || !strstr(text, want)) {
        tl_log("FAIL: the real rank's all_reduce: %s: \"%s\" (expected PEER_LOST naming "
               "rank 0 and \"%s\")", nexar_strerror(s), text, want);
        return 1;
    }
    tl_log("ok: the real rank beside it: %s: \"%s\"", nexar_strerror(s), text);
    (void)r;
    nexar_finalize();
    return 0;
}

/* A hostile rank 0 in a job with a real rank 1: the real one hears why it lost its peer. */
static void peer_hears_why(void)
{
    const char *what = "a bad dtype from rank 0 of a 2-rank job";
    char job[96];
    hx_job_name(job, sizeof(job), "evilpair");
    const char *const env[] = {"NEXAR_RANK=1", "NEXAR_WORLD_SIZE=2", NULL};
    struct hx_job_opts o = {.sock = g_sock, .size = 1, .fn = peer_rank, .job = job,
                            .env_extra = env};
    struct hx_job j;
    if (hx_job_start(&j, &o)) {
        tl_log("FAIL %s: cannot start the real rank", what);
        fails++;
        return;
    }
    struct evil e;
    if (evil_join_as(&e, what, job, 0, 2) == 0) {
        struct nx_sqe s = {.user_data = 7, .comm_id = e.comm, .kind = NX_K_ALL_REDUCE,
                           .dtype = 42, .redop = NEXAR_SUM, .count = 1};
        push(&e, &s);
        ring_bell(&e);
        char why[512];
        read_drop_text(&e, why, sizeof(why));
        if (!strstr(why, "bad all_reduce descriptor: unknown dtype")) {
            tl_log("FAIL %s: the dropped client was told \"%s\"", what, why);
            fails++;
        }
        rc_wait_closed(e.fd, 5000);
        evil_close(&e);
    }
    if (hx_job_wait(&j, 20, 5) || hx_job_check_ok(&j)) {
        tl_log("FAIL %s: the real rank beside it", what);
        fails++;
    }
}

int main(void)
{
    hx_require_nexard();
    struct hx_daemon d;
    if (hx_daemon_start(&d, (const char *const[]){"--slot-bytes", "65536", "--slots", "2", NULL}))
        return 1;
    g_sock = d.sock;
    struct bgjob bg;
    if (bgjob_start(&bg, &d, 2))
        return 1;
    controls();
    device_controls();
    for (int a = 0; a < A_COUNT; a++)
        attack((enum attack)a);
    peer_hears_why();
    fails += bgjob_conclude(&bg, &d, 2);
    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
