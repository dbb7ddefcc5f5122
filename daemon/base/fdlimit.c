/* fdlimit.c - see fdlimit.h. */
#include "fdlimit.h"

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
