/*
 * test_wire.c - unit tests of proto/wire.c: the daemon-to-daemon envelope and data header.
 *
 * The layout is pinned by a hand-written byte array (a change of it is a wire version
 * bump, not a refactor); everything else is round trips and rejections.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "wire.h"

/* Decoding must fail with -EBADMSG, a reason mentioning word, and a zeroed message. */
#define EXPECT_REJECT(buf, len, word)                                              \
    do {                                                                           \
        struct nx_wire_msg m_;                                                     \
        const char *why_ = NULL;                                                   \
        memset(&m_, 0xa5, sizeof m_);                                              \
        int rv_ = nx_wire_decode((buf), (len), &m_, &why_);                        \
        if (rv_ != -EBADMSG || !why_ || !strstr(why_, (word)) ||                   \
            m_.body != NULL || m_.body_len != 0 || m_.hdr.length != 0) {           \
            fprintf(stderr, "%s:%d: len %zu: rv %d, reason \"%s\", wanted -EBADMSG " \
                    "and \"%s\"\n", __FILE__, __LINE__, (size_t)(len), rv_,        \
                    why_ ? why_ : "(null)", (word));                               \
            failures++;                                                            \
        }                                                                          \
    } while (0)

#define ENV NX_WIRE_ENV_BYTES
#define HDR (NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES)

static const struct nx_data_hdr sample = {
    .job = 0x0102030405060708ull,
    .comm = 0x1112131415161718ull,
    .seq = 0x2122232425262728ull,
    .step = 0x31323334u,
    .sig = 0x41424344u,
    .offset = 0x5152535455565758ull,
    .length = 3,
    .src = 0x61626364u,
    .kind = 0x71, .dtype = 0x72, .redop = 0x73, .root = 0x81828384u,
    .count = 0x9192939495969798ull,
};

static void test_layout(void)
{
    static const uint8_t want[HDR] = {
        'N', 'X', 1, 2,         /* magic 0x584e, version, type DATA */
        0x01, 0, 0, 0,          /* flags: LAST */
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* job */
        0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, /* comm */
        0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, /* seq */
        0x34, 0x33, 0x32, 0x31,                         /* step */
        0x44, 0x43, 0x42, 0x41,                         /* sig */
        0x58, 0x57, 0x56, 0x55, 0x54, 0x53, 0x52, 0x51, /* offset */
        0x03, 0x00, 0x00, 0x00,                         /* length */
        0x64, 0x63, 0x62, 0x61,                         /* src */
        0x71, 0x72, 0x73, 0x00,                         /* kind, dtype, redop, zero */
        0x84, 0x83, 0x82, 0x81,                         /* root */
        0x98, 0x97, 0x96, 0x95, 0x94, 0x93, 0x92, 0x91, /* count */
    };
    uint8_t b[HDR + 8];
    memset(b, 0xee, sizeof b);
    EXPECT_EQ(nx_wire_put_data(b, NX_WIRE_DATA, NX_WIRE_F_LAST, &sample), HDR);
    EXPECT(memcmp(b, want, sizeof want) == 0);
    EXPECT_EQ(b[HDR], 0xee); /* nothing written past the header */

    static const uint8_t want_ctl[ENV] = {'N', 'X', 1, 1, 0, 0, 0, 0};
    memset(b, 0xee, sizeof b);
    EXPECT_EQ(nx_wire_put_ctl(b), ENV);
    EXPECT(memcmp(b, want_ctl, sizeof want_ctl) == 0);
    EXPECT_EQ(b[ENV], 0xee);

    struct nx_data_hdr t = sample;
    t.kind = t.dtype = t.redop = 0;
    t.root = 0;
    t.count = 0;
    memset(b, 0xee, sizeof b);
    EXPECT_EQ(nx_wire_put_data(b, NX_WIRE_TEST, 0, &t), HDR);
    EXPECT_EQ(b[3], 3);
    EXPECT(memcmp(b + 4, "\0\0\0\0", 4) == 0);
    EXPECT(memcmp(b + ENV, want + ENV, 48) == 0);
    static const uint8_t zero[16];
    EXPECT(memcmp(b + ENV + 48, zero, 16) == 0);

    /* The padding byte, and a signature on a test message, are refused. */
    memset(b + HDR, 0, 8);
    nx_wire_put_data(b, NX_WIRE_DATA, 0, &sample);
    b[ENV + 51] = 1;
    EXPECT_REJECT(b, HDR + 3, "padding");
    nx_wire_put_data(b, NX_WIRE_TEST, 0, &sample);
    EXPECT_REJECT(b, HDR + 3, "signature");
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_round_trip(void)
{
    static const uint32_t lengths[] = {0, 1, 7, 48, 1000, 65536};
    uint8_t *b = malloc(HDR + 65536);
    for (int type = NX_WIRE_DATA; type <= NX_WIRE_TEST; type++) {
        for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
            for (int rep = 0; rep < 50; rep++) {
                struct nx_data_hdr h = {
                    .job = next64(), .comm = next64(), .seq = next64(),
                    .step = (uint32_t)next64(), .sig = (uint32_t)next64(),
                    .offset = next64() >> 1, /* the sum with length must not wrap */
                    .length = lengths[i], .src = (uint32_t)next64(),
                };
                if (type == NX_WIRE_DATA) {
                    h.kind = (uint8_t)next64();
                    h.dtype = (uint8_t)next64();
                    h.redop = (uint8_t)next64();
                    h.root = (uint32_t)next64();
                    h.count = next64();
                }
                if (rep == 0)
                    h.offset = UINT64_MAX - h.length; /* the largest that fits */
                uint32_t flags = type == NX_WIRE_DATA ? (uint32_t)(rep & 1) : 0;
                size_t n = nx_wire_put_data(b, type, flags, &h);
                for (uint32_t k = 0; k < h.length; k++)
                    b[n + k] = (uint8_t)(k * 31 + rep);
                struct nx_wire_msg m;
                const char *why = "unset";
                EXPECT_EQ(nx_wire_decode(b, n + h.length, &m, &why), 0);
                EXPECT(why == NULL);
                EXPECT_EQ(m.type, type);
                EXPECT_EQ(m.flags, flags);
                EXPECT(m.hdr.job == h.job && m.hdr.comm == h.comm && m.hdr.seq == h.seq);
                EXPECT(m.hdr.step == h.step && m.hdr.sig == h.sig && m.hdr.src == h.src);
                EXPECT(m.hdr.offset == h.offset && m.hdr.length == h.length);
                EXPECT(m.hdr.kind == h.kind && m.hdr.dtype == h.dtype &&
                       m.hdr.redop == h.redop && m.hdr.root == h.root && m.hdr.count == h.count);
                EXPECT(m.body == b + HDR);
                EXPECT_EQ(m.body_len, h.length);
            }
        }
    }
    /* CTL: the body is whatever follows the envelope. */
    size_t n = nx_wire_put_ctl(b);
    memcpy(b + n, "\x08\x01", 2);
    struct nx_wire_msg m;
    EXPECT_EQ(nx_wire_decode(b, n + 2, &m, NULL), 0);
    EXPECT_EQ(m.type, NX_WIRE_CTL);
    EXPECT_EQ(m.flags, 0);
    EXPECT(m.body == b + ENV);
    EXPECT_EQ(m.body_len, 2);
    free(b);
}

/* Every prefix of a valid message is refused, and so is one extra byte. */
static void test_truncation(void)
{
    uint8_t b[HDR + 16];
    struct nx_data_hdr h = sample;
    h.length = 5;
    h.offset = 0;
    size_t n = nx_wire_put_data(b, NX_WIRE_DATA, 0, &h);
    memset(b + n, 0x5a, 6);
    size_t full = n + h.length;
    EXPECT_REJECT(NULL, 0, "shorter");
    for (size_t len = 0; len < full; len++) {
        if (len < ENV)
            EXPECT_REJECT(b, len, "envelope");
        else if (len < HDR)
            EXPECT_REJECT(b, len, "data header");
        else
            EXPECT_REJECT(b, len, "payload length");
    }
    EXPECT_REJECT(b, full + 1, "payload length");
    struct nx_wire_msg m;
    EXPECT_EQ(nx_wire_decode(b, full, &m, NULL), 0);

    /* Same for TEST, whose payload is the peer-test pattern. */
    n = nx_wire_put_data(b, NX_WIRE_TEST, 0, &h);
    for (size_t len = 0; len < full; len++)
        EXPECT_REJECT(b, len, len < ENV ? "envelope" : len < HDR ? "data header" : "payload");

    /* CTL: the envelope alone is not a message. */
    n = nx_wire_put_ctl(b);
    for (size_t len = 0; len <= n; len++)
        EXPECT_REJECT(b, len, len < ENV ? "envelope" : "without a body");
}

static void test_bad_envelope(void)
{
    uint8_t b[HDR + 4];
    struct nx_data_hdr h = sample;
    h.length = 4;
    h.offset = 0;
    size_t n = nx_wire_put_data(b, NX_WIRE_DATA, NX_WIRE_F_LAST, &h) + 4;
    uint8_t c[sizeof b];

    for (int i = 0; i < 2; i++) { /* every single-bit error of the magic */
        for (int bit = 0; bit < 8; bit++) {
            memcpy(c, b, n);
            c[i] ^= (uint8_t)(1u << bit);
            EXPECT_REJECT(c, n, "magic");
        }
    }
    static const uint8_t versions[] = {0, 2, 3, 0x81, 0xff};
    for (size_t i = 0; i < sizeof versions; i++) {
        memcpy(c, b, n);
        c[2] = versions[i];
        EXPECT_REJECT(c, n, "version");
    }
    static const uint8_t types[] = {0, 5, 6, 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < sizeof types; i++) {
        memcpy(c, b, n);
        c[3] = types[i];
        EXPECT_REJECT(c, n, "type");
    }
    for (int bit = 1; bit < 32; bit++) { /* every flag bit DATA does not know */
        memcpy(c, b, n);
        c[4 + bit / 8] |= (uint8_t)(1u << (bit % 8));
        EXPECT_REJECT(c, n, "flags");
    }
    /* LAST belongs to DATA: on TEST and CTL it is unknown. */
    memcpy(c, b, n);
    c[3] = NX_WIRE_TEST;
    EXPECT_REJECT(c, n, "flags");
    memcpy(c, b, n);
    c[3] = NX_WIRE_CTL;
    EXPECT_REJECT(c, n, "flags");
}

static void test_bad_header(void)
{
    uint8_t b[HDR + 8];
    struct nx_data_hdr h = sample;
    h.length = 8;
    h.offset = UINT64_MAX - 7; /* offset + length == 2^64: wraps */
    size_t n = nx_wire_put_data(b, NX_WIRE_DATA, 0, &h);
    memset(b + n, 1, 8);
    EXPECT_REJECT(b, n + 8, "overflow");
    h.offset = UINT64_MAX - 8;
    nx_wire_put_data(b, NX_WIRE_DATA, 0, &h);
    struct nx_wire_msg m;
    EXPECT_EQ(nx_wire_decode(b, n + 8, &m, NULL), 0);
    /* A length that names more than the message holds (or less). */
    static const uint32_t lies[] = {7, 9, 0, UINT32_MAX};
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        h.offset = 0;
        h.length = lies[i];
        nx_wire_put_data(b, NX_WIRE_DATA, 0, &h);
        EXPECT_REJECT(b, n + 8, "payload length");
    }
}

/* P2P: the layout pinned byte by byte, round trips, and every refusal. */
static void test_p2p(void)
{
    const struct nx_p2p_hdr h = {
        .job = 0x0102030405060708ull, .comm = 0x1112131415161718ull,
        .k = 0x2122232425262728ull, .tag = 0x31323334u, .src = 0x41424344u,
        .dst = 0x51525354u, .dtype = 8 /* i64 */, .count = 0x0010000000000000ull,
        .offset = 0x18, .length = 3,
    };
    static const uint8_t want[NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES] = {
        0x4e, 0x58, 1, 4, 1, 0, 0, 0, /* magic "NX", version, type P2P, flags ACK */
        8, 7, 6, 5, 4, 3, 2, 1, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
        0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, 0x34, 0x33, 0x32, 0x31,
        0x44, 0x43, 0x42, 0x41, 0x54, 0x53, 0x52, 0x51, 8, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0x10, 0, 0x18, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
    };
    uint8_t b[NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES + 16];
    size_t n = nx_wire_put_p2p(b, NX_WIRE_F_ACK, &h);
    EXPECT_EQ(n, sizeof want);
    EXPECT(memcmp(b, want, sizeof want) == 0);

    /* An ACK carries no payload; the same header with its 3 bytes decodes as data. */
    struct nx_wire_msg m;
    const char *why = NULL;
    EXPECT_REJECT(b, n, "payload length");
    memcpy(b + n, "abc", 3);
    EXPECT_REJECT(b, n + 3, "acknowledgement");
    n = nx_wire_put_p2p(b, 0, &h);
    EXPECT_EQ(nx_wire_decode(b, n + 3, &m, &why), 0);
    EXPECT(why == NULL);
    EXPECT_EQ(m.type, NX_WIRE_P2P);
    EXPECT(m.p2p.job == h.job && m.p2p.comm == h.comm && m.p2p.k == h.k);
    EXPECT(m.p2p.tag == h.tag && m.p2p.src == h.src && m.p2p.dst == h.dst);
    EXPECT(m.p2p.dtype == h.dtype && m.p2p.count == h.count);
    EXPECT(m.p2p.offset == h.offset && m.p2p.length == h.length);
    EXPECT(m.body == b + n);
    EXPECT_EQ(m.body_len, 3);

    struct nx_p2p_hdr g = h;
    g.count = 2;
    g.dtype = 3; /* bf16: 4 bytes in all */
    g.offset = 1;
    nx_wire_put_p2p(b, 0, &g);
    EXPECT_EQ(nx_wire_decode(b, n + 3, &m, NULL), 0); /* bytes 1..3 of 4 */
    g.offset = 2;
    nx_wire_put_p2p(b, 0, &g);
    EXPECT_REJECT(b, n + 3, "outside");
    g = h;
    g.dtype = 10;
    nx_wire_put_p2p(b, 0, &g);
    EXPECT_REJECT(b, n + 3, "dtype");
    g = h;
    g.count = UINT64_MAX / 4;
    g.dtype = 1; /* f64: count x 8 overflows */
    nx_wire_put_p2p(b, 0, &g);
    EXPECT_REJECT(b, n + 3, "overflow");
    g = h;
    g.dst = g.src;
    nx_wire_put_p2p(b, 0, &g);
    EXPECT_REJECT(b, n + 3, "itself");
    for (int pad = 37; pad < 40; pad++) {
        nx_wire_put_p2p(b, 0, &h);
        b[NX_WIRE_ENV_BYTES + pad] = 1;
        EXPECT_REJECT(b, n + 3, "padding");
    }
    nx_wire_put_p2p(b, 0, &h);
    b[NX_WIRE_ENV_BYTES + 63] = 1;
    EXPECT_REJECT(b, n + 3, "padding");
    nx_wire_put_p2p(b, 2, &h);
    EXPECT_REJECT(b, n + 3, "flags");
    for (size_t len = NX_WIRE_ENV_BYTES; len < n; len++) {
        nx_wire_put_p2p(b, 0, &h);
        EXPECT_REJECT(b, len, "shorter");
    }
}

int main(void)
{
    test_p2p();
    test_layout();
    test_round_trip();
    test_truncation();
    test_bad_envelope();
    test_bad_header();
    if (failures) {
        fprintf(stderr, "test_wire: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_wire: ok\n");
    return 0;
}
