/*
 * test_algo_loop.c - xops over the loop transport (daemon/transport/loop/transport_loop.h)
 * with delay, jitter, loss and reordering: a sequence of collectives of every kind among
 * 2-4 nodes, each node starting its next op as soon as its previous one ended (so nodes run
 * ahead and messages arrive for ops a node has not reached), checked bit for bit against
 * the reference of test_algo_ref.c.
 *
 * The little glue here is the shape of the daemon's (docs/algorithms.md): DATA messages
 * of proto/wire.h on one channel per communicator; the header's seq finds the xop; a
 * message for an op not started yet is held, one for an op already ended is dropped (a
 * late credit); transport tokens carry (seq, xop token).
 *
 *   test_algo_loop <nodes> <loss percent> [seed]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "log.h"
#include "nexar.h"
#include "shm_abi.h"
#include "test_algo.h"
#include "transport_loop.h"
#include "wire.h"

#define CHANNEL 7
#define MAX_OPS 32

struct held {
    struct held *next;
    uint64_t seq;
    uint32_t src, step, sig;
    uint64_t offset;
    size_t len;
    uint8_t data[];
};

struct lnode {
    uint32_t id;
    char addr[32];
    struct nx_transport *t;
    struct nx_tpeer *peer[TA_MAXN];
    uint64_t seq;       /* the op this node is on */
    struct nx_xop *x;   /* its xop, NULL before creation and after the end */
    struct held *held;
    uint64_t held_msgs, dropped;
};

static uv_loop_t loop;
static uint32_t nnodes;
static struct lnode nodes[TA_MAXN];
static struct ta_case ops[MAX_OPS];
static struct ta_bufs bufs[MAX_OPS];
static int status[MAX_OPS][TA_MAXN]; /* -1 running */
static char texts[MAX_OPS][TA_MAXN][256];
static uint64_t piece_elems[MAX_OPS];
static size_t nops;
static int failures;

static int g_send(void *arg, struct nx_xop *x, const struct nx_xmsg *m)
{
    struct lnode *nd = arg;
    uint8_t hdr[NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES];
    struct nx_data_hdr h = {.job = 1, .comm = 1, .seq = nd->seq, .step = m->step,
                            .sig = m->sig, .offset = m->offset, .length = (uint32_t)m->len,
                            .src = nd->id};
    size_t hl = nx_wire_put_data(hdr, NX_WIRE_DATA, 0, &h);
    struct iovec iov[1 + 64] = {{hdr, hl}};
    int n = 1;
    if (m->iov) {
        if (m->iovcnt > 64)
            abort();
        memcpy(iov + 1, m->iov, (size_t)m->iovcnt * sizeof(*iov));
        n += m->iovcnt;
    } else if (m->len) {
        iov[n++] = (struct iovec){(void *)m->data, m->len};
    }
    uint64_t token = m->token ? nd->seq << 32 | m->token : 0;
    return nd->t->ops->send(nd->peer[m->dst], CHANNEL, iov, n, token);
}

static void g_done(void *arg, struct nx_xop *x, uint32_t st, const char *text)
{
    struct lnode *nd = arg;
    status[nd->seq][nd->id] = (int)st;
    snprintf(texts[nd->seq][nd->id], sizeof(texts[0][0]), "%s", text ? text : "");
    struct nx_xop_stats s;
    nx_xop_stats(x, &s);
    piece_elems[nd->seq] = s.piece_elems;
    nx_xop_destroy(x);
    nd->x = NULL;
    nd->seq++;
}

static void on_message(void *arg, struct nx_tpeer *p, uint64_t channel, const void *data,
                       size_t len)
{
    struct lnode *nd = arg;
    struct nx_wire_msg m;
    const char *why;
    if (channel != CHANNEL || nx_wire_decode(data, len, &m, &why) < 0 ||
        m.type != NX_WIRE_DATA) {
        fprintf(stderr, "node %u: unexpected message\n", nd->id);
        failures++;
        return;
    }
    const struct nx_data_hdr *h = &m.hdr;
    if (h->seq < nd->seq) { /* its op ended here: a late credit */
        nd->dropped++;
        return;
    }
    if (h->seq == nd->seq && nd->x) {
        nx_xop_on_data(nd->x, h->src, h->step, h->sig, h->offset, m.body, m.body_len);
        return;
    }
    struct held *e = malloc(sizeof(*e) + m.body_len);
    *e = (struct held){.seq = h->seq, .src = h->src, .step = h->step, .sig = h->sig,
                       .offset = h->offset, .len = m.body_len};
    memcpy(e->data, m.body, m.body_len);
    struct held **tail = &nd->held; /* in arrival order */
    while (*tail)
        tail = &(*tail)->next;
    *tail = e;
    nd->held_msgs++;
}

static void on_sent(void *arg, struct nx_tpeer *p, uint64_t token)
{
    struct lnode *nd = arg;
    if (token >> 32 == nd->seq && nd->x)
        nx_xop_on_sent(nd->x, (uint32_t)token);
}

static void on_peer(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *reason)
{
    struct lnode *nd = arg;
    if (st == NX_TPEER_LOST && nd->x) {
        char text[256];
        snprintf(text, sizeof(text), "node %s lost: %s", p->addr, reason);
        nx_xop_abort(nd->x, NEXAR_ERR_PEER_LOST, text);
    }
}

/* Starts the node's next op (as the matcher would once its ranks arrived). */
static void advance(struct lnode *nd)
{
    while (!nd->x && nd->seq < nops) {
        struct nx_xop_desc d;
        struct nx_xnet net = {.arg = nd, .send = g_send, .done = g_done};
        char err[256];
        uint64_t seq = nd->seq;
        ta_desc(&ops[seq], &bufs[seq], nd->id, &d);
        if (nx_xop_create(&d, &net, &nd->x, err, sizeof(err)) < 0) {
            fprintf(stderr, "node %u op %" PRIu64 ": %s\n", nd->id, seq, err);
            failures++;
            nd->seq = nops;
            return;
        }
        /* what came early for this op, then go (it may even end right here) */
        struct held **pp = &nd->held;
        while (*pp && nd->x && nd->seq == seq) {
            struct held *e = *pp;
            if (e->seq != seq) {
                pp = &e->next;
                continue;
            }
            *pp = e->next;
            nx_xop_on_data(nd->x, e->src, e->step, e->sig, e->offset, e->data, e->len);
            free(e);
        }
        if (nd->x && nd->seq == seq)
            nx_xop_start(nd->x);
    }
}

static uv_timer_t tick;
static void tick_cb(uv_timer_t *h)
{
    for (uint32_t n = 0; n < nnodes; n++)
        advance(&nodes[n]);
}

static bool all_done(void)
{
    for (uint32_t n = 0; n < nnodes; n++)
        if (nodes[n].seq < nops)
            return false;
    return true;
}

/* The sequence: every kind and algorithm, sizes from one element to many pieces. */
static void plan_ops(uint64_t seed)
{
    uint64_t rng = seed;
    struct ta_case base = {.nnodes = nnodes, .chunk_bytes = 4096, .window = 3};
    ta_place(&base, nnodes * 2 + 1, true, &rng);
    for (uint8_t k = NX_K_ALL_REDUCE; k <= NX_K_BARRIER; k++)
        for (int a = 1; a < NX_ALGO_COUNT && nops < MAX_OPS; a++) {
            if (!nx_algo_supported(k, (enum nx_algo)a))
                continue;
            struct ta_case c = base;
            c.kind = k;
            c.algo = (uint8_t)a;
            c.dtype = (uint8_t)(ta_rand(&rng) % NEXAR_DTYPE_COUNT);
            c.redop = (uint8_t)(ta_rand(&rng) % NEXAR_OP_COUNT);
            c.count = nops % 3 == 0 ? 1 + ta_rand(&rng) % 5 : 3000 + ta_rand(&rng) % 9000;
            c.root = (uint32_t)(ta_rand(&rng) % c.nranks);
            c.vals = ta_rand(&rng) % 2 ? TA_RANDOM : TA_EXACT;
            c.inplace = ta_rand(&rng) % 2;
            c.max_inflight = nops % 4 == 1 ? 8192 : 0;
            c.seed = ta_rand(&rng);
            c.iov_send = nops % 2;
            ops[nops++] = c;
        }
}

int main(int argc, char **argv)
{
    nnodes = argc > 1 ? (uint32_t)atoi(argv[1]) : 3;
    double loss = argc > 2 ? atof(argv[2]) / 100 : 0.03;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : (uint64_t)time(NULL);
    if (getenv("NX_SIM_SEED"))
        seed = strtoull(getenv("NX_SIM_SEED"), NULL, 0);
    if (nnodes < 1 || nnodes > TA_MAXN)
        return 2;
    nx_log_init(NX_LOG_ERROR, 0);
    printf("test_algo_loop: %u nodes, loss %.0f%%, seed %" PRIu64 "\n", nnodes, loss * 100,
           seed);
    uv_loop_init(&loop);
    struct nx_loopnet_conf conf;
    nx_loopnet_conf_defaults(&conf);
    conf.delay_ms = 1;
    conf.jitter_ms = 2;
    conf.loss = loss;
    conf.reorder = 0.05;
    conf.seed = seed;
    conf.mtu = 1500;
    conf.idle_timeout_ms = 20000;
    struct nx_loopnet *net = nx_loopnet_new(&loop, &conf);
    char err[256];
    for (uint32_t n = 0; n < nnodes; n++) {
        struct lnode *nd = &nodes[n];
        nd->id = n;
        snprintf(nd->addr, sizeof(nd->addr), "node%u:1", n);
        struct nx_transport_cb cb = {.arg = nd, .on_message = on_message,
                                     .on_peer = on_peer, .on_sent = on_sent};
        nd->t = nx_loopnet_endpoint(net, nd->addr, &cb, err, sizeof(err));
        if (!nd->t) {
            fprintf(stderr, "endpoint: %s\n", err);
            return 1;
        }
    }
    for (uint32_t n = 0; n < nnodes; n++)
        for (uint32_t m = 0; m < nnodes; m++)
            if (m != n)
                nodes[n].peer[m] = nodes[n].t->ops->peer(nodes[n].t, nodes[m].addr, err,
                                                         sizeof(err));
    plan_ops(seed);
    for (size_t i = 0; i < nops; i++) {
        ta_setup(&ops[i], &bufs[i]);
        for (uint32_t n = 0; n < nnodes; n++)
            status[i][n] = -1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, tick_cb, 0, 1);
    double limit = 100;
    while (!all_done()) {
        uv_run(&loop, UV_RUN_ONCE);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((double)(t1.tv_sec - t0.tv_sec) > limit)
            break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    for (uint32_t n = 0; n < nnodes; n++)
        if (nodes[n].x) {
            char d[256];
            nx_xop_describe(nodes[n].x, d, sizeof(d));
            fprintf(stderr, "node %u stuck in op %" PRIu64 " (%s): %s\n", n, nodes[n].seq,
                    nx_kind_name(ops[nodes[n].seq].kind), d);
            failures++;
        }
    for (size_t i = 0; i < nops; i++) {
        char name[512], why[512];
        ta_name(&ops[i], name, sizeof(name));
        bool ok = true;
        for (uint32_t n = 0; n < nnodes; n++)
            if (status[i][n] != 0) {
                fprintf(stderr, "FAIL op %zu node %u status %d: %s\n  %s\n", i, n,
                        status[i][n], texts[i][n], name);
                ok = false;
            }
        if (ok && ta_check(&ops[i], &bufs[i], piece_elems[i], why, sizeof(why)) < 0) {
            fprintf(stderr, "FAIL op %zu: %s\n  %s\n", i, why, name);
            ok = false;
        }
        failures += !ok;
    }
    struct nx_loopnet_stats ls;
    nx_loopnet_stats(net, &ls);
    uint64_t held = 0, dropped = 0;
    for (uint32_t n = 0; n < nnodes; n++) {
        held += nodes[n].held_msgs;
        dropped += nodes[n].dropped;
        while (nodes[n].held) {
            struct held *e = nodes[n].held;
            nodes[n].held = e->next;
            free(e);
        }
        nx_xop_destroy(nodes[n].x);
    }
    printf("test_algo_loop: %zu ops in %.2f s; packets %" PRIu64 " sent, %" PRIu64
           " lost, %" PRIu64 " reordered; %" PRIu64 " messages held for later ops, %" PRIu64
           " late credits dropped; %d failures\n", nops, secs, ls.pkts_sent, ls.pkts_dropped,
           ls.pkts_reordered, held, dropped, failures);
    uv_timer_stop(&tick);
    uv_close((uv_handle_t *)&tick, NULL);
    for (uint32_t n = 0; n < nnodes; n++)
        nodes[n].t->ops->destroy(nodes[n].t);
    nx_loopnet_free(net);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_loop_close(&loop);
    for (size_t i = 0; i < nops; i++)
        ta_free(&bufs[i]);
    nx_log_fini();
    return failures ? 1 : 0;
}
