/*
 * test_algo_bad.c - the xop's edges: descriptors it must refuse, messages it must not
 * trust (forged offsets, lengths, steps, sources, duplicates, flow-control breaches),
 * signatures that differ across nodes, failed sends, abort, destroy from the done
 * callback, the flow-control bounds, introspection and the algorithm choice.
 *
 *   test_algo_bad <scenario>    (meson registers each; "all" runs them in turn)
 *   NX_SIM_VERBOSE=1            flow: print each node's pieces, early bytes and credits
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "log.h"
#include "nexar.h"
#include "shm_abi.h"
#include "test_algo.h"


/* ---- one xop fed by hand --------------------------------------------------------------- */

struct solo {
    struct nx_xop *x;
    int dones, sends;
    int settles, settles_at_done; /* net.settle calls: all, and before done */
    uint32_t tokens[64];          /* of the messages sent with one, in order */
    int ntok, ncopied;            /* ncopied: tokens[0..ncopied) told copied */
    uint32_t status;
    char text[512];
    int send_rv;     /* what send returns */
    bool destroy_in_done;
    struct nx_xmsg last;
};

static int solo_send(void *arg, struct nx_xop *x, const struct nx_xmsg *m)
{
    struct solo *s = arg;
    s->sends++;
    s->last = *m;
    if (m->token && s->ntok < 64)
        s->tokens[s->ntok++] = m->token;
    return s->send_rv;
}

static void solo_done(void *arg, struct nx_xop *x, uint32_t status, const char *text)
{
    struct solo *s = arg;
    s->dones++;
    s->status = status;
    snprintf(s->text, sizeof(s->text), "%s", text ? text : "");
    s->settles_at_done = s->settles;
    if (s->destroy_in_done) {
        nx_xop_destroy(x);
        s->x = NULL;
    }
}

static uint32_t two_nodes[2] = {0, 1};
static float buf_in[400], buf_out[400];

static void solo_settle(void *arg)
{
    struct solo *s = arg;
    s->settles++;
}

/* Node 0 of 2, all_reduce ring, f32 sum, count 100, 64-byte chunks: pieces of 32
 * elements (one message = one 16-element segment, 64 bytes), 4 pieces, 2 steps.  lend:
 * the messages go as iovs of the buffers, and the net lends them (send returns 1). */
static void solo_make(struct solo *s, uint32_t window, bool lend)
{
    memset(s, 0, sizeof(*s));
    struct nx_xop_desc d = {.kind = NX_K_ALL_REDUCE, .dtype = NEXAR_F32, .redop = NEXAR_SUM,
                            .algo = NX_ALGO_RING, .count = 100, .nnodes = 2, .me = 0,
                            .nranks = 2, .rank_node = two_nodes, .in = buf_in, .out = buf_out,
                            .ad = &nx_adapter_cpu, .chunk_bytes = 64, .window = window,
                            .what = "all_reduce seq 9", .iov_send = lend};
    struct nx_xnet net = {.arg = s, .send = solo_send, .done = solo_done,
                          .lend_min = lend ? 1 : 0, .settle = solo_settle};
    s->send_rv = lend;
    char err[256];
    int rv = nx_xop_create(&d, &net, &s->x, err, sizeof(err));
    EXPECT(rv == 0);
    if (rv < 0)
        fprintf(stderr, "create: %s\n", err);
}

static void solo_new(struct solo *s, uint32_t window)
{
    solo_make(s, window, false);
}

static uint32_t sig_ar100(void)
{
    return nx_xop_sig(NX_K_ALL_REDUCE, NEXAR_F32, 100, 0, NEXAR_SUM);
}

/* Feeds one message and expects the xop to fail with status, naming node 1. */
static void expect_fail(struct solo *s, uint32_t src, uint32_t step, uint32_t sig,
                        uint64_t off, size_t len, uint32_t status, const char *needle)
{
    static uint8_t payload[4096];
    nx_xop_on_data(s->x, src, step, sig, off, payload, len);
    EXPECT(s->dones == 1);
    EXPECT(s->status == status);
    if (needle && !strstr(s->text, needle)) {
        fprintf(stderr, "text \"%s\" lacks \"%s\"\n", s->text, needle);
        failures++;
    }
    EXPECT(strstr(s->text, "all_reduce seq 9: ") == s->text);
    /* after the end everything is ignored, and done is not called again */
    nx_xop_on_data(s->x, 1, 0, sig_ar100(), 0, payload, 64);
    nx_xop_on_sent(s->x, 1);
    nx_xop_abort(s->x, NEXAR_ERR_ABORTED, "late");
    EXPECT(s->dones == 1);
    nx_xop_destroy(s->x);
}

static void sc_forged(void)
{
    struct solo s;
    uint32_t sig = sig_ar100();
    struct { uint32_t src, step, sig; uint64_t off; size_t len; uint32_t st; const char *n; }
    cases[] = {
        {1, 0, sig, 4, 64, NEXAR_ERR_INTERNAL, "node 1 sent step 0 at offset 4"},
        {1, 0, sig, 128 * 4, 64, NEXAR_ERR_INTERNAL, "starts no piece"},
        {1, 0, sig, 0, 63, NEXAR_ERR_INTERNAL, "node 1 sent 63 bytes"},
        {1, 0, sig, 0, 0, NEXAR_ERR_INTERNAL, "node 1 sent 0 bytes"},
        {1, 7, sig, 0, 64, NEXAR_ERR_INTERNAL, "node 1 sent step 7 of 2"},
        {1, 0, sig, 128 * 2, 64, NEXAR_ERR_INTERNAL, "ignored the flow control"},
        {0, 0, sig, 0, 64, NEXAR_ERR_INTERNAL, "from node 0"},
        {2, 0, sig, 0, 64, NEXAR_ERR_INTERNAL, "from node 2"},
        {5, 0, sig, 0, 64, NEXAR_ERR_INTERNAL, "from node 5"},
        {1, 0, sig ^ 1, 0, 64, NEXAR_ERR_MISMATCH, "node 1 called another collective"},
        {1, NX_XSTEP_CREDIT, sig, 4 * 128, 0, NEXAR_ERR_INTERNAL, "node 1 sent a bad credit"},
        {1, NX_XSTEP_CREDIT, sig, 129, 0, NEXAR_ERR_INTERNAL, "node 1 sent a bad credit"},
        {1, NX_XSTEP_CREDIT, sig, 128, 8, NEXAR_ERR_INTERNAL, "node 1 sent a bad credit"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        solo_new(&s, 2);
        nx_xop_start(s.x);
        expect_fail(&s, cases[i].src, cases[i].step, cases[i].sig, cases[i].off, cases[i].len,
                    cases[i].st, cases[i].n);
    }
    /* duplicates: the same step twice, early (kept) and live (consumed) */
    static uint8_t p64[64];
    solo_new(&s, 2);
    nx_xop_on_data(s.x, 1, 1, sig, 0, p64, 64); /* early: step 1 before start */
    EXPECT(s.dones == 0);
    expect_fail(&s, 1, 1, sig, 0, 64, NEXAR_ERR_INTERNAL, "twice");
    solo_new(&s, 2);
    nx_xop_start(s.x);
    nx_xop_on_data(s.x, 1, 0, sig, 0, p64, 64); /* live: consumed at once */
    EXPECT(s.dones == 0);
    expect_fail(&s, 1, 0, sig, 0, 64, NEXAR_ERR_INTERNAL, "again");
    /* a valid credit is quietly taken, an old one too */
    solo_new(&s, 1);
    nx_xop_start(s.x);
    nx_xop_on_data(s.x, 1, NX_XSTEP_CREDIT, sig, 2 * 128, NULL, 0);
    nx_xop_on_data(s.x, 1, NX_XSTEP_CREDIT, sig, 1 * 128, NULL, 0);
    EXPECT(s.dones == 0);
    nx_xop_destroy(s.x);
}

/* Node 0's input 0, 1, ... 99; what node 1 sends, 1000 in every element. */
static void solo_inputs(float p[16])
{
    for (int i = 0; i < 100; i++)
        buf_in[i] = (float)i;
    for (int i = 0; i < 16; i++)
        p[i] = 1000.0f;
}

/* A whole run of the solo xop against a well-behaved node 1 played by hand. */
static void sc_solo_run(void)
{
    struct solo s;
    uint32_t sig = sig_ar100();
    static float p[16];
    char desc[160];
    solo_inputs(p);
    solo_new(&s, 1);
    nx_xop_describe(s.x, desc, sizeof(desc));
    EXPECT(strcmp(desc, "not started") == 0);
    nx_xop_start(s.x);
    nx_xop_describe(s.x, desc, sizeof(desc));
    EXPECT(strstr(desc, "piece 1/4 step 1/2: waiting for node 1") != NULL);
    EXPECT(s.sends == 1 && s.last.dst == 1 && s.last.step == 0 && s.last.len == 64);
    EXPECT(strcmp(nx_xop_algo_name(s.x), "ring") == 0);
    /* pieces of 32: segment 1 of each piece comes at step 0, segment 0 at step 1 (node 1
     * reduced it); the last piece has 4 elements: segments of 2 */
    for (uint64_t pc = 0; pc < 4 && s.dones == 0; pc++) {
        size_t seg = pc < 3 ? 64 : 8;
        nx_xop_on_data(s.x, 1, 0, sig, pc * 128, p, seg);
        nx_xop_on_data(s.x, 1, 1, sig, pc * 128, p, seg);
        if (pc < 2) /* the window is 1: node 0 waits for node 1's credit */
            nx_xop_on_data(s.x, 1, NX_XSTEP_CREDIT, sig, (pc + 1) * 128, NULL, 0);
        if (pc == 2)
            nx_xop_on_data(s.x, 1, NX_XSTEP_CREDIT, sig, 3 * 128, NULL, 0);
    }
    EXPECT(s.dones == 1 && s.status == 0);
    nx_xop_describe(s.x, desc, sizeof(desc));
    EXPECT(strcmp(desc, "done") == 0);
    /* element 0 (segment 0 of piece 0): node 1 sent the reduced value 1000 */
    EXPECT(buf_out[0] == 1000.0f);
    /* element 16 (segment 1): 16 + 1000 */
    EXPECT(buf_out[16] == 1016.0f);
    struct nx_xop_stats st;
    nx_xop_stats(s.x, &st);
    EXPECT(st.pieces == 4 && st.piece_elems == 32 && st.steps == 2);
    EXPECT(st.credits_sent >= 1);
    nx_xop_destroy(s.x);
}

/* The gate (nx_xop_desc.gate): a broadcast from node 0 sends node 1 nothing before node 1
 * said it started, and node 1 says so at its start, before anything arrives. */
static void gate_make(struct solo *s, uint32_t me)
{
    memset(s, 0, sizeof(*s));
    struct nx_xop_desc d = {.kind = NX_K_BROADCAST, .dtype = NEXAR_F32, .count = 100,
                            .root = 0, .nnodes = 2, .me = me, .nranks = 2,
                            .rank_node = two_nodes, .in = buf_in, .out = buf_out,
                            .ad = &nx_adapter_cpu, .chunk_bytes = 64, .window = 4,
                            .what = "broadcast seq 3", .gate = true};
    struct nx_xnet net = {.arg = s, .send = solo_send, .done = solo_done};
    char err[256];
    int rv = nx_xop_create(&d, &net, &s->x, err, sizeof(err));
    EXPECT(rv == 0);
    if (rv < 0)
        fprintf(stderr, "create: %s\n", err);
}

static void sc_gate(void)
{
    struct solo root, leaf;
    uint32_t sig = nx_xop_sig(NX_K_BROADCAST, NEXAR_F32, 100, 0, 0);
    char desc[160];
    for (int i = 0; i < 100; i++)
        buf_in[i] = buf_out[i] = (float)(3 * i + 1);
    gate_make(&root, 0);
    nx_xop_start(root.x);
    EXPECT(root.sends == 0 && root.dones == 0);
    nx_xop_describe(root.x, desc, sizeof(desc));
    EXPECT(strstr(desc, "piece 1/7 step 1/1: sending to node 1 (waiting for it to start the "
                        "part)") != NULL);
    /* Node 1's start: a credit at 0, the only thing it sends. */
    gate_make(&leaf, 1);
    nx_xop_start(leaf.x);
    EXPECT(leaf.sends == 1 && leaf.last.dst == 0 && leaf.last.step == NX_XSTEP_CREDIT &&
           leaf.last.offset == 0 && leaf.last.len == 0);
    nx_xop_on_data(root.x, 1, NX_XSTEP_CREDIT, sig, 0, NULL, 0);
    /* The window's 4 pieces go at once, the rest as node 1's credits come. */
    EXPECT(root.sends == 4 && root.last.dst == 1 && root.last.step == 0);
    static float got[100];
    for (int i = 0; i < 100; i++)
        buf_out[i] = -1.0f;
    for (uint64_t pc = 0; pc < 7; pc++) {
        size_t n = pc < 6 ? 16 : 4;
        nx_xop_on_data(leaf.x, 0, 0, sig, pc * 64, buf_in + pc * 16, n * 4);
    }
    memcpy(got, buf_out, sizeof(got));
    EXPECT(leaf.dones == 1 && leaf.status == 0);
    for (int i = 0; i < 100; i++)
        EXPECT(got[i] == (float)(3 * i + 1));
    struct nx_xop_stats st;
    nx_xop_stats(leaf.x, &st);
    EXPECT(st.early_msgs == 0);
    /* A second credit at 0 changes nothing; node 1's later credit lets the rest go. */
    nx_xop_on_data(root.x, 1, NX_XSTEP_CREDIT, sig, 0, NULL, 0);
    EXPECT(root.sends == 4);
    nx_xop_on_data(root.x, 1, NX_XSTEP_CREDIT, sig, 3 * 64, NULL, 0);
    EXPECT(root.sends == 7 && root.dones == 1 && root.status == 0);
    nx_xop_destroy(leaf.x);
    nx_xop_destroy(root.x);
}

/* A net that lends: the xop writes nothing of a step while one of its messages is lent
 * (what comes meanwhile waits), says so, and settles before it ends or goes. */
static void sc_lent(void)
{
    struct solo s;
    uint32_t sig = sig_ar100();
    static float p[16];
    char desc[160];
    solo_inputs(p);
    solo_make(&s, 4, true);
    nx_xop_start(s.x);
    /* Step 0 of each of the 4 pieces (window 4), all lent. */
    EXPECT(s.sends == 4 && s.ntok == 4 && s.last.lend && s.last.iov);
    nx_xop_describe(s.x, desc, sizeof(desc));
    EXPECT(strstr(desc, "piece 1/4 step 1/2: waiting for the transport to copy 1 message it "
                        "sent") != NULL);
    /* Node 1's step 0 of piece 0 comes while its message is lent: kept, not reduced in. */
    float before = buf_out[16];
    nx_xop_on_data(s.x, 1, 0, sig, 0, p, 64);
    EXPECT(buf_out[16] == before && s.sends == 4 && s.dones == 0);
    /* News of another token's copy changes nothing. */
    nx_xop_on_copied(s.x, s.tokens[0] + 100);
    EXPECT(buf_out[16] == before && s.sends == 4);
    /* Copied: the kept block goes in (16 + 1000), and piece 0's step 1 is sent, lent. */
    nx_xop_on_copied(s.x, s.tokens[0]);
    s.ncopied = 1;
    EXPECT(buf_out[16] == 1016.0f);
    EXPECT(s.sends == 5 && s.last.step == 1 && s.last.lend);
    /* The rest: every piece's blocks, each message copied after they came. */
    for (uint64_t pc = 0; pc < 4 && s.dones == 0; pc++) {
        size_t seg = pc < 3 ? 64 : 8;
        if (pc > 0)
            nx_xop_on_data(s.x, 1, 0, sig, pc * 128, p, seg);
        while (s.ncopied < s.ntok)
            nx_xop_on_copied(s.x, s.tokens[s.ncopied++]);
        nx_xop_on_data(s.x, 1, 1, sig, pc * 128, p, seg);
        while (s.ncopied < s.ntok)
            nx_xop_on_copied(s.x, s.tokens[s.ncopied++]);
    }
    EXPECT(s.dones == 1 && s.status == 0);
    if (s.dones != 1 || s.status != 0)
        fprintf(stderr, "lent run: %d dones, status %u: %s\n", s.dones, s.status, s.text);
    EXPECT(buf_out[0] == 1000.0f && buf_out[16] == 1016.0f && buf_out[99] == 1099.0f);
    struct nx_xop_stats st;
    nx_xop_stats(s.x, &st);
    EXPECT(st.msgs_lent == st.msgs_sent && st.msgs_sent == 8);
    EXPECT(s.settles == 0); /* everything was copied before the end */
    nx_xop_destroy(s.x);
    EXPECT(s.settles == 0);

    /* Aborted with a message lent: the net settles before done says so; late news of the
     * copy is ignored. */
    solo_make(&s, 4, true);
    nx_xop_start(s.x);
    nx_xop_abort(s.x, NEXAR_ERR_PEER_LOST, "node 1 lost");
    EXPECT(s.dones == 1 && s.settles == 1 && s.settles_at_done == 1);
    nx_xop_on_copied(s.x, s.tokens[0]);
    EXPECT(s.dones == 1);
    nx_xop_destroy(s.x);
    EXPECT(s.settles == 1);

    /* Destroyed while running with a message lent: settled before destroy returns. */
    solo_make(&s, 4, true);
    nx_xop_start(s.x);
    nx_xop_destroy(s.x);
    EXPECT(s.settles == 1 && s.dones == 0);
}

/* Streamed receives: a message goes in piece by piece only into the step its piece waits
 * in; cut anywhere (inside elements, at odd addresses) it gives what it gives whole; a
 * second copy of one that began, broken off or not, fails the op naming the node. */
static void sc_stream(void)
{
    struct solo s;
    struct nx_xstream st;
    uint32_t sig = sig_ar100();
    static float p[16];
    static uint8_t odd[80];
    solo_inputs(p);
    memset(buf_out, 0, sizeof(buf_out));
    solo_new(&s, 4);
    /* Not started: no. */
    EXPECT(!nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st));
    nx_xop_start(s.x);
    /* Wrong node, signature, step, offset, length: no (the whole path judges them). */
    EXPECT(!nx_xop_stream_begin(s.x, 0, 0, sig, 0, 64, &st));
    EXPECT(!nx_xop_stream_begin(s.x, 1, 0, sig + 1, 0, 64, &st));
    EXPECT(!nx_xop_stream_begin(s.x, 1, 1, sig, 0, 64, &st));
    EXPECT(!nx_xop_stream_begin(s.x, 1, 0, sig, 4, 64, &st));
    EXPECT(!nx_xop_stream_begin(s.x, 1, 0, sig, 0, 60, &st));
    EXPECT(s.dones == 0);
    /* Piece 0, step 0, in pieces of 3, 1, 5, 55 bytes from an odd address: 16 + 1000. */
    EXPECT(nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st));
    EXPECT(!nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st)); /* once */
    memcpy(odd + 1, p, 64);
    size_t cuts[] = {3, 1, 5, 55};
    const uint8_t *at = odd + 1;
    for (int i = 0; i < 4; i++) {
        /* element 16 (the first) goes in once its 4th byte came */
        EXPECT((buf_out[16] == 1016.0f) == (i >= 2) && buf_out[31] != 1031.0f && s.sends == 4);
        nx_xop_stream_data(s.x, &st, at, cuts[i]);
        at += cuts[i];
    }
    EXPECT(buf_out[16] == 1016.0f && buf_out[31] == 1031.0f);
    EXPECT(s.sends == 5 && s.last.step == 1); /* the step ended: step 1 went out */
    /* The same message again, whole: the step is past it. */
    struct nx_xop_stats xs;
    nx_xop_stats(s.x, &xs);
    EXPECT(xs.msgs_streamed == 1 && xs.msgs_recv == 1);
    /* Piece 1, step 0, half streamed, then the rest of it arrives whole: fails. */
    EXPECT(nx_xop_stream_begin(s.x, 1, 0, sig, 128, 64, &st));
    nx_xop_stream_data(s.x, &st, p, 30);
    expect_fail(&s, 1, 0, sig, 128, 64, NEXAR_ERR_INTERNAL,
                "node 1 sent step 0 of piece 1 again while it was arriving");

    /* Broken off midway: the step waits; the message coming again fails the op. */
    memset(buf_out, 0, sizeof(buf_out));
    solo_new(&s, 4);
    nx_xop_start(s.x);
    EXPECT(nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st));
    nx_xop_stream_data(s.x, &st, p, 10);
    char desc[160];
    nx_xop_describe(s.x, desc, sizeof(desc));
    EXPECT(strstr(desc, "step 1/2: waiting for node 1 (its message is arriving)") != NULL);
    nx_xop_stream_broken(s.x, &st);
    nx_xop_describe(s.x, desc, sizeof(desc));
    EXPECT(strstr(desc, "step 1/2: waiting for node 1 (its message broke off midway)") != NULL);
    nx_xop_stream_data(s.x, &st, (const uint8_t *)p + 10, 54); /* goes nowhere */
    EXPECT(buf_out[17] == 1017.0f && buf_out[18] != 1018.0f && s.sends == 4 && s.dones == 0);
    EXPECT(!nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st));
    expect_fail(&s, 1, 0, sig, 0, 64, NEXAR_ERR_INTERNAL,
                "node 1 sent step 0 of piece 0 again after its first copy broke off midway");

    /* More bytes than the message has: fails, naming the node. */
    solo_new(&s, 4);
    nx_xop_start(s.x);
    EXPECT(nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st));
    nx_xop_stream_data(s.x, &st, p, 40);
    nx_xop_stream_data(s.x, &st, p, 40);
    EXPECT(s.dones == 1 && s.status == NEXAR_ERR_INTERNAL &&
           strstr(s.text, "node 1's message for step 0 of piece 0 ran past its 64 bytes"));
    nx_xop_destroy(s.x);

    /* A step with a message lent takes nothing streamed; once copied it does. */
    solo_make(&s, 4, true);
    nx_xop_start(s.x);
    EXPECT(!nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st));
    nx_xop_on_copied(s.x, s.tokens[0]);
    EXPECT(nx_xop_stream_begin(s.x, 1, 0, sig, 0, 64, &st));
    nx_xop_stream_data(s.x, &st, p, 64);
    EXPECT(buf_out[16] == 1016.0f && s.sends == 5);
    /* Ended with a stream open: what comes after goes nowhere. */
    nx_xop_on_copied(s.x, s.tokens[1]);
    EXPECT(nx_xop_stream_begin(s.x, 1, 0, sig, 128, 64, &st));
    buf_out[48] = 0;
    nx_xop_abort(s.x, NEXAR_ERR_PEER_LOST, "node 1 lost");
    nx_xop_stream_data(s.x, &st, p, 64);
    nx_xop_stream_broken(s.x, &st);
    EXPECT(s.dones == 1 && s.status == NEXAR_ERR_PEER_LOST && buf_out[48] == 0);
    nx_xop_destroy(s.x);

    /* A half-type reduction never streams (its NaNs depend on how the kernel cuts). */
    memset(&s, 0, sizeof(s));
    struct nx_xop_desc d = {.kind = NX_K_ALL_REDUCE, .dtype = NEXAR_BF16, .redop = NEXAR_SUM,
                            .algo = NX_ALGO_RING, .count = 100, .nnodes = 2, .me = 0,
                            .nranks = 2, .rank_node = two_nodes, .in = buf_in, .out = buf_out,
                            .ad = &nx_adapter_cpu, .chunk_bytes = 64, .window = 4,
                            .what = "all_reduce seq 9"};
    struct nx_xnet net = {.arg = &s, .send = solo_send, .done = solo_done};
    char err[256];
    EXPECT(nx_xop_create(&d, &net, &s.x, err, sizeof(err)) == 0);
    nx_xop_start(s.x);
    uint32_t bsig = nx_xop_sig(NX_K_ALL_REDUCE, NEXAR_BF16, 100, 0, NEXAR_SUM);
    EXPECT(s.sends > 0 && !nx_xop_stream_begin(s.x, 1, 0, bsig, 0, s.last.len, &st));
    nx_xop_destroy(s.x);
}

static void sc_lifecycle(void)
{
    struct solo s;
    /* abort, destroy from inside done */
    solo_new(&s, 2);
    nx_xop_start(s.x);
    s.destroy_in_done = true;
    nx_xop_abort(s.x, NEXAR_ERR_PEER_LOST, "node 1 lost: idle timeout");
    EXPECT(s.dones == 1 && s.status == NEXAR_ERR_PEER_LOST && s.x == NULL);
    EXPECT(strstr(s.text, "node 1 lost") != NULL);
    /* destroy from done when a message made it fail */
    solo_new(&s, 2);
    nx_xop_start(s.x);
    s.destroy_in_done = true;
    nx_xop_on_data(s.x, 1, 9, sig_ar100(), 0, NULL, 0);
    EXPECT(s.dones == 1 && s.x == NULL);
    /* a failed send */
    memset(&s, 0, sizeof(s));
    solo_new(&s, 2);
    s.send_rv = -ENOTCONN;
    nx_xop_start(s.x);
    EXPECT(s.dones == 1 && s.status == NEXAR_ERR_PEER_LOST);
    EXPECT(strstr(s.text, "node 0 could not send step 0 to node 1") != NULL);
    nx_xop_destroy(s.x);
    solo_new(&s, 2);
    s.send_rv = -ENOMEM;
    nx_xop_start(s.x);
    EXPECT(s.dones == 1 && s.status == NEXAR_ERR_INTERNAL);
    nx_xop_destroy(s.x);
    nx_xop_destroy(NULL);
}

static void sc_create(void)
{
    uint32_t rn[4] = {0, 1, 1, 0}, bad_rn[3] = {0, 0, 0}, far_rn[2] = {0, 5};
    struct nx_xop_desc ok = {.kind = NX_K_ALL_REDUCE, .dtype = NEXAR_F32, .count = 4,
                             .nnodes = 2, .me = 1, .nranks = 4, .rank_node = rn,
                             .in = buf_in, .out = buf_out, .ad = &nx_adapter_cpu};
    struct solo s = {0};
    struct nx_xnet net = {.arg = &s, .send = solo_send, .done = solo_done};
    struct nx_xop *x;
    char err[256];
    EXPECT(nx_xop_create(&ok, &net, &x, err, sizeof(err)) == 0);
    nx_xop_destroy(x);
    /* a glue-supplied signature (an op cut into several xops) is what goes out */
    struct nx_xop_desc with_sig = ok;
    with_sig.sig = 0x5eed;
    with_sig.algo = NX_ALGO_RD;
    EXPECT(nx_xop_create(&with_sig, &net, &x, err, sizeof(err)) == 0);
    nx_xop_start(x);
    EXPECT(s.sends == 1 && s.last.sig == 0x5eed);
    nx_xop_destroy(x);
    s.sends = 0;
    struct { struct nx_xop_desc d; const char *needle; } bad[16];
    int n = 0;
    for (int i = 0; i < 13; i++)
        bad[i].d = ok;
    bad[n].d.nnodes = 0, bad[n++].needle = "node 1 of 0";
    bad[n].d.me = 2, bad[n++].needle = "node 2 of 2";
    bad[n].d.rank_node = bad_rn, bad[n].d.nranks = 3, bad[n++].needle = "node 1 has no rank";
    bad[n].d.rank_node = far_rn, bad[n].d.nranks = 2, bad[n++].needle = "rank 1 on node 5";
    bad[n].d.dtype = 10, bad[n++].needle = "unknown dtype";
    bad[n].d.redop = 4, bad[n++].needle = "unknown reduce op";
    bad[n].d.kind = NX_K_BROADCAST, bad[n].d.root = 4, bad[n++].needle = "root rank 4";
    bad[n].d.algo = NX_ALGO_PAIRWISE, bad[n++].needle = "no pairwise algorithm for all_reduce";
    bad[n].d.algo = 99, bad[n++].needle = "unknown algorithm";
    bad[n].d.out = NULL, bad[n++].needle = "needs an output";
    bad[n].d.count = UINT64_MAX / 8, bad[n++].needle = "overflows";
    bad[n].d.kind = NX_K_SPLIT, bad[n++].needle = "no";
    bad[n].d.ad = NULL, bad[n++].needle = "no adapter";
    for (int i = 0; i < n; i++) {
        err[0] = 0;
        x = (struct nx_xop *)&s;
        int rv = nx_xop_create(&bad[i].d, &net, &x, err, sizeof(err));
        EXPECT(rv == -EINVAL && x == NULL);
        if (!strstr(err, bad[i].needle)) {
            fprintf(stderr, "case %d: \"%s\" lacks \"%s\"\n", i, err, bad[i].needle);
            failures++;
        }
    }
    EXPECT(s.dones == 0 && s.sends == 0);
}

static void sc_choose(void)
{
    for (int a = 0; a < NX_ALGO_COUNT; a++)
        EXPECT(nx_algo_parse(nx_algo_name((enum nx_algo)a)) == a);
    EXPECT(nx_algo_parse("bogus") == -1 && nx_algo_parse(NULL) == -1);
    EXPECT(nx_algo_choose(NX_K_ALL_REDUCE, 8, 1024) == NX_ALGO_RD);
    EXPECT(nx_algo_choose(NX_K_ALL_REDUCE, 8, 128 << 10) == NX_ALGO_HD);
    EXPECT(nx_algo_choose(NX_K_ALL_REDUCE, 8, 64 << 20) == NX_ALGO_RING);
    EXPECT(nx_algo_choose(NX_K_ALL_REDUCE, 2, 1 << 20) == NX_ALGO_RING);
    EXPECT(nx_algo_choose(NX_K_BROADCAST, 8, 1024) == NX_ALGO_TREE);
    EXPECT(nx_algo_choose(NX_K_BROADCAST, 8, 64 << 20) == NX_ALGO_RING);
    EXPECT(nx_algo_choose(NX_K_ALL_GATHER, 8, 1024) == NX_ALGO_RD);
    EXPECT(nx_algo_choose(NX_K_ALL_TO_ALL, 8, 1024) == NX_ALGO_PAIRWISE);
    EXPECT(nx_algo_choose(NX_K_REDUCE_SCATTER, 8, 1024) == NX_ALGO_HD);
    EXPECT(nx_algo_choose(NX_K_REDUCE_SCATTER, 8, 1 << 20) == NX_ALGO_RING);
    EXPECT(nx_algo_choose(NX_K_BARRIER, 8, 0) == NX_ALGO_DISSEMINATION);
    EXPECT(nx_algo_choose(NX_K_EXSCAN, 8, 0) == NX_ALGO_HILLIS_STEELE);
    EXPECT(nx_algo_choose(NX_K_SEND, 8, 0) == NX_ALGO_AUTO);
    /* every choice exists */
    for (uint8_t k = 1; k <= NX_K_BARRIER; k++)
        for (uint32_t N = 1; N < 20; N++)
            for (uint64_t b = 1; b < (1ull << 32); b *= 4)
                EXPECT(nx_algo_supported(k, nx_algo_choose(k, N, b)));
    /* the signature covers what the kind uses, and only that */
    uint32_t s0 = nx_xop_sig(NX_K_ALL_REDUCE, NEXAR_F32, 10, 0, NEXAR_SUM);
    EXPECT(s0 == nx_xop_sig(NX_K_ALL_REDUCE, NEXAR_F32, 10, 3, NEXAR_SUM));
    EXPECT(s0 != nx_xop_sig(NX_K_ALL_REDUCE, NEXAR_F32, 11, 0, NEXAR_SUM));
    EXPECT(s0 != nx_xop_sig(NX_K_ALL_REDUCE, NEXAR_F64, 10, 0, NEXAR_SUM));
    EXPECT(s0 != nx_xop_sig(NX_K_ALL_REDUCE, NEXAR_F32, 10, 0, NEXAR_MAX));
    EXPECT(s0 != nx_xop_sig(NX_K_ALL_REDUCE_BUCKETED, NEXAR_F32, 10, 0, NEXAR_SUM));
    EXPECT(nx_xop_sig(NX_K_BROADCAST, NEXAR_F32, 10, 1, 0) !=
           nx_xop_sig(NX_K_BROADCAST, NEXAR_F32, 10, 2, 0));
    EXPECT(nx_xop_sig(NX_K_BROADCAST, NEXAR_F32, 10, 1, 0) ==
           nx_xop_sig(NX_K_BROADCAST, NEXAR_F32, 10, 1, 3));
    EXPECT(nx_xop_sig(NX_K_BARRIER, 0, 0, 0, 0) == nx_xop_sig(NX_K_BARRIER, 5, 7, 1, 2));

    /* NEXAR_ALGO / the algo setting: parsed, refused with a reason, formatted back */
    uint8_t pref[NX_K_MAX + 1];
    char err[256], back[256];
    EXPECT(nx_algo_pref_parse("all_reduce=ring,broadcast=tree,reduce_scatter=hd", pref, err,
                              sizeof(err)) == 0);
    EXPECT(pref[NX_K_ALL_REDUCE] == NX_ALGO_RING && pref[NX_K_BROADCAST] == NX_ALGO_TREE &&
           pref[NX_K_REDUCE_SCATTER] == NX_ALGO_HD && pref[NX_K_ALL_GATHER] == NX_ALGO_AUTO);
    nx_algo_pref_format(pref, back, sizeof(back));
    EXPECT(strcmp(back, "all_reduce=ring,broadcast=tree,reduce_scatter=hd") == 0);
    EXPECT(nx_algo_pref_parse("", pref, err, sizeof(err)) == 0 && pref[NX_K_ALL_REDUCE] == 0);
    EXPECT(nx_algo_pref_parse(NULL, pref, err, sizeof(err)) == 0);
    nx_algo_pref_format(pref, back, sizeof(back));
    EXPECT(back[0] == '\0');
    EXPECT(nx_algo_pref_parse("all_reduce=auto", pref, err, sizeof(err)) == 0);
    static const struct {
        const char *in, *why;
    } bad[] = {
        {"all_reduce=tree", "has no algorithm"}, {"allreduce=ring", "unknown collective"},
        {"all_reduce", "kind=algorithm"},        {"all_reduce=ring,all_reduce=rd", "twice"},
        {"send=ring", "unknown collective"},     {"all_reduce=ring,", ""},
        {"broadcast=", "has no algorithm"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        int rv = nx_algo_pref_parse(bad[i].in, pref, err, sizeof(err));
        if (!bad[i].why[0]) /* a trailing comma ends the list */
            EXPECT(rv == 0);
        else
            EXPECT(rv == -EINVAL && strstr(err, bad[i].why));
    }
}

/* ---- several nodes through the pump ------------------------------------------------------ */

/* Node 2 calls another count: every node that hears from it, and node 2 itself, fails
 * with MISMATCH before using a payload, and the text names the other node. */
static void sc_mismatch(void)
{
    for (int variant = 0; variant < 3; variant++) {
        struct ta_case c = {.kind = NX_K_ALL_REDUCE, .dtype = NEXAR_F32, .redop = NEXAR_SUM,
                            .algo = variant == 0 ? NX_ALGO_RING : NX_ALGO_RD, .count = 64,
                            .nnodes = 3, .chunk_bytes = 64, .vals = TA_EXACT, .seed = 5,
                            .iov_send = variant != 1};
        uint64_t rng = 77;
        ta_place(&c, 3, false, &rng);
        struct ta_bufs b;
        ta_setup(&c, &b);
        /* Lent messages too: a node that fails settles them (the pump checks their bytes). */
        struct ta_pump_opts o = {.seed = 11 + variant, .lend = true};
        struct ta_pump *p = ta_pump_new(3, &o);
        for (uint32_t n = 0; n < 3; n++) {
            struct nx_xop_desc d;
            struct nx_xnet net = ta_pump_net(p, n);
            struct nx_xop *x;
            char err[256];
            ta_desc(&c, &b, n, &d);
            if (n == 2 && variant < 2)
                d.count = 63;
            if (n == 2 && variant == 2) { /* another kind altogether: a barrier */
                d.kind = NX_K_BARRIER;
                d.algo = NX_ALGO_AUTO;
            }
            EXPECT(nx_xop_create(&d, &net, &x, err, sizeof(err)) == 0);
            ta_pump_set(p, n, x);
        }
        ta_pump_run(p);
        int mism = 0;
        for (uint32_t n = 0; n < 3; n++) {
            const char *text;
            int st = ta_pump_status(p, n, &text);
            EXPECT(st != 0); /* nobody may complete with a wrong peer */
            if (st == NEXAR_ERR_MISMATCH) {
                mism++;
                EXPECT(strstr(text, n == 2 ? "node 0 called" : "node 2 called") ||
                       strstr(text, n == 2 ? "node 1 called" : "node 2 called"));
            }
        }
        EXPECT(mism >= 1);
        ta_pump_free(p);
        ta_free(&b);
    }
}

/* Big ops with a small window: what a node keeps for early messages stays within the
 * window's worth, credits flow, and max_inflight holds (the pump aborts otherwise). */
static void sc_flow(void)
{
    static const uint8_t kinds[] = {NX_K_ALL_REDUCE, NX_K_BROADCAST, NX_K_REDUCE,
                                    NX_K_ALL_GATHER, NX_K_GATHER, NX_K_SCATTER};
    for (size_t k = 0; k < sizeof(kinds); k++)
        for (int algo = 1; algo < NX_ALGO_COUNT; algo++) {
            if (!nx_algo_supported(kinds[k], (enum nx_algo)algo))
                continue;
            struct ta_case c = {.kind = kinds[k], .dtype = NEXAR_I32, .redop = NEXAR_SUM,
                                .algo = (uint8_t)algo, .count = 20000, .nnodes = 5,
                                .chunk_bytes = 256, .window = 2, .max_inflight = 1024,
                                .vals = TA_EXACT, .seed = 9 + k};
            uint64_t rng = 99 + k;
            ta_place(&c, 7, true, &rng);
            struct ta_bufs b;
            ta_setup(&c, &b);
            struct ta_pump_opts o = {.seed = 3 + k, .inflight_limit = 1024};
            struct ta_pump *p = ta_pump_new(5, &o);
            struct nx_xop *xs[5];
            for (uint32_t n = 0; n < 5; n++) {
                struct nx_xop_desc d;
                struct nx_xnet net = ta_pump_net(p, n);
                char err[256];
                ta_desc(&c, &b, n, &d);
                EXPECT(nx_xop_create(&d, &net, &xs[n], err, sizeof(err)) == 0);
                ta_pump_set(p, n, xs[n]);
            }
            EXPECT(ta_pump_run(p) == 0);
            uint64_t pe = 0, credits = 0;
            for (uint32_t n = 0; n < 5; n++) {
                struct nx_xop_stats st;
                nx_xop_stats(xs[n], &st);
                EXPECT(ta_pump_status(p, n, NULL) == 0);
                pe = st.piece_elems;
                credits += st.credits_sent;
                /* at most window pieces of every step from every peer, a message being
                 * at most 256 bytes x the blocks it bundles (7 ranks) */
                uint64_t bound = (uint64_t)c.window * (st.steps + 1) * 4 * 256 * 7;
                if (getenv("NX_SIM_VERBOSE"))
                    printf("%s/%s node %u: %" PRIu64 " pieces, early peak %" PRIu64
                           " bytes in %" PRIu64 " msgs, %" PRIu64 " credits\n",
                           nx_kind_name(c.kind), nx_algo_name(c.algo), n, st.pieces,
                           st.early_peak_bytes, st.early_msgs, st.credits_sent);
                if (st.early_peak_bytes > bound) {
                    fprintf(stderr, "%s/%s node %u kept %" PRIu64 " early bytes (bound %"
                            PRIu64 ")\n", nx_kind_name(c.kind), nx_algo_name(c.algo), n,
                            st.early_peak_bytes, bound);
                    failures++;
                }
            }
            EXPECT(credits > 0);
            char why[256];
            EXPECT(ta_check(&c, &b, pe, why, sizeof(why)) == 0);
            ta_pump_free(p);
            ta_free(&b);
        }
}

static const struct {
    const char *name;
    void (*fn)(void);
} scenarios[] = {
    {"forged", sc_forged}, {"solo", sc_solo_run}, {"lifecycle", sc_lifecycle},
    {"create", sc_create}, {"choose", sc_choose}, {"mismatch", sc_mismatch},
    {"flow", sc_flow}, {"lent", sc_lent}, {"stream", sc_stream}, {"gate", sc_gate},
};

int main(int argc, char **argv)
{
    const char *want = argc > 1 ? argv[1] : "all";
    int ran = 0;
    nx_log_init(NX_LOG_ERROR, 0);
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
        if (strcmp(want, "all") == 0 || strcmp(want, scenarios[i].name) == 0) {
            int f0 = failures;
            scenarios[i].fn();
            printf("%-10s %s\n", scenarios[i].name, failures == f0 ? "ok" : "FAILED");
            ran++;
        }
    nx_log_fini();
    if (!ran) {
        fprintf(stderr, "unknown scenario %s\n", want);
        return 2;
    }
    return failures ? 1 : 0;
}
