/*
 * h3_server.c - see h3_server.h.
 *
 * Flow control: ngtcp2 0.12 extends no credit by itself.  Bytes nghttp3 consumed on the
 * client's unidirectional streams (control, QPACK) give credit back to the stream and the
 * connection; bytes of a request stream give credit back to the connection only, so each
 * request stream is capped at its initial window (NX_H3_REQ_WINDOW) by QUIC itself.
 */
#include "h3_server.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp3/nghttp3.h>

#include "h3_req.h"
#include "inspect.h"
#include "json.h"
#include "log.h"
#include "mem.h"
#include "quic_int.h"

struct h3_req {
    struct nx_h3s *h;
    struct h3_req *next, *prev;
    int64_t id;
    struct nx_h3req req;
    int answered;
    int body_given;
    uint8_t *body;      /* malloc'd; lives until the stream closes (ngtcp2 keeps pointers) */
    size_t len;
    char clen[24];
};

struct nx_h3s {
    struct nx_qconn *c;
    const struct nx_quic_inspect *in;
    nghttp3_conn *h3;
    struct h3_req *reqs;
    uint64_t answered;
};

static void req_free(struct h3_req *r)
{
    struct nx_h3s *h = r->h;
    if (r->prev)
        r->prev->next = r->next;
    else
        h->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    free(r->body);
    free(r);
}

/* Ends the connection with an H3 error; carried out once ngtcp2 has returned. */
static void h3_fail(struct nx_h3s *h, uint64_t code, const char *what, int liberr)
{
    char why[128];
    snprintf(why, sizeof(why), "HTTP/3: %s%s%s", what, liberr ? ": " : "",
             liberr ? nghttp3_strerror(liberr) : "");
    NX_INFO("quic", "inspector %s: %s", h->c->peer ? h->c->peer->base.addr : "?", why);
    nx_qconn_close(h->c, code, why);
}

/* ---- the answer ---- */

static nghttp3_ssize read_body(nghttp3_conn *conn, int64_t id, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *user, void *sud)
{
    struct h3_req *r = sud;
    (void)conn;
    (void)id;
    (void)user;
    *pflags = NGHTTP3_DATA_FLAG_EOF;
    if (!r || r->body_given || !r->len || veccnt == 0)
        return 0;
    r->body_given = 1;
    vec[0].base = r->body;
    vec[0].len = r->len;
    return 1;
}

#define NV(n, v, vl)                                                                   \
    {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl),                              \
     NGHTTP3_NV_FLAG_NO_COPY_NAME | NGHTTP3_NV_FLAG_NO_COPY_VALUE}

/* A refusal's body: its reason as text, or as {"http_status":N,"error":"..."} to a client
 * that asked for JSON.  malloc'd, its length in *len. */
static uint8_t *refusal_body(int status, const char *why, int format, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = format == NX_INSPECT_JSON ? open_memstream(&buf, &n) : NULL;
    if (f) {
        struct nx_json j;
        nx_json_init(&j, f);
        nx_json_obj_begin(&j, NULL);
        nx_json_u64(&j, "http_status", (uint64_t)status);
        nx_json_str(&j, "error", why);
        nx_json_obj_end(&j);
        nx_json_finish(&j);
        if (fclose(f) == 0 && buf) {
            *len = n;
            return (uint8_t *)buf;
        }
        free(buf);
    }
    buf = nx_xasprintf("%s\n", why);
    *len = strlen(buf);
    return (uint8_t *)buf;
}

/* status 200 answers route rt with its report; any other status its reason, in the
 * format the request asked for. */
static void answer(struct h3_req *r, int status, const struct nx_inspect_route *rt)
{
    struct nx_h3s *h = r->h;
    static const char *const codes[] = {"200", "400", "404", "405", "431", "500"};
    int format = nx_h3req_format(&r->req);
    const char *code = "500";
    const char *ctype = format == NX_INSPECT_JSON ? NX_INSPECT_CTYPE_JSON
                                                  : "text/plain; charset=utf-8";
    if (r->answered)
        return;
    r->answered = 1;
    if (status == 200) {
        if (h->in->get(h->in->arg, rt->command, format, &r->body, &r->len) == 0)
            ctype = format == NX_INSPECT_JSON ? NX_INSPECT_CTYPE_JSON : NX_INSPECT_CTYPE;
        else
            status = 500;
    }
    if (status != 200) {
        free(r->body);
        r->body = refusal_body(status, status == 500 ? "the report failed" : r->req.why,
                               format, &r->len);
    }
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (atoi(codes[i]) == status)
            code = codes[i];
    snprintf(r->clen, sizeof(r->clen), "%zu", r->len);
    nghttp3_nv nva[] = {
        NV(":status", code, 3),
        NV("content-type", ctype, strlen(ctype)),
        NV("content-length", r->clen, strlen(r->clen)),
        NV("vary", "accept", 6), /* the body's format follows Accept */
        NV("allow", "GET", 3),
    };
    size_t n = status == 405 ? 5 : 4;
    nghttp3_data_reader dr = {read_body};
    int rv = nghttp3_conn_submit_response(h->h3, r->id, nva, n, &dr);
    if (rv != 0) {
        h3_fail(h, NGHTTP3_H3_INTERNAL_ERROR, "cannot answer", rv);
        return;
    }
    h->answered++;
    NX_DEBUG("quic", "inspector %s: %s %s -> %s (%zu bytes)", h->c->peer->base.addr,
             r->req.method[0] ? r->req.method : "-", r->req.path[0] ? r->req.path : "-",
             code, r->len);
}

/* The request was refused before it ended: answer now and ask the client to stop. */
static void answer_early(struct h3_req *r)
{
    struct nx_h3s *h = r->h;
    answer(r, r->req.status, NULL);
    ngtcp2_conn_shutdown_stream_read(h->c->conn, r->id, NGHTTP3_H3_NO_ERROR);
}

/* ---- nghttp3 callbacks ---- */

static int begin_headers(nghttp3_conn *conn, int64_t id, void *user, void *sud)
{
    struct nx_h3s *h = user;
    if (sud)
        return 0; /* trailers reuse the request */
    struct h3_req *r = nx_xcalloc(1, sizeof(*r));
    r->h = h;
    r->id = id;
    nx_h3req_init(&r->req);
    r->next = h->reqs;
    if (h->reqs)
        h->reqs->prev = r;
    h->reqs = r;
    return nghttp3_conn_set_stream_user_data(conn, id, r) == 0 ? 0
                                                               : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int recv_header(nghttp3_conn *conn, int64_t id, int32_t token, nghttp3_rcbuf *name,
                       nghttp3_rcbuf *value, uint8_t flags, void *user, void *sud)
{
    struct h3_req *r = sud;
    (void)conn;
    (void)id;
    (void)token;
    (void)flags;
    (void)user;
    nghttp3_vec n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value);
    if (r)
        nx_h3req_field(&r->req, n.base, n.len, v.base, v.len);
    return 0;
}

static int end_headers(nghttp3_conn *conn, int64_t id, int fin, void *user, void *sud)
{
    struct h3_req *r = sud;
    (void)conn;
    (void)id;
    (void)fin;
    (void)user;
    if (r && r->req.status && !r->answered)
        answer_early(r);
    return 0;
}

static int recv_data(nghttp3_conn *conn, int64_t id, const uint8_t *data, size_t len,
                     void *user, void *sud)
{
    struct nx_h3s *h = user;
    struct h3_req *r = sud;
    (void)conn;
    (void)id;
    (void)data;
    /* Body bytes are dropped; they count against the connection window only. */
    ngtcp2_conn_extend_max_offset(h->c->conn, len);
    if (r && nx_h3req_body(&r->req, len) && !r->answered)
        answer_early(r);
    return 0;
}

static int deferred_consume(nghttp3_conn *conn, int64_t id, size_t consumed, void *user,
                            void *sud)
{
    struct nx_h3s *h = user;
    (void)conn;
    (void)sud;
    if (!ngtcp2_is_bidi_stream(id))
        ngtcp2_conn_extend_max_stream_offset(h->c->conn, id, consumed);
    ngtcp2_conn_extend_max_offset(h->c->conn, consumed);
    return 0;
}

static int end_stream(nghttp3_conn *conn, int64_t id, void *user, void *sud)
{
    struct h3_req *r = sud;
    const struct nx_inspect_route *rt;
    (void)conn;
    (void)id;
    (void)user;
    if (r && !r->answered) {
        int status = nx_h3req_decide(&r->req, &rt);
        answer(r, status, rt);
    }
    return 0;
}

static int stop_sending(nghttp3_conn *conn, int64_t id, uint64_t code, void *user, void *sud)
{
    struct nx_h3s *h = user;
    (void)conn;
    (void)sud;
    ngtcp2_conn_shutdown_stream_read(h->c->conn, id, code);
    return 0;
}

static int reset_stream(nghttp3_conn *conn, int64_t id, uint64_t code, void *user, void *sud)
{
    struct nx_h3s *h = user;
    (void)conn;
    (void)sud;
    ngtcp2_conn_shutdown_stream_write(h->c->conn, id, code);
    return 0;
}

static int stream_close(nghttp3_conn *conn, int64_t id, uint64_t code, void *user, void *sud)
{
    (void)conn;
    (void)id;
    (void)code;
    (void)user;
    if (sud)
        req_free(sud);
    return 0;
}

static const nghttp3_callbacks callbacks = {
    .stream_close = stream_close,
    .recv_data = recv_data,
    .deferred_consume = deferred_consume,
    .begin_headers = begin_headers,
    .recv_header = recv_header,
    .end_headers = end_headers,
    .stop_sending = stop_sending,
    .end_stream = end_stream,
    .reset_stream = reset_stream,
};

/* ---- the session ---- */

struct nx_h3s *nx_h3s_new(struct nx_qconn *c, const struct nx_quic_inspect *in, char *err,
                          size_t errlen)
{
    nghttp3_settings s;
    int64_t ctrl, qenc, qdec;
    int rv;
    if (ngtcp2_conn_get_max_local_streams_uni(c->conn) < 3) {
        snprintf(err, errlen, "the client allows fewer than 3 unidirectional streams");
        return NULL;
    }
    struct nx_h3s *h = nx_xcalloc(1, sizeof(*h));
    h->c = c;
    h->in = in;
    nghttp3_settings_default(&s);
    s.max_field_section_size = NX_H3REQ_BYTES;
    s.qpack_max_dtable_capacity = 0;         /* the client's encoder: static table only */
    s.qpack_encoder_max_dtable_capacity = 0; /* ours too: nothing to synchronise */
    s.qpack_blocked_streams = 0;
    if ((rv = nghttp3_conn_server_new(&h->h3, &callbacks, &s, NULL, h)) != 0) {
        snprintf(err, errlen, "nghttp3: %s", nghttp3_strerror(rv));
        goto fail_alloc;
    }
    nghttp3_conn_set_max_client_streams_bidi(h->h3, NX_H3_STREAMS);
    nghttp3_conn_set_max_concurrent_streams(h->h3, NX_H3_STREAMS + NX_H3_UNI_STREAMS);
    if ((rv = ngtcp2_conn_open_uni_stream(c->conn, &ctrl, NULL)) != 0 ||
        (rv = ngtcp2_conn_open_uni_stream(c->conn, &qenc, NULL)) != 0 ||
        (rv = ngtcp2_conn_open_uni_stream(c->conn, &qdec, NULL)) != 0) {
        snprintf(err, errlen, "cannot open the control and QPACK streams: %s",
                 ngtcp2_strerror(rv));
        goto fail_conn;
    }
    if ((rv = nghttp3_conn_bind_control_stream(h->h3, ctrl)) != 0 ||
        (rv = nghttp3_conn_bind_qpack_streams(h->h3, qenc, qdec)) != 0) {
        snprintf(err, errlen, "nghttp3: %s", nghttp3_strerror(rv));
        goto fail_conn;
    }
    return h;
fail_conn:
    nghttp3_conn_del(h->h3);
fail_alloc:
    free(h);
    return NULL;
}

void nx_h3s_free(struct nx_h3s *h)
{
    if (!h)
        return;
    while (h->reqs)
        req_free(h->reqs);
    nghttp3_conn_del(h->h3);
    free(h);
}

int nx_h3s_recv(struct nx_h3s *h, int64_t id, const uint8_t *data, size_t len, int fin)
{
    nghttp3_ssize n = nghttp3_conn_read_stream(h->h3, id, data, len, fin);
    if (n < 0) {
        h3_fail(h, nghttp3_err_infer_quic_app_error_code((int)n), "bad stream data", (int)n);
        return 0;
    }
    if (!ngtcp2_is_bidi_stream(id))
        ngtcp2_conn_extend_max_stream_offset(h->c->conn, id, (uint64_t)n);
    ngtcp2_conn_extend_max_offset(h->c->conn, (uint64_t)n);
    return 0;
}

int nx_h3s_acked(struct nx_h3s *h, int64_t id, uint64_t datalen)
{
    int rv = nghttp3_conn_add_ack_offset(h->h3, id, datalen);
    if (rv != 0)
        h3_fail(h, nghttp3_err_infer_quic_app_error_code(rv), "ack", rv);
    return 0;
}

void nx_h3s_stream_close(struct nx_h3s *h, int64_t id, uint64_t app_err)
{
    int rv = nghttp3_conn_close_stream(h->h3, id, app_err);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND)
        h3_fail(h, nghttp3_err_infer_quic_app_error_code(rv), "stream closed", rv);
}

void nx_h3s_stream_reset(struct nx_h3s *h, int64_t id)
{
    int rv = nghttp3_conn_shutdown_stream_read(h->h3, id);
    if (rv != 0)
        h3_fail(h, nghttp3_err_infer_quic_app_error_code(rv), "stream reset", rv);
}

void nx_h3s_unblock(struct nx_h3s *h, int64_t id)
{
    nghttp3_conn_unblock_stream(h->h3, id);
}

void nx_h3s_max_bidi(struct nx_h3s *h, uint64_t max)
{
    nghttp3_conn_set_max_client_streams_bidi(h->h3, max);
}

uint64_t nx_h3s_answered(const struct nx_h3s *h)
{
    return h->answered;
}

ngtcp2_ssize nx_h3s_write_pkt(struct nx_h3s *h, uint8_t *dest, size_t destlen,
                              ngtcp2_tstamp ts)
{
    ngtcp2_conn *conn = h->c->conn;
    nghttp3_vec vec[16];
    /* Bounded like the peers' writer: a stream that keeps saying WRITE_MORE without
     * taking bytes must not spin us. */
    for (int lap = 0;; lap++) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_ssize nv = 0;
        if (lap < 64 && ngtcp2_conn_get_max_data_left(conn)) {
            nv = nghttp3_conn_writev_stream(h->h3, &sid, &fin, vec, 16);
            if (nv < 0) {
                h3_fail(h, nghttp3_err_infer_quic_app_error_code((int)nv), "write", (int)nv);
                return 0;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
        if (fin)
            flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
        ngtcp2_ssize ndata = -1;
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(conn, NULL, NULL, dest, destlen, &ndata,
                                                   flags, sid, (const ngtcp2_vec *)vec,
                                                   (size_t)nv, ts);
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
            nghttp3_conn_block_stream(h->h3, sid);
            continue;
        }
        if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
            nghttp3_conn_shutdown_stream_write(h->h3, sid);
            continue;
        }
        if (n == NGTCP2_ERR_WRITE_MORE) {
            int rv = nghttp3_conn_add_write_offset(h->h3, sid, (size_t)ndata);
            if (rv != 0) {
                h3_fail(h, nghttp3_err_infer_quic_app_error_code(rv), "write", rv);
                return 0;
            }
            continue;
        }
        if (n >= 0 && ndata >= 0) {
            int rv = nghttp3_conn_add_write_offset(h->h3, sid, (size_t)ndata);
            if (rv != 0) {
                h3_fail(h, nghttp3_err_infer_quic_app_error_code(rv), "write", rv);
                return 0;
            }
        }
        return n;
    }
}
