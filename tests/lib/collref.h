/*
 * collref.h - one collective "case" run on a communicator and checked against the
 * reference: every rank of the communicator calls tl_run_case() with the same case;
 * each generates every rank's input from (seed, rank, index), runs the op, and
 * compares its own output bit for bit with the reference result.
 */
#ifndef TL_COLLREF_H
#define TL_COLLREF_H

#include <stddef.h>
#include <stdint.h>

#include "nexar.h"

enum tl_coll {
    TL_ALL_REDUCE,
    TL_BROADCAST,
    TL_REDUCE,
    TL_ALL_GATHER,
    TL_REDUCE_SCATTER,
    TL_GATHER,
    TL_SCATTER,
    TL_ALL_TO_ALL,
    TL_SCAN,
    TL_EXSCAN,
    TL_BUCKETED,
    TL_BARRIER,
    TL_COLL_COUNT
};

/* Where the buffers live. */
enum tl_bufmode {
    TL_HEAP,  /* malloc: the staged path */
    TL_ARENA, /* nexar_alloc: the direct path (odd ranks use an interior pointer) */
    TL_MIXED, /* even ranks arena, odd ranks malloc */
    TL_HALF,  /* input in the arena, output malloc (in-place ops: by rank parity;
                 bucketed: the iovs of one call alternate arena / malloc) */
    TL_MODE_COUNT,
    /* Not in the loops over TL_MODE_COUNT: every buffer from tl_set_devmem's allocator
     * (device memory the rank can also address, as the fake libcuda's shared memory) */
    TL_DEVICE = 100
};

struct tl_devmem {
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
};

/* Where mode TL_DEVICE takes its buffers from. */
void tl_set_devmem(const struct tl_devmem *m);

/* How the op is called. */
enum tl_call { TL_BLOCKING, TL_WAIT, TL_TESTLOOP };

struct tl_case {
    int coll;
    int dtype;
    int op;   /* ignored where the collective has no reduction */
    int root; /* ignored where it has no root */
    size_t count;
    int mode;
    int call;
    uint64_t seed;
    int full; /* inputs over the whole float range (TL_PAT_FULL); for 2 ranks */
};

const char *tl_coll_name(int coll);
const char *tl_mode_name(int mode);
int tl_coll_has_op(int coll);
int tl_coll_has_root(int coll);

/* "all_reduce f16 sum count=13 root=- mode=arena" */
void tl_case_str(const struct tl_case *c, char *out, size_t len);

/* Outcomes of tl_run_case. */
#define TL_CASE_OK 0
#define TL_CASE_WRONG 1  /* the op returned OK but the data differs (printed) */
#define TL_CASE_STATUS 2 /* the op returned an error (printed); the comm may be failed */
#define TL_CASE_SETUP 3  /* the test could not allocate its buffers (printed) */

int tl_run_case(nexar_comm_t *comm, const struct tl_case *c);

/*
 * The same case cut in two, for several in flight at once: tl_case_post() posts the
 * nonblocking form whatever c->call says (TL_CASE_OK and *out, or an outcome above,
 * printed, and *out NULL); the caller completes tl_run_request() itself (nexar_wait or
 * nexar_test, not nexar_sync, which frees it) and hands the status it ended with to
 * tl_case_check(), which judges it and the output as tl_run_case() does and frees the
 * run.  tag, when not NULL, starts every line printed about the case.
 */
struct tl_run;
int tl_case_post(nexar_comm_t *comm, const struct tl_case *c, const char *tag,
                 struct tl_run **out);
nexar_request_t *tl_run_request(const struct tl_run *r);
const char *tl_run_ctx(const struct tl_run *r); /* "tag: rank 1/4 all_reduce ..." */
int tl_case_check(struct tl_run *r, nexar_status_t st);

/*
 * Barrier order: `rounds` barriers entered at staggered times (rank-dependent sleeps of
 * up to 40 ms x size); every rank checks, through an all_gather of the entry times,
 * that it left no earlier than the last rank entered.  The ranks must share one
 * CLOCK_MONOTONIC (one machine, simulated nodes included).  0, or -1 after printing.
 */
int tl_barrier_order(nexar_comm_t *comm, int rounds);

#endif /* TL_COLLREF_H */
