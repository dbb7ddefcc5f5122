/*
 * outfile.h - how a test's rank process reports to its test: one small file per fact,
 * written whole; and how a test reads such a file, or a log, back.
 */
#ifndef NX_TEST_OUTFILE_H
#define NX_TEST_OUTFILE_H

/* Writes text to dir/<name><rank> through a temporary file and rename(), so that a test
 * polling for the file never reads half of it. */
void tl_put_file(const char *dir, const char *name, int rank, const char *text);

/* The whole file at path as a NUL-terminated string the caller frees; "" (also to free)
 * when it cannot be read. */
char *tl_read_file(const char *path);

#endif
