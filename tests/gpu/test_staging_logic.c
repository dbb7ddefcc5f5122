/*
 * test_staging_logic.c - nexard's staging engine (cuda/staging.c on cuda/pipeline.c)
 * against a fake CUDA runtime whose streams run on host threads and whose copies take
 * time (fake_cudart.c), without a GPU.  It tests nexard's logic, not CUDA: the order in
 * which the engine queues copies, waits for events and reuses its 4 pinned buffers.
 * "Device memory" here is heap memory, and a copy is a memmove after a delay.
 *
 *   order      D2H + host step + H2D, D2H + host, host + H2D over 10 chunks and a tail:
 *              the host step sees every chunk once, in order, with the source's bytes;
 *              the destination equals the source (through the host step), exactly
 *   overlap    with 15 ms per copy and per host step: D2H of chunk i+1 and H2D of chunk
 *              i-1 run while the host step works on chunk i (from the fake's timestamps),
 *              and the run takes well under the serial time
 *   pressure   slow H2D, fast D2H: never more than 4 chunks in flight, all 4 buffers used,
 *              and no copy or host step touches a buffer that a copy still uses (the
 *              producer waits instead of overwriting)
 *   errors     in the middle of a run: cudaMemcpyAsync fails, cudaEventRecord fails after
 *              its copy was queued, a copy fails as it runs (sticky, like CUDA), the host
 *              step fails: the error is returned, no later chunk reaches the host step,
 *              nothing is in flight on return, and a full run afterwards works with all
 *              4 buffers
 *   shutdown   nx_staging_fini while a run is in flight on another thread: the run ends
 *              early with -ECANCELED, fini returns after it, no buffer is freed under a
 *              copy (build with -Db_sanitize=address to have ASan check it too)
 *
 * A watchdog fails the test instead of hanging.
 *   test_staging_logic [CASE...]   runs the named cases only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_int.h"
#include "fake_cudart.h"

#define NBUF 4

static volatile double g_deadline;

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        sleep(1);
        if (g_deadline > 0 && fk_now() > g_deadline) {
            fprintf(stderr, "FAIL case %s: hung for 60 s\n", fk_case);
            _exit(1);
        }
    }
    return NULL;
}

static void begin(const char *name)
{
    fk_case = name;
    g_deadline = fk_now() + 60;
    fk_reset();
}

static void sleep_us(unsigned us)
{
    struct timespec d = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&d, &d) < 0 && errno == EINTR) {
    }
}

/* ---- the host step: checks and logs each chunk -------------------------------------------- */

#define MAXCH 64

struct host {
    const uint8_t *src; /* what the buffer must hold (NULL: no IN stage) */
    uint8_t *out;       /* copy the buffer here (D2H + host) */
    const uint8_t *in;  /* fill the buffer from here (host + H2D) */
    bool flip;          /* xor 0x5a into the buffer */
    unsigned us;        /* how long the step takes */
    int fail_at;        /* return -EPROTO at this chunk (-1: never) */
    size_t chunk, next_off;
    int calls, bad_bytes, out_of_order, busy_buffers;
    void *bufs[MAXCH];
    double t0[MAXCH], t1[MAXCH];
};

/* Copies in flight (queued or running) whose source or destination is buf. */
static int copies_on(const void *buf, size_t len)
{
    static struct fk_copy log[FK_COPY_LOG];
    int n = fk_copies(log, FK_COPY_LOG), busy = 0;
    uintptr_t a = (uintptr_t)buf;
    for (int i = 0; i < n; i++) {
        uintptr_t d = (uintptr_t)log[i].dst, s = (uintptr_t)log[i].src;
        bool on = (d < a + len && a < d + log[i].n) || (s < a + len && a < s + log[i].n);
        busy += on && log[i].t_end == 0 && !log[i].failed;
    }
    return busy;
}

static int host_step(void *arg, void *buf, size_t off, size_t len)
{
    struct host *h = arg;
    int c = h->calls++;
    if (c < MAXCH) {
        h->bufs[c] = buf;
        h->t0[c] = fk_now();
    }
    h->out_of_order += off != h->next_off || off != (size_t)c * h->chunk;
    h->next_off = off + len;
    h->busy_buffers += copies_on(buf, len) != 0;
    if (h->src && memcmp(buf, h->src + off, len) != 0)
        h->bad_bytes++;
    if (h->in)
        memcpy(buf, h->in + off, len);
    if (h->flip)
        for (size_t i = 0; i < len; i++)
            ((uint8_t *)buf)[i] ^= 0x5a;
    if (h->out)
        memcpy(h->out + off, buf, len);
    if (h->us && c < MAXCH)
        fk_sleep_until(h->t0[c] + h->us * 1e-6); /* the checks count: stages stay even */
    if (c < MAXCH)
        h->t1[c] = fk_now();
    return c == h->fail_at ? -EPROTO : 0;
}

static void host_init(struct host *h, size_t chunk)
{
    memset(h, 0, sizeof(*h));
    h->chunk = chunk;
    h->fail_at = -1;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static uint8_t *random_bytes(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n);
    uint32_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
    return p;
}

static size_t nchunks(size_t n, size_t chunk)
{
    return (n + chunk - 1) / chunk;
}

static struct fk_copy logbuf[FK_COPY_LOG];

/* The logged copies of one kind, in queue order, into out; returns how many. */
static int copies_of(enum cudaMemcpyKind kind, struct fk_copy *out, int max)
{
    int n = fk_copies(logbuf, FK_COPY_LOG), k = 0;
    for (int i = 0; i < n && k < max; i++)
        if (logbuf[i].kind == kind)
            out[k++] = logbuf[i];
    return k;
}

static int distinct(void *const *p, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < i && p[j] != p[i])
            j++;
        d += j == i;
    }
    return d;
}

/* A full D2H + host + H2D run on st after whatever came before: exact, all 4 buffers. */
static void check_full_run(struct nx_staging *st, const char *after)
{
    size_t ch = nx_staging_chunk(st), n = 6 * ch + 777;
    uint8_t *src = random_bytes(n, 99), *dst = calloc(1, n);
    struct host h;
    host_init(&h, ch);
    h.src = src;
    int rv = nx_staging_run(st, src, dst, n, host_step, &h);
    FK_EXPECT(rv == 0, "a run after %s: %d", after, rv);
    FK_EXPECT(memcmp(dst, src, n) == 0, "a run after %s: wrong bytes", after);
    FK_EXPECT(h.calls == 7 && h.bad_bytes == 0 && h.out_of_order == 0,
           "a run after %s: %d host steps, %d bad, %d out of order", after, h.calls,
           h.bad_bytes, h.out_of_order);
    FK_EXPECT(distinct(h.bufs, h.calls < MAXCH ? h.calls : MAXCH) == NBUF,
           "a run after %s: %d staging buffers used, want %d", after,
           distinct(h.bufs, h.calls), NBUF);
    free(src);
    free(dst);
}

/* ---- cases ----------------------------------------------------------------------------------- */

static void case_order(struct nx_staging *st)
{
    begin("order");
    size_t ch = nx_staging_chunk(st), n = 10 * ch + 12345, nc = nchunks(n, ch);
    fk_set_copy_delay(cudaMemcpyDeviceToHost, 2000);
    fk_set_copy_delay(cudaMemcpyHostToDevice, 3000);
    uint8_t *src = random_bytes(n, 1), *dst = calloc(1, n), *hb = calloc(1, n);
    struct host h;

    /* D2H + host + H2D, the host step flipping bits: dst = src ^ 0x5a. */
    host_init(&h, ch);
    h.src = src;
    h.flip = true;
    int rv = nx_staging_run(st, src, dst, n, host_step, &h);
    FK_EXPECT(rv == 0, "d2h+h2d: %d (%s)", rv, nx_cuda_last_error());
    FK_EXPECT(h.calls == (int)nc && h.out_of_order == 0 && h.bad_bytes == 0,
           "d2h+h2d: %d host steps (want %zu), %d out of order, %d with wrong bytes", h.calls,
           nc, h.out_of_order, h.bad_bytes);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += dst[i] != (src[i] ^ 0x5a);
    FK_EXPECT(bad == 0, "d2h+h2d: %zu wrong bytes in the destination", bad);
    struct fk_copy in[MAXCH], out[MAXCH];
    int ni = copies_of(cudaMemcpyDeviceToHost, in, MAXCH);
    int no = copies_of(cudaMemcpyHostToDevice, out, MAXCH);
    FK_EXPECT(ni == (int)nc && no == (int)nc, "d2h+h2d: %d D2H and %d H2D copies, want %zu", ni,
           no, nc);
    for (int c = 0; c < ni && c < no; c++) {
        size_t len = (size_t)c + 1 < nc ? ch : n - (nc - 1) * ch;
        FK_EXPECT(in[c].src == src + (size_t)c * ch && in[c].n == len,
               "D2H #%d is not chunk %d (%zu bytes)", c, c, len);
        FK_EXPECT(out[c].dst == dst + (size_t)c * ch && out[c].n == len,
               "H2D #%d is not chunk %d (%zu bytes)", c, c, len);
        FK_EXPECT(out[c].t_queued >= h.t1[c], "H2D of chunk %d queued before its host step ended",
               c);
        FK_EXPECT(in[c].t_end <= h.t0[c], "host step %d began before its D2H ended", c);
    }

    /* D2H + host (stage_for_send): the host buffer gets the source. */
    begin("order");
    host_init(&h, ch);
    h.src = src;
    h.out = hb;
    rv = nx_staging_run(st, src, NULL, n, host_step, &h);
    FK_EXPECT(rv == 0 && memcmp(hb, src, n) == 0 && h.calls == (int)nc && !h.out_of_order,
           "d2h only: rv %d, %d host steps, bytes %s", rv, h.calls,
           memcmp(hb, src, n) ? "wrong" : "right");

    /* host + H2D (receive_to_device): the destination gets the host data. */
    begin("order");
    memset(dst, 0, n);
    host_init(&h, ch);
    h.in = src;
    rv = nx_staging_run(st, NULL, dst, n, host_step, &h);
    FK_EXPECT(rv == 0 && memcmp(dst, src, n) == 0 && h.calls == (int)nc && !h.out_of_order &&
               h.busy_buffers == 0,
           "h2d only: rv %d, %d host steps, %d into a busy buffer, bytes %s", rv, h.calls,
           h.busy_buffers, memcmp(dst, src, n) ? "wrong" : "right");
    FK_EXPECT(fk_copies_in_flight() == 0, "copies in flight after the runs");
    free(src);
    free(dst);
    free(hb);
}

static bool overlap(double a0, double a1, double b0, double b1)
{
    return a0 < b1 && b0 < a1;
}

static void case_overlap(struct nx_staging *st)
{
    begin("overlap");
    const unsigned us = 15000;
    size_t ch = nx_staging_chunk(st), nc = 8, n = nc * ch;
    fk_set_copy_delay(cudaMemcpyDeviceToHost, us);
    fk_set_copy_delay(cudaMemcpyHostToDevice, us);
    uint8_t *src = random_bytes(n, 2), *dst = calloc(1, n);
    struct host h;
    host_init(&h, ch);
    h.src = src;
    h.us = us;
    double t0 = fk_now();
    int rv = nx_staging_run(st, src, dst, n, host_step, &h);
    double took = fk_now() - t0, serial = 3.0 * (double)nc * us * 1e-6;
    FK_EXPECT(rv == 0 && memcmp(dst, src, n) == 0, "rv %d, bytes %s", rv,
           memcmp(dst, src, n) ? "wrong" : "right");
    struct fk_copy in[MAXCH], out[MAXCH];
    int ni = copies_of(cudaMemcpyDeviceToHost, in, MAXCH);
    int no = copies_of(cudaMemcpyHostToDevice, out, MAXCH);
    FK_EXPECT(ni == (int)nc && no == (int)nc && h.calls == (int)nc, "%d D2H, %d H2D, %d host", ni,
           no, h.calls);
    int d2h_overlaps = 0, h2d_overlaps = 0;
    for (int c = 0; c < h.calls && c < ni; c++) {
        if (c + 1 < ni) {
            bool o = overlap(in[c + 1].t_start, in[c + 1].t_end, h.t0[c], h.t1[c]);
            d2h_overlaps += o;
            FK_EXPECT(o, "D2H of chunk %d [%.1f, %.1f] ms does not overlap the host step of "
                      "chunk %d [%.1f, %.1f] ms",
                   c + 1, (in[c + 1].t_start - t0) * 1e3, (in[c + 1].t_end - t0) * 1e3, c,
                   (h.t0[c] - t0) * 1e3, (h.t1[c] - t0) * 1e3);
        }
        if (c >= 1 && c - 1 < no) {
            bool o = overlap(out[c - 1].t_start, out[c - 1].t_end, h.t0[c], h.t1[c]);
            h2d_overlaps += o;
            FK_EXPECT(o, "H2D of chunk %d [%.1f, %.1f] ms does not overlap the host step of "
                      "chunk %d [%.1f, %.1f] ms",
                   c - 1, (out[c - 1].t_start - t0) * 1e3, (out[c - 1].t_end - t0) * 1e3, c,
                   (h.t0[c] - t0) * 1e3, (h.t1[c] - t0) * 1e3);
        }
    }
    FK_EXPECT(took < 0.7 * serial, "took %.0f ms, serial would be %.0f ms", took * 1e3,
           serial * 1e3);
    printf("overlap: %zu chunks, 15 ms per stage: %.0f ms (serial %.0f, ideal %.0f); D2H i+1 "
           "under host i: %d/%zu, H2D i-1 under host i: %d/%zu\n",
           nc, took * 1e3, serial * 1e3, (double)(nc + 2) * us * 1e-3, d2h_overlaps, nc - 1,
           h2d_overlaps, nc - 1);
    free(src);
    free(dst);
}

static void case_pressure(struct nx_staging *st)
{
    begin("pressure");
    size_t ch = nx_staging_chunk(st), nc = 12, n = nc * ch;
    fk_set_copy_delay(cudaMemcpyDeviceToHost, 500);
    fk_set_copy_delay(cudaMemcpyHostToDevice, 20000);
    uint8_t *src = random_bytes(n, 3), *dst = calloc(1, n);
    struct host h;
    host_init(&h, ch);
    h.src = src;
    int rv = nx_staging_run(st, src, dst, n, host_step, &h);
    FK_EXPECT(rv == 0 && memcmp(dst, src, n) == 0, "rv %d, bytes %s", rv,
           memcmp(dst, src, n) ? "wrong" : "right");
    struct fk_copy in[MAXCH], out[MAXCH];
    int ni = copies_of(cudaMemcpyDeviceToHost, in, MAXCH);
    int no = copies_of(cudaMemcpyHostToDevice, out, MAXCH);
    FK_EXPECT(ni == (int)nc && no == (int)nc, "%d D2H, %d H2D", ni, no);
    void *bufs[MAXCH] = {0};
    for (int c = 0; c < ni; c++)
        bufs[c] = in[c].dst;
    FK_EXPECT(distinct(bufs, ni) == NBUF, "%d staging buffers used, want %d", distinct(bufs, ni),
           NBUF);
    int most = 0;
    for (int c = 0; c < ni; c++) {
        /* Chunks in flight when D2H of chunk c is queued: queued D2H, H2D not ended. */
        int k = 0;
        for (int d = 0; d <= c; d++)
            k += d >= no || out[d].t_end == 0 || out[d].t_end > in[c].t_queued;
        most = k > most ? k : most;
        /* A buffer is refilled only after the H2D that empties it has ended. */
        for (int d = 0; d < c && d < no; d++)
            if (out[d].src == in[c].dst)
                FK_EXPECT(out[d].t_end > 0 && out[d].t_end <= in[c].t_queued,
                       "D2H of chunk %d queued into buffer %p while H2D of chunk %d still "
                       "reads it",
                       c, in[c].dst, d);
    }
    FK_EXPECT(most == NBUF, "at most %d chunks in flight, want exactly %d", most, NBUF);
    FK_EXPECT(h.busy_buffers == 0, "%d host steps on a buffer a copy still used", h.busy_buffers);

    /* host + H2D: the host step must wait for a free buffer too. */
    begin("pressure");
    memset(dst, 0, n);
    fk_set_copy_delay(cudaMemcpyHostToDevice, 10000);
    host_init(&h, ch);
    h.in = src;
    rv = nx_staging_run(st, NULL, dst, n, host_step, &h);
    FK_EXPECT(rv == 0 && memcmp(dst, src, n) == 0 && h.busy_buffers == 0,
           "h2d only: rv %d, %d host steps on a busy buffer, bytes %s", rv, h.busy_buffers,
           memcmp(dst, src, n) ? "wrong" : "right");
    printf("pressure: %zu chunks through %d buffers, at most %d in flight\n", nc, NBUF, most);
    free(src);
    free(dst);
}

/* One failing run: src -> host (-> dst).  want: the error; host_max: host steps allowed. */
static void error_run(struct nx_staging *st, const char *what, bool with_out, int want,
                      int host_max, const char *text)
{
    size_t ch = nx_staging_chunk(st), nc = 10, n = nc * ch;
    uint8_t *src = random_bytes(n, 4), *dst = calloc(1, n);
    struct host h;
    host_init(&h, ch);
    h.src = src;
    if (want == -EPROTO)
        h.fail_at = host_max - 1;
    int rv = nx_staging_run(st, src, with_out ? dst : NULL, n, host_step, &h);
    int in_flight = fk_copies_in_flight();
    FK_EXPECT(rv == want, "%s: returned %d, want %d", what, rv, want);
    FK_EXPECT(h.calls <= host_max && h.bad_bytes == 0 && h.out_of_order == 0,
           "%s: %d host steps (at most %d), %d with wrong bytes, %d out of order", what, h.calls,
           host_max, h.bad_bytes, h.out_of_order);
    FK_EXPECT(in_flight == 0, "%s: %d copies still in flight after the run returned", what,
           in_flight);
    if (text)
        FK_EXPECT(strstr(nx_cuda_last_error(), text), "%s: the error text is \"%s\"", what,
               nx_cuda_last_error());
    if (with_out) /* a chunk past the failure never reaches the destination */
        for (size_t c = (size_t)host_max; c < nc; c++)
            for (size_t i = c * ch; i < (c + 1) * ch; i += 4096)
                if (dst[i]) {
                    FK_EXPECT(0, "%s: chunk %zu written after the failure", what, c);
                    c = nc;
                    break;
                }
    printf("errors: %s: %d after %d host steps, nothing in flight\n", what, rv, h.calls);
    free(src);
    free(dst);
    fk_reset();
    check_full_run(st, what);
}

static void case_errors(struct nx_staging *st)
{
    begin("errors");
    fk_set_copy_delay(cudaMemcpyDeviceToHost, 3000);
    fk_set_copy_delay(cudaMemcpyHostToDevice, 3000);
    /* D2H only: the 6th cudaMemcpyAsync is chunk 5's D2H; the host step sees 0-4 at most. */
    fk_fail_at.memcpy_async = 6;
    error_run(st, "cudaMemcpyAsync fails at chunk 5", false, -EIO, 5, "cudaMemcpyAsync");

    begin("errors");
    fk_set_copy_delay(cudaMemcpyDeviceToHost, 3000);
    fk_set_copy_delay(cudaMemcpyHostToDevice, 30000);
    /* The event record after a queued copy fails: the copy must not outlive the run. */
    fk_fail_at.event_record = 7;
    error_run(st, "cudaEventRecord fails behind a queued copy", true, -EIO, 10,
              "cudaEventRecord");

    begin("errors");
    fk_set_copy_delay(cudaMemcpyDeviceToHost, 3000);
    /* The 4th copy run (chunk 3's D2H) fails on the stream: chunks 0-2 at most. */
    fk_fail_at.copy_exec = 4;
    error_run(st, "the D2H of chunk 3 fails as it runs", false, -EIO, 3, NULL);

    begin("errors");
    fk_set_copy_delay(cudaMemcpyDeviceToHost, 3000);
    fk_set_copy_delay(cudaMemcpyHostToDevice, 3000);
    error_run(st, "the host step fails at chunk 5", true, -EPROTO, 6, NULL);
}

struct bg {
    struct nx_staging *st;
    const uint8_t *src;
    uint8_t *dst;
    size_t n;
    struct host h;
    volatile int rv;
};

static void *bg_run(void *arg)
{
    struct bg *b = arg;
    b->rv = nx_staging_run(b->st, b->src, b->dst, b->n, host_step, &b->h);
    return NULL;
}

static void case_shutdown(void)
{
    begin("shutdown");
    struct nx_staging *st = nx_staging_get(0);
    size_t ch = nx_staging_chunk(st), nc = 16;
    fk_set_copy_delay(cudaMemcpyDeviceToHost, 10000);
    fk_set_copy_delay(cudaMemcpyHostToDevice, 10000);
    struct bg b = {.st = st, .n = nc * ch, .rv = 1};
    b.src = random_bytes(b.n, 5);
    b.dst = calloc(1, b.n);
    host_init(&b.h, ch);
    b.h.src = b.src;
    b.h.us = 5000;
    pthread_t t;
    pthread_create(&t, NULL, bg_run, &b);
    while (__atomic_load_n(&b.h.calls, __ATOMIC_ACQUIRE) < 3 && fk_now() < g_deadline)
        sleep_us(1000);
    int in_flight = fk_copies_in_flight();
    double t0 = fk_now();
    nx_staging_fini();
    double t1 = fk_now();
    int in_flight_after = fk_copies_in_flight();
    int calls_at_fini = __atomic_load_n(&b.h.calls, __ATOMIC_ACQUIRE);
    pthread_join(t, NULL);
    FK_EXPECT(in_flight > 0, "no copies in flight when fini began: the case tests nothing");
    FK_EXPECT(b.h.calls == calls_at_fini, "the run went on after fini returned (%d host steps, "
           "%d when fini returned)", b.h.calls, calls_at_fini);
    FK_EXPECT(b.rv == -ECANCELED, "the stopped run returned %d, want -ECANCELED", b.rv);
    FK_EXPECT(b.h.calls < (int)nc && b.h.bad_bytes == 0 && b.h.out_of_order == 0,
           "the stopped run: %d host steps, %d bad, %d out of order", b.h.calls,
           b.h.bad_bytes, b.h.out_of_order);
    FK_EXPECT(in_flight_after == 0, "%d copies in flight after fini", in_flight_after);
    FK_EXPECT(fk_host_free_busy() == 0, "%d pinned buffers freed under a copy",
           fk_host_free_busy());
    FK_EXPECT(t1 - t0 < 1.0, "fini took %.0f ms", (t1 - t0) * 1e3);
    printf("shutdown: fini with %d copies in flight after %d of %zu host steps: %.0f ms, the "
           "run returned %d\n",
           in_flight, b.h.calls, nc, (t1 - t0) * 1e3, b.rv);
    free((void *)b.src);
    free(b.dst);

    /* A new engine after fini works; fini of an idle engine frees nothing in use. */
    begin("shutdown");
    st = nx_staging_get(0);
    FK_EXPECT(st != NULL, "nx_staging_get after fini");
    if (st)
        check_full_run(st, "fini");
    nx_staging_fini();
    FK_EXPECT(fk_host_free_busy() == 0, "pinned buffers freed under a copy");
}

int main(int argc, char **argv)
{
    fk_cases(argc, argv);
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    pthread_detach(wd);
    struct nx_staging *st = nx_staging_get(0);
    if (!st) {
        fprintf(stderr, "FAIL: nx_staging_get(0) (%s)\n", nx_cuda_last_error());
        return 1;
    }
    FK_EXPECT(nx_staging_get(0) == st, "a second nx_staging_get(0) made another engine");
    FK_EXPECT(nx_staging_get(1) == NULL, "an engine on a device that does not exist");
    if (fk_want_case("order"))
        case_order(st);
    if (fk_want_case("overlap"))
        case_overlap(st);
    if (fk_want_case("pressure"))
        case_pressure(st);
    if (fk_want_case("errors"))
        case_errors(st);
    nx_staging_fini();
    if (fk_want_case("shutdown"))
        case_shutdown();
    g_deadline = 0;
    fk_shutdown();
    printf("test_staging_logic: %s (nexard's staging logic against a fake CUDA runtime, not "
           "CUDA)\n",
           fk_failures ? "FAILED" : "ok");
    return fk_failures ? 1 : 0;
}
