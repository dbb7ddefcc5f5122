/*
 * bgjob.c - see bgjob.h.
 */
#include "bgjob.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collref.h"

struct bg_shared {
    volatile int stop;
    volatile long iters[HX_MAX_RANKS];
};

static int bg_rank(struct hx_rank *r)
{
    struct bg_shared *sh = r->arg;
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int fails = 0;
    double end = tl_now() + 240.0;
    for (long it = 0; tl_now() < end; it++) {
        /* every rank decides to stop at the same iteration: agree through an allreduce */
        int32_t stop = sh->stop;
        nexar_status_t st = nexar_all_reduce(w, &stop, 1, NEXAR_I32, NEXAR_MAX);
        if (tl_check_status("background job: stop vote", NEXAR_OK, st)) {
            fails++;
            break;
        }
        if (stop)
            break;
        struct tl_case c = {.coll = TL_ALL_REDUCE, .dtype = NEXAR_F32, .op = NEXAR_SUM,
                            .count = it % 2 ? 70001 : 1001, .seed = (uint64_t)it,
                            .mode = it % 3 == 2 ? TL_MIXED : TL_HEAP};
        if (tl_run_case(w, &c) != TL_CASE_OK) {
            fails++;
            break;
        }
        sh->iters[r->rank] = it + 1;
    }
    if (nexar_finalize() != NEXAR_OK)
        fails++;
    if (r->rank == 0)
        tl_log("background job: %ld checked allreduces", sh->iters[0]);
    return fails ? 1 : 0;
}

int bgjob_start(struct bgjob *b, const struct hx_daemon *d, int size)
{
    b->sh = hx_shared(sizeof(struct bg_shared));
    b->sh->stop = 0;
    struct hx_job_opts o = {.sock = d->sock, .size = size, .fn = bg_rank, .arg = b->sh,
                            .nexar_timeout_s = 60};
    return hx_job_start(&b->job, &o);
}

int bgjob_finish(struct bgjob *b)
{
    /* make sure it overlapped with something: at least 3 iterations */
    for (int i = 0; i < 30000 && b->sh->iters[0] < 3; i++) {
        int ws;
        if (waitpid(b->job.pid[0], &ws, WNOHANG) == b->job.pid[0]) {
            b->job.reaped[0] = 1;
            b->job.wstatus[0] = ws;
            break;
        }
        usleep(1000);
    }
    b->sh->stop = 1;
    int rv = hx_job_wait(&b->job, 300.0, 10.0);
    if (hx_job_check_ok(&b->job))
        rv = -1;
    for (int r = 0; r < b->job.size; r++)
        if (b->sh->iters[r] == 0) {
            tl_log("FAIL background job: rank %d completed no allreduce", r);
            rv = -1;
        }
    return rv;
}

int bgjob_conclude(struct bgjob *b, const struct hx_daemon *d, int size)
{
    int fails = 0;
    if (bgjob_finish(b)) {
        tl_log("FAIL: the healthy job next to the hostile clients");
        fails++;
    } else {
        tl_log("ok: the healthy job next to the hostile clients finished exact");
    }
    struct bgjob after;
    if (bgjob_start(&after, d, size) || bgjob_finish(&after)) {
        tl_log("FAIL: a new job after the hostile clients");
        fails++;
    }
    return fails;
}
