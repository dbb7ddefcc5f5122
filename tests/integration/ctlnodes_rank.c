/*
 * ctlnodes_rank.c - the rank program of test_ctl_nodes.c: a job across two daemons with
 * one all_reduce that rank 0 holds up, so that nexarctl can be asked about a formed job
 * and an op in flight on either node.
 *
 *   itest_ctlnodes_rank   (NEXAR_* environment; result files in $HX_OUT)
 *     init; write ready<rank> ("rank size"); rank 0 waits for $HX_OUT/go (at most 30 s),
 *     the others enter at once; an all_reduce of 4 i32 (sum of the ranks, checked);
 *     write done<rank> ("status"); wait for $HX_OUT/release (at most 30 s); finalize;
 *     exit 0 when the all_reduce was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nexar.h"
#include "outfile.h"

static char g_dir[512];

static int exists(const char *name)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", g_dir, name);
    return access(p, F_OK) == 0;
}

static void wait_for(const char *name)
{
    for (int i = 0; i < 3000 && !exists(name); i++)
        usleep(10000);
}

int main(void)
{
    const char *out = getenv("HX_OUT");
    snprintf(g_dir, sizeof(g_dir), "%s", out ? out : ".");
    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    if (st != NEXAR_OK) {
        fprintf(stderr, "nexar_init: %s: %s\n", nexar_strerror(st), nexar_last_error());
        return 20;
    }
    int me = nexar_comm_rank(w), n = nexar_comm_size(w);
    char text[256];
    snprintf(text, sizeof(text), "%d %d\n", me, n);
    tl_put_file(g_dir, "ready", me, text);
    if (me == 0)
        wait_for("go");
    int32_t v[4] = {me, me, me, me};
    st = nexar_all_reduce(w, v, 4, NEXAR_I32, NEXAR_SUM);
    int right = st == NEXAR_OK;
    for (int i = 0; i < 4; i++)
        right &= v[i] == n * (n - 1) / 2;
    snprintf(text, sizeof(text), "%d\n", right ? 0 : st ? (int)st : -1);
    tl_put_file(g_dir, "done", me, text);
    wait_for("release");
    nexar_finalize();
    return right ? 0 : 1;
}
