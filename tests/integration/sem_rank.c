/*
 * sem_rank.c - the rank program of test_semantics.c: what a job may rely on, one mode per
 * promise, each exact.  Run by nexar-run (one node or --nodes K); exit 0 when the promise
 * held, 1 with what broke on stderr.
 *
 *   sem_rank custody        rank 1 sends 2 u32 to rank 0 with nexar_send, then finalizes
 *                           and exits at once; rank 0 receives 300 ms later: the values
 *                           arrive (a completed send is delivered)
 *   sem_rank custody_isend  the same with nexar_isend + nexar_wait
 *   sem_rank ring ROUNDS    every rank sends to its right neighbour and receives from its
 *                           left, ROUNDS times, then finalizes with no barrier
 *   sem_rank split4         four nexar_comm_split in a row right after nexar_init, each
 *                           checked (size, rank, an all_reduce of the members)
 *   sem_rank barrier_sync   rank 0 posts nexar_irecv of 24 MiB (many chunks), then
 *                           nexar_barrier; rank 1 sends it, then enters the barrier: when
 *                           rank 0's barrier returns, the whole message is in its buffer
 *                           (five times)
 *   sem_rank leave_pending  rank 1 (on another node) finalizes while rank 0 waits in an
 *                           all_reduce: rank 0 gets NEXAR_ERR_PEER_LOST naming rank 1
 *                           within 3 s (not TIMEOUT at the 10 s deadline)
 *   sem_rank leave_later    the same, with rank 0's all_reduce called after rank 1 left
 *   sem_rank mismatch_text  2 nodes x 2 ranks: world rank 3 calls all_reduce with another
 *                           count, on the world and on a split whose ranks are numbered
 *                           backwards: every rank's text names the communicator ranks and
 *                           world ranks that disagreed
 *   sem_rank describe       2 nodes x 1 rank: rank 1 enters an all_reduce 1.5 s late;
 *                           meanwhile rank 0 asks its daemon (nexarctl ops, $NEXARCTL)
 *                           where the op stands: "waiting for node 1 (ADDR, rank 1)",
 *                           the node named once
 *   sem_rank slot_wait      2 ranks, 2 slots and no heap room: all_reduces on four
 *                           communicators posted in crossed orders wait for each other's
 *                           slots until the deadline; the two that never left a rank's
 *                           library name the ops that held its slots
 *   sem_rank bucket_cycle   the same orders with bucketed all_reduces and heap room: the
 *                           ops that find no slot bounce, and all four complete, exact
 *   sem_rank many_pending   rank 1 comes a second late while rank 0 posts 600 ops without
 *                           waiting, more than nexard's max_pending: the library holds
 *                           the rest back, and every op completes, exact
 *   sem_rank threads ROUNDS three threads per rank: blocking send/recv with a partner on
 *                           the world (tag 1), nexar_sync on the world in a loop beside its
 *                           own isend/irecv (tag 2), and all_reduce plus a split on a
 *                           second communicator; every value exact
 */
#include <inttypes.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nexar.h"

static int rank, size;

static int fail(const char *what, nexar_status_t s)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, nexar_strerror(s), nexar_last_error());
    return 1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Rank 1 sends and leaves at once; rank 0 receives after it left. */
static int custody(nexar_comm_t *w, int nonblocking)
{
    nexar_status_t s;
    if (size < 2)
        return fail("custody needs 2 ranks", NEXAR_ERR_INVALID);
    if (rank == 1) {
        uint32_t v[2] = {0xc0ffee01u, 0xfeedbeefu};
        if (nonblocking) {
            nexar_request_t *r;
            if ((s = nexar_isend(w, v, 2, NEXAR_U32, 0, 7, &r)) != NEXAR_OK)
                return fail("isend", s);
            if ((s = nexar_wait(r)) != NEXAR_OK)
                return fail("wait", s);
        } else if ((s = nexar_send(w, v, 2, NEXAR_U32, 0, 7)) != NEXAR_OK) {
            return fail("send", s);
        }
        if ((s = nexar_finalize()) != NEXAR_OK)
            return fail("finalize", s);
        return 0;
    }
    if (rank == 0) {
        uint32_t v[2] = {0, 0};
        sleep_ms(300);
        if ((s = nexar_recv(w, v, 2, NEXAR_U32, 1, 7)) != NEXAR_OK)
            return fail("recv of a send whose sender left", s);
        if (v[0] != 0xc0ffee01u || v[1] != 0xfeedbeefu) {
            fprintf(stderr, "rank 0: received %08" PRIx32 " %08" PRIx32 ", expected c0ffee01 "
                    "feedbeef\n", v[0], v[1]);
            return 1;
        }
    }
    if ((s = nexar_finalize()) != NEXAR_OK)
        return fail("finalize", s);
    return 0;
}

static int ring(nexar_comm_t *w, int rounds)
{
    nexar_status_t s;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int k = 0; k < rounds; k++) {
        uint64_t out[4], in[4] = {0};
        for (int i = 0; i < 4; i++)
            out[i] = (uint64_t)rank << 32 | (uint64_t)k << 8 | (uint64_t)i;
        nexar_request_t *r;
        if ((s = nexar_isend(w, out, 4, NEXAR_U64, right, 3, &r)) != NEXAR_OK)
            return fail("isend", s);
        if ((s = nexar_recv(w, in, 4, NEXAR_U64, left, 3)) != NEXAR_OK)
            return fail("recv", s);
        if ((s = nexar_wait(r)) != NEXAR_OK)
            return fail("wait", s);
        for (int i = 0; i < 4; i++)
            if (in[i] != ((uint64_t)left << 32 | (uint64_t)k << 8 | (uint64_t)i)) {
                fprintf(stderr, "rank %d: round %d: element %d is %" PRIx64 "\n", rank, k, i,
                        in[i]);
                return 1;
            }
    }
    if ((s = nexar_finalize()) != NEXAR_OK)
        return fail("finalize", s);
    return 0;
}

/* Four splits in a row, the first right after init. */
static int split4(nexar_comm_t *w)
{
    static const int ncolors[4] = {2, 1, 3, 2};
    nexar_status_t s;
    for (int k = 0; k < 4; k++) {
        int nc = ncolors[k] < size ? ncolors[k] : size;
        uint32_t color = (uint32_t)(rank % nc);
        uint32_t key = (uint32_t)(size - rank); /* reversed order inside each color */
        nexar_comm_t *sub = NULL;
        if ((s = nexar_comm_split(w, color, key, &sub)) != NEXAR_OK)
            return fail("comm_split", s);
        uint32_t want_size = 0, want_rank = 0;
        for (int r = 0; r < size; r++)
            if (r % nc == (int)color) {
                want_size++;
                if (r > rank)
                    want_rank++;
            }
        int got_size = nexar_comm_size(sub), got_rank = nexar_comm_rank(sub);
        if (got_size != (int)want_size || got_rank != (int)want_rank) {
            fprintf(stderr, "rank %d: split %d (color %u): rank %d of %d, expected %u of %u\n",
                    rank, k, color, got_rank, got_size, want_rank, want_size);
            return 1;
        }
        int64_t v = rank + 1, want = 0;
        for (int r = 0; r < size; r++)
            if (r % nc == (int)color)
                want += r + 1;
        if ((s = nexar_all_reduce(sub, &v, 1, NEXAR_I64, NEXAR_SUM)) != NEXAR_OK)
            return fail("all_reduce on a split", s);
        if (v != want) {
            fprintf(stderr, "rank %d: split %d: sum %" PRId64 ", expected %" PRId64 "\n", rank,
                    k, v, want);
            return 1;
        }
        if ((s = nexar_comm_free(sub)) != NEXAR_OK)
            return fail("comm_free", s);
    }
    if ((s = nexar_finalize()) != NEXAR_OK)
        return fail("finalize", s);
    return 0;
}

/* Rank 0's irecv must be complete when its barrier returns (barrier implies sync); five
 * times, so that a barrier that returns early is caught. */
static int barrier_sync(nexar_comm_t *w)
{
    enum { N = 3 << 20 }; /* 24 MiB of u64: many staging chunks */
    nexar_status_t s;
    uint64_t *v = malloc(N * sizeof(*v));
    if (!v)
        return fail("malloc", NEXAR_ERR_NOMEM);
    for (int it = 0; it < 5; it++) {
        uint64_t mul = 2654435761u + (uint64_t)it;
        if (rank == 0) {
            memset(v, 0, N * sizeof(*v));
            nexar_request_t *r;
            if ((s = nexar_irecv(w, v, N, NEXAR_U64, 1, 5, &r)) != NEXAR_OK)
                return fail("irecv", s);
            if ((s = nexar_barrier(w)) != NEXAR_OK)
                return fail("barrier", s);
            /* r was completed and freed by the barrier (as by nexar_sync): not used again */
            size_t wrong = 0, first = N;
            for (size_t i = 0; i < N; i++)
                if (v[i] != i * mul) {
                    wrong++;
                    if (first == N)
                        first = i;
                }
            if (wrong) {
                fprintf(stderr, "rank 0: iteration %d: after nexar_barrier, %zu of %d "
                        "elements of the irecv are not there yet (the first at %zu)\n", it,
                        wrong, N, first);
                return 1;
            }
        } else if (rank == 1) {
            for (size_t i = 0; i < N; i++)
                v[i] = i * mul;
            if ((s = nexar_send(w, v, N, NEXAR_U64, 0, 5)) != NEXAR_OK)
                return fail("send", s);
            if ((s = nexar_barrier(w)) != NEXAR_OK)
                return fail("barrier", s);
        } else if ((s = nexar_barrier(w)) != NEXAR_OK) {
            return fail("barrier", s);
        }
    }
    free(v);
    if ((s = nexar_finalize()) != NEXAR_OK)
        return fail("finalize", s);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Rank 1 leaves the world while (pending) or before (!pending) rank 0's all_reduce. */
static int leave(nexar_comm_t *w, int pending)
{
    nexar_status_t s;
    if ((s = nexar_barrier(w)) != NEXAR_OK)
        return fail("barrier", s);
    if (rank == 1) {
        if (pending)
            sleep_ms(300);
        if ((s = nexar_finalize()) != NEXAR_OK)
            return fail("finalize", s);
        return 0;
    }
    if (rank == 0) {
        if (!pending)
            sleep_ms(300);
        int32_t v = 1;
        double t0 = now_s();
        s = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
        double dt = now_s() - t0;
        const char *text = nexar_last_error();
        if (s != NEXAR_ERR_PEER_LOST || !strstr(text, "rank 1 ") || !strstr(text, "freed") ||
            dt > (pending ? 3.3 : 3.0)) {
            fprintf(stderr, "rank 0: all_reduce after rank 1 left: %s after %.2f s: %s "
                    "(expected PEER_LOST within 3 s naming rank 1)\n", nexar_strerror(s), dt,
                    text);
            return 1;
        }
    }
    nexar_finalize();
    return 0;
}

/* World rank 3 calls another count: the texts name the right ranks. */
static int mismatch_text(nexar_comm_t *w)
{
    if (size != 4)
        return fail("mismatch_text needs 4 ranks", NEXAR_ERR_INVALID);
    /* ranks {0,1} and {2,3}, each numbered backwards: world 3 is rank 0 of its part */
    nexar_comm_t *half = NULL;
    nexar_status_t s = nexar_comm_split(w, (uint32_t)(rank / 2), (uint32_t)(1 - rank % 2),
                                        &half);
    if (s != NEXAR_OK)
        return fail("split", s);
    /* The node that hosts both ranks names them; on the world, another node may see the
     * disagreement first, across nodes, and then names both nodes with their ranks. */
    struct {
        nexar_comm_t *c;
        const char *want[2], *or_want[2];
    } cases[2] = {
        {half, {"rank 0 (world rank 3) called all_reduce(count=11",
                "rank 1 (world rank 2) called all_reduce(count=10"}, {"-", "-"}},
        {w, {"rank 3 called all_reduce(count=11", "rank 2 called all_reduce(count=10"},
         {"ranks 2-3) called all_reduce(count=11", "ranks 0-1) called all_reduce(count=10"}},
    };
    for (int k = 0; k < 2; k++) {
        int32_t v[11] = {0};
        s = nexar_all_reduce(cases[k].c, v, rank == 3 ? 11 : 10, NEXAR_I32, NEXAR_SUM);
        const char *text = nexar_last_error();
        bool mine = k == 1 || rank >= 2; /* the halves of ranks 0 and 1 agree */
        if (!mine) {
            if (s != NEXAR_OK)
                return fail("all_reduce on a half that agrees", s);
            continue;
        }
        bool named = (strstr(text, cases[k].want[0]) && strstr(text, cases[k].want[1])) ||
                     (strstr(text, cases[k].or_want[0]) && strstr(text, cases[k].or_want[1]));
        if (s != NEXAR_ERR_MISMATCH || !named) {
            fprintf(stderr, "rank %d: %s: %s: %s (expected MISMATCH with \"%s\" and \"%s\")\n",
                    rank, k ? "world" : "split", nexar_strerror(s), text, cases[k].want[0],
                    cases[k].want[1]);
            return 1;
        }
    }
    nexar_comm_free(half);
    nexar_finalize();
    return 0;
}

/* Rank 0 is in an all_reduce that rank 1 (another node) enters late; nexarctl ops on
 * rank 0's daemon says which node it waits for, naming it once. */
static int describe(nexar_comm_t *w)
{
    nexar_status_t s;
    if ((s = nexar_barrier(w)) != NEXAR_OK)
        return fail("barrier", s);
    int rc = 0;
    if (rank == 0) {
        const char *ctl = getenv("NEXARCTL"), *sock = getenv("NEXAR_SOCKET");
        if (!ctl || !sock)
            return fail("describe needs NEXARCTL and NEXAR_SOCKET", NEXAR_ERR_INVALID);
        nexar_request_t *r;
        int64_t v = 1;
        if ((s = nexar_iall_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM, &r)) != NEXAR_OK)
            return fail("iall_reduce", s);
        sleep_ms(500);
        char cmd[512], out[4096] = "";
        snprintf(cmd, sizeof(cmd), "%s --socket %s ops", ctl, sock);
        FILE *f = popen(cmd, "r");
        size_t n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
        out[n] = '\0';
        if (f)
            pclose(f);
        if (!strstr(out, "waiting for node 1 (127.0.0.1:") || strstr(out, "(node 1 (") ||
            !strstr(out, ", rank 1)")) {
            fprintf(stderr, "rank 0: nexarctl ops while waiting for node 1:\n%s\n", out);
            rc = 1;
        }
        if ((s = nexar_wait(r)) != NEXAR_OK || v != 2)
            return fail("all_reduce", s);
    } else {
        sleep_ms(1500);
        int64_t v = 1;
        if ((s = nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM)) != NEXAR_OK)
            return fail("all_reduce", s);
    }
    nexar_finalize();
    return rc;
}

/* ---- slot_wait ---- */

/* Four communicators of the same two ranks, and the orders in which the ranks post one op
 * on each: rank 0 A B C D, rank 1 C D A B. */
static const int cycle_order[2][4] = {{0, 1, 2, 3}, {2, 3, 0, 1}};

static int four_comms(nexar_comm_t *w, nexar_comm_t *cm[4])
{
    nexar_status_t s;
    for (int i = 0; i < 4; i++)
        if ((s = nexar_comm_split(w, 0, (uint32_t)rank, &cm[i])) != NEXAR_OK)
            return fail("comm_split", s);
    return 0;
}

/* Two ranks, four communicators of both, an all_reduce of 128 KiB on each, posted in two
 * orders: rank 0 A B C D, rank 1 C D A B.  With 2 slots and a heap too small for a
 * bounce, rank 0's slots hold A and B and rank 1's C and D, so no op has both ranks:
 * every op ends TIMEOUT at the deadline.  The two that waited in a rank's library must
 * say so, and name the ops its slots held, where nexard can only say that the rank
 * never arrived (they reach nexard once the first two failed, and fail at once). */
static int slot_wait(nexar_comm_t *w)
{
    if (size != 2)
        return fail("slot_wait needs 2 ranks", NEXAR_ERR_INVALID);
    enum { N = 32768 };
    static float buf[4][N];
    nexar_comm_t *cm[4];
    nexar_status_t s;
    if (four_comms(w, cm))
        return 1;
    nexar_request_t *q[4];
    for (int k = 0; k < 4; k++) {
        int i = cycle_order[rank][k];
        if ((s = nexar_iall_reduce(cm[i], buf[i], N, NEXAR_F32, NEXAR_SUM, &q[i])) !=
            NEXAR_OK)
            return fail("iall_reduce", s);
    }
    int bad = 0;
    char shown[512] = "";
    for (int k = 0; k < 4; k++) {
        int i = cycle_order[rank][k];
        s = nexar_wait(q[i]);
        const char *text = nexar_last_error();
        if (k == 2)
            snprintf(shown, sizeof(shown), "%s", text);
        bool queued = k >= 2; /* the two this rank posted last found no slot */
        const char *want = "in its library for one of its 2 staging slots, held by "
                           "all_reduce seq 0 on comm";
        char mine[96];
        snprintf(mine, sizeof(mine), "here rank %d's all_reduce seq 0 on comm", rank);
        if (s != NEXAR_ERR_TIMEOUT || !strstr(text, "timed out") ||
            (queued && (!strstr(text, want) || !strstr(text, mine))) ||
            (!queued && strstr(text, "in its library"))) {
            fprintf(stderr, "rank %d: all_reduce %d of 4 (%s): %s: %s\n", rank, k + 1,
                    queued ? "queued here" : "submitted", nexar_strerror(s), text);
            bad = 1;
        }
    }
    if (!bad)
        fprintf(stderr, "rank %d: ok: 4 TIMEOUTs, the 2 that waited name the slots: %s\n",
                rank, shown);
    nexar_finalize();
    return bad;
}

/* ---- bucket_cycle ---- */

/* The orders of slot_wait with bucketed all_reduces, and a heap with room: the two each
 * rank posted last bounce (their iovs gathered into the heap, sent as one direct op), so
 * every op completes, each value exact.  Three iovs of uneven lengths, I32 sums. */
static int bucket_cycle(nexar_comm_t *w)
{
    if (size != 2)
        return fail("bucket_cycle needs 2 ranks", NEXAR_ERR_INVALID);
    enum { A = 1000, B = 29000, C = 2768 };
    static const size_t len[3] = {A, B, C};
    static int32_t buf[4][3][B];
    nexar_comm_t *cm[4];
    nexar_iov_t v[4][3];
    nexar_request_t *q[4];
    nexar_status_t s;
    if (four_comms(w, cm))
        return 1;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            for (size_t e = 0; e < len[j]; e++)
                buf[i][j][e] = (int32_t)((e * 31 + (size_t)j * 7 + (size_t)i) % 100003) *
                               (rank + 1);
            v[i][j] = (nexar_iov_t){.ptr = buf[i][j], .count = len[j]};
        }
    for (int k = 0; k < 4; k++) {
        int i = cycle_order[rank][k];
        if ((s = nexar_iall_reduce_bucketed(cm[i], v[i], 3, NEXAR_I32, NEXAR_SUM, &q[i])) !=
            NEXAR_OK)
            return fail("iall_reduce_bucketed", s);
    }
    for (int k = 0; k < 4; k++) {
        int i = cycle_order[rank][k];
        if ((s = nexar_wait(q[i])) != NEXAR_OK) {
            fprintf(stderr, "rank %d: bucketed all_reduce %d of 4 on comm %d: ", rank, k + 1, i);
            return fail("wait", s);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (size_t e = 0; e < len[j]; e++) {
                /* ranks 0 and 1 hold x and 2x: the sum is 3x */
                int32_t want = (int32_t)((e * 31 + (size_t)j * 7 + (size_t)i) % 100003) * 3;
                if (buf[i][j][e] != want) {
                    fprintf(stderr, "rank %d: comm %d iov %d element %zu: %d, want %d\n",
                            rank, i, j, e, buf[i][j][e], want);
                    return 1;
                }
            }
    fprintf(stderr, "rank %d: ok: 4 bucketed all_reduces in crossed orders, exact\n", rank);
    nexar_finalize();
    return 0;
}

/* ---- many_pending ---- */

/* Rank 1 comes a second late; meanwhile rank 0 posts OPS ops without waiting, more than
 * the daemon lets a rank hold (run with max_pending below OPS): barriers and in-place
 * all_reduces of nexar_alloc() memory, neither of which takes a staging slot, so only
 * the library's own cap keeps rank 0 under nexard's.  Every op completes, each value
 * exact (rank r contributes k * (r + 1) to op k). */
static int many_pending(nexar_comm_t *w)
{
    enum { OPS = 600 };
    static nexar_request_t *q[OPS];
    int64_t *v;
    nexar_status_t s;
    if ((s = nexar_alloc(OPS * sizeof(*v), (void **)&v)) != NEXAR_OK)
        return fail("nexar_alloc", s);
    if (rank == 1)
        sleep_ms(1000);
    for (int k = 0; k < OPS; k++) {
        v[k] = (int64_t)k * (rank + 1);
        s = k % 3 == 0 ? nexar_ibarrier(w, &q[k])
                       : nexar_iall_reduce(w, &v[k], 1, NEXAR_I64, NEXAR_SUM, &q[k]);
        if (s != NEXAR_OK) {
            fprintf(stderr, "rank %d: op %d of %d: ", rank, k + 1, OPS);
            return fail(k % 3 == 0 ? "ibarrier" : "iall_reduce", s);
        }
    }
    for (int k = 0; k < OPS; k++) {
        if ((s = nexar_wait(q[k])) != NEXAR_OK) {
            fprintf(stderr, "rank %d: op %d of %d: ", rank, k + 1, OPS);
            return fail("wait", s);
        }
        int64_t want = (int64_t)k * size * (size + 1) / 2;
        if (k % 3 != 0 && v[k] != want) {
            fprintf(stderr, "rank %d: all_reduce %d: %" PRId64 ", want %" PRId64 "\n", rank,
                    k, v[k], want);
            return 1;
        }
    }
    fprintf(stderr, "rank %d: ok: %d ops posted at once, all exact\n", rank, OPS);
    nexar_free(v);
    nexar_finalize();
    return 0;
}

/* ---- threads ---- */

struct tctx {
    nexar_comm_t *w;
    int rounds;
    int failed;
    char why[512];
};

static void tfail(struct tctx *t, const char *what, nexar_status_t s)
{
    if (!t->failed)
        snprintf(t->why, sizeof(t->why), "%s: %s: %s", what, nexar_strerror(s),
                 nexar_last_error());
    t->failed = 1;
}

/* Blocking send/recv with the partner (rank ^ 1) on the world, tag 1. */
static void *t_pingpong(void *arg)
{
    struct tctx *t = arg;
    int peer = rank ^ 1;
    for (int k = 0; k < t->rounds && !t->failed; k++) {
        uint32_t out[16], in[16];
        for (int i = 0; i < 16; i++)
            out[i] = (uint32_t)(rank * 100000 + k * 16 + i);
        nexar_status_t s;
        if (rank < peer) {
            if ((s = nexar_send(t->w, out, 16, NEXAR_U32, peer, 1)) ||
                (s = nexar_recv(t->w, in, 16, NEXAR_U32, peer, 1))) {
                tfail(t, "pingpong", s);
                break;
            }
        } else if ((s = nexar_recv(t->w, in, 16, NEXAR_U32, peer, 1)) ||
                   (s = nexar_send(t->w, out, 16, NEXAR_U32, peer, 1))) {
            tfail(t, "pingpong", s);
            break;
        }
        for (int i = 0; i < 16; i++)
            if (in[i] != (uint32_t)(peer * 100000 + k * 16 + i)) {
                snprintf(t->why, sizeof(t->why), "pingpong round %d: element %d is %u", k, i,
                         in[i]);
                t->failed = 1;
                break;
            }
    }
    return NULL;
}

/* Its own isend/irecv on the world (tag 2), and nexar_sync on the world, which the
 * pingpong thread is blocked in at the same time. */
static void *t_sync(void *arg)
{
    struct tctx *t = arg;
    int peer = rank ^ 1;
    for (int k = 0; k < t->rounds && !t->failed; k++) {
        uint64_t out = (uint64_t)rank << 40 | (uint64_t)k, in = 0;
        nexar_request_t *a, *b;
        nexar_status_t s;
        if ((s = nexar_isend(t->w, &out, 1, NEXAR_U64, peer, 2, &a)) ||
            (s = nexar_irecv(t->w, &in, 1, NEXAR_U64, peer, 2, &b))) {
            tfail(t, "isend/irecv", s);
            break;
        }
        if ((s = nexar_sync(t->w)) != NEXAR_OK) {
            tfail(t, "sync", s);
            break;
        }
        if (in != ((uint64_t)peer << 40 | (uint64_t)k)) {
            snprintf(t->why, sizeof(t->why), "sync round %d: received %" PRIx64, k, in);
            t->failed = 1;
        }
    }
    return NULL;
}

/* Collectives and a split on a communicator of its own. */
static void *t_coll(void *arg)
{
    struct tctx *t = arg;
    nexar_comm_t *d = NULL;
    nexar_status_t s;
    if ((s = nexar_comm_split(t->w, 0, (uint32_t)rank, &d)) != NEXAR_OK) {
        tfail(t, "split", s);
        return NULL;
    }
    for (int k = 0; k < t->rounds && !t->failed; k++) {
        int64_t v[8], want;
        for (int i = 0; i < 8; i++)
            v[i] = (int64_t)rank * 1000 + k * 8 + i;
        if ((s = nexar_all_reduce(d, v, 8, NEXAR_I64, NEXAR_SUM)) != NEXAR_OK) {
            tfail(t, "all_reduce", s);
            break;
        }
        for (int i = 0; i < 8; i++) {
            want = (int64_t)1000 * size * (size - 1) / 2 + (int64_t)size * (k * 8 + i);
            if (v[i] != want) {
                snprintf(t->why, sizeof(t->why), "all_reduce round %d: %" PRId64 " != %" PRId64,
                         k, v[i], want);
                t->failed = 1;
                break;
            }
        }
    }
    if ((s = nexar_comm_free(d)) != NEXAR_OK)
        tfail(t, "comm_free", s);
    return NULL;
}

static int threads(nexar_comm_t *w, int rounds)
{
    if (size % 2)
        return fail("threads needs an even number of ranks", NEXAR_ERR_INVALID);
    struct tctx ctx[3];
    void *(*fn[3])(void *) = {t_pingpong, t_sync, t_coll};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        ctx[i] = (struct tctx){.w = w, .rounds = rounds};
        if (pthread_create(&th[i], NULL, fn[i], &ctx[i]))
            return fail("pthread_create", NEXAR_ERR_NOMEM);
    }
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        if (ctx[i].failed) {
            fprintf(stderr, "rank %d: thread %d: %s\n", rank, i, ctx[i].why);
            bad = 1;
        }
    }
    nexar_status_t s;
    if ((s = nexar_finalize()) != NEXAR_OK)
        return fail("finalize", s);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sem_rank MODE [ARG]\n");
        return 2;
    }
    nexar_comm_t *w;
    nexar_status_t s = nexar_init(&w);
    if (s != NEXAR_OK) {
        fprintf(stderr, "nexar_init: %s: %s\n", nexar_strerror(s), nexar_last_error());
        return 1;
    }
    rank = nexar_comm_rank(w);
    size = nexar_comm_size(w);
    const char *mode = argv[1];
    if (!strcmp(mode, "custody"))
        return custody(w, 0);
    if (!strcmp(mode, "custody_isend"))
        return custody(w, 1);
    if (!strcmp(mode, "ring"))
        return ring(w, argc > 2 ? atoi(argv[2]) : 10);
    if (!strcmp(mode, "split4"))
        return split4(w);
    if (!strcmp(mode, "leave_pending"))
        return leave(w, 1);
    if (!strcmp(mode, "leave_later"))
        return leave(w, 0);
    if (!strcmp(mode, "mismatch_text"))
        return mismatch_text(w);
    if (!strcmp(mode, "describe"))
        return describe(w);
    if (!strcmp(mode, "barrier_sync"))
        return barrier_sync(w);
    if (!strcmp(mode, "slot_wait"))
        return slot_wait(w);
    if (!strcmp(mode, "bucket_cycle"))
        return bucket_cycle(w);
    if (!strcmp(mode, "many_pending"))
        return many_pending(w);
    if (!strcmp(mode, "threads"))
        return threads(w, argc > 2 ? atoi(argv[2]) : 200);
    fprintf(stderr, "sem_rank: unknown mode %s\n", mode);
    return 2;
}
