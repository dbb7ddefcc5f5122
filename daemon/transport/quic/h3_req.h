/*
 * h3_req.h - one HTTP/3 request to the inspection endpoint, judged from its header fields
 * alone: no connection, no nghttp3, no allocation, so that it can be fuzzed on bytes
 * (tests/fuzz/fuzz_h3req.c).
 *
 * The server feeds every field nghttp3 decoded (nx_h3req_field), the body's length as it
 * arrives (nx_h3req_body), and asks for the verdict at the end (nx_h3req_decide).  The
 * fields come from an authenticated but untrusted client, so everything is bounded and
 * checked here, whatever nghttp3 already checked:
 *
 *   - at most NX_H3REQ_FIELDS fields and NX_H3REQ_BYTES bytes of them, each counted as
 *     name + value + 32 (RFC 9114 4.2.2)                                          -> 431
 *   - pseudo-fields :method :scheme :path :authority only, each at most once, before
 *     every regular field; names lower-case tokens; values without NUL, CR or LF  -> 400
 *   - :method a token of at most 15 bytes, :scheme "https", :path an origin-form of at
 *     most NX_H3REQ_PATH bytes of visible ASCII                                   -> 400
 *   - in the query string, format= other than json or protobuf (other parameters are
 *     ignored)                                                                    -> 400
 *   - no body (a GET has none)                                                    -> 400
 *   - the path must be a route of proto/inspect.h                                 -> 404
 *   - the method must be GET                                                      -> 405
 *   - otherwise                                                                   -> 200
 *
 * Once refused, a request stays refused with its first reason.
 *
 * The body's format (proto/inspect.h): ?format= when given, else the Accept fields'
 * preference between application/json and application/x-protobuf (nx_h3req_format).
 */
#ifndef NX_H3_REQ_H
#define NX_H3_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "inspect.h"

#define NX_H3REQ_FIELDS 32
#define NX_H3REQ_BYTES 4096
#define NX_H3REQ_PATH 256
#define NX_H3REQ_METHOD 15
#define NX_H3REQ_BODY 0   /* bytes of body allowed */

struct nx_h3req {
    char method[NX_H3REQ_METHOD + 1];
    char path[NX_H3REQ_PATH + 1]; /* as sent, NUL-terminated */
    size_t path_len;              /* up to the query string */
    uint32_t nfields;
    uint32_t bytes;               /* field bytes counted so far */
    uint64_t body;                /* body bytes received */
    unsigned seen;                /* pseudo-fields seen, and whether a regular one came */
    int status;                   /* 0 while undecided, else the refusal's HTTP status */
    const char *why;              /* the refusal's reason (a literal) */
    /* Accept, per enum nx_inspect_format: how specific the best media range matching it
     * was (0 none, 1 * / *, 2 application/ *, 3 the type itself) and its q-value in
     * thousandths. */
    uint8_t accept_spec[2];
    uint16_t accept_q[2];
    uint8_t query_format;         /* 0: no ?format=; else 1 + enum nx_inspect_format */
};

void nx_h3req_init(struct nx_h3req *r);

/* One decoded field.  0 to go on, or the HTTP status of a refusal (then r->why). */
int nx_h3req_field(struct nx_h3req *r, const uint8_t *name, size_t namelen,
                   const uint8_t *value, size_t valuelen);

/* len more bytes of body.  0, or the refusal's status. */
int nx_h3req_body(struct nx_h3req *r, size_t len);

/*
 * The request is complete: its status (200, 400, 404, 405 or 431, with r->why for a
 * refusal).  On 200, *route is the route to answer; otherwise it is NULL.
 */
int nx_h3req_decide(struct nx_h3req *r, const struct nx_inspect_route **route);

/* The format the client asked for (enum nx_inspect_format), from what was fed so far:
 * ?format= when given, else JSON when Accept weighs application/json above
 * application/x-protobuf, else protobuf.  Also meaningful for a refused request (its
 * refusal is written in that format). */
int nx_h3req_format(const struct nx_h3req *r);

#endif
