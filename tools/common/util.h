/*
 * util.h - small helpers shared by nexar-run, nexar-bench and nexarctl.
 *
 * The tools are short-lived programs: running out of memory is not worth
 * recovering from, so xmalloc() and friends print one line and exit (the
 * library, libnexarshim, never does this; see style.md).
 */
#ifndef NXT_UTIL_H
#define NXT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The name used as the prefix of every message ("nexar-run"); set once in main. */
extern const char *nxt_progname;

/* "PROG: text\n" on stderr. */
void nxt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* nxt_warn(), then exit(code). */
void nxt_die(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Allocation that exits with status 7 (NEXAR_ERR_NOMEM) instead of returning NULL. */
void *nxt_xmalloc(size_t n);
void *nxt_xcalloc(size_t n, size_t size);
void *nxt_xrealloc(void *p, size_t n);
char *nxt_xstrdup(const char *s);
char *nxt_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Parses a byte count: decimal digits with an optional binary suffix K, M, G or
 * T (case-insensitive, an optional trailing "B" or "iB" allowed: 4K = 4KiB =
 * 4096).  Returns 0 and the value in *out, or -EINVAL (syntax) / -ERANGE.
 */
int nxt_parse_size(const char *s, uint64_t *out);

/* Parses a non-negative number of seconds ("5", "0.5").  0 or -EINVAL. */
int nxt_parse_seconds(const char *s, double *out);

/* Parses a decimal integer within [min, max].  0, -EINVAL or -ERANGE. */
int nxt_parse_long(const char *s, long min, long max, long *out);

/* Seconds on the monotonic clock. */
double nxt_now(void);

/* Formats bytes for humans: "512 B", "1.5 KiB", "64.0 MiB"; returns buf. */
const char *nxt_fmt_bytes(uint64_t bytes, char *buf, size_t len);

#endif /* NXT_UTIL_H */
