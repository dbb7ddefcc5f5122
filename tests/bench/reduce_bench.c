/*
 * Throughput of the CPU reduce kernels: every dtype x op with 2 sources into 1 dst, plus a
 * few fan-in/fan-out shapes, next to memcpy and a plain c = a + b loop measured in the same
 * run (the memory-bound ceilings of this machine).
 *
 * GB/s counts every byte the call must move: (nsrc + ndst) * size (in place: read dst,
 * read src, write dst), 10^9 bytes per GB.  The figure is from the fastest of the runs: on
 * a shared machine other work only ever slows a run down, so the best run is the most
 * repeatable estimate.  Shapes whose buffers fit in the last-level cache together (in
 * place: two buffers) read partly from cache and can beat the baselines.
 *
 * Usage: reduce_bench [bytes per buffer, K/M suffix] [runs]; the default is 16M and 11.  A
 * size that fits in cache (e.g. 128K) shows the kernels' compute ceiling instead.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "half.h"
#include "nexar.h"
#include "reduce.h"

static const char *const dt_name[] = { "F32", "F64", "F16", "BF16", "I8",
                                       "U8",  "I32", "U32", "I64",  "U64" };
static const size_t dt_size[] = { 4, 8, 2, 2, 1, 1, 4, 4, 8, 8 };

static size_t bytes_per_buf;
static int runs;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Values near 1, so that PROD chains neither overflow nor slow down on subnormals. */
static void fill(void *buf, size_t n, uint8_t dt, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        float f = 1.0f + (float)(x >> 8) * 0x1p-27f; /* [1, 1.125) */
        switch (dt) {
        case NEXAR_F32:
            ((float *)buf)[i] = f;
            break;
        case NEXAR_F64:
            ((double *)buf)[i] = f;
            break;
        case NEXAR_F16:
            ((uint16_t *)buf)[i] = nx_f32_to_f16(f);
            break;
        case NEXAR_BF16:
            ((uint16_t *)buf)[i] = nx_f32_to_bf16(f);
            break;
        default:
            memcpy((unsigned char *)buf + i * dt_size[dt], &x, dt_size[dt] < 4 ? dt_size[dt] : 4);
            if (dt_size[dt] == 8)
                memcpy((unsigned char *)buf + i * 8 + 4, &x, 4);
            break;
        }
    }
}

__attribute__((noinline)) static void add_f32(float *restrict c, const float *restrict a,
                                              const float *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

enum kind { K_MEMCPY, K_ADD, K_FANOUT, K_INPLACE, K_SCAN };

struct job {
    enum kind kind;
    uint8_t dt, op;
    size_t nsrc, ndst;
    void **bufs; /* sources first, then dsts */
};

static void run_once(const struct job *j)
{
    size_t n = bytes_per_buf / dt_size[j->dt];
    void **b = j->bufs;
    int rc = 0;
    switch (j->kind) {
    case K_MEMCPY:
        memcpy(b[1], b[0], bytes_per_buf);
        break;
    case K_ADD:
        add_f32(b[2], b[0], b[1], n);
        break;
    case K_FANOUT:
        rc = nx_reduce_fanout(b + j->nsrc, j->ndst, (const void *const *)b, j->nsrc, n, j->dt,
                              j->op);
        break;
    case K_INPLACE:
        rc = nx_reduce_inplace(b[1], b[0], n, j->dt, j->op);
        break;
    case K_SCAN:
        rc = nx_scan_fanout(b + j->nsrc, (const void *const *)b, j->nsrc, n, j->dt, j->op,
                            false);
        break;
    }
    if (rc != 0) {
        fprintf(stderr, "reduce call failed: %d\n", rc);
        exit(1);
    }
}

/* GB/s of the fastest run, after one warm-up. */
static double measure(const struct job *j, size_t bufs_touched)
{
    double best = 1e30;
    run_once(j);
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        run_once(j);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return (double)(bufs_touched * bytes_per_buf) / best / 1e9;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    bytes_per_buf = argc > 1 ? strtoul(argv[1], &end, 10) : 16u << 20;
    if (end && (*end == 'K' || *end == 'k'))
        bytes_per_buf <<= 10;
    else if (end && (*end == 'M' || *end == 'm'))
        bytes_per_buf <<= 20;
    bytes_per_buf &= ~(size_t)63;
    runs = argc > 2 ? atoi(argv[2]) : 11;
    if (bytes_per_buf == 0 || runs < 1) {
        fprintf(stderr, "usage: reduce_bench [bytes per buffer, K/M suffix] [runs]\n");
        return 2;
    }
    void *bufs[10];
    for (int i = 0; i < 10; i++) {
        bufs[i] = aligned_alloc(64, bytes_per_buf);
        if (!bufs[i]) {
            perror("aligned_alloc");
            return 1;
        }
        memset(bufs[i], 0, bytes_per_buf); /* fault the pages in before timing */
    }
    const char *isa = getenv("NEXAR_REDUCE_ISA");
    printf("reduce-kernels: %zu KiB per buffer, best of %d runs, kernels: %s\n",
           bytes_per_buf >> 10, runs, isa ? isa : "best available");
    printf("GB/s = (sources + destinations) * buffer size / time\n\n");

    fill(bufs[0], bytes_per_buf / 4, NEXAR_F32, 1);
    fill(bufs[1], bytes_per_buf / 4, NEXAR_F32, 2);
    printf("%-28s %6.1f GB/s\n", "baseline memcpy",
           measure(&(struct job){ K_MEMCPY, NEXAR_U8, 0, 1, 1, bufs }, 2));
    double add = measure(&(struct job){ K_ADD, NEXAR_F32, 0, 2, 1, bufs }, 3);
    printf("%-28s %6.1f GB/s\n\n", "baseline c[i] = a[i] + b[i]", add);

    static const char *const op_name[] = { "SUM", "PROD", "MIN", "MAX" };
    printf("2 sources -> 1 dst   %7s %7s %7s %7s   (GB/s)\n", op_name[0], op_name[1],
           op_name[2], op_name[3]);
    for (uint8_t dt = 0; dt < NEXAR_DTYPE_COUNT; dt++) {
        size_t n = bytes_per_buf / dt_size[dt];
        fill(bufs[0], n, dt, 1);
        fill(bufs[1], n, dt, 2);
        printf("%-20s", dt_name[dt]);
        for (uint8_t op = 0; op < NEXAR_OP_COUNT; op++)
            printf(" %7.1f", measure(&(struct job){ K_FANOUT, dt, op, 2, 1, bufs }, 3));
        printf("\n");
    }

    printf("\nother shapes, SUM               F32     F16    BF16\n");
    static const struct {
        const char *name;
        enum kind kind;
        size_t nsrc, ndst;
    } shapes[] = {
        { "4 sources -> 1 dst", K_FANOUT, 4, 1 },
        { "8 sources -> 1 dst", K_FANOUT, 8, 1 },
        { "2 sources -> 2 dsts", K_FANOUT, 2, 2 },
        { "4 sources -> 4 dsts", K_FANOUT, 4, 4 },
        { "inplace dst += src", K_INPLACE, 1, 1 },
        { "inclusive scan, 4 ranks", K_SCAN, 4, 4 },
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        printf("%-28s", shapes[s].name);
        uint8_t dts[3] = { NEXAR_F32, NEXAR_F16, NEXAR_BF16 };
        for (int d = 0; d < 3; d++) {
            size_t n = bytes_per_buf / dt_size[dts[d]];
            for (size_t i = 0; i < shapes[s].nsrc + 1; i++)
                fill(bufs[i], n, dts[d], (uint32_t)i + 1);
            struct job j = { shapes[s].kind, dts[d], NEXAR_SUM, shapes[s].nsrc, shapes[s].ndst,
                             bufs };
            printf(" %7.1f", measure(&j, j.nsrc + j.ndst + (j.kind == K_INPLACE)));
        }
        printf("\n");
    }
    for (int i = 0; i < 10; i++)
        free(bufs[i]);
    return 0;
}
