/*
 * util.c - messages, allocation and number parsing for the tools.
 */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

const char *nxt_progname = "nexar";

static void vwarn(const char *fmt, va_list ap)
{
    /* One fprintf per line keeps lines of concurrent ranks from interleaving. */
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    fprintf(stderr, "%s: %s\n", nxt_progname, msg);
}

void nxt_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}

void nxt_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
    exit(code);
}

static void *oom(size_t n)
{
    nxt_die(7, "out of memory allocating %zu bytes", n);
}

void *nxt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    return p ? p : oom(n);
}

void *nxt_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    return p ? p : oom(n * size);
}

void *nxt_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    return q ? q : oom(n);
}

char *nxt_xstrdup(const char *s)
{
    char *p = strdup(s);
    return p ? p : oom(strlen(s) + 1);
}

char *nxt_xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? oom(strlen(fmt)) : s;
}

int nxt_parse_size(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -EINVAL; /* strtoull would accept "-1" and " 1" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *out = (uint64_t)v << shift;
    return 0;
}

int nxt_parse_seconds(const char *s, double *out)
{
    if (!s || !*s)
        return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0)
        return -EINVAL;
    *out = v;
    return 0;
}

int nxt_parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return -EINVAL;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

double nxt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *nxt_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}
