/*
 * cluster_rank.c - the rank program of the multi-node tests (test_cluster*.c), started
 * through nexar-run --nodes or directly with the NEXAR_* environment.
 *
 *   itest_cluster_rank MODE     (result files go to $HX_OUT)
 *     form      init; an allreduce on the multi-node world and a ring of send/recv
 *               (rank r to r+1), both checked exactly; write form<rank> ("rank size
 *               allreduce-status sendrecv-status text", -1/-2: wrong values); wait for
 *               $HX_OUT/release (at most 30 s) so that every rank is seen formed;
 *               finalize; exit 0 when both worked
 *     init      init only; write init<rank> ("status text") and exit 0 whatever
 *               nexar_init returned (the test reads the file)
 *     hold      init; write ready<rank>; then poll with a barrier every 20 ms until it
 *               fails; write lost<rank>
 *               ("status monotonic_ns text"); exit 0 (60 s limit: exit 3)
 *     split     ($HX_NODES = K, ranks placed as nexar-run --nodes does) an allreduce on
 *               the world, then split the world by node (reversed keys): a node-local
 *               communicator whose allreduce works; split by rank % 2 (reversed keys):
 *               groups across nodes whose allreduce works; split with only rank 0
 *               defined: a communicator of one; write split<rank> ("ok" or what
 *               failed); exit 0 when ok
 *     small     20000 all_reduces of one int64 in a row, each checked; write small<rank>
 *               ("status ops text"); finalize; exit 0 when all worked
 *     algo      an all_reduce of 2 floats, a broadcast of 2, an all_reduce of 1 Mi floats,
 *               each checked; write algo<rank> ("status algo1 algo2 algo3", from
 *               nexar_comm_algorithm after each); wait for $HX_OUT/release (at most
 *               30 s); finalize; exit 0 when all three worked
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nexar.h"
#include "outfile.h"

static char g_dir[512];
static int g_rank = -1;

static void put(const char *name, const char *text)
{
    tl_put_file(g_dir, name, g_rank, text);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int exists(const char *name)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", g_dir, name);
    return access(p, F_OK) == 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "form";
    const char *out = getenv("HX_OUT");
    snprintf(g_dir, sizeof(g_dir), "%s", out ? out : ".");
    const char *r = getenv("NEXAR_RANK");
    g_rank = r ? atoi(r) : -1;
    char text[2048];

    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    if (!strcmp(mode, "init")) {
        snprintf(text, sizeof(text), "%d %s\n", (int)st, st ? nexar_last_error() : "");
        put("init", text);
        if (!st)
            nexar_finalize();
        return 0;
    }
    if (st != NEXAR_OK) {
        fprintf(stderr, "rank %d: nexar_init: %s: %s\n", g_rank, nexar_strerror(st),
                nexar_last_error());
        return 20;
    }
    int me = nexar_comm_rank(w), n = nexar_comm_size(w);

    if (!strcmp(mode, "form")) {
        /* An allreduce and a ring of send/recv across the nodes, checked exactly. */
        float v[4] = {1, 2, 3, 4};
        nexar_status_t a = nexar_all_reduce(w, v, 4, NEXAR_F32, NEXAR_SUM);
        if (a == NEXAR_OK && (v[0] != n || v[1] != 2 * n || v[2] != 3 * n || v[3] != 4 * n))
            a = (nexar_status_t)-1;
        int32_t mine = 1000 + me, in = -1;
        nexar_request_t *rq = NULL;
        nexar_status_t s = n < 2 ? NEXAR_OK : nexar_isend(w, &mine, 1, NEXAR_I32, (me + 1) % n, 7, &rq);
        if (s == NEXAR_OK && n > 1)
            s = nexar_recv(w, &in, 1, NEXAR_I32, (me + n - 1) % n, 7);
        if (rq) {
            nexar_status_t ws = nexar_wait(rq);
            s = s ? s : ws;
        }
        if (s == NEXAR_OK && n > 1 && in != 1000 + (me + n - 1) % n)
            s = (nexar_status_t)-2;
        snprintf(text, sizeof(text), "%d %d %d %d %s\n", me, n, (int)a, (int)s,
                 a || s ? nexar_last_error() : "");
        put("form", text);
        for (int i = 0; i < 3000 && !exists("release"); i++)
            usleep(10000);
        nexar_finalize();
        return a || s ? 4 : 0;
    }
    if (!strcmp(mode, "small")) {
        /* Many small ops in a row, each checked: what a training loop's scalars do. */
        nexar_status_t a = NEXAR_OK;
        int i = 0;
        for (; i < 20000 && a == NEXAR_OK; i++) {
            int64_t v = me + 1 + i;
            a = nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM);
            if (a == NEXAR_OK && v != (int64_t)n * (n + 1) / 2 + (int64_t)n * i)
                a = (nexar_status_t)-1;
        }
        snprintf(text, sizeof(text), "%d %d %s\n", (int)a, i, a ? nexar_last_error() : "");
        put("small", text);
        nexar_finalize();
        return a ? 4 : 0;
    }
    if (!strcmp(mode, "hold")) {
        snprintf(text, sizeof(text), "%d %d\n", me, n);
        put("ready", text);
        long long end = now_ns() + 60ll * 1000000000ll;
        while (now_ns() < end) {
            nexar_status_t b = nexar_barrier(w);
            if (b != NEXAR_OK) {
                snprintf(text, sizeof(text), "%d %lld %s\n", (int)b, now_ns(),
                         nexar_last_error());
                put("lost", text);
                nexar_finalize();
                return 0;
            }
            usleep(20000);
        }
        return 3;
    }
    if (!strcmp(mode, "split")) {
        const char *kv = getenv("HX_NODES");
        int K = kv ? atoi(kv) : 1, node = me * K / n;
        int first = (node * n + K - 1) / K, last = ((node + 1) * n + K - 1) / K - 1;
        char why[1024] = "ok";
        nexar_comm_t *loc = NULL, *odd = NULL, *one = NULL;
        /* A collective first: the split after it is op 1 of the world. */
        int32_t v = me;
        nexar_status_t a = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
        if (a != NEXAR_OK || v != n * (n - 1) / 2)
            snprintf(why, sizeof(why), "allreduce on the world: %s, %d", nexar_strerror(a), v);
        a = nexar_comm_split(w, (uint32_t)node, (uint32_t)(n - me), &loc);
        v = me;
        if (strcmp(why, "ok"))
            ;
        else if (a != NEXAR_OK || !loc)
            snprintf(why, sizeof(why), "split by node: %s: %s", nexar_strerror(a),
                     nexar_last_error());
        else if (nexar_comm_size(loc) != last - first + 1 || nexar_comm_rank(loc) != last - me)
            snprintf(why, sizeof(why), "split by node: rank %d of %d, want %d of %d",
                     nexar_comm_rank(loc), nexar_comm_size(loc), last - me, last - first + 1);
        else if ((a = nexar_all_reduce(loc, &v, 1, NEXAR_I32, NEXAR_SUM)) != NEXAR_OK ||
                 v != (first + last) * (last - first + 1) / 2)
            snprintf(why, sizeof(why), "allreduce on the node's communicator: %s, %d",
                     nexar_strerror(a), v);
        if (!strcmp(why, "ok")) {
            /* Groups across nodes, ordered by reversed keys: rank me is rank (size-1-i)
             * of its group, where i = me / 2. */
            int gsize = (n - me % 2 + 1) / 2, gi = me / 2;
            a = nexar_comm_split(w, (uint32_t)(me % 2), (uint32_t)(n - me), &odd);
            int64_t x = me, want = 0;
            for (int q = me % 2; q < n; q += 2)
                want += q;
            if (a != NEXAR_OK || !odd)
                snprintf(why, sizeof(why), "split by rank %% 2: %s (%s)", nexar_strerror(a),
                         a ? nexar_last_error() : "");
            else if (nexar_comm_size(odd) != gsize || nexar_comm_rank(odd) != gsize - 1 - gi)
                snprintf(why, sizeof(why), "split by rank %% 2: rank %d of %d, want %d of %d",
                         nexar_comm_rank(odd), nexar_comm_size(odd), gsize - 1 - gi, gsize);
            else if ((a = nexar_all_reduce(odd, &x, 1, NEXAR_I64, NEXAR_SUM)) != NEXAR_OK ||
                     x != want)
                snprintf(why, sizeof(why), "allreduce across nodes on the split: %s, %lld "
                         "(want %lld)", nexar_strerror(a), (long long)x, (long long)want);
        }
        if (!strcmp(why, "ok")) {
            a = nexar_comm_split(w, me == 0 ? 7u : NEXAR_UNDEFINED, 0, &one);
            if (a != NEXAR_OK || (me == 0) != (one != NULL) ||
                (one && nexar_comm_size(one) != 1))
                snprintf(why, sizeof(why), "split with one color: %s", nexar_strerror(a));
        }
        if (loc)
            nexar_comm_free(loc);
        if (odd)
            nexar_comm_free(odd);
        if (one)
            nexar_comm_free(one);
        snprintf(text, sizeof(text), "%s\n", why);
        put("split", text);
        nexar_finalize();
        return strcmp(why, "ok") ? 5 : 0;
    }
    if (!strcmp(mode, "algo")) {
        static float big[1 << 20];
        float small[2] = {1, (float)me};
        const char *a[3] = {NULL, NULL, NULL};
        nexar_status_t s = nexar_all_reduce(w, small, 2, NEXAR_F32, NEXAR_SUM);
        if (s == NEXAR_OK && (small[0] != n || small[1] != n * (n - 1) / 2))
            s = (nexar_status_t)-1;
        a[0] = nexar_comm_algorithm(w);
        small[0] = me == 0 ? 42 : 0;
        if (s == NEXAR_OK && (s = nexar_broadcast(w, small, 2, NEXAR_F32, 0)) == NEXAR_OK &&
            small[0] != 42)
            s = (nexar_status_t)-2;
        a[1] = nexar_comm_algorithm(w);
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
            big[i] = (float)(i % 7);
        if (s == NEXAR_OK && (s = nexar_all_reduce(w, big, 1 << 20, NEXAR_F32, NEXAR_SUM)) ==
                                 NEXAR_OK && (big[5] != 5.0f * n || big[13] != 6.0f * n))
            s = (nexar_status_t)-3;
        a[2] = nexar_comm_algorithm(w);
        snprintf(text, sizeof(text), "%d %s %s %s %s\n", (int)s, a[0] ? a[0] : "-",
                 a[1] ? a[1] : "-", a[2] ? a[2] : "-", s ? nexar_last_error() : "");
        put("algo", text);
        for (int i = 0; i < 3000 && !exists("release"); i++)
            usleep(10000);
        nexar_finalize();
        return s ? 4 : 0;
    }
    fprintf(stderr, "cluster_rank: unknown mode %s\n", mode);
    return 2;
}
