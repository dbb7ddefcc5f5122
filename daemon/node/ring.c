/*
 * ring.c - this daemon's side of a rank's rings (shm_abi.h), the start of the data path.
 *
 * Submissions: the rank rings the submission doorbell; the loop drains the ring, copies
 * each descriptor out once and hands it to the matcher (nx_match_submit).  Completions:
 * nx_client_complete posts to the completion ring (or holds the entry while the ring is
 * full), and nx_clients_flush rings the completion doorbells at the end of the event
 * callback, once per client.
 */
#include "ring.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "cluster_ops.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "matcher.h"
#include "mem.h"
#include "spin_pause.h"

static struct nx_client_list dirty = LIST_HEAD_INITIALIZER(dirty);

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
    };
    if (d->res_comm)
        c.res_local = d->res_local;
    else
        c.algo = d->algo;
    if (d->pull_n) {
        c.pull_n = d->pull_n;
        c.pull_hold = d->pull_hold;
    }
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

void nx_client_finish(struct nx_client *cl, uint64_t user_data, uint32_t status,
                      const char *text, uint32_t comm, uint32_t rank, uint32_t size,
                      unsigned plan)
{
    struct nx_done d = {.user_data = user_data, .status = status, .res_comm = comm,
                        .res_rank = rank, .res_size = size, .res_local = plan};
    nx_client_complete(cl, &d, text);
    cl->pending--;
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
        nx_match_submit(cl, &e);
    }
}

/* After a doorbell the loop stays awake for a moment instead of sleeping in epoll:
 * the next submission of an op usually follows within microseconds, and a sleeping
 * daemon costs a wakeup on every small op.  While it spins it polls every client's
 * submission ring itself and says so (sq_ctl.wake = 0), so the ranks skip the doorbell's
 * syscall; before it sleeps it says so again and looks once more (shm_abi.h).  Yielding
 * keeps the spin cheap when the ranks need the cores; when another program holds the
 * core, the loop sleeps for a pause instead (spin_pause.h).
 *
 * While a rank has descriptors parked here (an op waiting on its peers' chunks, on readers'
 * notices or on other nodes' packets), the loop spins on for up to NX_BUSY_WAIT_S after the
 * last doorbell: a daemon that slept had to be woken by each of those events, and a
 * sendmmsg into a sleeping peer took 24-26 µs against 4-5 µs into a polling one (2-CPU VM).
 * Ops of 32 KiB to 4 MiB ran 1.1 to 8.7 times as fast with the wait (docs/performance.md);
 * a rank late by longer costs its node no core (test_idle_wait). */
#define NX_BUSY_POLL_S 50e-6
#define NX_BUSY_WAIT_S 500e-6

static uv_idle_t busy;
static bool busy_init, busy_on;
static struct nx_spin_pause spin_pause; /* another program on our core (spin_pause.h) */
static double busy_last; /* the last doorbell, or submission served */

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

/* Whether a rank waits on an op that this daemon holds. */
static bool ops_waiting(void)
{
    struct nx_client *cl;
    LIST_FOREACH(cl, &nx_clients, link)
        if (!cl->dead && cl->pending)
            return true;
    return false;
}

/* Whether a job here spans other nodes: only then does the spin pause (spin_pause.h). */
static bool jobs_across_nodes(void)
{
    struct nx_job *j;
    LIST_FOREACH(j, &nx_jobs, link)
        if (j->net)
            return true;
    return false;
}

static void on_busy(uv_idle_t *h)
{
    if (!nxd.stopping && serve_pending()) {
        /* What it started (a packet to send, a completion) goes out in the loop's next
         * lap: yielding first would hold it behind whoever gets the core. */
        busy_last = nx_now();
        return;
    }
    double t0 = nx_now(), quiet = t0 - busy_last;
    if (!nxd.stopping && !nx_spin_paused(&spin_pause, (uint64_t)(t0 * 1e9)) &&
        (quiet <= NX_BUSY_POLL_S || (quiet < NX_BUSY_WAIT_S && ops_waiting()))) {
        sched_yield();
        double t1 = nx_now();
        uint64_t took = (uint64_t)((t1 - t0) * 1e9);
        if (!nx_yield_long(took) || !jobs_across_nodes())
            return;
        nx_spin_pause_after_yield(&spin_pause, (uint64_t)(t1 * 1e9), took);
        nxd.stats.spin_pauses++; /* and sleep now */
    }
    set_wake(1);
    if (!nxd.stopping && serve_pending()) {
        /* Submitted while we were about to sleep: keep spinning. */
        set_wake(0);
        busy_last = nx_now();
        return;
    }
    uv_idle_stop(h);
    busy_on = false;
}

static void busy_poll_arm(void)
{
    if (nxd.stopping || nx_spin_paused(&spin_pause, (uint64_t)(nx_now() * 1e9)))
        return;
    if (!busy_init) {
        uv_idle_init(nxd.loop, &busy);
        uv_unref((uv_handle_t *)&busy); /* never keeps the loop alive on its own */
        busy_init = true;
    }
    busy_last = nx_now();
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

void nx_ring_doorbells(void)
{
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
}

void nx_ring_forget(struct nx_client *cl)
{
    if (cl->on_dirty) {
        LIST_REMOVE(cl, dirty_link);
        cl->on_dirty = false;
    }
}
