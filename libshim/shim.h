/*
 * shim.h - internals of libnexarshim.  Nothing here is exported: the library is
 * built with hidden visibility and a version script that exports nexar_* only.
 *
 * Threads: one global mutex (nx_S.mu) protects all shim state: rings, staging
 * slots, requests, communicators and the arena allocator.  A thread that blocks
 * in a wait releases it while it sleeps, so other threads keep submitting and
 * progressing their own communicators.  Only one thread at a time sleeps on the
 * completion doorbell (the "poller"); the others wait on nx_S.cv and are woken
 * whenever the poller returns.  The last-error text is thread-local.
 *
 * Ownership: every object is malloc'd and owned by the shim; nexar_finalize()
 * frees all of them.  Nothing private is ever stored in shared memory.
 */
#ifndef NX_SHIM_H
#define NX_SHIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nexar.h"
#include "shm_abi.h"
#include "spin_pause.h"

#define NX_HIDDEN __attribute__((visibility("hidden")))

/* Busy-poll the completion ring this long before sleeping on its eventfd. */
#define NX_SPIN_NS 30000ull
/* A staged op whose turn came but that found no slot for this long goes direct from a
 * copy in the arena heap instead (request.c, "Bounce"). */
#define NX_BOUNCE_AFTER_NS 20000000ull
/* An op that waited this long for a slot says so, and which ops held them, if it then
 * times out (request.c, queued_note). */
#define NX_SLOT_NOTE_NS 1000000000ull
/* Stand-in slots in the arena heap for single-copy ops that bounce, at most at once. */
#define NX_VSLOTS 16u
/* Entries of nx_S.slots: the segment's slots, then the stand-ins. */
#define NX_SLOT_ENTRIES (nx_S.hdr.slot_count + NX_VSLOTS)
/* Smaller copies into a slot are ordinary ones (stream_copy.c). */
#define NX_STREAM_MIN_BYTES (256u << 10)
/* A staged chunk with this much input or more is published as soon as it is copied in
 * (request.c), not with the rest of nx_pump's batch. */
#define NX_PUBLISH_EACH_BYTES (64u << 10)
/* Longest single sleep; also bounds how late a lost doorbell can be noticed. */
#define NX_POLL_MAX_MS 200
/* The shim's own safety margin over NEXAR_TIMEOUT before it gives up on nexard. */
#define NX_SAFETY_MS 30000ull
/* nexard's default op_timeout_s, and the largest it accepts. */
#define NX_DEFAULT_TIMEOUT_MS 300000u
#define NX_MAX_TIMEOUT_MS (604800u * 1000u)
/* Extra time granted to the join reply over NEXAR_TIMEOUT. */
#define NX_JOIN_GRACE_MS 10000u

/* ---- intrusive doubly linked list ------------------------------------------- */

struct nx_list {
    struct nx_list *prev, *next;
};

static inline void nx_list_init(struct nx_list *l)
{
    l->prev = l->next = l;
}
static inline bool nx_list_empty(const struct nx_list *l)
{
    return l->next == l;
}
static inline void nx_list_add_tail(struct nx_list *l, struct nx_list *n)
{
    n->prev = l->prev;
    n->next = l;
    l->prev->next = n;
    l->prev = n;
}
static inline void nx_list_del(struct nx_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
#define nx_container_of(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))

/* ---- environment (env.c) ----------------------------------------------------- */

struct nx_env {
    uint32_t rank, size, local_rank;
    uint32_t timeout_ms;
    const char *source; /* "NEXAR_*", "torchrun", "Open MPI", "Slurm" or "default" */
    char job[256];
    char coord[256];
    bool coord_guessed; /* coord is torchrun's MASTER_ADDR:MASTER_PORT, not NEXAR_COORD */
    char socket[108]; /* sizeof(sun_path) */
    char algo[256];   /* NEXAR_ALGO, "" when unset; the daemon checks it */
    bool joiner;      /* NEXAR_JOIN=1: joins a running job (nexar_comm_grow) */
    bool peer_reads;  /* NEXAR_PEER_READS, default 1: JoinRequest.peer_reads */
    bool single_copy; /* NEXAR_SINGLE_COPY, default 1: JoinRequest.single_copy */
    bool stream_copy; /* NEXAR_STREAM_COPY, default 1: stream_copy.c where request.c says */
};

/* Reads the job description; NEXAR_OK or NEXAR_ERR_INVALID with the error text set. */
NX_HIDDEN nexar_status_t nx_env_read(struct nx_env *e);

/* ---- errors (error.c) -------------------------------------------------------- */

/* Sets the calling thread's last-error text and returns s (for `return nx_fail(...)`). */
NX_HIDDEN nexar_status_t nx_fail(nexar_status_t s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Sets the last-error text to text, or to nexar_strerror(s) when text is NULL. */
NX_HIDDEN nexar_status_t nx_fail_text(nexar_status_t s, const char *text);
/* A status received from nexard, clamped to the public range. */
NX_HIDDEN nexar_status_t nx_status_from_wire(uint32_t s);

/* ---- communicators (comm.c) -------------------------------------------------- */

/* One (peer, tag, direction) of point-to-point traffic: its message counter and the
 * newest request of that stream that has not submitted all its chunks. */
struct nx_p2p_stream {
    struct nx_p2p_stream *next; /* hash chain */
    uint32_t peer, tag;
    uint8_t dir; /* 0 send, 1 recv */
    uint64_t seq;
    struct nexar_request *tail;
    uint32_t held; /* staging slots held by this stream's requests */
};

struct nexar_comm {
    struct nx_list link; /* nx_S.comms */
    struct nx_list reqs; /* requests not yet freed, oldest first */
    uint32_t id;
    int rank, size;
    bool world;
    /* Its plan as nexard said (NX_PLAN_*): LOCAL, it lives on this node alone and its chunk
     * plan is local; CMA, its ops that only move data are single-copy (shm_abi.h). */
    unsigned plan;
    uint64_t next_seq;                /* collective sequence number */
    struct nexar_request *coll_tail;  /* newest collective still submitting */
    uint32_t coll_held;               /* staging slots held by its collectives */
    nexar_status_t fail;              /* NEXAR_OK, or why the communicator failed */
    char *fail_text;                  /* malloc'd; NULL: the generic text */
    struct nx_p2p_stream **p2p;       /* hash buckets */
    uint32_t p2p_buckets, p2p_count;
    void *stream;     /* nexar_comm_set_stream(): a CUstream, NULL when unset */
    void *stream_ctx; /* its CUcontext */
    bool algo_seen;   /* a collective completed: last_algo holds its nx_cqe.algo */
    uint32_t last_algo;
    uint64_t req_serial; /* requests started on c so far */
};

NX_HIDDEN struct nexar_comm *nx_comm_new(uint32_t id, int rank, int size, bool world);
/* Frees the object and its p2p table; its requests must be gone. */
NX_HIDDEN void nx_comm_destroy(struct nexar_comm *c);
/* The stream of (peer, tag, dir), created on first use; NULL when out of memory. */
NX_HIDDEN struct nx_p2p_stream *nx_comm_stream(struct nexar_comm *c, uint32_t peer,
                                               uint32_t tag, uint8_t dir);
/* Marks c failed with (s, text) unless it already failed. */
NX_HIDDEN void nx_comm_set_failed(struct nexar_comm *c, nexar_status_t s, const char *text);
/* Returns c's failure as the caller's error (status and text), NEXAR_OK if none. */
NX_HIDDEN nexar_status_t nx_comm_check(const struct nexar_comm *c, const char *fn);

/* ---- requests (request.c) ------------------------------------------------------ */

enum nx_mode {
    NX_MODE_NODATA, /* one descriptor, no data: barrier, split, free, abort, count 0 */
    NX_MODE_DIRECT, /* one NX_SQE_DIRECT descriptor over arena buffers */
    NX_MODE_STAGED, /* one descriptor per chunk through the staging slots */
    NX_MODE_DEVICE, /* one NX_SQE_DEVICE descriptor naming its record (device.c) */
};

struct nx_dev_req;

/* What a public entry point asks for, after validation. */
struct nx_call {
    uint8_t kind, dtype, redop;
    uint64_t count; /* elements per block; bucketed: the sum of the iov counts */
    uint32_t peer;  /* root, dest, src or color */
    uint32_t tag;   /* tag or key */
    const void *in;
    void *out;
    const nexar_iov_t *iov; /* bucketed only; copied */
    size_t niov;
    struct nx_dev_req *dev; /* device buffers: prepared by nx_dev_prepare() */
};

struct nexar_request {
    struct nx_list active_link; /* nx_S.active while not complete, oldest first */
    struct nx_list comm_link;   /* comm->reqs until freed */
    struct nexar_comm *comm;
    uint32_t tidx, tgen; /* request-table entry: user_data of unslotted descriptors */

    struct nx_sqe tmpl; /* fields shared by every descriptor of the op */
    struct nx_shape shape;
    uint32_t esize;
    enum nx_mode mode;
    const uint8_t *in;
    uint8_t *out;
    nexar_iov_t *iov; /* bucketed: private copy of the caller's array */
    size_t niov;
    size_t cur_iov;   /* bucketed copy-in cursor: iov index and element offset */
    uint64_t cur_off;

    uint64_t chunk_elems;
    bool stream_in;      /* chunks of NX_STREAM_MIN_BYTES or more go in by nx_copy_stream */
    bool single_copy;    /* staged, one chunk: its peers read its buffers and it theirs
                            (NX_SQE_CMA); its slot holds only nexard's table */
    uint64_t nunits;     /* descriptors the op needs: chunks, or 1 */
    uint64_t next_unit;  /* next to submit */
    uint64_t done_units; /* completed successfully */
    uint32_t inflight;   /* submitted, completion not reaped */
    uint32_t held;       /* staging slots held */
    uint32_t *stream_held; /* slots held by the request's whole stream */
    uint64_t slot_wait_ns; /* staged, its stream's turn, no slot yet: since when */
    uint64_t slot_waited_ns; /* how long that lasted, once it went */
    char *slot_note;         /* after NX_SLOT_NOTE_NS of it: the ops its slots held */
    uint8_t *bounce;       /* in the arena heap: the op went direct from a copy (nx_pump) */

    /* Ordering: descriptors of one sequence stream (a comm's collectives, one p2p
     * stream) are submitted op by op; a request waits while key_prev still submits. */
    struct nexar_request **key_tail;
    struct nexar_request *key_prev, *key_next;
    bool submitting; /* may still submit descriptors */

    bool failed;   /* a failure was seen: submit nothing more */
    bool complete; /* finished: status final, nothing in flight */
    bool detached; /* a blocking stream-ordered call returned without it: freed when it
                      completes without error, kept for nexar_sync() to report otherwise */
    /* Threads: a request is freed by whoever owns it (a blocking call, or nexar_wait /
     * nexar_test / nexar_sync for a handle).  owned: a call that will free it is waiting
     * on it, so nexar_sync and nexar_comm_free on another thread wait for it but leave it
     * alone.  refs: threads inside nx_progress_wait() on it; a free while any is there
     * only unlinks it (zombie) and the last of them frees it (nx_req_unref). */
    bool owned, zombie;
    uint32_t refs;
    uint64_t serial; /* the comm's req_serial when it started: what nexar_sync covers */
    struct nx_dev_req *dev; /* device buffers: the request's record, event, done word */
    nexar_status_t status;
    char *text; /* malloc'd detailed text of a failure, or NULL */
    uint32_t res_comm, res_rank, res_size;
    unsigned res_plan; /* nx_cqe.res_local */
    uint64_t last_event_ns; /* last submission or completion while in flight */
};

/* Validates nothing: builds and queues the request for op on c (seq assigned here).
 * NEXAR_OK, NEXAR_ERR_NOMEM, NEXAR_ERR_UNSUPPORTED (op too large for a slot). */
NX_HIDDEN nexar_status_t nx_req_start(struct nexar_comm *c, const struct nx_call *op,
                                      struct nexar_request **out);
/* Frees a complete request (unlinks it from its comm); while another thread waits on it
 * (refs), only unlinks it, and nx_req_unref() frees it. */
NX_HIDDEN void nx_req_free(struct nexar_request *r);
/* Drops a waiter's reference; frees an unlinked request whose last waiter this was. */
NX_HIDDEN void nx_req_unref(struct nexar_request *r);
/* Marks r failed (first failure wins) and, for communicator failures, its comm. */
NX_HIDDEN void nx_req_fail(struct nexar_request *r, nexar_status_t s, const char *text);
/* Publishes r's status as the thread's error; returns the status. */
NX_HIDDEN nexar_status_t nx_req_result(const struct nexar_request *r);
/* Submits whatever the slots and the ring allow; rings the doorbell. */
NX_HIDDEN void nx_pump(void);
/* Handles one completion copied out of the ring. */
NX_HIDDEN void nx_req_on_cqe(const struct nx_cqe *e);
/* Fails every incomplete request with (s, text), frees all slots (nothing more will
 * complete): the daemon went away or the shim gave up on it. */
NX_HIDDEN void nx_req_abandon_all(nexar_status_t s, const char *text);
/* Staging slots and the request table, set up after the segment is mapped. */
NX_HIDDEN int nx_req_init(void);
NX_HIDDEN void nx_req_fini(void);

/* ---- device buffers (device.c, cudrv.c, devcache.c) ---------------------------- */

/* Classifies op's buffers.  All host: NEXAR_OK with op->dev NULL.  All device: checks
 * them, registers their allocations with nexard, writes the op's record into the arena,
 * records the ready event on the comm's stream (or the legacy default stream) and sets
 * op->dev.  A mix, or device memory this shim or nexard cannot handle:
 * NEXAR_ERR_UNSUPPORTED (or INVALID) with the reason, and nothing was changed. */
NX_HIDDEN nexar_status_t nx_dev_prepare(const char *fn, struct nexar_comm *c,
                                        struct nx_call *op);
/* Releases what nx_dev_prepare() took when the request could not be started. */
NX_HIDDEN void nx_dev_discard(struct nx_dev_req *d);
/* The request started: a stream-ordered one first makes progress until nexard holds its
 * descriptor (a caller that then blocks on its stream must not wait on one still queued
 * in the shim), then makes its stream wait for the done word.  NEXAR_OK when the caller
 * may return without waiting (stream-ordered), a failure status when it must wait for
 * the request itself. */
NX_HIDDEN nexar_status_t nx_dev_started(struct nexar_request *r);
/* The request completed (any status): sets its done word, returns its resources. */
NX_HIDDEN void nx_dev_complete(struct nexar_request *r);
/* Arena offset of the request's record, for its descriptor. */
NX_HIDDEN uint64_t nx_dev_rec_off(const struct nx_dev_req *d);
/* True when d is stream-ordered (the call returns before the op is done). */
NX_HIDDEN bool nx_dev_ordered(const struct nx_dev_req *d);
/* finalize: unregisters everything, destroys the events. */
NX_HIDDEN void nx_dev_fini(void);

/* ---- peer reads (pull.c) ------------------------------------------------------- */

struct nx_join;
struct nx_slot;

/* Maps the peers' segments that j carries (closing the fds) into nx_S; NEXAR_OK when
 * there are none.  Its failure names the peer and the cause. */
NX_HIDDEN nexar_status_t nx_pull_map(struct nx_join *j);
NX_HIDDEN void nx_pull_unmap(void);
/* A peer-read completion of slot sl (e->pull_n entries at its output, table), whose chunk
 * has n elements a block: copies each entry's bytes into r's output and queues the
 * NX_K_PULLED notice.  A table that names
 * what this rank did not map fails r with the reason (the notice goes all the same). */
NX_HIDDEN void nx_pull_copy(struct nexar_request *r, const struct nx_slot *sl,
                            const struct nx_cqe *e, uint8_t *table, uint64_t n);
/* Puts the queued notices into the ring, at most space of them; returns how many. */
NX_HIDDEN uint32_t nx_pull_flush(uint32_t space);
/* Whether this process can take part in single copy (shm_abi.h): it is dumpable, Yama
 * lets its peers read it (asking it to, at scope 1), and process_vm_readv works here
 * (a seccomp filter, as container runtimes install, may forbid it). */
NX_HIDDEN bool nx_single_copy_probe(void);
/* Undoes what the probe let in (Yama), when the job does not single-copy after all or this
 * rank's peers are gone. */
NX_HIDDEN void nx_single_copy_release(void);

/* ---- rings and doorbells (ring.c) ---------------------------------------------- */

/* Points nx_S at the rings, slots and arena of the mapped segment whose header is in
 * nx_S.hdr (checked), and takes the rings' indices as they are. */
NX_HIDDEN void nx_ring_attach(uint8_t *base, uint64_t bytes);

/* Free submission entries right now. */
NX_HIDDEN uint32_t nx_ring_sq_space(void);
/* Writes e at the local tail; visible to the daemon after nx_ring_publish(). */
NX_HIDDEN void nx_ring_put(const struct nx_sqe *e);
/* Publishes the entries put so far and rings the submission doorbell. */
NX_HIDDEN void nx_ring_publish(void);
/* Rings the submission doorbell. */
NX_HIDDEN void nx_ring_doorbell(void);
/* Consumes every completion, calling nx_req_on_cqe(); returns how many. */
NX_HIDDEN uint32_t nx_ring_reap(void);
/* True when the completion ring holds entries past head. */
NX_HIDDEN bool nx_ring_cq_pending(uint32_t head);
/* The detailed text of a failed completion into buf (empty when overwritten). */
NX_HIDDEN void nx_ring_err_text(const struct nx_cqe *e, char *buf, size_t len);

/* ---- control channel (control.c) ---------------------------------------------- */

struct nx_join {
    int sock, memfd, sq_efd, cq_efd;
    /* Peer reads: the job's ranks here (0: none), this rank's index among them, and the
     * others' read-only segments by index (-1 at pull_index). */
    uint32_t pull_count, pull_index;
    int pull_fds[NX_PULL_MAX_RANKS];
    uint32_t client_id, world_comm, rank, size;
    unsigned plan; /* JoinReply.local_plan, single_copy as NX_PLAN_* */
    uint32_t pull_pids[NX_PULL_MAX_RANKS]; /* JoinReply.pull_pids (single copy), else 0 */
    uint32_t features;
    char device_note[256];
    uint64_t segment_bytes;
    uint32_t timeout_ms; /* the op deadline the daemon applies */
};

/* Connects, says HELLO, JOINs.  On success every fd in *j is open. */
NX_HIDDEN nexar_status_t nx_control_join(const struct nx_env *env, struct nx_join *j);
/* Maps the segment of j into nx_S and checks its header. */
NX_HIDDEN nexar_status_t nx_control_map(const struct nx_join *j);
/* Reads what the daemon sent on the idle socket (an ERROR frame, or EOF) into text: the
 * ERROR's status, or NEXAR_OK when none came. */
NX_HIDDEN nexar_status_t nx_control_drain(char *text, size_t len);
/* DEV_REGISTER round trip: kind 1 memory, 2 event.  NEXAR_OK with *id, or the daemon's
 * refusal (status and text set); a broken socket kills the shim (UNAVAILABLE). */
NX_HIDDEN nexar_status_t nx_control_dev_register(int kind, const void *handle,
                                                 uint64_t base, uint64_t size,
                                                 const char *pci, uint32_t *id);
/* DEV_UNREGISTER round trip for ids[0..n). */
NX_HIDDEN nexar_status_t nx_control_dev_unregister(const uint32_t *ids, size_t n);
/* COMM_QUERY: communicator id's failed ranks (at most cap to ranks, the count to *n). */
NX_HIDDEN nexar_status_t nx_control_comm_failed(uint32_t id, uint32_t *ranks, size_t cap,
                                                size_t *n);

/* ---- arena heap (arena.c) ------------------------------------------------------ */

struct nx_arena_blk {
    uint64_t off, len; /* heap-relative */
    bool used;
};

struct nx_arena {
    struct nx_arena_blk *blk; /* sorted by off, covering the heap exactly */
    size_t n, cap;
};

NX_HIDDEN int nx_arena_init(uint64_t heap_bytes);
NX_HIDDEN void nx_arena_fini(void);
/* The shim's own blocks from the heap (device op records, done words); locked.
 * NULL when the heap has no room. */
NX_HIDDEN void *nx_arena_get(uint64_t bytes);
NX_HIDDEN void nx_arena_put(void *p);
/* Arena offset of p, which lies in the segment's arena. */
NX_HIDDEN uint64_t nx_arena_off(const void *p);
/* True when [p, p+bytes) lies inside the heap; *off gets its arena offset. */
NX_HIDDEN bool nx_arena_heap_range(const void *p, uint64_t bytes, uint64_t *off);

/* ---- progress (progress.c) ----------------------------------------------------- */

NX_HIDDEN uint64_t nx_now_ns(void);
/* Reaps completions and submits what it can; checks the safety deadline.  Locked. */
NX_HIDDEN void nx_progress(void);
/* Blocks (releasing the lock while sleeping) until r is complete. */
NX_HIDDEN void nx_progress_wait(struct nexar_request *r);
/* Daemon gone or shim broken: fail everything with (s, text) and remember it. */
NX_HIDDEN void nx_shim_die(nexar_status_t s, const char *text);
/* nexard went away: what it completed before (a failure and its reason, say) stands, as
 * the ring outlives the connection; what it left fails NEXAR_ERR_UNAVAILABLE with text. */
NX_HIDDEN void nx_shim_gone(const char *text);
/* NEXAR_OK when the shim is initialized and alive; otherwise the error, set. */
NX_HIDDEN nexar_status_t nx_shim_check(const char *fn);
/* fork.c: remembers this process as the rank's and arranges that a child forked later
 * gives the rank up (called by nexar_init). */
NX_HIDDEN void nx_fork_watch(void);
/* NEXAR_OK, or in a child forked after nexar_init() NEXAR_ERR_INVALID with why, set. */
NX_HIDDEN nexar_status_t nx_fork_check(const char *fn);
/* Completes and frees a request the caller holds; returns its status, set as error. */
NX_HIDDEN nexar_status_t nx_wait_locked(struct nexar_request *r);
/* Waits for a request the caller owns (a blocking call's own), without freeing it. */
NX_HIDDEN void nx_wait_owned(struct nexar_request *r);
/*
 * Completes c's requests started before serial `limit` (UINT64_MAX: all), for nexar_sync,
 * nexar_barrier and nexar_comm_free: one that no call owns is waited for and freed, and
 * the first failure among them is returned (set as the thread's error); one that a call
 * on another thread owns (a blocking op, nexar_wait) is waited for and left to it.
 */
NX_HIDDEN nexar_status_t nx_comm_drain(struct nexar_comm *c, uint64_t limit);

/* ---- the global state ---------------------------------------------------------- */

struct nx_slot {
    struct nexar_request *req; /* NULL: free */
    uint64_t chunk;
    bool pulled; /* the chunk's output was read from peers' slots (pull_hold): its second
                    completion copies nothing out */
    size_t iov;   /* bucketed: cursor at the chunk's first element */
    uint64_t iov_off;
    uint32_t gen;
    uint32_t next_free;
    /* A stand-in slot (index slot_count and up, request.c "Bounce"): a slot-sized run of
     * the arena heap on a slot boundary, which nexard knows as slot `vtag`. */
    void *vblock; /* the heap block that holds it; NULL: none */
    uint8_t *vbase;
    uint32_t vtag;
};

struct nx_shim {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool poller; /* a thread sleeps on the doorbell with mu released */
    struct nx_spin_pause pause; /* the poller's: another program on its core */
    bool inited;
    pid_t pid;         /* the rank's process: nexar_init()'s */
    pid_t forked_from; /* nonzero in a child forked after nexar_init(): the rank's pid */
    char fork_text[NX_ERR_TEXT_BYTES - 64];
    nexar_status_t dead; /* non-zero: daemon gone or shim broken */
    char dead_text[NX_ERR_TEXT_BYTES];

    struct nx_env env;
    uint32_t client_id;
    uint32_t features;          /* HelloReply.features */
    char device_note[256];      /* HelloReply.device_note */
    struct nx_devstate *dev;    /* device.c, NULL until the first device buffer */
    uint64_t safety_ns;
    uint32_t timeout_ms; /* the op deadline in force (JoinReply) */
    int sock, sq_efd, cq_efd;
    uint8_t *seg;
    uint64_t seg_bytes;
    struct nx_shm_hdr hdr; /* private copy, read once */
    uint32_t *sq_head, *sq_tail, *cq_head, *cq_tail;
    uint32_t *sq_wake, *cq_wake; /* nx_ring_ctl.wake: the daemon's, and ours */
    struct nx_sqe *sq;
    struct nx_cqe *cq;
    struct nx_err_entry *err;
    uint8_t *arena;
    uint32_t sq_local_tail, sq_published;
    uint32_t cq_local_head;
    bool sq_blocked; /* work waits for ring space */
    /* Completions nexard owes us: the descriptors it holds, which it caps at
     * hdr.max_pending (nx_pump holds further ones back). */
    uint32_t owed;

    /* Peer reads (pull.c): the slots of the job's other ranks on this node, mapped
     * read-only, by pull index (NULL at ours); and the NX_K_PULLED notices that wait for
     * room in the submission ring (one per slot at most). */
    uint32_t pull_count, pull_index;
    const uint8_t *pull_seg[NX_PULL_MAX_RANKS];
    uint64_t pull_len[NX_PULL_MAX_RANKS];
    pid_t pull_pid[NX_PULL_MAX_RANKS]; /* single copy: the processes to read, by index */
    struct nx_sqe *pulled_q;
    uint32_t pulled_n;

    struct nx_slot *slots;
    uint32_t free_head; /* free slot list; UINT32_MAX: none */
    uint32_t free_slots;
    uint32_t slot_cap; /* slots one stream may hold */
    uint32_t recv_held, recv_cap; /* slots held by receives, and their limit */

    /* Request table: unslotted descriptors carry (generation, index) as user_data. */
    struct nexar_request **reqtab;
    uint32_t *reqgen, *reqnext; /* reqnext: free list; UINT32_MAX ends it */
    uint32_t reqtab_cap, reqtab_free;

    struct nx_list active;
    struct nx_list comms;
    struct nexar_comm *world;
    struct nx_arena heap;
    uint64_t next_deadline_check_ns;
    uint64_t next_sock_check_ns;
};

extern NX_HIDDEN struct nx_shim nx_S;

static inline void nx_lock(void)
{
    pthread_mutex_lock(&nx_S.mu);
}
static inline void nx_unlock(void)
{
    pthread_mutex_unlock(&nx_S.mu);
}

#endif /* NX_SHIM_H */
