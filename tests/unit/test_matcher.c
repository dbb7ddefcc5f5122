/*
 * test_matcher.c - the matcher (daemon/node/matcher.c) alone: linked against the node
 * layer and what lies below it, with a stub cluster table (node/cluster_ops.h), no
 * socket, no ring traffic and no loop.  Descriptors go straight to nx_match_submit; the
 * completions and error texts are read back from each rank's real segment.
 *
 *   - an all_reduce of two ranks over their arenas: exact i32 sums against a reference
 *     computed here;
 *   - a mismatch: both ranks fail with NEXAR_ERR_MISMATCH and the text names the op, the
 *     communicator, the job, both ranks and both signatures; a later op fails the same;
 *   - a timeout: the rank that came fails with NEXAR_ERR_TIMEOUT naming the rank that
 *     never arrived, and not before the deadline;
 *   - a communicator spanning nodes: every arrival goes to the cluster table (coll_run),
 *     which runs the op across nodes; nothing completes here on its own; the timeout
 *     waits a second more and its text is where the table says the op stands; the
 *     failure reaches the table (comm_failed, coll_free, then comm_gone).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect.h"
#include "client.h"
#include "cluster_ops.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "matcher.h"
#include "nexar.h"
#include "op.h"

/* ---- the stub cluster table: it records what the node layer asked ---- */

static struct {
    int coll_run, coll_free, comm_failed, comm_gone;
    uint64_t run_seq;
    uint32_t run_arrived;
} calls;

static int xr_record; /* the stub's "parts" of an op: only tested for NULL by the node */

static void stub_coll_run(struct nx_op *op)
{
    op->xr = (struct nx_xrun *)&xr_record;
    calls.coll_run++;
    calls.run_seq = op->seq;
    calls.run_arrived = op->arrived;
}

static void stub_coll_free(struct nx_op *op)
{
    EXPECT(op->xr == (struct nx_xrun *)&xr_record);
    op->xr = NULL;
    calls.coll_free++;
}

static void stub_coll_describe(const struct nx_op *op, char *buf, size_t len)
{
    snprintf(buf, len, "stub: seq %" PRIu64 " waits for node 1", op->seq);
}

static void stub_comm_failed(struct nx_comm *c)
{
    (void)c;
    calls.comm_failed++;
}

static void stub_comm_gone(struct nx_comm *c)
{
    (void)c;
    calls.comm_gone++;
}

static struct nx_cluster_ops stub;

/* ---- ranks: real clients with real segments ---- */

static struct nx_job job = {.name = "unit", .state = NX_JOB_RUNNING};

static struct nx_client *new_rank(void)
{
    char err[256];
    struct nx_client *cl = nx_client_new(NULL, getpid(), getuid(), err, sizeof(err));
    if (!cl) {
        fprintf(stderr, "nx_client_new: %s\n", err);
        exit(1);
    }
    return cl;
}

/* The completion of cl with user_data ud, or NULL; text gets its error text. */
static const struct nx_cqe *completion(struct nx_client *cl, uint64_t ud, char *text,
                                       size_t len)
{
    text[0] = '\0';
    for (uint32_t i = cl->seg.cq_ctl->head; i != cl->cq_tail; i++) {
        const struct nx_cqe *c = &cl->seg.cq[i & (cl->seg.hdr.cq_entries - 1)];
        if (c->user_data != ud)
            continue;
        if (c->err_seq != NX_NO_ERR_TEXT) {
            const struct nx_err_entry *e = &cl->seg.err[c->err_seq % cl->seg.hdr.err_entries];
            if (e->seq == c->err_seq)
                snprintf(text, len, "%s", e->text);
        }
        return c;
    }
    return NULL;
}

/* A direct descriptor whose input and output are at byte off of the arena. */
static struct nx_sqe desc(const struct nx_comm *c, uint8_t kind, uint64_t seq,
                          uint64_t count, uint64_t ud, uint64_t off)
{
    return (struct nx_sqe){.user_data = ud, .comm_id = c->id, .kind = kind,
                           .dtype = NEXAR_I32, .redop = kind == NX_K_BARRIER ? 0 : NEXAR_SUM,
                           .flags = NX_SQE_DIRECT, .seq = seq, .count = count,
                           .in_off = off, .out_off = off};
}

static struct nx_comm *new_comm(struct nx_client **cls, uint32_t timeout_ms)
{
    uint32_t wr[2] = {0, 1};
    return nx_comm_new(&job, 2, cls, wr, timeout_ms);
}

static void free_comm(struct nx_comm *c)
{
    uint32_t size = c->size;
    for (uint32_t r = 0; r < size; r++)
        nx_comm_leave(c, r, false, "test", NULL);
}

/* ---- the cases ---- */

static void all_reduce_exact(struct nx_client **cls)
{
    enum { N = 1000 };
    struct nx_comm *c = new_comm(cls, 60000);
    uint64_t off = cls[0]->seg.hdr.heap_off;
    for (int r = 0; r < 2; r++) {
        int32_t *v = (int32_t *)(cls[r]->seg.arena + off);
        for (int i = 0; i < N; i++)
            v[i] = (r + 1) * i - 7 * r;
    }
    struct nx_sqe e0 = desc(c, NX_K_ALL_REDUCE, 0, N, 100, off);
    struct nx_sqe e1 = desc(c, NX_K_ALL_REDUCE, 0, N, 101, off);
    char text[512];
    nx_match_submit(cls[0], &e0);
    EXPECT(completion(cls[0], 100, text, sizeof(text)) == NULL); /* waits for rank 1 */
    nx_match_submit(cls[1], &e1);
    for (int r = 0; r < 2; r++) {
        const struct nx_cqe *q = completion(cls[r], 100 + (uint64_t)r, text, sizeof(text));
        EXPECT(q && q->status == NEXAR_OK);
        const int32_t *v = (const int32_t *)(cls[r]->seg.arena + off);
        int wrong = 0;
        for (int i = 0; i < N; i++)
            wrong += v[i] != (i - 0) + (2 * i - 7); /* rank 0's + rank 1's input */
        EXPECT(wrong == 0);
    }
    free_comm(c);
}

static void mismatch_text(struct nx_client **cls)
{
    struct nx_comm *c = new_comm(cls, 60000);
    uint64_t off = cls[0]->seg.hdr.heap_off;
    struct nx_sqe e0 = desc(c, NX_K_ALL_REDUCE, 0, 4, 200, off);
    struct nx_sqe e1 = desc(c, NX_K_ALL_REDUCE, 0, 8, 201, off);
    nx_match_submit(cls[0], &e0);
    nx_match_submit(cls[1], &e1);
    char want[512], text[512];
    snprintf(want, sizeof(want),
             "all_reduce seq 0 on comm %u (job \"unit\"): rank 0 called all_reduce(count=4, "
             "i32, sum) but rank 1 called all_reduce(count=8, i32, sum)", c->id);
    for (int r = 0; r < 2; r++) {
        const struct nx_cqe *q = completion(cls[r], 200 + (uint64_t)r, text, sizeof(text));
        EXPECT(q && q->status == NEXAR_ERR_MISMATCH);
        if (strcmp(text, want)) {
            fprintf(stderr, "rank %d's text:\n  %s\nexpected:\n  %s\n", r, text, want);
            failures++;
        }
    }
    /* The communicator stays failed: the next op ends at once with the same text. */
    struct nx_sqe next = desc(c, NX_K_BARRIER, 1, 0, 202, off);
    nx_match_submit(cls[0], &next);
    const struct nx_cqe *q = completion(cls[0], 202, text, sizeof(text));
    EXPECT(q && q->status == NEXAR_ERR_MISMATCH && !strcmp(text, want));
    free_comm(c);
}

static void timeout_text(struct nx_client **cls)
{
    struct nx_comm *c = new_comm(cls, 1000);
    uint64_t off = cls[0]->seg.hdr.heap_off;
    struct nx_sqe e0 = desc(c, NX_K_BARRIER, 0, 0, 300, off);
    nx_match_submit(cls[0], &e0);
    char text[512], want[512];
    nx_match_tick(nx_now() + 0.5);
    EXPECT(completion(cls[0], 300, text, sizeof(text)) == NULL); /* before the deadline */
    nx_match_tick(nx_now() + 1.5);
    snprintf(want, sizeof(want),
             "barrier seq 0 on comm %u (job \"unit\") timed out after 1 s: rank(s) 1 never "
             "arrived (1 of 2 did)", c->id);
    const struct nx_cqe *q = completion(cls[0], 300, text, sizeof(text));
    EXPECT(q && q->status == NEXAR_ERR_TIMEOUT);
    if (strcmp(text, want)) {
        fprintf(stderr, "timeout text:\n  %s\nexpected:\n  %s\n", text, want);
        failures++;
    }
    free_comm(c);
}

static void spanning(struct nx_client **cls)
{
    struct nx_comm *c = new_comm(cls, 1000);
    /* Ranks 1 and 3 of 4 here; the other two are on a node the stub stands for. */
    uint32_t span[2] = {1, 3};
    nx_comm_span(c, 2, 4, span);
    static int record; /* any non-NULL record: the node layer only tests it */
    c->x = (struct nx_xcomm *)&record;
    memset(&calls, 0, sizeof(calls));
    uint64_t off = cls[0]->seg.hdr.heap_off;
    struct nx_sqe e0 = desc(c, NX_K_ALL_REDUCE, 0, 16, 400, off);
    struct nx_sqe e1 = desc(c, NX_K_ALL_REDUCE, 0, 16, 401, off);
    char text[512], want[512];
    nx_match_submit(cls[0], &e0);
    EXPECT(calls.coll_run == 1 && calls.run_arrived == 1); /* each arrival is news */
    nx_match_submit(cls[1], &e1);
    EXPECT(calls.coll_run == 2 && calls.run_seq == 0 && calls.run_arrived == 2);
    EXPECT(completion(cls[0], 400, text, sizeof(text)) == NULL); /* the cluster's now */

    /* All ranks here are in: the deadline waits one second more for the node that is
     * missing one to say so, then the text is where the op stands across nodes. */
    nx_match_tick(nx_now() + 1.5);
    EXPECT(completion(cls[0], 400, text, sizeof(text)) == NULL);
    nx_match_tick(nx_now() + 2.5);
    snprintf(want, sizeof(want),
             "all_reduce seq 0 on comm %u (job \"unit\") made no progress for 1 s: its "
             "ranks here are all in, stub: seq 0 waits for node 1", c->id);
    for (int r = 0; r < 2; r++) {
        const struct nx_cqe *q = completion(cls[r], 400 + (uint64_t)r, text, sizeof(text));
        EXPECT(q && q->status == NEXAR_ERR_TIMEOUT);
        if (strcmp(text, want)) {
            fprintf(stderr, "rank %d's text:\n  %s\nexpected:\n  %s\n", r, text, want);
            failures++;
        }
    }
    EXPECT(calls.comm_failed == 1);
    c->x = NULL; /* the stub made no record to free */
    free_comm(c);
    /* The failed op is freed with its communicator, and the table hears of both. */
    EXPECT(calls.coll_free == 1 && calls.comm_gone == 1);
}

int main(void)
{
    nx_config_defaults(&nxd.cfg);
    nxd.cfg.slots = 2;
    nxd.cfg.slot_bytes = 65536;
    nxd.cfg.heap_bytes = 1 << 20;
    nxd.start_time = nx_now();

    /* Nothing installed: the node layer runs with the table of a node without a
     * network.  The spanning case installs the stub. */
    EXPECT(nx_cluster_ops == &nx_cluster_ops_local);
    stub = nx_cluster_ops_local;
    stub.coll_run = stub_coll_run;
    stub.coll_free = stub_coll_free;
    stub.coll_describe = stub_coll_describe;
    stub.comm_failed = stub_comm_failed;
    stub.comm_gone = stub_comm_gone;

    struct nx_client *cls[2] = {new_rank(), new_rank()};
    all_reduce_exact(cls);
    mismatch_text(cls);
    timeout_text(cls);
    nx_cluster_ops_set(&stub);
    spanning(cls);
    nx_cluster_ops_set(NULL);
    EXPECT(nx_cluster_ops == &nx_cluster_ops_local);

    for (int r = 0; r < 2; r++) {
        EXPECT(!cls[r]->dead); /* no case may look like a protocol violation */
        nx_client_drop(cls[r], "the test ends");
    }
    nx_clients_flush();
    EXPECT(nx_client_count == 0);
    nx_config_free(&nxd.cfg);
    if (failures) {
        fprintf(stderr, "test_matcher: %d failures\n", failures);
        return 1;
    }
    printf("test_matcher: all_reduce exact, mismatch and timeout texts, spanning ops to the "
           "cluster table: ok\n");
    return 0;
}
