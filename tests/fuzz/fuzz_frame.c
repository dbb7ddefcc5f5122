/*
 * fuzz_frame.c - libFuzzer target for the control-socket frame parser.
 *
 * Input: one byte that seeds the split points, then a byte stream as a client
 * could write it to nexard's socket.  The stream is fed to nx_frame_parser_feed()
 * twice: once whole and once in pseudo-random pieces (1 byte to 64 KiB).  Both
 * runs must deliver the same frames and end in the same state.  Each frame's
 * payload is decoded with the protobuf-c unpacker of the type its header names,
 * as the daemon does, and a message that decodes is packed again (to the size
 * protobuf-c predicts).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "nexar.pb-c.h"
#include "fuzz.h"

#define MAX_FRAMES 4096

struct seen {
    size_t n;
    uint16_t type[MAX_FRAMES];
    uint32_t length[MAX_FRAMES];
    uint64_t hash[MAX_FRAMES];
};

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

_Static_assert(NX_MSG_TYPE_MAX == 12, "descriptor_for() names every frame type");

static const ProtobufCMessageDescriptor *descriptor_for(uint16_t type)
{
    switch (type) {
    case NX_MSG_HELLO: return &nexar__hello__descriptor;
    case NX_MSG_HELLO_REPLY: return &nexar__hello_reply__descriptor;
    case NX_MSG_JOIN: return &nexar__join_request__descriptor;
    case NX_MSG_JOIN_REPLY: return &nexar__join_reply__descriptor;
    case NX_MSG_CTL: return &nexar__ctl_request__descriptor;
    case NX_MSG_CTL_REPLY: return &nexar__ctl_reply__descriptor;
    case NX_MSG_ERROR: return &nexar__error_reply__descriptor;
    case NX_MSG_DEV_REGISTER: return &nexar__device_register__descriptor;
    case NX_MSG_DEV_UNREGISTER: return &nexar__device_unregister__descriptor;
    case NX_MSG_DEV_REPLY: return &nexar__device_reply__descriptor;
    case NX_MSG_COMM_QUERY: return &nexar__comm_query__descriptor;
    case NX_MSG_COMM_REPLY: return &nexar__comm_reply__descriptor;
    default: return NULL;
    }
}

/* Decodes the payload as the daemon (or the shim, for replies) would. */
static void decode(const struct nx_frame_hdr *h, const uint8_t *payload)
{
    const ProtobufCMessageDescriptor *d = descriptor_for(h->type);
    CHECK(d != NULL); /* the parser delivers only known types */
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, h->length, payload);
    if (m == NULL)
        return;
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    CHECK(buf != NULL);
    size_t w = protobuf_c_message_pack(m, buf);
    CHECK(w == n);
    /* Not required to decode again: protobuf-c keeps unknown fields it could not
     * have accepted on a second look (field number 0), and the daemon never
     * re-sends a message it decoded. */
    ProtobufCMessage *again = protobuf_c_message_unpack(d, NULL, n, buf);
    if (again)
        protobuf_c_message_free_unpacked(again, NULL);
    protobuf_c_message_free_unpacked(m, NULL);
    free(buf);
}

static int on_frame(void *arg, const struct nx_frame_hdr *h, const uint8_t *payload)
{
    struct seen *s = arg;
    CHECK(h->magic == NX_FRAME_MAGIC);
    CHECK(h->version == NX_PROTO_VERSION);
    CHECK(h->type >= 1 && h->type <= NX_MSG_TYPE_MAX);
    CHECK(h->length <= NX_FRAME_MAX);
    CHECK(h->flags == 0);
    CHECK(h->length == 0 || payload != NULL);
    if (s->n < MAX_FRAMES) {
        s->type[s->n] = h->type;
        s->length[s->n] = h->length;
        s->hash[s->n] = h->length ? fnv1a(payload, h->length) : 0;
    }
    s->n++;
    decode(h, payload);
    return 0;
}

static uint32_t next_rand(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t rnd = 0x9e3779b9u * (uint32_t)(data[0] + 1);
    data++;
    size--;

    static struct seen whole, split;
    struct nx_frame_parser p;

    whole.n = 0;
    nx_frame_parser_init(&p);
    int rv_whole = nx_frame_parser_feed(&p, data, size, on_frame, &whole);
    nx_frame_parser_fini(&p);
    CHECK(rv_whole == 0 || rv_whole == -EPROTO || rv_whole == -EPROTONOSUPPORT ||
           rv_whole == -ENOMEM);

    split.n = 0;
    nx_frame_parser_init(&p);
    int rv_split = 0;
    size_t off = 0;
    while (off < size && rv_split == 0) {
        uint32_t r = next_rand(&rnd);
        /* Mostly small pieces, now and then a large one. */
        size_t piece = (r & 0x300) ? 1 + (r % 17) : 1 + (r % 65536);
        if (piece > size - off)
            piece = size - off;
        rv_split = nx_frame_parser_feed(&p, data + off, piece, on_frame, &split);
        off += piece;
    }
    /* A failed stream stays failed. */
    if (rv_split != 0)
        CHECK(nx_frame_parser_feed(&p, (const uint8_t *)"x", 1, on_frame, &split) ==
               rv_split);
    nx_frame_parser_fini(&p);

    if (rv_whole != -ENOMEM && rv_split != -ENOMEM) {
        CHECK(rv_whole == rv_split);
        CHECK(whole.n == split.n);
        size_t n = whole.n < MAX_FRAMES ? whole.n : MAX_FRAMES;
        for (size_t i = 0; i < n; i++) {
            CHECK(whole.type[i] == split.type[i]);
            CHECK(whole.length[i] == split.length[i]);
            CHECK(whole.hash[i] == split.hash[i]);
        }
    }
    return 0;
}
