/*
 * test_gpu_nowait.c - which CUDA runtime calls block the calling CPU thread while another
 * stream of the same process waits on the GPU: one process, no daemon.
 *
 * nexard's loop thread must never wait for GPU work (cuda/exec.c, header comment): GPU
 * work can need the loop thread, so a loop thread that waits for it can wait forever.
 * A real-GPU run showed the loop thread blocked all the same, so this program measures,
 * for each runtime call nexard makes, whether it returns at once or waits for the device,
 * and guards the answer.
 *
 * The busy state is nexard's own: stream A spins SPIN_MS on the GPU and records event
 * evA; stream B (nexard's stream) waits for evA and has a device-to-device copy queued
 * behind it.  In nexard, B waits on a rank's interprocess ready event instead.  Each
 * call is timed alone on this thread, once with nothing queued (the control) and once
 * with the busy state fresh; a call that takes over WAIT_MS waits for the device.  What a
 * call needs (a mapping to close, a block to free) is prepared before the busy state, so
 * that only the call itself is timed.
 *
 * The loop-thread calls must return while busy: a call that waits fails the test.  The
 * deferred calls (cudaIpcCloseMemHandle, cudaFreeHost, cudaFree) are only reported:
 * nexard makes the first two only while it has no work queued on the device
 * (cuda/exec.c), and never the third.  CUDA IPC cannot open
 * handles of its own process, so the buffers and the event to open come from an exporter
 * child, forked before this process touches CUDA (a process that did cannot fork children
 * that use it); the child holds them until this process closes a pipe.
 *
 * Exit status: 0 when every loop-thread call returned while busy, 1 when one waited or on
 * any CUDA error, 77 without a GPU.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_util.h"
#include "harness.h"

#define SPIN_MS 1500
#define WAIT_MS 500
#define MIB ((size_t)1 << 20)
#define NBUF 4 /* the exporter's buffers: rows OPEN_MEM and CLOSE_MEM, idle and busy each */
#define HANDLES_TIMEOUT_S 30

#define CU(call) GX_CU(call, -1)
/* A timed call: remembers its text for the error message. */
#define CALL(call) (c->what = #call, (call))

/* What the exporter sends. */
struct handles {
    cudaIpcMemHandle_t mem[NBUF];
    cudaIpcEventHandle_t ev;
};

enum row {
    OPEN_MEM, OPEN_EVENT, DESTROY_IPC_EVENT, STREAM_CREATE, STREAM_DESTROY, STREAM_QUERY,
    EVENT_RECORD, STREAM_WAIT_EVENT, COPY_D2D, COPY_H2D, MALLOC_ASYNC, HOST_FUNC, HOST_ALLOC,
    FIRST_DEFERRED, CLOSE_MEM = FIRST_DEFERRED, FREE_HOST, FREE, NROWS
};

static const char *const row_name[NROWS] = {
    [OPEN_MEM] = "cudaIpcOpenMemHandle",
    [OPEN_EVENT] = "cudaIpcOpenEventHandle",
    [DESTROY_IPC_EVENT] = "cudaEventDestroy (IPC event)",
    [STREAM_CREATE] = "cudaStreamCreateWithFlags",
    [STREAM_DESTROY] = "cudaStreamDestroy (idle stream)",
    [STREAM_QUERY] = "cudaStreamQuery (stream B)",
    [EVENT_RECORD] = "cudaEventCreateWithFlags + cudaEventRecord",
    [STREAM_WAIT_EVENT] = "cudaStreamWaitEvent",
    [COPY_D2D] = "cudaMemcpyAsync D2D 1 MiB",
    [COPY_H2D] = "cudaMemcpyAsync pinned H2D 1 MiB",
    [MALLOC_ASYNC] = "cudaMallocAsync + cudaFreeAsync",
    [HOST_FUNC] = "cudaLaunchHostFunc",
    [HOST_ALLOC] = "cudaHostAlloc 8 MiB",
    [CLOSE_MEM] = "cudaIpcCloseMemHandle",
    [FREE_HOST] = "cudaFreeHost 8 MiB",
    [FREE] = "cudaFree 1 MiB",
};

struct ctx {
    struct handles h;
    cudaStream_t a, b, c;   /* the spin; nexard's waiting stream; an idle one for rows */
    cudaEvent_t ev_a;
    void *b_src, *b_dst;    /* B's queued copy */
    void *c_src, *c_dst;    /* the rows' copies on C */
    void *pinned;           /* 1 MiB of cudaHostAlloc */
    void *opened[2];        /* row OPEN_MEM's mappings, idle and busy: closed when idle */
    /* one row's things, prepared before it or made by it */
    void *p;
    cudaEvent_t ev;
    cudaStream_t s;
    int busy;
    const char *what;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the exporter child ---------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Exports NBUF buffers and one event through out_fd, then holds them until hold_fd reads
 * end of file: the parent closed it, or died.  Its exit status. */
static int exporter(int out_fd, int hold_fd)
{
    struct handles h;
    memset(&h, 0, sizeof(h));
    CU(cudaSetDevice(0));
    for (int i = 0; i < NBUF; i++) {
        void *d = NULL;
        CU(cudaMalloc(&d, MIB));
        CU(cudaIpcGetMemHandle(&h.mem[i], d));
    }
    cudaEvent_t ev;
    CU(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
    CU(cudaIpcGetEventHandle(&h.ev, ev));
    if (write_all(out_fd, &h, sizeof(h))) {
        tl_log("FAIL exporter: writing the handles: %s", strerror(errno));
        return -1;
    }
    close(out_fd);
    char b;
    ssize_t r;
    while ((r = read(hold_fd, &b, 1)) > 0 || (r < 0 && errno == EINTR)) {
    }
    return 0;
}

/* Reads the exporter's handles within HANDLES_TIMEOUT_S; 0, or -1 having said why. */
static int read_handles(int fd, struct handles *h, pid_t child)
{
    char *p = (char *)h;
    size_t got = 0;
    double deadline = now_ms() + HANDLES_TIMEOUT_S * 1e3;
    while (got < sizeof(*h)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int left = (int)(deadline - now_ms());
        int n = left > 0 ? poll(&pfd, 1, left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {
            tl_log("FAIL: the exporter process (pid %d) sent no handles within %d s", (int)child,
                   HANDLES_TIMEOUT_S);
            return -1;
        }
        ssize_t r = n < 0 ? -1 : read(fd, p + got, sizeof(*h) - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            /* main reaps it and says how it ended. */
            tl_log("FAIL: the exporter process (pid %d) ended before it sent its handles (%s)",
                   (int)child, r < 0 ? strerror(errno) : "end of file");
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* ---- the rows --------------------------------------------------------------------- */

static void nothing(void *arg)
{
    (void)arg;
}

/* What row needs before it is timed (before the busy state: this may wait itself). */
static int prepare(enum row row, struct ctx *c)
{
    switch (row) {
    case DESTROY_IPC_EVENT:
        CU(cudaIpcOpenEventHandle(&c->ev, c->h.ev));
        break;
    case STREAM_DESTROY:
        CU(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
        break;
    case CLOSE_MEM:
        CU(cudaIpcOpenMemHandle(&c->p, c->h.mem[2 + c->busy], cudaIpcMemLazyEnablePeerAccess));
        break;
    case FREE_HOST:
        CU(cudaHostAlloc(&c->p, 8 * MIB, cudaHostAllocPortable));
        break;
    case FREE:
        CU(cudaMalloc(&c->p, MIB));
        break;
    default:
        break;
    }
    /* Stream C idle, so that a row measures only the busy stream B and A. */
    CU(cudaStreamSynchronize(c->c));
    return 0;
}

/* The timed call(s) of row. */
static cudaError_t call(enum row row, struct ctx *c)
{
    cudaError_t e;
    switch (row) {
    case OPEN_MEM:
        return CALL(cudaIpcOpenMemHandle(&c->opened[c->busy], c->h.mem[c->busy],
                                         cudaIpcMemLazyEnablePeerAccess));
    case OPEN_EVENT:
        return CALL(cudaIpcOpenEventHandle(&c->ev, c->h.ev));
    case DESTROY_IPC_EVENT:
        return CALL(cudaEventDestroy(c->ev));
    case STREAM_CREATE:
        return CALL(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
    case STREAM_DESTROY:
        return CALL(cudaStreamDestroy(c->s));
    case STREAM_QUERY:
        e = CALL(cudaStreamQuery(c->b));
        return e == cudaErrorNotReady ? cudaSuccess : e;
    case EVENT_RECORD:
        e = CALL(cudaEventCreateWithFlags(&c->ev, cudaEventDisableTiming));
        return e != cudaSuccess ? e : CALL(cudaEventRecord(c->ev, c->c));
    case STREAM_WAIT_EVENT:
        return CALL(cudaStreamWaitEvent(c->c, c->ev_a, 0));
    case COPY_D2D:
        return CALL(cudaMemcpyAsync(c->c_dst, c->c_src, MIB, cudaMemcpyDeviceToDevice, c->c));
    case COPY_H2D:
        return CALL(cudaMemcpyAsync(c->c_dst, c->pinned, MIB, cudaMemcpyHostToDevice, c->c));
    case MALLOC_ASYNC:
        e = CALL(cudaMallocAsync(&c->p, MIB, c->c));
        return e != cudaSuccess ? e : CALL(cudaFreeAsync(c->p, c->c));
    case HOST_FUNC:
        return CALL(cudaLaunchHostFunc(c->c, nothing, NULL));
    case HOST_ALLOC:
        return CALL(cudaHostAlloc(&c->p, 8 * MIB, cudaHostAllocPortable));
    case CLOSE_MEM:
        return CALL(cudaIpcCloseMemHandle(c->p));
    case FREE_HOST:
        return CALL(cudaFreeHost(c->p));
    case FREE:
        return CALL(cudaFree(c->p));
    case NROWS:
        break;
    }
    return cudaErrorInvalidValue;
}

/* Undoes what row made, once the device is idle again. */
static int undo(enum row row, struct ctx *c)
{
    switch (row) {
    case OPEN_MEM:
        CU(cudaIpcCloseMemHandle(c->opened[c->busy]));
        break;
    case OPEN_EVENT:
    case EVENT_RECORD:
        CU(cudaEventDestroy(c->ev));
        break;
    case STREAM_CREATE:
        CU(cudaStreamDestroy(c->s));
        break;
    case HOST_ALLOC:
        CU(cudaFreeHost(c->p));
        break;
    default:
        break;
    }
    return 0;
}

/* Stream A spins SPIN_MS and records evA; stream B waits for evA, a copy queued behind. */
static int make_busy(struct ctx *c)
{
    if (gx_spin(c->a, SPIN_MS * 1000)) {
        tl_log("FAIL spin kernel: %s", gx_cuda_error());
        return -1;
    }
    CU(cudaEventRecord(c->ev_a, c->a));
    CU(cudaStreamWaitEvent(c->b, c->ev_a, 0));
    CU(cudaMemcpyAsync(c->b_dst, c->b_src, MIB, cudaMemcpyDeviceToDevice, c->b));
    return 0;
}

/* Milliseconds of row's call, idle or busy as c->busy says; -1 on an error. */
static double measure(enum row row, struct ctx *c)
{
    /* The previous busy state over, C idle, then what the row needs, then (maybe) busy. */
    CU(cudaDeviceSynchronize());
    if (prepare(row, c))
        return -1;
    CU(cudaDeviceSynchronize());
    if (c->busy && make_busy(c))
        return -1;
    double t0 = now_ms();
    cudaError_t e = call(row, c);
    double ms = now_ms() - t0;
    if (e != cudaSuccess) {
        tl_log("FAIL %s (%s): %s", c->what, c->busy ? "busy" : "idle", cudaGetErrorString(e));
        return -1;
    }
    if (c->busy && ms < WAIT_MS) {
        /* It returned: valid only if the spin still held A (and so B) when it did. */
        cudaError_t q = cudaEventQuery(c->ev_a);
        if (q == cudaSuccess) {
            tl_log("FAIL: the %d ms spin on stream A was over when %s returned after %.1f ms: "
                   "the busy state did not hold", SPIN_MS, row_name[row], ms);
            return -1;
        }
        if (q != cudaErrorNotReady) {
            tl_log("FAIL cudaEventQuery(evA): %s", cudaGetErrorString(q));
            return -1;
        }
    }
    CU(cudaDeviceSynchronize());
    if (undo(row, c))
        return -1;
    return ms;
}

static int setup(struct ctx *c)
{
    CU(cudaSetDevice(0));
    CU(cudaFree(0));
    CU(cudaStreamCreateWithFlags(&c->a, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&c->b, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&c->c, cudaStreamNonBlocking));
    CU(cudaEventCreateWithFlags(&c->ev_a, cudaEventDisableTiming));
    CU(cudaMalloc(&c->b_src, MIB));
    CU(cudaMalloc(&c->b_dst, MIB));
    CU(cudaMalloc(&c->c_src, MIB));
    CU(cudaMalloc(&c->c_dst, MIB));
    CU(cudaHostAlloc(&c->pinned, MIB, cudaHostAllocPortable));
    CU(cudaMemset(c->b_src, 1, MIB));
    CU(cudaMemset(c->c_src, 2, MIB));
    memset(c->pinned, 3, MIB);
    /* The spin kernel's module loads lazily: load it here, not in a row's busy state. */
    if (gx_spin(c->a, 1)) {
        tl_log("FAIL spin kernel: %s", gx_cuda_error());
        return -1;
    }
    CU(cudaDeviceSynchronize());
    return 0;
}

/* The table; 0 when every loop-thread call returned while busy, 1 otherwise. */
static int run_rows(struct ctx *c)
{
    double idle[NROWS], busy[NROWS];
    for (int r = 0; r < NROWS; r++) {
        c->busy = 0;
        idle[r] = measure((enum row)r, c);
        if (idle[r] < 0)
            return 1;
        c->busy = 1;
        busy[r] = measure((enum row)r, c);
        if (busy[r] < 0)
            return 1;
        int waits = busy[r] > WAIT_MS, deferred = r >= FIRST_DEFERRED;
        tl_log("%-42s  idle %7.1f ms  busy %7.1f ms  %s%s", row_name[r], idle[r], busy[r],
               !waits ? "returns" : deferred ? "waits (nexard defers it)" : "WAITS",
               idle[r] > WAIT_MS ? " (slow when idle too)" : "");
    }
    int bad = 0;
    char deferred_waits[256] = "";
    size_t len = 0;
    for (int r = 0; r < NROWS; r++) {
        if (busy[r] <= WAIT_MS)
            continue;
        if (r < FIRST_DEFERRED) {
            tl_log("FAIL: nexard's loop thread calls %s, which waits for the device while "
                   "another stream waits", row_name[r]);
            bad++;
        } else if (len < sizeof(deferred_waits)) {
            len += (size_t)snprintf(deferred_waits + len, sizeof(deferred_waits) - len, "%s%s",
                                    len ? ", " : "", row_name[r]);
        }
    }
    tl_log("%s: %d of %d loop-thread calls wait for the device while stream B waits behind a "
           "%d ms spin (limit %d ms); deferred calls that wait: %s",
           bad ? "FAIL" : "ok", bad, (int)FIRST_DEFERRED, SPIN_MS, WAIT_MS,
           len ? deferred_waits : "none");
    return bad ? 1 : 0;
}

int main(void)
{
    gx_require_gpu("test_gpu_nowait");
    tl_set_log_tag("gpu-nowait");

    int hfd[2], hold[2];
    if (pipe(hfd) || pipe(hold)) {
        tl_log("FAIL pipe: %s", strerror(errno));
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        tl_log("FAIL fork: %s", strerror(errno));
        return 1;
    }
    if (child == 0) {
        tl_set_log_tag("gpu-nowait exporter");
        close(hfd[0]);
        close(hold[1]);
        _exit(exporter(hfd[1], hold[0]) ? 1 : 0);
    }
    close(hfd[1]);
    close(hold[0]);

    struct ctx c;
    memset(&c, 0, sizeof(c));
    int rc = (read_handles(hfd[0], &c.h, child) || setup(&c)) ? 1 : run_rows(&c);
    close(hfd[0]);

    /* After the rows every mapping of the child's buffers is closed; after a failure this
     * process ends anyway.  Either way the child may go. */
    close(hold[1]);
    int ws = 0;
    char how[64];
    if (hx_wait_pid(child, 30, &ws)) {
        tl_log("FAIL: the exporter process (pid %d) did not exit within 30 s: killed",
               (int)child);
        kill(child, SIGKILL);
        waitpid(child, &ws, 0);
        return 1;
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        tl_log("FAIL: the exporter process ended with %s",
               hx_describe_status(ws, how, sizeof(how)));
        return 1;
    }
    return rc;
}
