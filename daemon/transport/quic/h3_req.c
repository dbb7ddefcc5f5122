/* h3_req.c - see h3_req.h. */
#include "h3_req.h"

#include <string.h>

enum {
    SEEN_METHOD = 1u << 0,
    SEEN_SCHEME = 1u << 1,
    SEEN_PATH = 1u << 2,
    SEEN_AUTHORITY = 1u << 3,
    SEEN_REGULAR = 1u << 4,
};

void nx_h3req_init(struct nx_h3req *r)
{
    memset(r, 0, sizeof(*r));
}

static int refuse(struct nx_h3req *r, int status, const char *why)
{
    if (!r->status) {
        r->status = status;
        r->why = why;
    }
    return r->status;
}

/* RFC 9110 tchar. */
static int is_tchar(uint8_t c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int is_token(const uint8_t *s, size_t n, int lower_only)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar(s[i]) || (lower_only && s[i] >= 'A' && s[i] <= 'Z'))
            return 0;
    return 1;
}

static int value_ok(const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == 0 || v[i] == '\r' || v[i] == '\n')
            return 0;
    return 1;
}

static int eq(const uint8_t *s, size_t n, const char *lit)
{
    return strlen(lit) == n && !memcmp(s, lit, n);
}

static int pseudo(struct nx_h3req *r, const uint8_t *name, size_t nlen, const uint8_t *v,
                  size_t vlen)
{
    unsigned bit;
    if (r->seen & SEEN_REGULAR)
        return refuse(r, 400, "a pseudo-header field after a regular one");
    if (eq(name, nlen, ":method"))
        bit = SEEN_METHOD;
    else if (eq(name, nlen, ":scheme"))
        bit = SEEN_SCHEME;
    else if (eq(name, nlen, ":path"))
        bit = SEEN_PATH;
    else if (eq(name, nlen, ":authority"))
        bit = SEEN_AUTHORITY;
    else
        return refuse(r, 400, "an unknown pseudo-header field");
    if (r->seen & bit)
        return refuse(r, 400, "a pseudo-header field twice");
    r->seen |= bit;
    switch (bit) {
    case SEEN_METHOD:
        if (vlen > NX_H3REQ_METHOD || !is_token(v, vlen, 0))
            return refuse(r, 400, "a malformed :method");
        memcpy(r->method, v, vlen);
        r->method[vlen] = '\0';
        return 0;
    case SEEN_SCHEME:
        if (!eq(v, vlen, "https"))
            return refuse(r, 400, ":scheme is not https");
        return 0;
    case SEEN_PATH:
        if (vlen == 0 || vlen > NX_H3REQ_PATH || v[0] != '/')
            return refuse(r, 400, "a malformed :path");
        for (size_t i = 0; i < vlen; i++)
            if (v[i] < 0x21 || v[i] > 0x7e)
                return refuse(r, 400, "a malformed :path");
        memcpy(r->path, v, vlen);
        r->path[vlen] = '\0';
        r->path_len = vlen;
        for (size_t i = 0; i < vlen; i++)
            if (v[i] == '?' || v[i] == '#') {
                r->path_len = i;
                break;
            }
        return 0;
    default: /* :authority: only its form matters, it names no one here */
        if (vlen > 255)
            return refuse(r, 400, "a malformed :authority");
        return 0;
    }
}

int nx_h3req_field(struct nx_h3req *r, const uint8_t *name, size_t namelen,
                   const uint8_t *value, size_t valuelen)
{
    if (r->status)
        return r->status;
    if (++r->nfields > NX_H3REQ_FIELDS)
        return refuse(r, 431, "too many header fields");
    /* Each term is bounded before the sum, so the sum cannot wrap. */
    if (namelen > NX_H3REQ_BYTES || valuelen > NX_H3REQ_BYTES ||
        r->bytes + namelen + valuelen + 32 > NX_H3REQ_BYTES)
        return refuse(r, 431, "header fields too large");
    r->bytes += (uint32_t)(namelen + valuelen + 32);
    if (!value_ok(value, valuelen))
        return refuse(r, 400, "a header field value with NUL, CR or LF");
    if (namelen > 0 && name[0] == ':')
        return pseudo(r, name, namelen, value, valuelen);
    if (!is_token(name, namelen, 1))
        return refuse(r, 400, "a malformed header field name");
    r->seen |= SEEN_REGULAR;
    return 0;
}

int nx_h3req_body(struct nx_h3req *r, size_t len)
{
    if (r->status)
        return r->status;
    r->body += len;
    if (r->body > NX_H3REQ_BODY)
        return refuse(r, 400, "a request with a body");
    return 0;
}

int nx_h3req_decide(struct nx_h3req *r, const struct nx_inspect_route **route)
{
    *route = NULL;
    if (r->status)
        return r->status;
    if (!(r->seen & SEEN_METHOD) || !(r->seen & SEEN_PATH) || !(r->seen & SEEN_SCHEME))
        return refuse(r, 400, "a request without :method, :scheme or :path");
    const struct nx_inspect_route *rt = nx_inspect_by_path(r->path, r->path_len);
    if (!rt)
        return refuse(r, 404, "no such report");
    if (strcmp(r->method, "GET"))
        return refuse(r, 405, "only GET is served");
    *route = rt;
    return 200;
}
