/*
 * quic_recv.c - the receive side of our streams: the record parser and reassembly.
 *
 * Bytes arrive in order per stream (ngtcp2 buffers what comes early).  Every length is
 * checked before it is believed: the preamble's magic, a record length <= NX_TMSG_MAX (or
 * the switch marker), a FIN only between records.  A record that arrives whole inside one
 * callback is delivered straight from the decrypted packet; otherwise it is assembled in
 * one buffer of the record's length (a large allocation costs address space only, pages
 * come as data does; buffers of finished records are reused, quic_buf.c).
 * Flow-control credit goes back as soon as bytes are consumed (delivered or copied).
 */
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "quic_int.h"

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static int deliver(struct nx_qconn *c, struct nx_qrstream *rs, const uint8_t *data, size_t len)
{
    struct nx_qpeer *p = c->peer;
    struct nx_quic *q = c->q;
    p->msgs_recv++;
    p->bytes_recv += len;
    if (q->base.cb.on_message)
        q->base.cb.on_message(q->base.cb.arg, &p->base, rs->channel,
                              len ? (const void *)data : (const void *)"", len);
    return c->fail || p->forget_req || p->close_req ? -1 : 0;
}

static int rs_fail(struct nx_qconn *c, const char *why)
{
    nx_qconn_fail(c, "protocol: %s", why);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

/* The whole record at once: a large allocation is only address space until written. */
static void body_alloc(struct nx_qconn *c, struct nx_qrstream *rs)
{
    if (!rs->buf)
        rs->buf = nx_qbuf_get(c->q, rs->msglen, &rs->cap);
}

static void body_release(struct nx_qconn *c, struct nx_qrstream *rs)
{
    nx_qbuf_put(c->q, rs->buf, rs->cap);
    rs->buf = NULL;
    rs->cap = 0;
}

static int parse(struct nx_qconn *c, struct nx_qrstream *rs, const uint8_t *d, size_t len)
{
    while (len > 0) {
        if (rs->state != 2) {
            size_t want = rs->state == 0 ? NX_QPRE_LEN : rs->state == 3 ? 8 : NX_QREC_HDR;
            size_t t = want - rs->hdr_have < len ? want - rs->hdr_have : len;
            memcpy(rs->hdr + rs->hdr_have, d, t);
            rs->hdr_have += t, d += t, len -= t;
            if (rs->hdr_have < want)
                return 0;
            rs->hdr_have = 0;
            if (rs->state == 3) { /* the stream carries another channel from here */
                rs->channel = get_be64(rs->hdr);
                rs->state = 1;
                continue;
            }
            if (rs->state == 0) {
                if (memcmp(rs->hdr, NX_QMAGIC, 4) != 0)
                    return rs_fail(c, "bad stream preamble");
                rs->channel = get_be64(rs->hdr + 4);
                rs->state = 1;
                continue;
            }
            rs->msglen = (uint32_t)rs->hdr[0] << 24 | (uint32_t)rs->hdr[1] << 16 |
                         (uint32_t)rs->hdr[2] << 8 | rs->hdr[3];
            if (rs->msglen == NX_QSWITCH) {
                rs->state = 3;
                continue;
            }
            if (rs->msglen > NX_TMSG_MAX)
                return rs_fail(c, "record longer than NX_TMSG_MAX");
            rs->have = 0;
            rs->state = 2;
            if (rs->msglen == 0) {
                rs->state = 1;
                if (deliver(c, rs, NULL, 0))
                    return 0;
            }
            continue;
        }
        size_t need = rs->msglen - rs->have;
        if (rs->have == 0 && len >= need) {
            rs->state = 1;
            if (deliver(c, rs, d, need))
                return 0;
            d += need, len -= need;
            continue;
        }
        size_t t = need < len ? need : len;
        body_alloc(c, rs);
        memcpy(rs->buf + rs->have, d, t);
        rs->have += t, d += t, len -= t;
        if (rs->have == rs->msglen) {
            rs->state = 1;
            int stop = deliver(c, rs, rs->buf, rs->msglen);
            body_release(c, rs);
            if (stop)
                return 0;
        }
    }
    return 0;
}

int nx_qstream_on_recv(struct nx_qconn *c, uint32_t flags, int64_t id, const uint8_t *data,
                       size_t datalen, void *stream_user_data)
{
    struct nx_qrstream *rs = stream_user_data;
    if (ngtcp2_conn_is_local_stream(c->conn, id) || ngtcp2_is_bidi_stream(id))
        return rs_fail(c, "data on a stream we did not expect");
    if (!rs) {
        rs = nx_xcalloc(1, sizeof(*rs));
        rs->id = id;
        rs->next = c->rstreams;
        if (c->rstreams)
            c->rstreams->prev = rs;
        c->rstreams = rs;
        ngtcp2_conn_set_stream_user_data(c->conn, id, rs);
    }
    int rv = parse(c, rs, data, datalen);
    if (rv != 0 || c->fail)
        return rv;
    if ((flags & NGTCP2_STREAM_DATA_FLAG_FIN) && (rs->state != 1 || rs->hdr_have))
        return rs_fail(c, "stream ended inside a record");
    /* Consumed: the bytes are delivered or copied, so the window may move on. */
    ngtcp2_conn_extend_max_stream_offset(c->conn, id, datalen);
    ngtcp2_conn_extend_max_offset(c->conn, datalen);
    return 0;
}

void nx_qstream_rclose(struct nx_qconn *c, struct nx_qrstream *rs)
{
    if (rs->prev)
        rs->prev->next = rs->next;
    else
        c->rstreams = rs->next;
    if (rs->next)
        rs->next->prev = rs->prev;
    body_release(c, rs);
    free(rs);
}
