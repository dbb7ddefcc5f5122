/*
 * test_qrecord.c - the stream record parser (daemon/transport/quic/quic_record.c) on bytes
 * alone, with exact expectations: a stream of preamble, records of many sizes (empty, one
 * byte, ones that cross every piece size) and switch records is fed cut at every byte
 * boundary, at every pair of them, and byte by byte; each time the same records must come
 * out, of the same channels, with the same bytes.  Violations are refused with the
 * transport's own reasons (quic_recv.c closes the connection with "protocol: " and them).
 * Records long enough to stream are offered once, and a sink that takes one gets its bytes
 * in order, where they lie, then one end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qh.h"
#include "quic_record.h"

#define MAXREC 64

struct got {
    int n;
    uint64_t channel[MAXREC];
    size_t len[MAXREC];
    uint8_t *data[MAXREC];
    int copied[MAXREC];       /* delivered from a get() buffer, not the caller's bytes */
    int stop_at;              /* deliver says stop for record number stop_at (-1: never) */
    int gets, puts, out;
    size_t last_get;
    const uint8_t *in, *in_end; /* the bytes of the current feed call */
    /* streams: accept 0 none, 1 every one, 2 every other offer */
    int accept, offers, ends_whole, ends_broken, bad;
    struct t_sink {
        size_t len, have;
        uint8_t *buf;
        uint64_t channel;
        int out; /* between begin and end */
    } sinks[MAXREC];
};

static void *t_get(void *arg, size_t len, size_t *cap)
{
    struct got *g = arg;
    g->gets++;
    g->out++;
    g->last_get = len;
    *cap = len;
    return malloc(len ? len : 1);
}

static void t_put(void *arg, void *buf, size_t cap)
{
    struct got *g = arg;
    (void)cap;
    if (buf) {
        g->puts++;
        g->out--;
    }
    free(buf);
}

static int t_deliver(void *arg, uint64_t channel, const uint8_t *d, size_t len)
{
    struct got *g = arg;
    if (g->n < MAXREC) {
        g->channel[g->n] = channel;
        g->len[g->n] = len;
        g->data[g->n] = malloc(len ? len : 1);
        if (len)
            memcpy(g->data[g->n], d, len);
        g->copied[g->n] = len && !(d >= g->in && d + len <= g->in_end);
    }
    return g->n++ == g->stop_at;
}

static void *t_begin(void *arg, uint64_t channel, const uint8_t *head, size_t headlen,
                     size_t len)
{
    struct got *g = arg;
    int k = g->offers++;
    if (len < NX_QREC_STREAM_MIN || headlen < NX_QREC_HEAD || headlen >= len ||
        k >= MAXREC)
        g->bad++;
    if (g->accept == 0 || (g->accept == 2 && k % 2) || k >= MAXREC)
        return NULL;
    struct t_sink *s = &g->sinks[k];
    *s = (struct t_sink){.len = len, .buf = malloc(len), .channel = channel, .out = 1};
    memcpy(s->buf, head, headlen < NX_QREC_HEAD ? headlen : NX_QREC_HEAD); /* checked
                                                  * against what data brings */
    return s;
}

static int t_data(void *arg, void *sink, const uint8_t *d, size_t n)
{
    struct got *g = arg;
    struct t_sink *s = sink;
    if (!s->out || n == 0 || s->have + n > s->len)
        g->bad++;
    else if (s->have < NX_QREC_HEAD &&
             memcmp(s->buf + s->have, d,
                    (s->have + n < NX_QREC_HEAD ? s->have + n : NX_QREC_HEAD) - s->have))
        g->bad++; /* the head it was offered with is what came */
    else
        memcpy(s->buf + s->have, d, n), s->have += n;
    /* Past the first piece, the bytes are the caller's: nothing gathered them. */
    if (s->have > n && !(d >= g->in && d + n <= g->in_end))
        g->bad++;
    return 0;
}

static void t_end(void *arg, void *sink, int whole)
{
    struct got *g = arg;
    struct t_sink *s = sink;
    if (!s->out)
        g->bad++;
    s->out = 0;
    if (!whole) {
        g->ends_broken++;
        free(s->buf);
        return;
    }
    g->ends_whole++;
    if (s->have != s->len)
        g->bad++;
    if (g->n < MAXREC) {
        g->channel[g->n] = s->channel;
        g->len[g->n] = s->len;
        g->data[g->n] = s->buf;
        g->copied[g->n] = 0;
    } else {
        free(s->buf);
    }
    g->n++;
}

static const struct nx_qrec_ops ops = {t_get, t_put, t_deliver, NULL, NULL, NULL};
static const struct nx_qrec_ops sops = {t_get, t_put, t_deliver, t_begin, t_data, t_end};

static void got_init(struct got *g)
{
    memset(g, 0, sizeof(*g));
    g->stop_at = -1;
    g->accept = -1; /* an owner without begin */
}

static void got_free(struct got *g)
{
    for (int i = 0; i < g->n && i < MAXREC; i++)
        free(g->data[i]);
}

static int feed(struct nx_qrec *r, struct got *g, const uint8_t *d, size_t len, const char **why)
{
    g->in = d;
    g->in_end = d + len;
    return nx_qrec_feed(r, d, len, g->accept >= 0 ? &sops : &ops, g, why);
}

/* ---- building streams ---- */

struct stream {
    uint8_t b[1 << 17];
    size_t n;
    /* what must come out */
    int nrec;
    uint64_t channel[MAXREC];
    size_t off[MAXREC], len[MAXREC];
};

static void put_be(struct stream *s, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        s->b[s->n++] = (uint8_t)(v >> (8 * i));
}

static void s_pre(struct stream *s, uint64_t channel, uint64_t *cur)
{
    memcpy(s->b + s->n, "nxq1", 4);
    s->n += 4;
    put_be(s, channel, 8);
    *cur = channel;
}

static void s_rec(struct stream *s, size_t len, uint64_t cur)
{
    put_be(s, len, 4);
    s->channel[s->nrec] = cur;
    s->off[s->nrec] = s->n;
    s->len[s->nrec++] = len;
    for (size_t i = 0; i < len; i++)
        s->b[s->n++] = (uint8_t)(i * 7 + len + s->nrec);
}

static void s_switch(struct stream *s, uint64_t channel, uint64_t *cur)
{
    put_be(s, NX_QSWITCH, 4);
    put_be(s, channel, 8);
    *cur = channel;
}

/* The stream every split test uses: three channels, two switches, lengths around the
 * header sizes, an empty record at the start, after a switch and at the end. */
static void sample(struct stream *s)
{
    uint64_t ch;
    memset(s, 0, sizeof(*s));
    s_pre(s, 0x0102030405060708ull, &ch);
    s_rec(s, 0, ch);
    s_rec(s, 1, ch);
    s_rec(s, 5, ch);
    s_rec(s, 12, ch);
    s_switch(s, 42, &ch);
    s_rec(s, 0, ch);
    s_rec(s, 37, ch);
    s_switch(s, UINT64_MAX, &ch);
    s_switch(s, 7, &ch); /* two in a row: the last one counts */
    s_rec(s, 4, ch);
    s_rec(s, 100, ch);
    s_rec(s, 0, ch);
}

/* The records g got are exactly those of s. */
static int same(const struct stream *s, const struct got *g, const char *ctx)
{
    if (g->n != s->nrec) {
        fprintf(stderr, "%s: %d records, want %d\n", ctx, g->n, s->nrec);
        return 0;
    }
    for (int i = 0; i < s->nrec; i++) {
        if (g->channel[i] != s->channel[i] || g->len[i] != s->len[i] ||
            (s->len[i] && memcmp(g->data[i], s->b + s->off[i], s->len[i]) != 0)) {
            fprintf(stderr, "%s: record %d differs (channel %llu len %zu)\n", ctx, i,
                    (unsigned long long)g->channel[i], g->len[i]);
            return 0;
        }
    }
    return 1;
}

/* Feeds s cut at the given points (ascending, inside (0, n)); checks everything. */
static void run_cuts(const struct stream *s, const size_t *cuts, int ncuts, const char *ctx)
{
    struct nx_qrec r;
    struct got g;
    const char *why = NULL;
    got_init(&g);
    nx_qrec_init(&r);
    size_t at = 0;
    for (int i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : s->n;
        QH_CHECK(feed(&r, &g, s->b + at, end - at, &why) == 0);
        at = end;
    }
    QH_CHECK(same(s, &g, ctx));
    QH_CHECK(nx_qrec_end(&r, &why) == 0);
    QH_CHECK(g.out == 0 && g.gets == g.puts); /* every buffer back once delivered */
    nx_qrec_fini(&r, &ops, &g);
    got_free(&g);
}

static void test_splits(void)
{
    static struct stream s;
    sample(&s);
    run_cuts(&s, NULL, 0, "whole");
    for (size_t i = 1; i < s.n; i++) {
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "cut at %zu", i);
        run_cuts(&s, &i, 1, ctx);
        for (size_t j = i + 1; j < s.n; j++) {
            size_t c[2] = {i, j};
            snprintf(ctx, sizeof(ctx), "cut at %zu and %zu", i, j);
            run_cuts(&s, c, 2, ctx);
        }
    }
    size_t *every = malloc(s.n * sizeof(*every));
    for (size_t i = 1; i < s.n; i++)
        every[i - 1] = i;
    run_cuts(&s, every, (int)s.n - 1, "byte by byte");
    free(every);
}

/* Whole in one call: straight from the caller's bytes, no buffer.  Cut inside a body:
 * one buffer of exactly the record's length, handed back after delivery. */
static void test_copies(void)
{
    static struct stream s;
    uint64_t ch;
    memset(&s, 0, sizeof(s));
    s_pre(&s, 9, &ch);
    s_rec(&s, 1000, ch);
    struct nx_qrec r;
    struct got g;
    const char *why;
    got_init(&g);
    nx_qrec_init(&r);
    QH_CHECK(feed(&r, &g, s.b, s.n, &why) == 0);
    QH_CHECK(g.n == 1 && !g.copied[0] && g.gets == 0);
    got_free(&g);

    got_init(&g);
    nx_qrec_init(&r);
    QH_CHECK(feed(&r, &g, s.b, 12 + 4 + 300, &why) == 0);
    QH_CHECK(g.n == 0 && g.gets == 1 && g.last_get == 1000 && g.out == 1);
    QH_CHECK(feed(&r, &g, s.b + 316, s.n - 316, &why) == 0);
    QH_CHECK(g.n == 1 && g.copied[0] && g.out == 0 && same(&s, &g, "copied"));
    got_free(&g);
}

/* One feed; returns its result and the reason. */
static int one(const struct stream *s, const char **why, struct got *g, struct nx_qrec *r)
{
    got_init(g);
    nx_qrec_init(r);
    *why = NULL;
    return feed(r, g, s->b, s->n, why);
}

static void test_refusals(void)
{
    static struct stream s;
    struct nx_qrec r;
    struct got g;
    const char *why;
    uint64_t ch;

    /* Bad magic: refused once the 12 bytes are here, not before. */
    memset(&s, 0, sizeof(s));
    s_pre(&s, 1, &ch);
    s.b[3] = '2';
    got_init(&g);
    nx_qrec_init(&r);
    QH_CHECK(feed(&r, &g, s.b, 11, &why) == 0);
    QH_CHECK(feed(&r, &g, s.b + 11, 1, &why) == -EPROTO);
    QH_CHECK(why && !strcmp(why, "bad stream preamble"));
    /* It stays refused, whatever comes. */
    why = NULL;
    QH_CHECK(feed(&r, &g, (const uint8_t *)"nxq1", 4, &why) == -EPROTO);
    QH_CHECK(why && !strcmp(why, "bad stream preamble"));
    QH_CHECK(nx_qrec_end(&r, &why) == -EPROTO && !strcmp(why, "bad stream preamble"));

    /* NX_TMSG_MAX + 1: refused from the header alone, after the records before it, and
     * no buffer asked for. */
    memset(&s, 0, sizeof(s));
    s_pre(&s, 1, &ch);
    s_rec(&s, 3, ch);
    put_be(&s, (uint64_t)NX_TMSG_MAX + 1, 4);
    QH_CHECK(one(&s, &why, &g, &r) == -EPROTO);
    QH_CHECK(why && !strcmp(why, "record longer than NX_TMSG_MAX"));
    QH_CHECK(g.n == 1 && g.len[0] == 3 && g.gets == 0);
    got_free(&g);
    /* The largest "length" below the switch marker, too. */
    s.n -= 4;
    put_be(&s, NX_QSWITCH - 1, 4);
    QH_CHECK(one(&s, &why, &g, &r) == -EPROTO);
    QH_CHECK(why && !strcmp(why, "record longer than NX_TMSG_MAX"));
    got_free(&g);

    /* Exactly NX_TMSG_MAX is a record: a buffer of that size once its bytes start. */
    s.n -= 4;
    put_be(&s, NX_TMSG_MAX, 4);
    s.b[s.n++] = 0xab;
    QH_CHECK(one(&s, &why, &g, &r) == 0);
    QH_CHECK(g.gets == 1 && g.last_get == NX_TMSG_MAX);
    QH_CHECK(nx_qrec_end(&r, &why) == -EPROTO && !strcmp(why, "stream ended inside a record"));
    nx_qrec_fini(&r, &ops, &g);
    QH_CHECK(g.out == 0);
    got_free(&g);
}

/* Where a FIN may come: only between records, and not before the preamble is whole. */
static void test_ends(void)
{
    static struct stream s;
    struct nx_qrec r;
    struct got g;
    const char *why;
    uint64_t ch;
    memset(&s, 0, sizeof(s));
    s_pre(&s, 5, &ch);
    size_t after_pre = s.n;
    s_rec(&s, 6, ch);
    size_t after_rec = s.n;
    s_switch(&s, 6, &ch);
    size_t after_switch = s.n;
    const struct {
        size_t at;
        int ok;
    } cases[] = {
        {0, 0},  {5, 0},  {after_pre, 1}, {after_pre + 2, 0}, {after_pre + 4, 0},
        {after_rec - 1, 0}, {after_rec, 1}, {after_rec + 4, 0}, {after_switch - 1, 0},
        {after_switch, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        got_init(&g);
        nx_qrec_init(&r);
        QH_CHECK(feed(&r, &g, s.b, cases[i].at, &why) == 0);
        int e = nx_qrec_end(&r, &why);
        if (cases[i].ok) {
            QH_CHECK(e == 0);
        } else {
            QH_CHECK(e == -EPROTO && !strcmp(why, "stream ended inside a record"));
        }
        if ((e == 0) != cases[i].ok)
            fprintf(stderr, "end at %zu: %d\n", cases[i].at, e);
        nx_qrec_fini(&r, &ops, &g);
        got_free(&g);
    }
}

/* The switch marker: the records after it are of the new channel, and a switch is no
 * record. */
static void test_switch(void)
{
    static struct stream s;
    struct nx_qrec r;
    struct got g;
    const char *why;
    uint64_t ch;
    memset(&s, 0, sizeof(s));
    s_pre(&s, 1, &ch);
    s_rec(&s, 2, ch);
    s_switch(&s, 2, &ch);
    s_rec(&s, 2, ch);
    s_switch(&s, 1, &ch);
    s_rec(&s, 2, ch);
    QH_CHECK(one(&s, &why, &g, &r) == 0);
    QH_CHECK(g.n == 3 && g.channel[0] == 1 && g.channel[1] == 2 && g.channel[2] == 1);
    QH_CHECK(r.channel == 1);
    got_free(&g);
}

/* The consumer stops the parse (on_message closed the peer): nothing after is read. */
static void test_stop(void)
{
    static struct stream s;
    sample(&s);
    struct nx_qrec r;
    struct got g;
    const char *why;
    for (int k = 0; k < s.nrec; k++) {
        got_init(&g);
        g.stop_at = k;
        nx_qrec_init(&r);
        QH_CHECK(feed(&r, &g, s.b, s.n, &why) == 1);
        QH_CHECK(g.n == k + 1);
        QH_CHECK(nx_qrec_end(&r, &why) == 0); /* it stopped between records */
        nx_qrec_fini(&r, &ops, &g);
        QH_CHECK(g.out == 0);
        got_free(&g);
    }
}

/* Records of 4096 bytes and more stream where the owner takes them: cut at random points
 * (and so that a record starts a few bytes before a cut), every record comes out whole
 * and in order, streamed or delivered; one that lies whole in a piece is delivered; a
 * stream cut off inside a record ends broken. */
static void test_streams(void)
{
    static struct stream s;
    uint64_t ch;
    memset(&s, 0, sizeof(s));
    s_pre(&s, 3, &ch);
    s_rec(&s, 4095, ch);
    s_rec(&s, 4096, ch);
    s_rec(&s, 7, ch);
    s_rec(&s, 20000, ch);
    s_switch(&s, 5, &ch);
    s_rec(&s, 5000, ch);
    s_rec(&s, 0, ch);
    s_rec(&s, 70000, ch);
    s_rec(&s, 4100, ch);
    uint32_t seed = 12345;
    for (int trial = 0; trial < 3000; trial++) {
        size_t cuts[400];
        int n = 0;
        size_t at = 0;
        if (trial % 5 == 1) { /* each record begins 1..130 bytes before a cut */
            for (int i = 0; i < s.nrec; i++) {
                seed = seed * 1103515245u + 12345u;
                size_t c = s.off[i] + 1 + (seed >> 8) % 130;
                if (c > at && c < s.n)
                    cuts[n++] = at = c;
            }
        } else {
            for (;;) {
                seed = seed * 1103515245u + 12345u;
                size_t step = 1 + (seed >> 8) % (trial % 3 == 0 ? 3000 : 1400);
                if (at + step >= s.n || n == 399)
                    break;
                cuts[n++] = at += step;
            }
        }
        for (int accept = 0; accept <= 2; accept++) {
            struct nx_qrec r;
            struct got g;
            const char *why = NULL;
            got_init(&g);
            g.accept = accept;
            nx_qrec_init(&r);
            size_t from = 0;
            for (int i = 0; i <= n; i++) {
                size_t end = i < n ? cuts[i] : s.n;
                QH_CHECK(feed(&r, &g, s.b + from, end - from, &why) == 0);
                from = end;
            }
            char ctx[64];
            snprintf(ctx, sizeof(ctx), "streams, trial %d accept %d", trial, accept);
            QH_CHECK(same(&s, &g, ctx));
            QH_CHECK(g.bad == 0 && g.ends_broken == 0);
            QH_CHECK(g.ends_whole == (accept == 0 ? 0 : accept == 1 ? g.offers
                                                                    : (g.offers + 1) / 2));
            QH_CHECK(g.out == 0 && g.gets == g.puts);
            QH_CHECK(nx_qrec_end(&r, &why) == 0);
            nx_qrec_fini(&r, &sops, &g);
            got_free(&g);
        }
    }
    /* Only the 4096+ records that came in pieces are offered: whole, nothing is. */
    struct nx_qrec r;
    struct got g;
    const char *why = NULL;
    got_init(&g);
    g.accept = 1;
    nx_qrec_init(&r);
    QH_CHECK(feed(&r, &g, s.b, s.n, &why) == 0 && g.offers == 0 && g.n == s.nrec);
    nx_qrec_fini(&r, &sops, &g);
    got_free(&g);
    /* Byte by byte: the 5 long records gather their heads, then stream. */
    got_init(&g);
    g.accept = 1;
    nx_qrec_init(&r);
    for (size_t i = 0; i < s.n; i++)
        QH_CHECK(feed(&r, &g, s.b + i, 1, &why) == 0);
    QH_CHECK(same(&s, &g, "streams, byte by byte") && g.bad == 0);
    QH_CHECK(g.offers == 5 && g.ends_whole == 5 && g.out == 0);
    nx_qrec_fini(&r, &sops, &g);
    got_free(&g);
    /* Cut off inside a streamed record: fini ends it broken, once. */
    got_init(&g);
    g.accept = 1;
    nx_qrec_init(&r);
    size_t mid = s.off[3] + 9000;
    QH_CHECK(feed(&r, &g, s.b, s.off[3] + 500, &why) == 0);
    QH_CHECK(feed(&r, &g, s.b + s.off[3] + 500, mid - s.off[3] - 500, &why) == 0);
    QH_CHECK(g.offers == 1 && g.ends_whole == 0 && g.ends_broken == 0);
    QH_CHECK(nx_qrec_end(&r, &why) == -EPROTO);
    nx_qrec_fini(&r, &sops, &g);
    QH_CHECK(g.ends_broken == 1 && g.bad == 0 && g.out == 0);
    nx_qrec_fini(&r, &sops, &g); /* again: nothing more */
    QH_CHECK(g.ends_broken == 1);
    got_free(&g);
}

int main(void)
{
    test_splits();
    test_copies();
    test_refusals();
    test_ends();
    test_switch();
    test_stop();
    test_streams();
    if (qh_failures) {
        fprintf(stderr, "test_qrecord: %d failures\n", qh_failures);
        return 1;
    }
    printf("test_qrecord: ok\n");
    return 0;
}
