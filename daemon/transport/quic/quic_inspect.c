/*
 * quic_inspect.c - inspectors: clients that reach the QUIC endpoint with ALPN "h3" (the
 * remote inspection endpoint) instead of "nexar/1".
 *
 * Where an inspector and a peer part ways:
 *
 *   Initial         accept_initial() makes a peer record for the source address, as for
 *                   anyone (nothing tells them apart before TLS).
 *   ClientHello     GnuTLS selects "h3" (quic_tls.c): nx_qinspect_classify() takes the
 *                   record out of the address map at once, marks record and connection
 *                   as an inspector's, and gives the connection an inspector's transport
 *                   parameters (few bidirectional streams, small windows, its own idle
 *                   timeout, no keep-alive) before any of ours is written.
 *   handshake done  the client's certificate verified against the cluster CA like a
 *                   peer's (the verify callback is the same): nx_qpeer_up() hands over
 *                   to nx_qinspect_up(), which starts the HTTP/3 session (h3_server.c)
 *                   or, past conf.inspect->max_conns, closes with H3_EXCESSIVE_LOAD.
 *   streams         quic_conn.c's callbacks and the writer (quic_stream.c) pass every
 *                   event of an inspector's connection to the functions below.
 *   end             nx_qpeer_conn_failed() hands over to nx_qinspect_gone(): a log line,
 *                   and the record is freed with its session.
 *
 * The record is never visible: on_peer is never called for it, peer() cannot find it (it
 * is out of the map), each_peer() skips it, and a later connection from the same address
 * is a stranger to it.  So an inspector is never a node, never UP or LOST, and cannot
 * supersede or be superseded by a peer's connection.
 */
#include <stdio.h>
#include <string.h>

#include <nghttp3/nghttp3.h>

#include "h3_server.h"
#include "log.h"
#include "quic_int.h"

int nx_qinspect_classify(struct nx_qconn *c)
{
    struct nx_quic *q = c->q;
    struct nx_qpeer *p = c->peer;
    const struct nx_quic_inspect *in = q->conf.inspect;
    if (c->inspector)
        return 0; /* a second ClientHello after a HelloRetryRequest */
    if (!in || !c->server || !p || p->conn != c) {
        nx_qconn_fail(c, "TLS: no inspection endpoint here");
        return -1;
    }
    ngtcp2_transport_params tp = *ngtcp2_conn_get_local_transport_params(c->conn);
    tp.initial_max_streams_bidi = NX_H3_STREAMS;
    tp.initial_max_stream_data_bidi_remote = NX_H3_REQ_WINDOW;
    tp.initial_max_stream_data_bidi_local = 0;
    tp.initial_max_streams_uni = NX_H3_UNI_STREAMS;
    tp.initial_max_stream_data_uni = NX_H3_UNI_WINDOW;
    tp.initial_max_data = NX_H3_CONN_WINDOW;
    tp.max_idle_timeout = (ngtcp2_duration)in->idle_timeout_ms * NGTCP2_MILLISECONDS;
    int rv = ngtcp2_conn_set_local_transport_params(c->conn, &tp);
    if (rv != 0) {
        nx_qconn_fail(c, "TLS: inspector transport parameters: %s", ngtcp2_strerror(rv));
        return -1;
    }
    /* Only the peers' connections are kept alive: a quiet inspector may go. */
    ngtcp2_conn_set_keep_alive_timeout(c->conn, 0);
    nx_qpeer_retire(p);
    p->inspector = 1;
    c->inspector = 1;
    NX_DEBUG("quic", "%s: ClientHello for ALPN h3: an inspector", p->base.addr);
    return 0;
}

void nx_qinspect_up(struct nx_qpeer *p)
{
    struct nx_quic *q = p->q;
    struct nx_qconn *c = p->conn;
    const struct nx_quic_inspect *in = q->conf.inspect;
    char name[256], err[160];
    if (!c || p->h3)
        return;
    nx_qtls_peer_name(c, name, sizeof(name));
    if (q->inspectors >= in->max_conns) {
        NX_WARN("quic", "inspector %s (%s) refused: %u inspection connections are up "
                "(inspect_max_conns)", p->base.addr, name, q->inspectors);
        nx_qconn_close(c, NGHTTP3_H3_EXCESSIVE_LOAD, "too many inspection connections");
        return;
    }
    p->h3 = nx_h3s_new(c, in, err, sizeof(err));
    if (!p->h3) {
        NX_WARN("quic", "inspector %s (%s): %s", p->base.addr, name, err);
        nx_qconn_close(c, NGHTTP3_H3_INTERNAL_ERROR, err);
        return;
    }
    p->state = NX_TPEER_UP;
    q->inspectors++;
    p->inspect_counted = 1;
    NX_INFO("quic", "inspector %s up (%s)", p->base.addr, name);
    nx_quic_schedule_flush(c);
}

void nx_qinspect_gone(struct nx_qpeer *p, const char *why)
{
    if (p->h3)
        NX_INFO("quic", "inspector %s closed after %llu answer(s): %s", p->base.addr,
                (unsigned long long)nx_h3s_answered(p->h3), why);
    else
        NX_INFO("quic", "inspector %s ended before it came up: %s", p->base.addr, why);
    p->state = NX_TPEER_LOST;
    p->forget_req = 1;
    nx_qpeer_settle(p);
}

void nx_qinspect_free(struct nx_qpeer *p)
{
    nx_h3s_free(p->h3);
    p->h3 = NULL;
    if (p->inspect_counted) {
        p->inspect_counted = 0;
        p->q->inspectors--;
    }
}

/* ---- stream events of an inspector's connection ---- */

static struct nx_h3s *session(struct nx_qconn *c)
{
    return c->peer ? c->peer->h3 : NULL;
}

int nx_qinspect_recv(struct nx_qconn *c, uint32_t flags, int64_t id, const uint8_t *data,
                     size_t datalen)
{
    struct nx_h3s *h = session(c);
    if (!h) {
        /* Refused (closing) or not up: nobody reads this. */
        if (!c->fail)
            nx_qconn_close(c, NGHTTP3_H3_INTERNAL_ERROR, "stream data before the session");
        return 0;
    }
    return nx_h3s_recv(h, id, data, datalen, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
}

int nx_qinspect_acked(struct nx_qconn *c, int64_t id, uint64_t datalen)
{
    struct nx_h3s *h = session(c);
    return h ? nx_h3s_acked(h, id, datalen) : 0;
}

int nx_qinspect_stream_close(struct nx_qconn *c, uint32_t flags, int64_t id, uint64_t app_err)
{
    struct nx_h3s *h = session(c);
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
        app_err = NGHTTP3_H3_NO_ERROR;
    if (h)
        nx_h3s_stream_close(h, id, app_err);
    /* A finished request makes room for the next one. */
    if (ngtcp2_is_bidi_stream(id) && !ngtcp2_conn_is_local_stream(c->conn, id))
        ngtcp2_conn_extend_max_streams_bidi(c->conn, 1);
    return 0;
}

int nx_qinspect_stream_reset(struct nx_qconn *c, int64_t id)
{
    struct nx_h3s *h = session(c);
    if (h)
        nx_h3s_stream_reset(h, id);
    return 0;
}

int nx_qinspect_extend_stream(struct nx_qconn *c, int64_t id)
{
    struct nx_h3s *h = session(c);
    if (h) {
        nx_h3s_unblock(h, id);
        nx_quic_schedule_flush(c);
    }
    return 0;
}

int nx_qinspect_extend_bidi(struct nx_qconn *c, uint64_t max_streams)
{
    struct nx_h3s *h = session(c);
    if (h)
        nx_h3s_max_bidi(h, max_streams);
    return 0;
}

ngtcp2_ssize nx_qinspect_write_pkt(struct nx_qconn *c, uint8_t *dest, size_t destlen,
                                   ngtcp2_tstamp ts)
{
    struct nx_h3s *h = session(c);
    if (h)
        return nx_h3s_write_pkt(h, dest, destlen, ts);
    ngtcp2_ssize ndata;
    return ngtcp2_conn_writev_stream(c->conn, NULL, NULL, dest, destlen, &ndata,
                                     NGTCP2_WRITE_STREAM_FLAG_NONE, -1, NULL, 0, ts);
}
