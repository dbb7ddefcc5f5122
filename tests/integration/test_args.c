/*
 * test_args.c - argument errors and the environment.
 *
 *  - without a daemon: nexar_init -> NEXAR_ERR_UNAVAILABLE whose text names the
 *    socket path; finalize after a failed init; nexar_alloc before init;
 *    strerror / dtype_size / comm_rank(NULL);
 *  - bad dtype, bad op, root out of range, NULL buffers with count > 0, count
 *    overflow, NULL comm / request / out pointers, bad peers -> NEXAR_ERR_INVALID
 *    with a detailed last-error text, and the communicator still works afterwards
 *    (checked after each, with the invalid calls made on some ranks only, so an
 *    invalid call that consumed a sequence number would show as a mismatch);
 *  - count 0 with NULL buffers is a successful no-op for every collective;
 *  - arena: nexar_free of a foreign pointer, nexar_alloc exhaustion -> NOMEM;
 *  - send and recv that overlap outside the in-place forms (all_gather, reduce_scatter,
 *    all_to_all; staged and single-copy sizes) -> INVALID naming the form, and the
 *    in-place forms exact;
 *  - environment: bad NEXAR_RANK / NEXAR_WORLD_SIZE -> INVALID; NEXAR_PEER_READS,
 *    NEXAR_SINGLE_COPY and NEXAR_STREAM_COPY other than 0 or 1 -> INVALID naming the
 *    value; the torchrun, Slurm and Open MPI fallbacks; no variables at all -> rank 0
 *    of 1.
 */
#include <stdlib.h>
#include <sys/wait.h>

#include "itest.h"

/* ---- without a daemon ---------------------------------------------------------- */

static int no_daemon(struct hx_rank *r)
{
    int fails = 0;
    void *p = NULL;
    EXPECT_ST(fails, NEXAR_ERR_INVALID, "nexar_alloc before nexar_init", nexar_alloc(64, &p));
    for (int s = 0; s <= 10; s++)
        EXPECT_TRUE(fails, nexar_strerror((nexar_status_t)s) && *nexar_strerror((nexar_status_t)s),
                    "nexar_strerror(%d) is empty", s);
    EXPECT_TRUE(fails, nexar_strerror((nexar_status_t)200) != NULL, "nexar_strerror(200) is NULL");
    static const size_t sz[] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};
    for (int d = 0; d < 10; d++)
        EXPECT_TRUE(fails, nexar_dtype_size((nexar_dtype_t)d) == sz[d],
                    "nexar_dtype_size(%s) = %zu, expected %zu", tl_dtype_name(d),
                    nexar_dtype_size((nexar_dtype_t)d), sz[d]);
    EXPECT_TRUE(fails, nexar_dtype_size((nexar_dtype_t)10) == 0, "nexar_dtype_size(10) != 0");
    EXPECT_TRUE(fails, nexar_comm_rank(NULL) == -1 && nexar_comm_size(NULL) == -1,
                "nexar_comm_rank/size(NULL) != -1");

    nexar_comm_t *w = NULL;
    double t0 = tl_now();
    nexar_status_t st = nexar_init(&w);
    double dt = tl_now() - t0;
    if (!tl_check_status("nexar_init with no daemon", NEXAR_ERR_UNAVAILABLE, st)) {
        if (!tl_check_contains("nexar_last_error after init without a daemon",
                               nexar_last_error(), r->sock))
            tl_log("init without a daemon: UNAVAILABLE after %.2f s: \"%s\"", dt,
                   nexar_last_error());
        else
            fails++;
    } else {
        fails++;
    }
    EXPECT_TRUE(fails, dt < 10.0, "nexar_init without a daemon took %.1f s", dt);
    EXPECT_OK(fails, "nexar_finalize after a failed init", nexar_finalize());
    EXPECT_OK(fails, "second nexar_finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- invalid arguments ----------------------------------------------------------- */

static int32_t sbuf[64], rbuf[64 * HX_MAX_RANKS];

/* The comm works: a checked allreduce on every rank. */
static void still_works(nexar_comm_t *w, int *fails, int n, const char *after)
{
    int32_t v[3] = {1, 2, 3};
    char what[160];
    snprintf(what, sizeof(what), "allreduce right after %s", after);
    if (!EXPECT_OK(*fails, what, nexar_all_reduce(w, v, 3, NEXAR_I32, NEXAR_SUM)))
        EXPECT_TRUE(*fails, v[0] == n && v[1] == 2 * n && v[2] == 3 * n,
                    "%s: got %d %d %d, expected %d %d %d", what, v[0], v[1], v[2], n, 2 * n, 3 * n);
}

/* Overlapping send and recv: refused with the in-place form in the text, unless they are
 * that form, which gives the exact result; with count elements a block (small: staged;
 * 256 KiB: single copy, where the ranks read each other's inputs while they write). */
static void overlaps(nexar_comm_t *w, int *fails, int me, int n, size_t count)
{
    int32_t *a = calloc(count * (size_t)n, sizeof(int32_t));
    char label[96], want[96];
    if (!a) {
        tl_log("FAIL rank %d: no memory for the overlap checks", me);
        (*fails)++;
        return;
    }
    /* all_gather whose send is another rank's block of recv; then its own. */
    snprintf(label, sizeof(label), "all_gather of %zu, send in another block", count);
    nexar_status_t st = nexar_all_gather(w, a + (size_t)((me + 1) % n) * count, a, count,
                                         NEXAR_I32);
    snprintf(want, sizeof(want), "rank %d of %d", me, n);
    if (!EXPECT_ST(*fails, NEXAR_ERR_INVALID, label, st))
        EXPECT_TRUE(*fails, strstr(nexar_last_error(), "send and recv overlap") &&
                    strstr(nexar_last_error(), "send = recv + rank * count elements") &&
                    strstr(nexar_last_error(), want), "%s: \"%s\"", label, nexar_last_error());
    for (size_t i = 0; i < count; i++)
        a[(size_t)me * count + i] = me * 1000 + (int32_t)(i % 997);
    snprintf(label, sizeof(label), "all_gather of %zu in place", count);
    if (!EXPECT_OK(*fails, label, nexar_all_gather(w, a + (size_t)me * count, a, count,
                                                   NEXAR_I32)))
        for (size_t q = 0, bad = 0; q < (size_t)n && !bad; q++)
            for (size_t i = 0; i < count && !bad; i++)
                if ((bad = a[q * count + i] != (int32_t)q * 1000 + (int32_t)(i % 997)))
                    EXPECT_TRUE(*fails, 0, "%s: block %zu element %zu is %d", label, q, i,
                                a[q * count + i]);
    /* reduce_scatter whose recv is another rank's block of send; then its own. */
    for (size_t i = 0; i < count * (size_t)n; i++)
        a[i] = me + (int32_t)(i / count) * 100 + (int32_t)(i % count % 997);
    snprintf(label, sizeof(label), "reduce_scatter of %zu, recv in another block", count);
    st = nexar_reduce_scatter(w, a, a + (size_t)((me + 1) % n) * count, count, NEXAR_I32,
                              NEXAR_SUM);
    if (!EXPECT_ST(*fails, NEXAR_ERR_INVALID, label, st))
        EXPECT_TRUE(*fails, strstr(nexar_last_error(), "recv = send + rank * count elements"),
                    "%s: \"%s\"", label, nexar_last_error());
    snprintf(label, sizeof(label), "reduce_scatter of %zu in place", count);
    int32_t *mine = a + (size_t)me * count;
    if (!EXPECT_OK(*fails, label,
                   nexar_reduce_scatter(w, a, mine, count, NEXAR_I32, NEXAR_SUM)))
        for (size_t i = 0; i < count; i++) {
            int32_t wantv = n * (n - 1) / 2 + n * (me * 100 + (int32_t)(i % 997));
            if (mine[i] != wantv) {
                EXPECT_TRUE(*fails, 0, "%s: element %zu is %d, want %d", label, i, mine[i],
                            wantv);
                break;
            }
        }
    /* all_to_all has no in-place form. */
    snprintf(label, sizeof(label), "all_to_all of %zu in one buffer", count);
    st = nexar_all_to_all(w, a, a, count, NEXAR_I32);
    if (!EXPECT_ST(*fails, NEXAR_ERR_INVALID, label, st))
        EXPECT_TRUE(*fails, strstr(nexar_last_error(), "send and recv overlap") &&
                    !strstr(nexar_last_error(), "in-place form"), "%s: \"%s\"", label,
                    nexar_last_error());
    still_works(w, fails, n, "the overlap checks");
    free(a);
}

static int invalid_args(struct hx_rank *r)
{
    int fails = 0, me = r->rank, n = r->size;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    nexar_request_t *req = NULL;
    nexar_iov_t iov_null[2] = {{sbuf, 2}, {NULL, 3}};
    nexar_iov_t iov_ovf[2] = {{sbuf, 2}, {sbuf, SIZE_MAX / 2}};
    size_t huge = SIZE_MAX / 2 + 7; /* count * esize overflows size_t */
    size_t gath = SIZE_MAX / (size_t)n / 2 + 1; /* count * size * esize overflows */
    nexar_comm_t *junk = NULL;
    void *heap = malloc(64);

#define BAD(label, call)                                                               \
    do {                                                                               \
        if (me == 0 || (k % 2) == 0) {                                                 \
            nexar_status_t st_ = (call);                                               \
            if (tl_check_status(label, NEXAR_ERR_INVALID, st_))                        \
                fails++;                                                               \
            else if (!nexar_last_error() || !*nexar_last_error()) {                    \
                tl_log("FAIL %s: NEXAR_ERR_INVALID but nexar_last_error() is empty", label); \
                fails++;                                                               \
            }                                                                          \
        }                                                                              \
        still_works(w, &fails, n, label);                                              \
        k++;                                                                           \
    } while (0)

    int k = 0;
    BAD("all_reduce dtype 10", nexar_all_reduce(w, sbuf, 4, (nexar_dtype_t)10, NEXAR_SUM));
    BAD("all_reduce dtype -1", nexar_all_reduce(w, sbuf, 4, (nexar_dtype_t)-1, NEXAR_SUM));
    BAD("all_reduce op 4", nexar_all_reduce(w, sbuf, 4, NEXAR_F32, (nexar_op_t)4));
    BAD("reduce op -1", nexar_reduce(w, sbuf, rbuf, 4, NEXAR_I32, (nexar_op_t)-1, 0));
    BAD("scan op 99", nexar_scan(w, sbuf, 4, NEXAR_I32, (nexar_op_t)99));
    BAD("reduce_scatter dtype 77", nexar_reduce_scatter(w, sbuf, rbuf, 1, (nexar_dtype_t)77, NEXAR_SUM));
    BAD("broadcast root -1", nexar_broadcast(w, sbuf, 4, NEXAR_I32, -1));
    BAD("broadcast root == size", nexar_broadcast(w, sbuf, 4, NEXAR_I32, n));
    BAD("reduce root == size", nexar_reduce(w, sbuf, rbuf, 4, NEXAR_I32, NEXAR_SUM, n));
    BAD("gather root -1", nexar_gather(w, sbuf, rbuf, 4, NEXAR_I32, -1));
    BAD("scatter root size+5", nexar_scatter(w, sbuf, rbuf, 4, NEXAR_I32, n + 5));
    BAD("ibroadcast root == size", nexar_ibroadcast(w, sbuf, 4, NEXAR_I32, n, &req));
    BAD("all_reduce NULL buf count 5", nexar_all_reduce(w, NULL, 5, NEXAR_I32, NEXAR_SUM));
    BAD("broadcast NULL buf", nexar_broadcast(w, NULL, 5, NEXAR_I32, 0));
    BAD("all_gather NULL send", nexar_all_gather(w, NULL, rbuf, 2, NEXAR_I32));
    BAD("all_gather NULL recv", nexar_all_gather(w, sbuf, NULL, 2, NEXAR_I32));
    BAD("reduce_scatter NULL recv", nexar_reduce_scatter(w, sbuf, NULL, 2, NEXAR_I32, NEXAR_SUM));
    BAD("all_to_all NULL send", nexar_all_to_all(w, NULL, rbuf, 2, NEXAR_I32));
    BAD("scan NULL buf", nexar_scan(w, NULL, 2, NEXAR_I32, NEXAR_SUM));
    BAD("exscan NULL buf", nexar_exscan(w, NULL, 2, NEXAR_I32, NEXAR_SUM));
    BAD("all_reduce count overflow", nexar_all_reduce(w, sbuf, huge, NEXAR_F32, NEXAR_SUM));
    BAD("all_reduce count SIZE_MAX", nexar_all_reduce(w, sbuf, SIZE_MAX, NEXAR_U8, NEXAR_SUM));
    BAD("broadcast count overflow", nexar_broadcast(w, sbuf, huge, NEXAR_I64, 0));
    BAD("all_gather count*size overflow", nexar_all_gather(w, sbuf, rbuf, gath, NEXAR_I32));
    BAD("all_to_all count*size overflow", nexar_all_to_all(w, sbuf, rbuf, gath, NEXAR_I32));
    BAD("iall_reduce count overflow", nexar_iall_reduce(w, sbuf, huge, NEXAR_I64, NEXAR_SUM, &req));
    BAD("bucketed NULL iov array", nexar_all_reduce_bucketed(w, NULL, 2, NEXAR_I32, NEXAR_SUM));
    BAD("bucketed iov with NULL ptr", nexar_all_reduce_bucketed(w, iov_null, 2, NEXAR_I32, NEXAR_SUM));
    BAD("bucketed total count overflow", nexar_all_reduce_bucketed(w, iov_ovf, 2, NEXAR_I32, NEXAR_SUM));
    BAD("bucketed bad op", nexar_all_reduce_bucketed(w, iov_null, 1, NEXAR_I32, (nexar_op_t)9));
    BAD("all_reduce NULL comm", nexar_all_reduce(NULL, sbuf, 4, NEXAR_I32, NEXAR_SUM));
    BAD("barrier NULL comm", nexar_barrier(NULL));
    BAD("split NULL out", nexar_comm_split(w, 0, 0, NULL));
    BAD("split NULL comm", nexar_comm_split(NULL, 0, 0, &junk));
    BAD("iall_reduce NULL req", nexar_iall_reduce(w, sbuf, 4, NEXAR_I32, NEXAR_SUM, NULL));
    BAD("send dest -1", nexar_send(w, sbuf, 4, NEXAR_I32, -1, 0));
    BAD("send dest == size", nexar_send(w, sbuf, 4, NEXAR_I32, n, 0));
    BAD("recv src == size", nexar_recv(w, sbuf, 4, NEXAR_I32, n, 0));
    BAD("send NULL buf", nexar_send(w, NULL, 4, NEXAR_I32, 0, 0));
    BAD("send bad dtype", nexar_send(w, sbuf, 4, (nexar_dtype_t)12, 0, 0));
    BAD("send count overflow", nexar_send(w, sbuf, huge, NEXAR_I64, 0, 0));
    BAD("nexar_wait(NULL)", nexar_wait(NULL));
    BAD("nexar_sync(NULL)", nexar_sync(NULL));
    BAD("nexar_comm_free(world)", nexar_comm_free(w));
    BAD("nexar_alloc(64, NULL)", nexar_alloc(64, NULL));
    BAD("nexar_free(malloc'd pointer)", nexar_free(heap));
    if (me == 0)
        tl_log("%d kinds of invalid argument: NEXAR_ERR_INVALID with a text, and the "
               "world allreduce right after each (invalid calls on some ranks only) is exact", k);
    free(heap);

    /* count 0 with NULL buffers: a no-op that succeeds, on every collective */
    nexar_iov_t iov0[2] = {{NULL, 0}, {NULL, 0}};
    EXPECT_OK(fails, "all_reduce count 0 NULL", nexar_all_reduce(w, NULL, 0, NEXAR_F32, NEXAR_SUM));
    EXPECT_OK(fails, "broadcast count 0 NULL", nexar_broadcast(w, NULL, 0, NEXAR_F16, n - 1));
    EXPECT_OK(fails, "reduce count 0 NULL", nexar_reduce(w, NULL, NULL, 0, NEXAR_I8, NEXAR_MAX, 0));
    EXPECT_OK(fails, "all_gather count 0 NULL", nexar_all_gather(w, NULL, NULL, 0, NEXAR_U64));
    EXPECT_OK(fails, "reduce_scatter count 0 NULL", nexar_reduce_scatter(w, NULL, NULL, 0, NEXAR_BF16, NEXAR_MIN));
    EXPECT_OK(fails, "gather count 0 NULL", nexar_gather(w, NULL, NULL, 0, NEXAR_F64, 0));
    EXPECT_OK(fails, "scatter count 0 NULL", nexar_scatter(w, NULL, NULL, 0, NEXAR_U32, n - 1));
    EXPECT_OK(fails, "all_to_all count 0 NULL", nexar_all_to_all(w, NULL, NULL, 0, NEXAR_I32));
    EXPECT_OK(fails, "scan count 0 NULL", nexar_scan(w, NULL, 0, NEXAR_I64, NEXAR_PROD));
    EXPECT_OK(fails, "exscan count 0 NULL", nexar_exscan(w, NULL, 0, NEXAR_U8, NEXAR_SUM));
    EXPECT_OK(fails, "bucketed of two empty iovs", nexar_all_reduce_bucketed(w, iov0, 2, NEXAR_F32, NEXAR_SUM));
    if (!EXPECT_OK(fails, "iall_reduce count 0 NULL", nexar_iall_reduce(w, NULL, 0, NEXAR_F32, NEXAR_SUM, &req)))
        EXPECT_OK(fails, "wait count 0", nexar_wait(req));
    still_works(w, &fails, n, "the count-0 ops");
    if (me == 0)
        tl_log("count 0 with NULL buffers: every collective returns NEXAR_OK");

    /* arena limits */
    void *big = NULL, *small = NULL;
    EXPECT_ST(fails, NEXAR_ERR_NOMEM, "nexar_alloc(1 PiB)", nexar_alloc((size_t)1 << 50, &big));
    EXPECT_OK(fails, "nexar_alloc(4096) after NOMEM", nexar_alloc(4096, &small));
    EXPECT_OK(fails, "nexar_free(NULL)", nexar_free(NULL));
    if (small) {
        memset(small, 1, 4096);
        EXPECT_OK(fails, "all_reduce on the arena buffer", nexar_all_reduce(w, small, 4096, NEXAR_U8, NEXAR_SUM));
        EXPECT_TRUE(fails, ((uint8_t *)small)[4095] == n, "arena allreduce: %u",
                    ((uint8_t *)small)[4095]);
        EXPECT_OK(fails, "nexar_free(arena)", nexar_free(small));
    }
    nexar_status_t st = nexar_comm_set_stream(w, NULL);
    EXPECT_TRUE(fails, st == NEXAR_OK || st == NEXAR_ERR_UNSUPPORTED || st == NEXAR_ERR_INVALID,
                "nexar_comm_set_stream(world, NULL): %s", tl_status_name((int)st));
    still_works(w, &fails, n, "the arena checks");
    overlaps(w, &fails, me, n, 4);
    overlaps(w, &fails, me, n, 1u << 16);
    if (me == 0 && !fails)
        tl_log("overlapping send and recv: NEXAR_ERR_INVALID naming the in-place form; that "
               "form exact, staged and single-copy");
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

/* ---- the environment ------------------------------------------------------------------ */

static int bad_env(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    char what[200];
    snprintf(what, sizeof(what), "nexar_init with NEXAR_RANK=%s NEXAR_WORLD_SIZE=%s",
             getenv("NEXAR_RANK") ? getenv("NEXAR_RANK") : "(unset)",
             getenv("NEXAR_WORLD_SIZE") ? getenv("NEXAR_WORLD_SIZE") : "(unset)");
    if (!EXPECT_ST(fails, NEXAR_ERR_INVALID, what, st))
        tl_log("ok: %s -> NEXAR_ERR_INVALID: \"%s\"", what, nexar_last_error());
    nexar_finalize();
    return fails ? 1 : 0;
}

/* r->arg: the variable's assignment ("NEXAR_STREAM_COPY=yes"): INVALID, and the text
 * quotes it and says what it may be. */
static int bad_switch(struct hx_rank *r)
{
    int fails = 0;
    const char *assign = r->arg;
    char want[96];
    const char *eq = strchr(assign, '=');
    snprintf(want, sizeof(want), "%.*s=\"%s\" is not 0 or 1", (int)(eq - assign), assign,
             eq + 1);
    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    if (!EXPECT_ST(fails, NEXAR_ERR_INVALID, assign, st)) {
        EXPECT_TRUE(fails, strstr(nexar_last_error(), want) != NULL,
                    "nexar_init with %s: text \"%s\" lacks \"%s\"", assign,
                    nexar_last_error(), want);
        if (!fails)
            tl_log("ok: %s -> NEXAR_ERR_INVALID: \"%s\"", assign, nexar_last_error());
    }
    nexar_finalize();
    return fails ? 1 : 0;
}

static int env_fallback(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    const char *how = r->arg;
    if (hx_init(&w) != NEXAR_OK) {
        tl_log("FAIL: nexar_init from the %s environment", how);
        return 1;
    }
    EXPECT_TRUE(fails, nexar_comm_rank(w) == r->rank && nexar_comm_size(w) == r->size,
                "%s environment: rank/size %d/%d, expected %d/%d", how, nexar_comm_rank(w),
                nexar_comm_size(w), r->rank, r->size);
    still_works(w, &fails, r->size, "init from the environment");
    if (r->rank == 0 && !fails)
        tl_log("%s environment: ranks and size right, allreduce works", how);
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

static int run_env_job(const struct hx_daemon *d, int size, int no_nexar, const char *const *env,
                       hx_rank_fn fn, const char *how)
{
    struct hx_job_opts o = {.sock = d->sock, .size = size, .fn = fn, .arg = (void *)how,
                            .no_nexar_env = no_nexar, .env_extra = env, .nexar_timeout_s = 30};
    return hx_run(&o, 60.0);
}

int main(void)
{
    hx_require_nexard();
    int rv = 0;

    /* a socket path where nothing listens */
    struct hx_daemon none;
    if (hx_daemon_paths(&none))
        return 1;
    tl_log("init without a daemon (socket %s)", none.sock);
    const char *e0[] = {"NEXAR_TIMEOUT=3", NULL};
    struct hx_job_opts o0 = {.sock = none.sock, .size = 1, .fn = no_daemon, .env_extra = e0};
    if (hx_run(&o0, 60.0))
        rv = -1;
    hx_rmtree(none.dir);

    struct hx_daemon d;
    if (hx_daemon_start(&d, (const char *const[]){"--heap-bytes", "1048576", NULL}))
        return 1;
    tl_log("invalid arguments, world 3");
    if (itest_run(&d, 3, invalid_args, NULL, 30, 180.0))
        rv = -1;

    tl_log("bad environments");
    static const char *const bad[][3] = {{"NEXAR_RANK=5", "NEXAR_WORLD_SIZE=2", NULL},
                                         {"NEXAR_RANK=abc", "NEXAR_WORLD_SIZE=2", NULL},
                                         {"NEXAR_RANK=0", "NEXAR_WORLD_SIZE=0", NULL},
                                         {"NEXAR_RANK=-1", "NEXAR_WORLD_SIZE=2", NULL}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *env[] = {bad[i][0], bad[i][1], "NEXAR_TIMEOUT=3", NULL};
        if (run_env_job(&d, 1, 0, env, bad_env, "bad"))
            rv = -1;
    }

    static const char *const switches[] = {"NEXAR_PEER_READS=2", "NEXAR_SINGLE_COPY=on",
                                           "NEXAR_STREAM_COPY=yes"};
    for (size_t i = 0; i < sizeof(switches) / sizeof(switches[0]); i++) {
        const char *env[] = {switches[i], "NEXAR_TIMEOUT=3", NULL};
        if (run_env_job(&d, 1, 0, env, bad_switch, switches[i]))
            rv = -1;
    }

    tl_log("environment fallbacks");
    char port[64], slurm[64], job[96];
    snprintf(port, sizeof(port), "MASTER_PORT=%d", 20000 + (int)(getpid() % 20000));
    snprintf(slurm, sizeof(slurm), "SLURM_JOB_ID=%d", (int)getpid());
    hx_job_name(job, sizeof(job), "ompi");
    char jobenv[128];
    snprintf(jobenv, sizeof(jobenv), "NEXAR_JOB=%s", job);
    const char *torch[] = {"RANK={rank}", "WORLD_SIZE=2", "LOCAL_RANK={rank}",
                           "MASTER_ADDR=127.0.0.1", port, NULL};
    const char *sl[] = {"SLURM_PROCID={rank}", "SLURM_NTASKS=3", "SLURM_LOCALID={rank}", slurm,
                        "SLURM_STEP_ID=0", NULL};
    const char *om[] = {"OMPI_COMM_WORLD_RANK={rank}", "OMPI_COMM_WORLD_SIZE=2",
                        "OMPI_COMM_WORLD_LOCAL_RANK={rank}", jobenv, NULL};
    if (run_env_job(&d, 2, 1, torch, env_fallback, "torchrun"))
        rv = -1;
    if (run_env_job(&d, 3, 1, sl, env_fallback, "Slurm"))
        rv = -1;
    if (run_env_job(&d, 2, 1, om, env_fallback, "Open MPI (+NEXAR_JOB)"))
        rv = -1;
    if (run_env_job(&d, 1, 1, NULL, env_fallback, "empty (rank 0 of 1)"))
        rv = -1;

    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
