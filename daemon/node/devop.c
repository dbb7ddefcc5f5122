/* devop.c - device op records: load, validate, complete; the host interface a device
 * backend is given (devop.h). */
#include "devop.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "comm.h"
#include "context.h"
#include "frame.h"
#include "mem.h"
#include "nexar.h"

const struct nx_device_ops *nx_device;
char nx_device_note[256] = "this nexard was built without CUDA (-Dcuda=disabled)";

uint32_t nx_device_features(void)
{
    return nx_device ? NX_FEATURE_DEVICE : 0;
}

#define BAD(...)                                                                           \
    do {                                                                                   \
        snprintf(why, len, __VA_ARGS__);                                                   \
        return -EINVAL;                                                                    \
    } while (0)

/* One buffer the shape uses (need) or not: mem 0 exactly when unused. */
static int check_buf(struct nx_client *cl, const struct nx_dev_buf *b, bool need,
                     uint64_t bytes, uint32_t es, const char *name, char *why, size_t len)
{
    if (!need) {
        if (b->mem != 0)
            BAD("device op record names an %s buffer the op does not use", name);
        return 0;
    }
    if (b->mem == 0)
        BAD("device op record has no %s buffer", name);
    if (b->off % es)
        BAD("device %s buffer not aligned to its element size", name);
    if (!nx_device->mem_ok(&cl->dev, b->mem, b->off, bytes))
        BAD("device %s buffer (registration %u, offset %" PRIu64 ", %" PRIu64
            " bytes) is not inside a registered allocation", name, b->mem, b->off, bytes);
    return 0;
}

static int load_iov(struct nx_client *cl, const struct nx_sqe *e, struct nx_dev_part *p,
                    uint32_t es, char *why, size_t len)
{
    uint32_t n = p->rec.niov;
    const uint8_t *src = cl->seg.arena + e->in_off + sizeof(struct nx_dev_op);
    uint64_t sum = 0, bytes;
    p->iov = nx_xcalloc(n, sizeof(*p->iov));
    memcpy(p->iov, src, (size_t)n * sizeof(*p->iov)); /* once: the rank may rewrite it */
    for (uint32_t i = 0; i < n; i++) {
        const struct nx_dev_iov *v = &p->iov[i];
        if (__builtin_add_overflow(sum, v->count, &sum) ||
            __builtin_mul_overflow(v->count, (uint64_t)es, &bytes))
            BAD("device iov %u: count overflows", i);
        if (v->buf.reserved != 0)
            BAD("device iov %u: reserved field not zero", i);
        if (v->count == 0 && v->buf.mem == 0)
            continue;
        if (check_buf(cl, &v->buf, true, bytes, es, "iov", why, len) < 0)
            return -EINVAL;
    }
    if (sum != e->count)
        BAD("device iovs hold %" PRIu64 " elements, the op %" PRIu64, sum, e->count);
    return 0;
}

int nx_dev_part_load(struct nx_client *cl, const struct nx_sqe *e, uint32_t comm_size,
                     uint32_t rank, struct nx_dev_part *p, char *why, size_t len)
{
    const char *reason = NULL;
    struct nx_shape s;
    memset(p, 0, sizeof(*p));
    p->client_id = cl->id;
    p->user_data = e->user_data;
    if (!nx_device)
        BAD("a device descriptor, but this nexard has no device support");
    memcpy(&p->rec, cl->seg.arena + e->in_off, sizeof(p->rec));
    if (nx_dev_op_check(e, &p->rec, cl->seg.hdr.arena_bytes, &reason) < 0)
        BAD("%s", reason);
    if (!nx_kind_shape(e->kind, comm_size, rank, e->peer, &s))
        BAD("device descriptor of an unknown kind");
    if (p->rec.ready_event != 0 && !nx_device->event_ok(&cl->dev, p->rec.ready_event))
        BAD("device op record names event %u, which is not registered", p->rec.ready_event);

    uint32_t es = nx_dtype_size(e->dtype);
    if (e->kind == NX_K_ALL_REDUCE_BUCKETED)
        return load_iov(cl, e, p, es, why, len);
    uint64_t ib = e->count * es * s.in_mul, ob = e->count * es * s.out_mul; /* validated */
    if (check_buf(cl, &p->rec.in, s.in_mul > 0, ib, es, "input", why, len) < 0 ||
        check_buf(cl, &p->rec.out, s.out_mul > 0, ob, es, "output", why, len) < 0)
        return -EINVAL;
    return 0;
}

void nx_dev_part_release(struct nx_dev_part *p)
{
    free(p->iov);
    p->iov = NULL;
}

struct nx_client *nx_dev_part_complete(const struct nx_dev_part *p, uint32_t status,
                                       const char *text)
{
    struct nx_client *cl = nx_client_by_id(p->client_id);
    if (!cl || cl->dead)
        return NULL;
    if (p->rec.done_off != NX_DEV_NO_DONE) {
        /* Validated against the arena when loaded; the segment never changes size. */
        uint64_t *w = (uint64_t *)(void *)(cl->seg.arena + p->rec.done_off);
        __atomic_store_n(w, p->rec.done_value, __ATOMIC_RELEASE);
    }
    struct nx_done d = {.user_data = p->user_data, .status = status};
    nx_client_complete(cl, &d, text);
    return cl;
}

/* ---- the host interface of a device backend ---- */

static void host_part_done(const struct nx_dev_part *p, uint32_t status, const char *text)
{
    struct nx_client *cl = nx_dev_part_complete(p, status, text);
    if (cl)
        cl->pending--;
}

static void host_comm_fail(uint32_t comm_id, uint32_t status, const char *text)
{
    struct nx_comm *c;
    LIST_FOREACH(c, &nx_comms, link) {
        if (c->id == comm_id) {
            if (status == NEXAR_ERR_TIMEOUT)
                nxd.stats.timeouts++;
            nx_comm_fail(c, status, "%s", text);
            return;
        }
    }
}

static struct nx_dev_client *host_client(uint32_t client_id)
{
    struct nx_client *cl = nx_client_by_id(client_id);
    return cl ? &cl->dev : NULL;
}

const struct nx_device_host *nx_device_host(void)
{
    static struct nx_device_host host = {
        .part_done = host_part_done,
        .comm_fail = host_comm_fail,
        .flush = nx_clients_flush,
        .client = host_client,
    };
    host.loop = nxd.loop;
    return &host;
}
