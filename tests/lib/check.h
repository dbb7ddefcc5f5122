/*
 * check.h - comparisons that say exactly what differed.
 *
 * Every failure line names the context the caller gives ("rank 2 all_reduce f16 sum
 * count=13 mode=arena"), the element index, the expected and the seen value.
 */
#ifndef TL_CHECK_H
#define TL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "nexar.h"

/* Compares count elements bit for bit.  Prints the first few differences and the
 * total; returns 0 when equal, -1 otherwise. */
int tl_check_elems(const char *ctx, int dtype, const void *expected, const void *got,
                   size_t count);

/* Checks a status; on a difference prints ctx, both statuses with their names and
 * nexar_last_error().  Returns 0 when st == want. */
int tl_check_status(const char *ctx, nexar_status_t want, nexar_status_t st);

/* Case-sensitive substring check of text; prints the text on failure. */
int tl_check_contains(const char *ctx, const char *text, const char *needle);

/* 1 when a line of out (a table nexarctl printed) reads row once its runs of blanks are
 * folded to one and trailing ones dropped ("slots 16 command line"), else 0. */
int tl_has_row(const char *out, const char *row);

/* Checks that text names rank r: "rank 2", "ranks 0, 2", "rank(s) 2-3", "ranks 1 and 3",
 * "rank 1 (pid ...)".  Prints what and the text when it does not; returns 0 when it does,
 * 1 otherwise (so that failures add up). */
int tl_check_names_rank(const char *what, const char *text, int r);

/* Name of a status ("NEXAR_ERR_MISMATCH"). */
const char *tl_status_name(int st);

/* Seconds on CLOCK_MONOTONIC (comparable across processes of one machine). */
double tl_now(void);

/* printf to stderr with a "[tag] " prefix, one write per line (ranks interleave). */
void tl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The prefix tl_log uses, e.g. "job-x r1/3"; set by the harness in each rank. */
void tl_set_log_tag(const char *tag);

#endif /* TL_CHECK_H */
