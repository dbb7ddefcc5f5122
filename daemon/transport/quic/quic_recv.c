/*
 * quic_recv.c - the receive side of our streams: a record parser (quic_record.c) per
 * remote stream, fed from ngtcp2's recv_stream_data.
 *
 * Bytes arrive in order per stream (ngtcp2 buffers what comes early).  The parser checks
 * every length before it is believed: the preamble's magic, a record length <= NX_TMSG_MAX
 * (or the switch marker); here, a FIN only between records.  A record that arrives whole
 * inside one callback is delivered straight from the decrypted packet; otherwise it is
 * assembled in one buffer of the record's length (a large allocation costs address space
 * only, pages come as data does; buffers of finished records are reused, base/bufpool.h),
 * unless the layer above takes it streamed (on_stream), piece by piece from the packets.
 * Flow-control credit goes back as soon as bytes are consumed (delivered or copied).
 */
#include <stdlib.h>

#include "mem.h"
#include "quic_int.h"

static int deliver(void *arg, uint64_t channel, const uint8_t *data, size_t len)
{
    struct nx_qconn *c = arg;
    struct nx_qpeer *p = c->peer;
    struct nx_quic *q = c->q;
    if (channel == NX_QCHAN_ROLL) { /* the peer's end marker on an old connection */
        if (len)
            nx_qconn_fail(c, "protocol: %zu bytes on the end-marker channel", len);
        else
            nx_qroll_marker(c);
        return c->fail ? -1 : 0;
    }
    p->msgs_recv++;
    p->bytes_recv += len;
    if (q->base.cb.on_message)
        q->base.cb.on_message(q->base.cb.arg, &p->base, channel,
                              len ? (const void *)data : (const void *)"", len);
    /* The user closed or forgot the peer from on_message: read no further. */
    return c->fail || p->forget_req || p->close_req ? -1 : 0;
}

static void *buf_get(void *arg, size_t len, size_t *cap)
{
    struct nx_qconn *c = arg;
    return nx_bufpool_get(c->q->bufs, len, cap);
}

static void buf_put(void *arg, void *buf, size_t cap)
{
    struct nx_qconn *c = arg;
    nx_bufpool_put(c->q->bufs, buf, cap);
}

/* A long message arriving in packets: the layer above may take it as it comes. */
static void *stream_begin(void *arg, uint64_t channel, const uint8_t *head, size_t headlen,
                          size_t len)
{
    struct nx_qconn *c = arg;
    struct nx_quic *q = c->q;
    if (channel == NX_QCHAN_ROLL || !q->base.cb.on_stream)
        return NULL; /* the end marker is empty: never streamed, but say it */
    return q->base.cb.on_stream(q->base.cb.arg, &c->peer->base, channel, head, headlen, len);
}

static int stream_data(void *arg, void *sink, const uint8_t *d, size_t n)
{
    struct nx_qconn *c = arg;
    struct nx_qpeer *p = c->peer;
    p->bytes_recv += n;
    c->q->base.cb.on_stream_data(c->q->base.cb.arg, sink, d, n);
    return c->fail || p->forget_req || p->close_req ? -1 : 0;
}

static void stream_end(void *arg, void *sink, int whole)
{
    struct nx_qconn *c = arg;
    if (whole)
        c->peer->msgs_recv++;
    c->q->base.cb.on_stream_end(c->q->base.cb.arg, sink, whole);
}

static const struct nx_qrec_ops rec_ops = {buf_get, buf_put, deliver, stream_begin,
                                           stream_data, stream_end};

static int rs_fail(struct nx_qconn *c, const char *why)
{
    nx_qconn_fail(c, "protocol: %s", why);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

int nx_qstream_on_recv(struct nx_qconn *c, uint32_t flags, int64_t id, const uint8_t *data,
                       size_t datalen, void *stream_user_data)
{
    struct nx_qrstream *rs = stream_user_data;
    c->rx_data = 1;
    c->rx_bytes_since_tx += datalen;
    if (ngtcp2_conn_is_local_stream(c->conn, id) || ngtcp2_is_bidi_stream(id))
        return rs_fail(c, "data on a stream we did not expect");
    if (!rs) {
        rs = nx_xcalloc(1, sizeof(*rs));
        rs->id = id;
        nx_qrec_init(&rs->rec);
        rs->next = c->rstreams;
        if (c->rstreams)
            c->rstreams->prev = rs;
        c->rstreams = rs;
        ngtcp2_conn_set_stream_user_data(c->conn, id, rs);
    }
    const char *why;
    c->q->feeding = &rs->rec;
    int rv = nx_qrec_feed(&rs->rec, data, datalen, &rec_ops, c, &why);
    c->q->feeding = NULL;
    if (rv < 0)
        return rs_fail(c, why);
    if (c->fail)
        return 0;
    if ((flags & NGTCP2_STREAM_DATA_FLAG_FIN) && nx_qrec_end(&rs->rec, &why) < 0)
        return rs_fail(c, why);
    /* Consumed: the bytes are delivered or copied, so the window may move on. */
    ngtcp2_conn_extend_max_stream_offset(c->conn, id, datalen);
    ngtcp2_conn_extend_max_offset(c->conn, datalen);
    return 0;
}

void *nx_quic_take_delivered(struct nx_transport *t, const void *data, size_t *cap)
{
    struct nx_quic *q = (struct nx_quic *)t;
    struct nx_qrec *r = q->feeding;
    if (!r || !r->buf || data != r->buf)
        return NULL; /* straight from a packet */
    void *buf = r->buf;
    *cap = r->cap;
    r->buf = NULL; /* the parser puts back nothing */
    r->cap = 0;
    return buf;
}

void nx_qstream_rclose(struct nx_qconn *c, struct nx_qrstream *rs)
{
    if (rs->prev)
        rs->prev->next = rs->next;
    else
        c->rstreams = rs->next;
    if (rs->next)
        rs->next->prev = rs->prev;
    nx_qrec_fini(&rs->rec, &rec_ops, c);
    free(rs);
}
