/*
 * test_device_fake.c - the shim's device path end to end without a GPU: a test nexard
 * whose device backend is a fake (fakedev_backend.c: ops "run" for a set time and move no
 * data, and it logs every registration it holds), and ranks with the fake libcuda
 * (fake_cuda.c) loaded, which calls parts of their own memory device allocations and
 * models stream waits.  It tests the logic of libnexarshim and nexard, not CUDA.
 *
 *   1. freed allocations: nexard lets go of an allocation's mapping at the rank's next
 *      device op after the allocation was freed, not when a later registration happens
 *      to overlap it (issue 15); the sweep takes at most 16 allocations per op, so 20
 *      freed ones are gone after two ops; a live allocation stays registered.
 *   2. nexar_finalize() with device ops in flight (ops take 800 ms in the backend): a
 *      stream-ordered op's stream is released only when nexard completed the op, never
 *      by finalize before that, and never left waiting on memory finalize unpins; an
 *      unordered nonblocking op is done in nexard when finalize returns.
 *   3. heap_bytes = 0: device ops and nexar_comm_set_stream() fail with
 *      NEXAR_ERR_NOMEM and a text that names heap_bytes; host ops still work.
 *   4. a stream-ordered op queued behind a host op that is still being staged (one slot)
 *      is in nexard's ring when its call returns: a program that then waits on its
 *      stream (nexar_event_synchronize, no nexar call that makes progress) is not stuck.
 */
#include <stdlib.h>
#include <time.h>

#include "fake_cuda.h"
#include "itest.h"

#define DELAY_MS 800

static char g_log[256]; /* the fake backend's log (NX_FAKEDEV_LOG) */

/* Every rank's start: the fake libcuda, then the job.  NULL (having said why) on failure. */
static nexar_comm_t *rank_start(struct nx_fake_cuda *f)
{
    char err[512];
    if (nx_fake_cuda_load(f, err, sizeof(err))) {
        tl_log("FAIL: %s", err);
        return NULL;
    }
    nexar_comm_t *w = NULL;
    return hx_init(&w) == NEXAR_OK ? w : NULL;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The fake backend's log as one string (malloc'd), or NULL. */
static char *read_log(void)
{
    FILE *f = fopen(g_log, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char line[512];
    while (m && fgets(line, sizeof(line), f))
        fputs(line, m);
    if (m)
        fclose(m);
    fclose(f);
    return buf;
}

/* nexard's registration of the allocation at base: the last "reg mem" line naming it.
 * Returns 0 with client and id, or -1. */
static int reg_of(const char *log, const void *base, unsigned *client, unsigned *id)
{
    char want[64];
    int found = -1;
    snprintf(want, sizeof(want), "base=0x%llx ", (unsigned long long)(uintptr_t)base);
    for (const char *l = log; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        char line[512];
        snprintf(line, sizeof(line), "%.*s ", (int)n, l);
        unsigned c, i;
        if (strstr(line, want) && sscanf(line, "reg mem client=%u id=%u", &c, &i) == 2) {
            *client = c;
            *id = i;
            found = 0;
        }
        l = end ? end + 1 : l + n;
    }
    return found;
}

static int unregistered(const char *log, unsigned client, unsigned id)
{
    char want[64];
    snprintf(want, sizeof(want), "unreg client=%u id=%u\n", client, id);
    return log && strstr(log, want) != NULL;
}

/* ---- 1. freed allocations --------------------------------------------------------------- */

#define NMANY 20

static int all_reduce_dev(int *fails, nexar_comm_t *w, float *p, const char *what)
{
    return EXPECT_OK(*fails, what, nexar_all_reduce(w, p, 16, NEXAR_F32, NEXAR_SUM));
}

static int rank_release(struct hx_rank *r)
{
    (void)r;
    struct nx_fake_cuda f;
    int fails = 0;
    nexar_comm_t *w = rank_start(&f);
    if (!w)
        return 1;
    /* One block, carved: freed "allocations" keep their addresses (no malloc reuse). */
    enum { SZ = 4096 };
    float *mem = aligned_alloc(SZ, (NMANY + 2) * SZ);
    float *a = mem, *b = mem + SZ / sizeof(float);
    float *many[NMANY];
    f.mark(a, SZ);
    f.mark(b, SZ);
    for (int i = 0; i < NMANY; i++) {
        many[i] = mem + (size_t)(i + 2) * SZ / sizeof(float);
        f.mark(many[i], SZ);
    }

    all_reduce_dev(&fails, w, a, "device all_reduce on allocation a");
    unsigned ca, ia, cb, ib;
    char *log = read_log();
    if (!log || reg_of(log, a, &ca, &ia)) {
        tl_log("FAIL: nexard did not register allocation a (%p); the fake backend's log:\n%s",
               (void *)a, log ? log : "(none)");
        free(log);
        return 1;
    }
    free(log);

    f.free_(a); /* cudaFree(a) */
    all_reduce_dev(&fails, w, b, "device all_reduce on allocation b after a was freed");
    log = read_log();
    EXPECT_TRUE(fails, unregistered(log, ca, ia),
                "nexard still maps allocation a (%p, registration %u) after the rank freed it "
                "and ran another device op: the mapping (and the GPU memory) stays until a "
                "later registration overlaps it", (void *)a, ia);
    if (reg_of(log, b, &cb, &ib) == 0)
        EXPECT_TRUE(fails, !unregistered(log, cb, ib),
                    "allocation b is live but nexard's mapping of it went");
    free(log);

    for (int i = 0; i < NMANY; i++)
        all_reduce_dev(&fails, w, many[i], "device all_reduce on one of many allocations");
    for (int i = 0; i < NMANY; i++)
        f.free_(many[i]);
    all_reduce_dev(&fails, w, b, "device all_reduce after 20 allocations were freed (1)");
    all_reduce_dev(&fails, w, b, "device all_reduce after 20 allocations were freed (2)");
    log = read_log();
    int left = 0;
    for (int i = 0; i < NMANY; i++) {
        unsigned c, id;
        if (reg_of(log, many[i], &c, &id) || !unregistered(log, c, id))
            left++;
    }
    EXPECT_TRUE(fails, left == 0,
                "%d of %d freed allocations are still mapped in nexard after two more device "
                "ops", left, NMANY);
    if (reg_of(log, b, &cb, &ib) == 0)
        EXPECT_TRUE(fails, !unregistered(log, cb, ib),
                    "allocation b is live but nexard's mapping of it went");
    free(log);
    if (!fails)
        tl_log("ok: freed allocations are unregistered at the next device ops (1, then %d)",
               NMANY);
    nexar_finalize();
    free(mem);
    return fails ? 1 : 0;
}

/* ---- 2. finalize with device ops in flight ---------------------------------------------- */

static int rank_finalize_ordered(struct hx_rank *r)
{
    (void)r;
    struct nx_fake_cuda f;
    int fails = 0;
    nexar_comm_t *w = rank_start(&f);
    if (!w)
        return 1;
    static float a[64] __attribute__((aligned(64)));
    f.mark(a, sizeof(a));
    void *s = f.stream();
    if (EXPECT_OK(fails, "nexar_comm_set_stream (fake stream)", nexar_comm_set_stream(w, s)))
        return 1;
    uint64_t t0 = now_ns();
    nexar_request_t *req = NULL;
    if (EXPECT_OK(fails, "stream-ordered iall_reduce",
                  nexar_iall_reduce(w, a, 16, NEXAR_F32, NEXAR_SUM, &req)))
        return 1;
    EXPECT_OK(fails, "nexar_finalize with a stream-ordered op in flight", nexar_finalize());
    uint64_t t1 = now_ns();
    struct nx_fake_wait wv[8];
    int n = f.waits(wv, 8);
    EXPECT_TRUE(fails, n == 1, "%d stream waits were queued, expected 1", n);
    if (n >= 1) {
        double rel_ms = wv[0].t_rel_ns ? (double)(wv[0].t_rel_ns - t0) / 1e6 : -1;
        EXPECT_TRUE(fails, !wv[0].dropped,
                    "nexar_finalize unpinned the done word while the stream still waited on "
                    "it (on a GPU: a fault)");
        EXPECT_TRUE(fails, wv[0].t_rel_ns != 0, "the stream was never released");
        EXPECT_TRUE(fails, rel_ms < 0 || rel_ms >= 0.9 * DELAY_MS,
                    "the stream went on %.0f ms after the op was issued, before nexard's "
                    "device work was done (%d ms): nexar_finalize released it early",
                    rel_ms, DELAY_MS);
        if (!fails)
            tl_log("ok: stream released %.0f ms after the op was issued (device work %d ms); "
                   "finalize returned after %.0f ms", rel_ms, DELAY_MS, (double)(t1 - t0) / 1e6);
    }
    return fails ? 1 : 0;
}

/* A blocking stream-ordered call (its request is the library's) and an unordered
 * nonblocking one, both in flight at finalize. */
static int rank_finalize_mixed(struct hx_rank *r)
{
    (void)r;
    struct nx_fake_cuda f;
    int fails = 0;
    nexar_comm_t *w = rank_start(&f), *c2 = NULL;
    if (!w)
        return 1;
    static float a[64] __attribute__((aligned(64))), b[64] __attribute__((aligned(64)));
    f.mark(a, sizeof(a));
    f.mark(b, sizeof(b));
    if (EXPECT_OK(fails, "nexar_comm_split", nexar_comm_split(w, 0, 0, &c2)) ||
        EXPECT_OK(fails, "nexar_comm_set_stream", nexar_comm_set_stream(w, f.stream())))
        return 1;
    uint64_t t0 = now_ns();
    nexar_request_t *req = NULL;
    EXPECT_OK(fails, "blocking stream-ordered all_reduce (returns at once)",
              nexar_all_reduce(w, a, 16, NEXAR_F32, NEXAR_SUM));
    EXPECT_OK(fails, "unordered iall_reduce on another communicator",
              nexar_iall_reduce(c2, b, 16, NEXAR_F32, NEXAR_SUM, &req));
    double t_call = (double)(now_ns() - t0) / 1e6;
    EXPECT_TRUE(fails, t_call < DELAY_MS / 2.0,
                "the stream-ordered call blocked for %.0f ms", t_call);
    EXPECT_OK(fails, "nexar_finalize with both in flight", nexar_finalize());
    char *log = read_log();
    int done = 0;
    for (const char *p = log; p && (p = strstr(p, "\ndone ")); p++)
        done++;
    EXPECT_TRUE(fails, done >= 2,
                "nexar_finalize returned while nexard still ran device ops of the rank (%d "
                "of 2 done); their GPU work would go on after finalize", done);
    free(log);
    struct nx_fake_wait wv[8];
    int n = f.waits(wv, 8);
    for (int i = 0; i < n && i < 8; i++) {
        double rel_ms = wv[i].t_rel_ns ? (double)(wv[i].t_rel_ns - t0) / 1e6 : -1;
        EXPECT_TRUE(fails, !wv[i].dropped && rel_ms >= 0.9 * DELAY_MS,
                    "stream wait %d: released after %.0f ms%s (device work %d ms)", i, rel_ms,
                    wv[i].dropped ? ", its memory unpinned first" : "", DELAY_MS);
    }
    if (!fails)
        tl_log("ok: nexar_finalize waited for the rank's device ops (%d done)", done);
    return fails ? 1 : 0;
}

/* ---- 4. a stream-ordered op reaches nexard before the call returns --------------------- */

static int rank_submitted(struct hx_rank *r)
{
    (void)r;
    struct nx_fake_cuda f;
    int fails = 0;
    nexar_comm_t *w = rank_start(&f);
    if (!w)
        return 1;
    static float a[64] __attribute__((aligned(64)));
    static float host[16384]; /* 64 KiB through 4 KiB slots, one at a time: 32 chunks */
    f.mark(a, sizeof(a));
    if (EXPECT_OK(fails, "nexar_comm_set_stream", nexar_comm_set_stream(w, f.stream())))
        return 1;
    nexar_request_t *hreq = NULL;
    nexar_event_t *ev = NULL;
    EXPECT_OK(fails, "host iall_reduce, staged in 32 chunks through one slot",
              nexar_iall_reduce(w, host, 16384, NEXAR_F32, NEXAR_SUM, &hreq));
    EXPECT_OK(fails, "stream-ordered all_reduce behind it",
              nexar_all_reduce(w, a, 16, NEXAR_F32, NEXAR_SUM));
    EXPECT_OK(fails, "nexar_event_create", nexar_event_create(w, &ev));
    EXPECT_OK(fails, "nexar_event_record_comm", nexar_event_record_comm(w, ev));
    /* No nexar call that makes progress from here until the stream is done. */
    double t0 = tl_now();
    nexar_status_t st = nexar_event_synchronize(ev);
    double dt = tl_now() - t0;
    EXPECT_TRUE(fails, st == NEXAR_OK,
                "nexar_event_synchronize on the communicator's stream: %s after %.1f s (%s): "
                "the stream-ordered op's descriptor was still queued in the library, behind "
                "the staged host op, when the call returned, and nothing submits it while the "
                "program waits on its stream", tl_status_name(st), dt, nexar_last_error());
    EXPECT_OK(fails, "nexar_wait (host op)", hreq ? nexar_wait(hreq) : NEXAR_OK);
    EXPECT_OK(fails, "nexar_sync", nexar_sync(w));
    nexar_event_destroy(ev);
    if (!fails)
        tl_log("ok: the stream-ordered op was with nexard when the call returned; the "
               "stream's event completed after %.2f s", dt);
    nexar_finalize();
    return fails ? 1 : 0;
}

/* ---- 3. heap_bytes = 0 ------------------------------------------------------------------- */

static int rank_heap0(struct hx_rank *r)
{
    (void)r;
    struct nx_fake_cuda f;
    int fails = 0;
    nexar_comm_t *w = rank_start(&f);
    if (!w)
        return 1;
    static float a[64] __attribute__((aligned(64)));
    f.mark(a, sizeof(a));
    nexar_status_t st = nexar_all_reduce(w, a, 16, NEXAR_F32, NEXAR_SUM);
    if (!tl_check_status("device all_reduce with heap_bytes = 0", NEXAR_ERR_NOMEM, st))
        tl_check_contains("device all_reduce with heap_bytes = 0", nexar_last_error(),
                          "heap_bytes") ? fails++ : 0;
    else
        fails++;
    tl_log("the device op's refusal reads: %s", nexar_last_error());
    st = nexar_comm_set_stream(w, f.stream());
    if (!tl_check_status("nexar_comm_set_stream with heap_bytes = 0", NEXAR_ERR_NOMEM, st))
        tl_check_contains("nexar_comm_set_stream with heap_bytes = 0", nexar_last_error(),
                          "heap_bytes") ? fails++ : 0;
    else
        fails++;
    int32_t v = 1;
    EXPECT_OK(fails, "host all_reduce with heap_bytes = 0",
              nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM));
    nexar_finalize();
    return fails ? 1 : 0;
}

/* ---- main ---------------------------------------------------------------------------------- */

static int with_daemon(const char *what, const char *const *args, const char *delay,
                       hx_rank_fn fn)
{
    struct hx_daemon d;
    char env_log[300], env_delay[64];
    snprintf(env_log, sizeof(env_log), "NX_FAKEDEV_LOG=%s", g_log);
    snprintf(env_delay, sizeof(env_delay), "NX_FAKEDEV_DELAY_MS=%s", delay);
    const char *env[] = {env_log, env_delay, NULL};
    unlink(g_log);
    tl_log("--- %s", what);
    if (hx_daemon_start_env(&d, args, env) < 0)
        return 1;
    int rv = itest_run(&d, 1, fn, NULL, 30, 90) != 0;
    if (hx_daemon_stop(&d) < 0)
        rv = 1;
    if (rv)
        tl_log("FAIL: %s", what);
    return rv;
}

int main(void)
{
    hx_require_nexard();
    if (!getenv("NX_FAKE_CUDA")) {
        tl_log("SKIP: NX_FAKE_CUDA is not set");
        return HX_SKIP;
    }
    const char *shim_cuda = getenv("NX_SHIM_CUDA");
    if (shim_cuda && strcmp(shim_cuda, "0") == 0) {
        tl_log("SKIP: this libnexarshim was built with -Dcuda=disabled: it refuses every "
               "device buffer (test_device_api checks that)");
        return HX_SKIP;
    }
    char dir[] = "/tmp/nx-devfake-XXXXXX";
    if (!mkdtemp(dir)) {
        tl_log("FAIL: mkdtemp: %s", strerror(errno));
        return 1;
    }
    snprintf(g_log, sizeof(g_log), "%s/fakedev.log", dir);
    int rv = 0;
    char ms[16];
    snprintf(ms, sizeof(ms), "%d", DELAY_MS);
    rv |= with_daemon("freed allocations are unregistered", NULL, "0", rank_release);
    rv |= with_daemon("finalize with a stream-ordered op in flight", NULL, ms,
                      rank_finalize_ordered);
    rv |= with_daemon("finalize with blocking ordered and unordered nonblocking ops", NULL, ms,
                      rank_finalize_mixed);
    const char *small[] = {"--slots", "2", "--slot-bytes", "4096", NULL};
    rv |= with_daemon("a stream-ordered op behind a staged host op", small, "300",
                      rank_submitted);
    const char *heap0[] = {"--heap-bytes", "0", NULL};
    rv |= with_daemon("heap_bytes = 0", heap0, "0", rank_heap0);
    unlink(g_log);
    rmdir(dir);
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv;
}
