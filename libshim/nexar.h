/*
 * nexar.h - the public API of libnexarshim.
 *
 * A rank links libnexarshim and talks to the node's nexard through a shared-memory
 * ring (op descriptors and data) and a Unix-socket control channel.  Every call
 * returns a nexar_status_t.  NEXAR_OK is 0 and every error is a small positive
 * value (at most 255) so that tools can exit() with it.  nexar_strerror() gives
 * the generic text of a status; nexar_last_error() gives the detailed text of the
 * calling thread's last failure (which rank, which op, which peer).
 *
 * The library never prints and never aborts the process.
 *
 * Threads: every function may be called from any thread at any time, except that
 * nexar_init() and nexar_finalize() must not race with other calls.  Several threads
 * may use one communicator at once: each call is submitted whole, in the order the
 * threads enter the library, which is otherwise undefined (as numr's "submission order
 * is implementation-defined").  Collectives on one communicator must be called in the
 * same order on every rank, so a program that issues them from several threads orders
 * them itself; send/recv from several threads are matched per (source, tag) in the
 * order they were submitted.  A request handle belongs to the thread that uses it:
 * nexar_wait() or nexar_test() on a handle that another thread completes (wait, test,
 * sync, barrier, comm_free) is an error of the program.
 *
 * Failure model: NEXAR_ERR_INVALID, NEXAR_ERR_NOMEM and NEXAR_ERR_UNSUPPORTED are
 * detected locally, before anything is submitted, and leave the communicator
 * usable.  NEXAR_ERR_MISMATCH, NEXAR_ERR_TIMEOUT, NEXAR_ERR_PEER_LOST and
 * NEXAR_ERR_ABORTED fail the communicator: the op and every later op on it return
 * the same status and text.  Free it; a failed world means nexar_finalize().
 */
#ifndef NEXAR_H
#define NEXAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NEXAR_API __attribute__((visibility("default")))
#else
#define NEXAR_API
#endif

#define NEXAR_VERSION_MAJOR 0
#define NEXAR_VERSION_MINOR 1
#define NEXAR_VERSION_PATCH 0

typedef enum nexar_status {
    NEXAR_OK = 0,
    NEXAR_ERR_INVALID = 1,     /* a bad argument; nothing was submitted */
    NEXAR_ERR_UNAVAILABLE = 2, /* no daemon answers, or it went away */
    NEXAR_ERR_MISMATCH = 3,    /* ranks called different ops, or send/recv sizes differ */
    NEXAR_ERR_TIMEOUT = 4,     /* some ranks did not arrive within NEXAR_TIMEOUT */
    NEXAR_ERR_PEER_LOST = 5,   /* a rank (or node) of the communicator died */
    NEXAR_ERR_ABORTED = 6,     /* nexar_comm_abort() was called on the communicator */
    NEXAR_ERR_NOMEM = 7,
    NEXAR_ERR_UNSUPPORTED = 8, /* e.g. a device pointer in a build without CUDA */
    NEXAR_ERR_PERMISSION = 9,  /* the daemon refused this uid */
    NEXAR_ERR_INTERNAL = 10
} nexar_status_t;

typedef enum nexar_dtype {
    NEXAR_F32 = 0,
    NEXAR_F64 = 1,
    NEXAR_F16 = 2,  /* IEEE binary16; reduced in f32, rounded to nearest even */
    NEXAR_BF16 = 3, /* bfloat16; reduced in f32, rounded to nearest even */
    NEXAR_I8 = 4,
    NEXAR_U8 = 5,
    NEXAR_I32 = 6,
    NEXAR_U32 = 7,
    NEXAR_I64 = 8,
    NEXAR_U64 = 9
} nexar_dtype_t;
#define NEXAR_DTYPE_COUNT 10

typedef enum nexar_op {
    NEXAR_SUM = 0,
    NEXAR_PROD = 1,
    NEXAR_MIN = 2,
    NEXAR_MAX = 3
} nexar_op_t;
#define NEXAR_OP_COUNT 4

/* color for nexar_comm_split(): this rank joins no new communicator. */
#define NEXAR_UNDEFINED UINT32_MAX

typedef struct nexar_comm nexar_comm_t;
typedef struct nexar_request nexar_request_t;

/* One buffer of a bucketed allreduce: count elements at ptr. */
typedef struct nexar_iov {
    void *ptr;
    size_t count;
} nexar_iov_t;

/* ---- status and errors ---------------------------------------------------- */

/* Static text for a status; never NULL. */
NEXAR_API const char *nexar_strerror(nexar_status_t s);

/* Detailed text of the calling thread's last failure; "" when none.  The pointer
 * stays valid until this thread's next nexar call. */
NEXAR_API const char *nexar_last_error(void);

/* Size in bytes of one element of dtype, 0 for an unknown dtype. */
NEXAR_API size_t nexar_dtype_size(nexar_dtype_t dtype);

/* ---- lifetime --------------------------------------------------------------- */

/*
 * Joins the job described by the environment and returns the world communicator
 * in *world (owned by the library, freed by nexar_finalize()).
 *
 * Reads NEXAR_RANK, NEXAR_WORLD_SIZE, NEXAR_LOCAL_RANK, NEXAR_JOB, NEXAR_COORD,
 * NEXAR_SOCKET (default /run/nexar/nexard.sock) and NEXAR_TIMEOUT (seconds,
 * default 300).  When the NEXAR_* variables are absent it falls back to
 * torchrun (RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT), Slurm
 * (SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_JOB_ID SLURM_STEP_ID) and
 * Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK).  Without any, it is rank 0 of 1.
 *
 * Blocks until every rank of the world has joined, or NEXAR_TIMEOUT passes.
 * Returns NEXAR_OK, NEXAR_ERR_INVALID (bad environment), NEXAR_ERR_UNAVAILABLE
 * (no daemon answers at the socket), NEXAR_ERR_PERMISSION, NEXAR_ERR_TIMEOUT
 * (the world did not form; the text names the missing ranks), NEXAR_ERR_NOMEM.
 */
NEXAR_API nexar_status_t nexar_init(nexar_comm_t **world);

/* Leaves the job and frees every communicator, request and arena buffer.  Sends still
 * outstanding are first completed (within NEXAR_TIMEOUT), so that a message the program
 * started is delivered, and so are device-buffer ops: nexard's GPU work on them uses the
 * rank's memory, and a stream-ordered one holds the caller's stream until that work is
 * done, never less (only if nexard completes nothing for NEXAR_TIMEOUT + 30 s does the
 * stream go on, its buffers' contents unspecified).  Other outstanding requests are
 * abandoned.  Safe after errors and when nexar_init() failed; a second call is a no-op. */
NEXAR_API nexar_status_t nexar_finalize(void);

/* ---- communicators ---------------------------------------------------------- */

NEXAR_API int nexar_comm_rank(const nexar_comm_t *c); /* -1 for NULL */
NEXAR_API int nexar_comm_size(const nexar_comm_t *c); /* -1 for NULL */

/*
 * The algorithm that carried c's most recently completed collective between nodes:
 * "ring", "rd" (recursive doubling; Bruck for all_gather), "hd" (halving-doubling),
 * "tree", "pairwise", "dissemination" or "hillis-steele"; "local" when the collective
 * stayed among the ranks of one node.  NULL before any collective of c completed, and
 * for NULL.  The string is static.  The daemons choose by size and node count unless
 * NEXAR_ALGO says otherwise ("all_reduce=ring,broadcast=tree", docs/api.md).
 */
NEXAR_API const char *nexar_comm_algorithm(const nexar_comm_t *c);

/*
 * Collective over c, as MPI_Comm_split: ranks with the same color form a new
 * communicator, ordered by key, then by rank in c.  color NEXAR_UNDEFINED gives
 * *out == NULL.  The caller owns *out and frees it with nexar_comm_free().
 */
NEXAR_API nexar_status_t nexar_comm_split(nexar_comm_t *c, uint32_t color, uint32_t key,
                                          nexar_comm_t **out);

/* Frees c after completing its outstanding requests.  The world communicator is
 * freed by nexar_finalize() only; passing it here returns NEXAR_ERR_INVALID. */
NEXAR_API nexar_status_t nexar_comm_free(nexar_comm_t *c);

/* Fails every in-flight and future op of c, on every rank, with NEXAR_ERR_ABORTED. */
NEXAR_API nexar_status_t nexar_comm_abort(nexar_comm_t *c);

/*
 * The ranks of c known to have failed (a dead process, a lost node), ascending.  *n gets
 * the count; at most cap are written to ranks (ranks may be NULL when cap is 0).  Once a
 * rank is listed it stays listed.  Local: asks nexard, waits for no other rank.
 */
NEXAR_API nexar_status_t nexar_comm_failed_ranks(nexar_comm_t *c, uint32_t *ranks, size_t cap,
                                                 size_t *n);

/*
 * Collective over the survivors of c, typically after an op on c returned
 * NEXAR_ERR_PEER_LOST: every rank of c that is alive and has not freed c calls it.  The
 * survivors agree on one failed set (a rank that fails while they agree is left out, not
 * waited for); *out holds exactly the survivors, ranked in the order of their ranks in c.
 * c itself stays failed and must still be freed.  Shrinking a communicator where nothing
 * failed gives a copy of it.  A survivor that does not call it within c's deadline makes
 * it return NEXAR_ERR_TIMEOUT naming that rank.  Across nodes the daemons agree on the
 * failed set first (docs/recovery.md).
 */
NEXAR_API nexar_status_t nexar_comm_shrink(nexar_comm_t *c, nexar_comm_t **out);

/*
 * Elastic grow.  The members of c call it with the same add (> 0); add new processes of
 * the same job, started with NEXAR_JOIN=1 (and the job's NEXAR_JOB / NEXAR_COORD), get the
 * same new communicator from nexar_init().  Members keep their ranks; joiners are ranked
 * after them in the order they joined (across nodes: node by node, in the communicator's
 * node order - the order of each node's lowest rank - then the job's other nodes).  A
 * joiner starts at a node of the job, or with NEXAR_COORD at any other (a replacement
 * machine).  add = 0 is NEXAR_ERR_INVALID; different adds are NEXAR_ERR_MISMATCH; too
 * few joiners within c's deadline NEXAR_ERR_TIMEOUT.
 */
NEXAR_API nexar_status_t nexar_comm_grow(nexar_comm_t *c, uint32_t add, nexar_comm_t **out);

/*
 * Device buffers.  Every collective and send/recv also takes CUDA device pointers
 * (cudaMalloc memory; managed and host-registered memory count as host memory).  One
 * op takes device buffers only or host buffers only, and every rank of an op must
 * agree: device buffers on one rank and host buffers on another is NEXAR_ERR_MISMATCH.
 * Buffers of one op live on one device and are aligned to their element size.
 *
 * Without a stream (the default) a device op is ordered like cudaMemcpy: after the work
 * queued so far on the legacy default stream, and so on every blocking stream (work on
 * streams created with cudaStreamNonBlocking must be synchronized by the caller), and
 * the blocking call returns when the result is in place.
 *
 * NEXAR_ERR_UNSUPPORTED (nothing submitted, the communicator stays usable) when this
 * libnexarshim was built without CUDA, when libcuda.so.1 cannot be loaded, when nexard
 * has no CUDA device, for memory CUDA IPC cannot share (cudaMallocAsync pools, VMM), or
 * for a mix of device and host buffers in one call.  The text says which.
 *
 * Each device op in flight keeps its record (64 bytes, plus 16 per bucketed iov) in this
 * rank's shared heap, the one nexar_alloc() carves (nexard's heap_bytes), and
 * stream-ordered ops keep 8 KiB of done words there once.  With heap_bytes = 0 every
 * device op and nexar_comm_set_stream() return NEXAR_ERR_NOMEM with a text that names
 * heap_bytes; so does a heap that nexar_alloc() buffers fill.
 */

/*
 * Makes device-buffer ops on c stream-ordered on cuda_stream (a cudaStream_t; the
 * legacy and per-thread default streams work too): each such op waits on the GPU for
 * the work queued on the stream before the call, and the work queued after the call
 * waits on the GPU for the op.  The call returns without waiting for the op, as soon as
 * nexard has it (at once, unless the submission ring is full or an earlier op of c is
 * still being staged: then it makes progress until nexard takes it, so that the stream
 * never waits for an op that only a later nexar call would hand over); nexar_wait()
 * (i-forms), nexar_sync() or nexar_comm_stream_synchronize() block until the ops are
 * done and report their status.  A
 * blocking call's failure is reported by the next nexar_sync(c) (and a failure that
 * fails the communicator by every later call); the stream is released either way, with
 * the buffers' contents unspecified.  Host-buffer ops on c stay synchronous.
 * cuda_stream NULL returns c to unordered device ops.  The stream must outlive its use.
 * Returns NEXAR_OK, NEXAR_ERR_INVALID (not a usable stream), NEXAR_ERR_UNSUPPORTED (no
 * CUDA here, no device support in nexard, or a device that cannot wait on memory
 * values).
 */
NEXAR_API nexar_status_t nexar_comm_set_stream(nexar_comm_t *c, void *cuda_stream);

/*
 * Blocks the calling thread until c's communication is done, on the GPU too (numr's
 * StreamSyncOps::sync_comm_stream).  First every op started on c before the call
 * completes, as in nexar_sync(c) (whose requests it frees the same way); then, when c has
 * a stream (nexar_comm_set_stream), all the work queued on that stream before the call
 * has finished, the caller's own kernels there included.  Without a stream it is
 * nexar_sync(c), with or without CUDA.  Other threads may use nexar meanwhile.
 * Returns the first failure among c's ops (as nexar_sync; the stream is still waited
 * for), else NEXAR_OK, or NEXAR_ERR_INVALID (c NULL, no nexar_init(), or a CUDA error on
 * the stream, with its text).
 */
NEXAR_API nexar_status_t nexar_comm_stream_synchronize(nexar_comm_t *c);

/* ---- events (device builds) --------------------------------------------------------
 * Order a communicator's stream against compute streams, like numr's StreamSyncOps: a
 * typical step records an event on the compute stream after a gradient is ready, makes
 * the comm stream wait for it, issues the allreduce, records an event on the comm
 * stream and makes the compute stream wait for that.  Every function returns
 * NEXAR_ERR_UNSUPPORTED without CUDA (see nexar_comm_set_stream), after checking only
 * its out-parameter (nexar_event_create's ev, nexar_event_query's done: NULL is
 * NEXAR_ERR_INVALID); nexar_event_destroy(NULL) is NEXAR_OK everywhere.  With CUDA, a
 * NULL event or communicator, a communicator without a stream, and a CUDA error (the
 * text has it) are NEXAR_ERR_INVALID.
 */
typedef struct nexar_event nexar_event_t;

/* Creates an event in the CUDA context of c's stream (set one first); the caller frees
 * it with nexar_event_destroy().  NEXAR_ERR_NOMEM when out of memory. */
NEXAR_API nexar_status_t nexar_event_create(nexar_comm_t *c, nexar_event_t **ev);
/* Frees ev (NULL is a no-op); pending waits on it are unaffected. */
NEXAR_API nexar_status_t nexar_event_destroy(nexar_event_t *ev);
/* Records ev on a compute stream (a cudaStream_t) of the caller. */
NEXAR_API nexar_status_t nexar_event_record(nexar_event_t *ev, void *cuda_stream);
/* Records ev on c's stream: ev completes when every op issued on c so far is done. */
NEXAR_API nexar_status_t nexar_event_record_comm(nexar_comm_t *c, nexar_event_t *ev);
/* Work queued on cuda_stream after this call waits (on the GPU) for ev. */
NEXAR_API nexar_status_t nexar_stream_wait_event(void *cuda_stream, nexar_event_t *ev);
/* c's next ops wait (on the GPU) for ev. */
NEXAR_API nexar_status_t nexar_comm_wait_event(nexar_comm_t *c, nexar_event_t *ev);
/* Blocks the calling thread until ev has completed. */
NEXAR_API nexar_status_t nexar_event_synchronize(nexar_event_t *ev);
/* *done = 1 when ev has completed, 0 otherwise. */
NEXAR_API nexar_status_t nexar_event_query(nexar_event_t *ev, int *done);

/* ---- arena buffers ---------------------------------------------------------- */

/*
 * Allocates bytes from the shared-memory arena of this rank (64-byte aligned).
 * Collectives on such buffers run in place with no staging copy.  Needs a prior
 * nexar_init().  Returns NEXAR_OK, NEXAR_ERR_INVALID (no init, ptr NULL),
 * NEXAR_ERR_NOMEM (arena exhausted; plain memory still works).
 */
NEXAR_API nexar_status_t nexar_alloc(size_t bytes, void **ptr);
/* Returns an arena buffer; NULL is a no-op; anything else is NEXAR_ERR_INVALID. */
NEXAR_API nexar_status_t nexar_free(void *ptr);

/* ---- collectives --------------------------------------------------------------
 * count is in elements.  count 0 is a legal no-op, still matched across ranks.
 * Buffers must not be NULL when count > 0.  Each blocking call returns when the
 * op has completed on this rank; each nexar_iX returns a request in *req, which
 * the caller completes with nexar_wait() or nexar_test(), or nexar_sync().  The
 * buffers of a nonblocking op belong to the library until it completes.  send and recv
 * of one call do not overlap, except in the in-place forms: reduce with send = recv;
 * all_gather with send = recv + rank * count elements, gather at the root with send =
 * recv + root * count; reduce_scatter with recv = send + rank * count, scatter at the
 * root with recv = send + root * count (all_to_all has none).  Any other overlap is
 * NEXAR_ERR_INVALID, naming the form.
 */

/* In place: buf holds the elementwise reduction over all ranks. */
NEXAR_API nexar_status_t nexar_all_reduce(nexar_comm_t *c, void *buf, size_t count,
                                          nexar_dtype_t dtype, nexar_op_t op);
NEXAR_API nexar_status_t nexar_iall_reduce(nexar_comm_t *c, void *buf, size_t count,
                                           nexar_dtype_t dtype, nexar_op_t op,
                                           nexar_request_t **req);

/* In place: root's buf is copied to every rank's buf. */
NEXAR_API nexar_status_t nexar_broadcast(nexar_comm_t *c, void *buf, size_t count,
                                         nexar_dtype_t dtype, int root);
NEXAR_API nexar_status_t nexar_ibroadcast(nexar_comm_t *c, void *buf, size_t count,
                                          nexar_dtype_t dtype, int root,
                                          nexar_request_t **req);

/* recv (count elements) is significant at root only and may equal send. */
NEXAR_API nexar_status_t nexar_reduce(nexar_comm_t *c, const void *send, void *recv,
                                      size_t count, nexar_dtype_t dtype, nexar_op_t op,
                                      int root);
NEXAR_API nexar_status_t nexar_ireduce(nexar_comm_t *c, const void *send, void *recv,
                                       size_t count, nexar_dtype_t dtype, nexar_op_t op,
                                       int root, nexar_request_t **req);

/* recv holds count * size elements in rank order. */
NEXAR_API nexar_status_t nexar_all_gather(nexar_comm_t *c, const void *send, void *recv,
                                          size_t count, nexar_dtype_t dtype);
NEXAR_API nexar_status_t nexar_iall_gather(nexar_comm_t *c, const void *send, void *recv,
                                           size_t count, nexar_dtype_t dtype,
                                           nexar_request_t **req);

/* send holds count * size elements; rank i receives the reduction of block i. */
NEXAR_API nexar_status_t nexar_reduce_scatter(nexar_comm_t *c, const void *send, void *recv,
                                              size_t count, nexar_dtype_t dtype,
                                              nexar_op_t op);
NEXAR_API nexar_status_t nexar_ireduce_scatter(nexar_comm_t *c, const void *send,
                                               void *recv, size_t count,
                                               nexar_dtype_t dtype, nexar_op_t op,
                                               nexar_request_t **req);

/* Gather: recv (count * size, root only) gets every rank's count elements. */
NEXAR_API nexar_status_t nexar_gather(nexar_comm_t *c, const void *send, void *recv,
                                      size_t count, nexar_dtype_t dtype, int root);
NEXAR_API nexar_status_t nexar_igather(nexar_comm_t *c, const void *send, void *recv,
                                       size_t count, nexar_dtype_t dtype, int root,
                                       nexar_request_t **req);

/* Scatter: block i of root's send (count * size) goes to rank i's recv. */
NEXAR_API nexar_status_t nexar_scatter(nexar_comm_t *c, const void *send, void *recv,
                                       size_t count, nexar_dtype_t dtype, int root);
NEXAR_API nexar_status_t nexar_iscatter(nexar_comm_t *c, const void *send, void *recv,
                                        size_t count, nexar_dtype_t dtype, int root,
                                        nexar_request_t **req);

/* Block j of send (count elements each) goes to rank j; recv block i came from rank i. */
NEXAR_API nexar_status_t nexar_all_to_all(nexar_comm_t *c, const void *send, void *recv,
                                          size_t count, nexar_dtype_t dtype);
NEXAR_API nexar_status_t nexar_iall_to_all(nexar_comm_t *c, const void *send, void *recv,
                                           size_t count, nexar_dtype_t dtype,
                                           nexar_request_t **req);

/* Inclusive prefix reduction in place: rank i gets op over ranks 0..i. */
NEXAR_API nexar_status_t nexar_scan(nexar_comm_t *c, void *buf, size_t count,
                                    nexar_dtype_t dtype, nexar_op_t op);
NEXAR_API nexar_status_t nexar_iscan(nexar_comm_t *c, void *buf, size_t count,
                                     nexar_dtype_t dtype, nexar_op_t op,
                                     nexar_request_t **req);

/* Exclusive prefix in place: rank i gets op over ranks 0..i-1; rank 0 gets the
 * identity of op (0 for SUM, 1 for PROD, the largest value for MIN, the smallest
 * for MAX; +inf / -inf for floating types). */
NEXAR_API nexar_status_t nexar_exscan(nexar_comm_t *c, void *buf, size_t count,
                                      nexar_dtype_t dtype, nexar_op_t op);
NEXAR_API nexar_status_t nexar_iexscan(nexar_comm_t *c, void *buf, size_t count,
                                       nexar_dtype_t dtype, nexar_op_t op,
                                       nexar_request_t **req);

/* One allreduce over the concatenation of n buffers, each reduced in place. */
NEXAR_API nexar_status_t nexar_all_reduce_bucketed(nexar_comm_t *c, const nexar_iov_t *v,
                                                   size_t n, nexar_dtype_t dtype,
                                                   nexar_op_t op);
NEXAR_API nexar_status_t nexar_iall_reduce_bucketed(nexar_comm_t *c, const nexar_iov_t *v,
                                                    size_t n, nexar_dtype_t dtype,
                                                    nexar_op_t op, nexar_request_t **req);

/*
 * Blocks until every rank of c reached it.  It implies nexar_sync(c) (numr's barrier):
 * the requests of c started before the call, by any thread, complete first, and the
 * first failure among them is returned (the barrier itself runs all the same, since
 * the other ranks wait for it).  Their handles are freed as by nexar_sync().
 * nexar_ibarrier() does not wait for earlier requests.
 */
NEXAR_API nexar_status_t nexar_barrier(nexar_comm_t *c);
NEXAR_API nexar_status_t nexar_ibarrier(nexar_comm_t *c, nexar_request_t **req);

/*
 * Point to point, matched by (source, tag) in order.  A send completes once the
 * daemon holds its data (it may buffer it), so a receive of tag 1 completes even
 * when tag 2 was sent first.  A completed send is delivered, as MPI's completed
 * standard send: also when its sender then frees the communicator, finalizes and
 * exits.  A count or dtype that differs between a send and
 * its matching receive is NEXAR_ERR_MISMATCH: the receive (and the send, if it
 * has not completed yet) fails with it, and so does the communicator.
 */
NEXAR_API nexar_status_t nexar_send(nexar_comm_t *c, const void *buf, size_t count,
                                    nexar_dtype_t dtype, int dest, uint32_t tag);
NEXAR_API nexar_status_t nexar_isend(nexar_comm_t *c, const void *buf, size_t count,
                                     nexar_dtype_t dtype, int dest, uint32_t tag,
                                     nexar_request_t **req);
NEXAR_API nexar_status_t nexar_recv(nexar_comm_t *c, void *buf, size_t count,
                                    nexar_dtype_t dtype, int src, uint32_t tag);
NEXAR_API nexar_status_t nexar_irecv(nexar_comm_t *c, void *buf, size_t count,
                                     nexar_dtype_t dtype, int src, uint32_t tag,
                                     nexar_request_t **req);

/* ---- requests ----------------------------------------------------------------- */

/* Completes req and frees it; returns the op's status.  NULL is NEXAR_ERR_INVALID. */
NEXAR_API nexar_status_t nexar_wait(nexar_request_t *req);

/* *done = 1 when req has completed; then it returns the op's status and req is
 * freed.  *done = 0 and NEXAR_OK otherwise.  Makes progress on every request. */
NEXAR_API nexar_status_t nexar_test(nexar_request_t *req, int *done);

/* Completes every request of c started before the call (by any thread); returns the
 * first failure's status among those it completed.  Their handles are freed and must
 * not be used afterwards.  A request another thread is blocked on (a blocking call,
 * nexar_wait) is waited for too, but left to that thread, which gets its status.
 * Requests started while it waits are not covered. */
NEXAR_API nexar_status_t nexar_sync(nexar_comm_t *c);

#ifdef __cplusplus
}
#endif

#endif /* NEXAR_H */
