/*
 * fuzz_h3req.c - libFuzzer target for the inspection endpoint's request judge
 * (daemon/transport/quic/h3_req.c): the header fields and body of one HTTP/3 request, as
 * nghttp3 hands them over from an inspector.
 *
 * Input: a sequence of events until the bytes run out:
 *   0x00..0x7f  a field: namelen = byte, then 2 bytes valuelen (big endian, cut to what
 *               is left), the name, the value
 *   0x80..0xff  body: (byte & 0x7f) bytes
 * Checked after every event and at the verdict:
 *   - the status is 0 or a refusal (400, 431) and, once set, never changes, nor its reason;
 *   - the counted bytes stay within NX_H3REQ_BYTES, the fields within NX_H3REQ_FIELDS + 1;
 *   - the verdict is 200, 400, 404, 405 or 431; 200 comes with a route whose path is the
 *     request's path up to its query, a method "GET", no body and every pseudo-field
 *     checked by an independent reading below; a refusal comes with a reason;
 *   - the body's format (nx_h3req_format) is protobuf or JSON, and for a 200 it is what
 *     the path's ?format= names (an independent reading below: the last format=json or
 *     format=protobuf), else protobuf when no Accept field came; a request whose ?format=
 *     names anything else is refused (400, or 431 if that came first);
 *   - the same events judged again give the same verdict and format.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h3_req.h"
#include "fuzz.h"


/* What an independent reading says a 200 needs. */
struct ref {
    int method_get, scheme_https, path_ok, body, regular_seen, pseudo_after, bad;
    int accept_seen; /* a field "accept" came */
    int qfmt, qbad;  /* ?format=: 0 or 1 + enum nx_inspect_format; another value given */
    char path[NX_H3REQ_PATH + 1];
    size_t path_len;
};

/* The query string of r->path as h3_req.h states it: parameters split at '&' up to a
 * '#'; the last format=json or format=protobuf counts, a bare "format" or another value
 * is a refusal. */
static void ref_query(struct ref *r)
{
    const char *q = r->path + r->path_len;
    r->qfmt = 0;
    if (*q != '?')
        return;
    q++;
    size_t end = strcspn(q, "#");
    for (size_t i = 0; i < end;) {
        size_t k = i + strcspn(q + i, "&#"), n = k - i;
        const char *p = q + i;
        if (n == 6 && !memcmp(p, "format", 6))
            r->qbad = 1;
        else if (n >= 7 && !memcmp(p, "format=", 7)) {
            if (n == 11 && !memcmp(p + 7, "json", 4))
                r->qfmt = 1 + NX_INSPECT_JSON;
            else if (n == 15 && !memcmp(p + 7, "protobuf", 8))
                r->qfmt = 1 + NX_INSPECT_PROTOBUF;
            else
                r->qbad = 1;
        }
        i = k + 1;
    }
}

static void ref_field(struct ref *r, const uint8_t *n, size_t nl, const uint8_t *v, size_t vl)
{
    if (nl > 0 && n[0] == ':') {
        if (r->regular_seen)
            r->pseudo_after = 1;
        if (nl == 7 && !memcmp(n, ":method", 7))
            r->method_get = vl == 3 && !memcmp(v, "GET", 3);
        if (nl == 7 && !memcmp(n, ":scheme", 7))
            r->scheme_https = vl == 5 && !memcmp(v, "https", 5);
        if (nl == 5 && !memcmp(n, ":path", 5) && vl <= NX_H3REQ_PATH) {
            memcpy(r->path, v, vl);
            r->path[vl] = '\0';
            r->path_len = strcspn(r->path, "?#");
            r->path_ok = vl > 0 && v[0] == '/';
            ref_query(r);
        }
    } else {
        r->regular_seen = 1;
        if (nl == 6 && !memcmp(n, "accept", 6))
            r->accept_seen = 1;
    }
    for (size_t i = 0; i < vl; i++)
        if (v[i] == 0 || v[i] == '\r' || v[i] == '\n')
            r->bad = 1;
}

static int judge(const uint8_t *data, size_t size, struct nx_h3req *q, struct ref *rf,
                 const struct nx_inspect_route **route)
{
    size_t i = 0;
    nx_h3req_init(q);
    memset(rf, 0, sizeof(*rf));
    while (i < size) {
        uint8_t ev = data[i++];
        int prev = q->status;
        const char *prev_why = q->why;
        if (ev & 0x80) {
            size_t n = ev & 0x7f;
            rf->body += (int)n;
            nx_h3req_body(q, n);
        } else {
            size_t nl = ev, vl = 0;
            if (i + 2 <= size)
                vl = (size_t)data[i] << 8 | data[i + 1];
            i += i + 2 <= size ? 2 : size - i;
            if (nl > size - i)
                nl = size - i;
            const uint8_t *name = data + i;
            i += nl;
            if (vl > size - i)
                vl = size - i;
            const uint8_t *value = data + i;
            i += vl;
            int st = nx_h3req_field(q, name, nl, value, vl);
            CHECK(st == q->status);
            ref_field(rf, name, nl, value, vl);
        }
        CHECK(q->status == 0 || q->status == 400 || q->status == 431);
        if (prev) {
            CHECK(q->status == prev);
            CHECK(q->why == prev_why);
        }
        CHECK(!q->status || q->why);
        CHECK(q->bytes <= NX_H3REQ_BYTES);
        CHECK(q->nfields <= NX_H3REQ_FIELDS + 1 || q->status);
    }
    return nx_h3req_decide(q, route);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nx_h3req q1, q2;
    struct ref rf, rf2;
    const struct nx_inspect_route *r1, *r2;
    int s1 = judge(data, size, &q1, &rf, &r1);
    int s2 = judge(data, size, &q2, &rf2, &r2);
    CHECK(s1 == s2 && r1 == r2);
    CHECK(s1 == 200 || s1 == 400 || s1 == 404 || s1 == 405 || s1 == 431);
    CHECK(nx_h3req_decide(&q1, &r2) == s1); /* asking again changes nothing */
    int fmt = nx_h3req_format(&q1);
    CHECK(fmt == NX_INSPECT_PROTOBUF || fmt == NX_INSPECT_JSON);
    CHECK(fmt == nx_h3req_format(&q2));
    CHECK(!rf.qbad || s1 == 400 || s1 == 431);
    if (s1 != 200) {
        CHECK(r1 == NULL && q1.why != NULL);
        return 0;
    }
    CHECK(r1 != NULL);
    CHECK(!strcmp(q1.method, "GET") && rf.method_get);
    CHECK(rf.scheme_https && rf.path_ok && !rf.body && !rf.pseudo_after && !rf.bad);
    CHECK(strlen(r1->path) == rf.path_len && !memcmp(r1->path, rf.path, rf.path_len));
    CHECK(q1.path_len == rf.path_len);
    CHECK(!rf.qbad);
    if (rf.qfmt)
        CHECK(fmt == rf.qfmt - 1);
    else if (!rf.accept_seen)
        CHECK(fmt == NX_INSPECT_PROTOBUF);
    return 0;
}
