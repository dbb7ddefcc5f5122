/* client.c - see client.h.
 *
 * Drops are deferred: nx_client_drop() marks the client dead and queues it, and the
 * teardown (failing its communicators, freeing its segment) runs in nx_clients_flush()
 * at the end of the event callback.  Deep inside the scheduler a completion may find a
 * client's ring corrupt; tearing it down right there would free ops the caller is
 * still walking. */
#include "client.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cluster_ops.h"
#include "comm.h"
#include "ctlsrv.h"
#include "context.h"
#include "devop.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "matcher.h"

struct nx_client_list nx_clients = LIST_HEAD_INITIALIZER(nx_clients);
uint32_t nx_client_count;

static struct nx_client_list dirty = LIST_HEAD_INITIALIZER(dirty);
static struct nx_client **drops;
static size_t ndrops, drops_cap;
static uint32_t next_id = 1;

const char *nx_client_name(const struct nx_client *cl, char *buf, size_t len)
{
    if (cl->job)
        snprintf(buf, len, "rank %u (pid %d) of job \"%s\"", cl->world_rank, (int)cl->pid,
                 ((struct nx_job *)cl->job)->name);
    else
        snprintf(buf, len, "client %u (pid %d)", cl->id, (int)cl->pid);
    return buf;
}

struct nx_client *nx_client_new(struct nx_conn *conn, pid_t pid, uid_t uid, const char **err)
{
    const struct nx_config *cfg = &nxd.cfg;
    struct nx_shm_geom g = {
        .sq_entries = cfg->sq_entries,
        .cq_entries = cfg->cq_entries,
        .err_entries = 64,
        .slot_count = cfg->slots,
        .slot_bytes = cfg->slot_bytes,
        .heap_bytes = cfg->heap_bytes,
    };
    char name[64];
    struct nx_client *cl = nx_xcalloc(1, sizeof(*cl));
    cl->id = next_id++;
    cl->dev.id = cl->id;
    cl->conn = conn;
    cl->pid = pid;
    cl->uid = uid;
    cl->sq_efd = cl->cq_efd = -1;
    snprintf(name, sizeof(name), "nexar-client-%u", cl->id);

    int rv = nx_segment_create(&cl->seg, &g, name);
    if (rv < 0) {
        *err = rv == -EINVAL ? "bad segment geometry in the configuration"
                             : "cannot create the shared segment (memfd)";
        goto fail;
    }
    cl->sq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    cl->cq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (cl->sq_efd < 0 || cl->cq_efd < 0) {
        *err = "cannot create eventfds";
        goto fail;
    }
    LIST_INSERT_HEAD(&nx_clients, cl, link);
    nx_client_count++;
    nxd.stats.clients_accepted++;
    return cl;

fail:
    if (cl->sq_efd >= 0)
        close(cl->sq_efd);
    if (cl->cq_efd >= 0)
        close(cl->cq_efd);
    nx_segment_destroy(&cl->seg);
    free(cl);
    return NULL;
}

/* Moves completions that waited for room into the ring.  False on a corrupt head. */
static bool post_one(struct nx_client *cl, const struct nx_cqe *c, bool *full)
{
    uint32_t head = nx_load_acquire(&cl->seg.cq_ctl->head);
    uint32_t used = cl->cq_tail - head;
    *full = false;
    if (used > cl->seg.hdr.cq_entries) {
        nx_client_violation(cl, "completion ring head moved past the tail");
        return false;
    }
    if (used == cl->seg.hdr.cq_entries) {
        *full = true;
        return true;
    }
    cl->seg.cq[cl->cq_tail & (cl->seg.hdr.cq_entries - 1)] = *c;
    cl->cq_tail++;
    nx_store_release(&cl->seg.cq_ctl->tail, cl->cq_tail);
    if (!cl->on_dirty) {
        cl->on_dirty = true;
        LIST_INSERT_HEAD(&dirty, cl, dirty_link);
    }
    return true;
}

static void flush_overflow(struct nx_client *cl)
{
    bool full = false;
    while (cl->ovf_len > 0 && !cl->dead) {
        if (!post_one(cl, &cl->ovf[cl->ovf_head], &full) || full)
            return;
        cl->ovf_head = (cl->ovf_head + 1) % cl->ovf_cap;
        cl->ovf_len--;
    }
}

static void ovf_push(struct nx_client *cl, const struct nx_cqe *c)
{
    /* A rank that never reaps would otherwise grow this without bound. */
    if (cl->ovf_len >= nxd.cfg.max_pending) {
        nx_client_violation(cl, "it does not consume its completion ring");
        return;
    }
    if (cl->ovf_len == cl->ovf_cap) {
        /* Grow and unwrap the circular queue. */
        size_t ncap = cl->ovf_cap ? cl->ovf_cap * 2 : 64;
        struct nx_cqe *n = nx_xcalloc(ncap, sizeof(*n));
        for (size_t i = 0; i < cl->ovf_len; i++)
            n[i] = cl->ovf[(cl->ovf_head + i) % cl->ovf_cap];
        free(cl->ovf);
        cl->ovf = n;
        cl->ovf_cap = ncap;
        cl->ovf_head = 0;
    }
    cl->ovf[(cl->ovf_head + cl->ovf_len) % cl->ovf_cap] = *c;
    cl->ovf_len++;
}

void nx_client_complete(struct nx_client *cl, const struct nx_done *d, const char *text)
{
    struct nx_cqe c = {
        .user_data = d->user_data,
        .status = d->status,
        .err_seq = NX_NO_ERR_TEXT,
        .res_comm = d->res_comm,
        .res_rank = d->res_rank,
        .res_size = d->res_size,
        .algo = d->algo,
    };
    if (cl->dead)
        return;
    cl->ops_completed++;
    if (d->status != 0 && text) {
        if (cl->err_seq == NX_NO_ERR_TEXT)
            cl->err_seq = 0;
        uint32_t seq = cl->err_seq++;
        struct nx_err_entry *e = &cl->seg.err[seq % cl->seg.hdr.err_entries];
        /* Invalidate first so that a reader never pairs the new seq with old text. */
        nx_store_release(&e->seq, NX_NO_ERR_TEXT);
        e->status = d->status;
        snprintf(e->text, sizeof(e->text), "%s", text);
        nx_store_release(&e->seq, seq);
        c.err_seq = seq;
    }
    bool full = false;
    if (cl->ovf_len == 0 && post_one(cl, &c, &full) && !full)
        return;
    if (!cl->dead)
        ovf_push(cl, &c);
}

static void drain(struct nx_client *cl)
{
    uint32_t mask = cl->seg.hdr.sq_entries - 1;
    uint32_t tail = nx_load_acquire(&cl->seg.sq_ctl->tail);
    uint32_t avail = tail - cl->sq_head;
    if (avail > cl->seg.hdr.sq_entries) {
        char why[128];
        snprintf(why, sizeof(why), "submission ring tail %u is %u entries past head %u",
                 tail, avail, cl->sq_head);
        nx_client_violation(cl, why);
        return;
    }
    while (avail-- > 0 && !cl->dead) {
        struct nx_sqe e;
        /* Copy once: the client may rewrite the slot while we look at it. */
        memcpy(&e, &cl->seg.sq[cl->sq_head & mask], sizeof(e));
        cl->sq_head++;
        nx_store_release(&cl->seg.sq_ctl->head, cl->sq_head);
        cl->ops_submitted++;
        nx_sched_submit(cl, &e);
    }
}

/* After a doorbell the loop stays awake for a moment instead of sleeping in epoll:
 * the next submission of an op usually follows within microseconds, and a sleeping
 * daemon costs a wakeup on every small op.  While it spins it polls every client's
 * submission ring itself and says so (sq_ctl.wake = 0), so the ranks skip the doorbell's
 * syscall; before it sleeps it says so again and looks once more (shm_abi.h).  Yielding
 * keeps the spin cheap when the ranks need the cores. */
#define NX_BUSY_POLL_S 50e-6

static uv_idle_t busy;
static bool busy_init, busy_on;
static double busy_until;

static void serve(struct nx_client *cl)
{
    flush_overflow(cl);
    drain(cl);
    flush_overflow(cl);
}

static bool sq_pending(struct nx_client *cl)
{
    return cl->polling && !cl->dead && nx_load_acquire(&cl->seg.sq_ctl->tail) != cl->sq_head;
}

static void set_wake(uint32_t v)
{
    struct nx_client *cl;
    LIST_FOREACH(cl, &nx_clients, link)
        if (!cl->dead)
            nx_wake_set(&cl->seg.sq_ctl->wake, v);
}

/* Serves every client with submissions waiting; true if there was any. */
static bool serve_pending(void)
{
    bool any = false;
    struct nx_client *cl, *next;
    for (cl = LIST_FIRST(&nx_clients); cl; cl = next) {
        next = LIST_NEXT(cl, link); /* drops wait for nx_clients_flush */
        if (sq_pending(cl)) {
            any = true;
            serve(cl);
        }
    }
    if (any) {
        nx_clients_flush();
        nx_cluster_ops->progress();
    }
    return any;
}

static void on_busy(uv_idle_t *h)
{
    if (!nxd.stopping && serve_pending()) {
        /* What it started (a packet to send, a completion) goes out in the loop's next
         * lap: yielding first would hold it behind whoever gets the core. */
        busy_until = nx_now() + NX_BUSY_POLL_S;
        return;
    }
    if (nx_now() > busy_until || nxd.stopping) {
        set_wake(1);
        if (!nxd.stopping && serve_pending()) {
            /* Submitted while we were about to sleep: keep spinning. */
            set_wake(0);
            busy_until = nx_now() + NX_BUSY_POLL_S;
            return;
        }
        uv_idle_stop(h);
        busy_on = false;
        return;
    }
    sched_yield();
}

static void busy_poll_arm(void)
{
    if (nxd.stopping)
        return;
    if (!busy_init) {
        uv_idle_init(nxd.loop, &busy);
        uv_unref((uv_handle_t *)&busy); /* never keeps the loop alive on its own */
        busy_init = true;
    }
    busy_until = nx_now() + NX_BUSY_POLL_S;
    if (!busy_on) {
        set_wake(0);
        uv_idle_start(&busy, on_busy);
        busy_on = true;
    }
}

void nx_clients_fini(void)
{
    if (busy_init) {
        uv_idle_stop(&busy);
        uv_close((uv_handle_t *)&busy, NULL);
        busy_init = busy_on = false;
    }
}

static void on_doorbell(uv_poll_t *h, int status, int events)
{
    struct nx_client *cl = h->data;
    uint64_t v;
    if (cl->dead)
        return;
    busy_poll_arm();
    if (status < 0) {
        nx_client_drop(cl, "submission doorbell failed");
    } else {
        /* Reset the counter before draining so that a ring after our tail read
         * wakes us again.  Not a semaphore eventfd: one read takes the whole count. */
        if (read(cl->sq_efd, &v, sizeof(v)) < 0 && errno != EAGAIN && errno != EINTR)
            NX_DEBUG("client", "doorbell read: %s", strerror(errno));
        serve(cl);
    }
    nx_clients_flush();
    nx_cluster_ops->progress();
}

int nx_client_start(struct nx_client *cl)
{
    int rv = uv_poll_init(nxd.loop, &cl->sq_poll, cl->sq_efd);
    if (rv < 0)
        return rv;
    cl->sq_poll.data = cl;
    cl->polling = true;
    rv = uv_poll_start(&cl->sq_poll, UV_READABLE, on_doorbell);
    if (rv < 0)
        return rv;
    /* The rank may have rung before we watched. */
    drain(cl);
    return 0;
}

struct nx_client *nx_client_by_id(uint32_t id)
{
    struct nx_client *cl;
    LIST_FOREACH(cl, &nx_clients, link)
        if (cl->id == id)
            return cl;
    return NULL;
}

void nx_client_add_member(struct nx_client *cl, struct nx_comm *comm, uint32_t rank)
{
    nx_grow((void **)&cl->mem, &cl->mem_cap, cl->nmem + 1, sizeof(*cl->mem));
    cl->mem[cl->nmem++] = (struct nx_member){.comm = comm, .rank = rank};
}

void nx_client_del_member(struct nx_client *cl, struct nx_comm *comm)
{
    for (size_t i = 0; i < cl->nmem; i++) {
        if (cl->mem[i].comm == comm) {
            cl->mem[i] = cl->mem[--cl->nmem];
            return;
        }
    }
}

struct nx_member *nx_client_member(struct nx_client *cl, uint32_t comm_id)
{
    for (size_t i = 0; i < cl->nmem; i++)
        if (cl->mem[i].comm->id == comm_id)
            return &cl->mem[i];
    return NULL;
}

void nx_client_drop(struct nx_client *cl, const char *why)
{
    if (cl->dead)
        return;
    cl->dead = true;
    cl->drop_why = why;
    nx_grow((void **)&drops, &drops_cap, ndrops + 1, sizeof(*drops));
    drops[ndrops++] = cl;
}

void nx_client_violation(struct nx_client *cl, const char *why)
{
    char name[160];
    if (cl->dead)
        return;
    nxd.stats.protocol_violations++;
    cl->violated = true;
    NX_WARN("client", "protocol violation by %s: %s; dropping it",
            nx_client_name(cl, name, sizeof(name)), why);
    nx_client_drop(cl, "dropped for a protocol violation");
}

static void on_poll_closed(uv_handle_t *h)
{
    struct nx_client *cl = h->data;
    nx_segment_destroy(&cl->seg);
    close(cl->sq_efd);
    close(cl->cq_efd);
    free(cl->ovf);
    free(cl->mem);
    free(cl);
}

static void teardown(struct nx_client *cl)
{
    char who[160];
    nx_client_name(cl, who, sizeof(who));
    /* A rank that freed its communicators (nexar_finalize does) simply left; one that
     * still belongs to some was lost, and they fail. */
    bool lost = cl->nmem > 0 || cl->violated;
    if (lost) {
        nxd.stats.clients_dropped++;
        nx_log(nxd.stopping ? NX_LOG_DEBUG : NX_LOG_INFO, "client", "%s lost: %s", who,
               cl->drop_why);
    } else {
        NX_DEBUG("client", "%s left: %s", who, cl->drop_why);
    }
    /* Leaving fails each communicator, which completes the other ranks' ops. */
    while (cl->nmem > 0) {
        struct nx_member m = cl->mem[cl->nmem - 1];
        cl->nmem--;
        nx_comm_leave(m.comm, m.rank, true, who);
    }
    nx_job_client_gone(cl, lost);
    if (nx_device)
        nx_device->client_gone(&cl->dev);
    if (cl->on_dirty) {
        LIST_REMOVE(cl, dirty_link);
        cl->on_dirty = false;
    }
    LIST_REMOVE(cl, link);
    nx_client_count--;
    if (cl->conn) {
        struct nx_conn *c = cl->conn;
        cl->conn = NULL;
        c->client = NULL;
        nx_conn_close(c);
    }
    if (cl->polling) {
        uv_poll_stop(&cl->sq_poll);
        uv_close((uv_handle_t *)&cl->sq_poll, on_poll_closed);
    } else {
        cl->sq_poll.data = cl;
        on_poll_closed((uv_handle_t *)&cl->sq_poll);
    }
}

void nx_clients_flush(void)
{
    /* A teardown completes other clients' ops, and that may drop them in turn. */
    while (ndrops > 0) {
        struct nx_client *cl = drops[--ndrops];
        teardown(cl);
    }
    while (!LIST_EMPTY(&dirty)) {
        struct nx_client *cl = LIST_FIRST(&dirty);
        LIST_REMOVE(cl, dirty_link);
        cl->on_dirty = false;
        uint64_t one = 1;
        /* A rank that polls its completion ring needs no doorbell (shm_abi.h). */
        if (cl->dead || !nx_wake_needed(&cl->seg.cq_ctl->wake))
            continue;
        if (write(cl->cq_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            nx_client_drop(cl, "completion doorbell failed");
    }
    if (ndrops > 0)
        nx_clients_flush();
}
