/*
 * test_frame.c - unit tests of proto/frame.c and proto/chan.c: the frame header
 * codec, the incremental parser and the blocking channel helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expect.h"
#include "frame.h"

#define EXPECT_WHY(why, word)                                                      \
    do {                                                                           \
        if (!(why) || !strstr((why), (word))) {                                    \
            fprintf(stderr, "%s:%d: reason \"%s\" does not mention \"%s\"\n",      \
                    __FILE__, __LINE__, (why) ? (why) : "(null)", (word));         \
            failures++;                                                            \
        }                                                                          \
    } while (0)

/* ---- header codec ------------------------------------------------------------ */

static void test_encode_layout(void)
{
    uint8_t b[NX_FRAME_HDR_BYTES];
    memset(b, 0xee, sizeof b);
    nx_frame_hdr_encode(b, NX_MSG_JOIN_REPLY, 0x01020304u);
    static const uint8_t want[NX_FRAME_HDR_BYTES] = {
        'N', 'X', 'F', '1',     /* magic, little-endian 0x3146584e */
        1, 0,                   /* version */
        4, 0,                   /* type */
        0x04, 0x03, 0x02, 0x01, /* length */
        0, 0, 0, 0,             /* flags */
    };
    EXPECT(memcmp(b, want, sizeof want) == 0);
}

static void test_round_trip(void)
{
    static const uint32_t lengths[] = {0, 1, 15, 16, 4096, NX_FRAME_MAX - 1, NX_FRAME_MAX};
    for (uint16_t t = 1; t <= NX_MSG_TYPE_MAX; t++) {
        for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
            uint8_t b[NX_FRAME_HDR_BYTES];
            struct nx_frame_hdr h;
            const char *why = NULL;
            nx_frame_hdr_encode(b, t, lengths[i]);
            EXPECT_EQ(nx_frame_hdr_decode(b, &h, &why), 0);
            EXPECT(why == NULL);
            EXPECT_EQ(h.magic, NX_FRAME_MAGIC);
            EXPECT_EQ(h.version, NX_PROTO_VERSION);
            EXPECT_EQ(h.type, t);
            EXPECT_EQ(h.length, lengths[i]);
            EXPECT_EQ(h.flags, 0);
        }
    }
}

/* Decodes b after one byte was changed; expects rv and a reason naming word. */
static void expect_reject(const uint8_t good[NX_FRAME_HDR_BYTES], size_t at, uint8_t v,
                          int rv, const char *word)
{
    uint8_t b[NX_FRAME_HDR_BYTES];
    struct nx_frame_hdr h;
    const char *why = NULL;
    memcpy(b, good, sizeof b);
    b[at] = v;
    EXPECT_EQ(nx_frame_hdr_decode(b, &h, &why), rv);
    EXPECT_WHY(why, word);
    /* A NULL reason pointer is allowed. */
    EXPECT_EQ(nx_frame_hdr_decode(b, &h, NULL), rv);
}

static void test_reject(void)
{
    uint8_t good[NX_FRAME_HDR_BYTES];
    nx_frame_hdr_encode(good, NX_MSG_HELLO, 10);

    expect_reject(good, 0, 'n', -EPROTO, "magic");
    expect_reject(good, 3, '2', -EPROTO, "magic");
    expect_reject(good, 4, 0, -EPROTONOSUPPORT, "version");
    expect_reject(good, 4, 2, -EPROTONOSUPPORT, "version");
    expect_reject(good, 5, 1, -EPROTONOSUPPORT, "version");
    expect_reject(good, 6, 0, -EPROTO, "type");
    expect_reject(good, 6, NX_MSG_TYPE_MAX + 1, -EPROTO, "type");
    expect_reject(good, 7, 1, -EPROTO, "type");
    expect_reject(good, 12, 1, -EPROTO, "flags");
    expect_reject(good, 15, 0x80, -EPROTO, "flags");

    /* Length: NX_FRAME_MAX is the largest accepted. */
    uint8_t b[NX_FRAME_HDR_BYTES];
    struct nx_frame_hdr h;
    const char *why = NULL;
    nx_frame_hdr_encode(b, NX_MSG_CTL, NX_FRAME_MAX + 1);
    EXPECT_EQ(nx_frame_hdr_decode(b, &h, &why), -EPROTO);
    EXPECT_WHY(why, "longer");
    nx_frame_hdr_encode(b, NX_MSG_CTL, UINT32_MAX);
    EXPECT_EQ(nx_frame_hdr_decode(b, &h, &why), -EPROTO);
}

/* ---- parser ------------------------------------------------------------------- */

#define MAX_GOT 64

struct got {
    int n;
    int stop_at; /* return 42 from the callback for frame number stop_at (1-based) */
    uint16_t type[MAX_GOT];
    uint32_t length[MAX_GOT];
    uint8_t *payload[MAX_GOT];
};

static int on_frame(void *arg, const struct nx_frame_hdr *h, const uint8_t *payload)
{
    struct got *g = arg;
    if (g->n >= MAX_GOT)
        return -1;
    EXPECT(payload != NULL);
    g->type[g->n] = h->type;
    g->length[g->n] = h->length;
    g->payload[g->n] = malloc((size_t)h->length + 1);
    memcpy(g->payload[g->n], payload, h->length);
    g->n++;
    return g->n == g->stop_at ? 42 : 0;
}

static void got_free(struct got *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->payload[i]);
    memset(g, 0, sizeof *g);
}

/* Appends one frame with a patterned payload to buf; returns the new length. */
static size_t put_frame(uint8_t *buf, size_t at, uint16_t type, uint32_t length)
{
    nx_frame_hdr_encode(buf + at, type, length);
    for (uint32_t i = 0; i < length; i++)
        buf[at + NX_FRAME_HDR_BYTES + i] = (uint8_t)(i * 7 + type);
    return at + NX_FRAME_HDR_BYTES + length;
}

static const struct {
    uint16_t type;
    uint32_t length;
} stream_frames[] = {
    {NX_MSG_HELLO, 12},  {NX_MSG_HELLO_REPLY, 0}, {NX_MSG_JOIN, 1},  {NX_MSG_JOIN_REPLY, 300},
    {NX_MSG_CTL, 70000}, {NX_MSG_CTL_REPLY, 16},  {NX_MSG_ERROR, 0}, {NX_MSG_CTL, 5},
};
#define N_STREAM (int)(sizeof stream_frames / sizeof stream_frames[0])

static uint8_t *make_stream(size_t *len)
{
    size_t cap = 0;
    for (int i = 0; i < N_STREAM; i++)
        cap += NX_FRAME_HDR_BYTES + stream_frames[i].length;
    uint8_t *buf = malloc(cap);
    size_t at = 0;
    for (int i = 0; i < N_STREAM; i++)
        at = put_frame(buf, at, stream_frames[i].type, stream_frames[i].length);
    *len = at;
    return buf;
}

static void expect_stream(const struct got *g, const char *how)
{
    if (g->n != N_STREAM) {
        fprintf(stderr, "%s: %d frames, expected %d\n", how, g->n, N_STREAM);
        failures++;
        return;
    }
    for (int i = 0; i < N_STREAM; i++) {
        EXPECT_EQ(g->type[i], stream_frames[i].type);
        EXPECT_EQ(g->length[i], stream_frames[i].length);
        for (uint32_t j = 0; j < g->length[i]; j++) {
            if (g->payload[i][j] != (uint8_t)(j * 7 + g->type[i])) {
                fprintf(stderr, "%s: frame %d byte %u differs\n", how, i, j);
                failures++;
                break;
            }
        }
    }
}

static uint32_t xorshift(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static void test_parser_splits(void)
{
    size_t len;
    uint8_t *s = make_stream(&len);
    struct nx_frame_parser p;
    struct got g = {0};

    /* Whole. */
    nx_frame_parser_init(&p);
    EXPECT_EQ(nx_frame_parser_feed(&p, s, len, on_frame, &g), 0);
    expect_stream(&g, "whole");
    nx_frame_parser_fini(&p);
    got_free(&g);

    /* Byte by byte. */
    nx_frame_parser_init(&p);
    for (size_t i = 0; i < len; i++)
        EXPECT_EQ(nx_frame_parser_feed(&p, s + i, 1, on_frame, &g), 0);
    expect_stream(&g, "byte by byte");
    nx_frame_parser_fini(&p);
    got_free(&g);

    /* Random pieces, several seeds; a zero-length feed in between is a no-op. */
    for (uint32_t seed = 1; seed <= 50; seed++) {
        uint32_t x = seed * 2654435761u;
        nx_frame_parser_init(&p);
        for (size_t off = 0; off < len;) {
            size_t piece = 1 + xorshift(&x) % (seed % 2 ? 40 : 20000);
            if (piece > len - off)
                piece = len - off;
            EXPECT_EQ(nx_frame_parser_feed(&p, s + off, piece, on_frame, &g), 0);
            EXPECT_EQ(nx_frame_parser_feed(&p, s + off, 0, on_frame, &g), 0);
            off += piece;
        }
        char how[32];
        snprintf(how, sizeof how, "random split seed %u", seed);
        expect_stream(&g, how);
        nx_frame_parser_fini(&p);
        got_free(&g);
    }
    free(s);
}

static void test_parser_truncated(void)
{
    size_t len;
    uint8_t *s = make_stream(&len);
    struct nx_frame_parser p;
    struct got g = {0};

    /* A stream cut inside the 5th frame's payload delivers the first four; fini
     * frees the partial payload. */
    size_t cut = 0;
    for (int i = 0; i < 4; i++)
        cut += NX_FRAME_HDR_BYTES + stream_frames[i].length;
    cut += NX_FRAME_HDR_BYTES + 100;
    nx_frame_parser_init(&p);
    EXPECT_EQ(nx_frame_parser_feed(&p, s, cut, on_frame, &g), 0);
    EXPECT_EQ(g.n, 4);
    nx_frame_parser_fini(&p);
    got_free(&g);

    /* Cut inside a header. */
    nx_frame_parser_init(&p);
    EXPECT_EQ(nx_frame_parser_feed(&p, s, NX_FRAME_HDR_BYTES - 1, on_frame, &g), 0);
    EXPECT_EQ(g.n, 0);
    nx_frame_parser_fini(&p);
    free(s);
}

static void test_parser_callback_stops(void)
{
    size_t len;
    uint8_t *s = make_stream(&len);
    struct nx_frame_parser p;
    struct got g = {.stop_at = 2};

    nx_frame_parser_init(&p);
    EXPECT_EQ(nx_frame_parser_feed(&p, s, len, on_frame, &g), 42);
    EXPECT_EQ(g.n, 2);
    nx_frame_parser_fini(&p);
    got_free(&g);
    free(s);
}

static void test_parser_bad_streams(void)
{
    static const struct {
        size_t at;
        uint8_t v;
        int rv;
        const char *word;
    } bad[] = {
        {0, 'X', -EPROTO, "magic"},
        {4, 9, -EPROTONOSUPPORT, "version"},
        {6, 0, -EPROTO, "type"},
        {6, 200, -EPROTO, "type"},
        {13, 1, -EPROTO, "flags"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* Two good frames, then a bad header, then a good frame. */
        uint8_t buf[4 * NX_FRAME_HDR_BYTES + 30];
        size_t at = put_frame(buf, 0, NX_MSG_HELLO, 10);
        at = put_frame(buf, at, NX_MSG_CTL, 0);
        size_t bad_at = at;
        at = put_frame(buf, at, NX_MSG_JOIN, 10);
        at = put_frame(buf, at, NX_MSG_CTL, 10);
        buf[bad_at + bad[i].at] = bad[i].v;

        for (int bytewise = 0; bytewise <= 1; bytewise++) {
            struct nx_frame_parser p;
            struct got g = {0};
            int rv = 0;
            nx_frame_parser_init(&p);
            if (bytewise) {
                for (size_t j = 0; j < at && rv == 0; j++)
                    rv = nx_frame_parser_feed(&p, buf + j, 1, on_frame, &g);
            } else {
                rv = nx_frame_parser_feed(&p, buf, at, on_frame, &g);
            }
            EXPECT_EQ(rv, bad[i].rv);
            EXPECT_EQ(p.failed, bad[i].rv);
            EXPECT_WHY(p.why, bad[i].word);
            EXPECT_EQ(g.n, 2);
            /* Failed for good: a fresh good frame is refused too. */
            uint8_t more[NX_FRAME_HDR_BYTES];
            nx_frame_hdr_encode(more, NX_MSG_HELLO, 0);
            EXPECT_EQ(nx_frame_parser_feed(&p, more, sizeof more, on_frame, &g), bad[i].rv);
            EXPECT_EQ(g.n, 2);
            nx_frame_parser_fini(&p);
            got_free(&g);
        }
    }
}

static void test_parser_sizes(void)
{
    /* The largest frame passes; one byte more fails before any payload arrives. */
    size_t len = NX_FRAME_HDR_BYTES + NX_FRAME_MAX;
    uint8_t *buf = malloc(len);
    put_frame(buf, 0, NX_MSG_CTL_REPLY, NX_FRAME_MAX);
    struct nx_frame_parser p;
    struct got g = {0};
    nx_frame_parser_init(&p);
    EXPECT_EQ(nx_frame_parser_feed(&p, buf, len, on_frame, &g), 0);
    EXPECT_EQ(g.n, 1);
    EXPECT_EQ(g.length[0], NX_FRAME_MAX);
    EXPECT_EQ(g.payload[0][NX_FRAME_MAX - 1], (uint8_t)((NX_FRAME_MAX - 1) * 7 + NX_MSG_CTL_REPLY));
    got_free(&g);

    uint8_t hdr[NX_FRAME_HDR_BYTES];
    nx_frame_hdr_encode(hdr, NX_MSG_CTL, NX_FRAME_MAX + 1);
    EXPECT_EQ(nx_frame_parser_feed(&p, hdr, sizeof hdr, on_frame, &g), -EPROTO);
    EXPECT_WHY(p.why, "longer");
    EXPECT(p.payload == NULL);
    EXPECT_EQ(g.n, 0);
    nx_frame_parser_fini(&p);
    free(buf);
}

/* ---- channel helpers -------------------------------------------------------------- */

static void test_chan(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        perror("socketpair");
        failures++;
        return;
    }
    struct nx_frame_hdr h;
    uint8_t *payload = NULL;
    int fds[NX_FRAME_MAX_FDS], nfds = -1;

    /* A frame with a payload and two fds. */
    int e1 = eventfd(0, EFD_CLOEXEC), e2 = eventfd(0, EFD_CLOEXEC);
    int send_fds[2] = {e1, e2};
    static const uint8_t msg[] = "join me";
    EXPECT_EQ(nx_chan_send(sv[0], NX_MSG_JOIN_REPLY, msg, sizeof msg, send_fds, 2), 0);
    EXPECT_EQ(nx_chan_recv(sv[1], &h, &payload, 1000, fds, NX_FRAME_MAX_FDS, &nfds), 0);
    EXPECT_EQ(h.type, NX_MSG_JOIN_REPLY);
    EXPECT_EQ(h.length, sizeof msg);
    EXPECT(payload != NULL && memcmp(payload, msg, sizeof msg) == 0);
    EXPECT_EQ(nfds, 2);
    if (nfds == 2) {
        /* The received fds name the same eventfds. */
        uint64_t one = 1, v = 0;
        EXPECT_EQ(write(e1, &one, sizeof one), (long long)sizeof one);
        EXPECT_EQ(read(fds[0], &v, sizeof v), (long long)sizeof v);
        EXPECT_EQ(v, 1);
        EXPECT((fcntl(fds[0], F_GETFD) & FD_CLOEXEC) != 0);
        close(fds[0]);
        close(fds[1]);
    }
    free(payload);
    close(e1);
    close(e2);

    /* Descriptors that find no room in the receiver (its table is full): -EMFILE, the
     * frame consumed whole, nothing left open, and the next frame reads as usual. */
    {
        struct rlimit old, low;
        getrlimit(RLIMIT_NOFILE, &old);
        int spare[64], nspare = 0, top = dup(0);
        low.rlim_cur = (rlim_t)top + 4;
        low.rlim_max = old.rlim_max;
        close(top);
        EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
        for (int fd; nspare < 64 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
            spare[nspare++] = fd;
        EXPECT_EQ(nx_chan_send(sv[0], NX_MSG_JOIN_REPLY, msg, sizeof msg, send_fds, 2), 0);
        nfds = -1;
        EXPECT_EQ(nx_chan_recv(sv[1], &h, &payload, 1000, fds, NX_FRAME_MAX_FDS, &nfds), -EMFILE);
        EXPECT_EQ(nfds, 0);
        EXPECT(payload == NULL);
        for (int i = 0; i < nspare; i++)
            close(spare[i]);
        setrlimit(RLIMIT_NOFILE, &old);
        EXPECT_EQ(nx_chan_send(sv[0], NX_MSG_HELLO, msg, 3, NULL, 0), 0);
        EXPECT_EQ(nx_chan_recv(sv[1], &h, &payload, 1000, fds, NX_FRAME_MAX_FDS, &nfds), 0);
        EXPECT_EQ(h.type, NX_MSG_HELLO);
        EXPECT_EQ(nfds, 0);
        free(payload);
    }

    /* An empty frame without fds. */
    EXPECT_EQ(nx_chan_send(sv[1], NX_MSG_HELLO, NULL, 0, NULL, 0), 0);
    EXPECT_EQ(nx_chan_recv(sv[0], &h, &payload, 1000, NULL, 0, NULL), 0);
    EXPECT_EQ(h.type, NX_MSG_HELLO);
    EXPECT_EQ(h.length, 0);
    EXPECT(payload != NULL);
    free(payload);

    /* Bad arguments to send. */
    EXPECT_EQ(nx_chan_send(sv[0], NX_MSG_CTL, msg, NX_FRAME_MAX + 1, NULL, 0), -EINVAL);
    EXPECT_EQ(nx_chan_send(sv[0], NX_MSG_CTL, msg, 1, send_fds, NX_FRAME_MAX_FDS + 1),
              -EINVAL);

    /* Nothing to read: times out. */
    EXPECT_EQ(nx_chan_recv(sv[0], &h, &payload, 50, NULL, 0, NULL), -ETIMEDOUT);
    EXPECT(payload == NULL);

    /* A bad header is -EPROTO. */
    uint8_t bad[NX_FRAME_HDR_BYTES];
    nx_frame_hdr_encode(bad, NX_MSG_CTL, 0);
    bad[0] = 'Z';
    EXPECT_EQ(write(sv[1], bad, sizeof bad), (long long)sizeof bad);
    EXPECT_EQ(nx_chan_recv(sv[0], &h, &payload, 1000, NULL, 0, NULL), -EPROTO);

    /* The peer closes halfway through a payload: -ECONNRESET. */
    nx_frame_hdr_encode(bad, NX_MSG_CTL, 100);
    EXPECT_EQ(write(sv[1], bad, sizeof bad), (long long)sizeof bad);
    EXPECT_EQ(write(sv[1], "abc", 3), 3);
    close(sv[1]);
    EXPECT_EQ(nx_chan_recv(sv[0], &h, &payload, 1000, NULL, 0, NULL), -ECONNRESET);
    EXPECT(payload == NULL);
    close(sv[0]);
}

int main(void)
{
    test_encode_layout();
    test_round_trip();
    test_reject();
    test_parser_splits();
    test_parser_truncated();
    test_parser_callback_stops();
    test_parser_bad_streams();
    test_parser_sizes();
    test_chan();
    if (failures) {
        fprintf(stderr, "test_frame: %d failures\n", failures);
        return 1;
    }
    printf("test_frame: ok\n");
    return 0;
}
