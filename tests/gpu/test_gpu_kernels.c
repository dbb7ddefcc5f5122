/*
 * test_gpu_kernels.c - the GPU reduction kernels (cuda/kernels.cu), one process, no
 * daemon: every dtype x op x source count against two independent references,
 *   - tests/lib's reference arithmetic on exact patterns (what every collective test
 *     compares with), and
 *   - the daemon's CPU kernels (daemon/adapter/reduce.c) on arbitrary bits, NaNs, -0,
 *     subnormals and infinities included: the promise is the same bits on both sides;
 * plus the prefix kernels (inclusive and exclusive, with missing outputs) and the
 * identities.  In-place operation (destination == a source) is exercised throughout.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu_util.h"
#include "kernels.h"
#include "reduce.h"
#include "refnum.h"

#define MAXR 6

static int failures;

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        tl_log("FAIL: cudaMalloc(%zu)", bytes);
        exit(1);
    }
    return p;
}

static void h2d(void *d, const void *h, size_t bytes)
{
    if (cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        exit(1);
}

static void d2h(void *h, const void *d, size_t bytes)
{
    if (cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        exit(1);
}

static void sync_or_die(const char *what)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        tl_log("FAIL: %s: %s", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* Random bits of every kind a float can hold; integers get plain random bits. */
static void random_bits(int dtype, uint64_t seed, void *out, size_t n)
{
    size_t es = tl_esize(dtype);
    uint8_t *p = out;
    for (size_t i = 0; i < n * es; i += 8) {
        uint64_t v = tl_mix64(seed * 0x9e3779b97f4a7c15ull + i);
        memcpy(p + i, &v, n * es - i < 8 ? n * es - i : 8);
    }
    /* Sprinkle specials: zeros of both signs, infinities, NaNs, equal neighbours. */
    for (size_t i = 0; i < n; i += 7) {
        uint64_t k = tl_mix64(seed + i) % 6;
        uint64_t bits = 0;
        if (tl_dtype_is_float(dtype)) {
            static const uint64_t f32[] = {0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00001, 1};
            static const uint64_t f64[] = {0, 1ull << 63, 0x7ffull << 52, 0xfffull << 52,
                                           (0x7ffull << 52) | 5, 1};
            static const uint64_t f16[] = {0, 0x8000, 0x7c00, 0xfc00, 0x7c01, 1};
            static const uint64_t bf16[] = {0, 0x8000, 0x7f80, 0xff80, 0x7f81, 1};
            bits = dtype == NEXAR_F32 ? f32[k] : dtype == NEXAR_F64 ? f64[k]
                 : dtype == NEXAR_F16 ? f16[k] : bf16[k];
            memcpy(p + i * es, &bits, es);
        }
    }
}

/* SUM and PROD leave a NaN's payload unspecified (reduce.h): x86 and the GPU propagate
 * different ones.  Before comparing those, every NaN becomes one canonical pattern. */
static void canon_nans(int dtype, int op, void *buf, size_t n)
{
    if (!tl_dtype_is_float(dtype) || (op != NEXAR_SUM && op != NEXAR_PROD))
        return;
    for (size_t i = 0; i < n; i++) {
        if (dtype == NEXAR_F32) {
            uint32_t *v = (uint32_t *)buf + i;
            if ((*v & 0x7fffffffu) > 0x7f800000u)
                *v = 0x7fc00000u;
        } else if (dtype == NEXAR_F64) {
            uint64_t *v = (uint64_t *)buf + i;
            if ((*v & ~(1ull << 63)) > (0x7ffull << 52))
                *v = 0x7ff8ull << 48;
        } else {
            uint16_t *v = (uint16_t *)buf + i, inf = dtype == NEXAR_F16 ? 0x7c00 : 0x7f80;
            if ((*v & 0x7fff) > inf)
                *v = inf | (dtype == NEXAR_F16 ? 0x200 : 0x40);
        }
    }
}

static int run_reduce(int dtype, int op, int nsrc, size_t n, int exact, uint64_t seed)
{
    size_t es = tl_esize(dtype), bytes = n * es;
    void *h_in[MAXR], *d_in[MAXR], *h_gpu = malloc(bytes ? bytes : 1);
    void *h_ref = malloc(bytes ? bytes : 1);
    const void *srcs[MAXR];
    char ctx[160];
    for (int r = 0; r < nsrc; r++) {
        h_in[r] = malloc(bytes ? bytes : 1);
        if (exact)
            tl_pattern(dtype, op, seed, r, 0, h_in[r], n);
        else
            random_bits(dtype, seed + (uint64_t)r * 1000003u, h_in[r], n);
        d_in[r] = dev_alloc(bytes);
        h2d(d_in[r], h_in[r], bytes);
        srcs[r] = d_in[r];
    }
    if (exact)
        tl_reduce(dtype, op, h_ref, (const void *const *)h_in, nsrc, n);
    else
        nx_reduce_fanout(&h_ref, 1, (const void *const *)h_in, (size_t)nsrc, n, (uint8_t)dtype,
                         (uint8_t)op);
    /* In place into source 0, and a second destination that is not a source. */
    void *d_extra = dev_alloc(bytes);
    void *dsts[2] = {d_in[0], d_extra};
    int rv = nx_cuk_reduce(dsts, 2, srcs, (size_t)nsrc, n, (uint8_t)dtype, (uint8_t)op, NULL);
    sync_or_die("reduce kernel");
    snprintf(ctx, sizeof(ctx), "reduce %s %s nsrc=%d n=%zu %s", tl_dtype_name(dtype),
             tl_op_name(op), nsrc, n, exact ? "vs reference" : "vs CPU kernels, random bits");
    int bad = rv != 0;
    if (rv)
        tl_log("FAIL %s: launcher returned %d", ctx, rv);
    canon_nans(dtype, op, h_ref, n);
    for (int k = 0; k < 2 && !bad; k++) {
        d2h(h_gpu, dsts[k], bytes);
        canon_nans(dtype, op, h_gpu, n);
        bad |= tl_check_elems(ctx, dtype, h_ref, h_gpu, n) != 0;
    }
    for (int r = 0; r < nsrc; r++) {
        cudaFree(d_in[r]);
        free(h_in[r]);
    }
    cudaFree(d_extra);
    free(h_gpu);
    free(h_ref);
    return bad;
}

static int run_scan(int dtype, int op, int nranks, size_t n, int exclusive, uint64_t seed)
{
    size_t es = tl_esize(dtype), bytes = n * es;
    void *h_in[MAXR], *h_ref[MAXR], *d_in[MAXR], *dsts_h[MAXR], *h_gpu = malloc(bytes ? bytes : 1);
    void *dsts[MAXR];
    const void *srcs[MAXR];
    char ctx[160];
    for (int r = 0; r < nranks; r++) {
        h_in[r] = malloc(bytes ? bytes : 1);
        h_ref[r] = malloc(bytes ? bytes : 1);
        random_bits(dtype, seed + (uint64_t)r * 7919u, h_in[r], n);
        d_in[r] = dev_alloc(bytes);
        h2d(d_in[r], h_in[r], bytes);
        srcs[r] = d_in[r];
        dsts[r] = (r % 3 == 2) ? NULL : d_in[r]; /* in place; every third output skipped */
        dsts_h[r] = dsts[r] ? h_ref[r] : NULL;
    }
    nx_scan_fanout(dsts_h, (const void *const *)h_in, (size_t)nranks, n, (uint8_t)dtype,
                   (uint8_t)op, exclusive != 0);
    int rv = nx_cuk_scan(dsts, srcs, (size_t)nranks, n, (uint8_t)dtype, (uint8_t)op,
                         exclusive, NULL);
    sync_or_die("scan kernel");
    snprintf(ctx, sizeof(ctx), "%s %s %s nranks=%d n=%zu vs CPU kernels",
             exclusive ? "exscan" : "scan", tl_dtype_name(dtype), tl_op_name(op), nranks, n);
    int bad = rv != 0;
    for (int r = 0; r < nranks && !bad; r++) {
        d2h(h_gpu, d_in[r], bytes);
        /* A skipped output keeps its input. */
        void *want = dsts[r] ? h_ref[r] : h_in[r];
        if (dsts[r]) {
            canon_nans(dtype, op, want, n);
            canon_nans(dtype, op, h_gpu, n);
        }
        bad |= tl_check_elems(ctx, dtype, want, h_gpu, n) != 0;
    }
    for (int r = 0; r < nranks; r++) {
        cudaFree(d_in[r]);
        free(h_in[r]);
        free(h_ref[r]);
    }
    free(h_gpu);
    return bad;
}

static int run_fill(int dtype, int op, size_t n)
{
    size_t bytes = n * tl_esize(dtype);
    void *d = dev_alloc(bytes), *h = malloc(bytes), *ref = malloc(bytes);
    tl_fill_identity(dtype, op, ref, n);
    int rv = nx_cuk_fill_identity(d, n, (uint8_t)dtype, (uint8_t)op, NULL);
    sync_or_die("fill kernel");
    d2h(h, d, bytes);
    char ctx[96];
    snprintf(ctx, sizeof(ctx), "identity %s %s", tl_dtype_name(dtype), tl_op_name(op));
    int bad = rv != 0 || tl_check_elems(ctx, dtype, ref, h, n) != 0;
    cudaFree(d);
    free(h);
    free(ref);
    return bad;
}

int main(void)
{
    gx_require_gpu("test_gpu_kernels");
    tl_set_log_tag("gpu-kernels");
    static const size_t counts[] = {1, 7, 1000, 65537};
    int cases = 0;
    for (int dt = 0; dt < NEXAR_DTYPE_COUNT; dt++) {
        for (int op = 0; op < NEXAR_OP_COUNT; op++) {
            for (int nsrc = 1; nsrc <= MAXR; nsrc++) {
                for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
                    uint64_t seed = (uint64_t)(dt * 131 + op * 17 + nsrc * 5) + k;
                    failures += run_reduce(dt, op, nsrc, counts[k], 1, seed);
                    failures += run_reduce(dt, op, nsrc, counts[k], 0, seed);
                    cases += 2;
                }
            }
            for (int ex = 0; ex < 2; ex++)
                for (int nr = 1; nr <= MAXR; nr++, cases++)
                    failures += run_scan(dt, op, nr, 4099, ex, (uint64_t)(dt * 7 + op + nr));
            failures += run_fill(dt, op, 1025);
            cases++;
        }
    }
    /* The launchers refuse what they cannot do, and do nothing for nothing. */
    void *p = dev_alloc(64);
    const void *src[NX_CUK_MAX_PTRS + 1];
    void *dst[1] = {p};
    for (int i = 0; i <= NX_CUK_MAX_PTRS; i++)
        src[i] = p;
    if (nx_cuk_reduce(dst, 1, src, NX_CUK_MAX_PTRS + 1, 4, NEXAR_F32, NEXAR_SUM, NULL) != -7 /* -E2BIG */ ||
        nx_cuk_reduce(dst, 1, src, 1, 4, NEXAR_DTYPE_COUNT, NEXAR_SUM, NULL) != -22 ||
        nx_cuk_reduce(dst, 1, src, 1, 0, NEXAR_F32, NEXAR_SUM, NULL) != 0) {
        tl_log("FAIL: a launcher accepted bad arguments");
        failures++;
    }
    cudaFree(p);
    if (failures) {
        tl_log("FAILED: %d of %d kernel cases", failures, cases);
        return 1;
    }
    tl_log("all %d kernel cases (10 dtypes x 4 ops; reduce, scan, exscan, identity) match "
           "the references bit for bit", cases);
    return 0;
}
