/*
 * bench_staging.c - device buffers across nodes against host buffers across the same
 * nodes, and the copy engines' peak, measured in the same run on one GPU:
 *
 *   peak D2H / H2D   one cudaMemcpyAsync of the largest size between device memory and
 *                    pinned (cudaHostAlloc) memory, each direction alone, best of reps;
 *   host             all_reduce (f32 sum) and broadcast (root 0) of malloc buffers
 *                    between 2 simulated nodes x 1 rank: the network path alone;
 *   device           the same ops on cudaMalloc buffers: nexard stages each 4 MiB part
 *                    to pinned memory and back (node/devstage.c, nx_cuda_exec_copy) around
 *                    the same network path.
 *
 * Time per op is the slowest rank's, best of reps, the host and device ops taking turns;
 * busbw as nccl-tests (all_reduce
 * 2(n-1)/n S/t, broadcast S/t).  Staging is free when device/host is 1: its copies hide
 * under the network steps of other parts.  The target (issue 15) is device >= 80 % of
 * host at 64 MiB and above, printed as met or MISSED; the exit status says only whether
 * every op ran and the checked result was exact.
 *
 *   bench_staging [--mib LIST] [--reps N]      (LIST: sizes in MiB, default 4,64,256)
 */
#include <cuda_runtime_api.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "harness.h"

#define MAX_SIZES 8

static size_t g_mib[MAX_SIZES] = {4, 64, 256};
static int g_nsizes = 3, g_reps = 5;

#define CU(call) GX_CU(call, -1)

/* Best of reps of a cudaMemcpyAsync of bytes in kind: GB/s, or -1. */
static double peak(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                   cudaStream_t s)
{
    double best = 0;
    for (int i = 0; i < g_reps; i++) {
        double t0 = tl_now();
        CU(cudaMemcpyAsync(dst, src, bytes, kind, s));
        CU(cudaStreamSynchronize(s));
        double gbs = bytes / (tl_now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* One op of count floats on buf; broadcast when bcast.  Its status. */
static nexar_status_t op(nexar_comm_t *w, void *buf, size_t count, int bcast)
{
    return bcast ? nexar_broadcast(w, buf, count, NEXAR_F32, 0)
                 : nexar_all_reduce(w, buf, count, NEXAR_F32, NEXAR_SUM);
}

/* The slowest rank's seconds for one op on buf; -1 on an error. */
static double once(nexar_comm_t *w, void *buf, size_t count, int bcast, const char *what)
{
    if (nexar_barrier(w) != NEXAR_OK)
        goto fail;
    double t0 = tl_now();
    if (op(w, buf, count, bcast) != NEXAR_OK)
        goto fail;
    double dt = tl_now() - t0;
    if (nexar_all_reduce(w, &dt, 1, NEXAR_F64, NEXAR_MAX) != NEXAR_OK)
        goto fail;
    return dt;
fail:
    tl_log("FAIL %s: %s", what, nexar_last_error());
    return -1;
}

/* Best of reps on host buffers (*th) and on device buffers (*td), the two taking turns,
 * so that the ratio compares the same minutes of a machine whose speed drifts (a host
 * figure moved 0.72-1.00 GB/s between runs).  -1 on an error. */
static int timed(nexar_comm_t *w, void *host, void *dev, size_t count, int bcast,
                 const char *what, double *th, double *td)
{
    *th = *td = -1;
    for (int i = -1; i < g_reps; i++) { /* i = -1: the warm-up */
        double h = once(w, host, count, bcast, what), d = once(w, dev, count, bcast, what);
        if (h < 0 || d < 0)
            return -1;
        if (i >= 0 && (*th < 0 || h < *th))
            *th = h;
        if (i >= 0 && (*td < 0 || d < *td))
            *td = d;
    }
    return 0;
}

/* The device result of an all_reduce of gx_fill_f32 (seed = rank) against the host's. */
static int check(nexar_comm_t *w, float *d, size_t n)
{
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);
    if (gx_fill_f32(d, n, (unsigned)me, NULL))
        return -1;
    CU(cudaDeviceSynchronize());
    if (nexar_all_reduce(w, d, n, NEXAR_F32, NEXAR_SUM) != NEXAR_OK) {
        tl_log("FAIL check all_reduce: %s", nexar_last_error());
        return -1;
    }
    float *h = malloc(n * sizeof(float));
    CU(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        float want = 0;
        for (int r = 0; r < size; r++)
            want += (float)((int)((i * 31 + (unsigned)r) % 97) - 48);
        if (h[i] != want) {
            tl_log("FAIL: device all_reduce element %zu is %g, want %g", i, h[i], want);
            bad = 1;
        }
    }
    free(h);
    return bad ? -1 : 0;
}

static int rank_main(struct hx_rank *r)
{
    (void)r;
    CU(cudaSetDevice(0));
    CU(cudaFree(0));
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);
    size_t maxb = 0;
    for (int i = 0; i < g_nsizes; i++)
        maxb = g_mib[i] << 20 > maxb ? g_mib[i] << 20 : maxb;
    void *dev = NULL, *pinned = NULL, *host = malloc(maxb);
    cudaStream_t s;
    CU(cudaMalloc(&dev, maxb));
    CU(cudaMemset(dev, 0, maxb));
    memset(host, 0, maxb);
    int fail = 0;
    if (me == 0) {
        struct cudaDeviceProp prop;
        CU(cudaGetDeviceProperties(&prop, 0));
        CU(cudaHostAlloc(&pinned, maxb, cudaHostAllocDefault));
        CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        double d2h = peak(pinned, dev, maxb, cudaMemcpyDeviceToHost, s);
        double h2d = peak(dev, pinned, maxb, cudaMemcpyHostToDevice, s);
        cudaStreamDestroy(s);
        cudaFreeHost(pinned);
        printf("# staging across nodes on %s: %d simulated nodes x 1 rank, best of %d\n",
               prop.name, size, g_reps);
        printf("# copy engines, %zu MiB pinned: D2H %.2f GB/s, H2D %.2f GB/s\n", maxb >> 20,
               d2h, h2d);
        printf("# %-10s %8s %12s %12s %12s %8s\n", "op", "MiB", "host GB/s", "device GB/s",
               "staging ms", "dev/host");
        fail |= d2h < 0 || h2d < 0;
    }
    int met = 1, judged = 0;
    for (int b = 0; b < 2 && !fail; b++) {
        for (int i = 0; i < g_nsizes && !fail; i++) {
            size_t bytes = g_mib[i] << 20, count = bytes / sizeof(float);
            const char *name = b ? "broadcast" : "all_reduce";
            double th, td;
            if (timed(w, host, dev, count, b, name, &th, &td) < 0) {
                fail = 1;
                break;
            }
            double f = b ? 1.0 : 2.0 * (size - 1) / size;
            double bh = f * bytes / th / 1e9, bd = f * bytes / td / 1e9;
            if (g_mib[i] >= 64) {
                judged = 1;
                met &= bd >= 0.8 * bh;
            }
            if (me == 0)
                printf("  %-10s %8zu %12.2f %12.2f %12.2f %8.2f\n", name, g_mib[i], bh, bd,
                       (td - th) * 1e3, bd / bh);
        }
    }
    if (!fail)
        fail = check(w, dev, maxb / sizeof(float)) != 0;
    if (me == 0 && !fail && judged)
        printf("target device >= 0.8x host at 64 MiB and above: %s\n", met ? "met" : "MISSED");
    cudaFree(dev);
    free(host);
    nexar_finalize();
    return fail;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"mib", required_argument, NULL, 'm'},
                                       {"reps", required_argument, NULL, 'r'},
                                       {0, 0, 0, 0}};
    char *fwd[] = {argv[0], "--world", "2", "--nodes", "2", NULL};
    if (!getenv("GX_AS_RANK")) {
        for (int ch; (ch = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
            if (ch == 'r') {
                g_reps = atoi(optarg);
            } else if (ch == 'm') {
                g_nsizes = 0;
                for (char *t = strtok(optarg, ","); t && g_nsizes < MAX_SIZES; t = strtok(NULL, ","))
                    g_mib[g_nsizes++] = strtoul(t, NULL, 10);
            } else {
                return 64;
            }
        }
        if (g_reps < 1 || g_nsizes < 1) {
            fprintf(stderr, "usage: bench_staging [--mib LIST] [--reps N]\n");
            return 64;
        }
    }
    /* The ranks run this program again: the options reach them in the environment. */
    char env[160];
    const char *e = getenv("GX_BENCH_ARGS");
    if (e) {
        g_nsizes = 0;
        char *dup = strdup(e), *save = NULL;
        g_reps = atoi(strtok_r(dup, ":", &save));
        for (char *t = strtok_r(NULL, ",", &save); t && g_nsizes < MAX_SIZES;
             t = strtok_r(NULL, ",", &save))
            g_mib[g_nsizes++] = strtoul(t, NULL, 10);
        free(dup);
    } else {
        int n = snprintf(env, sizeof(env), "%d:", g_reps);
        for (int i = 0; i < g_nsizes && n < (int)sizeof(env); i++)
            n += snprintf(env + n, sizeof(env) - n, "%s%zu", i ? "," : "", g_mib[i]);
        setenv("GX_BENCH_ARGS", env, 1);
    }
    optind = 1;
    return gx_job_main(5, fwd, "bench_staging", "staging", rank_main, 500);
}
