/* pipeline.c - see pipeline.h. */
#include "pipeline.h"

#include <errno.h>

struct run {
    const struct nx_pipe_ops *ops;
    uint64_t n;
    uint32_t nbuf;
    uint64_t in_started, in_done, host_done, out_started, out_done;
    int err;
};

static uint32_t buf_of(const struct run *r, uint64_t chunk)
{
    return (uint32_t)(chunk % r->nbuf);
}

static void note(struct run *r, int rv)
{
    if (rv < 0 && r->err == 0)
        r->err = rv;
}

static int start(struct run *r, int stage, uint64_t chunk)
{
    bool real = stage == NX_PIPE_HOST || (stage == NX_PIPE_IN ? r->ops->has_in : r->ops->has_out);
    if (!real)
        return 0;
    int rv = r->ops->start(r->ops->arg, stage, chunk, buf_of(r, chunk));
    note(r, rv);
    return rv;
}

/* 1 when the stage of chunk finished (at once for a missing stage). */
static int finished(struct run *r, int stage, uint64_t chunk, bool wait)
{
    if (!(stage == NX_PIPE_IN ? r->ops->has_in : r->ops->has_out))
        return 1;
    int rv = r->ops->done(r->ops->arg, stage, chunk, buf_of(r, chunk), wait);
    note(r, rv);
    return rv < 0 ? 1 : rv; /* a failed stage is over too: nothing more will happen */
}

static void reap(struct run *r, bool wait_one)
{
    while (r->in_done < r->in_started && finished(r, NX_PIPE_IN, r->in_done, false))
        r->in_done++;
    while (r->out_done < r->out_started && finished(r, NX_PIPE_OUT, r->out_done, false))
        r->out_done++;
    if (!wait_one)
        return;
    /* Nothing could move: wait for the stage that lets something move next. */
    if (r->host_done < r->in_started && r->in_done == r->host_done) {
        finished(r, NX_PIPE_IN, r->in_done, true);
        r->in_done++;
    } else if (r->out_done < r->out_started) {
        finished(r, NX_PIPE_OUT, r->out_done, true);
        r->out_done++;
    }
}

int nx_pipe_run(const struct nx_pipe_ops *ops, uint64_t nchunks, uint32_t nbuf)
{
    struct run r = {.ops = ops, .n = nchunks, .nbuf = nbuf};
    if (nbuf == 0 || !ops || !ops->start || !ops->done)
        return -EINVAL;
    while (r.out_done < r.out_started || (r.err == 0 && r.out_done < r.n)) {
        bool moved = false;
        /* Reap first: a buffer that OUT just freed must take the next IN before the
         * host step runs, or the copy engine idles through it. */
        reap(&r, false);
        /* IN as far as free buffers allow: this is what runs ahead of HOST. */
        while (r.err == 0 && r.in_started < r.n && r.in_started < r.out_done + r.nbuf) {
            start(&r, NX_PIPE_IN, r.in_started++);
            moved = true;
        }
        if (r.err == 0 && r.host_done < r.in_done) {
            uint64_t c = r.host_done++;
            if (start(&r, NX_PIPE_HOST, c) == 0 && start(&r, NX_PIPE_OUT, c) >= 0)
                r.out_started++;
            moved = true;
        }
        if (r.err != 0) {
            /* Drain: only what was started still matters. */
            while (r.in_done < r.in_started) {
                finished(&r, NX_PIPE_IN, r.in_done, true);
                r.in_done++;
            }
            while (r.out_done < r.out_started) {
                finished(&r, NX_PIPE_OUT, r.out_done, true);
                r.out_done++;
            }
            break;
        }
        if (!moved)
            reap(&r, true);
    }
    return r.err;
}
