/*
 * bench.h - nexar-bench: nccl-tests-style measurements of nexar collectives.
 *
 * One process per rank (launched by nexar-run).  Each selected collective gets a
 * table; each row is one (dtype, reduce op, size) point.  Time is the mean over
 * the timed iterations, the slowest rank's (an allreduce MAX), as nccl-tests and
 * the Open MPI anchor (shared/anchors/mpi_bench.c) report it, so the two can be
 * compared row by row.
 *
 * Modules:
 *   opts.c     command line
 *   elem.c     element encoding per dtype (f16 / bf16 conversion, identities)
 *   pattern.c  check-mode inputs and the independent expected results
 *   coll.c     the table of collectives: buffer shapes, busbw factor, the call
 *   report.c   table and JSON output
 *   main.c     the sweep
 */
#ifndef NXB_BENCH_H
#define NXB_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nexar.h"

/* Exit statuses beyond the nexar_status_t a failed call exits with (1..10). */
#define NXB_EXIT_USAGE 64 /* sysexits EX_USAGE */
#define NXB_EXIT_WRONG 65 /* sysexits EX_DATAERR: some #wrong > 0 */

enum nxb_coll {
    NXB_ALL_REDUCE,
    NXB_BROADCAST,
    NXB_REDUCE,
    NXB_ALL_GATHER,
    NXB_REDUCE_SCATTER,
    NXB_GATHER,
    NXB_SCATTER,
    NXB_ALL_TO_ALL,
    NXB_SCAN,
    NXB_EXSCAN,
    NXB_ALL_REDUCE_BUCKETED,
    NXB_BARRIER,
    NXB_SENDRECV,
    NXB_COLL_COUNT
};

/* ---- options (opts.c) ---------------------------------------------------- */

struct nxb_opts {
    uint64_t min_bytes, max_bytes; /* -b, -e */
    double factor;                 /* -f: each size is the previous one times this */
    long iters, warmup;            /* -n, -w */
    bool check;                    /* -c 1 */
    bool dtype[NEXAR_DTYPE_COUNT]; /* -d */
    bool op[NEXAR_OP_COUNT];       /* -o */
    int root;                      /* -r */
    bool coll[NXB_COLL_COUNT];     /* -t, in table order */
    bool arena;                    /* -a: buffers from nexar_alloc (direct path) */
    bool machine;                  /* -m: a JSON object per row too */
    bool progress;                 /* -p */
};

/* Parses argv into *o.  On a usage error prints it (rank 0 only, see opts.c) and
 * exits NXB_EXIT_USAGE; --help prints the usage and exits 0. */
void nxb_opts_parse(struct nxb_opts *o, int argc, char **argv);

/* dtype / op names as printed in the table ("f32", "sum"). */
const char *nxb_dtype_name(nexar_dtype_t d);
const char *nxb_op_name(nexar_op_t op);

/* ---- elements (elem.c) ---------------------------------------------------- */

/* Stores the integer v as element i of buf.  Integers wrap modulo 2^bits, as the
 * daemon's integer reductions do; floating types receive v exactly as long as
 * |v| is within nxb_exact_limit(). */
void nxb_elem_store(nexar_dtype_t d, void *buf, size_t i, int64_t v);

/* Stores the identity of op (exscan's result on rank 0) as element i. */
void nxb_elem_store_identity(nexar_dtype_t d, nexar_op_t op, void *buf, size_t i);

/* Stores a value no correct result of the check patterns equals (NaN for floats,
 * the type's maximum for integers), so an output that is never written shows. */
void nxb_elem_store_poison(nexar_dtype_t d, void *buf, size_t i);

/* Element i of a equals element j of b, by value (-0 == +0, NaN != NaN). */
bool nxb_elem_equal(nexar_dtype_t d, const void *a, size_t i, const void *b, size_t j);

/* Element i as a double, for messages. */
double nxb_elem_get(nexar_dtype_t d, const void *buf, size_t i);

/* Largest magnitude up to which every integer is exactly representable. */
int64_t nxb_exact_limit(nexar_dtype_t d);
bool nxb_dtype_signed(nexar_dtype_t d);

/* ---- collectives (coll.c) -------------------------------------------------- */

struct nxb_coll_desc {
    const char *name;  /* "all_reduce", also the -t name */
    bool has_op;       /* redop column and -o apply */
    bool has_root;     /* root column and -r apply */
    bool in_place;     /* one buffer (recv) is input and output */
    bool size_per_rank; /* "size" is the total over ranks (count = size / n) */
    bool has_data;     /* false for barrier: a single row */
};
extern const struct nxb_coll_desc nxb_colls[NXB_COLL_COUNT];

/* Accepts "all_reduce" and "allreduce" alike; -1 when unknown. */
int nxb_coll_lookup(const char *name);

/* Bus bandwidth factor for n ranks (nccl-tests' conventions). */
double nxb_busbw_factor(enum nxb_coll c, int n);

/* Elements of the send and receive buffers this rank needs for count. */
void nxb_coll_extent(enum nxb_coll c, int n, int rank, int root, size_t count,
                     size_t *send_elems, size_t *recv_elems);

/* One call of collective c.  send is unused by in-place collectives. */
nexar_status_t nxb_coll_run(nexar_comm_t *comm, enum nxb_coll c, void *send, void *recv,
                            size_t count, nexar_dtype_t d, nexar_op_t op, int root);

/* ---- check mode (pattern.c) ------------------------------------------------ */

/* Fills this rank's inputs (and poisons out-of-place outputs) for one checked call. */
void nxb_pattern_fill(enum nxb_coll c, int n, int rank, int root, size_t count,
                      nexar_dtype_t d, nexar_op_t op, void *send, void *recv);

/* Counts the elements of this rank's output that differ from the independently
 * computed expectation.  Prints the first few mismatches to stderr. */
uint64_t nxb_pattern_check(enum nxb_coll c, int n, int rank, int root, size_t count,
                           nexar_dtype_t d, nexar_op_t op, const void *recv);

/* ---- output (report.c) ----------------------------------------------------- */

struct nxb_row {
    enum nxb_coll coll;
    int ranks;
    uint64_t bytes; /* nccl-tests' "size" */
    size_t count;   /* the count argument of the call */
    nexar_dtype_t dtype;
    nexar_op_t op;
    int root; /* -1 where the collective has none */
    double time_us;
    double algbw, busbw; /* GB/s, 1 GB = 1e9 B */
    int64_t wrong;       /* -1: not checked */
    const char *algo;    /* nexar_comm_algorithm() after the timed calls; NULL: none ran */
};

void nxb_report_preamble(const struct nxb_opts *o, int ranks);
void nxb_report_table_begin(enum nxb_coll c, int ranks);
void nxb_report_row(const struct nxb_opts *o, const struct nxb_row *r);
void nxb_report_table_end(enum nxb_coll c);
/* Prints the totals; returns the number of wrong elements seen. */
uint64_t nxb_report_finish(const struct nxb_opts *o);

#endif /* NXB_BENCH_H */
