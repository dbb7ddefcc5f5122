/* test_coll_local.c - one node's chunk of every data-moving kind, run whole and split
 * over the workers, against loops written here; and when a chunk is split: from 512 KiB
 * touched while a CPU is free, from 4 MiB when the ranks hold the CPUs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_local.h"
#include "nexar.h"
#include "shm_abi.h"
#include "workers.h"

#define P 3

static int failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static uint32_t val(uint32_t rank, uint64_t i)
{
    return (uint32_t)(i * 2654435761u) ^ (rank * 40503u + 7u);
}

/* Input blocks and output blocks per rank, as nx_kind_shape gives them for these kinds. */
static void shape(uint8_t kind, uint32_t *nin, uint32_t *nout)
{
    *nin = *nout = 1;
    if (kind == NX_K_ALL_GATHER)
        *nout = P;
    if (kind == NX_K_REDUCE_SCATTER)
        *nin = P;
    if (kind == NX_K_ALL_TO_ALL)
        *nin = *nout = P;
}

/* Element e of rank r's output block j. */
static uint32_t want(uint8_t kind, uint32_t r, uint32_t j, uint64_t e, uint64_t n)
{
    uint32_t s = 0;
    switch (kind) {
    case NX_K_ALL_REDUCE:
        for (uint32_t q = 0; q < P; q++)
            s += val(q, e);
        return s;
    case NX_K_REDUCE_SCATTER: /* block r of every rank's input */
        for (uint32_t q = 0; q < P; q++)
            s += val(q, r * n + e);
        return s;
    case NX_K_BROADCAST: /* root 1 */
        return val(1, e);
    case NX_K_ALL_GATHER:
        return val(j, e);
    case NX_K_ALL_TO_ALL: /* block r of rank j's input */
        return val(j, r * n + e);
    case NX_K_SCAN:
        for (uint32_t q = 0; q <= r; q++)
            s += val(q, e);
        return s;
    }
    return 0;
}

static void run_kind(uint8_t kind, uint64_t n, const char *regime)
{
    uint32_t nin, nout;
    shape(kind, &nin, &nout);
    uint32_t *in[P], *out[P];
    struct nx_rank_io io[P];
    for (uint32_t r = 0; r < P; r++) {
        in[r] = malloc(n * nin * sizeof(uint32_t));
        out[r] = malloc(n * nout * sizeof(uint32_t));
        for (uint64_t i = 0; i < n * nin; i++)
            in[r][i] = val(r, i);
        memset(out[r], 0xee, n * nout * sizeof(uint32_t));
        io[r] = (struct nx_rank_io){.in = (uint8_t *)in[r], .out = (uint8_t *)out[r],
                                    .in_stride = n, .out_stride = n};
    }
    struct nx_chunk_job jb = {.kind = kind, .dtype = NEXAR_U32, .redop = NEXAR_SUM,
                              .root = 1, .size = P, .n = n, .io = io};
    int rv = nx_coll_local_run(&nx_adapter_cpu, &jb);
    CHECK(rv == 0, "%s n=%llu %s: returned %d", nx_kind_name(kind), (unsigned long long)n,
          regime, rv);
    uint64_t wrong = 0, first = 0;
    for (uint32_t r = 0; r < P; r++) {
        if (kind == NX_K_BROADCAST && r == 1)
            continue; /* the root's output is its input: not written */
        for (uint32_t j = 0; j < nout; j++)
            for (uint64_t e = 0; e < n; e++)
                if (out[r][j * n + e] != want(kind, r, j, e, n) && wrong++ == 0)
                    first = ((uint64_t)r << 56) | ((uint64_t)j << 48) | e;
    }
    CHECK(wrong == 0, "%s n=%llu %s: %llu wrong elements, first rank %u block %u elem %llu",
          nx_kind_name(kind), (unsigned long long)n, regime, (unsigned long long)wrong,
          (unsigned)(first >> 56), (unsigned)(first >> 48 & 0xff),
          (unsigned long long)(first & 0xffffffffffffull));
    for (uint32_t r = 0; r < P; r++) {
        free(in[r]);
        free(out[r]);
    }
}

/* Runs every kind at n elements per block; true if coll_local split the chunks. */
static int all_kinds(uint64_t n, const char *regime)
{
    static const uint8_t kinds[] = {NX_K_ALL_REDUCE, NX_K_REDUCE_SCATTER, NX_K_BROADCAST,
                                    NX_K_ALL_GATHER, NX_K_ALL_TO_ALL, NX_K_SCAN};
    uint64_t before = nx_workers_splits();
    for (size_t k = 0; k < sizeof(kinds); k++)
        run_kind(kinds[k], n, regime);
    return nx_workers_splits() - before == sizeof(kinds);
}

int main(void)
{
    nx_workers_init(4);
    CHECK(nx_workers_parts() == 4, "4 parts wanted, got %u", nx_workers_parts());

    /* Bytes touched = n * 4 * P ranks * 2: n = 1000 is 24 KB, 30000 is 720 KB, 200000 is
     * 4.8 MB. */
    nx_workers_set_ranks(0);
    if (nx_workers_crowded()) {
        printf("one CPU: no free CPU to test the 512 KiB bound with\n");
    } else {
        CHECK(!all_kinds(1000, "CPUs free"), "24 KB touched was split");
        CHECK(all_kinds(30000, "CPUs free"), "720 KB touched, a CPU free, was not split");
        CHECK(all_kinds(200000, "CPUs free"), "4.8 MB touched was not split");
    }

    nx_workers_set_ranks(1000);
    CHECK(nx_workers_crowded(), "1000 ranks do not crowd the CPUs");
    CHECK(!all_kinds(1000, "crowded"), "24 KB touched was split");
    CHECK(!all_kinds(30000, "crowded"), "720 KB touched was split with the CPUs crowded");
    CHECK(all_kinds(200000, "crowded"), "4.8 MB touched was not split with the CPUs crowded");
    /* Odd counts: parts end off the 256-byte grid, the last part shorter. */
    CHECK(all_kinds(200003, "crowded"), "4.8 MB touched (odd count) was not split");

    nx_workers_fini();
    if (failures) {
        fprintf(stderr, "test_coll_local: %d failures\n", failures);
        return 1;
    }
    printf("test_coll_local: every kind exact, whole and split, crowded and not\n");
    return 0;
}
