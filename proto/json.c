/*
 * json.c - see json.h: separators, escaping, UTF-8 repair.
 */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void nx_json_init(struct nx_json *j, FILE *f)
{
    memset(j, 0, sizeof(*j));
    j->f = f;
}

/* Comma (when this level already has a member) and "key": for the next value. */
static void member(struct nx_json *j, const char *key)
{
    if (j->need_comma[j->depth])
        fputc(',', j->f);
    j->need_comma[j->depth] = true;
    if (key) {
        nx_json_write_string(j->f, key);
        fputc(':', j->f);
    }
}

static void begin(struct nx_json *j, const char *key, char c)
{
    member(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < NX_JSON_MAX_DEPTH)
        j->depth++;
    j->need_comma[j->depth] = false;
}

static void end(struct nx_json *j, char c)
{
    fputc(c, j->f);
    if (j->depth > 0)
        j->depth--;
}

void nx_json_obj_begin(struct nx_json *j, const char *key) { begin(j, key, '{'); }
void nx_json_obj_end(struct nx_json *j) { end(j, '}'); }
void nx_json_arr_begin(struct nx_json *j, const char *key) { begin(j, key, '['); }
void nx_json_arr_end(struct nx_json *j) { end(j, ']'); }

void nx_json_str(struct nx_json *j, const char *key, const char *v)
{
    member(j, key);
    if (v)
        nx_json_write_string(j->f, v);
    else
        fputs("null", j->f);
}

void nx_json_u64(struct nx_json *j, const char *key, uint64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void nx_json_i64(struct nx_json *j, const char *key, int64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void nx_json_double(struct nx_json *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.9g", v); /* plenty for ages and times */
    else
        fputs("null", j->f);
}

void nx_json_bool(struct nx_json *j, const char *key, bool v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}

void nx_json_finish(struct nx_json *j)
{
    fputc('\n', j->f);
    fflush(j->f);
}

/* Length of the well-formed UTF-8 sequence at s (1-4), or 0 when it is not one:
 * overlong forms, surrogates and code points above U+10FFFF are rejected. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0)
        n = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        n = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
        n = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void nx_json_write_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    while (*s) {
        unsigned char c = *s;
        switch (c) {
        case '"': fputs("\\\"", f); s++; continue;
        case '\\': fputs("\\\\", f); s++; continue;
        case '\b': fputs("\\b", f); s++; continue;
        case '\f': fputs("\\f", f); s++; continue;
        case '\n': fputs("\\n", f); s++; continue;
        case '\r': fputs("\\r", f); s++; continue;
        case '\t': fputs("\\t", f); s++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            s++;
            continue;
        }
        size_t n = utf8_len(s);
        if (n == 0) {
            fputs("\\ufffd", f);
            s++;
            continue;
        }
        fwrite(s, 1, n, f);
        s += n;
    }
    fputc('"', f);
}
