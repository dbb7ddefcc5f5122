/*
 * test_p2p.c - point to point: matching by (source, tag) in order, sends that
 * complete before their receive (tag 2 sent first, tag 1 received first; blocking
 * too), size mismatch -> NEXAR_ERR_MISMATCH at the receiver, after which the
 * communicator is failed on every rank (nexar.h's failure model), large chunked messages (malloc and arena), a ring exchange, count 0
 * and many small messages.
 *
 *   itest_p2p --world N   (N >= 2; default 3)
 */
#include <stdlib.h>
#include <string.h>

#include "itest.h"

static void fill(int32_t *b, size_t n, int from, int tag, int k)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (int32_t)(from * 1000003 + tag * 10007 + k * 101 + (int)i);
}

static int expect_msg(int *fails, const char *what, const int32_t *got, size_t n, int from,
                      int tag, int k)
{
    for (size_t i = 0; i < n; i++) {
        int32_t w = (int32_t)(from * 1000003 + tag * 10007 + k * 101 + (int)i);
        if (got[i] != w) {
            tl_log("FAIL %s: index %zu: expected %d (message %d from rank %d tag %d), got %d",
                   what, i, w, k, from, tag, got[i]);
            (*fails)++;
            return -1;
        }
    }
    return 0;
}

static int rank_main(struct hx_rank *r)
{
    int fails = 0, me = r->rank, n = r->size;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int32_t a[64], b[64];

    /* 1. nonblocking sends tag 2 then tag 1; the receiver takes tag 1 first */
    if (me == 0) {
        nexar_request_t *q2 = NULL, *q1 = NULL;
        int32_t s2[16], s1[16];
        fill(s2, 16, 0, 2, 0);
        fill(s1, 16, 0, 1, 0);
        EXPECT_OK(fails, "isend tag 2", nexar_isend(w, s2, 16, NEXAR_I32, 1, 2, &q2));
        EXPECT_OK(fails, "isend tag 1", nexar_isend(w, s1, 16, NEXAR_I32, 1, 1, &q1));
        EXPECT_OK(fails, "wait isend tag 1", nexar_wait(q1));
        EXPECT_OK(fails, "wait isend tag 2", nexar_wait(q2));
    } else if (me == 1) {
        if (!EXPECT_OK(fails, "recv tag 1 first", nexar_recv(w, a, 16, NEXAR_I32, 0, 1)))
            expect_msg(&fails, "recv tag 1", a, 16, 0, 1, 0);
        if (!EXPECT_OK(fails, "recv tag 2 second", nexar_recv(w, a, 16, NEXAR_I32, 0, 2)))
            expect_msg(&fails, "recv tag 2", a, 16, 0, 2, 0);
        tl_log("isend tag 2, isend tag 1; recv tag 1 then tag 2: matched by tag");
    }

    /* 2. blocking sends of tag 2 then tag 1; the receiver takes tag 1 first */
    if (me == 1) {
        fill(a, 8, 1, 2, 1);
        EXPECT_OK(fails, "blocking send tag 2", nexar_send(w, a, 8, NEXAR_I32, 0, 2));
        fill(a, 8, 1, 1, 1);
        EXPECT_OK(fails, "blocking send tag 1", nexar_send(w, a, 8, NEXAR_I32, 0, 1));
    } else if (me == 0) {
        if (!EXPECT_OK(fails, "recv tag 1 (sent second)", nexar_recv(w, b, 8, NEXAR_I32, 1, 1)))
            expect_msg(&fails, "blocking: recv tag 1", b, 8, 1, 1, 1);
        if (!EXPECT_OK(fails, "recv tag 2 (sent first)", nexar_recv(w, b, 8, NEXAR_I32, 1, 2)))
            expect_msg(&fails, "blocking: recv tag 2", b, 8, 1, 2, 1);
        tl_log("blocking send tag 2 then tag 1, recv tag 1 first: completed");
    }

    /* 3. several messages on one (source, tag) arrive in order; interleaved tags */
    if (me == 0) {
        for (int k = 0; k < 40; k++) {
            fill(a, 4, 0, 5 + k % 3, k);
            EXPECT_OK(fails, "send burst", nexar_send(w, a, 4, NEXAR_I32, 1, (uint32_t)(5 + k % 3)));
        }
    } else if (me == 1) {
        for (int tag = 7; tag >= 5; tag--)
            for (int k = tag - 5; k < 40; k += 3) {
                if (!EXPECT_OK(fails, "recv burst", nexar_recv(w, b, 4, NEXAR_I32, 0, (uint32_t)tag)))
                    expect_msg(&fails, "burst order", b, 4, 0, tag, k);
            }
        tl_log("40 messages on 3 tags, received tag by tag: in order per (source, tag)");
    }

    /* 4. count mismatch, on a communicator of its own: the receiver gets
     *    NEXAR_ERR_MISMATCH naming both counts, and, as for every MISMATCH, the
     *    communicator fails: every later op on it, on every rank, returns MISMATCH
     *    with the same text.  Freeing it still works. */
    nexar_comm_t *mc = NULL;
    EXPECT_OK(fails, "split for the mismatch test", nexar_comm_split(w, 0, (uint32_t)me, &mc));
    if (mc) {
        if (me == 0) {
            fill(a, 10, 0, 9, 0);
            nexar_status_t st = nexar_send(mc, a, 10, NEXAR_I32, 1, 9);
            EXPECT_TRUE(fails, st == NEXAR_OK || st == NEXAR_ERR_MISMATCH,
                        "mismatched send (10 elements): %s, expected OK or MISMATCH",
                        tl_status_name((int)st));
        } else if (me == 1) {
            nexar_status_t st = nexar_recv(mc, b, 12, NEXAR_I32, 0, 9);
            if (!tl_check_status("recv of 12 elements matching a send of 10", NEXAR_ERR_MISMATCH, st)) {
                const char *t = nexar_last_error();
                tl_log("size mismatch -> NEXAR_ERR_MISMATCH: \"%s\"", t);
                EXPECT_TRUE(fails, strstr(t, "count=10") && strstr(t, "count=12"),
                            "mismatch text names both counts: \"%s\"", t);
            } else {
                fails++;
            }
        }
        int32_t one = 1;
        nexar_status_t st = nexar_all_reduce(mc, &one, 1, NEXAR_I32, NEXAR_SUM);
        EXPECT_TRUE(fails, st == NEXAR_ERR_MISMATCH,
                    "allreduce on the comm failed by a p2p mismatch: %s, expected MISMATCH",
                    tl_status_name((int)st));
        EXPECT_TRUE(fails, strstr(nexar_last_error(), "tag 9") != NULL,
                    "the later op carries the mismatch text: \"%s\"", nexar_last_error());
        EXPECT_OK(fails, "free the mismatch comm", nexar_comm_free(mc));
    }

    /* 5. large messages: 1 MiB + 3 elements, malloc (staged) and arena (direct) */
    size_t big = (1u << 18) + 3;
    int32_t *bm = malloc(big * 4), *ba = NULL;
    EXPECT_OK(fails, "nexar_alloc for p2p", nexar_alloc(big * 4, (void **)&ba));
    if (bm && ba) {
        if (me == 0) {
            fill(bm, big, 0, 11, 0);
            EXPECT_OK(fails, "big send (malloc)", nexar_send(w, bm, big, NEXAR_I32, n - 1, 11));
            if (!EXPECT_OK(fails, "big recv (arena)", nexar_recv(w, ba, big, NEXAR_I32, n - 1, 12)))
                expect_msg(&fails, "big arena message", ba, big, n - 1, 12, 0);
        } else if (me == n - 1) {
            if (!EXPECT_OK(fails, "big recv (malloc)", nexar_recv(w, bm, big, NEXAR_I32, 0, 11)))
                expect_msg(&fails, "big malloc message", bm, big, 0, 11, 0);
            fill(ba, big, n - 1, 12, 0);
            EXPECT_OK(fails, "big send (arena)", nexar_send(w, ba, big, NEXAR_I32, 0, 12));
            tl_log("1 MiB messages both ways (malloc -> malloc, arena -> arena) exact");
        }
    }
    free(bm);
    nexar_free(ba);

    /* 6. ring: isend right, irecv left, both in flight at once; also bidirectional big */
    {
        int right = (me + 1) % n, left = (me + n - 1) % n;
        nexar_request_t *qs = NULL, *qr = NULL;
        fill(a, 64, me, 20, 0);
        memset(b, 0, sizeof(b));
        EXPECT_OK(fails, "ring irecv", nexar_irecv(w, b, 64, NEXAR_I32, left, 20, &qr));
        EXPECT_OK(fails, "ring isend", nexar_isend(w, a, 64, NEXAR_I32, right, 20, &qs));
        if (!EXPECT_OK(fails, "ring wait recv", nexar_wait(qr)))
            expect_msg(&fails, "ring", b, 64, left, 20, 0);
        EXPECT_OK(fails, "ring wait send", nexar_wait(qs));
        size_t m = (1u << 17) + 1;
        int32_t *sb = malloc(m * 4), *rb = malloc(m * 4);
        fill(sb, m, me, 21, 0);
        EXPECT_OK(fails, "ring big isend", nexar_isend(w, sb, m, NEXAR_I32, right, 21, &qs));
        if (!EXPECT_OK(fails, "ring big recv", nexar_recv(w, rb, m, NEXAR_I32, left, 21)))
            expect_msg(&fails, "ring big", rb, m, left, 21, 0);
        EXPECT_OK(fails, "ring big wait send", nexar_wait(qs));
        free(sb);
        free(rb);
        if (me == 0)
            tl_log("ring exchange (64 elements and 512 KiB, all ranks at once) exact");
    }

    /* 7. count 0, and other dtypes */
    if (me == 0) {
        EXPECT_OK(fails, "send count 0", nexar_send(w, NULL, 0, NEXAR_F64, 1, 30));
        int64_t v[3] = {INT64_MIN, -1, INT64_MAX};
        EXPECT_OK(fails, "send i64", nexar_send(w, v, 3, NEXAR_I64, 1, 31));
    } else if (me == 1) {
        EXPECT_OK(fails, "recv count 0", nexar_recv(w, NULL, 0, NEXAR_F64, 0, 30));
        int64_t v[3] = {0};
        if (!EXPECT_OK(fails, "recv i64", nexar_recv(w, v, 3, NEXAR_I64, 0, 31)))
            EXPECT_TRUE(fails, v[0] == INT64_MIN && v[1] == -1 && v[2] == INT64_MAX,
                        "i64 message: got %lld %lld %lld", (long long)v[0], (long long)v[1],
                        (long long)v[2]);
    }

    EXPECT_OK(fails, "barrier at the end", nexar_barrier(w));
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int world = argc > 2 && !strcmp(argv[1], "--world") ? atoi(argv[2]) : 3;
    hx_require_nexard();
    tl_log("point-to-point test, world %d", world);
    struct hx_daemon d;
    const char *args[] = {"--slot-bytes", "65536", "--slots", "2", NULL};
    if (hx_daemon_start(&d, args))
        return 1;
    int rv = itest_run(&d, world, rank_main, NULL, 60, 180.0);
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
