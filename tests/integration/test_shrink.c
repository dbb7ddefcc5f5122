/*
 * test_shrink.c - survive a lost rank on one node: nexar_comm_failed_ranks and
 * nexar_comm_shrink (issue 12), with real daemons and ranks killed with SIGKILL.
 *
 *  - kill: 4 ranks run all_reduces; rank 2 SIGKILLs itself after 50.  Every survivor's
 *    next op fails with NEXAR_ERR_PEER_LOST naming rank 2, nexar_comm_failed_ranks lists
 *    exactly {2}, shrink gives 3 ranks in the old order (0, 1, 3 -> 0, 1, 2), and 100
 *    all_reduces, a split of the shrunk communicator and a broadcast on it are exact.  The
 *    times from the kill to each PEER_LOST and from there to a working communicator are
 *    printed (targets: 1 s and 1 s).
 *  - during: rank 3 dies, ranks 0 and 1 call shrink, rank 2 dies 300 ms later without
 *    calling it: the shrink is not held up by it and gives {0, 1}.
 *  - healthy: shrink where nothing failed gives a copy (same size and ranks), and both
 *    communicators go on working; nexar_comm_failed_ranks says 0.
 *  - absent: a survivor that never calls shrink: the others get NEXAR_ERR_TIMEOUT naming
 *    it within the job's deadline (NEXAR_TIMEOUT=2) plus 2 s.
 *  - splits: 4 ranks split into {0, 1} and {2, 3}; rank 3 dies: the world and {2, 3} fail
 *    for rank 2 (PEER_LOST), {0, 1} goes on with 50 exact all_reduces.
 *  - grow: 3 ranks call nexar_comm_grow(w, 2) (add = 0 is INVALID first); 2 processes of
 *    the same job started with NEXAR_JOIN=1 get the grown communicator from nexar_init as
 *    ranks 3 and 4.  All 5 run exact all_reduces and a broadcast; then the joiner with
 *    rank 4 dies, and the other 4 shrink and go on, exact.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

#define MAXR 8

struct shared {
    double t_kill;
    double t_lost[MAXR], t_ready[MAXR];
    int formed;      /* grow: members whose nexar_init returned */
    int grow_rank[MAXR];
};

static struct shared *sh;

#define RFAIL(me, fmt, ...)                                                                \
    do {                                                                                   \
        tl_log("FAIL rank %d: " fmt, (me), __VA_ARGS__);                                   \
        return 1;                                                                          \
    } while (0)

/* n all_reduces of rank + k over c, whose ranks sum to ranksum; 0 when all exact. */
static int reduces(nexar_comm_t *c, int n, int64_t ranksum, int me, const char *what)
{
    int size = nexar_comm_size(c), rank = nexar_comm_rank(c);
    for (int k = 0; k < n; k++) {
        int64_t v = rank + k;
        nexar_status_t s = nexar_all_reduce(c, &v, 1, NEXAR_I64, NEXAR_SUM);
        int64_t want = ranksum + (int64_t)size * k;
        if (s != NEXAR_OK || v != want)
            RFAIL(me, "%s all_reduce %d: %s, %lld (want %lld): %s", what, k,
                  nexar_strerror(s), (long long)v, (long long)want,
                  s ? nexar_last_error() : "");
    }
    return 0;
}

/* After the loss: failed ranks, shrink, and the checks on the shrunk communicator. */
static int recover(nexar_comm_t *w, int me, const uint32_t *dead, size_t ndead, int size)
{
    uint32_t f[MAXR];
    size_t n = 0;
    nexar_status_t s = nexar_comm_failed_ranks(w, f, MAXR, &n);
    if (s != NEXAR_OK || n != ndead || memcmp(f, dead, n * sizeof(*f)))
        RFAIL(me, "failed ranks: %s, %zu listed (want %zu)", nexar_strerror(s), n, ndead);
    nexar_comm_t *sc = NULL;
    s = nexar_comm_shrink(w, &sc);
    if (s != NEXAR_OK || !sc)
        RFAIL(me, "shrink: %s: %s", nexar_strerror(s), nexar_last_error());
    int want_rank = me, want_size = size - (int)ndead;
    for (size_t i = 0; i < ndead; i++)
        want_rank -= (int)dead[i] < me;
    if (nexar_comm_rank(sc) != want_rank || nexar_comm_size(sc) != want_size)
        RFAIL(me, "shrunk: rank %d of %d, want %d of %d", nexar_comm_rank(sc),
              nexar_comm_size(sc), want_rank, want_size);
    if (reduces(sc, 1, (int64_t)want_size * (want_size - 1) / 2, me, "first shrunk"))
        return 1;
    sh->t_ready[me] = tl_now();
    if (reduces(sc, 100, (int64_t)want_size * (want_size - 1) / 2, me, "shrunk"))
        return 1;
    /* A split of the shrunk communicator: even and odd ranks. */
    nexar_comm_t *half = NULL;
    int r = nexar_comm_rank(sc);
    if ((s = nexar_comm_split(sc, (uint32_t)(r % 2), (uint32_t)r, &half)) != NEXAR_OK)
        RFAIL(me, "split of the shrunk communicator: %s", nexar_strerror(s));
    int64_t hsum = 0;
    for (int q = r % 2; q < want_size; q += 2)
        hsum += q / 2;
    if (reduces(half, 10, hsum, me, "split"))
        return 1;
    nexar_comm_free(half);
    /* A broadcast from the last rank. */
    int64_t b[16];
    for (int i = 0; i < 16; i++)
        b[i] = r == want_size - 1 ? 1000 + i : -1;
    s = nexar_broadcast(sc, b, 16, NEXAR_I64, want_size - 1);
    for (int i = 0; i < 16 && s == NEXAR_OK; i++)
        if (b[i] != 1000 + i)
            RFAIL(me, "broadcast: element %d is %lld", i, (long long)b[i]);
    if (s != NEXAR_OK)
        RFAIL(me, "broadcast: %s", nexar_strerror(s));
    nexar_comm_free(sc);
    nexar_comm_free(w);
    return 0;
}

/* Loops all_reduces until the loss shows; the victim kills itself after `after`. */
static int until_lost(nexar_comm_t *w, int me, int victim, int after)
{
    for (int k = 0;; k++) {
        if (me == victim && k == after) {
            sh->t_kill = tl_now();
            raise(SIGKILL);
        }
        int64_t v = me;
        nexar_status_t s = nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM);
        if (s == NEXAR_OK)
            continue;
        sh->t_lost[me] = tl_now();
        char want[32];
        snprintf(want, sizeof(want), "(rank %d of communicator", victim);
        if (s != NEXAR_ERR_PEER_LOST || !strstr(nexar_last_error(), want))
            RFAIL(me, "op %d: %s, \"%s\" (want PEER_LOST naming rank %d)", k,
                  nexar_strerror(s), nexar_last_error(), victim);
        return 0;
    }
}

static int kill_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    if (until_lost(w, r->rank, 2, 50))
        return 1;
    static const uint32_t dead[] = {2};
    int rv = recover(w, r->rank, dead, 1, r->size);
    return nexar_finalize() == NEXAR_OK ? rv : 1;
}

static int during_rank(struct hx_rank *r)
{
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    if (until_lost(w, r->rank, 3, 10))
        return 1;
    if (r->rank == 2) {
        usleep(300 * 1000); /* the others are in shrink by now */
        raise(SIGKILL);
    }
    static const uint32_t dead[] = {2, 3};
    /* Ranks 0 and 1 may ask before rank 2 is gone: their list then holds 3 alone, so
     * they ask after the shrink (the set only grows). */
    nexar_comm_t *sc = NULL;
    nexar_status_t s = nexar_comm_shrink(w, &sc);
    if (s != NEXAR_OK || nexar_comm_size(sc) != 2 || nexar_comm_rank(sc) != r->rank)
        RFAIL(r->rank, "shrink while rank 2 dies: %s, rank %d of %d: %s", nexar_strerror(s),
              sc ? nexar_comm_rank(sc) : -1, sc ? nexar_comm_size(sc) : -1,
              s ? nexar_last_error() : "");
    uint32_t f[MAXR];
    size_t n = 0;
    if (nexar_comm_failed_ranks(w, f, MAXR, &n) != NEXAR_OK || n != 2 || f[0] != dead[0] ||
        f[1] != dead[1])
        RFAIL(r->rank, "failed ranks after the shrink: %zu listed", n);
    if (reduces(sc, 20, 1, r->rank, "shrunk to 2"))
        return 1;
    nexar_comm_free(sc);
    nexar_comm_free(w);
    return nexar_finalize() == NEXAR_OK ? 0 : 1;
}

static int healthy_rank(struct hx_rank *r)
{
    nexar_comm_t *w, *copy = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    size_t n = 99;
    nexar_status_t s = nexar_comm_failed_ranks(w, NULL, 0, &n);
    if (s != NEXAR_OK || n != 0)
        RFAIL(r->rank, "failed ranks of a healthy communicator: %s, %zu", nexar_strerror(s), n);
    s = nexar_comm_shrink(w, &copy);
    if (s != NEXAR_OK || nexar_comm_size(copy) != r->size || nexar_comm_rank(copy) != r->rank)
        RFAIL(r->rank, "shrink of a healthy communicator: %s", nexar_strerror(s));
    int64_t sum = (int64_t)r->size * (r->size - 1) / 2;
    if (reduces(copy, 20, sum, r->rank, "copy") || reduces(w, 20, sum, r->rank, "original"))
        return 1;
    nexar_comm_free(copy);
    return nexar_finalize() == NEXAR_OK ? 0 : 1;
}

static int absent_rank(struct hx_rank *r)
{
    nexar_comm_t *w, *sc = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    if (r->rank == 1) {
        sleep(6); /* alive, but never shrinks */
        return nexar_finalize() == NEXAR_OK ? 0 : 0;
    }
    double t0 = tl_now();
    nexar_status_t s = nexar_comm_shrink(w, &sc);
    double dt = tl_now() - t0;
    if (s != NEXAR_ERR_TIMEOUT || !strstr(nexar_last_error(), "rank(s) 1 did not call it") ||
        dt > 4.0)
        RFAIL(r->rank, "shrink without rank 1: %s after %.1f s: %s", nexar_strerror(s), dt,
              nexar_last_error());
    tl_log("rank %d: shrink without rank 1 after %.1f s: %s", r->rank, dt, nexar_last_error());
    return nexar_finalize() == NEXAR_OK ? 0 : 1;
}

static int split_rank(struct hx_rank *r)
{
    nexar_comm_t *w, *half = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    nexar_status_t s = nexar_comm_split(w, (uint32_t)(r->rank / 2), (uint32_t)r->rank, &half);
    if (s != NEXAR_OK)
        RFAIL(r->rank, "split: %s", nexar_last_error());
    if (reduces(half, 5, 1, r->rank, "half before"))
        return 1;
    nexar_barrier(w);
    if (r->rank == 3)
        raise(SIGKILL);
    if (r->rank == 2) {
        int64_t v = 1;
        s = nexar_all_reduce(half, &v, 1, NEXAR_I64, NEXAR_SUM);
        if (s != NEXAR_ERR_PEER_LOST)
            RFAIL(r->rank, "the half with the dead rank: %s", nexar_strerror(s));
    } else if (reduces(half, 50, 1, r->rank, "the half without the dead rank")) {
        return 1;
    }
    nexar_comm_free(half);
    return nexar_finalize() == NEXAR_OK ? 0 : 1;
}

/* After the grow: 20 all_reduces and a broadcast on g (5 ranks), then rank 4 dies and the
 * rest shrink to 4 and check 20 more. */
static int grown(nexar_comm_t *g, int me_slot)
{
    int rank = nexar_comm_rank(g), size = nexar_comm_size(g);
    if (size != 5)
        RFAIL(me_slot, "grown communicator of %d ranks, expected 5", size);
    sh->grow_rank[me_slot] = rank;
    if (reduces(g, 20, 10, me_slot, "grown"))
        return 1;
    int64_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = rank == 4 ? 500 + i : 0;
    nexar_status_t s = nexar_broadcast(g, b, 8, NEXAR_I64, 4);
    for (int i = 0; i < 8 && s == NEXAR_OK; i++)
        if (b[i] != 500 + i)
            RFAIL(me_slot, "broadcast from the joiner: element %d is %lld", i, (long long)b[i]);
    if (s != NEXAR_OK)
        RFAIL(me_slot, "broadcast on the grown communicator: %s", nexar_last_error());
    /* Cut by the local chunk plan, which members learn from the grow's completion and
     * joiners from their JoinReply: they must cut alike. */
    struct tl_case big[] = {{.coll = TL_BROADCAST, .dtype = NEXAR_I32, .count = (1u << 20) + 5,
                             .root = 4, .seed = 41},
                            {.coll = TL_ALL_GATHER, .dtype = NEXAR_U8, .count = (1u << 20) + 1,
                             .seed = 42}};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        if (tl_run_case(g, &big[i]) != TL_CASE_OK)
            RFAIL(me_slot, "%s of %zu elements on the grown communicator",
                  tl_coll_name(big[i].coll), big[i].count);
    if (rank == 4)
        raise(SIGKILL);
    int64_t v = rank;
    s = nexar_all_reduce(g, &v, 1, NEXAR_I64, NEXAR_SUM);
    if (s != NEXAR_ERR_PEER_LOST)
        RFAIL(me_slot, "all_reduce after rank 4 died: %s", nexar_strerror(s));
    nexar_comm_t *sc = NULL;
    if ((s = nexar_comm_shrink(g, &sc)) != NEXAR_OK || nexar_comm_size(sc) != 4 ||
        nexar_comm_rank(sc) != rank)
        RFAIL(me_slot, "shrink of the grown communicator: %s", nexar_last_error());
    if (reduces(sc, 20, 6, me_slot, "grown, then shrunk"))
        return 1;
    big[0].root = 3;
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
        if (tl_run_case(sc, &big[i]) != TL_CASE_OK)
            RFAIL(me_slot, "%s of %zu elements on the shrunk communicator",
                  tl_coll_name(big[i].coll), big[i].count);
    nexar_comm_free(sc);
    return 0;
}

static int grow_member(struct hx_rank *r)
{
    nexar_comm_t *w, *g = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    __atomic_add_fetch(&sh->formed, 1, __ATOMIC_SEQ_CST);
    nexar_status_t s = nexar_comm_grow(w, 0, &g);
    if (s != NEXAR_ERR_INVALID || !strstr(nexar_last_error(), "add is 0"))
        RFAIL(r->rank, "grow by 0: %s: %s", nexar_strerror(s), nexar_last_error());
    if ((s = nexar_comm_grow(w, 2, &g)) != NEXAR_OK)
        RFAIL(r->rank, "grow by 2: %s: %s", nexar_strerror(s), nexar_last_error());
    if (nexar_comm_rank(g) != r->rank)
        RFAIL(r->rank, "a member's rank changed in the grow: %d", nexar_comm_rank(g));
    int rv = grown(g, r->rank);
    nexar_comm_free(g);
    return rv || nexar_finalize() != NEXAR_OK;
}

static int grow_joiner(struct hx_rank *r)
{
    nexar_comm_t *g;
    if (hx_init(&g) != NEXAR_OK)
        return 1;
    int rank = nexar_comm_rank(g);
    if (rank != 3 && rank != 4)
        RFAIL(3 + r->rank, "a joiner got rank %d, expected 3 or 4", rank);
    int rv = grown(g, 3 + r->rank);
    return rv || nexar_finalize() != NEXAR_OK;
}

static int run_grow(struct hx_daemon *d)
{
    char job[64];
    hx_job_name(job, sizeof(job), "grow");
    memset(sh, 0, sizeof(*sh));
    struct hx_job m, jn;
    struct hx_job_opts om = {.sock = d->sock, .size = 3, .fn = grow_member, .job = job,
                             .nexar_timeout_s = 20};
    static const char *const joiner_env[] = {"NEXAR_JOIN=1", NULL};
    struct hx_job_opts oj = {.sock = d->sock, .size = 2, .fn = grow_joiner, .job = job,
                             .nexar_timeout_s = 20, .env_extra = joiner_env};
    if (hx_job_start(&m, &om) < 0)
        return 1;
    double end = tl_now() + 20;
    while (__atomic_load_n(&sh->formed, __ATOMIC_SEQ_CST) < 3 && tl_now() < end)
        usleep(1000);
    if (hx_job_start(&jn, &oj) < 0)
        return 1;
    hx_job_wait(&m, 60, 10);
    hx_job_wait(&jn, 60, 10);
    int bad = 0, killed = -1;
    for (int r = 0; r < 2; r++)
        if (sh->grow_rank[3 + r] == 4)
            killed = r;
    for (int r = 0; r < 3; r++)
        if (!WIFEXITED(m.wstatus[r]) || WEXITSTATUS(m.wstatus[r])) {
            tl_log("FAIL grow: member %d: status 0x%x", r, m.wstatus[r]);
            bad++;
        }
    for (int r = 0; r < 2; r++) {
        int ws = jn.wstatus[r];
        bool ok = r == killed ? WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL
                              : WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        if (!ok) {
            tl_log("FAIL grow: joiner %d (rank %d): status 0x%x", r, sh->grow_rank[3 + r], ws);
            bad++;
        }
    }
    tl_log("3 ranks grew to 5 with 2 joiners (ranks %d and %d), the joiner of rank 4 died "
           "and 4 shrank: %s", sh->grow_rank[3], sh->grow_rank[4], bad ? "FAILED" : "ok");
    return bad;
}

/* Runs size ranks of fn; the ones in killed[] must die of SIGKILL, the rest exit 0. */
static int run(struct hx_daemon *d, const char *what, hx_rank_fn fn, int size,
               const int *killed, int nkilled, int timeout_s)
{
    struct hx_job j;
    struct hx_job_opts o = {.sock = d->sock, .size = size, .fn = fn,
                            .nexar_timeout_s = timeout_s};
    memset(sh, 0, sizeof(*sh));
    if (hx_job_start(&j, &o) < 0)
        return 1;
    hx_job_wait(&j, 60, 10);
    int bad = 0;
    for (int r = 0; r < size; r++) {
        bool must_die = false;
        for (int i = 0; i < nkilled; i++)
            must_die |= killed[i] == r;
        int ws = j.wstatus[r];
        bool ok = must_die ? WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL
                           : WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        if (!ok) {
            tl_log("FAIL %s: rank %d: status 0x%x", what, r, ws);
            bad++;
        }
    }
    tl_log("%s: %s", what, bad ? "FAILED" : "ok");
    return bad;
}

int main(void)
{
    hx_require_nexard();
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL))
        return 1;
    sh = hx_shared(sizeof(*sh));
    int fails = 0;

    static const int k2[] = {2};
    fails += run(&d, "kill rank 2 of 4", kill_rank, 4, k2, 1, 60);
    double lost = 0, ready = 0;
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            continue;
        if (sh->t_lost[r] - sh->t_kill > lost)
            lost = sh->t_lost[r] - sh->t_kill;
        if (sh->t_ready[r] - sh->t_lost[r] > ready)
            ready = sh->t_ready[r] - sh->t_lost[r];
    }
    tl_log("timing: kill -> every survivor's PEER_LOST %.2f ms; PEER_LOST -> shrunk "
           "communicator's first all_reduce done %.2f ms (targets 1 s, 1 s)", lost * 1e3,
           ready * 1e3);
    if (!fails && (lost > 1.0 || ready > 1.0)) {
        tl_log("FAIL timing above 1 s");
        fails++;
    }
    static const int k23[] = {2, 3}, k3[] = {3};
    fails += run(&d, "rank 2 dies while the others shrink", during_rank, 4, k23, 2, 60);
    fails += run(&d, "shrink with nothing failed", healthy_rank, 3, NULL, 0, 60);
    fails += run(&d, "a survivor that never shrinks", absent_rank, 3, NULL, 0, 2);
    fails += run(&d, "a split without the dead rank goes on", split_rank, 4, k3, 1, 60);
    fails += run_grow(&d);
    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
