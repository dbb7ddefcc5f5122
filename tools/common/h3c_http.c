/*
 * h3c_http.c - the HTTP/3 client's nghttp3 session: the control and QPACK streams, the
 * requests (one bidirectional stream each, opened as the daemon's stream limit allows),
 * and the answers collected into nxt_h3c_resp.
 *
 * Flow control: ngtcp2 0.12 extends no credit by itself, so every byte nghttp3 consumed
 * and every body byte we kept gives its credit back to the stream and the connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h3c_int.h"
#include "nexar.h"

static struct h3c_stream *find(struct h3c *c, int64_t id)
{
    for (int i = 0; i < c->nreq; i++)
        if (c->st[i].id == id)
            return &c->st[i];
    return NULL;
}

static void finish(struct h3c *c, struct h3c_stream *s)
{
    if (s && !s->done) {
        s->done = 1;
        c->ndone++;
    }
}

/* ---- nghttp3 callbacks ---- */

static int recv_header(nghttp3_conn *conn, int64_t id, int32_t token, nghttp3_rcbuf *name,
                       nghttp3_rcbuf *value, uint8_t flags, void *user, void *sud)
{
    struct h3c_stream *s = sud;
    (void)conn;
    (void)id;
    (void)flags;
    (void)user;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    if (!s)
        return 0;
    if (token == NGHTTP3_QPACK_TOKEN__STATUS && v.len == 3) {
        s->resp->status = (v.base[0] - '0') * 100 + (v.base[1] - '0') * 10 + (v.base[2] - '0');
    } else if (n.len == 12 && !memcmp(n.base, "content-type", 12)) {
        size_t k = v.len < sizeof(s->resp->ctype) - 1 ? v.len : sizeof(s->resp->ctype) - 1;
        memcpy(s->resp->ctype, v.base, k);
        s->resp->ctype[k] = '\0';
    }
    return 0;
}

static int recv_data(nghttp3_conn *conn, int64_t id, const uint8_t *data, size_t len,
                     void *user, void *sud)
{
    struct h3c *c = user;
    struct h3c_stream *s = sud;
    (void)conn;
    if (s) {
        struct nxt_h3c_resp *r = s->resp;
        if (r->len + len > NXT_H3C_BODY_MAX) {
            h3c_fail(c, NEXAR_ERR_INTERNAL, "%s: an answer longer than %u bytes", c->o->addr,
                     NXT_H3C_BODY_MAX);
            return NGHTTP3_ERR_CALLBACK_FAILURE;
        }
        uint8_t *b = realloc(r->body, r->len + len + 1);
        if (!b) {
            h3c_fail(c, NEXAR_ERR_NOMEM, "out of memory");
            return NGHTTP3_ERR_CALLBACK_FAILURE;
        }
        memcpy(b + r->len, data, len);
        r->body = b;
        r->len += len;
        r->body[r->len] = '\0';
    }
    ngtcp2_conn_extend_max_stream_offset(c->conn, id, len);
    ngtcp2_conn_extend_max_offset(c->conn, len);
    return 0;
}

static int deferred_consume(nghttp3_conn *conn, int64_t id, size_t consumed, void *user,
                            void *sud)
{
    struct h3c *c = user;
    (void)conn;
    (void)sud;
    ngtcp2_conn_extend_max_stream_offset(c->conn, id, consumed);
    ngtcp2_conn_extend_max_offset(c->conn, consumed);
    return 0;
}

static int end_stream(nghttp3_conn *conn, int64_t id, void *user, void *sud)
{
    (void)conn;
    (void)id;
    finish(user, sud);
    return 0;
}

static int stop_sending_cb(nghttp3_conn *conn, int64_t id, uint64_t code, void *user,
                           void *sud)
{
    struct h3c *c = user;
    (void)conn;
    (void)sud;
    ngtcp2_conn_shutdown_stream_read(c->conn, id, code);
    return 0;
}

static int reset_stream_cb(nghttp3_conn *conn, int64_t id, uint64_t code, void *user,
                           void *sud)
{
    struct h3c *c = user;
    (void)conn;
    (void)sud;
    ngtcp2_conn_shutdown_stream_write(c->conn, id, code);
    return 0;
}

static nghttp3_ssize read_body(nghttp3_conn *conn, int64_t id, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *user, void *sud)
{
    static uint8_t pattern[4096];
    struct h3c *c = user;
    struct h3c_stream *s = sud;
    (void)conn;
    (void)id;
    size_t left = s && c->rq->body > s->body_sent ? c->rq->body - s->body_sent : 0;
    if (!left || veccnt == 0) {
        *pflags = NGHTTP3_DATA_FLAG_EOF;
        return 0;
    }
    if (!pattern[0])
        memset(pattern, 'x', sizeof(pattern));
    size_t n = left < sizeof(pattern) ? left : sizeof(pattern);
    vec[0].base = pattern;
    vec[0].len = n;
    s->body_sent += n;
    if (s->body_sent == c->rq->body)
        *pflags = NGHTTP3_DATA_FLAG_EOF;
    return 1;
}

static const nghttp3_callbacks callbacks = {
    .recv_data = recv_data,
    .deferred_consume = deferred_consume,
    .recv_header = recv_header,
    .stop_sending = stop_sending_cb,
    .end_stream = end_stream,
    .reset_stream = reset_stream_cb,
};

/* ---- requests ---- */

static int submit(struct h3c *c, struct h3c_stream *s)
{
    const struct nxt_h3c_req *rq = c->rq;
    nghttp3_nv nva[4 + 32];
    size_t n = 0;
#define ADD(nm, v)                                                                      \
    do {                                                                                \
        nva[n].name = (uint8_t *)(nm);                                                  \
        nva[n].namelen = strlen(nm);                                                    \
        nva[n].value = (uint8_t *)(v);                                                  \
        nva[n].valuelen = strlen(v);                                                    \
        nva[n++].flags = NGHTTP3_NV_FLAG_NO_COPY_NAME | NGHTTP3_NV_FLAG_NO_COPY_VALUE;  \
    } while (0)
    ADD(":method", rq->method ? rq->method : "GET");
    ADD(":scheme", rq->scheme ? rq->scheme : "https");
    ADD(":authority", rq->authority ? rq->authority : c->authority);
    ADD(":path", rq->path);
    for (int i = 0; rq->fields && rq->fields[i] && rq->fields[i + 1] && n < 36; i += 2)
        ADD(rq->fields[i], rq->fields[i + 1]);
#undef ADD
    nghttp3_data_reader dr = {read_body};
    int rv = nghttp3_conn_submit_request(c->h3, s->id, nva, n, rq->body ? &dr : NULL, s);
    if (rv != 0) {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "cannot send the request: %s", nghttp3_strerror(rv));
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

int h3c_http_open_more(struct h3c *c)
{
    if (!c->h3)
        return 0; /* the streams are opened once the handshake is done */
    while (c->nopen < c->nreq) {
        struct h3c_stream *s = &c->st[c->nopen];
        int rv = ngtcp2_conn_open_bidi_stream(c->conn, &s->id, s);
        if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED)
            return 0; /* a MAX_STREAMS of the daemon brings us back */
        if (rv != 0) {
            h3c_fail(c, NEXAR_ERR_INTERNAL, "cannot open a request stream: %s",
                     ngtcp2_strerror(rv));
            return NGTCP2_ERR_CALLBACK_FAILURE;
        }
        c->nopen++;
        if ((rv = submit(c, s)) != 0)
            return rv;
    }
    return 0;
}

int h3c_http_start(struct h3c *c)
{
    nghttp3_settings s;
    int64_t ctrl, qenc, qdec;
    int rv;
    nghttp3_settings_default(&s);
    s.max_field_section_size = 64u << 10;
    s.qpack_max_dtable_capacity = 0;
    s.qpack_encoder_max_dtable_capacity = 0;
    s.qpack_blocked_streams = 0;
    if ((rv = nghttp3_conn_client_new(&c->h3, &callbacks, &s, NULL, c)) != 0) {
        h3c_fail(c, NEXAR_ERR_NOMEM, "nghttp3: %s", nghttp3_strerror(rv));
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    if (ngtcp2_conn_open_uni_stream(c->conn, &ctrl, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(c->conn, &qenc, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(c->conn, &qdec, NULL) != 0) {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "%s allows too few streams for HTTP/3", c->o->addr);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    if ((rv = nghttp3_conn_bind_control_stream(c->h3, ctrl)) != 0 ||
        (rv = nghttp3_conn_bind_qpack_streams(c->h3, qenc, qdec)) != 0) {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "nghttp3: %s", nghttp3_strerror(rv));
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return h3c_http_open_more(c);
}

int h3c_http_recv(struct h3c *c, int64_t id, const uint8_t *data, size_t len, int fin)
{
    if (!c->h3) {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "%s sent stream data before the handshake ended",
                 c->o->addr);
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    nghttp3_ssize n = nghttp3_conn_read_stream(c->h3, id, data, len, fin);
    if (n < 0) {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "%s: HTTP/3: %s", c->o->addr,
                 nghttp3_strerror((int)n));
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    ngtcp2_conn_extend_max_stream_offset(c->conn, id, (uint64_t)n);
    ngtcp2_conn_extend_max_offset(c->conn, (uint64_t)n);
    return 0;
}

int h3c_http_acked(struct h3c *c, int64_t id, uint64_t len)
{
    if (c->h3 && nghttp3_conn_add_ack_offset(c->h3, id, len) != 0) {
        h3c_fail(c, NEXAR_ERR_INTERNAL, "nghttp3: bad acknowledgement");
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

int h3c_http_stream_close(struct h3c *c, int64_t id, uint64_t app_err, int app_err_set)
{
    struct h3c_stream *s = find(c, id);
    if (s && !s->done && !s->resp->status && app_err_set)
        s->resp->reset_code = app_err;
    finish(c, s);
    if (c->h3) {
        int rv = nghttp3_conn_close_stream(c->h3, id, app_err_set ? app_err
                                                                  : NGHTTP3_H3_NO_ERROR);
        if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
            h3c_fail(c, NEXAR_ERR_INTERNAL, "%s closed a critical HTTP/3 stream",
                     c->o->addr);
            return NGTCP2_ERR_CALLBACK_FAILURE;
        }
    }
    return 0;
}

int h3c_http_stream_reset(struct h3c *c, int64_t id, uint64_t app_err)
{
    struct h3c_stream *s = find(c, id);
    if (s && !s->done) {
        /* The answer will not be completed: keep what came and why. */
        s->resp->reset_code = app_err;
        s->resp->status = 0;
        finish(c, s);
    }
    if (c->h3)
        nghttp3_conn_shutdown_stream_read(c->h3, id);
    return 0;
}

int h3c_http_stop_sending(struct h3c *c, int64_t id)
{
    if (c->h3)
        nghttp3_conn_shutdown_stream_write(c->h3, id);
    return 0;
}

int h3c_http_unblock(struct h3c *c, int64_t id)
{
    if (c->h3)
        nghttp3_conn_unblock_stream(c->h3, id);
    return 0;
}

void h3c_http_free(struct h3c *c)
{
    if (c->h3)
        nghttp3_conn_del(c->h3);
    c->h3 = NULL;
}

ngtcp2_ssize h3c_http_write_pkt(struct h3c *c, uint8_t *dest, size_t destlen,
                                ngtcp2_tstamp ts)
{
    nghttp3_vec vec[16];
    for (int lap = 0;; lap++) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_ssize nv = 0;
        if (c->h3 && lap < 64 && ngtcp2_conn_get_max_data_left(c->conn)) {
            nv = nghttp3_conn_writev_stream(c->h3, &sid, &fin, vec, 16);
            if (nv < 0) {
                h3c_fail(c, NEXAR_ERR_INTERNAL, "nghttp3: %s", nghttp3_strerror((int)nv));
                return NGTCP2_ERR_CALLBACK_FAILURE;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
        if (fin)
            flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
        ngtcp2_ssize ndata = -1;
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->conn, NULL, NULL, dest, destlen, &ndata,
                                                   flags, sid, (const ngtcp2_vec *)vec,
                                                   (size_t)nv, ts);
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
            nghttp3_conn_block_stream(c->h3, sid);
            continue;
        }
        if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
            nghttp3_conn_shutdown_stream_write(c->h3, sid);
            continue;
        }
        if (n == NGTCP2_ERR_WRITE_MORE || (n >= 0 && ndata >= 0)) {
            if (nghttp3_conn_add_write_offset(c->h3, sid, (size_t)ndata) != 0) {
                h3c_fail(c, NEXAR_ERR_INTERNAL, "nghttp3: bad write offset");
                return NGTCP2_ERR_CALLBACK_FAILURE;
            }
            if (n == NGTCP2_ERR_WRITE_MORE)
                continue;
        }
        return n;
    }
}
