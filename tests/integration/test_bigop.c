/*
 * test_bigop.c - one very large allreduce (i32 sum) staged through 1 MiB slots,
 * from malloc'd memory and from an arena buffer (the direct path walking the
 * same chunk plan), every element checked.
 *
 *   itest_bigop [--world N] [--mib M]      default: 3 ranks, 64 MiB
 *   long run (meson -Dlong_tests=true or NEXAR_LONG_TESTS=1): 2 ranks, 1024 MiB
 */
#include <getopt.h>
#include <stdlib.h>

#include "itest.h"

static size_t g_mib = 64;

static inline int32_t v(int rank, size_t i)
{
    return (int32_t)(((uint32_t)i * 2654435761u + (uint32_t)rank * 40503u) & 0xffffu) - 32768;
}

static int one(nexar_comm_t *w, int32_t *buf, size_t count, int me, int n, const char *what)
{
    int fails = 0;
    for (size_t i = 0; i < count; i++)
        buf[i] = v(me, i);
    double t0 = tl_now();
    if (EXPECT_OK(fails, what, nexar_all_reduce(w, buf, count, NEXAR_I32, NEXAR_SUM)))
        return 1;
    double dt = tl_now() - t0;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t want = 0;
        for (int r = 0; r < n; r++)
            want += v(r, i);
        if (buf[i] != want && bad++ < 5)
            tl_log("FAIL %s: index %zu: expected %d, got %d", what, i, want, buf[i]);
    }
    if (bad)
        tl_log("FAIL %s: %zu of %zu elements differ", what, bad, count);
    else if (me == 0)
        tl_log("%s: %zu MiB exact in %.2f s (%.0f MB/s)", what, count * 4 >> 20, dt,
               (double)count * 4 / dt / 1e6);
    return bad ? 1 : 0;
}

static int rank_main(struct hx_rank *r)
{
    int fails = 0;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    size_t count = g_mib * 1024 * 1024 / 4 + 1; /* one element past a whole slot count */
    int32_t *buf = malloc(count * 4);
    if (!buf) {
        tl_log("FAIL: malloc %zu MiB", g_mib);
        fails++;
    } else {
        fails += one(w, buf, count, r->rank, r->size, "staged allreduce (malloc)");
        free(buf);
    }
    if (g_mib <= 64) {
        int32_t *ab = NULL;
        if (!EXPECT_OK(fails, "nexar_alloc(64 MiB)", nexar_alloc(count * 4, (void **)&ab))) {
            fails += one(w, ab, count, r->rank, r->size, "direct allreduce (arena)");
            EXPECT_OK(fails, "nexar_free", nexar_free(ab));
        }
    }
    EXPECT_OK(fails, "finalize", nexar_finalize());
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int world = 3, lng = hx_env_flag("NEXAR_LONG_TESTS");
    static const struct option lo[] = {{"world", required_argument, NULL, 'w'},
                                       {"mib", required_argument, NULL, 'm'},
                                       {"long", no_argument, NULL, 'l'},
                                       {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "w:m:l", lo, NULL)) != -1;) {
        if (ch == 'w')
            world = atoi(optarg);
        else if (ch == 'm')
            g_mib = (size_t)atol(optarg);
        else if (ch == 'l')
            lng = 1;
        else
            return 2;
    }
    if (lng) {
        world = 2;
        g_mib = 1024;
    }
    hx_require_nexard();
    tl_log("big allreduce: %d ranks x %zu MiB i32 sum, --slot-bytes 1 MiB --slots 2", world,
           g_mib);
    struct hx_daemon d;
    const char *args[] = {"--slot-bytes", "1048576", "--slots", "2", "--heap-bytes",
                          "83886080", NULL};
    if (hx_daemon_start(&d, args))
        return 1;
    int rv = itest_run(&d, world, rank_main, NULL, 300, lng ? 1500.0 : 300.0);
    if (hx_daemon_stop(&d))
        rv = -1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv ? 1 : 0;
}
