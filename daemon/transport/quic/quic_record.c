/*
 * quic_record.c - the record parser of our streams (quic_record.h).
 *
 * Bytes come in whatever pieces the packets cut them into.  Fixed-size parts (preamble,
 * record header, switch channel) gather in hdr; a payload that lies whole in the piece at
 * hand is delivered from it without a copy.  Otherwise it is offered to the owner as a
 * stream (ops->begin), whose sink then takes its bytes where they lie, piece by piece; or
 * it is gathered in one buffer of the record's length, asked for only once its first
 * bytes are here and handed back as soon as the record is delivered.
 */
#include "quic_record.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static int fail(struct nx_qrec *r, const char *why, const char **whyp)
{
    r->state = NX_QREC_FAILED;
    r->why = why;
    *whyp = why;
    return -EPROTO;
}

static void body_release(struct nx_qrec *r, const struct nx_qrec_ops *ops, void *arg)
{
    ops->put(arg, r->buf, r->cap);
    r->buf = NULL;
    r->cap = 0;
}

void nx_qrec_init(struct nx_qrec *r)
{
    memset(r, 0, sizeof(*r));
    r->state = NX_QREC_PRE;
}

/* A whole preamble, header or switch channel is in r->hdr. */
static int header_done(struct nx_qrec *r, const struct nx_qrec_ops *ops, void *arg,
                       const char **why)
{
    switch (r->state) {
    case NX_QREC_SWITCH:
        r->channel = get_be64(r->hdr);
        r->state = NX_QREC_LEN;
        return 0;
    case NX_QREC_PRE:
        if (memcmp(r->hdr, NX_QMAGIC, 4) != 0)
            return fail(r, "bad stream preamble", why);
        r->channel = get_be64(r->hdr + 4);
        r->state = NX_QREC_LEN;
        return 0;
    default:
        break;
    }
    r->msglen = (uint32_t)r->hdr[0] << 24 | (uint32_t)r->hdr[1] << 16 |
                (uint32_t)r->hdr[2] << 8 | r->hdr[3];
    if (r->msglen == NX_QSWITCH) {
        r->state = NX_QREC_SWITCH;
        return 0;
    }
    if (r->msglen > NX_TMSG_MAX)
        return fail(r, "record longer than NX_TMSG_MAX", why);
    r->have = 0;
    r->state = NX_QREC_BODY;
    if (r->msglen == 0) {
        r->state = NX_QREC_LEN;
        if (ops->deliver(arg, r->channel, NULL, 0))
            return 1;
    }
    return 0;
}

int nx_qrec_feed(struct nx_qrec *r, const uint8_t *d, size_t len,
                 const struct nx_qrec_ops *ops, void *arg, const char **why)
{
    if (r->state == NX_QREC_FAILED) {
        *why = r->why;
        return -EPROTO;
    }
    while (len > 0) {
        if (r->state != NX_QREC_BODY) {
            size_t want = r->state == NX_QREC_PRE ? NX_QPRE_LEN
                          : r->state == NX_QREC_SWITCH ? 8 : NX_QREC_HDR;
            size_t t = want - r->hdr_have < len ? want - r->hdr_have : len;
            memcpy(r->hdr + r->hdr_have, d, t);
            r->hdr_have += t, d += t, len -= t;
            if (r->hdr_have < want)
                return 0;
            r->hdr_have = 0;
            int rv = header_done(r, ops, arg, why);
            if (rv != 0)
                return rv;
            continue;
        }
        size_t need = r->msglen - r->have;
        if (r->sink) {
            size_t t = need < len ? need : len;
            int stop = ops->data(arg, r->sink, d, t);
            r->have += t, d += t, len -= t;
            if (r->have == r->msglen) {
                void *sink = r->sink;
                r->sink = NULL;
                r->state = NX_QREC_LEN;
                ops->end(arg, sink, 1);
            }
            if (stop)
                return 1;
            continue;
        }
        if (r->have == 0 && len >= need) {
            r->state = NX_QREC_LEN;
            if (ops->deliver(arg, r->channel, d, need))
                return 1;
            d += need, len -= need;
            continue;
        }
        /* Offered once: with its first piece if that holds the head, else with the piece
         * that completes the head. */
        bool offer = ops->begin && r->msglen >= NX_QREC_STREAM_MIN;
        size_t before = r->have;
        if (offer && before == 0 && len >= NX_QREC_HEAD) {
            r->sink = ops->begin(arg, r->channel, d, len, r->msglen);
            if (r->sink)
                continue;
        }
        size_t t = need < len ? need : len;
        if (!r->buf)
            r->buf = ops->get(arg, r->msglen, &r->cap);
        memcpy(r->buf + r->have, d, t);
        r->have += t, d += t, len -= t;
        if (r->have == r->msglen) {
            r->state = NX_QREC_LEN;
            int stop = ops->deliver(arg, r->channel, r->buf, r->msglen);
            body_release(r, ops, arg);
            if (stop)
                return 1;
        } else if (offer && before > 0 && before < NX_QREC_HEAD && r->have >= NX_QREC_HEAD) {
            r->sink = ops->begin(arg, r->channel, r->buf, r->have, r->msglen);
            if (r->sink) {
                int stop = ops->data(arg, r->sink, r->buf, r->have);
                body_release(r, ops, arg);
                if (stop)
                    return 1;
            }
        }
    }
    return 0;
}

int nx_qrec_end(const struct nx_qrec *r, const char **why)
{
    if (r->state == NX_QREC_FAILED) {
        *why = r->why;
        return -EPROTO;
    }
    if (r->state != NX_QREC_LEN || r->hdr_have) {
        *why = "stream ended inside a record";
        return -EPROTO;
    }
    return 0;
}

void nx_qrec_fini(struct nx_qrec *r, const struct nx_qrec_ops *ops, void *arg)
{
    if (r->sink) {
        void *sink = r->sink;
        r->sink = NULL;
        ops->end(arg, sink, 0);
    }
    body_release(r, ops, arg);
}
