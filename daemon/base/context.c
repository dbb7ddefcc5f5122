/* context.c - the one daemon context (context.h), and the clock every deadline reads. */
#include "context.h"

#include <time.h>

struct nx_daemon nxd;

double nx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
