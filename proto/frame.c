/* frame.c - frame header codec and the incremental stream parser. */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

void nx_frame_hdr_encode(uint8_t out[NX_FRAME_HDR_BYTES], uint16_t type, uint32_t length)
{
    put_le32(out, NX_FRAME_MAGIC);
    put_le16(out + 4, NX_PROTO_VERSION);
    put_le16(out + 6, type);
    put_le32(out + 8, length);
    put_le32(out + 12, 0);
}

int nx_frame_hdr_decode(const uint8_t in[NX_FRAME_HDR_BYTES], struct nx_frame_hdr *h,
                        const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    h->magic = get_le32(in);
    h->version = get_le16(in + 4);
    h->type = get_le16(in + 6);
    h->length = get_le32(in + 8);
    h->flags = get_le32(in + 12);
    if (h->magic != NX_FRAME_MAGIC) {
        *why = "bad frame magic";
        return -EPROTO;
    }
    if (h->version != NX_PROTO_VERSION) {
        *why = "unsupported protocol version";
        return -EPROTONOSUPPORT;
    }
    if (h->flags != 0) {
        *why = "non-zero frame flags";
        return -EPROTO;
    }
    if (h->type == 0 || h->type > NX_MSG_TYPE_MAX) {
        *why = "unknown message type";
        return -EPROTO;
    }
    if (h->length > NX_FRAME_MAX) {
        *why = "frame longer than 1 MiB";
        return -EPROTO;
    }
    return 0;
}

void nx_frame_parser_init(struct nx_frame_parser *p)
{
    memset(p, 0, sizeof(*p));
}

void nx_frame_parser_fini(struct nx_frame_parser *p)
{
    free(p->payload);
    p->payload = NULL;
}

int nx_frame_parser_feed(struct nx_frame_parser *p, const uint8_t *buf, size_t len,
                         nx_frame_cb cb, void *arg)
{
    if (p->failed)
        return p->failed;
    while (len > 0) {
        if (p->hdr_have < NX_FRAME_HDR_BYTES) {
            size_t take = NX_FRAME_HDR_BYTES - p->hdr_have;
            if (take > len)
                take = len;
            memcpy(p->hdr + p->hdr_have, buf, take);
            p->hdr_have += take;
            buf += take;
            len -= take;
            if (p->hdr_have < NX_FRAME_HDR_BYTES)
                return 0;
            int rv = nx_frame_hdr_decode(p->hdr, &p->cur, &p->why);
            if (rv < 0) {
                p->failed = rv;
                return rv;
            }
            p->payload_have = 0;
            /* One spare byte so that an empty payload still has a valid pointer. */
            p->payload = malloc((size_t)p->cur.length + 1);
            if (!p->payload) {
                p->why = "out of memory";
                p->failed = -ENOMEM;
                return -ENOMEM;
            }
        }
        size_t want = p->cur.length - p->payload_have;
        size_t take = want < len ? want : len;
        memcpy(p->payload + p->payload_have, buf, take);
        p->payload_have += take;
        buf += take;
        len -= take;
        if (p->payload_have < p->cur.length)
            return 0;
        uint8_t *payload = p->payload;
        struct nx_frame_hdr h = p->cur;
        p->payload = NULL;
        p->hdr_have = 0;
        int rv = cb(arg, &h, payload);
        free(payload);
        if (rv != 0)
            return rv;
    }
    return 0;
}
