/* gpu_job.c - gx_job_main (gpu_util.h): the main of the suite's programs that run ranks. */
#include <getopt.h>
#include <stdlib.h>

#include "gpu_util.h"
#include "harness.h"

int gx_job_main(int argc, char **argv, const char *test, const char *tag,
                int (*fn)(struct hx_rank *r), double limit_s)
{
    int world = 2;
    static const struct option lo[] = {{"world", required_argument, NULL, 'w'}, {0, 0, 0, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", lo, NULL)) != -1;)
        if (ch == 'w')
            world = atoi(optarg);
    gx_require_gpu(test);
    hx_require_nexard();
    tl_set_log_tag(tag);
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL) < 0)
        return 1;
    struct hx_job_opts o = {.sock = d.sock, .size = world, .fn = fn, .nexar_timeout_s = 120};
    int rv = hx_run(&o, limit_s);
    if (hx_daemon_stop(&d) < 0)
        rv = -1;
    return rv ? 1 : 0;
}
