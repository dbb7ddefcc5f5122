/*
 * h3c_int.h - the HTTP/3 client's internals, shared by h3c_quic.c (socket, QUIC, TLS,
 * the loop) and h3c_http.c (the nghttp3 session and the requests).
 */
#ifndef NXT_H3C_INT_H
#define NXT_H3C_INT_H

#include <netinet/in.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "h3c.h"

struct h3c_stream {
    int64_t id;            /* -1: not opened yet */
    int done;              /* answered, or reset */
    struct nxt_h3c_resp *resp;
    size_t body_sent;
};

struct h3c {
    const struct nxt_h3c_opts *o;
    const struct nxt_h3c_req *rq;
    int fd;
    struct sockaddr_storage local, remote;
    socklen_t local_len, remote_len;
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
    ngtcp2_crypto_conn_ref ref;
    ngtcp2_path_storage ps;
    nghttp3_conn *h3;
    struct h3c_stream st[NXT_H3C_MAX_REQ];
    int nreq, nopen, ndone;
    int got_packet;        /* the daemon sent us anything at all */
    int refused;           /* ICMP port unreachable: nobody at this address */
    int verify_failed;     /* the daemon's certificate did not verify (why says how) */
    int fail;              /* a nexar_status_t: the exchange failed (why) */
    char why[384];
    char authority[128];
};

/* Records the first failure: status (a nexar_status_t) and its reason. */
void h3c_fail(struct h3c *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- h3c_tls.c ---- */
/* Credentials from opts (ca, cert, key) and a client session with ALPN h3.  0, or minus
 * a nexar_status_t with a reason in err. */
int h3c_tls_setup(struct h3c *c, char *err, size_t errlen);
/* ngtcp2_conn_read_pkt failed with rv: record why (the daemon's close, our TLS). */
void h3c_read_failed(struct h3c *c, int rv);

/* ---- h3c_http.c ---- */
/* The handshake completed: start the HTTP/3 session and send the requests. */
int h3c_http_start(struct h3c *c);
/* Opens streams for requests still waiting for one (the daemon raised its limit). */
int h3c_http_open_more(struct h3c *c);
int h3c_http_recv(struct h3c *c, int64_t id, const uint8_t *data, size_t len, int fin);
int h3c_http_acked(struct h3c *c, int64_t id, uint64_t len);
int h3c_http_stream_close(struct h3c *c, int64_t id, uint64_t app_err, int app_err_set);
/* The daemon reset stream id (RESET_STREAM), or asked us to stop sending on it. */
int h3c_http_stream_reset(struct h3c *c, int64_t id, uint64_t app_err);
int h3c_http_stop_sending(struct h3c *c, int64_t id);
int h3c_http_unblock(struct h3c *c, int64_t id);
/* One packet of whatever is to be sent (like ngtcp2_conn_writev_stream); <0 fails. */
ngtcp2_ssize h3c_http_write_pkt(struct h3c *c, uint8_t *dest, size_t destlen,
                                ngtcp2_tstamp ts);
void h3c_http_free(struct h3c *c);

#endif /* NXT_H3C_INT_H */
