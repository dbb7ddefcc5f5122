/*
 * certs_file.c - directories and key files for certs.c.
 */
#include "certs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int nxt_certs_errno(int e)
{
    switch (e) {
    case EACCES:
    case EPERM:
    case EROFS: return -EACCES;
    case ENOENT:
    case ENOTDIR: return -ENOENT;
    case EEXIST: return -EEXIST;
    default: return -EIO;
    }
}

int nxt_certs_mkdirs(const char *dir, mode_t mode, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (!*dir || strlen(dir) >= sizeof(path)) {
        snprintf(err, errlen, "%s: not a usable directory name", *dir ? dir : "\"\"");
        return -EINVAL;
    }
    strcpy(path, dir);
    /* Each prefix in turn, so that "a/b/c" works when only "a" exists. */
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (!end && *p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, mode) < 0 && errno != EEXIST) {
            int e = errno;
            snprintf(err, errlen, "cannot create directory %s: %s", path, strerror(e));
            return nxt_certs_errno(e);
        }
        if (end)
            break;
        *p = '/';
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory", dir);
        return -EINVAL;
    }
    /* mkdir succeeding says nothing about creating files in an old directory. */
    if (access(dir, W_OK | X_OK) < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot write in %s: %s", dir, strerror(e));
        return nxt_certs_errno(e);
    }
    return 0;
}

int nxt_certs_check_absent(const char *path, bool force, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return nxt_certs_errno(e);
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a regular file; not replacing it", path);
        return -EINVAL;
    }
    if (!force) {
        snprintf(err, errlen, "%s exists; refusing to overwrite it (use --force to replace it)",
                 path);
        return -EEXIST;
    }
    return 0;
}

static int write_all(int fd, const unsigned char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int nxt_certs_write(const char *path, const void *data, size_t len, mode_t mode, bool force,
                    char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "%s: path too long", path);
        return -EINVAL;
    }
    /* mkstemp creates the file 0600, so a key is never readable by others, not
     * even for the moment before fchmod. */
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot create a file next to %s: %s", path, strerror(e));
        return nxt_certs_errno(e);
    }
    const char *step = "write";
    int e;
    if (fchmod(fd, mode) < 0) {
        step = "chmod";
        goto fail_fd;
    }
    if (write_all(fd, data, len) < 0)
        goto fail_fd;
    if (fsync(fd) < 0) {
        step = "fsync";
        goto fail_fd;
    }
    if (close(fd) < 0) {
        fd = -1;
        goto fail_file;
    }
    fd = -1;
    if (force) {
        step = "rename";
        if (rename(tmp, path) < 0)
            goto fail_file;
    } else {
        step = "link";
        if (link(tmp, path) < 0)
            goto fail_file;
        unlink(tmp);
    }
    return 0;

fail_fd:
    e = errno;
    close(fd);
    errno = e;
fail_file:
    e = errno;
    unlink(tmp);
    if (e == EEXIST)
        snprintf(err, errlen, "%s appeared while writing; refusing to overwrite it", path);
    else
        snprintf(err, errlen, "%s (%s): %s", path, step, strerror(e));
    return nxt_certs_errno(e);
}
