/*
 * test_algo.c - every inter-node algorithm (daemon/algo*.c) x kind x dtype x reduce op x
 * node count x count, run among simulated nodes by the message pump (test_algo_pump.c)
 * and checked against the reference (test_algo_ref.c).
 *
 *   test_algo [--long] [--seed N] [--verbose] [--only KIND]
 *
 * Default: nodes {1,2,3,4,5,7,8}, counts {0, 1, odd, a non-multiple of N, many pipeline
 * pieces}, every dtype and op; shuffled rank placements, random windows, chunk sizes,
 * in-flight limits, start times, delivery orders; FIFO per node pair, or any order
 * ("chaos"); payloads at odd addresses now and then.  --long (or NX_SIM_LONG=1): more
 * seeds, up to 16 nodes and 64 ranks, bigger counts.  A failure prints the case; rerun
 * it with --seed.
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

static long failures, cases;
static bool verbose;

static int run_case(const struct ta_case *c, uint64_t seed)
{
    struct ta_bufs b;
    char name[512], why[512], err[256];
    ta_setup(c, &b);
    uint64_t rng = seed ^ 0x5bd1e995u;
    struct ta_pump_opts o = {.seed = seed, .chaos = ta_rand(&rng) % 4 == 0,
                             .misalign = ta_rand(&rng) % 8 == 0,
                             .inflight_limit = c->max_inflight,
                             .lend = ta_rand(&rng) % 2 == 0,
                             .take = ta_rand(&rng) % 2 == 0,
                             .stream = ta_rand(&rng) % 2 == 0};
    struct ta_pump *p = ta_pump_new(c->nnodes, &o);
    uint64_t pe = 0;
    int rv = 0;
    cases++;
    for (uint32_t n = 0; n < c->nnodes; n++) {
        struct nx_xop_desc d;
        struct nx_xnet net = ta_pump_net(p, n);
        struct nx_xop *x;
        ta_desc(c, &b, n, &d);
        if (nx_xop_create(&d, &net, &x, err, sizeof(err)) < 0) {
            ta_name(c, name, sizeof(name));
            fprintf(stderr, "FAIL create node %u: %s\n  case %s\n", n, err, name);
            rv = -1;
            goto out;
        }
        ta_pump_set(p, n, x);
        struct nx_xop_stats st;
        nx_xop_stats(x, &st);
        if (n > 0 && st.piece_elems != pe) {
            ta_name(c, name, sizeof(name));
            fprintf(stderr, "FAIL node %u pieces of %" PRIu64 ", node 0 of %" PRIu64
                    "\n  case %s\n", n, st.piece_elems, pe, name);
            rv = -1;
        }
        pe = st.piece_elems;
    }
    if (rv < 0)
        goto out;
    int left = ta_pump_run(p);
    for (uint32_t n = 0; n < c->nnodes && rv == 0; n++) {
        const char *text;
        int st = ta_pump_status(p, n, &text);
        if (st != 0) {
            ta_name(c, name, sizeof(name));
            fprintf(stderr, "FAIL node %u %s (status %d, %d nodes unfinished): %s\n  case %s\n",
                    n, st < 0 ? "stalled" : "failed", st, left, text, name);
            rv = -1;
        }
    }
    if (rv == 0 && ta_check(c, &b, pe, why, sizeof(why)) < 0) {
        ta_name(c, name, sizeof(name));
        fprintf(stderr, "FAIL %s\n  case %s\n", why, name);
        rv = -1;
    }
    if (verbose && rv == 0) {
        ta_name(c, name, sizeof(name));
        printf("ok %s (%" PRIu64 " msgs)\n", name, ta_pump_msgs(p));
    }
out:
    ta_pump_free(p);
    ta_free(&b);
    if (rv < 0)
        failures++;
    return rv;
}

static const uint8_t kinds[] = {
    NX_K_ALL_REDUCE, NX_K_ALL_REDUCE_BUCKETED, NX_K_BROADCAST, NX_K_REDUCE,
    NX_K_ALL_GATHER, NX_K_REDUCE_SCATTER, NX_K_GATHER, NX_K_SCATTER,
    NX_K_ALL_TO_ALL, NX_K_SCAN, NX_K_EXSCAN, NX_K_BARRIER,
};

struct sweep {
    const uint32_t *nodes;
    size_t nnodes;
    uint32_t max_ranks_per_node;
    uint64_t big; /* the "many pieces" count */
    int rounds;   /* seeds per point */
};

static void sweep_kind(uint8_t kind, const struct sweep *sw, uint64_t *rng)
{
    bool red = ta_kind_reduces(kind);
    for (int algo = 1; algo < NX_ALGO_COUNT; algo++) {
        if (!nx_algo_supported(kind, (enum nx_algo)algo))
            continue;
        for (size_t ni = 0; ni < sw->nnodes; ni++) {
            uint32_t N = sw->nodes[ni];
            for (uint8_t dt = 0; dt < NEXAR_DTYPE_COUNT; dt++) {
                if (kind == NX_K_BARRIER && dt > 0)
                    break;
                for (uint8_t op = 0; op < (red ? NEXAR_OP_COUNT : 1); op++) {
                    uint64_t counts[5] = {0, 1, 7, 3 * (uint64_t)N + 1, sw->big};
                    for (int ci = 0; ci < 5; ci++) {
                        for (int round = 0; round < sw->rounds; round++) {
                            struct ta_case c = {.kind = kind, .dtype = dt, .redop = op,
                                                .algo = (uint8_t)algo, .nnodes = N,
                                                .count = counts[ci]};
                            static const uint64_t chunks[] = {8, 24, 64, 200};
                            c.seed = ta_rand(rng);
                            uint32_t extra = (uint32_t)(ta_rand(rng) %
                                                        ((sw->max_ranks_per_node - 1) * N + 1));
                            ta_place(&c, N + extra, ta_rand(rng) % 3 != 0, rng);
                            c.root = (uint32_t)(ta_rand(rng) % c.nranks);
                            c.chunk_bytes = chunks[ta_rand(rng) % 4];
                            c.window = 1 + (uint32_t)(ta_rand(rng) % 4);
                            c.max_inflight = ta_rand(rng) % 3 == 0 ? 50 : 0;
                            c.inplace = ta_rand(rng) % 2;
                            c.iov_send = ta_rand(rng) % 2;
                            c.vals = ta_rand(rng) % 2 ? TA_RANDOM : TA_EXACT;
                            run_case(&c, c.seed);
                            /* NaN payloads: rd/hd/ring must agree to the bit anyway */
                            if ((kind == NX_K_ALL_REDUCE) && op == NEXAR_SUM &&
                                dt <= NEXAR_BF16 && ci == 4) {
                                c.vals = TA_NAN;
                                c.seed = ta_rand(rng);
                                run_case(&c, c.seed);
                            }
                        }
                    }
                }
            }
        }
    }
}

/* auto picks something that works everywhere */
static void sweep_auto(uint64_t *rng)
{
    for (size_t k = 0; k < sizeof(kinds); k++)
        for (uint32_t N = 1; N <= 6; N++) {
            struct ta_case c = {.kind = kinds[k], .dtype = NEXAR_F32, .redop = NEXAR_SUM,
                                .algo = NX_ALGO_AUTO, .nnodes = N, .count = 5000,
                                .vals = TA_EXACT};
            c.seed = ta_rand(rng);
            ta_place(&c, N + 2, true, rng);
            run_case(&c, c.seed);
        }
}

int main(int argc, char **argv)
{
    bool lng = getenv("NX_SIM_LONG") && atoi(getenv("NX_SIM_LONG")) > 0;
    uint64_t seed = (uint64_t)time(NULL);
    const char *only = NULL;
    if (getenv("NX_SIM_SEED"))
        seed = strtoull(getenv("NX_SIM_SEED"), NULL, 0);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--long") == 0)
            lng = true;
        else if (strcmp(argv[i], "--verbose") == 0)
            verbose = true;
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
    }
    nx_log_init(NX_LOG_WARN, 0);
    printf("test_algo: seed %" PRIu64 "%s\n", seed, lng ? " (long)" : "");
    uint64_t rng = seed ? seed : 1;
    static const uint32_t short_nodes[] = {1, 2, 3, 4, 5, 7, 8};
    static const uint32_t long_nodes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16};
    struct sweep sw = {.nodes = short_nodes, .nnodes = 7, .max_ranks_per_node = 3,
                       .big = 257, .rounds = 1};
    if (lng)
        sw = (struct sweep){.nodes = long_nodes, .nnodes = 11, .max_ranks_per_node = 4,
                            .big = 3001, .rounds = 3};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = 0; k < sizeof(kinds); k++) {
        if (only && strcmp(only, nx_kind_name(kinds[k])) != 0)
            continue;
        long f0 = failures, c0 = cases;
        sweep_kind(kinds[k], &sw, &rng);
        printf("  %-20s %6ld cases, %ld failed\n", nx_kind_name(kinds[k]), cases - c0,
               failures - f0);
        fflush(stdout);
        if (failures > 20)
            break;
    }
    if (!only)
        sweep_auto(&rng);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("test_algo: %ld cases, %ld failed, %.1f s (seed %" PRIu64 ")\n", cases, failures,
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, seed);
    nx_log_fini();
    return failures ? 1 : 0;
}
