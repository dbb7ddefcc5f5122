/*
 * h3c.h - a small HTTP/3 client for nexard's remote inspection endpoint: one QUIC
 * connection (ngtcp2 0.12, GnuTLS 3.7, ALPN "h3", mutual TLS against the cluster CA), one
 * or a few requests on it (nghttp3 0.8), then a clean close.  nexarctl --remote uses it,
 * and so do the tests that send the endpoint requests nexarctl never would.
 *
 * Blocking, single-threaded, no event library: a poll() loop on one connected UDP socket,
 * bounded by opts.timeout_ms from start to finish.  Nothing the server sends is trusted:
 * a response body beyond NXT_H3C_BODY_MAX, a response without :status, a certificate
 * that does not chain to opts.ca all end the exchange with a status and a reason.
 *
 * Like the daemons, the client does not compare the names in the daemon's certificate
 * with the address dialled: the cluster CA is the membership list.
 */
#ifndef NXT_H3C_H
#define NXT_H3C_H

#include <stddef.h>
#include <stdint.h>

#define NXT_H3C_BODY_MAX (64u << 20)
#define NXT_H3C_MAX_REQ 16

struct nxt_h3c_opts {
    const char *addr;     /* "host:port" or "[v6]:port" of the daemon's QUIC endpoint */
    const char *ca;       /* PEM: the CA the daemon's certificate must chain to */
    const char *cert;     /* PEM: our certificate chain; NULL or "": present none */
    const char *key;      /* PEM: its private key */
    int timeout_ms;       /* the whole exchange, handshake included */
};

/* One request.  Header fields beyond the pseudo-fields are name, value pairs. */
struct nxt_h3c_req {
    const char *method;   /* "GET" */
    const char *path;     /* "/v1/status" */
    const char *scheme;   /* NULL: "https" */
    const char *authority;/* NULL: opts.addr */
    const char *const *fields; /* name, value, ..., NULL; may be NULL */
    size_t body;          /* bytes of body to send (a pattern); 0: none */
    int repeat;           /* send it this many times at once (1..NXT_H3C_MAX_REQ; 0: 1) */
    int hold_ms;          /* keep the connection this long after the answers (tests) */
};

struct nxt_h3c_resp {
    int status;           /* HTTP status; 0 when the stream was reset without an answer */
    uint64_t reset_code;  /* the H3 error code of such a reset */
    char ctype[128];      /* content-type, "" when absent */
    uint8_t *body;        /* malloc'd (NUL-terminated for convenience), len bytes */
    size_t len;
};

/*
 * Connects to opts->addr, sends rq (repeat times, concurrently as far as the daemon's
 * stream limit allows) and collects the answers in resp[0..repeat), then closes the
 * connection.  Returns 0 when every request was answered or reset, else minus a
 * nexar_status_t with a one-line reason in err:
 *   -NEXAR_ERR_INVALID      a bad address, or a PEM file that cannot be loaded
 *   -NEXAR_ERR_UNAVAILABLE  nothing answers at the address (port unreachable, or silence
 *                           until the timeout), or the daemon has too many inspectors
 *   -NEXAR_ERR_TIMEOUT      the daemon answered the handshake but not the requests in time
 *   -NEXAR_ERR_PERMISSION   TLS refused: the daemon refused our certificate (its reason is
 *                           in err), or its certificate does not chain to opts->ca, or a
 *                           PEM file is not readable (permission)
 *   -NEXAR_ERR_UNSUPPORTED  the daemon does not serve HTTP/3 (ALPN h3 refused: inspect off)
 *   -NEXAR_ERR_INTERNAL     any other protocol failure (the daemon closed with an error,
 *                           an answer without :status, a body beyond NXT_H3C_BODY_MAX)
 * Free each response with nxt_h3c_resp_free(), whatever the return value.
 */
int nxt_h3c_request(const struct nxt_h3c_opts *opts, const struct nxt_h3c_req *rq,
                    struct nxt_h3c_resp *resp, char *err, size_t errlen);

/* GET path: nxt_h3c_request with one request and no extra fields. */
int nxt_h3c_get(const struct nxt_h3c_opts *opts, const char *path, struct nxt_h3c_resp *resp,
                char *err, size_t errlen);

void nxt_h3c_resp_free(struct nxt_h3c_resp *r);

#endif /* NXT_H3C_H */
