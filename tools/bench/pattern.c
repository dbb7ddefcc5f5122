/*
 * pattern.c - check mode: deterministic inputs and independently computed results.
 *
 * Every input element is a small integer that depends on (source rank, index),
 * so a block that lands in the wrong place, a rank left out of a reduction or an
 * output never written all change the result.  The values are chosen so that
 * the exact result is representable in every dtype and no rounding order can
 * matter:
 *   - SUM: |value| <= limit / n, so any partial sum of n ranks stays exact
 *     (f16: 2048, bf16: 256 are the largest exact integers);
 *   - PROD: 1 or -1 everywhere except one rank per index contributing 2, so every
 *     partial product is +-1 or +-2;
 *   - MIN / MAX and the data-movement collectives: values in [-100, 100] (or
 *     wider for the wide types), which every dtype holds exactly.
 * The expectation is recomputed on every rank from the same formulas; nothing
 * the daemon produced is used as a reference.
 */
#include <stdio.h>

#include "bench.h"

#define MAX_REPORTED 5 /* mismatches printed per call */

/* Input of a reducing collective: rank r's element at global index i. */
static int64_t red_value(int n, int r, uint64_t i, nexar_dtype_t d, nexar_op_t op)
{
    bool sgn = nxb_dtype_signed(d);
    uint64_t mix = (uint64_t)r * 7u + i * 13u;
    if (op == NEXAR_PROD) {
        int64_t v = (i + (uint64_t)r) % (uint64_t)n == 0 ? 2 : 1;
        return sgn && (i * 3u + (uint64_t)r * 5u) % 7u == 0 ? -v : v;
    }
    int64_t h = 100;
    if (op == NEXAR_SUM) {
        h = nxb_exact_limit(d) / n;
        h = h < 1 ? 1 : h > 1000 ? 1000 : h;
    }
    if (!sgn)
        return (int64_t)(mix % (uint64_t)(op == NEXAR_SUM ? h + 1 : 2 * h + 1));
    return (int64_t)(mix % (uint64_t)(2 * h + 1)) - h;
}

/* Input of a data-movement collective: source rank r's element at index i. */
static int64_t data_value(int r, uint64_t i, nexar_dtype_t d)
{
    int64_t lim = nxb_exact_limit(d);
    int64_t h = lim < 1000 ? 100 : lim < 1000000 ? 1000 : 1000000;
    int64_t v = (int64_t)(((uint64_t)r * 1009u + i) % (uint64_t)(2 * h + 1));
    return nxb_dtype_signed(d) ? v - h : v;
}

/* The reduction of ranks [lo, hi) at index i, stored into out[0]. */
static void expect_reduce(int n, int lo, int hi, uint64_t i, nexar_dtype_t d,
                          nexar_op_t op, void *out)
{
    if (lo >= hi) {
        nxb_elem_store_identity(d, op, out, 0);
        return;
    }
    int64_t acc = red_value(n, lo, i, d, op);
    for (int s = lo + 1; s < hi; s++) {
        int64_t v = red_value(n, s, i, d, op);
        switch (op) {
        case NEXAR_SUM: acc = (int64_t)((uint64_t)acc + (uint64_t)v); break;
        case NEXAR_PROD: acc *= v; break;
        case NEXAR_MIN: acc = v < acc ? v : acc; break;
        case NEXAR_MAX: acc = v > acc ? v : acc; break;
        }
    }
    nxb_elem_store(d, out, 0, acc);
}

static void fill_red(int n, int rank, size_t elems, nexar_dtype_t d, nexar_op_t op,
                     void *buf)
{
    for (size_t i = 0; i < elems; i++)
        nxb_elem_store(d, buf, i, red_value(n, rank, i, d, op));
}

static void fill_data(int rank, size_t elems, nexar_dtype_t d, void *buf)
{
    for (size_t i = 0; i < elems; i++)
        nxb_elem_store(d, buf, i, data_value(rank, i, d));
}

static void poison(size_t elems, nexar_dtype_t d, void *buf)
{
    for (size_t i = 0; i < elems; i++)
        nxb_elem_store_poison(d, buf, i);
}

void nxb_pattern_fill(enum nxb_coll c, int n, int rank, int root, size_t count,
                      nexar_dtype_t d, nexar_op_t op, void *send, void *recv)
{
    size_t all = count * (size_t)n;
    switch (c) {
    case NXB_ALL_REDUCE:
    case NXB_ALL_REDUCE_BUCKETED:
    case NXB_SCAN:
    case NXB_EXSCAN:
        fill_red(n, rank, count, d, op, recv);
        break;
    case NXB_REDUCE:
        fill_red(n, rank, count, d, op, send);
        if (recv != send) /* in place (send == recv): the input is the buffer */
            poison(count, d, recv);
        break;
    case NXB_REDUCE_SCATTER:
        fill_red(n, rank, all, d, op, send);
        poison(count, d, recv);
        break;
    case NXB_BROADCAST:
        if (rank == root)
            fill_data(rank, count, d, recv);
        else
            poison(count, d, recv);
        break;
    case NXB_ALL_GATHER:
    case NXB_GATHER:
        fill_data(rank, count, d, send);
        poison(all, d, recv);
        break;
    case NXB_SCATTER:
        if (rank == root)
            fill_data(rank, all, d, send);
        poison(count, d, recv);
        break;
    case NXB_ALL_TO_ALL:
        fill_data(rank, all, d, send);
        poison(all, d, recv);
        break;
    case NXB_SENDRECV:
        fill_data(rank, count, d, send);
        poison(count, d, recv);
        break;
    case NXB_BARRIER:
    case NXB_COLL_COUNT:
        break;
    }
}

/* Expected value of output element k on this rank, into out[0]. */
static void expect(enum nxb_coll c, int n, int rank, int root, size_t count,
                   nexar_dtype_t d, nexar_op_t op, size_t k, void *out)
{
    size_t blk = count ? k / count : 0, off = count ? k % count : 0;
    switch (c) {
    case NXB_ALL_REDUCE:
    case NXB_ALL_REDUCE_BUCKETED:
    case NXB_REDUCE:
        expect_reduce(n, 0, n, k, d, op, out);
        break;
    case NXB_SCAN:
        expect_reduce(n, 0, rank + 1, k, d, op, out);
        break;
    case NXB_EXSCAN:
        expect_reduce(n, 0, rank, k, d, op, out);
        break;
    case NXB_REDUCE_SCATTER:
        expect_reduce(n, 0, n, (uint64_t)rank * count + k, d, op, out);
        break;
    case NXB_BROADCAST:
        nxb_elem_store(d, out, 0, data_value(root, k, d));
        break;
    case NXB_ALL_GATHER:
    case NXB_GATHER:
        nxb_elem_store(d, out, 0, data_value((int)blk, off, d));
        break;
    case NXB_SCATTER:
        nxb_elem_store(d, out, 0, data_value(root, (uint64_t)rank * count + k, d));
        break;
    case NXB_ALL_TO_ALL:
        nxb_elem_store(d, out, 0, data_value((int)blk, (uint64_t)rank * count + off, d));
        break;
    case NXB_SENDRECV:
        nxb_elem_store(d, out, 0, data_value((rank + n - 1) % n, k, d));
        break;
    case NXB_BARRIER:
    case NXB_COLL_COUNT:
        break;
    }
}

/* Output elements this rank must check (non-roots of reduce and gather get none). */
static size_t checked_elems(enum nxb_coll c, int n, int rank, int root, size_t count)
{
    switch (c) {
    case NXB_REDUCE:
        return rank == root ? count : 0;
    case NXB_GATHER:
        return rank == root ? count * (size_t)n : 0;
    case NXB_ALL_GATHER:
    case NXB_ALL_TO_ALL:
        return count * (size_t)n;
    case NXB_BARRIER:
    case NXB_COLL_COUNT:
        return 0;
    default:
        return count;
    }
}

uint64_t nxb_pattern_check(enum nxb_coll c, int n, int rank, int root, size_t count,
                           nexar_dtype_t d, nexar_op_t op, const void *recv)
{
    size_t elems = checked_elems(c, n, rank, root, count);
    uint64_t wrong = 0;
    for (size_t k = 0; k < elems; k++) {
        uint64_t want = 0; /* 8 bytes hold one element of any dtype */
        expect(c, n, rank, root, count, d, op, k, &want);
        if (nxb_elem_equal(d, recv, k, &want, 0))
            continue;
        if (wrong++ < MAX_REPORTED)
            fprintf(stderr,
                    "nexar-bench: rank %d: %s %s%s%s count %zu: element %zu is %.17g, "
                    "expected %.17g\n",
                    rank, nxb_colls[c].name, nxb_dtype_name(d),
                    nxb_colls[c].has_op ? " " : "", nxb_colls[c].has_op ? nxb_op_name(op) : "",
                    count, k, nxb_elem_get(d, recv, k), nxb_elem_get(d, &want, 0));
    }
    if (wrong > MAX_REPORTED)
        fprintf(stderr, "nexar-bench: rank %d: %s: %llu more wrong elements\n", rank,
                nxb_colls[c].name, (unsigned long long)(wrong - MAX_REPORTED));
    return wrong;
}
