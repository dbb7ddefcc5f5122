/* fdlimit.c - see fdlimit.h. */
#include "fdlimit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

#define NX_FD_MAX (1u << 20)

void nx_fdlimit_raise(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return;
    rlim_t want = r.rlim_max == RLIM_INFINITY || r.rlim_max > NX_FD_MAX ? NX_FD_MAX : r.rlim_max;
    if (r.rlim_cur >= want)
        return;
    rlim_t was = r.rlim_cur;
    r.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &r) == 0)
        NX_INFO("main", "open files: soft limit raised from %llu to %llu", (unsigned long long)was,
                (unsigned long long)want);
}

const char *nx_fdlimit_why(int err, char *buf, size_t len)
{
    struct rlimit r;
    if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &r) == 0)
        snprintf(buf, len, "nexard has its maximum of %llu open files (raise LimitNOFILE)",
                 (unsigned long long)r.rlim_cur);
    else if (err == ENFILE)
        snprintf(buf, len, "the system's table of open files is full (fs.file-max)");
    else
        snprintf(buf, len, "%s", strerror(err));
    return buf;
}
