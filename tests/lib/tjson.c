/* tjson.c - see tjson.h.  Recursive descent; depth is bounded so that a broken tool
 * cannot crash the test with deep nesting. */
#include "tjson.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TJ_MAX_DEPTH 64

struct rd {
    const char *s, *p;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct rd *r, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = 1;
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (r->errlen)
        snprintf(r->err, r->errlen, "JSON offset %zu: %s", (size_t)(r->p - r->s), why);
}

static void ws(struct rd *r)
{
    while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
        r->p++;
}

static struct tj *node(enum tj_type t)
{
    struct tj *v = calloc(1, sizeof(*v));
    if (!v) {
        perror("tjson: calloc");
        exit(1);
    }
    v->type = t;
    return v;
}

static void add_kid(struct tj *parent, struct tj *kid)
{
    struct tj **k = realloc(parent->kids, (parent->nkids + 1) * sizeof(*k));
    if (!k) {
        perror("tjson: realloc");
        exit(1);
    }
    parent->kids = k;
    k[parent->nkids++] = kid;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t utf8(unsigned cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at r->p (the opening quote); returns the decoded text (malloc'd). */
static char *string(struct rd *r)
{
    r->p++;
    size_t cap = strlen(r->p) + 1, n = 0; /* decoding never grows the text */
    char *o = malloc(cap);
    if (!o) {
        perror("tjson: malloc");
        exit(1);
    }
    for (;;) {
        unsigned char c = (unsigned char)*r->p;
        if (c == '"') {
            r->p++;
            break;
        }
        if (c == '\0' || c < 0x20) {
            if (c)
                fail(r, "control character 0x%02x in a string", c);
            else
                fail(r, "unterminated string");
            free(o);
            return NULL;
        }
        if (c != '\\') {
            o[n++] = (char)c;
            r->p++;
            continue;
        }
        char e = r->p[1];
        r->p += 2;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(r->p, &cp)) {
                fail(r, "bad \\u escape");
                free(o);
                return NULL;
            }
            r->p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && r->p[0] == '\\' && r->p[1] == 'u' &&
                !hex4(r->p + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                r->p += 6;
            } else if (cp >= 0xd800 && cp < 0xe000) {
                fail(r, "unpaired surrogate \\u%04x", cp);
                free(o);
                return NULL;
            }
            /* 6 escape bytes always hold the at most 4 bytes of UTF-8. */
            n += utf8(cp, o + n);
            break;
        }
        default:
            fail(r, "bad escape \\%c", e ? e : '0');
            free(o);
            return NULL;
        }
    }
    o[n] = '\0';
    return o;
}

static struct tj *value(struct rd *r, int depth);

static struct tj *number(struct rd *r)
{
    const char *start = r->p;
    const char *q = r->p;
    if (*q == '-')
        q++;
    if (*q == '0')
        q++;
    else if (*q >= '1' && *q <= '9')
        while (*q >= '0' && *q <= '9')
            q++;
    else
        return fail(r, "unexpected character '%c'", *r->p ? *r->p : '0'), NULL;
    if (*q == '.') {
        q++;
        if (!(*q >= '0' && *q <= '9'))
            return fail(r, "digits must follow '.'"), NULL;
        while (*q >= '0' && *q <= '9')
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-')
            q++;
        if (!(*q >= '0' && *q <= '9'))
            return fail(r, "digits must follow the exponent"), NULL;
        while (*q >= '0' && *q <= '9')
            q++;
    }
    struct tj *v = node(TJ_NUM);
    v->str = strndup(start, (size_t)(q - start));
    v->num = strtod(v->str, NULL);
    r->p = q;
    return v;
}

static struct tj *container(struct rd *r, int depth, int obj)
{
    struct tj *v = node(obj ? TJ_OBJ : TJ_ARR);
    char close = obj ? '}' : ']';
    r->p++;
    ws(r);
    if (*r->p == close) {
        r->p++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        ws(r);
        if (obj) {
            if (*r->p != '"') {
                fail(r, "expected a member name");
                break;
            }
            if (!(key = string(r)))
                break;
            ws(r);
            if (*r->p != ':') {
                free(key);
                fail(r, "expected ':'");
                break;
            }
            r->p++;
        }
        struct tj *kid = value(r, depth + 1);
        if (!kid) {
            free(key);
            break;
        }
        kid->key = key;
        add_kid(v, kid);
        ws(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == close) {
            r->p++;
            return v;
        }
        fail(r, "expected ',' or '%c'", close);
        break;
    }
    tj_free(v);
    return NULL;
}

static struct tj *value(struct rd *r, int depth)
{
    if (depth > TJ_MAX_DEPTH)
        return fail(r, "nested deeper than %d", TJ_MAX_DEPTH), NULL;
    ws(r);
    switch (*r->p) {
    case '{': return container(r, depth, 1);
    case '[': return container(r, depth, 0);
    case '"': {
        char *s = string(r);
        if (!s)
            return NULL;
        struct tj *v = node(TJ_STR);
        v->str = s;
        return v;
    }
    case 't':
    case 'f':
    case 'n': {
        static const char *const words[] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++) {
            size_t l = strlen(words[i]);
            if (!strncmp(r->p, words[i], l)) {
                r->p += l;
                struct tj *v = node(i == 2 ? TJ_NULL : TJ_BOOL);
                v->boolean = i == 0;
                return v;
            }
        }
        return fail(r, "unknown word"), NULL;
    }
    default: return number(r);
    }
}

struct tj *tj_parse(const char *text, char *err, size_t errlen)
{
    struct rd r = {.s = text, .p = text, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = '\0';
    struct tj *v = value(&r, 0);
    if (v) {
        ws(&r);
        if (*r.p) {
            fail(&r, "text after the value");
            tj_free(v);
            v = NULL;
        }
    }
    return v;
}

void tj_free(struct tj *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->nkids; i++)
        tj_free(v->kids[i]);
    free(v->kids);
    free(v->key);
    free(v->str);
    free(v);
}

const struct tj *tj_at(const struct tj *v, const char *path)
{
    const char *p = path;
    while (v && *p) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[') {
            char *end;
            errno = 0;
            unsigned long i = strtoul(p + 1, &end, 10);
            if (end == p + 1 || *end != ']' || errno || v->type != TJ_ARR || i >= v->nkids)
                return NULL;
            v = v->kids[i];
            p = end + 1;
            continue;
        }
        size_t l = strcspn(p, ".[");
        if (v->type != TJ_OBJ)
            return NULL;
        const struct tj *found = NULL;
        for (size_t i = 0; i < v->nkids && !found; i++)
            if (strlen(v->kids[i]->key) == l && !strncmp(v->kids[i]->key, p, l))
                found = v->kids[i];
        v = found;
        p += l;
    }
    return v;
}

int tj_u64(const struct tj *root, const char *path, uint64_t *out)
{
    const struct tj *v = tj_at(root, path);
    if (!v || v->type != TJ_NUM || v->str[0] == '-' || strpbrk(v->str, ".eE"))
        return -1;
    errno = 0;
    unsigned long long x = strtoull(v->str, NULL, 10);
    if (errno)
        return -1;
    *out = x;
    return 0;
}

int tj_num(const struct tj *root, const char *path, double *out)
{
    const struct tj *v = tj_at(root, path);
    if (!v || v->type != TJ_NUM)
        return -1;
    *out = v->num;
    return 0;
}

int tj_bool(const struct tj *root, const char *path, int *out)
{
    const struct tj *v = tj_at(root, path);
    if (!v || v->type != TJ_BOOL)
        return -1;
    *out = v->boolean;
    return 0;
}

const char *tj_str(const struct tj *root, const char *path)
{
    const struct tj *v = tj_at(root, path);
    return v && v->type == TJ_STR ? v->str : NULL;
}

long tj_len(const struct tj *root, const char *path)
{
    const struct tj *v = tj_at(root, path);
    return v && (v->type == TJ_ARR || v->type == TJ_OBJ) ? (long)v->nkids : -1;
}
