/* algo_choose.c - which algorithm runs an xop, and the op signature (see algo.h).
 * The thresholds are explained in docs/algorithms.md. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "algo_int.h"
#include "nexar.h"
#include "shm_abi.h"

/* At or below these sizes (bytes per node) latency dominates: fewer, bigger steps win. */
#define RD_MAX_BYTES (16u << 10)   /* all_reduce: recursive doubling, log2(N) steps */
#define HD_MAX_BYTES (256u << 10)  /* all_reduce: halving-doubling, 2 log2(N) steps */
#define AG_RD_MAX_BYTES (64u << 10) /* all_gather output: Bruck, log2(N) steps */
#define TREE_MAX_BYTES (1u << 20)  /* broadcast, reduce: binomial tree over a chain */
#define RS_HD_MAX_BYTES (64u << 10) /* reduce_scatter input: recursive halving */

/* The names live in shm_abi.c: the shim names what ran from nx_cqe.algo. */
_Static_assert(NX_ALGO_COUNT == 8 && NX_ALGO_RING == 1 && NX_ALGO_HILLIS_STEELE == 7,
               "nx_algo_code_name() (proto/shm_abi.c) names enum nx_algo");

const char *nx_algo_name(enum nx_algo algo)
{
    return algo == NX_ALGO_AUTO ? "auto" : nx_algo_code_name(algo);
}

int nx_algo_parse(const char *name)
{
    for (int a = 0; a < NX_ALGO_COUNT; a++)
        if (name && strcmp(name, nx_algo_name(a)) == 0)
            return a;
    return -1;
}

int nx_algo_pref_parse(const char *s, uint8_t pref[NX_K_MAX + 1], char *err, size_t errlen)
{
    memset(pref, NX_ALGO_AUTO, NX_K_MAX + 1);
    bool named[NX_K_MAX + 1] = {false};
    while (s && *s) {
        const char *end = strchr(s, ','), *eq = strchr(s, '=');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (!eq || eq >= s + len) {
            snprintf(err, errlen, "\"%.*s\" is not kind=algorithm", (int)len, s);
            return -EINVAL;
        }
        char kind[32], algo[32];
        snprintf(kind, sizeof(kind), "%.*s", (int)(eq - s), s);
        snprintf(algo, sizeof(algo), "%.*s", (int)(s + len - eq - 1), eq + 1);
        int k = 0;
        for (int i = 1; i <= NX_K_BARRIER && !k; i++)
            if (!strcmp(kind, nx_kind_name((uint8_t)i)))
                k = i;
        int a = nx_algo_parse(algo);
        if (!k) {
            snprintf(err, errlen, "unknown collective \"%s\" (all_reduce, broadcast, reduce, "
                     "all_gather, reduce_scatter, gather, scatter, all_to_all, scan, exscan, "
                     "all_reduce_bucketed, barrier)", kind);
            return -EINVAL;
        }
        if (a < 0 || !nx_algo_supported((uint8_t)k, (enum nx_algo)a)) {
            snprintf(err, errlen, "%s has no algorithm \"%s\"", kind, algo);
            return -EINVAL;
        }
        if (named[k]) {
            snprintf(err, errlen, "%s is named twice", kind);
            return -EINVAL;
        }
        named[k] = true;
        pref[k] = (uint8_t)a;
        s = end ? end + 1 : s + len;
    }
    return 0;
}

const struct nx_xalgo *nx_xalgo_lookup(uint8_t kind, enum nx_algo algo)
{
    switch (kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
        return algo == NX_ALGO_RING ? &nx_xalgo_ring_allreduce
               : algo == NX_ALGO_RD ? &nx_xalgo_rd_allreduce
               : algo == NX_ALGO_HD ? &nx_xalgo_hd_allreduce
                                    : NULL;
    case NX_K_BROADCAST:
        return algo == NX_ALGO_TREE ? &nx_xalgo_tree_broadcast
               : algo == NX_ALGO_RING ? &nx_xalgo_chain_broadcast
                                      : NULL;
    case NX_K_REDUCE:
        return algo == NX_ALGO_TREE ? &nx_xalgo_tree_reduce
               : algo == NX_ALGO_RING ? &nx_xalgo_chain_reduce
                                      : NULL;
    case NX_K_ALL_GATHER:
        return algo == NX_ALGO_RING ? &nx_xalgo_ring_all_gather
               : algo == NX_ALGO_RD ? &nx_xalgo_bruck_all_gather
                                    : NULL;
    case NX_K_REDUCE_SCATTER:
        return algo == NX_ALGO_RING ? &nx_xalgo_ring_reduce_scatter
               : algo == NX_ALGO_HD ? &nx_xalgo_hd_reduce_scatter
                                    : NULL;
    case NX_K_GATHER:
        return algo == NX_ALGO_TREE ? &nx_xalgo_tree_gather : NULL;
    case NX_K_SCATTER:
        return algo == NX_ALGO_TREE ? &nx_xalgo_tree_scatter : NULL;
    case NX_K_ALL_TO_ALL:
        return algo == NX_ALGO_PAIRWISE ? &nx_xalgo_pairwise_a2a : NULL;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        return algo == NX_ALGO_HILLIS_STEELE ? &nx_xalgo_hillis_steele : NULL;
    case NX_K_BARRIER:
        return algo == NX_ALGO_DISSEMINATION ? &nx_xalgo_dissemination : NULL;
    default:
        return NULL;
    }
}

void nx_algo_pref_format(const uint8_t pref[NX_K_MAX + 1], char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 1; k <= NX_K_BARRIER && off < len; k++)
        if (pref[k] != NX_ALGO_AUTO)
            off += (size_t)snprintf(buf + off, len - off, "%s%s=%s", off ? "," : "",
                                    nx_kind_name((uint8_t)k), nx_algo_name(pref[k]));
}

enum nx_algo nx_algo_choose(uint8_t kind, uint32_t nnodes, uint64_t bytes)
{
    switch (kind) {
    case NX_K_ALL_REDUCE:
    case NX_K_ALL_REDUCE_BUCKETED:
        /* Two nodes: every algorithm is one exchange; the ring moves half the bytes. */
        if (nnodes <= 2)
            return bytes <= RD_MAX_BYTES ? NX_ALGO_RD : NX_ALGO_RING;
        return bytes <= RD_MAX_BYTES ? NX_ALGO_RD
               : bytes <= HD_MAX_BYTES ? NX_ALGO_HD
                                       : NX_ALGO_RING;
    case NX_K_BROADCAST:
    case NX_K_REDUCE:
        return nnodes <= 2 || bytes <= TREE_MAX_BYTES ? NX_ALGO_TREE : NX_ALGO_RING;
    case NX_K_ALL_GATHER:
        return bytes <= AG_RD_MAX_BYTES ? NX_ALGO_RD : NX_ALGO_RING;
    case NX_K_REDUCE_SCATTER:
        return bytes <= RS_HD_MAX_BYTES ? NX_ALGO_HD : NX_ALGO_RING;
    case NX_K_GATHER:
    case NX_K_SCATTER:
        return NX_ALGO_TREE;
    case NX_K_ALL_TO_ALL:
        return NX_ALGO_PAIRWISE;
    case NX_K_SCAN:
    case NX_K_EXSCAN:
        return NX_ALGO_HILLIS_STEELE;
    case NX_K_BARRIER:
        return NX_ALGO_DISSEMINATION;
    default:
        return NX_ALGO_AUTO;
    }
}

int nx_algo_supported(uint8_t kind, enum nx_algo algo)
{
    if (algo == NX_ALGO_AUTO)
        return nx_algo_choose(kind, 1, 0) != NX_ALGO_AUTO;
    return nx_xalgo_lookup(kind, algo) != NULL;
}

/* FNV-1a: cheap, and every node computes the same value from the same fields. */
static uint32_t fnv(uint32_t h, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++) {
        h ^= (uint8_t)(v >> (8 * i));
        h *= 16777619u;
    }
    return h;
}

uint32_t nx_xop_sig(uint8_t kind, uint8_t dtype, uint64_t count, uint32_t root,
                    uint8_t redop)
{
    uint32_t h = fnv(2166136261u, kind, 1);
    if (kind == NX_K_BARRIER)
        return h;
    h = fnv(h, dtype, 1);
    h = fnv(h, count, 8);
    h = fnv(h, nx_kind_has_root(kind) ? root : 0, 4);
    h = fnv(h, nx_kind_has_redop(kind) ? redop : 0, 1);
    return h;
}
