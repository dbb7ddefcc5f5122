/*
 * test_ring.c - the shared-memory rings as both sides really run them: the shim's
 * producer and consumer (libshim/ring.c, compiled in) against nexard's consumer and
 * producer (daemon/node/ring.c through nx_core, ring_daemon.c), over one real segment in
 * this process.  The indices start a few entries below 2^32, so every check also runs
 * across the wrap of the free-running u32 counters.
 *
 *  - submission: the shim's free space counts down to 0 and a full ring takes nothing
 *    more; entries are invisible to the daemon until published; publishing rings the
 *    doorbell only while the daemon sleeps; the daemon drains them in order;
 *  - completion: the daemon fills the ring, holds the rest back, and posts them when the
 *    shim, having found the ring full, rings; the shim reaps everything in order and an
 *    empty ring yields nothing;
 *  - thousands of entries through 8-entry rings, the order kept;
 *  - error texts: the text of a failed completion, and an overwritten one reads empty;
 *  - corrupt indices: the shim refuses a completion tail too far ahead (it dies with
 *    NEXAR_ERR_INTERNAL), nexard a submission tail too far ahead (a protocol violation).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ring_daemon.h"
#include "shim.h"

#define ENTRIES 8u
#define START (UINT32_MAX - 5u) /* 6 entries below the wrap */

struct nx_shim nx_S;

static int failures;

#define EXPECT(c, ...)                                                                   \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #c);                 \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

/* ---- what the rest of the shim would do with a completion ---------------------------- */

static struct nx_cqe got[4096];
static size_t ngot;
static nexar_status_t died;

void nx_req_on_cqe(const struct nx_cqe *e)
{
    if (ngot < sizeof(got) / sizeof(got[0]))
        got[ngot] = *e;
    ngot++;
}

void nx_shim_die(nexar_status_t s, const char *text)
{
    died = s;
    nx_S.dead = s;
    fprintf(stderr, "(shim dies as it should: %s)\n", text);
}

/* ---- helpers -------------------------------------------------------------------------- */

/* Points nx_S at the segment as nx_control_map() does, through the same code. */
static void map(const struct rd_seg *s)
{
    memcpy(&nx_S.hdr, s->base, sizeof(nx_S.hdr));
    nx_ring_attach(s->base, s->bytes);
    nx_S.sq_efd = s->sq_efd;
    nx_S.cq_efd = s->cq_efd;
}

/* Consumes what the doorbell fd counted (the shim's own completion doorbell). */
static void unring(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
        ;
}

/* A doorbell is pending on fd (poll does not consume it). */
static int rung(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static uint32_t g_comm;
static uint64_t g_seq; /* the barriers' sequence on the communicator of one */

/* A barrier descriptor: the daemon completes it at once on a communicator of one. */
static struct nx_sqe barrier(uint64_t user_data)
{
    return (struct nx_sqe){.user_data = user_data, .comm_id = g_comm, .kind = NX_K_BARRIER,
                           .seq = g_seq++};
}

/* Reaps and checks that exactly n completions came, with user_data first..first+n-1. */
static void expect_reaped(uint32_t n, uint64_t first, const char *what)
{
    ngot = 0;
    uint32_t r = nx_ring_reap();
    EXPECT(r == n && ngot == n, "%s: reaped %u (callbacks %zu), expected %u", what, r, ngot, n);
    for (size_t i = 0; i < ngot && i < n; i++)
        EXPECT(got[i].user_data == first + i && got[i].status == 0,
               "%s: completion %zu has user_data %llu status %u, expected %llu", what, i,
               (unsigned long long)got[i].user_data, got[i].status,
               (unsigned long long)(first + i));
}

/* ---- the checks ------------------------------------------------------------------------ */

static void submission(void)
{
    EXPECT(*nx_S.sq_tail == START && nx_ring_sq_space() == ENTRIES, "empty ring: space %u",
           nx_ring_sq_space());
    for (uint32_t i = 0; i < ENTRIES; i++) {
        EXPECT(nx_ring_sq_space() == ENTRIES - i, "space %u after %u puts", nx_ring_sq_space(),
               i);
        struct nx_sqe e = barrier(100 + i);
        nx_ring_put(&e);
    }
    EXPECT(nx_ring_sq_space() == 0, "a full ring has space %u", nx_ring_sq_space());
    /* Not published: the daemon sees nothing even when woken. */
    EXPECT(*nx_S.sq_tail == START, "tail moved before publish: %u", *nx_S.sq_tail);
    rd_serve();
    EXPECT(rd_sq_head() == START && *nx_S.cq_tail == START, "the daemon took unpublished "
           "entries: head %u", rd_sq_head());
    /* The daemon sleeps (wake 1): publishing rings its doorbell, once. */
    EXPECT(*nx_S.sq_wake == 1 && !rung(nx_S.sq_efd), "wake %u before publish", *nx_S.sq_wake);
    nx_ring_publish();
    EXPECT(*nx_S.sq_tail == START + ENTRIES && *nx_S.sq_tail < ENTRIES,
           "published tail %u: expected %u (past the wrap)", *nx_S.sq_tail, START + ENTRIES);
    EXPECT(rung(nx_S.sq_efd), "publishing to a sleeping daemon did not ring");
    rd_serve();
    EXPECT(rd_sq_head() == START + ENTRIES, "the daemon drained up to %u, expected %u",
           rd_sq_head(), START + ENTRIES);
    EXPECT(nx_ring_sq_space() == ENTRIES, "space %u after the daemon drained",
           nx_ring_sq_space());
    EXPECT(!rung(nx_S.sq_efd), "the daemon left its doorbell rung");
    expect_reaped(ENTRIES, 100, "8 barriers across the wrap");
    /* The completion ring was full: the shim tells the daemon it made room. */
    EXPECT(rung(nx_S.sq_efd), "reaping a full completion ring did not ring the daemon");
    rd_serve();
    /* Nothing new: publishing again rings nothing. */
    nx_ring_publish();
    EXPECT(!rung(nx_S.sq_efd), "publishing nothing rang the doorbell");
    /* A daemon that polls (wake 0) needs no doorbell: the entry is published silently. */
    nx_wake_set(nx_S.sq_wake, 0);
    struct nx_sqe e = barrier(150);
    nx_ring_put(&e);
    nx_ring_publish();
    EXPECT(!rung(nx_S.sq_efd) && *nx_S.sq_tail == START + ENTRIES + 1,
           "publishing to a polling daemon rang (tail %u)", *nx_S.sq_tail);
    nx_wake_set(nx_S.sq_wake, 1);
    nx_ring_doorbell(); /* stands in for the poll the test daemon does not run */
    rd_serve();
    expect_reaped(1, 150, "a silent publish");
}

static void completion(void)
{
    EXPECT(!rung(nx_S.sq_efd), "a doorbell is left from before");
    unring(nx_S.cq_efd);
    /* Empty: nothing, no callback. */
    EXPECT(!nx_ring_cq_pending(nx_S.cq_local_head), "an empty ring is pending");
    expect_reaped(0, 0, "an empty completion ring");
    /* 13 completions for 8 entries: the daemon holds 5 back. */
    for (uint64_t i = 0; i < ENTRIES + 5; i++)
        rd_complete(200 + i, 0, NULL);
    EXPECT(*nx_S.cq_tail - *nx_S.cq_head == ENTRIES && rd_held_back() == 5,
           "full: %u in the ring, %zu held back", *nx_S.cq_tail - *nx_S.cq_head,
           rd_held_back());
    EXPECT(rung(nx_S.cq_efd), "the daemon posted without ringing a sleeping shim");
    EXPECT(nx_ring_cq_pending(nx_S.cq_local_head), "a full ring is not pending");
    expect_reaped(ENTRIES, 200, "a full completion ring");
    EXPECT(rung(nx_S.sq_efd), "the shim found the ring full but did not ring the daemon");
    rd_serve();
    EXPECT(rd_held_back() == 0, "the daemon still holds %zu back", rd_held_back());
    expect_reaped(5, 200 + ENTRIES, "the completions held back");
    expect_reaped(0, 0, "the drained completion ring");
}

static void many(void)
{
    uint64_t next = 1000, want = 1000;
    for (int round = 0; round < 2000; round++) {
        uint32_t k = (uint32_t)(round % ENTRIES) + 1;
        EXPECT(nx_ring_sq_space() == ENTRIES, "round %d: space %u", round, nx_ring_sq_space());
        for (uint32_t i = 0; i < k; i++) {
            struct nx_sqe e = barrier(next++);
            nx_ring_put(&e);
        }
        nx_ring_publish();
        rd_serve();
        expect_reaped(k, want, "a round");
        want += k;
        if (failures > 20)
            break;
    }
    printf("%llu barriers through %u-entry rings, in order; indices now %u / %u\n",
           (unsigned long long)(want - 1000), ENTRIES, *nx_S.sq_tail, *nx_S.cq_tail);
}

static void error_texts(void)
{
    uint32_t entries = nx_S.hdr.err_entries;
    struct nx_cqe first = {0};
    char text[NX_ERR_TEXT_BYTES];
    for (uint32_t i = 0; i < entries + 3; i++) {
        char want[64];
        snprintf(want, sizeof(want), "failure %u of the test", i);
        rd_complete(5000 + i, NEXAR_ERR_MISMATCH, want);
        ngot = 0;
        nx_ring_reap();
        EXPECT(ngot == 1 && got[0].status == NEXAR_ERR_MISMATCH && got[0].user_data == 5000 + i,
               "error completion %u", i);
        nx_ring_err_text(&got[0], text, sizeof(text));
        EXPECT(!strcmp(text, want), "error %u reads \"%s\"", i, text);
        if (i == 0)
            first = got[0];
    }
    /* The first entry was reused three completions ago: its text is gone, not wrong. */
    nx_ring_err_text(&first, text, sizeof(text));
    EXPECT(text[0] == '\0', "an overwritten error text reads \"%s\"", text);
}

static void corrupt(void)
{
    /* A completion tail more entries ahead than the ring holds: the shim reads nothing. */
    uint32_t head = *nx_S.cq_head;
    __atomic_store_n(nx_S.cq_tail, head + ENTRIES + 1, __ATOMIC_RELEASE);
    ngot = 0;
    uint32_t r = nx_ring_reap();
    EXPECT(r == 0 && ngot == 0 && died == NEXAR_ERR_INTERNAL,
           "a corrupt completion tail: reaped %u, died %d", r, died);
    __atomic_store_n(nx_S.cq_tail, head, __ATOMIC_RELEASE);
    /* A submission tail too far ahead: nexard drops the client, reading nothing. */
    uint32_t before = rd_sq_head();
    __atomic_store_n(nx_S.sq_tail, before + ENTRIES + 1, __ATOMIC_RELEASE);
    nx_ring_doorbell();
    rd_serve();
    EXPECT(rd_violations() == 1 && rd_dropped() && rd_sq_head() == before,
           "a corrupt submission tail: %llu violations, dropped %d, head %u",
           (unsigned long long)rd_violations(), rd_dropped(), rd_sq_head());
}

int main(void)
{
    struct rd_seg seg;
    rd_start(ENTRIES, ENTRIES, START, START, &seg);
    g_comm = seg.comm_id;
    map(&seg);
    submission();
    completion();
    many();
    error_texts();
    corrupt();
    rd_stop();
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("ring: all checks passed\n");
    return failures ? 1 : 0;
}
