/*
 * test_algo_bench.c - what the xop engine costs in CPU: N simulated nodes on one core,
 * messages through the in-memory pump (which copies each, as a transport would), no
 * network.  For each op it prints the time, the op's bytes per node divided by the time
 * ("node GB/s": how fast one core gets every node through), the messages and the same
 * core's memcpy speed for scale.  Not a test: `meson test --benchmark`, or run it.
 *
 *   test_algo_bench [MiB] [nodes]      default 64 MiB, N = 2, 4, 8
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "nexar.h"
#include "shm_abi.h"
#include "test_algo.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void bench(uint8_t kind, uint8_t algo, uint32_t N, uint64_t bytes)
{
    struct ta_case c = {.kind = kind, .dtype = NEXAR_F32, .redop = NEXAR_SUM, .algo = algo,
                        .nnodes = N, .vals = TA_EXACT, .seed = 1};
    uint64_t rng = 7;
    ta_place(&c, N, false, &rng);
    c.count = bytes / 4 / (kind == NX_K_ALL_GATHER ? N : 1);
    struct ta_bufs b;
    ta_setup(&c, &b);
    struct ta_pump_opts o = {.seed = 3};
    struct ta_pump *p = ta_pump_new(N, &o);
    for (uint32_t n = 0; n < N; n++) {
        struct nx_xop_desc d;
        struct nx_xnet net = ta_pump_net(p, n);
        struct nx_xop *x;
        char err[256];
        ta_desc(&c, &b, n, &d);
        if (nx_xop_create(&d, &net, &x, err, sizeof(err)) < 0) {
            fprintf(stderr, "%s\n", err);
            exit(1);
        }
        ta_pump_set(p, n, x);
    }
    double t0 = now();
    int left = ta_pump_run(p);
    double dt = now() - t0;
    printf("%-11s %-5s N=%u %6.1f MiB  %8.1f ms  node GB/s %6.2f  %7" PRIu64 " msgs%s\n",
           nx_kind_name(kind), nx_algo_name(algo), N, bytes / 1048576.0, dt * 1e3,
           bytes / dt / 1e9 * N, ta_pump_msgs(p), left ? "  STALLED" : "");
    ta_pump_free(p);
    ta_free(&b);
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 0) : 64;
    uint32_t only = argc > 2 ? (uint32_t)atoi(argv[2]) : 0;
    uint64_t bytes = mib << 20;
    nx_log_init(NX_LOG_WARN, 0);
    char *a = malloc(bytes), *z = malloc(bytes);
    memset(a, 1, bytes);
    memset(z, 2, bytes);
    double t0 = now();
    memcpy(z, a, bytes);
    double dt = now() - t0;
    volatile char sink = z[bytes / 2]; /* the copy must happen */
    (void)sink;
    printf("memcpy %.1f MiB: %.2f GB/s\n", mib * 1.0, bytes / dt / 1e9);
    free(a);
    free(z);
    static const uint32_t nodes[] = {2, 4, 8};
    for (size_t i = 0; i < 3; i++) {
        uint32_t N = nodes[i];
        if (only && N != only)
            continue;
        bench(NX_K_ALL_REDUCE, NX_ALGO_RING, N, bytes);
        bench(NX_K_ALL_REDUCE, NX_ALGO_HD, N, bytes);
        bench(NX_K_ALL_REDUCE, NX_ALGO_RD, N, bytes);
        bench(NX_K_BROADCAST, NX_ALGO_RING, N, bytes);
        bench(NX_K_BROADCAST, NX_ALGO_TREE, N, bytes);
        bench(NX_K_ALL_GATHER, NX_ALGO_RING, N, bytes);
        bench(NX_K_REDUCE_SCATTER, NX_ALGO_RING, N, bytes / N);
    }
    nx_log_fini();
    return 0;
}
