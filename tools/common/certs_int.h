/*
 * certs_int.h - the file side of certs.c: directories, existence checks, and
 * files written under a temporary name, then moved into place.
 *
 * Same return convention as certs.h: 0 or a negative errno-style code with a
 * sentence in err.
 */
#ifndef NXT_CERTS_INT_H
#define NXT_CERTS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Maps an errno to the codes certs.h documents (-EACCES, -ENOENT, -EEXIST, -EIO). */
int nxt_certs_errno(int e);

/* mkdir -p; the directories it creates get mode.  An existing path that is not a
 * directory is -EINVAL. */
int nxt_certs_mkdirs(const char *dir, mode_t mode, char *err, size_t errlen);

/* -EEXIST when path exists and force is false ("use --force"); -EINVAL when it
 * exists and is not a regular file, whatever force says. */
int nxt_certs_check_absent(const char *path, bool force, char *err, size_t errlen);

/* Writes data to path with exactly the given mode (umask aside): a temporary
 * file in the same directory, fsync, then rename (force) or link (no force, so
 * that a file that appeared meanwhile is not replaced). */
int nxt_certs_write(const char *path, const void *data, size_t len, mode_t mode, bool force,
                    char *err, size_t errlen);

#endif /* NXT_CERTS_INT_H */
