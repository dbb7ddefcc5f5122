/*
 * main.c - nexar-bench: the sweep over collectives, dtypes, ops and sizes.
 *
 * For every row and each form of the call nexar has (out-of-place, in-place; see
 * nxb_colls): warm-up calls, a barrier, `iters` timed calls, then the per-rank mean
 * time is reduced with MAX (the slowest rank decides, as in nccl-tests).  In check
 * mode one more call of that form runs on the deterministic pattern of pattern.c and
 * every rank counts its wrong elements; the counts are summed.
 *
 * Any failed call ends the program at once with that call's status: the
 * communicator is failed anyway (nexar.h), and the other ranks learn it through
 * NEXAR_ERR_PEER_LOST, which nexar-run turns into one summary line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "util.h"

struct bench {
    struct nxb_opts o;
    nexar_comm_t *comm;
    int rank, n;
    void *send, *recv;
    size_t buf_bytes;
    uint64_t rows_total, rows_done;
    bool dry; /* counting rows for -p, nothing is called */
};

static void __attribute__((noreturn)) fail(struct bench *b, const char *what,
                                           nexar_status_t s)
{
    const char *detail = nexar_last_error();
    fprintf(stderr, "nexar-bench: rank %d: %s failed: %s%s%s\n", b->rank, what,
            nexar_strerror(s), *detail ? ": " : "", detail);
    nexar_finalize();
    exit(s);
}

/* A short description of a call, for error messages; in place: the in-place form of a
 * call that has both. */
static const char *call_name(enum nxb_coll c, enum nxb_place p, size_t count,
                             nexar_dtype_t d, nexar_op_t op)
{
    static char buf[128];
    const struct nxb_coll_desc *cd = &nxb_colls[c];
    snprintf(buf, sizeof(buf), "%s(count=%zu, %s%s%s%s)", cd->name, count, nxb_dtype_name(d),
             cd->has_op ? ", " : "", cd->has_op ? nxb_op_name(op) : "",
             p == NXB_INPL && cd->out_of_place ? ", in place" : "");
    return buf;
}

/* The buffers of form p: in place, the receive buffer is the send buffer too. */
static void *send_buf(struct bench *b, enum nxb_place p)
{
    return p == NXB_INPL ? b->recv : b->send;
}

static void run_checked(struct bench *b, enum nxb_coll c, enum nxb_place p, size_t count,
                        nexar_dtype_t d, nexar_op_t op)
{
    nexar_status_t s =
        nxb_coll_run(b->comm, c, send_buf(b, p), b->recv, count, d, op, b->o.root);
    if (s != NEXAR_OK)
        fail(b, call_name(c, p, count, d, op), s);
}

/* Mean seconds per call of the slowest rank; *algo: what carried the calls between nodes
 * (nexar_comm_algorithm, read before the timing's own all_reduce). */
static double time_row(struct bench *b, enum nxb_coll c, enum nxb_place p, size_t count,
                       nexar_dtype_t d, nexar_op_t op, const char **algo)
{
    for (long i = 0; i < b->o.warmup; i++)
        run_checked(b, c, p, count, d, op);
    nexar_status_t s = nexar_barrier(b->comm);
    if (s != NEXAR_OK)
        fail(b, "barrier before the timed loop", s);
    double t0 = nxt_now();
    for (long i = 0; i < b->o.iters; i++)
        run_checked(b, c, p, count, d, op);
    double dt = (nxt_now() - t0) / (double)b->o.iters;
    /* sendrecv is no collective: the communicator's last one is the barrier above. */
    *algo = c == NXB_SENDRECV ? NULL : nexar_comm_algorithm(b->comm);
    s = nexar_all_reduce(b->comm, &dt, 1, NEXAR_F64, NEXAR_MAX);
    if (s != NEXAR_OK)
        fail(b, "all_reduce(MAX) of the times", s);
    return dt;
}

/* Wrong elements over all ranks for one checked call of form p. */
static int64_t check_row(struct bench *b, enum nxb_coll c, enum nxb_place p, size_t count,
                         nexar_dtype_t d, nexar_op_t op)
{
    nxb_pattern_fill(c, b->n, b->rank, b->o.root, count, d, op, send_buf(b, p), b->recv);
    run_checked(b, c, p, count, d, op);
    uint64_t wrong = nxb_pattern_check(c, b->n, b->rank, b->o.root, count, d, op, b->recv);
    nexar_status_t s = nexar_all_reduce(b->comm, &wrong, 1, NEXAR_U64, NEXAR_SUM);
    if (s != NEXAR_OK)
        fail(b, "all_reduce of #wrong", s);
    /* Back to zeros: repeated in-place reductions of the pattern would grow
     * without bound in the next row's timed loop.  count * n elements bound what
     * any collective touched. */
    size_t touched = count * (size_t)b->n * nexar_dtype_size(d);
    if (touched > b->buf_bytes)
        touched = b->buf_bytes;
    memset(b->send, 0, touched);
    memset(b->recv, 0, touched);
    return (int64_t)wrong;
}

static void one_row(struct bench *b, enum nxb_coll c, uint64_t bytes, size_t count,
                    nexar_dtype_t d, nexar_op_t op)
{
    b->rows_done++;
    if (b->dry)
        return;
    if (b->o.progress && b->rank == 0)
        fprintf(stderr, "nexar-bench: [%llu/%llu] %s %llu B\n",
                (unsigned long long)b->rows_done, (unsigned long long)b->rows_total,
                call_name(c, NXB_OOP, count, d, op), (unsigned long long)bytes);

    const struct nxb_coll_desc *cd = &nxb_colls[c];
    struct nxb_row r = {
        .coll = c, .ranks = b->n, .bytes = bytes, .count = count, .dtype = d, .op = op,
        .root = cd->has_root ? b->o.root : -1,
    };
    for (int p = 0; p < NXB_PLACES; p++) {
        struct nxb_result *g = &r.res[p];
        g->wrong = -1;
        g->ran = p == NXB_INPL ? cd->in_place : cd->out_of_place;
        if (!g->ran)
            continue;
        double t = time_row(b, c, (enum nxb_place)p, count, d, op, &g->algo);
        g->time_us = t * 1e6;
        g->algbw = t > 0 ? (double)bytes / t / 1e9 : 0;
        g->busbw = g->algbw * nxb_busbw_factor(c, b->n);
        if (b->o.check)
            g->wrong = check_row(b, c, (enum nxb_place)p, count, d, op);
    }
    if (b->rank == 0)
        nxb_report_row(&b->o, &r);
}

/* The sizes of one (collective, dtype): nccl-tests' geometric sweep, with the
 * count rounded down to whole elements (at least one) and repeats skipped. */
static void size_sweep(struct bench *b, enum nxb_coll c, nexar_dtype_t d, nexar_op_t op)
{
    uint64_t es = nexar_dtype_size(d);
    uint64_t blocks = nxb_colls[c].size_per_rank ? (uint64_t)b->n : 1;
    uint64_t last = UINT64_MAX;
    for (uint64_t s = b->o.min_bytes; s <= b->o.max_bytes;) {
        uint64_t count = s / (es * blocks);
        if (count == 0 && s > 0)
            count = 1;
        uint64_t bytes = count * es * blocks;
        if (bytes != last)
            one_row(b, c, bytes, (size_t)count, d, op);
        last = bytes;
        uint64_t next = (uint64_t)((double)s * b->o.factor);
        s = next > s ? next : s + 1;
    }
}

static void sweep(struct bench *b)
{
    for (int c = 0; c < NXB_COLL_COUNT; c++) {
        if (!b->o.coll[c])
            continue;
        const struct nxb_coll_desc *cd = &nxb_colls[c];
        if (!b->dry && b->rank == 0)
            nxb_report_table_begin((enum nxb_coll)c, b->n);
        if (!cd->has_data) {
            one_row(b, (enum nxb_coll)c, 0, 0, NEXAR_F32, NEXAR_SUM);
        } else {
            for (int i = 0; i < NEXAR_DTYPE_COUNT; i++) {
                nexar_dtype_t d = nxb_dtype_order[i];
                if (!b->o.dtype[d])
                    continue;
                for (int k = 0; k < NEXAR_OP_COUNT; k++) {
                    nexar_op_t op = nxb_op_order[k];
                    if (!b->o.op[op])
                        continue;
                    size_sweep(b, (enum nxb_coll)c, d, op);
                    if (!cd->has_op)
                        break; /* the first selected op stands for all */
                }
            }
        }
        if (!b->dry && b->rank == 0)
            nxb_report_table_end(&b->o, (enum nxb_coll)c);
    }
}

/* Two buffers big enough for every row: the largest size, or one element of
 * the widest dtype per rank when that is more. */
static void alloc_buffers(struct bench *b)
{
    size_t bytes = (size_t)b->o.max_bytes;
    size_t least = 8 * (size_t)b->n;
    b->buf_bytes = bytes > least ? bytes : least; /* see size_sweep(): rows never exceed it */
    if (b->o.arena) {
        nexar_status_t s = nexar_alloc(b->buf_bytes, &b->send);
        if (s == NEXAR_OK)
            s = nexar_alloc(b->buf_bytes, &b->recv);
        if (s != NEXAR_OK) {
            char what[96];
            snprintf(what, sizeof(what), "nexar_alloc of 2 x %zu bytes (-a; lower -e)",
                     b->buf_bytes);
            fail(b, what, s);
        }
    } else if (posix_memalign(&b->send, 4096, b->buf_bytes) ||
               posix_memalign(&b->recv, 4096, b->buf_bytes)) {
        fprintf(stderr, "nexar-bench: rank %d: cannot allocate 2 x %zu bytes\n", b->rank,
                b->buf_bytes);
        nexar_finalize();
        exit(NEXAR_ERR_NOMEM);
    }
    /* Touch every page now, so no timed call pays for first-touch faults. */
    memset(b->send, 0, b->buf_bytes);
    memset(b->recv, 0, b->buf_bytes);
}

/* Rank 0 opens the -m destination; every rank learns whether it could, so that all of
 * them stop together when it could not. */
static void open_machine_output(struct bench *b)
{
    int32_t err = b->rank == 0 ? -nxb_report_open(&b->o) : 0; /* an errno, or 0 */
    nexar_status_t s = nexar_all_reduce(b->comm, &err, 1, NEXAR_I32, NEXAR_MAX);
    if (s != NEXAR_OK)
        fail(b, "all_reduce of the -m FILE check", s);
    if (err == 0)
        return;
    if (b->rank == 0)
        fprintf(stderr, "nexar-bench: -m %s: %s\n", b->o.machine, strerror(err));
    nexar_finalize();
    exit(NXB_EXIT_CANTCREAT);
}

/* Every rank's pid and host name, for the "# Using devices" lines.  Each rank fills
 * its own record of a zeroed array and a SUM all_reduce of the bytes (the other
 * records are 0 there) gives rank 0 all of them: all_reduce is the one collective the
 * sweep itself needs, so this works wherever the bench does.  The caller frees it. */
static struct nxb_rank_info *rank_infos(struct bench *b)
{
    struct nxb_rank_info *all = nxt_xcalloc((size_t)b->n, sizeof(*all));
    struct nxb_rank_info *me = &all[b->rank];
    me->pid = (int32_t)getpid();
    if (gethostname(me->host, sizeof(me->host) - 1) != 0) /* the last byte stays NUL */
        snprintf(me->host, sizeof(me->host), "?");
    nexar_status_t s =
        nexar_all_reduce(b->comm, all, (size_t)b->n * sizeof(*all), NEXAR_U8, NEXAR_SUM);
    if (s != NEXAR_OK)
        fail(b, "all_reduce of the ranks' pids and hosts", s);
    return all;
}

static void free_buffers(struct bench *b)
{
    if (b->o.arena) {
        nexar_free(b->send);
        nexar_free(b->recv);
    } else {
        free(b->send);
        free(b->recv);
    }
}

int main(int argc, char **argv)
{
    static struct bench b;
    nxt_progname = "nexar-bench";
    nxb_opts_parse(&b.o, argc, argv);

    nexar_status_t s = nexar_init(&b.comm);
    if (s != NEXAR_OK) {
        const char *detail = nexar_last_error();
        fprintf(stderr, "nexar-bench: nexar_init failed: %s%s%s\n", nexar_strerror(s),
                *detail ? ": " : "", detail);
        nexar_finalize();
        return s;
    }
    b.rank = nexar_comm_rank(b.comm);
    b.n = nexar_comm_size(b.comm);
    if (b.o.root >= b.n) {
        if (b.rank == 0)
            fprintf(stderr, "nexar-bench: -r %d: the root must be below the %d ranks\n",
                    b.o.root, b.n);
        nexar_finalize();
        return NXB_EXIT_USAGE;
    }

    b.dry = true;
    sweep(&b);
    b.rows_total = b.rows_done;
    b.rows_done = 0;
    b.dry = false;

    if (b.o.machine)
        open_machine_output(&b);
    struct nxb_rank_info *info = rank_infos(&b);
    alloc_buffers(&b);
    if (b.rank == 0)
        nxb_report_preamble(&b.o, b.n, info);
    free(info);
    sweep(&b);
    uint64_t wrong = b.rank == 0 ? nxb_report_finish() : 0;
    /* Every rank must agree on the exit status, not only rank 0. */
    s = nexar_all_reduce(b.comm, &wrong, 1, NEXAR_U64, NEXAR_MAX);
    if (s != NEXAR_OK)
        fail(&b, "all_reduce of the final #wrong", s);

    free_buffers(&b);
    nexar_finalize();
    return wrong ? NXB_EXIT_WRONG : 0;
}
