/*
 * progress.c - making progress and blocking: nexar_wait, nexar_test, nexar_sync.
 *
 * Progress (nx_progress) happens inside every blocking call, nexar_wait, nexar_test,
 * nexar_sync and every submission: reap all completions (for every request of every
 * communicator), then refill the staging slots and the submission ring.
 *
 * Blocking: the waiting thread first busy-polls the completion ring for NX_SPIN_NS,
 * then sleeps in poll() on the completion eventfd and the control socket (at most
 * NX_POLL_MAX_MS, 1 ms while work waits for submission-ring space).  A readable or
 * hung-up control socket means nexard went away: every outstanding request fails
 * with NEXAR_ERR_UNAVAILABLE.  A request that sees no completion for NEXAR_TIMEOUT +
 * NX_SAFETY_MS while the daemon lives fails with NEXAR_ERR_TIMEOUT and the shim
 * stops using nexard (every later call fails the same way until nexar_finalize()).
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define NX_CHECK_EVERY_NS 100000000ull /* deadline and socket checks in nexar_test */

uint64_t nx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void nx_shim_die(nexar_status_t s, const char *text)
{
    if (nx_S.dead)
        return;
    nx_S.dead = s;
    snprintf(nx_S.dead_text, sizeof(nx_S.dead_text), "%s", text);
    nx_S.pulled_n = 0; /* nothing more reaches nexard */
    nx_req_abandon_all(s, nx_S.dead_text);
    pthread_cond_broadcast(&nx_S.cv);
}

void nx_shim_gone(const char *text)
{
    nx_ring_reap();
    nx_shim_die(NEXAR_ERR_UNAVAILABLE, text);
}

nexar_status_t nx_shim_check(const char *fn)
{
    if (!nx_S.inited)
        return nx_fail(NEXAR_ERR_INVALID, "%s: nexar_init() has not been called", fn);
    if (nx_S.forked_from)
        return nx_fork_check(fn);
    if (nx_S.dead)
        return nx_fail(nx_S.dead, "%s: %s", fn, nx_S.dead_text);
    return NEXAR_OK;
}

static void daemon_gone(void)
{
    char why[NX_ERR_TEXT_BYTES - 64], text[NX_ERR_TEXT_BYTES];
    nexar_status_t s = nx_control_drain(why, sizeof(why));
    if (s != NEXAR_OK) { /* it said why before it closed */
        nx_ring_reap();
        snprintf(text, sizeof(text), "nexard dropped this rank: %s", why);
        nx_shim_die(s, text);
        return;
    }
    snprintf(text, sizeof(text), "nexard went away (%s)", why);
    nx_shim_gone(text);
}

static void check_deadlines(uint64_t now)
{
    for (struct nx_list *l = nx_S.active.next; l != &nx_S.active; l = l->next) {
        struct nexar_request *r = nx_container_of(l, struct nexar_request, active_link);
        if (r->inflight == 0 || now - r->last_event_ns <= nx_S.safety_ns)
            continue;
        char text[NX_ERR_TEXT_BYTES];
        snprintf(text, sizeof(text),
                 "no completion from nexard for %s seq %llu on comm %u in %llu s (the op "
                 "deadline is %u s); the library stopped using nexard",
                 nx_kind_name(r->tmpl.kind), (unsigned long long)r->tmpl.seq, r->comm->id,
                 (unsigned long long)((now - r->last_event_ns) / 1000000000ull),
                 nx_S.timeout_ms / 1000);
        nx_shim_die(NEXAR_ERR_TIMEOUT, text);
        return;
    }
}

/* A non-blocking look at the control socket. */
static void check_socket(void)
{
    struct pollfd p = {.fd = nx_S.sock, .events = POLLIN};
    if (poll(&p, 1, 0) > 0 && p.revents)
        daemon_gone();
}

void nx_progress(void)
{
    if (!nx_S.inited || nx_S.dead || nx_S.forked_from) /* the rings are the parent's */
        return;
    nx_ring_reap();
    nx_pump();
    uint64_t now = nx_now_ns();
    if (now >= nx_S.next_deadline_check_ns) {
        nx_S.next_deadline_check_ns = now + NX_CHECK_EVERY_NS;
        check_deadlines(now);
    }
}

/* The poller's sleep, with the lock released.  Returns the socket's revents. */
static short sleep_on_doorbell(uint32_t seen, int efd, int sock, int timeout_ms,
                               bool across_nodes)
{
    uint64_t t0 = nx_now_ns(), t = t0;
    while (!nx_spin_paused(&nx_S.pause, t) && t - t0 < NX_SPIN_NS) {
        if (nx_ring_cq_pending(seen))
            return 0;
        /* Yield rather than pause: ranks and nexard often outnumber the cores, and
         * the completion we wait for needs the daemon to run.  With a free core the
         * yield returns at once; when it ran another program's slice, sleep now
         * (spin_pause.h). */
        uint64_t y = t; /* read after the last yield: only the look above since */
        sched_yield();
        t = nx_now_ns();
        if (across_nodes)
            nx_spin_pause_after_yield(&nx_S.pause, t, t - y);
    }

    /* From here the daemon rings for every completion; look once more after saying
     * so, or a completion published just before would wait for the timeout. */
    nx_wake_set(nx_S.cq_wake, 1);
    if (nx_ring_cq_pending(seen)) {
        nx_wake_set(nx_S.cq_wake, 0);
        return 0;
    }
    struct pollfd p[2] = {{.fd = efd, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
    int n = poll(p, 2, timeout_ms);
    nx_wake_set(nx_S.cq_wake, 0);
    if (n <= 0)
        return 0;
    if (p[0].revents & POLLIN) {
        uint64_t v;
        ssize_t rd;
        do
            rd = read(efd, &v, sizeof(v));
        while (rd < 0 && errno == EINTR);
    }
    return p[1].revents;
}

void nx_progress_wait(struct nexar_request *r)
{
    for (;;) {
        nx_progress();
        /* Not before our peer-read notices are out: other ranks' ops wait on them. */
        if ((r->complete && !nx_S.pulled_n) || nx_S.dead)
            return;
        if (nx_S.poller) {
            /* Another thread sleeps on the doorbell; it wakes us when it returns. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&nx_S.cv, &nx_S.mu, &ts);
            continue;
        }
        nx_S.poller = true;
        uint32_t seen = nx_S.cq_local_head;
        int efd = nx_S.cq_efd, sock = nx_S.sock;
        int timeout = nx_S.sq_blocked ? 1 : NX_POLL_MAX_MS;
        bool across = r->comm && !(r->comm->plan & NX_PLAN_LOCAL);
        nx_unlock();
        short sock_ev = sleep_on_doorbell(seen, efd, sock, timeout, across);
        nx_lock();
        nx_S.poller = false;
        pthread_cond_broadcast(&nx_S.cv);
        /* Look again under the lock: a device registration may have read its reply
         * while we slept, and only what is still there means the daemon went away. */
        if (sock_ev && nx_S.inited && !nx_S.dead)
            check_socket();
    }
}

void nx_wait_owned(struct nexar_request *r)
{
    r->detached = false; /* ours now: completion must not free it under us */
    r->owned = true;     /* nobody else frees it: nexar_sync on another thread waits */
    r->refs++;
    nx_progress_wait(r);
    r->refs--;
    if (!r->complete) /* cannot happen: a dead shim completes everything */
        nx_req_fail(r, NEXAR_ERR_INTERNAL, "request left incomplete");
}

nexar_status_t nx_wait_locked(struct nexar_request *r)
{
    nx_wait_owned(r);
    nexar_status_t s = nx_req_result(r);
    nx_req_free(r);
    return s;
}

nexar_status_t nx_comm_drain(struct nexar_comm *c, uint64_t limit)
{
    nexar_status_t first = NEXAR_OK;
    char text[NX_ERR_TEXT_BYTES];
    for (;;) {
        /* The list changes while we sleep: look again from its head every time. */
        struct nexar_request *pick = NULL;
        for (struct nx_list *l = c->reqs.next; l != &c->reqs; l = l->next) {
            struct nexar_request *r = nx_container_of(l, struct nexar_request, comm_link);
            if (r->serial >= limit || (r->owned && r->complete))
                continue;
            if (!r->owned) {
                pick = r;
                break;
            }
            if (!pick)
                pick = r;
        }
        if (!pick)
            break;
        if (pick->owned) {
            /* Another thread's: wait for it, and let that thread free it. */
            pick->refs++;
            nx_progress_wait(pick);
            bool stuck = !pick->complete;
            nx_req_unref(pick);
            if (stuck) /* a dead shim completes everything: cannot happen */
                break;
            continue;
        }
        nexar_status_t s = nx_wait_locked(pick);
        if (s != NEXAR_OK && first == NEXAR_OK) {
            first = s;
            snprintf(text, sizeof(text), "%s", nexar_last_error());
        }
    }
    return first == NEXAR_OK ? NEXAR_OK : nx_fail_text(first, text);
}

nexar_status_t nexar_wait(nexar_request_t *req)
{
    if (!req)
        return nx_fail(NEXAR_ERR_INVALID, "nexar_wait: req is NULL");
    nx_lock();
    nexar_status_t s;
    if (!nx_S.inited)
        s = nx_fail(NEXAR_ERR_INVALID, "nexar_wait: nexar_init() has not been called");
    else if ((s = nx_fork_check("nexar_wait")) == NEXAR_OK)
        s = nx_wait_locked(req);
    nx_unlock();
    return s;
}

nexar_status_t nexar_test(nexar_request_t *req, int *done)
{
    if (!req || !done)
        return nx_fail(NEXAR_ERR_INVALID, "nexar_test: %s is NULL", req ? "done" : "req");
    *done = 0;
    nx_lock();
    if (!nx_S.inited) {
        nx_unlock();
        return nx_fail(NEXAR_ERR_INVALID, "nexar_test: nexar_init() has not been called");
    }
    nexar_status_t s = nx_fork_check("nexar_test");
    if (s != NEXAR_OK) {
        nx_unlock();
        return s;
    }
    nx_progress();
    uint64_t now = nx_now_ns();
    if (!req->complete && !nx_S.dead && now >= nx_S.next_sock_check_ns) {
        nx_S.next_sock_check_ns = now + NX_CHECK_EVERY_NS;
        check_socket();
    }
    /* As in a wait: not done before our peer-read notices are out (the ring may have
     * been full), or a rank that tests once and goes off to compute holds its peers. */
    if (req->complete && (!nx_S.pulled_n || nx_S.dead)) {
        *done = 1;
        s = nx_req_result(req);
        nx_req_free(req);
    }
    nx_unlock();
    return s;
}

nexar_status_t nexar_sync(nexar_comm_t *c)
{
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "nexar_sync: comm is NULL");
    nx_lock();
    if (!nx_S.inited) {
        nx_unlock();
        return nx_fail(NEXAR_ERR_INVALID, "nexar_sync: nexar_init() has not been called");
    }
    nexar_status_t s = nx_fork_check("nexar_sync");
    if (s == NEXAR_OK) /* what was started before this call, by any thread */
        s = nx_comm_drain(c, c->req_serial);
    nx_unlock();
    return s;
}
