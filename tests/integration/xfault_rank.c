/*
 * xfault_rank.c - the rank program of the cross-node fault tests (test_xfaults.c).
 * Result files go to $HX_OUT (written whole: a reader never sees half of one).
 *
 *   itest_xfault_rank MODE
 *     loop      allreduce of 1 MiB and 3 floats (sum, every element checked) over and
 *               over; ready<rank> after the first one succeeded; at the first error
 *               end<rank>, then finalize and exit 0.  Wrong data: end<rank> with status
 *               -1, exit 1.  No error within 60 s: status 0, exit 3.  With $XF_ITERS
 *               set, after that many allreduces without an error: end<rank> with
 *               status 0, exit 0.
 *     mismatch  one collective whose signature differs between the nodes ($XF_NODE
 *               0 or 1; $XF_VARIANT): count   all_reduce f32 sum, 64 on node 0, 65 on 1;
 *                                     kind    broadcast (root 0) on node 0, all_reduce
 *                                             on node 1, both f32 x 64;
 *                                     root    broadcast f32 x 64, root 0 on node 0,
 *                                             root 1 on node 1;
 *               the ranks of one node agree, so only the exchange between the daemons
 *               can catch it.  end<rank>; exit 0.
 *     timeout   a barrier, then an all_reduce that rank $XF_MISSING never calls: it
 *               waits for $HX_OUT/release (60 s at most) and finalizes; the others
 *               write end<rank>.
 *     timeout-recv  the same, but the ranks of node 0 each receive 64 floats with tag 5
 *               from rank $XF_MISSING instead, which never sends, and the ranks of
 *               other nodes wait as it does.  exit 0.
 *     timeout-bcast  the same as timeout with a broadcast of 4 MiB of f32 from rank 0:
 *               blocks of more than 2 MiB, so across nodes it runs in parts of which
 *               the later ones wait for the other node to start them (the gate,
 *               docs/algorithms.md), which that node never does.
 *
 * end<rank>: "STATUS T_END ELAPSED ITERATIONS OP TEXT": the status of the first failed
 * call, CLOCK_MONOTONIC seconds when it returned (one clock for every process of the
 * machine, so the test compares it with the time of its kill), seconds the call took,
 * the successful iterations before it, the op, nexar_last_error().
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "outfile.h"

static char g_dir[512];
static int g_rank = -1;

static void put(const char *name, const char *text)
{
    tl_put_file(g_dir, name, g_rank, text);
}

static void put_end(int status, double t0, long iters, const char *op)
{
    char text[2048];
    double t = tl_now();
    snprintf(text, sizeof(text), "%d %.6f %.3f %ld %s %s\n", status, t, t - t0, iters, op,
             status > 0 ? nexar_last_error() : status < 0 ? "wrong data" : "no error");
    put("end", text);
}

static int loop(nexar_comm_t *w, int me, int size)
{
    size_t n = (1u << 18) + 3;
    float *b = malloc(n * sizeof(float));
    double end = tl_now() + 60;
    const char *lim = getenv("XF_ITERS");
    long iters = lim ? atol(lim) : -1;
    for (long it = 0; tl_now() < end; it++) {
        if (it == iters) {
            put_end(0, tl_now(), it, "all_reduce");
            free(b);
            return 0;
        }
        /* small integers: the sum is exact in f32 in any order */
        for (size_t i = 0; i < n; i++)
            b[i] = (float)(i % 7 + (size_t)me + (size_t)(it % 3));
        double t0 = tl_now();
        nexar_status_t st = nexar_all_reduce(w, b, n, NEXAR_F32, NEXAR_SUM);
        if (st != NEXAR_OK) {
            put_end((int)st, t0, it, "all_reduce");
            free(b);
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            float want = (float)(size * (int)(i % 7) + size * (size - 1) / 2 +
                                 size * (int)(it % 3));
            if (b[i] != want) {
                tl_log("FAIL iteration %ld: element %zu is %g, expected %g", it, i, b[i], want);
                put_end(-1, t0, it, "all_reduce");
                free(b);
                return 1;
            }
        }
        if (it == 0)
            put("ready", "1\n");
    }
    put_end(0, end, -1, "all_reduce");
    free(b);
    return 3;
}

static int mismatch(nexar_comm_t *w)
{
    const char *v = getenv("XF_VARIANT"), *nv = getenv("XF_NODE");
    int node = nv ? atoi(nv) : 0;
    float b[65] = {0};
    double t0 = tl_now();
    nexar_status_t st;
    const char *op;
    if (v && !strcmp(v, "kind")) {
        op = node == 0 ? "broadcast" : "all_reduce";
        st = node == 0 ? nexar_broadcast(w, b, 64, NEXAR_F32, 0)
                       : nexar_all_reduce(w, b, 64, NEXAR_F32, NEXAR_SUM);
    } else if (v && !strcmp(v, "root")) {
        op = "broadcast";
        st = nexar_broadcast(w, b, 64, NEXAR_F32, node == 0 ? 0 : 1);
    } else {
        op = "all_reduce";
        st = nexar_all_reduce(w, b, node == 0 ? 64 : 65, NEXAR_F32, NEXAR_SUM);
    }
    put_end((int)st, t0, 0, op);
    return 0;
}

#define BCAST_COUNT (1u << 20)

static int timeout(nexar_comm_t *w, int me, bool recv, bool bcast)
{
    const char *m = getenv("XF_MISSING");
    int missing = m ? atoi(m) : -1;
    double t0 = tl_now();
    nexar_status_t st = nexar_barrier(w);
    if (st != NEXAR_OK) {
        put_end((int)st, t0, 0, "barrier");
        return 0;
    }
    const char *node = getenv("XF_NODE");
    if (me == missing || (recv && node && atoi(node) != 0)) {
        put("ready", "1\n");
        char rel[600];
        snprintf(rel, sizeof(rel), "%s/release", g_dir);
        for (int i = 0; i < 6000 && access(rel, F_OK) != 0; i++)
            usleep(10000);
        return 0;
    }
    float b[64] = {0};
    t0 = tl_now();
    if (bcast) {
        float *big = calloc(BCAST_COUNT, sizeof(float));
        if (!big)
            return 1;
        st = nexar_broadcast(w, big, BCAST_COUNT, NEXAR_F32, 0);
        free(big);
    } else {
        st = recv ? nexar_recv(w, b, 64, NEXAR_F32, missing, 5)
                  : nexar_all_reduce(w, b, 64, NEXAR_F32, NEXAR_SUM);
    }
    put_end((int)st, t0, 1, bcast ? "broadcast" : recv ? "recv" : "all_reduce");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "loop";
    const char *out = getenv("HX_OUT"), *r = getenv("NEXAR_RANK");
    snprintf(g_dir, sizeof(g_dir), "%s", out ? out : ".");
    g_rank = r ? atoi(r) : -1;
    char tag[64];
    snprintf(tag, sizeof(tag), "xfault %s r%d", mode, g_rank);
    tl_set_log_tag(tag);
    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    if (st != NEXAR_OK) {
        put_end((int)st, tl_now(), 0, "nexar_init");
        tl_log("nexar_init: %s: %s", tl_status_name((int)st), nexar_last_error());
        return 20;
    }
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), rc;
    if (!strcmp(mode, "loop"))
        rc = loop(w, me, size);
    else if (!strcmp(mode, "mismatch"))
        rc = mismatch(w);
    else if (!strcmp(mode, "timeout") || !strcmp(mode, "timeout-recv") ||
             !strcmp(mode, "timeout-bcast"))
        rc = timeout(w, me, !strcmp(mode, "timeout-recv"), !strcmp(mode, "timeout-bcast"));
    else {
        tl_log("unknown mode %s", mode);
        rc = 2;
    }
    nexar_finalize();
    return rc;
}
