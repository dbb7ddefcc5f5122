/* h3_req.c - see h3_req.h. */
#include "h3_req.h"

#include <stdbool.h>
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

/* The query string (after '?', up to a '#'): format=json or format=protobuf; other
 * parameters are not ours to judge. */
static int query(struct nx_h3req *r, const uint8_t *q, size_t n)
{
    size_t end = 0;
    while (end < n && q[end] != '#')
        end++;
    for (size_t i = 0; i < end;) {
        size_t k = i;
        while (k < end && q[k] != '&')
            k++;
        if (k - i >= 7 && !memcmp(q + i, "format=", 7)) {
            if (eq(q + i + 7, k - i - 7, "json"))
                r->query_format = 1 + NX_INSPECT_JSON;
            else if (eq(q + i + 7, k - i - 7, "protobuf"))
                r->query_format = 1 + NX_INSPECT_PROTOBUF;
            else
                return refuse(r, 400, "?format= must be json or protobuf");
        } else if (eq(q + i, k - i, "format")) {
            return refuse(r, 400, "?format= must be json or protobuf");
        }
        i = k + 1;
    }
    return 0;
}

static int lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static int ieq(const uint8_t *s, size_t n, const char *lit)
{
    if (strlen(lit) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower(s[i]) != (uint8_t)lit[i])
            return 0;
    return 1;
}

static size_t skip_ows(const uint8_t *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i;
}

/* A qvalue (RFC 9110 12.4.2) in thousandths, or -1: "0", "0.5", "1", "1.000"... */
static int qvalue(const uint8_t *s, size_t n)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1') || n > 5 || (n > 1 && s[1] != '.'))
        return -1;
    int q = (s[0] - '0') * 1000, scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        q += (s[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

/* One media range of Accept: "type/subtype *(OWS ; OWS param)".  A malformed one is
 * skipped, as if it were not there. */
static void accept_range(struct nx_h3req *r, const uint8_t *s, size_t n)
{
    static const char *const sub[2] = {"x-protobuf", "json"}; /* by enum nx_inspect_format */
    size_t slash = 0, end = 0;
    while (end < n && s[end] != ';' && s[end] != ' ' && s[end] != '\t')
        end++;
    while (slash < end && s[slash] != '/')
        slash++;
    if (slash == 0 || slash + 1 >= end)
        return;
    int q = 1000;
    for (size_t i = end; i < n;) {
        i = skip_ows(s, i, n);
        if (i >= n || s[i] != ';')
            return;
        i = skip_ows(s, i + 1, n);
        size_t k = i;
        while (k < n && s[k] != ';' && s[k] != ' ' && s[k] != '\t')
            k++;
        if (k - i >= 2 && lower(s[i]) == 'q' && s[i + 1] == '=' &&
            (q = qvalue(s + i + 2, k - i - 2)) < 0)
            return;
        i = k;
    }
    bool any_type = ieq(s, slash, "*"), app = ieq(s, slash, "application");
    bool any_sub = ieq(s + slash + 1, end - slash - 1, "*");
    for (int f = 0; f < 2; f++) {
        uint8_t spec = any_type && any_sub                                 ? 1
                       : app && any_sub                                    ? 2
                       : app && ieq(s + slash + 1, end - slash - 1, sub[f]) ? 3
                                                                           : 0;
        if (spec > r->accept_spec[f]) {
            r->accept_spec[f] = spec;
            r->accept_q[f] = (uint16_t)q;
        }
    }
}

/* An Accept field: media ranges separated by commas. */
static void accept(struct nx_h3req *r, const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k < n && v[k] != ',')
            k++;
        size_t b = skip_ows(v, i, k), e = k;
        while (e > b && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e > b)
            accept_range(r, v + b, e - b);
        i = k + 1;
    }
}

int nx_h3req_format(const struct nx_h3req *r)
{
    if (r->query_format)
        return r->query_format - 1;
    int json = r->accept_spec[NX_INSPECT_JSON] ? r->accept_q[NX_INSPECT_JSON] : 0;
    int pb = r->accept_spec[NX_INSPECT_PROTOBUF] ? r->accept_q[NX_INSPECT_PROTOBUF] : 0;
    return json > pb ? NX_INSPECT_JSON : NX_INSPECT_PROTOBUF;
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
        if (r->path_len < vlen && v[r->path_len] == '?')
            return query(r, v + r->path_len + 1, vlen - r->path_len - 1);
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
    if (eq(name, namelen, "accept"))
        accept(r, value, valuelen);
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
