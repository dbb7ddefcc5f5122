/* test_algo_pump.c - the in-memory message pump (see test_algo.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_algo.h"

struct pmsg {
    struct pmsg *next;
    struct nx_xmsg m;
    uint32_t src;
    struct iovec *lent; /* lent, not yet copied: the sender's regions (data: as sent) */
    int nlent;
    uint8_t data[];
};

struct pnode {
    struct ta_pump *p;
    uint32_t id;
    struct nx_xop *x;
    bool started, done;
    uint32_t status;
    char text[512];
};

struct pstream {
    struct pstream *next;
    uint32_t node;
    struct nx_xstream s;
    size_t off;
    struct pmsg *q; /* its bytes */
};

struct ack {
    uint32_t node, token;
    uint64_t bytes;
};

struct ta_pump {
    uint32_t N;
    struct ta_pump_opts o;
    uint64_t rng, msgs;
    struct pnode nodes[TA_MAXN];
    struct pmsg *qh[TA_MAXN][TA_MAXN], *qt[TA_MAXN][TA_MAXN];
    uint32_t qlen[TA_MAXN][TA_MAXN];
    struct ack *acks;
    size_t nacks, cap_acks;
    uint64_t unacked[TA_MAXN]; /* bytes sent with a token, not yet acknowledged */
    uint8_t *odd; /* misaligned delivery buffer */
    size_t odd_cap;
    uint32_t nlent;  /* messages lent, not yet copied */
    uint8_t *giving; /* take: the buffer of the message being delivered, until taken */
    bool broken;     /* an xop wrote memory it had lent */
    struct pstream *streams; /* taken streamed, not all fed yet */
    uint32_t nstreams;
};

static int p_send(void *arg, struct nx_xop *x, const struct nx_xmsg *m)
{
    struct pnode *nd = arg;
    struct ta_pump *p = nd->p;
    if (m->dst >= p->N || m->dst == nd->id) {
        fprintf(stderr, "pump: node %u sent to node %u\n", nd->id, m->dst);
        abort();
    }
    struct pmsg *q = malloc(sizeof(*q) + m->len + 1);
    q->next = NULL;
    q->m = *m;
    q->src = nd->id;
    q->lent = NULL;
    q->nlent = 0;
    if (m->iov) {
        size_t off = 0;
        for (int i = 0; i < m->iovcnt; i++) {
            memcpy(q->data + off, m->iov[i].iov_base, m->iov[i].iov_len);
            off += m->iov[i].iov_len;
        }
        if (off != m->len) {
            fprintf(stderr, "pump: node %u: iov of %zu bytes, len %zu\n", nd->id, off, m->len);
            abort();
        }
    } else if (m->len) {
        memcpy(q->data, m->data, m->len);
    }
    int lent = 0;
    if (m->lend && m->iov && p->o.lend) {
        q->nlent = m->iovcnt;
        q->lent = malloc((size_t)m->iovcnt * sizeof(*q->lent));
        memcpy(q->lent, m->iov, (size_t)m->iovcnt * sizeof(*q->lent));
        p->nlent++;
        lent = 1;
    }
    q->m.data = NULL;
    q->m.iov = NULL;
    q->m.iovcnt = 0;
    if (m->token) {
        uint64_t lim = p->o.inflight_limit;
        if (lim && p->unacked[nd->id] > 0 && p->unacked[nd->id] + m->len > lim) {
            fprintf(stderr, "pump: node %u has %llu bytes unacknowledged and sends %zu more "
                    "(limit %llu)\n", nd->id, (unsigned long long)p->unacked[nd->id], m->len,
                    (unsigned long long)lim);
            abort();
        }
        p->unacked[nd->id] += m->len;
    }
    struct pmsg **tail = &p->qt[nd->id][m->dst];
    if (*tail)
        (*tail)->next = q;
    else
        p->qh[nd->id][m->dst] = q;
    *tail = q;
    p->qlen[nd->id][m->dst]++;
    p->msgs++;
    return lent;
}

/* The net's copy of a lent message: the bytes must be those the xop sent. */
static void copy_lent(struct ta_pump *p, struct pmsg *q)
{
    size_t off = 0;
    for (int i = 0; i < q->nlent; i++) {
        if (memcmp(q->data + off, q->lent[i].iov_base, q->lent[i].iov_len) != 0 && !p->broken) {
            fprintf(stderr, "FAIL pump: node %u changed a message it lent (step %u, offset "
                    "%llu, token %u) before the net copied it\n", q->src, q->m.step,
                    (unsigned long long)q->m.offset, q->m.token);
            p->broken = true;
        }
        off += q->lent[i].iov_len;
    }
    free(q->lent);
    q->lent = NULL;
    p->nlent--;
}

static void p_settle(void *arg)
{
    struct pnode *nd = arg;
    struct ta_pump *p = nd->p;
    for (uint32_t d = 0; d < p->N; d++)
        for (struct pmsg *q = p->qh[nd->id][d]; q; q = q->next)
            if (q->lent)
                copy_lent(p, q);
}

static void p_done(void *arg, struct nx_xop *x, uint32_t status, const char *text)
{
    struct pnode *nd = arg;
    nd->done = true;
    nd->status = status;
    snprintf(nd->text, sizeof(nd->text), "%s", text ? text : "");
}

struct ta_pump *ta_pump_new(uint32_t nnodes, const struct ta_pump_opts *o)
{
    struct ta_pump *p = calloc(1, sizeof(*p));
    p->N = nnodes;
    p->o = *o;
    p->rng = o->seed ? o->seed : 1;
    for (uint32_t n = 0; n < nnodes; n++)
        p->nodes[n] = (struct pnode){.p = p, .id = n};
    return p;
}

static void *p_take(void *arg, const void *data, size_t len)
{
    struct pnode *nd = arg;
    struct ta_pump *p = nd->p;
    uint8_t *buf = p->giving;
    if (!buf || (const uint8_t *)data != buf + p->o.misalign)
        return NULL;
    p->giving = NULL;
    return buf;
}

struct nx_xnet ta_pump_net(struct ta_pump *p, uint32_t n)
{
    return (struct nx_xnet){.arg = &p->nodes[n], .send = p_send, .done = p_done,
                            .lend_min = p->o.lend ? 1 : 0, .settle = p_settle,
                            .take = p->o.take ? p_take : NULL};
}

void ta_pump_set(struct ta_pump *p, uint32_t n, struct nx_xop *x)
{
    p->nodes[n].x = x;
}

/* Takes message k of the (src, dst) queue out. */
static struct pmsg *unlink_at(struct ta_pump *p, uint32_t s, uint32_t d, uint32_t k)
{
    struct pmsg **pp = &p->qh[s][d], *prev = NULL;
    while (k--) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    struct pmsg *q = *pp;
    *pp = q->next;
    if (p->qt[s][d] == q)
        p->qt[s][d] = prev;
    p->qlen[s][d]--;
    return q;
}

/* Delivers q; true when it goes in streamed, which then owns it. */
static bool deliver(struct ta_pump *p, struct pmsg *q)
{
    uint32_t src = q->src;
    uint8_t *data = q->data;
    if (p->o.filter && !p->o.filter(p->o.filter_arg, &q->m, &src, data))
        return false;
    struct pnode *nd = &p->nodes[q->m.dst];
    if (q->m.token) {
        if (p->nacks == p->cap_acks) {
            p->cap_acks = p->cap_acks ? 2 * p->cap_acks : 64;
            p->acks = realloc(p->acks, p->cap_acks * sizeof(*p->acks));
        }
        p->acks[p->nacks++] =
            (struct ack){.node = q->src, .token = q->m.token, .bytes = q->m.len};
    }
    if (nd->done || !nd->x)
        return false; /* e.g. a credit for a node that has finished */
    struct nx_xstream s;
    if (p->o.stream && q->m.len && ta_rand(&p->rng) % 2 &&
        nx_xop_stream_begin(nd->x, src, q->m.step, q->m.sig, q->m.offset, q->m.len, &s)) {
        struct pstream *ps = malloc(sizeof(*ps));
        *ps = (struct pstream){.next = p->streams, .node = q->m.dst, .s = s, .q = q};
        p->streams = ps;
        p->nstreams++;
        return true;
    }
    if (p->o.take && q->m.len) {
        /* A buffer of its own, which the xop may keep (net.take); the pump frees it
         * otherwise, after writing over it, so that a kept pointer into it would show. */
        p->giving = malloc(q->m.len + 1);
        memcpy(p->giving + p->o.misalign, data, q->m.len);
        data = p->giving + p->o.misalign;
    } else if (p->o.misalign && q->m.len) {
        if (p->odd_cap < q->m.len + 1) {
            free(p->odd);
            p->odd_cap = q->m.len + 1;
            p->odd = malloc(p->odd_cap);
        }
        memcpy(p->odd + 1, data, q->m.len);
        data = p->odd + 1;
    }
    nx_xop_on_data(nd->x, src, q->m.step, q->m.sig, q->m.offset, data, q->m.len);
    if (p->giving) {
        memset(p->giving, 0xa5, q->m.len + 1);
        free(p->giving);
        p->giving = NULL;
    }
    return false;
}


/* Messages of the (s, d) queue the pump may deliver now: a lent one only once copied, and
 * without chaos only the oldest. */
static uint32_t deliverable(const struct ta_pump *p, uint32_t s, uint32_t d)
{
    uint32_t n = 0;
    for (const struct pmsg *q = p->qh[s][d]; q; q = q->next) {
        if (!p->o.chaos)
            return !q->lent;
        n += !q->lent;
    }
    return n;
}

/* Feeds the pick'th stream its next piece; frees it once all went. */
static void stream_step(struct ta_pump *p, uint64_t pick)
{
    struct pstream **pp = &p->streams;
    while (pick--)
        pp = &(*pp)->next;
    struct pstream *ps = *pp;
    struct pnode *nd = &p->nodes[ps->node];
    size_t left = ps->q->m.len - ps->off;
    uint64_t r = ta_rand(&p->rng);
    size_t n = 1 + (r % 4 == 0 ? r / 4 % 9 : r / 4 % 3000);
    if (n > left)
        n = left;
    if (!nd->done) {
        size_t mis = (size_t)(r >> 20) % 8;
        uint8_t *buf = malloc(n + mis);
        memcpy(buf + mis, ps->q->data + ps->off, n);
        nx_xop_stream_data(nd->x, &ps->s, buf + mis, n);
        memset(buf, 0x5a, n + mis);
        free(buf);
    }
    ps->off += n;
    if (ps->off == ps->q->m.len || nd->done) {
        *pp = ps->next;
        p->nstreams--;
        free(ps->q);
        free(ps);
    }
}

/* Copies the pick'th lent message, and tells its sender. */
static void copy_step(struct ta_pump *p, uint64_t pick)
{
    for (uint32_t s = 0; s < p->N; s++)
        for (uint32_t d = 0; d < p->N; d++)
            for (struct pmsg *q = p->qh[s][d]; q; q = q->next) {
                if (!q->lent || pick-- != 0)
                    continue;
                copy_lent(p, q);
                if (!p->nodes[s].done)
                    nx_xop_on_copied(p->nodes[s].x, q->m.token);
                return;
            }
}

int ta_pump_run(struct ta_pump *p)
{
    for (;;) {
        uint32_t unstarted = 0, running = 0, queues = 0;
        for (uint32_t n = 0; n < p->N; n++) {
            unstarted += !p->nodes[n].started;
            running += !p->nodes[n].done;
            for (uint32_t d = 0; d < p->N; d++)
                queues += deliverable(p, n, d) > 0;
        }
        if (running == 0)
            return 0;
        uint64_t options = unstarted + queues + p->nacks + p->nlent + p->nstreams;
        if (options == 0)
            return (int)running;
        uint64_t pick = ta_rand(&p->rng) % options;
        if (pick < unstarted) {
            for (uint32_t n = 0; n < p->N; n++)
                if (!p->nodes[n].started && pick-- == 0) {
                    p->nodes[n].started = true;
                    nx_xop_start(p->nodes[n].x);
                    break;
                }
            continue;
        }
        pick -= unstarted;
        if (pick < p->nacks) {
            struct ack a = p->acks[pick];
            p->acks[pick] = p->acks[--p->nacks];
            p->unacked[a.node] -= a.bytes;
            if (!p->nodes[a.node].done)
                nx_xop_on_sent(p->nodes[a.node].x, a.token);
            continue;
        }
        pick -= p->nacks;
        if (pick < p->nlent) {
            copy_step(p, pick);
            continue;
        }
        pick -= p->nlent;
        if (pick < p->nstreams) {
            stream_step(p, pick);
            continue;
        }
        pick -= p->nstreams;
        for (uint32_t s = 0; s < p->N; s++)
            for (uint32_t d = 0; d < p->N; d++) {
                uint32_t ok = deliverable(p, s, d);
                if (ok == 0 || pick-- != 0)
                    continue;
                /* The k'th message that may go: its place among all of the queue. */
                uint32_t j = p->o.chaos ? (uint32_t)(ta_rand(&p->rng) % ok) : 0, k = 0;
                for (struct pmsg *m = p->qh[s][d]; m; m = m->next, k++)
                    if (!m->lent && j-- == 0)
                        break;
                struct pmsg *q = unlink_at(p, s, d, k);
                if (!deliver(p, q))
                    free(q);
                goto next;
            }
    next:;
    }
}

int ta_pump_status(const struct ta_pump *p, uint32_t n, const char **text)
{
    if (p->broken) {
        if (text)
            *text = "an xop changed a message it lent before the net copied it";
        return -2;
    }
    if (text)
        *text = p->nodes[n].text;
    return p->nodes[n].done ? (int)p->nodes[n].status : -1;
}

uint64_t ta_pump_msgs(const struct ta_pump *p)
{
    return p->msgs;
}

void ta_pump_free(struct ta_pump *p)
{
    for (uint32_t s = 0; s < p->N; s++) {
        nx_xop_destroy(p->nodes[s].x);
        for (uint32_t d = 0; d < p->N; d++)
            while (p->qlen[s][d]) {
                struct pmsg *q = unlink_at(p, s, d, 0);
                free(q->lent);
                free(q);
            }
    }
    while (p->streams) {
        struct pstream *ps = p->streams;
        p->streams = ps->next;
        free(ps->q);
        free(ps);
    }
    free(p->acks);
    free(p->odd);
    free(p);
}
