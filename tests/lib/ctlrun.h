/*
 * ctlrun.h - run nexarctl ($NEXARCTL) from a test and read what it printed.
 */
#ifndef TL_CTLRUN_H
#define TL_CTLRUN_H

#include <stddef.h>

#include "tjson.h"

struct tl_ctl {
    int rc;        /* exit status; 128+S for signal S; -1: it did not end in time (killed) */
    char out[65536]; /* stdout */
    char err[4096];  /* stderr */
};

/* $NEXARCTL, or NULL.  Exits the test with 77 (skipped) when it is not executable. */
const char *tl_ctl_path(void);

/* Runs nexarctl args... (NULL-terminated) with stdout and stderr captured through files
 * in scratch (a directory), within limit_s.  Returns r->rc. */
int tl_ctl_run(struct tl_ctl *r, const char *scratch, const char *const *args, double limit_s);

/* nexarctl -s sock --json cmd: the parsed object, or NULL (logged: exit status, output,
 * parse error).  *rc gets the exit status when rc is not NULL.  Free with tj_free(). */
struct tj *tl_ctl_json(const char *scratch, const char *sock, const char *cmd, int *rc);

#endif /* TL_CTLRUN_H */
