/*
 * fakedev_backend.c - a device backend for a test build of nexard (itest_nexard_fakedev:
 * daemon/main.c as it is, with this file in place of cuda/), so that the shim's device
 * path runs end to end on a host without a GPU: registrations, the op's record, the
 * matcher, completion and the done words are all nexard's real code.  It implements
 * cuda_backend.h and device.h the way cuda/backend.c does, with the IPC handles of the
 * fake libcuda (fake_cuda.c).  An op among one node's ranks moves no data: it "runs"
 * for NX_FAKEDEV_DELAY_MS milliseconds (default 0) on a timer and then completes with
 * NEXAR_OK.  The staging copies of ops across nodes (device.h's copy, node/devstage.h)
 * are real: memory from nx_fake_cuda_shared is mapped here through the shm name in its
 * handle, and each copy runs on a libuv worker thread (after NX_FAKEDEV_DELAY_MS), so
 * that it ends asynchronously as a GPU's would.  NX_FAKEDEV_FAIL_COPY=k makes the k-th
 * copy fail, once.  What it did goes, one line per event, to the file NX_FAKEDEV_LOG
 * names:
 *
 *   reg mem client=C id=I base=0xB size=S   reg event client=C id=I
 *   unreg client=C id=I                     run WHAT                done WHAT
 *   copy d2h|h2d N ranges B bytes W waits WHAT  (W: ranges that wait for a ready event)
 *
 * so that a test can see which mappings nexard holds.  It tests nexard's and the
 * shim's logic, not CUDA.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_backend.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "registry.h"

struct fake_ipc {
    char magic[8];
    uint64_t base, size, buffer_id;
    uint64_t event;
    char shm[24];
};

/* The registrations fake device work holds until it ends. */
struct holds {
    struct nx_reg **v;
    size_t n, cap;
};

struct run {
    uv_timer_t timer;
    size_t nparts;
    struct nx_dev_part *parts;
    struct holds regs;
    char what[160];
};

static const struct nx_device_host *host;
static FILE *logfile;
static uint64_t delay_ms;
static uint64_t inflight;

static void idle_if_stopped(void);

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    if (!logfile)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(logfile, fmt, ap);
    va_end(ap);
    fputc('\n', logfile);
    fflush(logfile);
}

static void close_reg(struct nx_reg *r)
{
    if (r->handle)
        munmap(r->handle, r->size ? r->size : 1);
}

/* Memory from nx_fake_cuda_shared: mapped here too.  NULL for any other. */
static void *map_shared(const struct fake_ipc *h)
{
    char name[sizeof(h->shm) + 1];
    memcpy(name, h->shm, sizeof(h->shm));
    name[sizeof(h->shm)] = '\0';
    if (name[0] != '/')
        return NULL;
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    void *p = mmap(NULL, h->size ? h->size : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

static uint32_t fk_reg(struct nx_dev_client *dc, int kind, const uint8_t *handle, size_t len,
                       uint64_t base, uint64_t size, const char *pci, uint32_t *id,
                       uint64_t *mapped, char *err, size_t errlen)
{
    struct fake_ipc h;
    (void)base;
    (void)size;
    (void)pci;
    memset(&h, 0, sizeof(h));
    memcpy(&h, handle, len < sizeof(h) ? len : sizeof(h));
    const char *want = kind == NX_DEV_MEMORY ? "NXFKMEM" : "NXFKEVT";
    if (memcmp(h.magic, want, 8) != 0) {
        snprintf(err, errlen, "not a handle of the fake libcuda");
        return NEXAR_ERR_INVALID;
    }
    if (!dc->state)
        dc->state = nx_regtab_new(close_reg);
    void *map = kind == NX_DEV_MEMORY ? map_shared(&h) : NULL;
    struct nx_reg *r = dc->state ? nx_regtab_add(dc->state, kind, 0, map, h.size) : NULL;
    if (!r) {
        if (map)
            munmap(map, h.size ? h.size : 1);
        snprintf(err, errlen, "out of memory");
        return NEXAR_ERR_NOMEM;
    }
    *id = r->id;
    *mapped = kind == NX_DEV_MEMORY ? h.size : 0;
    if (kind == NX_DEV_MEMORY)
        note("reg mem client=%u id=%u base=0x%llx size=%llu", dc->id, r->id,
             (unsigned long long)h.base, (unsigned long long)h.size);
    else
        note("reg event client=%u id=%u", dc->id, r->id);
    return NEXAR_OK;
}

static bool fk_unreg(struct nx_dev_client *dc, uint32_t id)
{
    if (!dc->state || !nx_regtab_remove(dc->state, id))
        return false;
    note("unreg client=%u id=%u", dc->id, id);
    return true;
}

static bool fk_mem_ok(struct nx_dev_client *dc, uint32_t id, uint64_t off, uint64_t bytes)
{
    struct nx_reg *r = dc->state ? nx_regtab_get(dc->state, id, NX_DEV_MEMORY) : NULL;
    return r && off <= r->size && bytes <= r->size - off;
}

static bool fk_event_ok(struct nx_dev_client *dc, uint32_t id)
{
    return dc->state && nx_regtab_get(dc->state, id, NX_DEV_EVENT);
}

/* Registration id (kind) of the client, held in h: the registration, or NULL (none). */
static struct nx_reg *hold(struct holds *h, uint32_t client_id, uint32_t id, int kind)
{
    struct nx_dev_client *dc = host->client(client_id);
    struct nx_reg *r = id && dc && dc->state ? nx_regtab_get(dc->state, id, kind) : NULL;
    if (!r)
        return NULL;
    nx_grow((void **)&h->v, &h->cap, h->n + 1, sizeof(*h->v));
    h->v[h->n++] = r;
    nx_reg_ref(r);
    return r;
}

static void unhold(struct holds *h)
{
    for (size_t i = 0; i < h->n; i++)
        nx_reg_unref(h->v[i]);
    free(h->v);
}

static void run_closed(uv_handle_t *h)
{
    struct run *x = h->data;
    unhold(&x->regs);
    free(x->parts);
    free(x);
}

static void run_done(uv_timer_t *t)
{
    struct run *x = t->data;
    note("done %s", x->what);
    for (size_t i = 0; i < x->nparts; i++)
        host->part_done(&x->parts[i], NEXAR_OK, NULL);
    host->flush();
    inflight--;
    uv_close((uv_handle_t *)&x->timer, run_closed);
    idle_if_stopped();
}

static void fk_run(const struct nx_dev_job *job)
{
    struct run *x = nx_xcalloc(1, sizeof(*x));
    x->nparts = job->size;
    x->parts = nx_xcalloc(job->size, sizeof(*x->parts));
    for (uint32_t r = 0; r < job->size; r++) {
        const struct nx_dev_part *p = &job->parts[r];
        x->parts[r] = *p;
        x->parts[r].iov = NULL;
        hold(&x->regs, p->client_id, p->rec.in.mem, NX_DEV_MEMORY);
        hold(&x->regs, p->client_id, p->rec.out.mem, NX_DEV_MEMORY);
        for (uint32_t i = 0; i < p->rec.niov; i++)
            hold(&x->regs, p->client_id, p->iov[i].buf.mem, NX_DEV_MEMORY);
        hold(&x->regs, p->client_id, p->rec.ready_event, NX_DEV_EVENT);
    }
    snprintf(x->what, sizeof(x->what), "%s", job->what);
    note("run %s", x->what);
    inflight++;
    uv_timer_init(host->loop, &x->timer);
    x->timer.data = x;
    uv_timer_start(&x->timer, run_done, delay_ms, 0);
}

/* ---- staging across nodes ---------------------------------------------------------- */

struct copy {
    uv_work_t work;
    int dir;
    size_t n;
    struct nx_dev_copy *v;
    uint8_t **dev;         /* v[i]'s device side, mapped here */
    struct holds regs;
    char text[200];        /* why it fails (then it moves nothing), or "" */
    nx_dev_copy_done done;
    void *arg;
};

static unsigned copies, fail_copy;

static void copy_work(uv_work_t *w)
{
    struct copy *x = w->data;
    if (delay_ms)
        usleep((useconds_t)(delay_ms * 1000));
    for (size_t i = 0; i < x->n && !x->text[0]; i++)
        if (x->dir == NX_DEV_D2H)
            memcpy(x->v[i].host, x->dev[i], x->v[i].bytes);
        else
            memcpy(x->dev[i], x->v[i].host, x->v[i].bytes);
}

static void copy_after(uv_work_t *w, int status)
{
    struct copy *x = w->data;
    (void)status;
    inflight--; /* before done: what it starts is counted without this one (the log's count) */
    x->done(x->arg, x->text[0] ? NEXAR_ERR_INTERNAL : NEXAR_OK, x->text[0] ? x->text : NULL);
    unhold(&x->regs);
    free(x->dev);
    free(x->v);
    free(x);
    idle_if_stopped();
}

static void *fk_host_alloc(size_t bytes)
{
    return malloc(bytes);
}

static void fk_host_free(void *p)
{
    free(p);
}

static void fk_copy(uint32_t comm_id, const struct nx_dev_copy *v, size_t n, int dir,
                    const char *what, nx_dev_copy_done done, void *arg)
{
    (void)comm_id;
    struct copy *x = nx_xcalloc(1, sizeof(*x));
    uint64_t bytes = 0;
    x->dir = dir;
    x->n = n;
    x->v = nx_xcalloc(n ? n : 1, sizeof(*x->v));
    x->dev = nx_xcalloc(n ? n : 1, sizeof(*x->dev));
    x->done = done;
    x->arg = arg;
    x->work.data = x;
    if (n) /* nexard asks with v NULL when a part has nothing to move */
        memcpy(x->v, v, n * sizeof(*v));
    for (size_t i = 0; i < n && !x->text[0]; i++) {
        struct nx_reg *r = hold(&x->regs, v[i].client_id, v[i].mem, NX_DEV_MEMORY);
        if (!r || !r->handle) {
            snprintf(x->text, sizeof(x->text), "the fake device memory of client %u "
                     "(registration %u) is %s", v[i].client_id, v[i].mem,
                     r ? "not shared (nx_fake_cuda_shared)" : "not registered");
            break;
        }
        x->dev[i] = (uint8_t *)r->handle + v[i].off;
        bytes += v[i].bytes;
    }
    if (fail_copy && ++copies == fail_copy)
        snprintf(x->text, sizeof(x->text), "copy %u failed as NX_FAKEDEV_FAIL_COPY asked",
                 copies);
    unsigned waits = 0;
    for (size_t i = 0; i < n; i++)
        waits += v[i].wait_event != 0;
    note("copy %s %zu ranges %llu bytes %u waits %s; %llu in flight, off %llu",
         dir == NX_DEV_D2H ? "d2h" : "h2d", n, (unsigned long long)bytes, waits, what,
         (unsigned long long)inflight, n ? (unsigned long long)v[0].off : 0ull);
    inflight++;
    uv_queue_work(host->loop, &x->work, copy_work, copy_after);
}

static void fk_client_gone(struct nx_dev_client *dc)
{
    if (dc->state)
        nx_regtab_orphan(dc->state);
    dc->state = NULL;
}

static void fk_comm_gone(uint32_t comm_id)
{
    (void)comm_id;
}

static const struct nx_device_ops fake_ops = {
    .name = "fake",
    .reg = fk_reg,
    .unreg = fk_unreg,
    .mem_ok = fk_mem_ok,
    .event_ok = fk_event_ok,
    .run = fk_run,
    .client_gone = fk_client_gone,
    .comm_gone = fk_comm_gone,
    .host_alloc = fk_host_alloc,
    .host_free = fk_host_free,
    .copy = fk_copy,
};

int nx_cuda_init(const struct nx_device_host *h, const struct nx_device_ops **ops, char *note_,
                 size_t notelen)
{
    const char *path = getenv("NX_FAKEDEV_LOG"), *d = getenv("NX_FAKEDEV_DELAY_MS");
    host = h;
    const char *fc = getenv("NX_FAKEDEV_FAIL_COPY");
    delay_ms = d ? strtoull(d, NULL, 10) : 0;
    fail_copy = fc ? (unsigned)strtoul(fc, NULL, 10) : 0;
    copies = 0;
    logfile = path && *path ? fopen(path, "a") : NULL;
    snprintf(note_, notelen, "the fake device backend of the tests (no GPU: ops on one node "
             "complete after %llu ms and move no data)", (unsigned long long)delay_ms);
    NX_INFO("cuda", "device buffers on: %s", note_);
    *ops = &fake_ops;
    return 0;
}

static void (*stop_idle)(void);

/* At stop, ops on their timers and copies on the workers complete as the loop runs on;
 * the last one tells the daemon (nx_cuda_stop's idle). */
static void idle_if_stopped(void)
{
    void (*idle)(void) = stop_idle;
    if (inflight || !idle)
        return;
    stop_idle = NULL;
    idle();
}

void nx_cuda_stop(void (*idle)(void))
{
    if (inflight)
        NX_INFO("cuda", "%llu fake device ops in flight at stop", (unsigned long long)inflight);
    stop_idle = idle;
    idle_if_stopped();
}

void nx_cuda_fini(void)
{
    if (logfile)
        fclose(logfile);
    logfile = NULL;
    host = NULL;
}
