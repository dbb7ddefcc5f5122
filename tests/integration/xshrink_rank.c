/*
 * xshrink_rank.c - the rank program of test_xshrink.c: survive a lost rank or node across
 * nodes with nexar_comm_failed_ranks and nexar_comm_shrink.  Files go to $HX_OUT.
 *
 *   itest_xshrink_rank
 *     $XS_VICTIM  the rank that SIGKILLs itself after 30 all_reduces (-1: none; the test
 *                 kills a daemon instead), writing kill<rank> (CLOCK_MONOTONIC seconds)
 *     $XS_DEAD    the ranks that will have failed, ascending ("3", "2,3")
 *     $XS_HOLD    the rank that waits for $HX_OUT/go0 before it shrinks (-1: none), so
 *                 that the test can kill a node while the others are in the agreement
 *     $XS_MODE    split: 4 ranks split by parity ({0, 2}, {1, 3}, both across the nodes);
 *                 rank 3 dies: rank 1's half fails, the other half goes on (end<rank>);
 *                 replace: the loop below; after the shrink, grow by 1 (a replacement at a
 *                 restarted node) and check the 3 (end<rank>);
 *                 replacement: the joiner of that grow (jend<rank>, rank 2 of 3);
 *                 grow: the members (3) grow by 2 and write formed<rank> after nexar_init;
 *                 joiner: a process started with NEXAR_JOIN=1.  Both then check the 5,
 *                 rank 4 dies, and the other 4 shrink (grown<rank of 5>, end<rank of 5>).
 * Otherwise every rank loops all_reduces of rank + k (i64 sum, exact) and writes ready<rank> after
 * the first.  At the first error a survivor writes lost<rank> ("STATUS T TEXT"), checks
 * nexar_comm_failed_ranks against $XS_DEAD, shrinks, checks its rank and size, writes
 * shrunk<rank> (T after the first all_reduce on the shrunk communicator), then runs 100
 * all_reduces, a split by parity with 10 all_reduces, and a broadcast, all exact, and
 * writes end<rank> "OK" or what went wrong.  A rank whose own daemon died writes
 * end<rank> with its status and exits 0.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "outfile.h"

static char g_dir[512];
static int g_rank = -1;

static void put(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(const char *name, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    tl_put_file(g_dir, name, g_rank, text);
}

#define BAD(...)                                                                           \
    do {                                                                                   \
        put("end", __VA_ARGS__);                                                           \
        return 1;                                                                          \
    } while (0)

static int reduces(nexar_comm_t *c, int n, int64_t ranksum, const char *what)
{
    int size = nexar_comm_size(c), rank = nexar_comm_rank(c);
    for (int k = 0; k < n; k++) {
        int64_t v = rank + k;
        nexar_status_t s = nexar_all_reduce(c, &v, 1, NEXAR_I64, NEXAR_SUM);
        if (s != NEXAR_OK || v != ranksum + (int64_t)size * k)
            BAD("%s all_reduce %d: %s, %lld (want %lld): %s\n", what, k, nexar_strerror(s),
                (long long)v, (long long)(ranksum + (int64_t)size * k),
                s ? nexar_last_error() : "");
    }
    return 0;
}

static int parse_dead(uint32_t *dead, int cap)
{
    const char *s = getenv("XS_DEAD");
    int n = 0;
    while (s && *s && n < cap) {
        dead[n++] = (uint32_t)strtoul(s, (char **)&s, 10);
        if (*s == ',')
            s++;
    }
    return n;
}

static int survive(nexar_comm_t *w, int me, int size)
{
    uint32_t dead[16], got[16];
    int ndead = parse_dead(dead, 16);
    size_t n = 0;
    nexar_status_t s = nexar_comm_failed_ranks(w, got, 16, &n);
    /* The loss of a whole node reaches every node at once; a rank's death may reach us
     * before the other deaths the test expects: only a superset is wrong. */
    if (s != NEXAR_OK || n > (size_t)ndead || n == 0)
        BAD("failed ranks: %s, %zu listed (expected up to %d)\n", nexar_strerror(s), n, ndead);
    const char *hold = getenv("XS_HOLD");
    if (hold && atoi(hold) == me) {
        put("held", "%.6f\n", tl_now());
        char go[600];
        snprintf(go, sizeof(go), "%s/go0", g_dir);
        for (double end = tl_now() + 30; access(go, F_OK) && tl_now() < end;)
            usleep(10000);
    }
    /* A node lost after the others agreed but before they noticed is in the shrunk
     * communicator: its first op fails with PEER_LOST, and the survivors shrink again. */
    nexar_comm_t *c = w, *sc = NULL;
    int rounds = 0;
    for (;;) {
        s = nexar_comm_shrink(c, &sc);
        if (s == NEXAR_ERR_UNAVAILABLE) { /* our daemon died while we agreed */
            put("end", "UNAVAILABLE %s\n", nexar_last_error());
            return 0;
        }
        if (s != NEXAR_OK || !sc)
            BAD("shrink: %s: %s\n", nexar_strerror(s), nexar_last_error());
        rounds++;
        int64_t v = nexar_comm_rank(sc);
        int sn = nexar_comm_size(sc);
        s = nexar_all_reduce(sc, &v, 1, NEXAR_I64, NEXAR_SUM);
        if (s == NEXAR_OK && v == (int64_t)sn * (sn - 1) / 2)
            break;
        if (s != NEXAR_ERR_PEER_LOST || rounds == 3)
            BAD("first all_reduce on the shrunk communicator (round %d): %s, %lld: %s\n",
                rounds, nexar_strerror(s), (long long)v, nexar_last_error());
        if (c != w)
            nexar_comm_free(c);
        c = sc;
    }
    if (c != w)
        nexar_comm_free(c);
    put("rounds", "%d\n", rounds);
    s = nexar_comm_failed_ranks(w, got, 16, &n);
    if (s != NEXAR_OK || n != (size_t)ndead || memcmp(got, dead, n * sizeof(*got)))
        BAD("failed ranks after the shrink: %zu listed, expected %d\n", n, ndead);
    int want_rank = me, want_size = size - ndead;
    for (int i = 0; i < ndead; i++)
        want_rank -= (int)dead[i] < me;
    if (nexar_comm_rank(sc) != want_rank || nexar_comm_size(sc) != want_size)
        BAD("shrunk: rank %d of %d, expected %d of %d\n", nexar_comm_rank(sc),
            nexar_comm_size(sc), want_rank, want_size);
    const char *mode = getenv("XS_MODE");
    if (mode && !strcmp(mode, "replace")) {
        /* The lost node's replacement joins: back to the old size. */
        put("shrunk", "%.6f\n", tl_now());
        nexar_comm_t *g = NULL;
        if ((s = nexar_comm_grow(sc, (uint32_t)ndead, &g)) != NEXAR_OK)
            BAD("grow by %d after the shrink: %s: %s\n", ndead, nexar_strerror(s),
                nexar_last_error());
        if (nexar_comm_size(g) != size || nexar_comm_rank(g) != want_rank)
            BAD("grown back: rank %d of %d\n", nexar_comm_rank(g), nexar_comm_size(g));
        if (reduces(g, 20, (int64_t)size * (size - 1) / 2, "grown back"))
            return 1;
        put("grown", "%.6f\n", tl_now());
        nexar_comm_free(g);
        nexar_comm_free(sc);
        put("end", "OK\n");
        return 0;
    }
    int64_t sum = (int64_t)want_size * (want_size - 1) / 2;
    if (reduces(sc, 1, sum, "first shrunk"))
        return 1;
    put("shrunk", "%.6f\n", tl_now());
    if (reduces(sc, 100, sum, "shrunk"))
        return 1;
    nexar_comm_t *half = NULL;
    int r = nexar_comm_rank(sc);
    if ((s = nexar_comm_split(sc, (uint32_t)(r % 2), (uint32_t)r, &half)) != NEXAR_OK)
        BAD("split of the shrunk communicator: %s: %s\n", nexar_strerror(s),
            nexar_last_error());
    int64_t hsum = 0;
    for (int q = r % 2; q < want_size; q += 2)
        hsum += q / 2;
    if (reduces(half, 10, hsum, "split"))
        return 1;
    nexar_comm_free(half);
    int64_t b[16];
    for (int i = 0; i < 16; i++)
        b[i] = r == want_size - 1 ? 1000 + i : -1;
    s = nexar_broadcast(sc, b, 16, NEXAR_I64, want_size - 1);
    for (int i = 0; i < 16 && s == NEXAR_OK; i++)
        if (b[i] != 1000 + i)
            BAD("broadcast: element %d is %lld\n", i, (long long)b[i]);
    if (s != NEXAR_OK)
        BAD("broadcast: %s: %s\n", nexar_strerror(s), nexar_last_error());
    nexar_comm_free(sc);
    put("end", "OK\n");
    return 0;
}

/* grow / joiner: the 5 of the grown communicator g. */
static int grown(nexar_comm_t *g)
{
    int rank = nexar_comm_rank(g), size = nexar_comm_size(g);
    g_rank = rank;
    if (size != 5)
        BAD("grown communicator of %d ranks, expected 5\n", size);
    put("grown", "%.6f %d\n", tl_now(), rank);
    if (reduces(g, 20, 10, "grown"))
        return 1;
    int64_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = rank == 4 ? 500 + i : 0;
    nexar_status_t s = nexar_broadcast(g, b, 8, NEXAR_I64, 4);
    for (int i = 0; i < 8 && s == NEXAR_OK; i++)
        if (b[i] != 500 + i)
            BAD("broadcast from rank 4: element %d is %lld\n", i, (long long)b[i]);
    if (s != NEXAR_OK)
        BAD("broadcast on the grown communicator: %s\n", nexar_last_error());
    if (rank == 4) {
        put("kill", "%.6f\n", tl_now());
        raise(SIGKILL);
    }
    int64_t v = rank;
    s = nexar_all_reduce(g, &v, 1, NEXAR_I64, NEXAR_SUM);
    if (s != NEXAR_ERR_PEER_LOST)
        BAD("all_reduce after rank 4 died: %s\n", nexar_strerror(s));
    nexar_comm_t *sc = NULL;
    if ((s = nexar_comm_shrink(g, &sc)) != NEXAR_OK || nexar_comm_size(sc) != 4 ||
        nexar_comm_rank(sc) != rank)
        BAD("shrink of the grown communicator: %s: %s\n", nexar_strerror(s),
            nexar_last_error());
    if (reduces(sc, 20, 6, "grown, then shrunk"))
        return 1;
    nexar_comm_free(sc);
    put("end", "OK\n");
    return 0;
}

int main(void)
{
    const char *out = getenv("HX_OUT");
    snprintf(g_dir, sizeof(g_dir), "%s", out ? out : ".");
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    g_rank = nexar_comm_rank(w);
    const char *mode = getenv("XS_MODE");
    if (mode && !strcmp(mode, "split")) {
        nexar_comm_t *half = NULL;
        nexar_status_t s = nexar_comm_split(w, (uint32_t)(g_rank % 2), (uint32_t)g_rank, &half);
        if (s != NEXAR_OK)
            BAD("split: %s\n", nexar_last_error());
        if (reduces(half, 5, 1, "half before"))
            return 1;
        nexar_barrier(w);
        if (g_rank == 3)
            raise(SIGKILL);
        if (g_rank == 1) {
            int64_t v = 1;
            s = nexar_all_reduce(half, &v, 1, NEXAR_I64, NEXAR_SUM);
            if (s != NEXAR_ERR_PEER_LOST)
                BAD("the half with the dead rank: %s\n", nexar_strerror(s));
        } else if (reduces(half, 50, 1, "the half without the dead rank")) {
            return 1;
        }
        put("end", "OK\n");
        nexar_comm_free(half);
        return nexar_finalize() == NEXAR_OK ? 0 : 1;
    }
    if (mode && !strcmp(mode, "replacement")) {
        int r = nexar_comm_rank(w), n = nexar_comm_size(w);
        put("jgot", "%d %d\n", r, n);
        int rv = n == 3 && r == 2 ? reduces(w, 20, 3, "replaced") : 1;
        put("jend", rv ? "rank %d of %d, or a wrong all_reduce\n" : "OK\n", r, n);
        return nexar_finalize() == NEXAR_OK ? rv : 1;
    }
    if (mode && !strcmp(mode, "joiner")) {
        int rv = grown(w);
        return nexar_finalize() == NEXAR_OK ? rv : 1;
    }
    if (mode && !strcmp(mode, "grow")) {
        put("formed", "1\n");
        nexar_comm_t *g = NULL;
        nexar_status_t s = nexar_comm_grow(w, 2, &g);
        if (s != NEXAR_OK)
            BAD("grow by 2: %s: %s\n", nexar_strerror(s), nexar_last_error());
        if (nexar_comm_rank(g) != g_rank)
            BAD("a member's rank changed in the grow: %d\n", nexar_comm_rank(g));
        int rv = grown(g);
        nexar_comm_free(g);
        return nexar_finalize() == NEXAR_OK ? rv : 1;
    }
    int size = nexar_comm_size(w);
    const char *v = getenv("XS_VICTIM");
    int victim = v ? atoi(v) : -1;
    for (int k = 0;; k++) {
        if (g_rank == victim && k == 30) {
            put("kill", "%.6f\n", tl_now());
            raise(SIGKILL);
        }
        int64_t x = g_rank + k;
        nexar_status_t s = nexar_all_reduce(w, &x, 1, NEXAR_I64, NEXAR_SUM);
        if (s == NEXAR_OK) {
            if (x != (int64_t)size * (size - 1) / 2 + (int64_t)size * k) {
                put("end", "all_reduce %d: %lld is wrong\n", k, (long long)x);
                return 1;
            }
            if (k == 0)
                put("ready", "%.6f\n", tl_now());
            if (k > 200000) {
                put("end", "no failure within 200000 all_reduces\n");
                return 1;
            }
            continue;
        }
        put("lost", "%d %.6f %s\n", (int)s, tl_now(), nexar_last_error());
        if (s == NEXAR_ERR_UNAVAILABLE) { /* our own daemon died */
            put("end", "UNAVAILABLE %s\n", nexar_last_error());
            return 0;
        }
        if (s != NEXAR_ERR_PEER_LOST) {
            put("end", "all_reduce %d: %s (expected PEER_LOST): %s\n", k, nexar_strerror(s),
                nexar_last_error());
            return 1;
        }
        int rv = survive(w, g_rank, size);
        nexar_finalize();
        return rv;
    }
}
