/*
 * bench.h - nexar-bench: nccl-tests-style measurements of nexar collectives.
 *
 * One process per rank (launched by nexar-run).  Each selected collective gets a
 * table in nccl-tests' layout; each row is one (dtype, reduce op, size) point with
 * two groups of columns, out-of-place and in-place, each measured on its own where
 * nexar's API has that form of the call (nxb_coll_desc).  Time is the mean over
 * the timed iterations, the slowest rank's (an allreduce MAX), as nccl-tests and
 * the Open MPI anchor (shared/anchors/mpi_bench.c) report it, so the two can be
 * compared row by row.  -m FILE writes the same measurements as JSON lines to
 * FILE (or stderr), never to stdout, so the table stays what nccl-tests readers
 * expect.
 *
 * Modules:
 *   opts.c     command line
 *   elem.c     element encoding per dtype (f16 / bf16 conversion, identities)
 *   pattern.c  check-mode inputs and the independent expected results
 *   coll.c     the table of collectives: buffer shapes, busbw factor, the call
 *   report.c   the table (nccl-tests' layout) and the -m JSON lines
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
#define NXB_EXIT_CANTCREAT 73 /* sysexits EX_CANTCREAT: the -m FILE cannot be opened */

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
    const char *machine;           /* -m FILE: JSON lines there; "-" is stderr; NULL none */
    bool progress;                 /* -p */
};

/* Parses argv into *o.  On a usage error prints it (rank 0 only, see opts.c) and
 * exits NXB_EXIT_USAGE; --help prints the usage and exits 0. */
void nxb_opts_parse(struct nxb_opts *o, int argc, char **argv);

/* dtype / op names as printed in the table: nccl-tests' ("float", "bfloat16", "sum"). */
const char *nxb_dtype_name(nexar_dtype_t d);
const char *nxb_op_name(nexar_op_t op);

/* The order of the rows: nccl-tests' (int8 uint8 int32 uint32 int64 uint64 half float
 * double bfloat16; sum prod max min), whatever the order on the command line. */
extern const nexar_dtype_t nxb_dtype_order[NEXAR_DTYPE_COUNT];
extern const nexar_op_t nxb_op_order[NEXAR_OP_COUNT];

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

/* The two column groups of a row, nccl-tests' out-of-place and in-place. */
enum nxb_place { NXB_OOP, NXB_INPL, NXB_PLACES };

struct nxb_coll_desc {
    const char *name;  /* "all_reduce", also the -t name */
    bool has_op;       /* redop column and -o apply */
    bool has_root;     /* root column and -r apply */
    /* The forms nexar.h gives the call, each measured in its own group (N/A without):
     * out_of_place: separate input and output buffers (barrier, which has no buffers,
     * counts as this one form); in_place: one buffer is input and output, either a
     * one-buffer call (nexar_all_reduce) or send == recv where nexar.h allows it
     * (nexar_reduce). */
    bool out_of_place, in_place;
    bool size_per_rank; /* "size" is the total over ranks (count = size / n) */
    bool has_data;     /* false for barrier: a single row */
};
extern const struct nxb_coll_desc nxb_colls[NXB_COLL_COUNT];

/* Accepts "all_reduce" and "allreduce" alike; -1 when unknown. */
int nxb_coll_lookup(const char *name);

/* Bus bandwidth factor for n ranks (nccl-tests' conventions). */
double nxb_busbw_factor(enum nxb_coll c, int n);

/* One call of collective c.  send is unused by one-buffer collectives; send == recv
 * is the in-place form of the others that have one (nexar_reduce). */
nexar_status_t nxb_coll_run(nexar_comm_t *comm, enum nxb_coll c, void *send, void *recv,
                            size_t count, nexar_dtype_t d, nexar_op_t op, int root);

/* ---- check mode (pattern.c) ------------------------------------------------ */

/* Fills this rank's inputs (and poisons out-of-place outputs) for one checked call;
 * send == recv: the in-place form, the input goes into that one buffer. */
void nxb_pattern_fill(enum nxb_coll c, int n, int rank, int root, size_t count,
                      nexar_dtype_t d, nexar_op_t op, void *send, void *recv);

/* Counts the elements of this rank's output that differ from the independently
 * computed expectation.  Prints the first few mismatches to stderr. */
uint64_t nxb_pattern_check(enum nxb_coll c, int n, int rank, int root, size_t count,
                           nexar_dtype_t d, nexar_op_t op, const void *recv);

/* ---- output (report.c) ----------------------------------------------------- */

/* One column group of a row. */
struct nxb_result {
    bool ran;            /* false: nexar has no such form of the call (N/A) */
    double time_us;
    double algbw, busbw; /* GB/s, 1 GB = 1e9 B */
    int64_t wrong;       /* -1: not checked */
    const char *algo;    /* nexar_comm_algorithm() after the timed calls; NULL: none ran */
};

struct nxb_row {
    enum nxb_coll coll;
    int ranks;
    uint64_t bytes; /* nccl-tests' "size" */
    size_t count;   /* the count argument of the call */
    nexar_dtype_t dtype;
    nexar_op_t op;
    int root; /* -1 where the collective has none */
    struct nxb_result res[NXB_PLACES];
};

/* Who a rank is, for the "# Using devices" lines; rank 0 collects them all. */
struct nxb_rank_info {
    int32_t pid;
    char host[60]; /* NUL-terminated, cut to fit */
};

/* Opens the -m destination (rank 0 only): 0, or -errno (nothing is printed). */
int nxb_report_open(const struct nxb_opts *o);
/* The header: the parameters line and one line per rank (info[0..ranks)). */
void nxb_report_preamble(const struct nxb_opts *o, int ranks,
                         const struct nxb_rank_info *info);
void nxb_report_table_begin(enum nxb_coll c, int ranks);
void nxb_report_row(const struct nxb_opts *o, const struct nxb_row *r);
/* The table's summary: "# Out of bounds values" and "# Avg bus bandwidth". */
void nxb_report_table_end(const struct nxb_opts *o, enum nxb_coll c);
/* Closes the -m destination; returns the number of wrong elements of the whole run. */
uint64_t nxb_report_finish(void);

#endif /* NXB_BENCH_H */
