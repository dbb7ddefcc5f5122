/*
 * xcoll_soak.c - parts "soak" and "tsoak" of the cross-node rank program: rounds of
 * random nonblocking collectives, several in flight at once on three communicators,
 * completed in an order of each rank's own, every result exact.
 *
 * The matrix part runs one case at a time at sizes that fit a few slots.  What a job
 * does is different: ops of every kind and size posted back to back on several
 * communicators, the large ones cut into gated parts across nodes (shm_abi.h,
 * NX_SPAN_WHOLE_BYTES; algorithms.md, "Flow control") while small ones pass them, a
 * rank's slots shared by all of them, completed in whatever order its program waits.
 * Each round posts 1-6 ops; each op draws its communicator (the world, the world in
 * reverse rank order, and with 4 ranks or more the halves by rank parity, which cross
 * the nodes), its kind (every collective, bucketed all_reduce, barrier, and a shift:
 * isend to the rank d after, irecv from the rank d before), dtype, reduction, root,
 * size (small, up to 1 MiB, or blocks of 2-5 MiB that are cut) and buffers (the ranks'
 * own memory, nexar_alloc, or both).  Every rank draws the same ops from the same seed.
 * In every other round (drawn) each rank posts them in an order of its own, each
 * communicator's in order, as threads that each use one communicator would: their
 * slots then go to different ops on different ranks (request.c, "Bounce").  From a
 * seed of its own a rank draws that order, a pause of up to 2 ms before one post in
 * four (the ranks out of step: data that comes early, gates that wait) and the order
 * in which it completes them, each with nexar_wait or a nexar_test loop.  A round ends with
 * nexar_sync on every communicator, which must find nothing left.
 *
 * $XC_SOAK_SEED and $XC_SOAK_ROUNDS change the seed (printed) and the number of rounds
 * (default 24); a failure line names the seed, the round, the op and the communicator,
 * so that the same sequence runs again; $XC_SOAK_VERBOSE=1 logs every post and every
 * wait.  $XC_SOAK_INTERLEAVE=1 has every round post in each rank's own order.  Before
 * the bounce those orders hung seed 22 (2 x 2 interleaved, 2 slots) and seed 100 (2 x 2,
 * 4 slots) until the op deadline.  Run with daemons of full-size slots and a heap
 * of 128 MiB (test_xcoll --slot-bytes 4194304 --slots 4 --heap-bytes 134217728): a
 * round holds at most 48 MiB of buffers per rank.
 *
 * tsoak: the same kind of rounds (1-3 ops, 16 MiB) from three threads a rank, each on a
 * communicator of its own (the world, reversed, rotated by one), which is how a program
 * comes to post in orders of its own; the threads share the rank's slots and its heap.
 * Real threads rarely make the cycle that soak's own orders make (each waits for its
 * own ops before it posts more): this part is for the library's threads, under
 * ThreadSanitizer too.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "collref.h"
#include "harness.h"
#include "refnum.h"
#include "xcoll.h"

#define SOAK_MAX_OPS 6
#define SOAK_ROUND_BYTES (48u << 20) /* buffers of one round, per rank */
#define SOAK_OP_BYTES (12u << 20)    /* one op's input or output, per rank */
#define MiB (1024u * 1024u)

/* A shift: every rank of the communicator sends to the rank d after it and receives
 * from the rank d before it (isend and irecv), the ops of a round around it. */
#define SOAK_SHIFT TL_COLL_COUNT

static uint64_t next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t pick(uint64_t *s, size_t n)
{
    return (size_t)(next(s) % n);
}

static const int soak_dt[] = {NEXAR_F32, NEXAR_F64, NEXAR_F16, NEXAR_BF16, NEXAR_I8,
                              NEXAR_U8,  NEXAR_I32, NEXAR_U32, NEXAR_I64,  NEXAR_U64};
static const int soak_op[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MIN, NEXAR_MAX};

/* Elements of one rank's block: small (half the ops), up to 1 MiB, or 2-5 MiB of block,
 * which an op across nodes cuts into parts and gates. */
static size_t draw_count(uint64_t *s, size_t es)
{
    size_t c = pick(s, 20);
    if (c == 0)
        return 0;
    if (c < 10)
        return 1 + pick(s, 4096);
    if (c < 15)
        return (64u * 1024 + pick(s, MiB - 64u * 1024)) / es;
    return (2 * MiB + es + pick(s, 3 * MiB)) / es;
}

/* Bytes of buffers one rank holds for the case (input and output). */
static size_t case_bytes(const struct tl_case *c, int size)
{
    size_t es = tl_esize(c->dtype), n = c->count * es;
    switch (c->coll) {
    case TL_ALL_GATHER:
    case TL_GATHER: return n + n * (size_t)size;
    case TL_REDUCE_SCATTER:
    case TL_SCATTER: return n * (size_t)size + n;
    case TL_ALL_TO_ALL: return 2 * n * (size_t)size;
    case TL_REDUCE:
    case SOAK_SHIFT: return 2 * n;
    default: return n; /* in place */
    }
}

/* The largest buffer of the case, per rank. */
static size_t case_buf(const struct tl_case *c, int size)
{
    size_t es = tl_esize(c->dtype), n = c->count * es;
    switch (c->coll) {
    case TL_ALL_GATHER:
    case TL_GATHER:
    case TL_REDUCE_SCATTER:
    case TL_SCATTER:
    case TL_ALL_TO_ALL: return n * (size_t)size;
    default: return n;
    }
}

struct soak_op {
    struct tl_case c; /* c.coll SOAK_SHIFT: c.root is d, c.count and c.dtype the message */
    int comm;
    struct tl_run *run;
    void *sbuf, *rbuf;
    nexar_request_t *sreq, *rreq;
    int from;
    char ctx[200];
};

static int shift_post(nexar_comm_t *c, struct soak_op *o, uint32_t tag, const char *where)
{
    int me = nexar_comm_rank(c), size = nexar_comm_size(c), to = (me + o->c.root) % size;
    size_t es = tl_esize(o->c.dtype), n = o->c.count;
    o->from = (me - o->c.root + size) % size;
    snprintf(o->ctx, sizeof(o->ctx), "%s: rank %d/%d shift by %d: %s count=%zu to %d, from %d",
             where, me, size, o->c.root, tl_dtype_name(o->c.dtype), n, to, o->from);
    o->sbuf = malloc(n * es + 64);
    o->rbuf = malloc(n * es + 64);
    if (!o->sbuf || !o->rbuf) {
        tl_log("FAIL %s: out of memory", o->ctx);
        return -1;
    }
    tl_pattern(o->c.dtype, -1, o->c.seed, me, 0, o->sbuf, n);
    memset(o->rbuf, 0xa5, n * es + 64);
    if (tl_check_status(o->ctx, NEXAR_OK,
                        nexar_irecv(c, o->rbuf, n, (nexar_dtype_t)o->c.dtype, o->from, tag,
                                    &o->rreq)))
        return -1;
    if (tl_check_status(o->ctx, NEXAR_OK,
                        nexar_isend(c, o->sbuf, n, (nexar_dtype_t)o->c.dtype, to, tag,
                                    &o->sreq))) {
        o->sreq = NULL;
        return -1;
    }
    return 0;
}

/* TL_CASE_* of a shift that ended with these statuses; frees its buffers. */
static int shift_check(struct soak_op *o, nexar_status_t ss, nexar_status_t rs)
{
    int rv = TL_CASE_OK;
    size_t es = tl_esize(o->c.dtype), n = o->c.count;
    char ctx[240];
    snprintf(ctx, sizeof(ctx), "%s (send)", o->ctx);
    if (tl_check_status(ctx, NEXAR_OK, ss))
        rv = TL_CASE_STATUS;
    snprintf(ctx, sizeof(ctx), "%s (receive)", o->ctx);
    if (tl_check_status(ctx, NEXAR_OK, rs))
        rv = TL_CASE_STATUS;
    void *exp = rv == TL_CASE_OK ? malloc(n * es + 64) : NULL;
    if (exp) {
        tl_pattern(o->c.dtype, -1, o->c.seed, o->from, 0, exp, n);
        if (tl_check_elems(ctx, o->c.dtype, exp, o->rbuf, n))
            rv = TL_CASE_WRONG;
    } else if (rv == TL_CASE_OK) {
        tl_log("FAIL %s: out of memory", o->ctx);
        rv = TL_CASE_SETUP;
    }
    free(exp);
    free(o->sbuf);
    free(o->rbuf);
    o->sbuf = o->rbuf = NULL;
    return rv;
}

/* nexar_wait, or (how 1) a nexar_test loop. */
static nexar_status_t complete(nexar_request_t *req, int how)
{
    if (!how)
        return nexar_wait(req);
    nexar_status_t st;
    int done = 0;
    long spins = 0;
    do {
        st = nexar_test(req, &done);
        if (!done && st == NEXAR_OK && ++spins > 100)
            usleep(100); /* the ranks share few cores with the daemons */
        else if (!done && st == NEXAR_OK)
            sched_yield();
    } while (!done && st == NEXAR_OK);
    return st;
}

/* XC_SOAK_SEED and XC_SOAK_ROUNDS, or the part's defaults. */
static void soak_env(uint64_t *seed, int *rounds)
{
    const char *es = getenv("XC_SOAK_SEED"), *er = getenv("XC_SOAK_ROUNDS");
    if (es && *es)
        *seed = strtoull(es, NULL, 0);
    if (er && *er)
        *rounds = atoi(er);
}

/* order[0..n) shuffled with this rank's own draws. */
static void shuffle(int *order, int n, uint64_t *mine)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)pick(mine, (size_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Draws the op (every rank alike: the sizes are the communicator's, not this rank's),
 * shrunk to fit SOAK_OP_BYTES and what the round has left of budget; o->comm is the
 * caller's.  1 when its blocks are over 2 MiB. */
static int draw_op(uint64_t *shared, int csize, struct soak_op *o, uint64_t seed,
                   size_t *held, size_t budget)
{
    int comm = o->comm;
    memset(o, 0, sizeof(*o));
    o->comm = comm;
    struct tl_case *c = &o->c;
    c->coll = (int)pick(shared, TL_COLL_COUNT + 1);
    c->dtype = soak_dt[pick(shared, sizeof(soak_dt) / sizeof(soak_dt[0]))];
    c->op = soak_op[pick(shared, sizeof(soak_op) / sizeof(soak_op[0]))];
    c->root = (int)pick(shared, (size_t)csize);
    if (c->coll == SOAK_SHIFT)
        c->root = csize > 1 ? 1 + (int)pick(shared, (size_t)csize - 1) : 0;
    size_t mode = pick(shared, 10);
    c->mode = mode < 5 ? TL_HEAP : mode < 7 ? TL_ARENA : mode < 9 ? TL_MIXED : TL_HALF;
    c->call = TL_WAIT;
    c->seed = seed;
    c->count = c->coll == TL_BARRIER ? 0 : draw_count(shared, tl_esize(c->dtype));
    while (c->count > 1 && (case_buf(c, csize) > SOAK_OP_BYTES ||
                            *held + case_bytes(c, csize) > budget))
        c->count /= 2;
    *held += case_bytes(c, csize);
    return c->count * tl_esize(c->dtype) > 2 * MiB;
}

/* Posts o on c (tag: the shift's message tag); TL_CASE_*, printed.  A shift that
 * failed has what it posted to complete all the same. */
static int post_op(nexar_comm_t *c, struct soak_op *o, uint32_t tag, const char *where)
{
    return o->c.coll == SOAK_SHIFT ? shift_post(c, o, tag, where)
                                   : tl_case_post(c, &o->c, where, &o->run);
}

/* Completes a posted op (wait or test, drawn from mine) and judges it: TL_CASE_*. */
static int finish_op(struct soak_op *o, uint64_t *mine)
{
    int rv;
    if (o->c.coll == SOAK_SHIFT) {
        int how = (int)pick(mine, 2);
        nexar_status_t ss = o->sreq ? complete(o->sreq, how) : NEXAR_ERR_INVALID;
        nexar_status_t rs = o->rreq ? complete(o->rreq, how) : NEXAR_ERR_INVALID;
        rv = shift_check(o, ss, rs);
    } else {
        nexar_status_t st = complete(tl_run_request(o->run), (int)pick(mine, 2));
        rv = tl_case_check(o->run, st);
    }
    o->run = NULL;
    return rv;
}

int xc_soak(nexar_comm_t *w, const struct xc_place *p)
{
    (void)p;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), fails = 0;
    uint64_t seed = 0x50a4c011ull;
    int rounds = 24;
    soak_env(&seed, &rounds);
    int verbose = hx_env_flag("XC_SOAK_VERBOSE");
    int interleave = hx_env_flag("XC_SOAK_INTERLEAVE");
    double t0 = tl_now();

    nexar_comm_t *comms[3] = {w, NULL, NULL};
    const char *names[3] = {"world", "reversed", "parity"};
    int ncomms = 2;
    char ctx[200];
    snprintf(ctx, sizeof(ctx), "rank %d/%d soak: comm_split of the world in reverse order", me,
             size);
    if (tl_check_status(ctx, NEXAR_OK,
                        nexar_comm_split(w, 0, (uint32_t)(size - 1 - me), &comms[1])))
        return 1;
    if (size >= 4) {
        snprintf(ctx, sizeof(ctx), "rank %d/%d soak: comm_split by rank parity", me, size);
        if (tl_check_status(ctx, NEXAR_OK,
                            nexar_comm_split(w, (uint32_t)(me % 2), (uint32_t)me, &comms[2]))) {
            nexar_comm_free(comms[1]);
            return 1;
        }
        ncomms = 3;
    }
    if (me == 0)
        tl_log("soak: seed 0x%llx, %d rounds, %d communicators", (unsigned long long)seed,
               rounds, ncomms);

    uint64_t shared = seed, mine = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(me + 1));
    int ops = 0, large = 0, wrong = 0;
    for (int round = 0; round < rounds && !fails; round++) {
        struct soak_op q[SOAK_MAX_OPS];
        int nq = 1 + (int)pick(&shared, SOAK_MAX_OPS);
        size_t held = 0;
        for (int i = 0; i < nq; i++) {
            q[i].comm = (int)pick(&shared, (size_t)ncomms);
            large += draw_op(&shared, nexar_comm_size(comms[q[i].comm]), &q[i],
                             seed + (uint64_t)round * 64 + (uint64_t)i, &held,
                             SOAK_ROUND_BYTES);
        }

        /* Post order: the drawn one, or (interleave) this rank's own merge of the
         * communicators' sequences, each kept in order, as threads of a program that
         * each use their own communicator would post them. */
        int seq[SOAK_MAX_OPS], next_of[3] = {0, 0, 0};
        bool own_order = interleave || pick(&shared, 2);
        for (int k = 0; k < nq; k++) {
            int cm = q[k].comm;
            if (own_order) {
                int left[3], nl = 0;
                for (int j = 0; j < ncomms; j++) {
                    int m = next_of[j];
                    while (m < nq && q[m].comm != j)
                        m++;
                    next_of[j] = m;
                    if (m < nq)
                        left[nl++] = j;
                }
                cm = left[pick(&mine, (size_t)nl)];
            }
            int m = next_of[cm];
            while (q[m].comm != cm)
                m++;
            seq[k] = m;
            next_of[cm] = m + 1;
        }
        int posted = 0;
        for (int k = 0; k < nq; k++) {
            int i = seq[k];
            char tag[96];
            snprintf(tag, sizeof(tag), "soak seed 0x%llx round %d op %d/%d on %s",
                     (unsigned long long)seed, round, i + 1, nq, names[q[i].comm]);
            if (pick(&mine, 4) == 0)
                usleep((useconds_t)pick(&mine, 2000));
            int rv = post_op(comms[q[i].comm], &q[i], (uint32_t)(round * 64 + i), tag);
            if (rv != TL_CASE_OK) {
                if (q[i].c.coll == SOAK_SHIFT) { /* what it posted ends, then it fails */
                    posted++;
                    fails++;
                    continue;
                }
                fails++;
                break;
            }
            posted++;
            if (verbose)
                tl_log("posted %s", q[i].c.coll == SOAK_SHIFT ? q[i].ctx : tl_run_ctx(q[i].run));
        }

        /* this rank's own order: a shuffle of what it posted */
        int order[SOAK_MAX_OPS];
        for (int i = 0; i < posted; i++)
            order[i] = seq[i];
        shuffle(order, posted, &mine);
        for (int k = 0; k < posted; k++) {
            if (verbose)
                tl_log("round %d: completing op %d", round, order[k] + 1);
            int rv = finish_op(&q[order[k]], &mine);
            ops++;
            if (rv == TL_CASE_WRONG)
                wrong++;
            else if (rv != TL_CASE_OK)
                fails++;
        }
        for (int i = 0; i < ncomms && !fails; i++) {
            snprintf(ctx, sizeof(ctx), "rank %d/%d soak round %d: nexar_sync on %s", me, size,
                     round, names[i]);
            fails += tl_check_status(ctx, NEXAR_OK, nexar_sync(comms[i])) != 0;
        }
        if (wrong >= 10)
            break;
    }
    fails += wrong;
    for (int i = 1; i < ncomms; i++)
        nexar_comm_free(comms[i]);
    if (fails || me == 0)
        tl_log("soak: %d ops (%d with blocks over 2 MiB), %d with wrong data, %d failed, "
               "%.1f s, seed 0x%llx%s",
               ops, large, wrong, fails - wrong, tl_now() - t0, (unsigned long long)seed,
               fails ? "" : ": all exact");
    return fails;
}

/* ---- tsoak: a thread per communicator ---------------------------------------------- */

struct tsoak {
    nexar_comm_t *c;
    const char *name;
    uint64_t seed;
    int rounds, me, index;
    int ops, wrong, fails;
};

static void *tsoak_thread(void *arg)
{
    struct tsoak *t = arg;
    uint64_t shared = t->seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(t->index + 1));
    uint64_t mine = shared ^ (0x9e3779b97f4a7c15ull * (uint64_t)(t->me + 1));
    for (int round = 0; round < t->rounds && !t->fails && t->wrong < 10; round++) {
        struct soak_op q[3];
        int nq = 1 + (int)pick(&shared, 3), posted = 0;
        size_t held = 0;
        for (int i = 0; i < nq; i++) {
            q[i].comm = t->index;
            draw_op(&shared, nexar_comm_size(t->c), &q[i],
                    t->seed + (uint64_t)t->index * 65536 + (uint64_t)round * 64 + (uint64_t)i,
                    &held, SOAK_ROUND_BYTES / 3);
        }
        for (int i = 0; i < nq; i++) {
            char where[112];
            snprintf(where, sizeof(where), "tsoak seed 0x%llx thread on %s round %d op %d/%d",
                     (unsigned long long)t->seed, t->name, round, i + 1, nq);
            if (pick(&mine, 4) == 0)
                usleep((useconds_t)pick(&mine, 2000));
            int rv = post_op(t->c, &q[i], (uint32_t)(round * 64 + i), where);
            if (rv != TL_CASE_OK) {
                t->fails++;
                if (q[i].c.coll != SOAK_SHIFT)
                    break;
            }
            posted++;
        }
        int order[3] = {0, 1, 2};
        shuffle(order, posted, &mine);
        for (int k = 0; k < posted; k++) {
            int rv = finish_op(&q[order[k]], &mine);
            t->ops++;
            if (rv == TL_CASE_WRONG)
                t->wrong++;
            else if (rv != TL_CASE_OK)
                t->fails++;
        }
    }
    return NULL;
}

int xc_tsoak(nexar_comm_t *w, const struct xc_place *p)
{
    (void)p;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), fails = 0;
    uint64_t seed = 0x7504c011ull;
    int rounds = 16;
    soak_env(&seed, &rounds);
    double t0 = tl_now();
    /* Three communicators over every rank, in three rank orders, each driven by a
     * thread of its own: which of them a rank's slots serve first is up to its threads. */
    nexar_comm_t *comms[3] = {w, NULL, NULL};
    const char *names[3] = {"world", "reversed", "rotated"};
    char ctx[160];
    for (int i = 1; i < 3; i++) {
        uint32_t key = i == 1 ? (uint32_t)(size - 1 - me) : (uint32_t)((me + 1) % size);
        snprintf(ctx, sizeof(ctx), "rank %d/%d tsoak: comm_split (%s)", me, size, names[i]);
        if (tl_check_status(ctx, NEXAR_OK, nexar_comm_split(w, 0, key, &comms[i]))) {
            for (int j = 1; j < i; j++)
                nexar_comm_free(comms[j]);
            return 1;
        }
    }
    if (me == 0)
        tl_log("tsoak: seed 0x%llx, %d rounds on each of 3 communicators, a thread each",
               (unsigned long long)seed, rounds);
    struct tsoak t[3];
    pthread_t th[3];
    int started = 0;
    for (int i = 0; i < 3; i++) {
        t[i] = (struct tsoak){.c = comms[i], .name = names[i], .seed = seed,
                              .rounds = rounds, .me = me, .index = i};
        if (pthread_create(&th[i], NULL, tsoak_thread, &t[i])) {
            tl_log("FAIL rank %d/%d tsoak: pthread_create", me, size);
            fails++;
            break;
        }
        started++;
    }
    int ops = 0, wrong = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        ops += t[i].ops;
        wrong += t[i].wrong;
        fails += t[i].fails;
    }
    for (int i = 1; i < 3; i++)
        nexar_comm_free(comms[i]);
    if (fails || wrong || me == 0)
        tl_log("tsoak: %d ops, %d with wrong data, %d failed, %.1f s, seed 0x%llx%s", ops,
               wrong, fails, tl_now() - t0, (unsigned long long)seed,
               fails || wrong ? "" : ": all exact");
    return fails + wrong;
}
