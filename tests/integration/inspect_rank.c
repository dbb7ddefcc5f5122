/*
 * inspect_rank.c - the rank program of test_inspect.c: a job across two daemons that
 * keeps running collectives, checked exactly, while the test inspects a daemon remotely.
 *
 *   itest_inspect_rank   (NEXAR_* environment; result files in $HX_OUT)
 *     init; write ready<rank>; then all_reduce (sum, f32, 64 Ki elements: several chunks
 *     and pieces across the nodes) and broadcast (i32, 1000 elements, root = iteration %
 *     size), every element checked against its exact value, over and over, until
 *     $HX_OUT/stop exists (and at least 20 iterations, at most 60 s; the ranks agree on
 *     the last iteration with an all_reduce MAX of their wish to stop); write
 *     result<rank> "iterations wrong first-failed-status text"; wait for
 *     $HX_OUT/release (at most 30 s, so that the test can compare the reports of an idle
 *     job); finalize; exit 0 when every element of every iteration was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nexar.h"
#include "outfile.h"

#define N (64 * 1024)
#define NB 1000

static char g_dir[512];

static int exists(const char *name)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", g_dir, name);
    return access(p, F_OK) == 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
    static float v[N];
    static int32_t b[NB];
    const char *out = getenv("HX_OUT");
    snprintf(g_dir, sizeof(g_dir), "%s", out ? out : ".");
    const char *r = getenv("NEXAR_RANK");
    int rank = r ? atoi(r) : -1;
    char text[1024];

    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    if (st != NEXAR_OK) {
        snprintf(text, sizeof(text), "0 0 %d nexar_init: %s\n", (int)st, nexar_last_error());
        tl_put_file(g_dir, "result", rank, text);
        return 20;
    }
    int me = nexar_comm_rank(w), n = nexar_comm_size(w);
    tl_put_file(g_dir, "ready", me, "1\n");
    long iters = 0, wrong = 0;
    double end = now_s() + 60;
    nexar_status_t first = NEXAR_OK;
    char why[512] = "";
    for (;;) {
        /* Every rank must stop after the same iteration, or one would wait for ever. */
        int32_t want_stop = (iters >= 20 && exists("stop")) || now_s() >= end;
        st = nexar_all_reduce(w, &want_stop, 1, NEXAR_I32, NEXAR_MAX);
        if (st != NEXAR_OK)
            goto failed;
        if (want_stop)
            break;
        for (int i = 0; i < N; i++)
            v[i] = (float)((i + me * 7 + iters) % 101);
        st = nexar_all_reduce(w, v, N, NEXAR_F32, NEXAR_SUM);
        if (st != NEXAR_OK)
            goto failed;
        for (int i = 0; i < N; i++) {
            long want = 0;
            for (int k = 0; k < n; k++)
                want += (i + k * 7 + iters) % 101;
            wrong += v[i] != (float)want;
        }
        int root = (int)(iters % n);
        for (int i = 0; i < NB; i++)
            b[i] = me == root ? (int32_t)(i * 3 + iters) : -1;
        st = nexar_broadcast(w, b, NB, NEXAR_I32, root);
        if (st != NEXAR_OK)
            goto failed;
        for (int i = 0; i < NB; i++)
            wrong += b[i] != (int32_t)(i * 3 + iters);
        iters++;
    }
    goto done;
failed:
    first = st;
    snprintf(why, sizeof(why), "%s", nexar_last_error());
done:
    snprintf(text, sizeof(text), "%ld %ld %d %s\n", iters, wrong, (int)first, why);
    tl_put_file(g_dir, "result", me, text);
    for (int i = 0; i < 3000 && !exists("release"); i++)
        usleep(10000);
    nexar_finalize();
    return first != NEXAR_OK || wrong ? 4 : 0;
}
