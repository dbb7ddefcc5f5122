/* devstage.c - see devstage.h. */
#include "devstage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "comm.h"
#include "devop.h"
#include "mem.h"
#include "nexar.h"
#include "op.h"

struct nx_devwait {
    size_t n;
    struct nx_dev_part *parts; /* iov tables not kept */
    uint32_t status;
    char *text;
    uint32_t pending; /* stages whose copy has not ended; +1 until armed */
};

struct nx_devstage {
    uint32_t comm_id;
    uint8_t *host;
    struct nx_dev_copy *out; /* the H2D ranges, known when the part starts */
    size_t nout, out_cap;
    bool busy, orphan;
    struct nx_devwait *wait; /* orphaned: completes when the copy in flight ends */
    nx_devstage_done done;
    void *arg;
    char what[256];
};

bool nx_devstage_available(void)
{
    return nx_device && nx_device->copy && nx_device->host_alloc && nx_device->host_free;
}

/* A range of no bytes still carries its wait for the rank's ready event. */
static void add(struct nx_dev_copy **v, size_t *nv, size_t *cap, const struct nx_dev_copy *c)
{
    if (c->bytes == 0 && c->wait_event == 0)
        return;
    nx_grow((void **)v, cap, *nv + 1, sizeof(**v));
    (*v)[(*nv)++] = *c;
}

/* The ranges of elements [off, off + n) of block blk (count elements a block) of part p's
 * buffer b, from or to host, appended to *v.  Bucketed ops name a list of buffers (iovs)
 * that hold the op's elements one after another: a range of them may span several. */
static void ranges(const struct nx_dev_part *p, const struct nx_dev_buf *b, uint64_t count,
                   uint64_t blk, uint64_t off, uint64_t n, uint32_t es, uint8_t *host,
                   uint32_t wait_event, struct nx_dev_copy **v, size_t *nv, size_t *cap)
{
    if (p->rec.niov == 0 || p->iov == NULL) {
        struct nx_dev_copy c = {.client_id = p->client_id, .mem = b->mem,
                                .off = b->off + (blk * count + off) * es, .bytes = n * es,
                                .wait_event = wait_event, .host = host};
        return add(v, nv, cap, &c);
    }
    uint64_t start = 0;
    for (uint32_t i = 0; i < p->rec.niov; i++) {
        const struct nx_dev_iov *io = &p->iov[i];
        uint64_t lo = off > start ? off : start, end = start + io->count;
        uint64_t hi = off + n < end ? off + n : end;
        if (lo < hi) {
            struct nx_dev_copy c = {.client_id = p->client_id, .mem = io->buf.mem,
                                    .off = io->buf.off + (lo - start) * es,
                                    .bytes = (hi - lo) * es, .wait_event = wait_event,
                                    .host = host + (lo - off) * es};
            add(v, nv, cap, &c);
            wait_event = 0;
        }
        start = end;
    }
}

static void wait_drop(struct nx_devwait *w)
{
    if (--w->pending > 0)
        return;
    for (size_t i = 0; i < w->n; i++) {
        struct nx_client *cl = nx_dev_part_complete(&w->parts[i], w->status, w->text);
        if (cl)
            cl->pending--;
    }
    free(w->parts);
    free(w->text);
    free(w);
}

static void copied(void *arg, uint32_t status, const char *text)
{
    struct nx_devstage *d = arg;
    d->busy = false;
    if (d->orphan) {
        struct nx_devwait *w = d->wait;
        d->wait = NULL;
        nx_devstage_release(d);
        if (w)
            wait_drop(w);
        return;
    }
    d->done(d->arg, status, text);
}

struct nx_devwait *nx_devwait_new(uint32_t status, const char *text)
{
    struct nx_devwait *w = nx_xcalloc(1, sizeof(*w));
    w->status = status;
    w->text = nx_xstrdup(text ? text : nx_status_text(status));
    w->pending = 1;
    return w;
}

void nx_devwait_add(struct nx_devwait *w, const struct nx_dev_part *p)
{
    w->parts = nx_xrealloc(w->parts, (w->n + 1) * sizeof(*w->parts));
    w->parts[w->n] = *p;
    w->parts[w->n].iov = NULL;
    w->n++;
}

void nx_devstage_release_to(struct nx_devstage *d, struct nx_devwait *w)
{
    if (d && d->busy && !d->wait) {
        d->wait = w;
        w->pending++;
    }
    nx_devstage_release(d);
}

void nx_devwait_arm(struct nx_devwait *w)
{
    wait_drop(w);
}

struct nx_devstage *nx_devstage_new(uint32_t comm_id, uint64_t bytes, const char *what,
                                    char *err, size_t errlen)
{
    struct nx_devstage *d = nx_xcalloc(1, sizeof(*d));
    d->comm_id = comm_id;
    d->host = nx_device->host_alloc(bytes ? bytes : 64);
    if (!d->host) {
        snprintf(err, errlen, "no host memory to stage %llu bytes of device buffers through",
                 (unsigned long long)bytes);
        free(d);
        return NULL;
    }
    snprintf(d->what, sizeof(d->what), "%s", what);
    return d;
}

uint8_t *nx_devstage_host(const struct nx_devstage *d)
{
    return d->host;
}

void nx_devstage_copy(struct nx_devstage *d, const struct nx_dev_copy *v, size_t n, int dir,
                      nx_devstage_done done, void *arg)
{
    d->done = done;
    d->arg = arg;
    d->busy = true;
    nx_device->copy(d->comm_id, v, n, dir, d->what, copied, d);
}

void nx_devstage_copy_buf(struct nx_devstage *d, const struct nx_dev_part *p,
                          const struct nx_dev_buf *b, uint64_t off, uint64_t n, uint32_t es,
                          uint32_t wait, int dir, nx_devstage_done done, void *arg)
{
    struct nx_dev_copy *v = NULL;
    size_t nv = 0, cap = 0;
    ranges(p, b, 0, 0, off, n, es, d->host, wait, &v, &nv, &cap);
    nx_devstage_copy(d, v, nv, dir, done, arg);
    free(v);
}

struct nx_devstage *nx_devstage_in(const struct nx_op *op, uint64_t off, uint64_t n,
                                   struct nx_rank_io *io, nx_devstage_done done, void *arg,
                                   char *err, size_t errlen)
{
    const struct nx_comm *c = op->comm;
    uint32_t es = nx_dtype_size(op->sig.dtype), P = nx_comm_span_size(c);
    uint64_t total = 0;
    struct nx_shape s;
    for (uint32_t r = 0; r < c->size; r++) {
        nx_kind_shape(op->sig.kind, P, nx_comm_span_rank(c, r), op->sig.peer, &s);
        total += n * es * (s.in_mul + s.out_mul);
    }
    char what[128];
    snprintf(what, sizeof(what), "%s seq %llu on comm %u", nx_kind_name(op->sig.kind),
             (unsigned long long)op->seq, c->id);
    struct nx_devstage *d = nx_devstage_new(c->id, total, what, err, errlen);
    if (!d)
        return NULL;
    struct nx_dev_copy *in = NULL;
    size_t nin = 0, in_cap = 0;
    uint8_t *h = d->host;
    for (uint32_t r = 0; r < c->size; r++) {
        const struct nx_dev_part *p = op->parts[r].dev;
        nx_kind_shape(op->sig.kind, P, nx_comm_span_rank(c, r), op->sig.peer, &s);
        io[r] = (struct nx_rank_io){.in_stride = n, .out_stride = n};
        uint32_t ev = p->rec.ready_event;
        if (!s.in_mul && s.out_mul && ev) {
            /* Nothing to read, but the copy back writes its buffer: not before the work
             * the rank queued before the op (its ready event). */
            struct nx_dev_copy w = {.client_id = p->client_id, .mem = p->rec.out.mem,
                                    .off = p->rec.out.off, .wait_event = ev, .host = h};
            add(&in, &nin, &in_cap, &w);
            ev = 0;
        }
        if (s.in_mul) {
            io[r].in = h;
            for (uint32_t b = 0; b < s.in_mul; b++, ev = 0)
                ranges(p, &p->rec.in, op->sig.count, b, off, n, es, h + b * n * es, ev, &in,
                       &nin, &in_cap);
            h += s.in_mul * n * es;
        }
        if (s.out_mul) {
            io[r].out = h;
            for (uint32_t b = 0; b < s.out_mul; b++)
                ranges(p, &p->rec.out, op->sig.count, b, off, n, es, h + b * n * es, 0,
                       &d->out, &d->nout, &d->out_cap);
            h += s.out_mul * n * es;
        }
    }
    nx_devstage_copy(d, in, nin, NX_DEV_D2H, done, arg);
    free(in);
    return d;
}

void nx_devstage_out(struct nx_devstage *d, nx_devstage_done done, void *arg)
{
    nx_devstage_copy(d, d->out, d->nout, NX_DEV_H2D, done, arg);
}

void nx_devstage_release(struct nx_devstage *d)
{
    if (!d)
        return;
    if (d->busy) {
        d->orphan = true;
        return;
    }
    nx_device->host_free(d->host);
    free(d->out);
    free(d);
}
