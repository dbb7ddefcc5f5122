/*
 * test_exec_logic.c - nexard's running of device ops (cuda/exec.c) against a fake CUDA
 * runtime on host threads (fake_cudart.c), without a GPU.  It tests exec.c's logic, not
 * CUDA: what it queues on which stream, when each rank's part completes, and that the
 * loop thread never blocks on GPU work whose progress needs the loop thread.
 *
 * That last point is the deadlock of issue 15.  In stream-ordered mode a rank's ready
 * event for op k+1 sits on its stream behind a wait on op k's done word, and only the
 * loop thread writes done words (when it takes op k's completion from the host function
 * through uv_async).  So a loop thread that waits for op k+1's stream (on an error, or at
 * shutdown) waits for itself.  Each case below is built that way, with a watchdog that
 * fails the test instead of hanging:
 *
 *   send_error   send k succeeds, send k+1 fails after its wait on the ready event was
 *                queued (cudaMemcpyAsync fails): both complete, k+1 with the error, only
 *                after the work queued on its stream is over
 *   coll_error   the same on a communicator's stream: all_reduce k (2 ranks, checked),
 *                all_reduce k+1 whose reduce kernel fails to launch
 *   host_fn      cudaLaunchHostFunc fails (twice) for an op whose ready event fires only
 *                after a timer of the loop: the op still completes, with the error
 *   no_device    an op whose buffers are not registered: fails at once
 *   deadline     a send whose ready event waits on a word nobody writes (an earlier op on
 *                its rank's stream that waits for it): TIMEOUT at its 1 s deadline, done
 *                words written, the communicator failed once; once released, its work
 *                runs and its mapping goes
 *   close_busy   a mapping closed while a send's work is queued (cudaIpcCloseMemHandle
 *                waits for the device, here as on a GPU): held back until the work ended,
 *                closed at once with nothing queued
 *   stop         nx_cuda_exec_stop with op k done on the GPU but not yet taken by the
 *                loop and op k+1 waiting behind it: the loop runs on and both complete,
 *                and only then is the daemon told (idle) that it may close the ranks
 *   grace        nx_cuda_exec_stop with an op that never finishes: the loop ends after
 *                nx_cuda_stop_grace_ms, the daemon is told then, and the op's late end
 *                touches no closed handle
 *   copy         the staging copies of ops across nodes (nx_cuda_exec_copy): a D2H of two
 *                ranges waits for the rank's ready event, which fires only after a timer
 *                of the loop, and its end is told from the loop with the bytes in place;
 *                an H2D whose cudaMemcpyAsync fails, a copy naming no registration and an
 *                empty copy are told from the loop too, never from within the call
 *   copy_lanes   a communicator's D2H and H2D staging copies run on separate streams: an
 *                H2D queued behind a D2H runs under it, the D2Hs stay in order
 *   gpu_fault    a copy faults on the GPU and breaks its context (no stream runs anything
 *                more, so the host functions behind two queued copies never run): the
 *                watch ends both within a second, with a text naming the op, the device
 *                and the error; a copy queued afterwards fails as it is queued; the copy
 *                done before the fault is untouched
 *
 *   test_exec_logic [CASE...]   runs the named cases only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "adapter.h"
#include "cuda_int.h"
#include "fake_cudart.h"
#include "nexar.h"
#include "registry.h"

/* ---- the watchdog ------------------------------------------------------------------------ */

static volatile int g_progress; /* bumped whenever the loop thread does something */

static void *watchdog(void *arg)
{
    (void)arg;
    int last = -1, still = 0;
    for (;;) {
        sleep(1);
        if (g_progress != last) {
            last = g_progress;
            still = 0;
        } else if (++still >= 10) {
            fprintf(stderr,
                    "FAIL case %s: deadlock: the loop thread has been blocked for 10 s (in a "
                    "CUDA wait for GPU work that needs the loop thread to write a done word)\n",
                    fk_case);
            _exit(1);
        }
    }
    return NULL;
}

/* ---- the daemon's side: clients, registrations, completions -------------------------------- */

static uv_loop_t *loop;
const struct nx_device_host *nx_cuda_host;
static struct nx_dev_client clients[2] = {{.id = 1}, {.id = 2}};
static int closes; /* registrations closed */

static void close_reg(struct nx_reg *r)
{
    (void)r;
    closes++;
}

static struct nx_dev_client *host_client(uint32_t id)
{
    return id >= 1 && id <= 2 ? &clients[id - 1] : NULL;
}

struct nx_reg *nx_cuda_reg_mem(uint32_t client_id, uint32_t id)
{
    struct nx_dev_client *dc = host_client(client_id);
    return dc && dc->state ? nx_regtab_get(dc->state, id, NX_DEV_MEMORY) : NULL;
}

struct nx_reg *nx_cuda_reg_event(uint32_t client_id, uint32_t id)
{
    struct nx_dev_client *dc = host_client(client_id);
    return dc && dc->state ? nx_regtab_get(dc->state, id, NX_DEV_EVENT) : NULL;
}

static uint32_t reg(uint32_t client, int kind, void *handle, uint64_t size)
{
    struct nx_dev_client *dc = host_client(client);
    if (!dc->state)
        dc->state = nx_regtab_new(close_reg);
    return nx_regtab_add(dc->state, kind, 0, handle, size)->id;
}

/* The done words of the ranks' segments: done_off / 8 indexes it. */
static uint64_t words[32];

struct done {
    uint64_t user_data;
    uint32_t status;
    char text[400];
    cudaEvent_t watch; /* the rank's ready event: had it fired when the part completed? */
    bool watch_done;
};
static struct done dones[64];
static int ndone, want_done;
static cudaEvent_t watch_for[64]; /* by user_data */

static void part_done(const struct nx_dev_part *p, uint32_t status, const char *text)
{
    struct done *d = &dones[ndone++];
    d->user_data = p->user_data;
    d->status = status;
    snprintf(d->text, sizeof(d->text), "%s", text ? text : "");
    d->watch = watch_for[p->user_data % 64];
    d->watch_done = d->watch ? fk_event_done(d->watch) : true;
    if (p->rec.done_off != NX_DEV_NO_DONE)
        __atomic_store_n(&words[p->rec.done_off / 8], p->rec.done_value, __ATOMIC_RELEASE);
    g_progress++;
    if (want_done && ndone >= want_done)
        uv_stop(loop);
}

static void flush(void)
{
    g_progress++;
}

static int comm_fails;
static uint32_t comm_failed_id, comm_failed_status;

static void comm_fail(uint32_t comm_id, uint32_t status, const char *text)
{
    (void)text;
    comm_fails++;
    comm_failed_id = comm_id;
    comm_failed_status = status;
}

static const struct nx_device_host host = {
    .part_done = part_done, .comm_fail = comm_fail, .flush = flush, .client = host_client};

static const struct done *done_of(uint64_t user_data)
{
    for (int i = 0; i < ndone; i++)
        if (dones[i].user_data == user_data)
            return &dones[i];
    return NULL;
}

/* ---- the adapter: the CPU kernels, queued on the bound stream ------------------------------ */

static __thread void *bound;
static int fail_kernels; /* the next n launches fail */

static void *use_stream(void *s)
{
    void *prev = bound;
    bound = s;
    return prev;
}

struct fanout {
    void *dsts[8];
    const void *srcs[8];
    size_t ndst, nsrc, n;
    uint8_t dtype, op;
};

static void run_fanout(void *arg)
{
    struct fanout *f = arg;
    nx_adapter_cpu.reduce_fanout(f->dsts, f->ndst, f->srcs, f->nsrc, f->n, f->dtype, f->op);
}

static int fk_reduce_fanout(void *const *dsts, size_t ndst, const void *const *srcs, size_t nsrc,
                            size_t n, uint8_t dtype, uint8_t op)
{
    if (fail_kernels > 0) {
        fail_kernels--;
        nx_cuda_note_error("reduce kernel launch", cudaErrorLaunchFailure, __FILE__, __LINE__);
        return -EIO;
    }
    if (!bound || ndst > 8 || nsrc > 8)
        return -EINVAL;
    struct fanout *f = calloc(1, sizeof(*f));
    *f = (struct fanout){.ndst = ndst, .nsrc = nsrc, .n = n, .dtype = dtype, .op = op};
    memcpy(f->dsts, dsts, ndst * sizeof(*dsts));
    memcpy(f->srcs, srcs, nsrc * sizeof(*srcs));
    fk_call(bound, run_fanout, f);
    return 0;
}

static int fk_receive(void *dst, const void *src, size_t bytes)
{
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, bound) == cudaSuccess ? 0 : -EIO;
}

const struct nx_adapter nx_adapter_cuda = {
    .name = "fake-cuda",
    .reduce_fanout = fk_reduce_fanout,
    .receive_to_device = fk_receive,
    .use_stream = use_stream,
};

/* ---- jobs ---------------------------------------------------------------------------------- */

/* What a rank's shim does at call time on its stream: record the ready event, then (the
 * op being stream-ordered) make the stream wait for the op's done word. */
static void shim_call(cudaStream_t user, cudaEvent_t ready, unsigned word, uint64_t value)
{
    cudaEventRecord(ready, user);
    fk_wait_value(user, &words[word], value);
}

static struct nx_dev_part part(uint32_t client, uint64_t ud, uint32_t in, uint32_t out,
                               uint32_t ev, unsigned word, uint64_t value)
{
    struct nx_dev_part p = {.client_id = client, .user_data = ud};
    p.rec = (struct nx_dev_op){.magic = NX_DEV_OP_MAGIC, .in = {.mem = in}, .out = {.mem = out},
                               .ready_event = ev,
                               .done_off = value ? word * 8ull : NX_DEV_NO_DONE,
                               .done_value = value};
    return p;
}

static void run_loop(int want, const char *what)
{
    fk_case = what;
    want_done = want;
    if (ndone < want)
        uv_run(loop, UV_RUN_DEFAULT);
    want_done = 0;
}

/* Each case queues its ops from a callback of the loop, as the matcher does. */
typedef void (*case_fn)(void);
static case_fn g_start;

static void on_start(uv_timer_t *t)
{
    (void)t;
    g_progress++;
    g_start();
}

static uv_timer_t start_timer;

static void start(case_fn fn)
{
    g_start = fn;
    uv_timer_start(&start_timer, on_start, 0, 0);
}

/* ---- send_error ------------------------------------------------------------------------------ */

static uint8_t a_src[4096], a_dst[4096];
static struct nx_dev_job job_k, job_k1;
static struct nx_dev_part parts_k[2], parts_k1[2];

static void send_error_start(void)
{
    nx_cuda_exec_run(&job_k);
    fk_fail.memcpy_async = 1; /* job k+1's copy fails after its event wait was queued */
    nx_cuda_exec_run(&job_k1);
}

static void case_send_error(void)
{
    cudaStream_t user;
    cudaEvent_t ev1, ev2;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev1, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming);
    for (size_t i = 0; i < sizeof(a_src); i++)
        a_src[i] = (uint8_t)(i * 7);
    uint32_t src = reg(1, NX_DEV_MEMORY, a_src, sizeof(a_src));
    uint32_t dst = reg(2, NX_DEV_MEMORY, a_dst, sizeof(a_dst));
    uint32_t e1 = reg(1, NX_DEV_EVENT, ev1, 0), e2 = reg(1, NX_DEV_EVENT, ev2, 0);
    shim_call(user, ev1, 0, 1);
    shim_call(user, ev2, 1, 2); /* ev2 fires only once word 0 is set: by the loop */
    watch_for[11] = ev1;
    watch_for[21] = ev2;
    parts_k[0] = part(1, 11, src, 0, e1, 0, 1);
    parts_k[1] = part(2, 12, 0, dst, 0, 0, 0);
    parts_k1[0] = part(1, 21, src, 0, e2, 1, 2);
    parts_k1[1] = part(2, 22, 0, dst, 0, 0, 0);
    job_k = (struct nx_dev_job){.comm_id = 1, .seq = 1, .kind = NX_K_SEND, .dtype = NEXAR_U8,
                                .size = 2, .count = sizeof(a_src), .parts = parts_k,
                                .what = "send seq 1 on comm 1"};
    job_k1 = job_k;
    job_k1.seq = 2;
    job_k1.parts = parts_k1;
    job_k1.what = "send seq 2 on comm 1";
    start(send_error_start);
    run_loop(4, "send_error");
    const struct done *k = done_of(11), *k1 = done_of(21);
    FK_EXPECT(k && k->status == NEXAR_OK && done_of(12) && done_of(12)->status == NEXAR_OK,
           "send k: %s", k ? k->text : "not completed");
    FK_EXPECT(memcmp(a_src, a_dst, sizeof(a_src)) == 0, "send k did not copy the data");
    FK_EXPECT(k1 && k1->status == NEXAR_ERR_INTERNAL && strstr(k1->text, "cudaMemcpyAsync"),
           "send k+1: status %u, \"%s\"", k1 ? k1->status : 0, k1 ? k1->text : "");
    FK_EXPECT(k1 && k1->watch_done,
           "send k+1 completed before the work queued on its stream (the wait for its ready "
           "event) was over");
    FK_EXPECT(words[0] == 1 && words[1] == 2, "done words %llu %llu, expected 1 2",
           (unsigned long long)words[0], (unsigned long long)words[1]);
    if (k1)
        printf("send_error: ok (send k+1: %s)\n", k1->text);
}

/* ---- coll_error --------------------------------------------------------------------------- */

#define NCOLL 256
static float c_buf[2][NCOLL];
static struct nx_dev_job coll_k, coll_k1;
static struct nx_dev_part cparts_k[2], cparts_k1[2];

static void coll_error_start(void)
{
    nx_cuda_exec_run(&coll_k);
    fail_kernels = 1;
    nx_cuda_exec_run(&coll_k1);
}

static void case_coll_error(void)
{
    cudaStream_t user;
    cudaEvent_t ev1, ev2;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev1, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < NCOLL; i++)
            c_buf[r][i] = (float)(i + 1000 * r);
    uint32_t m0 = reg(1, NX_DEV_MEMORY, c_buf[0], sizeof(c_buf[0]));
    uint32_t m1 = reg(2, NX_DEV_MEMORY, c_buf[1], sizeof(c_buf[1]));
    uint32_t e1 = reg(1, NX_DEV_EVENT, ev1, 0), e2 = reg(1, NX_DEV_EVENT, ev2, 0);
    shim_call(user, ev1, 4, 5);
    shim_call(user, ev2, 5, 6);
    watch_for[31] = ev1;
    watch_for[41] = ev2;
    cparts_k[0] = part(1, 31, m0, m0, e1, 4, 5);
    cparts_k[1] = part(2, 32, m1, m1, 0, 0, 0);
    cparts_k1[0] = part(1, 41, m0, m0, e2, 5, 6);
    cparts_k1[1] = part(2, 42, m1, m1, 0, 0, 0);
    coll_k = (struct nx_dev_job){.comm_id = 7, .seq = 1, .kind = NX_K_ALL_REDUCE,
                                 .dtype = NEXAR_F32, .redop = NEXAR_SUM, .size = 2,
                                 .count = NCOLL, .parts = cparts_k,
                                 .what = "all_reduce seq 1 on comm 7"};
    coll_k1 = coll_k;
    coll_k1.seq = 2;
    coll_k1.parts = cparts_k1;
    coll_k1.what = "all_reduce seq 2 on comm 7";
    int before = ndone;
    start(coll_error_start);
    run_loop(before + 4, "coll_error");
    const struct done *k = done_of(31), *k1 = done_of(41);
    FK_EXPECT(k && k->status == NEXAR_OK, "all_reduce k: %s", k ? k->text : "not completed");
    bool exact = true;
    for (int i = 0; i < NCOLL; i++)
        exact &= c_buf[0][i] == (float)(2 * i + 1000) && c_buf[1][i] == (float)(2 * i + 1000);
    FK_EXPECT(exact, "all_reduce k: wrong sums");
    FK_EXPECT(k1 && k1->status == NEXAR_ERR_INTERNAL && strstr(k1->text, "reduce kernel"),
           "all_reduce k+1: status %u, \"%s\"", k1 ? k1->status : 0, k1 ? k1->text : "");
    FK_EXPECT(k1 && k1->watch_done, "all_reduce k+1 completed before its stream's work was over");
    FK_EXPECT(done_of(42) && done_of(42)->status == NEXAR_ERR_INTERNAL,
           "all_reduce k+1: the other rank's part");
    FK_EXPECT(words[4] == 5 && words[5] == 6, "done words %llu %llu, expected 5 6",
           (unsigned long long)words[4], (unsigned long long)words[5]);
    if (k1)
        printf("coll_error: ok (all_reduce k+1: %s)\n", k1->text);
}

/* ---- host_fn -------------------------------------------------------------------------------- */

static uint8_t h_src[256], h_dst[256];
static struct nx_dev_job job_h;
static struct nx_dev_part parts_h[2];
static uv_timer_t release_timer;

static void on_release(uv_timer_t *t)
{
    (void)t;
    g_progress++;
    __atomic_store_n(&words[8], 1, __ATOMIC_RELEASE); /* lets the ready event fire */
}

static void host_fn_start(void)
{
    fk_fail.launch_host_func = 2; /* the op's and the error path's */
    nx_cuda_exec_run(&job_h);
    uv_timer_start(&release_timer, on_release, 50, 0);
}

static void case_host_fn(void)
{
    cudaStream_t user;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    uint32_t src = reg(1, NX_DEV_MEMORY, h_src, sizeof(h_src));
    uint32_t dst = reg(2, NX_DEV_MEMORY, h_dst, sizeof(h_dst));
    uint32_t e = reg(1, NX_DEV_EVENT, ev, 0);
    fk_wait_value(user, &words[8], 1); /* the loop's timer sets word 8 */
    shim_call(user, ev, 9, 1);
    watch_for[51] = ev;
    parts_h[0] = part(1, 51, src, 0, e, 9, 1);
    parts_h[1] = part(2, 52, 0, dst, 0, 0, 0);
    job_h = (struct nx_dev_job){.comm_id = 1, .seq = 3, .kind = NX_K_SEND, .dtype = NEXAR_U8,
                                .size = 2, .count = sizeof(h_src), .parts = parts_h,
                                .what = "send seq 3 on comm 1"};
    int before = ndone;
    start(host_fn_start);
    run_loop(before + 2, "host_fn");
    const struct done *d = done_of(51);
    FK_EXPECT(d && d->status == NEXAR_ERR_INTERNAL && strstr(d->text, "cudaLaunchHostFunc"),
           "send with no host function: status %u, \"%s\"", d ? d->status : 0, d ? d->text : "");
    FK_EXPECT(d && d->watch_done, "completed before the work queued on its stream was over");
    FK_EXPECT(words[9] == 1, "done word not set");
    if (d)
        printf("host_fn: ok (%s)\n", d->text);
}

/* ---- deadline -------------------------------------------------------------------------------- */

/* A send whose rank's stream records the ready event only after a word nobody writes
 * (an earlier stream-ordered op there that waits for this one): it must fail with
 * TIMEOUT at its deadline, with the done words written so that the rank's stream goes
 * on, and keep its mappings until its work, released then, has run. */
static uint8_t d_src[512], d_dst[512];
static struct nx_dev_job job_d;
static struct nx_dev_part parts_d[2];
static double d_t0;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void deadline_start(void)
{
    d_t0 = now_s();
    nx_cuda_exec_run(&job_d);
}

static void case_deadline(void)
{
    fk_reset();
    cudaStream_t user;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    for (size_t i = 0; i < sizeof(d_src); i++)
        d_src[i] = (uint8_t)(i * 13 + 1);
    uint32_t src = reg(1, NX_DEV_MEMORY, d_src, sizeof(d_src));
    uint32_t dst = reg(2, NX_DEV_MEMORY, d_dst, sizeof(d_dst));
    uint32_t e = reg(1, NX_DEV_EVENT, ev, 0);
    fk_wait_value(user, &words[25], 1); /* the earlier op's done word: only the test sets it */
    shim_call(user, ev, 26, 1);
    parts_d[0] = part(1, 101, src, 0, e, 26, 1);
    parts_d[1] = part(2, 102, 0, dst, 0, 27, 1);
    job_d = (struct nx_dev_job){.comm_id = 1, .seq = 4, .kind = NX_K_SEND, .dtype = NEXAR_U8,
                                .size = 2, .count = sizeof(d_src), .parts = parts_d,
                                .what = "send seq 4 on comm 1", .timeout_ms = 1000};
    int before = ndone;
    start(deadline_start);
    run_loop(before + 2, "deadline");
    double took = now_s() - d_t0;
    const struct done *a = done_of(101), *b = done_of(102);
    FK_EXPECT(a && b && a->status == NEXAR_ERR_TIMEOUT && b->status == NEXAR_ERR_TIMEOUT,
              "statuses %u %u, expected TIMEOUT", a ? a->status : 0, b ? b->status : 0);
    FK_EXPECT(a && strstr(a->text, "send seq 4 on comm 1 on device 0: its GPU work did not "
                                   "end within 1 s") && strstr(a->text, "ready events"),
              "text \"%s\"", a ? a->text : "");
    FK_EXPECT(took >= 0.95 && took < 3.0, "told after %.2f s, deadline 1 s", took);
    FK_EXPECT(comm_fails == 1 && comm_failed_id == 1 && comm_failed_status == NEXAR_ERR_TIMEOUT,
              "the communicator was failed %d times (comm %u, status %u), expected once: comm 1, "
              "TIMEOUT", comm_fails, comm_failed_id, comm_failed_status);
    FK_EXPECT(words[26] == 1 && words[27] == 1, "done words %llu %llu, expected 1 1",
              (unsigned long long)words[26], (unsigned long long)words[27]);
    FK_EXPECT(!nx_cuda_exec_idle(), "the timed-out op's work is still queued");

    /* The earlier op ends: the ready event fires, the copy runs, the ticket goes. */
    __atomic_store_n(&words[25], 1, __ATOMIC_RELEASE);
    struct nx_reg *r = nx_cuda_reg_mem(1, src);
    for (double t = now_s(); r && r->refs && now_s() - t < 5;) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    FK_EXPECT(r && r->refs == 0, "the timed-out op still holds its mapping after its work ran");
    FK_EXPECT(memcmp(d_src, d_dst, sizeof(d_src)) == 0, "the released work did not run");
    FK_EXPECT(nx_cuda_exec_idle(), "work still counted after the op's end");
    FK_EXPECT(ndone == before + 2, "parts told again when the work ended (%d)", ndone - before);
    if (a)
        printf("deadline: ok (told after %.2f s: %s)\n", took, a->text);
}

/* ---- close_busy ------------------------------------------------------------------------------ */

/* Closing a mapping waits for the device's work on a GPU, and that work may wait for a
 * done word only the loop writes: nx_cuda_exec_close_mem must return at once, close
 * after the work ended, and close at once when nothing is queued. */
static uint8_t c_src[256], c_dst[256], c_map[2];
static struct nx_dev_job job_c;
static struct nx_dev_part parts_c[2];
static uv_timer_t release_c;
static int c_closes0, c_closes_after_call;
static double c_call_s;

static void on_release_c(uv_timer_t *t)
{
    (void)t;
    g_progress++;
    __atomic_store_n(&words[28], 1, __ATOMIC_RELEASE);
}

static void close_busy_start(void)
{
    nx_cuda_exec_run(&job_c);
    c_closes0 = fk_ipc_closes();
    double t0 = now_s();
    nx_cuda_exec_close_mem(0, &c_map[0]);
    c_call_s = now_s() - t0;
    c_closes_after_call = fk_ipc_closes();
    uv_timer_start(&release_c, on_release_c, 100, 0);
}

static void case_close_busy(void)
{
    fk_reset();
    cudaStream_t user;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    uint32_t src = reg(1, NX_DEV_MEMORY, c_src, sizeof(c_src));
    uint32_t dst = reg(2, NX_DEV_MEMORY, c_dst, sizeof(c_dst));
    uint32_t e = reg(1, NX_DEV_EVENT, ev, 0);
    fk_wait_value(user, &words[28], 1); /* the loop's timer sets it */
    shim_call(user, ev, 29, 1);
    parts_c[0] = part(1, 111, src, 0, e, 29, 1);
    parts_c[1] = part(2, 112, 0, dst, 0, 0, 0);
    job_c = (struct nx_dev_job){.comm_id = 1, .seq = 5, .kind = NX_K_SEND, .dtype = NEXAR_U8,
                                .size = 2, .count = sizeof(c_src), .parts = parts_c,
                                .what = "send seq 5 on comm 1"};
    uv_timer_init(loop, &release_c);
    int before = ndone;
    start(close_busy_start);
    run_loop(before + 2, "close_busy");
    const struct done *a = done_of(111);
    FK_EXPECT(a && a->status == NEXAR_OK, "the send: %s", a ? a->text : "not completed");
    FK_EXPECT(c_call_s < 0.1 && c_closes_after_call == c_closes0,
              "the close ran (%d) or waited (%.3f s) with work queued", c_closes_after_call -
              c_closes0, c_call_s);
    FK_EXPECT(fk_ipc_closes() == c_closes0 + 1, "%d closes after the work ended, expected 1",
              fk_ipc_closes() - c_closes0);
    nx_cuda_exec_close_mem(0, &c_map[1]);
    FK_EXPECT(fk_ipc_closes() == c_closes0 + 2, "a close with nothing queued was held back");
    uv_close((uv_handle_t *)&release_c, NULL);
    printf("close_busy: ok (returned in %.1f ms with work queued; closed once it ended)\n",
           c_call_s * 1e3);
}

/* ---- copy ----------------------------------------------------------------------------------- */

struct copied {
    int calls;
    bool in_call; /* set around nx_cuda_exec_copy: a call from within it is a bug */
    bool from_within;
    uint32_t status;
    char text[400];
    bool event_done; /* the ready event had fired when the end was told */
};

static struct copied cp[4];
static uint8_t x_dev[512], x_host[512], x_back[512];
static uint32_t x_mem, x_ev;
static cudaEvent_t x_event;

static void copy_done(void *arg, uint32_t status, const char *text)
{
    struct copied *c = arg;
    c->calls++;
    c->from_within |= c->in_call;
    c->status = status;
    snprintf(c->text, sizeof(c->text), "%s", text ? text : "");
    c->event_done = fk_event_done(x_event);
    g_progress++;
    if (cp[0].calls && cp[1].calls && cp[2].calls && cp[3].calls)
        uv_stop(loop);
}

static void copy_one(struct copied *c, const struct nx_dev_copy *v, size_t n, int dir)
{
    c->in_call = true;
    nx_cuda_exec_copy(7, v, n, dir, "all_reduce seq 9 on comm 7", copy_done, c);
    c->in_call = false;
}

static void copy_start(void)
{
    /* D2H of two ranges, behind the rank's ready event (it fires after the timer) */
    struct nx_dev_copy in[2] = {
        {.client_id = 1, .mem = x_mem, .off = 0, .bytes = 200, .wait_event = x_ev,
         .host = x_host},
        {.client_id = 1, .mem = x_mem, .off = 300, .bytes = 212, .host = x_host + 200}};
    copy_one(&cp[0], in, 2, NX_DEV_D2H);
    uv_timer_start(&release_timer, on_release, 50, 0);
    struct nx_dev_copy out = {.client_id = 1, .mem = x_mem, .off = 0, .bytes = 64,
                              .host = x_back};
    fk_fail.memcpy_async = 1;
    copy_one(&cp[1], &out, 1, NX_DEV_H2D);
    struct nx_dev_copy none = {.client_id = 1, .mem = 999, .bytes = 8, .host = x_back};
    copy_one(&cp[2], &none, 1, NX_DEV_D2H);
    copy_one(&cp[3], NULL, 0, NX_DEV_H2D);
}

static void case_copy(void)
{
    cudaStream_t user;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&x_event, cudaEventDisableTiming);
    for (size_t i = 0; i < sizeof(x_dev); i++)
        x_dev[i] = (uint8_t)(i * 13 + 5);
    fk_fail = (struct fk_fail){0}; /* what earlier cases left armed */
    x_mem = reg(1, NX_DEV_MEMORY, x_dev, sizeof(x_dev));
    x_ev = reg(1, NX_DEV_EVENT, x_event, 0);
    __atomic_store_n(&words[8], 0, __ATOMIC_RELEASE);
    fk_wait_value(user, &words[8], 1); /* the loop's timer sets word 8 */
    cudaEventRecord(x_event, user);
    start(copy_start);
    fk_case = "copy";
    uv_run(loop, UV_RUN_DEFAULT);
    for (int i = 0; i < 4; i++)
        FK_EXPECT(cp[i].calls == 1 && !cp[i].from_within, "copy %d: told %d times%s", i,
               cp[i].calls, cp[i].from_within ? ", from within nx_cuda_exec_copy" : "");
    FK_EXPECT(cp[0].status == NEXAR_OK && cp[0].event_done,
           "D2H: status %u \"%s\", ready event %s when told", cp[0].status, cp[0].text,
           cp[0].event_done ? "fired" : "not fired");
    FK_EXPECT(memcmp(x_host, x_dev, 200) == 0 && memcmp(x_host + 200, x_dev + 300, 212) == 0,
           "D2H: the host bytes differ from the device ranges");
    FK_EXPECT(cp[1].status == NEXAR_ERR_INTERNAL && strstr(cp[1].text, "cudaMemcpyAsync") &&
               strstr(cp[1].text, "all_reduce seq 9 on comm 7"),
           "failed H2D: status %u \"%s\"", cp[1].status, cp[1].text);
    FK_EXPECT(cp[2].status == NEXAR_ERR_INTERNAL && strstr(cp[2].text, "registration"),
           "unknown registration: status %u \"%s\"", cp[2].status, cp[2].text);
    FK_EXPECT(cp[3].status == NEXAR_OK, "empty copy: status %u \"%s\"", cp[3].status,
           cp[3].text);
    if (!fk_failures)
        printf("copy: ok (failed H2D: %s; unknown registration: %s)\n", cp[1].text, cp[2].text);
}

/* ---- copy_lanes ------------------------------------------------------------------------------ */

static struct copied lanes[3];
static uint8_t l_dev[3][256], l_host[3][256];

static void lanes_done(void *arg, uint32_t status, const char *text)
{
    struct copied *c = arg;
    c->calls++;
    c->status = status;
    snprintf(c->text, sizeof(c->text), "%s", text ? text : "");
    g_progress++;
    if (lanes[0].calls && lanes[1].calls && lanes[2].calls)
        uv_stop(loop);
}

static uint32_t l_mem[3];

static void lanes_start(void)
{
    /* part 2's D2H, part 0's H2D (its result back), part 3's D2H: what devstage queues
     * while parts move through the network */
    static const int dir[3] = {NX_DEV_D2H, NX_DEV_H2D, NX_DEV_D2H};
    for (int i = 0; i < 3; i++) {
        struct nx_dev_copy v = {.client_id = 1, .mem = l_mem[i], .bytes = 256,
                                .host = l_host[i]};
        nx_cuda_exec_copy(8, &v, 1, dir[i], "all_reduce seq 3 on comm 8", lanes_done,
                          &lanes[i]);
    }
}

/* D2H and H2D copies of one communicator run on separate streams, so that the copy
 * engines move both directions at once (D2H of part i+1 under H2D of part i-1), while
 * each direction keeps its order. */
static void case_copy_lanes(void)
{
    fk_reset();
    for (int i = 0; i < 3; i++) {
        memset(l_dev[i], 0x10 + i, sizeof(l_dev[i]));
        memset(l_host[i], 0x70 + i, sizeof(l_host[i]));
        l_mem[i] = reg(1, NX_DEV_MEMORY, l_dev[i], sizeof(l_dev[i]));
    }
    fk_set_copy_delay(cudaMemcpyDefault, 150000);
    start(lanes_start);
    fk_case = "copy_lanes";
    uv_run(loop, UV_RUN_DEFAULT);
    fk_set_copy_delay(cudaMemcpyDefault, 0);
    struct fk_copy log[8];
    int n = fk_copies(log, 8);
    for (int i = 0; i < 3; i++)
        FK_EXPECT(lanes[i].calls == 1 && lanes[i].status == NEXAR_OK,
                  "copy %d: told %d times, status %u \"%s\"", i, lanes[i].calls,
                  lanes[i].status, lanes[i].text);
    FK_EXPECT(memcmp(l_host[0], l_dev[0], 256) == 0 && memcmp(l_dev[1], l_host[1], 256) == 0 &&
                  memcmp(l_host[2], l_dev[2], 256) == 0,
              "the bytes did not arrive");
    FK_EXPECT(n == 3, "%d copies logged, not 3", n);
    if (n != 3)
        return;
    FK_EXPECT(log[1].t_start < log[0].t_end,
              "the H2D started %.0f ms after the D2H queued before it ended: both directions "
              "share one stream", (log[1].t_start - log[0].t_end) * 1e3);
    FK_EXPECT(log[2].t_start >= log[0].t_end,
              "the second D2H started %.0f ms before the first one ended",
              (log[0].t_end - log[2].t_start) * 1e3);
    if (!fk_failures)
        printf("copy_lanes: ok (H2D under the D2H for %.0f ms; D2Hs in order)\n",
               (log[0].t_end - log[1].t_start) * 1e3);
}

/* ---- gpu_fault ------------------------------------------------------------------------------- */

/* A: before the fault; B and C: queued when it happens; D: queued after it. */
static struct copied faults[4];
static uint8_t f_dev[4][128], f_host[4][128];
static uint32_t f_mem[4];
static double f_armed, f_told[4];

static void fault_copy(int i, uint32_t comm, const char *what);

static void fault_done(void *arg, uint32_t status, const char *text)
{
    struct copied *c = arg;
    int i = (int)(c - faults);
    c->calls++;
    c->status = status;
    snprintf(c->text, sizeof(c->text), "%s", text ? text : "");
    f_told[i] = uv_hrtime() / 1e9;
    g_progress++;
    if (i == 0) {
        /* the next copy to run faults and breaks the context, with B and C queued.  One
         * stream (one comm) for both: on two, C ran beside B and could end before B's
         * fault broke the context (seen under ASan: C told OK). */
        fk_fail.copy_fault = 1;
        f_armed = uv_hrtime() / 1e9;
        fault_copy(1, 9, "all_reduce seq 5 on comm 9");
        fault_copy(2, 9, "broadcast seq 6 on comm 9");
    } else if (i == 1) {
        fault_copy(3, 12, "all_gather seq 1 on comm 12");
    }
    if (faults[0].calls && faults[1].calls && faults[2].calls && faults[3].calls)
        uv_stop(loop);
}

static void fault_copy(int i, uint32_t comm, const char *what)
{
    struct nx_dev_copy v = {.client_id = 1, .mem = f_mem[i], .bytes = 128, .host = f_host[i]};
    nx_cuda_exec_copy(comm, &v, 1, NX_DEV_D2H, what, fault_done, &faults[i]);
}

static void fault_start(void)
{
    fault_copy(0, 10, "broadcast seq 1 on comm 10");
}

/* A GPU that faults with copies queued: the host functions behind them never run, and
 * without the watch those ops would never end.  They end with a text that says why,
 * within the watch's period; a copy queued afterwards fails when it is queued; a copy
 * done before is untouched. */
static void case_gpu_fault(void)
{
    fk_reset();
    for (int i = 0; i < 4; i++) {
        memset(f_dev[i], 0x30 + i, sizeof(f_dev[i]));
        f_mem[i] = reg(1, NX_DEV_MEMORY, f_dev[i], sizeof(f_dev[i]));
    }
    fk_set_copy_delay(cudaMemcpyDefault, 100000); /* B and C are queued before it faults */
    start(fault_start);
    fk_case = "gpu_fault";
    uv_run(loop, UV_RUN_DEFAULT);
    FK_EXPECT(faults[0].calls == 1 && faults[0].status == NEXAR_OK &&
                  memcmp(f_host[0], f_dev[0], 128) == 0,
              "the copy before the fault: told %d times, status %u \"%s\"", faults[0].calls,
              faults[0].status, faults[0].text);
    static const char *const what[] = {NULL, "all_reduce seq 5 on comm 9 on device 0",
                                       "broadcast seq 6 on comm 9 on device 0"};
    for (int i = 1; i <= 2; i++) {
        FK_EXPECT(faults[i].calls == 1 && faults[i].status == NEXAR_ERR_INTERNAL &&
                      strstr(faults[i].text, what[i]) &&
                      strstr(faults[i].text, "the GPU failed") &&
                      strstr(faults[i].text, cudaGetErrorString(cudaErrorIllegalAddress)),
                  "queued at the fault: told %d times, status %u \"%s\"", faults[i].calls,
                  faults[i].status, faults[i].text);
        FK_EXPECT(f_told[i] - f_armed < 1.0, "a copy queued at the fault was told after %.2f "
                  "s (the watch looks every 0.2 s)", f_told[i] - f_armed);
    }
    FK_EXPECT(faults[3].calls == 1 && faults[3].status == NEXAR_ERR_INTERNAL &&
                  strstr(faults[3].text, "all_gather seq 1 on comm 12") &&
                  strstr(faults[3].text, "cudaMemcpyAsync"),
              "queued after the fault: told %d times, status %u \"%s\"", faults[3].calls,
              faults[3].status, faults[3].text);
    fk_reset(); /* the cases after this one get a working "GPU" */
    if (!fk_failures)
        printf("gpu_fault: ok (told after %.2f s: %s)\n", f_told[1] - f_armed, faults[1].text);
}

/* ---- no_device --------------------------------------------------------------------------------- */

static struct nx_dev_job job_n;
static struct nx_dev_part parts_n[2];

static void no_device_start(void)
{
    nx_cuda_exec_run(&job_n);
}

static void case_no_device(void)
{
    parts_n[0] = part(1, 61, 999, 0, 0, 10, 1); /* registration 999: none */
    parts_n[1] = part(2, 62, 0, 998, 0, 0, 0);
    job_n = (struct nx_dev_job){.comm_id = 1, .seq = 4, .kind = NX_K_SEND, .dtype = NEXAR_U8,
                                .size = 2, .count = 16, .parts = parts_n,
                                .what = "send seq 4 on comm 1"};
    int before = ndone;
    start(no_device_start);
    run_loop(before + 2, "no_device");
    const struct done *d = done_of(61);
    FK_EXPECT(d && d->status == NEXAR_ERR_INTERNAL, "unregistered buffers: status %u, \"%s\"",
           d ? d->status : 0, d ? d->text : "");
    FK_EXPECT(words[10] == 1, "done word not set");
    if (d)
        printf("no_device: ok (%s)\n", d->text);
}

/* ---- stop ----------------------------------------------------------------------------------------- */

static struct nx_dev_job job_s1, job_s2;
static struct nx_dev_part parts_s1[2], parts_s2[2];
static uint8_t s_src[512], s_dst[512];

static int idles, idle_ndone; /* nx_cuda_exec_stop's idle: calls, and parts done by then */

static void on_idle(void)
{
    idles++;
    idle_ndone = ndone;
}

static void stop_start(void)
{
    nx_cuda_exec_run(&job_s1);
    nx_cuda_exec_run(&job_s2);
    /* Let op 1's host function run on its stream thread; the loop has not taken it. */
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    nx_cuda_exec_stop(on_idle);
}

static void case_stop(void)
{
    cudaStream_t user;
    cudaEvent_t ev1, ev2;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev1, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming);
    uint32_t src = reg(1, NX_DEV_MEMORY, s_src, sizeof(s_src));
    uint32_t dst = reg(2, NX_DEV_MEMORY, s_dst, sizeof(s_dst));
    uint32_t e1 = reg(1, NX_DEV_EVENT, ev1, 0), e2 = reg(1, NX_DEV_EVENT, ev2, 0);
    shim_call(user, ev1, 12, 1);
    shim_call(user, ev2, 13, 1);
    watch_for[71 % 64] = ev1;
    watch_for[81 % 64] = ev2;
    parts_s1[0] = part(1, 71, src, 0, e1, 12, 1);
    parts_s1[1] = part(2, 72, 0, dst, 0, 0, 0);
    parts_s2[0] = part(1, 81, src, 0, e2, 13, 1);
    parts_s2[1] = part(2, 82, 0, dst, 0, 0, 0);
    job_s1 = (struct nx_dev_job){.comm_id = 1, .seq = 5, .kind = NX_K_SEND, .dtype = NEXAR_U8,
                                 .size = 2, .count = sizeof(s_src), .parts = parts_s1,
                                 .what = "send seq 5 on comm 1"};
    job_s2 = job_s1;
    job_s2.seq = 6;
    job_s2.parts = parts_s2;
    job_s2.what = "send seq 6 on comm 1";
    int before = ndone;
    start(stop_start);
    fk_case = "stop";
    uv_run(loop, UV_RUN_DEFAULT); /* returns once every handle of exec.c is closed */
    FK_EXPECT(ndone == before + 4, "after stop: %d of 4 parts completed", ndone - before);
    FK_EXPECT(words[12] == 1 && words[13] == 1, "done words not set at stop");
    FK_EXPECT(idles == 1 && idle_ndone == before + 4, "the daemon heard %d times that nothing "
           "was in flight, with %d of 4 parts completed (once, after all 4: its ranks keep "
           "their connections until then)", idles, idle_ndone - before);
    if (ndone == before + 4)
        printf("stop: ok (both ops completed while the loop ran on)\n");
}

/* ---- grace ------------------------------------------------------------------------------------- */

static struct nx_dev_job job_g;
static struct nx_dev_part parts_g[2];
static uint8_t g_src[64], g_dst[64];

static void grace_start(void)
{
    nx_cuda_exec_run(&job_g);
    nx_cuda_exec_stop(on_idle);
}

/* An op whose ready event never fires (its rank's stream waits for something else): the
 * loop may not hang at shutdown; it ends after the grace time, and the op's late end
 * must not touch the closed handles. */
static void case_grace(void)
{
    cudaStream_t user;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    uint32_t src = reg(1, NX_DEV_MEMORY, g_src, sizeof(g_src));
    uint32_t dst = reg(2, NX_DEV_MEMORY, g_dst, sizeof(g_dst));
    uint32_t e = reg(1, NX_DEV_EVENT, ev, 0);
    fk_wait_value(user, &words[20], 1); /* set only after the loop ended */
    shim_call(user, ev, 21, 1);
    parts_g[0] = part(1, 91, src, 0, e, 21, 1);
    parts_g[1] = part(2, 92, 0, dst, 0, 0, 0);
    job_g = (struct nx_dev_job){.comm_id = 1, .seq = 7, .kind = NX_K_SEND, .dtype = NEXAR_U8,
                                .size = 2, .count = sizeof(g_src), .parts = parts_g,
                                .what = "send seq 7 on comm 1"};
    if (nx_cuda_exec_init() < 0) {
        FK_EXPECT(0, "nx_cuda_exec_init after a stop");
        return;
    }
    nx_cuda_stop_grace_ms = 300;
    uv_timer_init(loop, &start_timer);
    int before = ndone, idles_before = idles;
    double t0 = uv_hrtime() / 1e9;
    start(grace_start);
    fk_case = "grace";
    uv_run(loop, UV_RUN_DEFAULT);
    double dt = uv_hrtime() / 1e9 - t0;
    uv_close((uv_handle_t *)&start_timer, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    FK_EXPECT(dt >= 0.25 && dt < 3, "the loop ended %.2f s after a stop with a stuck op (grace "
           "0.3 s)", dt);
    FK_EXPECT(ndone == before, "the stuck op completed");
    FK_EXPECT(idles == idles_before + 1, "after the grace the daemon was not told to go on (%d "
           "idle calls)", idles - idles_before);
    __atomic_store_n(&words[20], 1, __ATOMIC_RELEASE); /* its late end: no signal */
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    /* nexard is "gone": the rank's shim releases its own stream (daemon lost). */
    __atomic_store_n(&words[21], 1, __ATOMIC_RELEASE);
    if (!fk_failures)
        printf("grace: ok (the loop ended %.2f s after the stop)\n", dt);
}

int main(int argc, char **argv)
{
    fk_cases(argc, argv);
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    pthread_detach(wd);
    loop = uv_default_loop();
    struct nx_device_host h = host;
    h.loop = loop;
    nx_cuda_host = &h;
    uv_timer_init(loop, &start_timer);
    uv_timer_init(loop, &release_timer);
    if (nx_cuda_exec_init() < 0) {
        fprintf(stderr, "FAIL: nx_cuda_exec_init\n");
        return 1;
    }
    if (fk_want_case("send_error"))
        case_send_error();
    if (fk_want_case("coll_error"))
        case_coll_error();
    if (fk_want_case("host_fn"))
        case_host_fn();
    if (fk_want_case("no_device"))
        case_no_device();
    if (fk_want_case("deadline"))
        case_deadline();
    if (fk_want_case("close_busy"))
        case_close_busy();
    if (fk_want_case("copy"))
        case_copy();
    if (fk_want_case("copy_lanes"))
        case_copy_lanes();
    if (fk_want_case("gpu_fault"))
        case_gpu_fault();
    if (fk_want_case("stop"))
        case_stop();
    else
        nx_cuda_exec_stop(NULL);
    uv_close((uv_handle_t *)&start_timer, NULL);
    uv_close((uv_handle_t *)&release_timer, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    if (fk_want_case("grace"))
        case_grace();
    nx_cuda_exec_fini();
    fk_shutdown();
    for (int c = 0; c < 2; c++)
        if (clients[c].state)
            nx_regtab_orphan(clients[c].state);
    uv_loop_close(loop);
    printf("test_exec_logic: %s (%d parts completed)\n", fk_failures ? "FAILED" : "ok", ndone);
    return fk_failures ? 1 : 0;
}
