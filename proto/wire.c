/* wire.c - see wire.h.  Every field is little-endian and read byte by byte: the bytes are
 * another machine's, with no alignment promised and no struct layout shared. */
#include "wire.h"

#include <errno.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static size_t put_env(uint8_t *out, enum nx_wire_type type, uint32_t flags)
{
    put16(out, NX_WIRE_MAGIC);
    out[2] = NX_WIRE_VERSION;
    out[3] = (uint8_t)type;
    put32(out + 4, flags);
    return NX_WIRE_ENV_BYTES;
}

size_t nx_wire_put_ctl(uint8_t *out)
{
    return put_env(out, NX_WIRE_CTL, 0);
}

size_t nx_wire_put_data(uint8_t *out, enum nx_wire_type type, uint32_t flags,
                        const struct nx_data_hdr *h)
{
    uint8_t *p = out + put_env(out, type, flags);
    put64(p, h->job);
    put64(p + 8, h->comm);
    put64(p + 16, h->seq);
    put32(p + 24, h->step);
    put32(p + 28, h->sig);
    put64(p + 32, h->offset);
    put32(p + 40, h->length);
    put32(p + 44, h->src);
    p[48] = h->kind;
    p[49] = h->dtype;
    p[50] = h->redop;
    p[51] = 0;
    put32(p + 52, h->root);
    put64(p + 56, h->count);
    return NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES;
}

/* Layout: job, comm, k (u64); tag, src, dst (u32); dtype (u8), 3 zero bytes; count,
 * offset (u64); length (u32); 4 zero bytes. */
size_t nx_wire_put_p2p(uint8_t *out, uint32_t flags, const struct nx_p2p_hdr *h)
{
    uint8_t *p = out + put_env(out, NX_WIRE_P2P, flags);
    memset(p, 0, NX_P2P_HDR_BYTES);
    put64(p, h->job);
    put64(p + 8, h->comm);
    put64(p + 16, h->k);
    put32(p + 24, h->tag);
    put32(p + 28, h->src);
    put32(p + 32, h->dst);
    p[36] = h->dtype;
    put64(p + 40, h->count);
    put64(p + 48, h->offset);
    put32(p + 56, h->length);
    return NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES;
}

/* Flags a type may carry: each type owns its bits, so a bit never means two things. */
static uint32_t flags_known(uint8_t type)
{
    switch (type) {
    case NX_WIRE_DATA:
        return NX_WIRE_FLAGS_KNOWN;
    case NX_WIRE_P2P:
        return NX_WIRE_P2P_FLAGS_KNOWN;
    default:
        return 0;
    }
}

/* Element sizes of the dtypes (nexar.h order); the wire code links nothing else. */
static const uint8_t dtype_bytes[] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};

#define FAIL(reason)                                                                       \
    do {                                                                                   \
        *why = (reason);                                                                   \
        memset(m, 0, sizeof(*m));                                                          \
        return -EBADMSG;                                                                   \
    } while (0)

static int decode_p2p(const uint8_t *p, size_t len, uint32_t flags, struct nx_wire_msg *m,
                      const char **why)
{
    if (len < NX_P2P_HDR_BYTES)
        FAIL("message shorter than its p2p header");
    struct nx_p2p_hdr h;
    h.job = get64(p);
    h.comm = get64(p + 8);
    h.k = get64(p + 16);
    h.tag = get32(p + 24);
    h.src = get32(p + 28);
    h.dst = get32(p + 32);
    h.dtype = p[36];
    h.count = get64(p + 40);
    h.offset = get64(p + 48);
    h.length = get32(p + 56);
    if (p[37] | p[38] | p[39] | get32(p + 60))
        FAIL("p2p header padding is not zero");
    p += NX_P2P_HDR_BYTES;
    len -= NX_P2P_HDR_BYTES;
    if (h.length != len)
        FAIL("payload length differs from the header's");
    if (h.dtype >= sizeof(dtype_bytes))
        FAIL("unknown dtype");
    if (h.count > UINT64_MAX / dtype_bytes[h.dtype])
        FAIL("count x element size overflows");
    uint64_t total = h.count * dtype_bytes[h.dtype];
    if (h.offset > total || h.length > total - h.offset)
        FAIL("payload lies outside the message");
    if ((flags & NX_WIRE_F_ACK) && h.length != 0)
        FAIL("an acknowledgement with a payload");
    if (h.src == h.dst)
        FAIL("a message from a rank to itself");
    m->type = NX_WIRE_P2P;
    m->flags = flags;
    m->p2p = h;
    m->body = p;
    m->body_len = len;
    return 0;
}

int nx_wire_decode(const void *buf, size_t len, struct nx_wire_msg *m, const char **why)
{
    const uint8_t *p = buf;
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    memset(m, 0, sizeof(*m));
    if (!p || len < NX_WIRE_ENV_BYTES)
        FAIL("message shorter than the envelope");
    if (get16(p) != NX_WIRE_MAGIC)
        FAIL("bad magic");
    if (p[2] != NX_WIRE_VERSION)
        FAIL("unsupported wire version");
    uint8_t type = p[3];
    uint32_t flags = get32(p + 4);
    if (type < NX_WIRE_CTL || type > NX_WIRE_P2P)
        FAIL("unknown message type");
    if (flags & ~flags_known(type))
        FAIL("unknown flags");
    p += NX_WIRE_ENV_BYTES;
    len -= NX_WIRE_ENV_BYTES;
    if (type == NX_WIRE_CTL) {
        /* An empty protobuf would decode to all defaults: never what a sender means. */
        if (len == 0)
            FAIL("control message without a body");
        m->type = NX_WIRE_CTL;
        m->body = p;
        m->body_len = len;
        return 0;
    }
    if (type == NX_WIRE_P2P)
        return decode_p2p(p, len, flags, m, why);
    if (len < NX_DATA_HDR_BYTES)
        FAIL("message shorter than its data header");
    struct nx_data_hdr h;
    h.job = get64(p);
    h.comm = get64(p + 8);
    h.seq = get64(p + 16);
    h.step = get32(p + 24);
    h.sig = get32(p + 28);
    h.offset = get64(p + 32);
    h.length = get32(p + 40);
    h.src = get32(p + 44);
    h.kind = p[48];
    h.dtype = p[49];
    h.redop = p[50];
    h.root = get32(p + 52);
    h.count = get64(p + 56);
    uint8_t pad = p[51];
    p += NX_DATA_HDR_BYTES;
    len -= NX_DATA_HDR_BYTES;
    if (h.length != len)
        FAIL("payload length differs from the header's");
    /* Receivers compute offset + length to place the payload: that sum must not wrap. */
    if (h.offset > UINT64_MAX - h.length)
        FAIL("payload offset + length overflows");
    if (pad != 0)
        FAIL("data header padding is not zero");
    if (type == NX_WIRE_TEST && (h.kind | h.dtype | h.redop | h.root | h.count))
        FAIL("a test message with an op signature");
    m->type = (enum nx_wire_type)type;
    m->flags = flags;
    m->hdr = h;
    m->body = p;
    m->body_len = len;
    return 0;
}

_Static_assert(NX_P2P_HDR_BYTES <= NX_DATA_HDR_BYTES, "decode_head needs the larger header");

int nx_wire_decode_head(const void *buf, size_t have, size_t len, struct nx_wire_msg *m,
                        const char **why)
{
    /* nx_wire_decode reads the envelope and the fixed header, never the body: with those
     * here it judges the whole message by len alone. */
    size_t need = NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES;
    if (have < len && have < need) {
        memset(m, 0, sizeof(*m));
        if (why)
            *why = "message head cut short";
        return -EBADMSG;
    }
    return nx_wire_decode(buf, len, m, why);
}
