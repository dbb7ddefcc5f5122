/*
 * table.c - column-aligned text tables and cell formatting for nexarctl.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "util.h"

void nxc_table_init(struct nxc_table *t, int ncols, ...)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
    va_list ap;
    va_start(ap, ncols);
    for (int i = 0; i < ncols; i++)
        nxc_table_add(t, nxt_xstrdup(va_arg(ap, const char *)));
    va_end(ap);
}

void nxc_table_add(struct nxc_table *t, char *cell)
{
    int n = t->nrows * t->ncols + t->pending;
    if (n % 64 == 0)
        t->cells = nxt_xrealloc(t->cells, sizeof(char *) * (size_t)(n + 64));
    t->cells[n] = cell;
    if (++t->pending == t->ncols) {
        t->pending = 0;
        t->nrows++;
    }
}

void nxc_table_print(struct nxc_table *t, FILE *f, const char *indent)
{
    size_t *w = nxt_xcalloc((size_t)t->ncols, sizeof(size_t));
    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            size_t l = strlen(t->cells[r * t->ncols + c]);
            if (l > w[c])
                w[c] = l;
        }
    for (int r = 0; r < t->nrows; r++) {
        fputs(indent, f);
        for (int c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols) /* no trailing blanks */
                fprintf(f, "%s\n", cell);
            else
                fprintf(f, "%-*s  ", (int)w[c], cell);
        }
    }
    free(w);
}

void nxc_table_free(struct nxc_table *t)
{
    for (int i = 0; i < t->nrows * t->ncols + t->pending; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

char *nxc_fmt(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        nxt_die(7, "out of memory");
    return s;
}

const char *nxc_fmt_age(double s, char *buf, size_t len)
{
    /* A remote daemon's answer may hold anything: NaN and negatives are 0, and what
     * would not fit an int's days says so rather than overflow the conversion. */
    if (!(s >= 0))
        s = 0;
    if (s >= 86400.0 * 1e6) {
        snprintf(buf, len, ">1000000d");
        return buf;
    }
    if (s < 60)
        snprintf(buf, len, "%.1fs", s);
    else if (s < 3600)
        snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)s % 3600 / 60);
    else
        snprintf(buf, len, "%dd%02dh", (int)(s / 86400), (int)(s / 3600) % 24);
    return buf;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

const char *nxc_fmt_ranks(const uint32_t *v, size_t n, char *buf, size_t len)
{
    if (n == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    uint32_t *s = nxt_xmalloc(n * sizeof(*s));
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_u32);
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len;) {
        size_t k = i;
        while (k + 1 < n && s[k + 1] <= s[k] + 1) /* also folds duplicates */
            k++;
        int w = s[k] == s[i]
                    ? snprintf(buf + used, len - used, "%s%u", used ? "," : "", s[i])
                    : snprintf(buf + used, len - used, "%s%u-%u", used ? "," : "", s[i], s[k]);
        used += w > 0 ? (size_t)w : 0;
        i = k + 1;
    }
    if (used >= len && len > 4)
        memcpy(buf + len - 4, "...", 4); /* truncated: say so */
    free(s);
    return buf;
}
