/*
 * test_lanes.c - QUIC lanes (transport_lanes.h): endpoints of 2-4 lanes in one process on
 * loopback, each lane a thread with its own connection.
 *
 *   test_lanes bulk       both ways on 12 channels over 3 lanes: every message whole, in
 *                         order per channel, exact bytes; every token acknowledged once
 *   test_lanes mismatch   2 lanes against 3: both sides refuse, and say why
 *   test_lanes lanelost   lane 1 of a peer unreachable (a one-lane endpoint): the peer is
 *                         lost with a reason naming the lane, and so is lane 0
 *   test_lanes forget     closed, forgotten, dialed again: messages flow on every lane
 *   test_lanes reload     credentials read again on every lane; traffic goes on
 *   test_lanes held       a connection on lane 1 before lane 0 (plain endpoints on P and
 *                         P + 1 play a 2-lane node): held, unseen above, until lane 0
 *                         says hello; then delivered in order, named by lane 0's address,
 *                         and the answer on lane 1 goes to P + 1
 *   test_lanes restart    the peer restarts on its ports and speaks first, on lane 0; an
 *                         answer on lane 1 at once, while that lane still holds the old
 *                         connection, goes to the new peer (the old record is retired)
 *   test_lanes backlog    the loop thread stands still while a lane receives: the lane
 *                         stops reading at its limit, holds no more than the limit and one
 *                         read batch, and every message arrives once the loop runs again
 *   test_lanes lend       messages lent (lend): copied at once for lane 0 and before the
 *                         peer is up, else on the lane; after settle() the sender's
 *                         buffers are overwritten and every message still arrives exact;
 *                         on_copied once per lent message, before its on_sent
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qh.h"
#include "transport_lanes.h"

#define NCH 12
#define MAXMSG (1u << 20)
#define PER_CH 8

#define LEND_TOKEN 0x10000u /* + channel * PER_CH + seq: a lent message's token */

struct ep {
    struct nx_transport *t;
    int idx, ups, losts;
    uint8_t copied[NCH * PER_CH], lent[NCH * PER_CH];
    uint64_t ncopied;
    char reason[160];
    uint64_t msgs, bytes, bad, acked, hello;
    uint64_t next_seq[NCH];
    uint8_t *scratch;
    struct nx_tpeer *last;
};

static uv_loop_t *loop;
static struct ep eps[3];

/* Runs the loop while cond holds, for at most secs (the tick in main wakes it to look). */
#define WAIT_WHILE(cond, secs)                                                             \
    for (double wait_end_ = qh_now() + (secs); qh_now() < wait_end_ && (cond);)            \
        uv_run(loop, UV_RUN_ONCE)

static void on_message(void *arg, struct nx_tpeer *p, uint64_t ch, const void *data, size_t len)
{
    struct ep *e = arg;
    e->last = p;
    e->msgs++;
    e->bytes += len;
    if (ch == NX_LANES_HELLO) { /* a one-lane endpoint sees the hello as a message */
        e->hello++;
        return;
    }
    if (ch >= NCH) {
        e->bad++;
        return;
    }
    uint64_t seq = e->next_seq[ch]++;
    size_t want = qh_msg_len(ch, seq, MAXMSG);
    if (len != want) {
        if (e->bad++ < 5)
            fprintf(stderr, "ep%d: ch %llu seq %llu: %zu bytes, want %zu\n", e->idx,
                    (unsigned long long)ch, (unsigned long long)seq, len, want);
        return;
    }
    qh_msg_fill(e->scratch, len, ch, seq);
    if (len && memcmp(e->scratch, data, len) != 0 && e->bad++ < 5)
        fprintf(stderr, "ep%d: ch %llu seq %llu: contents differ\n", e->idx,
                (unsigned long long)ch, (unsigned long long)seq);
}

static void on_peer(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *reason)
{
    struct ep *e = arg;
    e->last = p;
    if (st == NX_TPEER_UP) {
        e->ups++;
    } else {
        e->losts++;
        snprintf(e->reason, sizeof(e->reason), "%s", reason);
    }
    if (getenv("QH_VERBOSE"))
        fprintf(stderr, "ep%d: %s %s %s\n", e->idx, p->addr, nx_tpeer_state_name(st), reason);
}

static void on_sent(void *arg, struct nx_tpeer *p, uint64_t token)
{
    struct ep *e = arg;
    (void)p;
    if (token >= LEND_TOKEN && token < LEND_TOKEN + NCH * PER_CH) {
        uint64_t k = token - LEND_TOKEN;
        if (e->lent[k] && !e->copied[k] && e->bad++ < 5)
            fprintf(stderr, "ep%d: token %llx acknowledged before it was copied\n", e->idx,
                    (unsigned long long)token);
    } else if (token != 0x5e5e) {
        e->bad++;
    }
    e->acked++;
}

static void on_copied(void *arg, uint64_t token)
{
    struct ep *e = arg;
    uint64_t k = token - LEND_TOKEN;
    if (token < LEND_TOKEN || k >= NCH * PER_CH || !e->lent[k] || e->copied[k]++) {
        if (e->bad++ < 5)
            fprintf(stderr, "ep%d: on_copied(%llx) for no lent message, or twice\n", e->idx,
                    (unsigned long long)token);
        return;
    }
    e->ncopied++;
}

/* 0: qh_conf's 2 s.  A case that stops the loop on purpose sets more. */
static uint64_t idle_timeout_ms;

/* Lanes take ports P..P+n-1: try a few random bases until one is free (at: that one). */
static struct ep *ep_new_at(int i, uint32_t lanes, int node, const char *at)
{
    struct ep *e = &eps[i];
    char listen[64], err[256];
    struct nx_transport_cb cb = {.arg = e, .on_message = on_message, .on_peer = on_peer,
                                 .on_sent = on_sent, .on_copied = on_copied};
    memset(e, 0, sizeof(*e));
    e->idx = i;
    e->scratch = malloc(MAXMSG);
    for (int tries = 0; tries < 20 && !e->t; tries++) {
        struct nx_quic_conf c;
        if (at)
            snprintf(listen, sizeof(listen), "%s", at);
        else
            snprintf(listen, sizeof(listen), "127.0.0.1:%d", 20000 + rand() % 30000);
        qh_conf(&c, listen, node);
        if (idle_timeout_ms)
            c.idle_timeout_ms = idle_timeout_ms;
        e->t = lanes > 1 ? nx_lanes_new(loop, &c, lanes, &cb, err, sizeof(err))
                         : nx_quic_new(loop, &c, &cb, err, sizeof(err));
    }
    if (!e->t) {
        fprintf(stderr, "ep%d: %s\n", i, err);
        exit(1);
    }
    return e;
}

static struct ep *ep_new(int i, uint32_t lanes, int node)
{
    return ep_new_at(i, lanes, node, NULL);
}

static void ep_free(struct ep *e)
{
    if (e->t)
        qh_destroy(loop, e->t);
    free(e->scratch);
    e->t = NULL;
}

static struct nx_tpeer *peer_of(struct ep *e, struct ep *o)
{
    char err[160];
    struct nx_tpeer *p = e->t->ops->peer(e->t, o->t->local_addr, err, sizeof(err));
    if (!p) {
        fprintf(stderr, "peer %s: %s\n", o->t->local_addr, err);
        exit(1);
    }
    return p;
}

static int send_one(struct ep *e, struct nx_tpeer *to, unsigned ch, uint64_t seq)
{
    size_t len = qh_msg_len(ch, seq, MAXMSG);
    qh_msg_fill(e->scratch, len, ch, seq);
    struct iovec iov[2] = {{e->scratch, len / 3}, {e->scratch + len / 3, len - len / 3}};
    return e->t->ops->send(to, ch, iov, 2, 0x5e5e);
}

static int all_in(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++)
        for (unsigned ch = 0; ch < NCH; ch++)
            if (eps[i].next_seq[ch] < PER_CH)
                return 0;
    return eps[0].acked == NCH * PER_CH && eps[1].acked == NCH * PER_CH;
}

static int both_lost(void *arg)
{
    (void)arg;
    return eps[0].losts && eps[1].losts;
}

static int a_lost(void *arg)
{
    (void)arg;
    return eps[0].losts > 0;
}

/* a's record of b, once message 0 of channels 0 and 1 (lanes 0 and 1) reached b. */
static struct nx_tpeer *pair_up(struct ep *a, struct ep *b)
{
    struct nx_tpeer *ab = peer_of(a, b);
    QH_CHECK(send_one(a, ab, 0, 0) == 0 && send_one(a, ab, 1, 0) == 0);
    WAIT_WHILE(b->next_seq[0] < 1 || b->next_seq[1] < 1, 20);
    QH_CHECK(b->next_seq[0] == 1 && b->next_seq[1] == 1);
    return ab;
}

/* Sequence number s on every channel, then the loop runs until the other side has it:
 * one loop serves both endpoints, so no batch may hold it past the idle timeout (under
 * TSan too). */
static int have_seq(void *arg)
{
    const uint64_t *want = arg;
    for (unsigned ch = 0; ch < NCH; ch++)
        if (eps[1].next_seq[ch] < want[0] || (want[1] && eps[0].next_seq[ch] < want[0]))
            return 0;
    return 1;
}

static int case_bulk(void)
{
    struct ep *a = ep_new(0, 3, 0), *b = ep_new(1, 3, 1);
    struct nx_tpeer *ab = peer_of(a, b), *ba = NULL;
    int ok = 1;
    for (uint64_t s = 0; s < PER_CH && ok; s++) {
        for (unsigned ch = 0; ch < NCH; ch++) {
            QH_CHECK(send_one(a, ab, ch, s) == 0);
            if (ba)
                QH_CHECK(send_one(b, ba, ch, s) == 0);
        }
        uint64_t want[2] = {s + 1, ba != NULL};
        ok = qh_run_until(loop, have_seq, want, 30000);
        if (!ba && (ba = b->last)) { /* b learnt a from its messages: answer from now */
            QH_CHECK(!strcmp(ba->addr, a->t->local_addr)); /* named by lane 0 */
            for (uint64_t r = 0; r <= s; r++)
                for (unsigned ch = 0; ch < NCH; ch++)
                    QH_CHECK(send_one(b, ba, ch, r) == 0);
        }
    }
    QH_CHECK(ba != NULL);
    ok = ok && qh_run_until(loop, all_in, NULL, 60000);
    QH_CHECK(ok);
    QH_CHECK(a->bad == 0 && b->bad == 0);
    QH_CHECK(a->ups == 1 && b->ups == 1 && a->losts == 0 && b->losts == 0);
    struct nx_tpeer_stats st;
    a->t->ops->stats(ab, &st);
    QH_CHECK(st.state == NX_TPEER_UP && st.msgs_sent == NCH * PER_CH + 1); /* + the hello */
    QH_CHECK(st.msgs_recv == NCH * PER_CH + 1);
    /* Each lane's connection, asked on its thread: up, carrying its channels, and the
     * peer's bytes are theirs summed (every message was consumed, none is in between). */
    struct nx_tpeer_lane ln[NX_TPEER_LANES_MAX];
    QH_CHECK(a->t->ops->lanes(ab, ln, NX_TPEER_LANES_MAX) == 3);
    uint64_t sent = 0, recv = 0;
    for (int i = 0; i < 3; i++) {
        QH_CHECK(ln[i].state == NX_TPEER_UP && ln[i].bytes_sent > 0 && ln[i].bytes_recv > 0 &&
                 ln[i].pkts_sent > 0 && ln[i].pkts_recv > 0 && ln[i].rtt_ms > 0);
        sent += ln[i].bytes_sent;
        recv += ln[i].bytes_recv;
        printf("bulk: lane %d: %.1f MiB sent, %.1f MiB received, %llu packets out\n", i,
               ln[i].bytes_sent / 1048576.0, ln[i].bytes_recv / 1048576.0,
               (unsigned long long)ln[i].pkts_sent);
    }
    QH_CHECK(sent == st.bytes_sent && recv == st.bytes_recv);
    QH_CHECK(a->t->ops->lanes(ab, ln, 2) == 2 && ln[1].state == NX_TPEER_UP);
    printf("bulk: %llu + %llu messages, %.1f + %.1f MiB, in order on %d channels over 3 lanes\n",
           (unsigned long long)a->msgs, (unsigned long long)b->msgs, a->bytes / 1048576.0,
           b->bytes / 1048576.0, NCH);
    ep_free(a);
    ep_free(b);
    return 0;
}

static int case_mismatch(void)
{
    struct ep *a = ep_new(0, 2, 0), *b = ep_new(1, 3, 1);
    struct nx_tpeer *ab = peer_of(a, b);
    QH_CHECK(send_one(a, ab, 0, 0) == 0);
    QH_CHECK(qh_run_until(loop, both_lost, NULL, 20000));
    printf("mismatch: a: %s\nmismatch: b: %s\n", a->reason, b->reason);
    /* Whichever side read the other's hello first closed with the counts of both nodes. */
    char a2b[256], b2a[256];
    snprintf(a2b, sizeof(a2b), "quic_lanes differ: 2 on %s, 3 on %s; set quic_lanes alike",
             a->t->local_addr, b->t->local_addr);
    snprintf(b2a, sizeof(b2a), "quic_lanes differ: 3 on %s, 2 on %s; set quic_lanes alike",
             b->t->local_addr, a->t->local_addr);
    QH_CHECK(strstr(a->reason, a2b) || strstr(a->reason, b2a));
    QH_CHECK(strstr(b->reason, a2b) || strstr(b->reason, b2a));
    QH_CHECK(a->t->ops->send(ab, 1, NULL, 0, 0) < 0);
    ep_free(a);
    ep_free(b);
    return 0;
}

static int case_lanelost(void)
{
    /* b listens on one port only: a's lane 1 dials a port nobody answers. */
    struct ep *a = ep_new(0, 2, 0), *b = ep_new(1, 1, 1);
    struct nx_tpeer *ab = peer_of(a, b);
    QH_CHECK(send_one(a, ab, 1, 0) == 0);
    double t0 = qh_now();
    QH_CHECK(qh_run_until(loop, a_lost, NULL, 20000));
    printf("lanelost: after %.2f s: %s\n", qh_now() - t0, a->reason);
    QH_CHECK(strncmp(a->reason, "lane 1 of 2: ", 13) == 0);
    QH_CHECK(b->hello == 1); /* lane 0 was up: the hello went through */
    /* lane 0 was closed with it: b hears of it */
    QH_CHECK(qh_run_until(loop, both_lost, NULL, 10000));
    printf("lanelost: b: %s\n", b->reason);
    QH_CHECK(strstr(b->reason, "lane 1 lost") != NULL);
    ep_free(a);
    ep_free(b);
    return 0;
}

static int case_forget(void)
{
    struct ep *a = ep_new(0, 2, 0), *b = ep_new(1, 2, 1);
    struct nx_tpeer *ab = pair_up(a, b);
    a->t->ops->close_peer(ab, "test");
    WAIT_WHILE(!b->losts, 20);
    QH_CHECK(b->losts == 1);
    printf("forget: b: %s\n", b->reason);
    QH_CHECK(a->t->ops->send(ab, 1, NULL, 0, 0) == -ENOTCONN);
    a->t->ops->peer_forget(ab);
    b->t->ops->peer_forget(b->last);
    /* Afresh: a new record, and the next messages of both channels arrive. */
    ab = peer_of(a, b);
    QH_CHECK(send_one(a, ab, 0, 1) == 0 && send_one(a, ab, 1, 1) == 0);
    WAIT_WHILE((b->next_seq[0] < 2 || b->next_seq[1] < 2), 20);
    QH_CHECK(b->next_seq[0] == 2 && b->next_seq[1] == 2 && b->bad == 0);
    QH_CHECK(a->ups == 2 && b->ups == 2);
    ep_free(a);
    ep_free(b);
    return 0;
}

static int case_reload(void)
{
    struct ep *a = ep_new(0, 2, 0), *b = ep_new(1, 2, 1);
    struct nx_tpeer *ab = pair_up(a, b);
    int rolled = -1;
    char err[256];
    QH_CHECK(nx_lanes_reload(a->t, &rolled, err, sizeof(err)) == 0);
    printf("reload: %d connections handed over\n", rolled);
    QH_CHECK(rolled == 2); /* one per lane */
    for (uint64_t s = 1; s < 6; s++)
        QH_CHECK(send_one(a, ab, 0, s) == 0 && send_one(a, ab, 1, s) == 0);
    WAIT_WHILE((b->next_seq[0] < 6 || b->next_seq[1] < 6), 20);
    QH_CHECK(b->next_seq[0] == 6 && b->next_seq[1] == 6 && b->bad == 0);
    QH_CHECK(a->losts == 0 && b->losts == 0);
    ep_free(a);
    ep_free(b);
    return 0;
}

static int case_held(void)
{
    struct ep *b = ep_new(1, 2, 1), *a0 = NULL, *a1 = &eps[2];
    struct nx_transport_cb cb = {.arg = a1, .on_message = on_message, .on_peer = on_peer,
                                 .on_sent = on_sent};
    char err[256], l1[32];
    /* a0 on some port P (plain QUIC) and a1 on P + 1: what a 2-lane node listens on. */
    for (int tries = 0; tries < 20 && !a1->t; tries++) {
        if (a0)
            ep_free(a0);
        a0 = ep_new(0, 1, 0);
        struct nx_quic_conf c;
        snprintf(l1, sizeof(l1), "127.0.0.1:%d", nx_quic_port(a0->t) + 1);
        qh_conf(&c, l1, 0);
        memset(a1, 0, sizeof(*a1));
        a1->idx = 2;
        a1->scratch = malloc(MAXMSG);
        a1->t = nx_quic_new(loop, &c, &cb, err, sizeof(err));
        if (!a1->t)
            free(a1->scratch);
    }
    if (!a1->t) {
        fprintf(stderr, "held: no two adjacent ports: %s\n", err);
        exit(1);
    }
    /* Lane 1 first: b holds it, and tells its owner nothing. */
    char b1[64];
    snprintf(b1, sizeof(b1), "127.0.0.1:%d", nx_quic_port(nx_lanes_first(b->t)) + 1);
    struct nx_tpeer *to_b1 = a1->t->ops->peer(a1->t, b1, err, sizeof(err));
    QH_CHECK(to_b1 && send_one(a1, to_b1, 1, 0) == 0 && send_one(a1, to_b1, 1, 1) == 0);
    qh_run_for(loop, 400);
    size_t held = nx_lanes_rx_queued(b->t, NULL);
    printf("held: lane 1 up before lane 0: %zu bytes held, %llu messages and %d ups seen "
           "above\n", held, (unsigned long long)b->msgs, b->ups);
    QH_CHECK(a1->ups == 1 && held > 0 && b->msgs == 0 && b->ups == 0);
    /* Lane 0 says hello: b adopts the held connection and delivers what it sent. */
    struct nx_tpeer *to_b0 = peer_of(a0, b);
    char hello[32];
    struct iovec iov = {hello, nx_lanes_hello_put(hello, sizeof(hello), 2)};
    QH_CHECK(a0->t->ops->send(to_b0, NX_LANES_HELLO, &iov, 1, 0) == 0);
    QH_CHECK(send_one(a0, to_b0, 0, 0) == 0);
    WAIT_WHILE((b->next_seq[1] < 2 || !b->next_seq[0]), 10);
    QH_CHECK(b->next_seq[1] == 2 && b->next_seq[0] == 1 && b->bad == 0 && b->ups == 1);
    QH_CHECK(b->last && !strcmp(b->last->addr, a0->t->local_addr));
    QH_CHECK(nx_lanes_rx_queued(b->t, NULL) == 0);
    /* b's answer on channel 1 travels on its lane 1, to a's P + 1. */
    if (b->last)
        QH_CHECK(send_one(b, b->last, 1, 0) == 0);
    WAIT_WHILE(a1->next_seq[1] < 1, 10);
    QH_CHECK(a1->next_seq[1] == 1 && a1->bad == 0 && a0->hello == 1);
    printf("held: adopted with lane 0's hello: %llu messages from %s in order; the answer "
           "on lane 1 reached %s\n", (unsigned long long)b->msgs, b->last ? b->last->addr : "?",
           a1->t->local_addr);
    QH_CHECK(a0->losts == 0 && a1->losts == 0 && b->losts == 0);
    ep_free(a1);
    ep_free(a0);
    ep_free(b);
    return 0;
}

static int case_restart(void)
{
    struct ep *a = ep_new(0, 2, 0), *b = ep_new(1, 2, 1);
    pair_up(a, b);
    /* b restarts on the same ports with the same key, and speaks first, on lane 0 only. */
    char at[64];
    snprintf(at, sizeof(at), "%s", b->t->local_addr);
    ep_free(b);
    b = ep_new_at(1, 2, 1, at);
    QH_CHECK(send_one(b, peer_of(b, a), 0, 0) == 0);
    WAIT_WHILE(a->next_seq[0] < 1, 10);
    QH_CHECK(a->next_seq[0] == 1 && a->ups == 2);
    /* a answers at once on lane 1, whose old connection may still look up to it. */
    struct nx_tpeer *na = a->last;
    QH_CHECK(na && send_one(a, na, 1, 0) == 0);
    double t0 = qh_now();
    WAIT_WHILE(b->next_seq[1] < 1, 10);
    printf("restart: the answer on lane 1 reached the restarted peer in %.3f s; a: %d up, "
           "%d lost (%s)\n", qh_now() - t0, a->ups, a->losts, a->reason);
    QH_CHECK(b->next_seq[1] == 1 && b->bad == 0 && a->bad == 0);
    struct nx_tpeer_stats st;
    if (na) {
        a->t->ops->stats(na, &st);
        QH_CHECK(st.state == NX_TPEER_UP);
    }
    QH_CHECK(b->losts == 0);
    ep_free(a);
    ep_free(b);
    return 0;
}

static int case_backlog(void)
{
    const size_t limit = 4u << 20;
    const uint64_t last = 40; /* seq 1..40 on channel 1: about 20 MiB */
    /* Both lane 0s share this loop, so neither is heard while it stands still: under
     * TSan on a loaded host the sends plus the 0.8 s came past qh_conf's idle timeout
     * (1.5 s once the keep-alive is taken off it), and the peer was lost. */
    idle_timeout_ms = 20000;
    struct ep *a = ep_new(0, 2, 0), *b = ep_new(1, 2, 1);
    nx_lanes_set_rx_limit(b->t, limit);
    struct nx_tpeer *ab = pair_up(a, b);
    double t_sent = qh_now();
    for (uint64_t s = 1; s <= last; s++)
        QH_CHECK(send_one(a, ab, 1, s) == 0); /* posted to a's lane 1 at once: a is up */
    size_t peak = 0, held = 0;
    for (int i = 0; i < 8; i++) {
        usleep(100000);
        held = nx_lanes_rx_queued(b->t, &peak);
    }
    printf("backlog: the loop stood still %.1f s: %.1f MiB held for it, at most %.1f MiB "
           "(limit %.0f MiB)\n", qh_now() - t_sent, held / 1048576.0, peak / 1048576.0,
           limit / 1048576.0);
    QH_CHECK(peak > limit);                          /* the limit was reached... */
    QH_CHECK(peak <= limit + (2u << 20) + MAXMSG);   /* ...and held to a read batch */
    double t0 = qh_now();
    WAIT_WHILE(b->next_seq[1] < last + 1, 30);
    printf("backlog: the other %llu messages in %.2f s after\n",
           (unsigned long long)(b->next_seq[1] - 1), qh_now() - t0);
    QH_CHECK(b->next_seq[1] == last + 1 && b->bad == 0);
    QH_CHECK(a->losts == 0 && b->losts == 0);
    QH_CHECK(nx_lanes_rx_queued(b->t, NULL) == 0);
    ep_free(a);
    ep_free(b);
    idle_timeout_ms = 0;
    return 0;
}

/* Lends message seq of channel ch from a buffer of its own (header of 16 bytes, then the
 * rest): what lend returns, the buffer in *buf. */
static int lend_one(struct ep *e, struct nx_tpeer *to, unsigned ch, uint64_t seq, uint8_t **buf)
{
    size_t len = qh_msg_len(ch, seq, MAXMSG);
    *buf = malloc(len + 1);
    qh_msg_fill(*buf, len, ch, seq);
    size_t h = len < 16 ? len : 16;
    struct iovec iov[2] = {{*buf, h}, {*buf + h, len - h}};
    int rv = e->t->ops->lend(to, ch, iov, 2, LEND_TOKEN + ch * PER_CH + seq);
    if (rv == 1)
        e->lent[ch * PER_CH + seq] = 1;
    return rv;
}

static int all_copied_in(void *arg)
{
    (void)arg;
    for (unsigned ch = 0; ch < NCH; ch++)
        if (eps[1].next_seq[ch] < PER_CH)
            return 0;
    return eps[0].acked == NCH * PER_CH;
}

static int case_lend(void)
{
    /* The loop stands still while 94 messages of up to 1 MiB are filled and lent (seconds
     * under TSan): past qh_conf's 2 s both sides' lane 0 would time out. */
    idle_timeout_ms = 60000;
    struct ep *a = ep_new(0, 3, 0), *b = ep_new(1, 3, 1);
    QH_CHECK(a->t->ops->lend && a->t->ops->settle);
    /* Before the peer is up nothing is lent: copied at once, held for the dial. */
    struct nx_tpeer *ab = peer_of(a, b);
    uint8_t *early;
    QH_CHECK(lend_one(a, ab, 1, 0, &early) == 0);
    memset(early, 0xaa, qh_msg_len(1, 0, MAXMSG));
    free(early);
    QH_CHECK(send_one(a, ab, 0, 0) == 0);
    WAIT_WHILE(b->next_seq[0] < 1 || b->next_seq[1] < 1, 20);
    QH_CHECK(b->next_seq[0] == 1 && b->next_seq[1] == 1 && b->bad == 0);
    /* Up: every channel's next messages lent, then settle, then the buffers overwritten
     * and freed; the lanes must have made their copies by then. */
    uint8_t *bufs[NCH * PER_CH];
    int lent = 0, copied = 0;
    for (uint64_t s = 0; s < PER_CH; s++)
        for (unsigned ch = 0; ch < NCH; ch++) {
            if (s == 0 && ch < 2)
                continue; /* sent before up */
            int rv = lend_one(a, ab, ch, s, &bufs[ch * PER_CH + s]);
            QH_CHECK(rv == 0 || rv == 1);
            QH_CHECK(rv == (nx_lanes_of(ch, 3) != 0)); /* lane 0 copies as it sends */
            lent += rv == 1;
            copied += rv == 0;
        }
    a->t->ops->settle(a->t);
    /* The last lent first: without the settle a lane would not have reached it yet. */
    for (int s = PER_CH - 1; s >= 0; s--)
        for (int ch = NCH - 1; ch >= (s == 0 ? 2 : 0); ch--) {
            memset(bufs[ch * PER_CH + s], 0x55, qh_msg_len((unsigned)ch, (uint64_t)s, MAXMSG));
            free(bufs[ch * PER_CH + s]);
        }
    int ok = qh_run_until(loop, all_copied_in, NULL, 60000);
    QH_CHECK(ok);
    WAIT_WHILE(a->ncopied < (uint64_t)lent, 10);
    QH_CHECK(b->bad == 0 && a->bad == 0);
    QH_CHECK(a->ncopied == (uint64_t)lent && lent > 0 && copied > 0);
    printf("lend: %d messages lent to lanes 1-2, %d copied at once (lane 0), all exact after "
           "the buffers were overwritten\n", lent, copied);
    ep_free(a);
    ep_free(b);
    return 0;
}

static void tick(uv_timer_t *t)
{
    (void)t;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "bulk";
    srand((unsigned)(qh_now() * 1000) ^ (unsigned)getpid());
    qh_certs(2);
    loop = uv_default_loop();
    /* The cases wait with uv_run(UV_RUN_ONCE) and a deadline: the tick wakes the loop to
     * look at it when nothing else would (every connection gone). */
    uv_timer_t ticker;
    uv_timer_init(loop, &ticker);
    uv_timer_start(&ticker, tick, 20, 20);
    if (!strcmp(which, "bulk"))
        case_bulk();
    else if (!strcmp(which, "mismatch"))
        case_mismatch();
    else if (!strcmp(which, "lanelost"))
        case_lanelost();
    else if (!strcmp(which, "forget"))
        case_forget();
    else if (!strcmp(which, "reload"))
        case_reload();
    else if (!strcmp(which, "backlog"))
        case_backlog();
    else if (!strcmp(which, "held"))
        case_held();
    else if (!strcmp(which, "restart"))
        case_restart();
    else if (!strcmp(which, "lend"))
        case_lend();
    else {
        fprintf(stderr, "unknown case %s\n", which);
        return 2;
    }
    uv_close((uv_handle_t *)&ticker, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    qh_certs_cleanup();
    if (qh_failures)
        fprintf(stderr, "%d check(s) failed\n", qh_failures);
    return qh_failures ? 1 : 0;
}
