/*
 * check.c - comparisons and messages for the tests (see check.h).
 */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "refnum.h"

static char log_tag[96] = "test";

void tl_set_log_tag(const char *tag)
{
    snprintf(log_tag, sizeof(log_tag), "%s", tag);
}

void tl_log(const char *fmt, ...)
{
    char line[2048];
    int n = snprintf(line, sizeof(line), "[%s] ", log_tag);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

double tl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *tl_status_name(int st)
{
    static const char *const n[] = {
        "NEXAR_OK", "NEXAR_ERR_INVALID", "NEXAR_ERR_UNAVAILABLE", "NEXAR_ERR_MISMATCH",
        "NEXAR_ERR_TIMEOUT", "NEXAR_ERR_PEER_LOST", "NEXAR_ERR_ABORTED",
        "NEXAR_ERR_NOMEM", "NEXAR_ERR_UNSUPPORTED", "NEXAR_ERR_PERMISSION",
        "NEXAR_ERR_INTERNAL"};
    return st >= 0 && st <= 10 ? n[st] : "(unknown status)";
}

int tl_check_elems(const char *ctx, int dtype, const void *expected, const void *got,
                   size_t count)
{
    size_t es = tl_esize(dtype);
    if (count == 0 || memcmp(expected, got, count * es) == 0)
        return 0;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        if (memcmp((const char *)expected + i * es, (const char *)got + i * es, es) == 0)
            continue;
        if (bad < 6) {
            char e[64], g[64];
            tl_format_elem(dtype, expected, i, e, sizeof(e));
            tl_format_elem(dtype, got, i, g, sizeof(g));
            tl_log("FAIL %s: index %zu: expected %s, got %s", ctx, i, e, g);
        }
        bad++;
    }
    tl_log("FAIL %s: %zu of %zu elements differ", ctx, bad, count);
    return -1;
}

int tl_check_status(const char *ctx, nexar_status_t want, nexar_status_t st)
{
    if (st == want)
        return 0;
    tl_log("FAIL %s: expected %s, got %s (%d); last error: \"%s\"", ctx,
           tl_status_name((int)want), tl_status_name((int)st), (int)st, nexar_last_error());
    return -1;
}

int tl_check_contains(const char *ctx, const char *text, const char *needle)
{
    if (text && strstr(text, needle))
        return 0;
    tl_log("FAIL %s: expected the text to contain \"%s\"; text: \"%s\"", ctx, needle,
           text ? text : "(null)");
    return -1;
}

int tl_has_row(const char *out, const char *row)
{
    for (const char *line = out; line && *line;) {
        const char *nl = strchr(line, '\n');
        char norm[512];
        size_t k = 0;
        for (const char *p = line; *p && *p != '\n' && k + 1 < sizeof(norm); p++)
            if (*p != ' ' || (k && norm[k - 1] != ' '))
                norm[k++] = *p;
        while (k && norm[k - 1] == ' ')
            k--;
        norm[k] = '\0';
        if (!strcmp(norm, row))
            return 1;
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

int tl_check_names_rank(const char *what, const char *text, int r)
{
    for (const char *p = text ? strstr(text, "rank") : NULL; p; p = strstr(p + 4, "rank")) {
        /* the list after "rank" / "ranks" / "rank(s)": numbers and ranges, commas, spaces */
        const char *q = p + 4;
        if (*q == 's')
            q++;
        else if (!strncmp(q, "(s)", 3))
            q += 3;
        while (*q == ' ' || *q == ',' || (*q >= '0' && *q <= '9') ||
               !strncmp(q, "and ", 4)) {
            if (*q >= '0' && *q <= '9') {
                char *end;
                long v = strtol(q, &end, 10), hi = v;
                if (*end == '-' && end[1] >= '0' && end[1] <= '9') /* a range: "2-3" */
                    hi = strtol(end + 1, &end, 10);
                if (v <= r && r <= hi)
                    return 0;
                q = end;
            } else {
                q += !strncmp(q, "and ", 4) ? 4 : 1;
            }
        }
    }
    tl_log("FAIL %s: the text does not name rank %d: \"%s\"", what, r, text ? text : "(null)");
    return 1;
}
