/*
 * fuzz_qrecord.c - libFuzzer target for the QUIC stream record parser
 * (daemon/transport/quic/quic_record.c): the bytes a peer daemon writes on one stream.
 *
 * Input: one control byte, then the stream.  The control byte seeds the split points and
 * says after which record (if any) the consumer stops the parse, as the transport does
 * when on_message closes the peer.  The stream is parsed three ways:
 *   - by a reference parser below, written for clarity, over the whole input at once;
 *   - by nx_qrec_feed() with the whole input in one call;
 *   - by nx_qrec_feed() in pseudo-random pieces (1 byte to 64 KiB);
 *   - the same, with an owner that takes the long records it is offered streamed (all,
 *     or every other one), hashing their bytes as they come.
 * All must give the same records (channel, length, contents), the same verdict
 * (the same reason on a violation) and agree whether the stream may end here.  Every
 * buffer the parser asks for must be of the record's length, at most NX_TMSG_MAX, and
 * come back exactly once.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "quic_record.h"
#include "fuzz.h"


#define MAX_RECS 4096

struct seen {
    size_t n;
    uint64_t channel[MAX_RECS];
    uint32_t length[MAX_RECS];
    uint64_t hash[MAX_RECS];
    size_t stop_after; /* deliver returns nonzero for record number stop_after */
    size_t bufs_out;   /* buffers handed out and not back yet */
    uint64_t partial;  /* reference: the length of a record cut off by the end, if known */
};

static struct seen ref, whole, split, streamed;

/* The one record streaming now (the parser has at most one). */
static struct {
    int out;
    uint64_t channel, hash, head_hash;
    size_t len, have, offers;
    int every_other;
} sk;

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void record(struct seen *s, uint64_t channel, const uint8_t *d, size_t len)
{
    CHECK(len <= NX_TMSG_MAX);
    CHECK(len == 0 || d != NULL);
    if (s->n < MAX_RECS) {
        s->channel[s->n] = channel;
        s->length[s->n] = (uint32_t)len;
        s->hash[s->n] = len ? fnv1a(d, len) : 0;
    }
    s->n++;
}

/* ---- the reference: the format of quic_record.h, read straight off the buffer ---- */

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Returns what nx_qrec_feed must: 0, 1 (stopped) or -EPROTO with *why; *at_end says
 * whether the bytes end between records. */
static int reference(const uint8_t *d, size_t n, struct seen *s, const char **why,
                     int *at_end)
{
    size_t off = 0;
    *at_end = 0;
    if (n < NX_QPRE_LEN)
        return 0;
    if (memcmp(d, "nxq1", 4) != 0) {
        *why = "bad stream preamble";
        return -EPROTO;
    }
    uint64_t channel = be(d + 4, 8);
    off = NX_QPRE_LEN;
    for (;;) {
        *at_end = off == n;
        if (n - off < 4)
            return 0;
        uint64_t len = be(d + off, 4);
        if (len == 0xffffffffu) {
            if (n - off < 12) {
                *at_end = 0;
                return 0;
            }
            channel = be(d + off + 4, 8);
            off += 12;
            continue;
        }
        if (len > 64u << 20) {
            *at_end = 0;
            *why = "record longer than NX_TMSG_MAX";
            return -EPROTO;
        }
        if (n - off - 4 < len) {
            *at_end = 0;
            s->partial = len;
            return 0;
        }
        record(s, channel, d + off + 4, len);
        off += 4 + len;
        if (s->n - 1 == s->stop_after) {
            *at_end = 1;
            return 1;
        }
    }
}

/* ---- the parser under test ---- */

/* Record buffers end right at a PROT_NONE page, so that a write past the record's length
 * faults however long it is.  One region serves every buffer: the parser holds one at a
 * time, and ASan's malloc would poison shadow for up to 64 MiB on every call. */
static uint8_t *region_end;

static void *buf_get(void *arg, size_t len, size_t *cap)
{
    struct seen *s = arg;
    /* The buffer is for the next record, of the length its header gave. */
    CHECK(len == (s->n < ref.n ? ref.length[s->n] : ref.partial));
    CHECK(len <= NX_TMSG_MAX);
    CHECK(s->bufs_out == 0);
    s->bufs_out++;
    if (!region_end) {
        size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        uint8_t *m = mmap(NULL, NX_TMSG_MAX + pg, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        CHECK(m != MAP_FAILED);
        region_end = m + NX_TMSG_MAX;
        CHECK(mprotect(region_end, pg, PROT_NONE) == 0);
    }
    *cap = len;
    return region_end - len;
}

static void buf_put(void *arg, void *buf, size_t cap)
{
    struct seen *s = arg;
    if (buf) {
        CHECK(s->bufs_out == 1 && (uint8_t *)buf + cap == region_end);
        s->bufs_out--;
    }
}

static int deliver(void *arg, uint64_t channel, const uint8_t *d, size_t len)
{
    struct seen *s = arg;
    record(s, channel, d, len);
    return s->n - 1 == s->stop_after;
}

static void *s_begin(void *arg, uint64_t channel, const uint8_t *head, size_t headlen,
                     size_t len)
{
    (void)arg;
    CHECK(!sk.out);
    CHECK(len >= NX_QREC_STREAM_MIN && len <= NX_TMSG_MAX);
    CHECK(headlen >= NX_QREC_HEAD && headlen < len);
    if (sk.every_other && sk.offers++ % 2)
        return NULL;
    sk.out = 1;
    sk.channel = channel;
    sk.len = len;
    sk.have = 0;
    sk.hash = 1469598103934665603ull;
    sk.head_hash = fnv1a(head, NX_QREC_HEAD);
    return &sk;
}

static int s_data(void *arg, void *sink, const uint8_t *d, size_t n)
{
    (void)arg;
    CHECK(sink == &sk && sk.out && n > 0 && sk.have + n <= sk.len);
    if (sk.have == 0)
        CHECK(n < NX_QREC_HEAD || fnv1a(d, NX_QREC_HEAD) == sk.head_hash);
    for (size_t i = 0; i < n; i++)
        sk.hash = (sk.hash ^ d[i]) * 1099511628211ull;
    sk.have += n;
    return 0;
}

static void s_end(void *arg, void *sink, int whole_rec)
{
    struct seen *s = arg;
    CHECK(sink == &sk && sk.out);
    sk.out = 0;
    if (!whole_rec) {
        CHECK(sk.have < sk.len);
        return;
    }
    CHECK(sk.have == sk.len);
    if (s->n < MAX_RECS) {
        s->channel[s->n] = sk.channel;
        s->length[s->n] = (uint32_t)sk.len;
        s->hash[s->n] = sk.hash;
    }
    s->n++;
}

static const struct nx_qrec_ops ops = {buf_get, buf_put, deliver, NULL, NULL, NULL};
static const struct nx_qrec_ops sops = {buf_get, buf_put, deliver, s_begin, s_data, s_end};

static uint32_t next_rand(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* Feeds data in pseudo-random pieces: mostly 1 to small bytes, now and then up to 64 KiB;
 * stops at the parser's first nonzero return, which it returns. */
static int feed_pieces(struct nx_qrec *r, const uint8_t *data, size_t size, uint32_t small,
                       const struct nx_qrec_ops *o, struct seen *s, uint32_t *rnd,
                       const char **why)
{
    int rv = 0;
    for (size_t off = 0; off < size && rv == 0;) {
        uint32_t x = next_rand(rnd);
        size_t piece = (x & 0x300) ? 1 + (x % small) : 1 + (x % 65536);
        if (piece > size - off)
            piece = size - off;
        rv = nx_qrec_feed(r, data + off, piece, o, s, why);
        off += piece;
    }
    return rv;
}

static void compare(const struct seen *a, const struct seen *b)
{
    CHECK(a->n == b->n);
    size_t n = a->n < MAX_RECS ? a->n : MAX_RECS;
    for (size_t i = 0; i < n; i++) {
        CHECK(a->channel[i] == b->channel[i]);
        CHECK(a->length[i] == b->length[i]);
        CHECK(a->hash[i] == b->hash[i]);
    }
}

static void check_end(const struct nx_qrec *r, int rv, const char *why, int ref_at_end)
{
    const char *ewhy = NULL;
    int e = nx_qrec_end(r, &ewhy);
    if (rv < 0) {
        CHECK(e == -EPROTO && ewhy == why);
    } else {
        CHECK(e == (ref_at_end ? 0 : -EPROTO));
        if (e)
            CHECK(!strcmp(ewhy, "stream ended inside a record"));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    uint32_t rnd = 0x9e3779b9u * (uint32_t)(ctl + 1);
    data++;
    size--;
    size_t stop_after = ctl & 0x80 ? (size_t)(ctl & 7) : SIZE_MAX;

    memset(&ref, 0, sizeof(ref));
    ref.stop_after = stop_after;
    const char *ref_why = NULL;
    int ref_at_end;
    int ref_rv = reference(data, size, &ref, &ref_why, &ref_at_end);
    if (ref.n > MAX_RECS)
        return 0; /* too many to compare one by one (libFuzzer's inputs stay far below) */

    /* Whole: one call; a buffer only for a record cut off by the end. */
    struct nx_qrec r;
    const char *why = NULL;
    memset(&whole, 0, sizeof(whole));
    whole.stop_after = stop_after;
    nx_qrec_init(&r);
    int rv = nx_qrec_feed(&r, data, size, &ops, &whole, &why);
    CHECK(rv == ref_rv);
    if (rv < 0)
        CHECK(why == r.why && !strcmp(why, ref_why));
    compare(&ref, &whole);
    if (rv != 1)
        check_end(&r, rv, why, ref_at_end);
    nx_qrec_fini(&r, &ops, &whole);
    CHECK(whole.bufs_out == 0);

    /* Split: pieces of every size, mostly small. */
    memset(&split, 0, sizeof(split));
    split.stop_after = stop_after;
    nx_qrec_init(&r);
    rv = feed_pieces(&r, data, size, 17, &ops, &split, &rnd, &why);
    CHECK(rv == ref_rv);
    compare(&ref, &split);
    if (rv < 0) {
        CHECK(!strcmp(why, ref_why));
        /* A failed stream stays failed, whatever comes next. */
        const char *again = NULL;
        CHECK(nx_qrec_feed(&r, (const uint8_t *)"nxq1", 4, &ops, &split, &again) == -EPROTO);
        CHECK(again == why);
    }
    if (rv != 1)
        check_end(&r, rv, why, ref_at_end);
    nx_qrec_fini(&r, &ops, &split);
    CHECK(split.bufs_out == 0);

    /* Streamed where offered (no stop: a streamed record's end cannot stop the parse). */
    if (stop_after != SIZE_MAX)
        return 0;
    memset(&streamed, 0, sizeof(streamed));
    streamed.stop_after = SIZE_MAX;
    memset(&sk, 0, sizeof(sk));
    sk.every_other = ctl & 1;
    nx_qrec_init(&r);
    rv = feed_pieces(&r, data, size, 1500, &sops, &streamed, &rnd, &why);
    CHECK(rv == ref_rv);
    compare(&ref, &streamed);
    if (rv < 0)
        CHECK(!strcmp(why, ref_why));
    else
        check_end(&r, rv, why, ref_at_end);
    nx_qrec_fini(&r, &sops, &streamed);
    CHECK(streamed.bufs_out == 0 && !sk.out);
    return 0;
}
