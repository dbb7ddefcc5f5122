/*
 * h3_server.h - the HTTP/3 server session (nghttp3 0.8) of one inspector's QUIC
 * connection: nexard's remote inspection endpoint.
 *
 * The session opens the server's control stream and QPACK encoder/decoder streams, reads
 * requests on the client's bidirectional streams, judges each one with h3_req.c and
 * answers it: 200 with the body that conf.inspect->get() builds (a CtlReply), or 400, 404,
 * 405, 431 or 500 with a one-line text/plain reason.  A request is answered once it is
 * complete (FIN), or as soon as its header fields are refused.
 *
 * Limits, besides h3_req.h's: a request stream carries at most NX_H3_REQ_WINDOW bytes in
 * all (its flow-control credit is never extended, so a longer one stalls and the idle
 * timeout ends it); at most NX_H3_STREAMS requests at once; QPACK without a dynamic table
 * either way, so no stream ever blocks on another.
 *
 * Ownership: quic_inspect.c creates a session when an inspector's handshake completes and
 * frees it with the inspector's record, after the connection is gone.  Every entry point
 * below runs inside the connection's ngtcp2 callbacks or its write loop; errors close the
 * connection with an H3 error code (nx_qconn_close), never from under ngtcp2.
 */
#ifndef NX_H3_SERVER_H
#define NX_H3_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include <ngtcp2/ngtcp2.h>

#define NX_H3_STREAMS 4                 /* concurrent requests per connection */
#define NX_H3_REQ_WINDOW (16u << 10)    /* bytes one request stream may carry */
#define NX_H3_UNI_STREAMS 4             /* control, QPACK x2, one the client may add */
#define NX_H3_UNI_WINDOW (64u << 10)
#define NX_H3_CONN_WINDOW (256u << 10)

struct nx_qconn;
struct nx_quic_inspect;
struct nx_h3s;

/* A session on c (handshake completed).  NULL with a reason in err. */
struct nx_h3s *nx_h3s_new(struct nx_qconn *c, const struct nx_quic_inspect *in, char *err,
                          size_t errlen);
/* Frees the session and every request; its connection may already be gone. */
void nx_h3s_free(struct nx_h3s *h);

/* Stream data from the client (recv_stream_data).  0 or an ngtcp2 error. */
int nx_h3s_recv(struct nx_h3s *h, int64_t id, const uint8_t *data, size_t len, int fin);
/* The client acknowledged datalen more bytes of stream id. */
int nx_h3s_acked(struct nx_h3s *h, int64_t id, uint64_t datalen);
/* Stream id closed (app_err: its error code when set, else H3_NO_ERROR). */
void nx_h3s_stream_close(struct nx_h3s *h, int64_t id, uint64_t app_err);
/* The client reset stream id or asked us to stop sending on it. */
void nx_h3s_stream_reset(struct nx_h3s *h, int64_t id);
/* Flow control: stream id may take more; the client may open max bidi streams in all. */
void nx_h3s_unblock(struct nx_h3s *h, int64_t id);
void nx_h3s_max_bidi(struct nx_h3s *h, uint64_t max);

/* One packet of whatever the session has to send (like ngtcp2_conn_writev_stream). */
ngtcp2_ssize nx_h3s_write_pkt(struct nx_h3s *h, uint8_t *dest, size_t destlen,
                              ngtcp2_tstamp ts);

/* Requests answered, for the log line at close. */
uint64_t nx_h3s_answered(const struct nx_h3s *h);

#endif
