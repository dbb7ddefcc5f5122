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
 */
#include <inttypes.h>
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
    fprintf(stderr, "sem_rank: unknown mode %s\n", mode);
    return 2;
}
