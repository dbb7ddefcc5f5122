/* peertest_recv.c - the receiving half of the peer test (peertest.h): every byte checked
 * against the pattern, every channel's order checked, one result per test. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "cluster.h"
#include "context.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "peertest.h"
#include "peertest_int.h"
#include "wire.h"

struct rchan {
    bool begun, ended;
    uint64_t got, msgs; /* payload bytes and messages arrived */
};

struct rtest {
    struct nx_tpeer *p;
    uint32_t id, channels, ended;
    struct rchan ch[NX_PEERTEST_MAX_STREAMS];
    bool bad;
    uint32_t bad_ch;
    uint64_t bad_off;
    char error[256]; /* the first order or count error; "" when none */
    double last;
    LIST_ENTRY(rtest) link;
};

static LIST_HEAD(, rtest) tests = LIST_HEAD_INITIALIZER(tests);
static unsigned ntests;

static struct rtest *find(struct nx_tpeer *p, uint32_t id)
{
    struct rtest *t;
    LIST_FOREACH(t, &tests, link)
        if (t->p == p && t->id == id)
            return t;
    return NULL;
}

static void rtest_free(struct rtest *t)
{
    LIST_REMOVE(t, link);
    ntests--;
    free(t);
}

static void send_result(struct nx_tpeer *p, const Nexar__PeerTestResult *r)
{
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_TEST_RESULT;
    m.test_result = (Nexar__PeerTestResult *)r;
    nx_cluster_send(p, NX_CHAN_CTL, &m);
}

static void order_error(struct rtest *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void order_error(struct rtest *t, const char *fmt, ...)
{
    if (t->error[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->error, sizeof(t->error), fmt, ap);
    va_end(ap);
}

static void finish(struct rtest *t)
{
    Nexar__PeerTestResult r = NEXAR__PEER_TEST_RESULT__INIT;
    r.test_id = t->id;
    for (uint32_t c = 0; c < t->channels; c++) {
        r.bytes += t->ch[c].got;
        r.msgs += t->ch[c].msgs;
    }
    r.bad = t->bad;
    r.bad_channel = t->bad_ch;
    r.bad_offset = t->bad_off;
    if (t->bad && !t->error[0])
        snprintf(t->error, sizeof(t->error), "stream %u: byte at offset %" PRIu64
                 " differs from the pattern", t->bad_ch, t->bad_off);
    r.status = t->error[0] ? NEXAR_ERR_MISMATCH : NEXAR_OK;
    r.error = t->error;
    NX_INFO("peertest", "test %u from %s: %" PRIu64 " bytes in %" PRIu64 " messages on %u "
            "stream(s), %s", t->id, t->p->addr, r.bytes, r.msgs, t->channels,
            t->error[0] ? t->error : "every byte verified");
    send_result(t->p, &r);
    rtest_free(t);
}

const char *nx_ptrecv_begin(struct nx_tpeer *p, uint32_t ch, const Nexar__PeerTestBegin *b)
{
    if (b->channel != ch)
        return "peer test begin names another channel than it travels on";
    struct rtest *t = find(p, b->test_id);
    if (!t) {
        if (ntests >= NX_PEERTEST_MAX_TESTS) {
            Nexar__PeerTestResult r = NEXAR__PEER_TEST_RESULT__INIT;
            r.test_id = b->test_id;
            r.status = NEXAR_ERR_UNAVAILABLE;
            r.error = "the receiving nexard runs its maximum of peer tests";
            if (b->channel == 0)
                send_result(p, &r);
            return NULL;
        }
        t = nx_xcalloc(1, sizeof(*t));
        t->p = p;
        t->id = b->test_id;
        t->channels = b->channels;
        LIST_INSERT_HEAD(&tests, t, link);
        ntests++;
    }
    t->last = nx_now();
    if (b->channels != t->channels)
        order_error(t, "stream %u announces %u streams, stream 0 said %u", ch, b->channels,
                    t->channels);
    else if (t->ch[ch].begun)
        order_error(t, "stream %u began twice", ch);
    t->ch[ch].begun = true;
    return NULL;
}

const char *nx_ptrecv_data(struct nx_tpeer *p, uint32_t ch, const struct nx_wire_msg *w)
{
    struct rtest *t = find(p, (uint32_t)w->hdr.job);
    if (!t || w->hdr.job > UINT32_MAX)
        return NULL; /* a test we gave up on, or never took */
    t->last = nx_now();
    if (ch >= t->channels || !t->ch[ch].begun || t->ch[ch].ended) {
        order_error(t, "data on stream %u outside its begin and end", ch);
        return NULL;
    }
    struct rchan *c = &t->ch[ch];
    if (w->hdr.comm != ch || w->hdr.seq != c->msgs || w->hdr.offset != c->got)
        order_error(t, "stream %u: message %" PRIu64 " at offset %" PRIu64 " arrived where "
                    "message %" PRIu64 " at offset %" PRIu64 " was due", ch, w->hdr.seq,
                    w->hdr.offset, c->msgs, c->got);
    if (!t->bad) {
        int64_t bad = nx_peertest_check(t->id, ch, w->hdr.offset, w->body, w->body_len);
        if (bad >= 0) {
            t->bad = true;
            t->bad_ch = ch;
            t->bad_off = w->hdr.offset + (uint64_t)bad;
        }
    }
    c->got += w->body_len;
    c->msgs++;
    return NULL;
}

const char *nx_ptrecv_end(struct nx_tpeer *p, uint32_t ch, const Nexar__PeerTestEnd *e)
{
    if (e->channel != ch)
        return "peer test end names another channel than it travels on";
    struct rtest *t = find(p, e->test_id);
    if (!t)
        return NULL;
    struct rchan *c = &t->ch[ch];
    if (ch >= t->channels || !c->begun || c->ended) {
        order_error(t, "stream %u ended without beginning, or twice", ch);
        return NULL;
    }
    c->ended = true;
    if (e->bytes != c->got || e->msgs != c->msgs)
        order_error(t, "stream %u: %" PRIu64 " bytes in %" PRIu64 " messages were sent, %" PRIu64
                    " bytes in %" PRIu64 " arrived", ch, e->bytes, e->msgs, c->got, c->msgs);
    if (++t->ended == t->channels)
        finish(t);
    return NULL;
}

void nx_ptrecv_peer_lost(struct nx_tpeer *p)
{
    struct rtest *t, *tmp;
    for (t = LIST_FIRST(&tests); t; t = tmp) {
        tmp = LIST_NEXT(t, link);
        if (t->p == p)
            rtest_free(t);
    }
}

void nx_ptrecv_tick(double now)
{
    struct rtest *t, *tmp;
    for (t = LIST_FIRST(&tests); t; t = tmp) {
        tmp = LIST_NEXT(t, link);
        if (now - t->last > NX_PEERTEST_IDLE_S) {
            NX_INFO("peertest", "test %u from %s: silent for %.0f s; forgotten", t->id,
                    t->p->addr, NX_PEERTEST_IDLE_S);
            rtest_free(t);
        }
    }
}

void nx_ptrecv_fini(void)
{
    while (!LIST_EMPTY(&tests))
        rtest_free(LIST_FIRST(&tests));
}
