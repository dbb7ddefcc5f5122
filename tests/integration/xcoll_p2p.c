/*
 * xcoll_p2p.c - point to point between ranks on different nodes (part "p2p" of
 * xcoll_rank.c).  Every rank sends to xc_next() (its local index on the next node) and
 * receives from xc_prev(), all at the same time, so every message crosses nodes (with
 * one node: a ring).
 *  1. isend tag 2 then tag 1; recv tag 1 first, then tag 2: matched by (source, tag);
 *  2. the same with blocking sends (nexar.h: a send completes once the daemon holds
 *     its data, so the receive of tag 1 completes although tag 2 went first);
 *  3. 30 messages on 3 tags (isend, completed by nexar_sync), received tag by tag: in
 *     order per (source, tag);
 *  4. sizes 0, 1, odd and larger than a 64 KiB staging slot (1 MiB and a few elements)
 *     in several dtypes: irecv posted before or after the isend, completed with
 *     nexar_wait or a nexar_test loop, malloc'd and arena buffers;
 *  5. a count mismatch on a copy of the world (split with one color): the receiver on
 *     the other node gets NEXAR_ERR_MISMATCH naming both counts, the copy is failed on
 *     every rank (the failure model of nexar.h), and the world keeps working.
 * Every payload is compared bit for bit.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "xcoll.h"

/* The payload of message k from rank `from` on tag: any bit pattern (data is moved). */
static void fill(int dt, void *b, size_t n, int from, int tag, int k)
{
    uint64_t seed = tl_mix64(((uint64_t)from << 40) ^ ((uint64_t)tag << 20) ^ (uint64_t)k);
    tl_pattern(dt, -1, seed, from, 0, b, n);
}

static int check_msg(int *fails, int dt, const void *got, size_t n, int from, int tag, int k)
{
    size_t es = tl_esize(dt);
    void *exp = malloc(n * es + 1);
    fill(dt, exp, n, from, tag, k);
    char ctx[160];
    snprintf(ctx, sizeof(ctx), "p2p: message %d from rank %d tag %d (%zu x %s)", k, from, tag, n,
             tl_dtype_name(dt));
    int bad = tl_check_elems(ctx, dt, exp, got, n);
    free(exp);
    if (bad)
        (*fails)++;
    return bad;
}

static nexar_status_t test_loop(nexar_request_t *q)
{
    int done = 0;
    nexar_status_t st = NEXAR_OK;
    while (!done && st == NEXAR_OK) {
        st = nexar_test(q, &done);
        if (!done)
            sched_yield();
    }
    return st;
}

/* One message each way round the ring (isend to next, irecv from prev). */
struct size_case {
    int dt;
    size_t n;
    int recv_first;  /* irecv posted before the isend */
    int test_recv;   /* the receive completes in a nexar_test loop, the send by wait */
    int arena_send, arena_recv;
};

static int one_size(nexar_comm_t *w, int me, int next, int prev, const struct size_case *c,
                    int tag, int *fails)
{
    size_t bytes = c->n * tl_esize(c->dt) + 8;
    void *s = NULL, *r = NULL;
    if (c->arena_send ? nexar_alloc(bytes, &s) != NEXAR_OK : !(s = malloc(bytes)))
        s = NULL;
    if (c->arena_recv ? nexar_alloc(bytes, &r) != NEXAR_OK : !(r = malloc(bytes)))
        r = NULL;
    int rv = -1;
    if (!s || !r) {
        tl_log("FAIL p2p: no buffers of %zu bytes: %s", bytes, nexar_last_error());
        (*fails)++;
        goto out;
    }
    fill(c->dt, s, c->n, me, tag, 0);
    memset(r, 0xa5, bytes);
    char what[160];
    snprintf(what, sizeof(what), "p2p %zu x %s to rank %d / from rank %d (%s first, %s, %s)",
             c->n, tl_dtype_name(c->dt), next, prev, c->recv_first ? "irecv" : "isend",
             c->arena_send ? "arena send" : "malloc send",
             c->arena_recv ? "arena recv" : "malloc recv");
    nexar_request_t *qs = NULL, *qr = NULL;
    if (c->recv_first && EXPECT_OK(*fails, what, nexar_irecv(w, r, c->n, c->dt, prev, tag, &qr)))
        goto out;
    if (EXPECT_OK(*fails, what, nexar_isend(w, s, c->n, c->dt, next, tag, &qs)))
        goto out;
    if (!c->recv_first && EXPECT_OK(*fails, what, nexar_irecv(w, r, c->n, c->dt, prev, tag, &qr)))
        goto out;
    if (EXPECT_OK(*fails, what, c->test_recv ? test_loop(qr) : nexar_wait(qr)))
        goto out;
    if (EXPECT_OK(*fails, what, c->test_recv ? nexar_wait(qs) : test_loop(qs)))
        goto out;
    check_msg(fails, c->dt, r, c->n, prev, tag, 0);
    rv = 0;
out:
    if (s)
        c->arena_send ? (void)nexar_free(s) : free(s);
    if (r)
        c->arena_recv ? (void)nexar_free(r) : free(r);
    return rv;
}

/* 5: the mismatch, on a copy of the world.  -1 when the world itself failed. */
static int mismatch(nexar_comm_t *w, const struct xc_place *p, int me, int *fails)
{
    nexar_comm_t *mc = NULL;
    if (EXPECT_OK(*fails, "p2p: split (one color) for the mismatch",
                  nexar_comm_split(w, 0, (uint32_t)me, &mc)))
        return -1;
    int s = 0, r = xc_next(p, 0);
    int32_t a[12];
    if (me == s) {
        fill(NEXAR_I32, a, 10, me, 9, 0);
        nexar_status_t st = nexar_send(mc, a, 10, NEXAR_I32, r, 9);
        EXPECT_TRUE(*fails, st == NEXAR_OK || st == NEXAR_ERR_MISMATCH,
                    "p2p: mismatched send of 10 to rank %d: %s (%s), expected OK or MISMATCH", r,
                    tl_status_name((int)st), nexar_last_error());
    } else if (me == r) {
        nexar_status_t st = nexar_recv(mc, a, 12, NEXAR_I32, s, 9);
        if (!EXPECT_ST(*fails, NEXAR_ERR_MISMATCH, "p2p: recv of 12 matching a send of 10", st)) {
            const char *t = nexar_last_error();
            tl_log("p2p: size mismatch across nodes -> NEXAR_ERR_MISMATCH: \"%s\"", t);
            EXPECT_TRUE(*fails, strstr(t, "count=10") && strstr(t, "count=12"),
                        "p2p: the mismatch text names both counts: \"%s\"", t);
        }
    }
    /* Every rank of the copy, on every node: it is failed with the same status. */
    int32_t one = 1;
    nexar_status_t st = nexar_all_reduce(mc, &one, 1, NEXAR_I32, NEXAR_SUM);
    EXPECT_TRUE(*fails, st == NEXAR_ERR_MISMATCH && strstr(nexar_last_error(), "tag 9"),
                "p2p: allreduce on the copy failed by the mismatch: %s \"%s\", expected "
                "MISMATCH naming tag 9", tl_status_name((int)st), nexar_last_error());
    EXPECT_OK(*fails, "p2p: free the failed copy", nexar_comm_free(mc));
    return EXPECT_OK(*fails, "p2p: barrier on the world after the mismatch", nexar_barrier(w));
}

int xc_p2p(nexar_comm_t *w, const struct xc_place *p)
{
    int fails = 0, me = nexar_comm_rank(w), next = xc_next(p, me), prev = xc_prev(p, me);
    if (p->size < 2)
        return 0;
    if (next < 0 || prev < 0) {
        tl_log("FAIL p2p: no partner for rank %d (placement)", me);
        return 1;
    }
    double t0 = tl_now();
    int32_t a[16], b[16];

    /* 1. nonblocking: tag 2 then tag 1 out; tag 1 taken first */
    nexar_request_t *q2 = NULL, *q1 = NULL;
    int32_t s2[16], s1[16];
    fill(NEXAR_I32, s2, 16, me, 2, 0);
    fill(NEXAR_I32, s1, 16, me, 1, 0);
    if (EXPECT_OK(fails, "p2p: isend tag 2", nexar_isend(w, s2, 16, NEXAR_I32, next, 2, &q2)) ||
        EXPECT_OK(fails, "p2p: isend tag 1", nexar_isend(w, s1, 16, NEXAR_I32, next, 1, &q1)) ||
        EXPECT_OK(fails, "p2p: recv tag 1 (sent second)",
                  nexar_recv(w, a, 16, NEXAR_I32, prev, 1)) ||
        check_msg(&fails, NEXAR_I32, a, 16, prev, 1, 0) ||
        EXPECT_OK(fails, "p2p: recv tag 2 (sent first)",
                  nexar_recv(w, b, 16, NEXAR_I32, prev, 2)) ||
        check_msg(&fails, NEXAR_I32, b, 16, prev, 2, 0) ||
        EXPECT_OK(fails, "p2p: wait isend tag 1", nexar_wait(q1)) ||
        EXPECT_OK(fails, "p2p: wait isend tag 2", nexar_wait(q2)))
        goto out;

    /* 2. blocking: tag 4 then tag 3 out; tag 3 taken first */
    fill(NEXAR_I32, a, 8, me, 4, 1);
    if (EXPECT_OK(fails, "p2p: blocking send tag 4", nexar_send(w, a, 8, NEXAR_I32, next, 4)))
        goto out;
    fill(NEXAR_I32, a, 8, me, 3, 1);
    if (EXPECT_OK(fails, "p2p: blocking send tag 3", nexar_send(w, a, 8, NEXAR_I32, next, 3)) ||
        EXPECT_OK(fails, "p2p: recv tag 3 (sent second)",
                  nexar_recv(w, b, 8, NEXAR_I32, prev, 3)) ||
        check_msg(&fails, NEXAR_I32, b, 8, prev, 3, 1) ||
        EXPECT_OK(fails, "p2p: recv tag 4 (sent first)", nexar_recv(w, b, 8, NEXAR_I32, prev, 4)) ||
        check_msg(&fails, NEXAR_I32, b, 8, prev, 4, 1))
        goto out;
    if (me == 0)
        tl_log("p2p: tag 2 then tag 1 sent (isend and blocking), tag 1 received "
               "first: matched by (source, tag)");

    /* 3. a burst: 30 messages on tags 5..7, received tag by tag */
    {
        static int32_t burst[30][4];
        nexar_request_t *q;
        for (int k = 0; k < 30; k++) {
            fill(NEXAR_I32, burst[k], 4, me, 5 + k % 3, k);
            if (EXPECT_OK(fails, "p2p: burst isend",
                          nexar_isend(w, burst[k], 4, NEXAR_I32, next, (uint32_t)(5 + k % 3), &q)))
                goto out;
        }
        for (int tag = 7; tag >= 5; tag--)
            for (int k = tag - 5; k < 30; k += 3)
                if (EXPECT_OK(fails, "p2p: burst recv",
                              nexar_recv(w, b, 4, NEXAR_I32, prev, (uint32_t)tag)) ||
                    check_msg(&fails, NEXAR_I32, b, 4, prev, tag, k))
                    goto out;
        if (EXPECT_OK(fails, "p2p: nexar_sync for the burst's sends", nexar_sync(w)))
            goto out;
        if (me == 0)
            tl_log("p2p: 30 messages on 3 tags received tag by tag, in order");
    }

    /* 4. sizes */
    {
        static const struct size_case cs[] = {
            {NEXAR_F64, 0, 1, 0, 0, 0},
            {NEXAR_U8, 1, 0, 1, 0, 0},
            {NEXAR_F16, 7, 1, 1, 0, 0},
            {NEXAR_I32, 1001, 0, 0, 0, 0},
            {NEXAR_F32, (1u << 18) + 3, 1, 0, 0, 0},
            {NEXAR_U64, (1u << 17) + 3, 0, 1, 1, 1},
            {NEXAR_I8, (1u << 20) + 5, 1, 1, 1, 0},
            {NEXAR_BF16, (1u << 19) + 1, 0, 0, 0, 1},
        };
        for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++)
            if (one_size(w, me, next, prev, &cs[i], 40 + (int)i, &fails))
                goto out;
        if (me == 0)
            tl_log("p2p: sizes 0, 1, 7, 1001 and four of ~1 MiB (malloc and "
                   "arena, wait and test) exact");
    }

    /* 5. mismatch */
    mismatch(w, p, me, &fails);
out:
    if (me == 0 || fails)
        tl_log("p2p: %s, %.1f s", fails ? "FAILED (above)" : "all exact", tl_now() - t0);
    return fails;
}
