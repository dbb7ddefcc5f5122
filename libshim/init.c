/*
 * init.c - nexar_init() and nexar_finalize(): the global state's lifetime.
 *
 * init: environment -> connect, HELLO, JOIN (control.c) -> map the segment ->
 * staging slots, request table, arena heap -> the world communicator.
 * finalize undoes it in reverse.  It first leaves every communicator explicitly
 * (NX_K_COMM_FREE), so that the daemon sees a clean exit; a rank whose socket closes
 * while it still belongs to communicators is a lost rank, and they fail.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

struct nx_shim nx_S = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
    .sock = -1,
    .sq_efd = -1,
    .cq_efd = -1,
};

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

nexar_status_t nexar_init(nexar_comm_t **world)
{
    struct nx_join j;
    nexar_status_t s;
    if (!world)
        return nx_fail(NEXAR_ERR_INVALID, "nexar_init: world is NULL");
    *world = NULL;
    nx_lock();
    if ((s = nx_fork_check("nexar_init")) != NEXAR_OK)
        goto out;
    if (nx_S.inited) {
        s = nx_fail(NEXAR_ERR_INVALID,
                    "nexar_init: already initialized; call nexar_finalize() first");
        goto out;
    }
    if ((s = nx_env_read(&nx_S.env)) != NEXAR_OK)
        goto out;
    if ((s = nx_control_join(&nx_S.env, &j)) != NEXAR_OK)
        goto out;
    s = nx_control_map(&j);
    close_fd(&j.memfd); /* the mapping keeps the segment */
    if (s == NEXAR_OK && (s = nx_pull_map(&j)) != NEXAR_OK) {
        munmap(nx_S.seg, (size_t)nx_S.seg_bytes);
        nx_S.seg = NULL;
    }
    for (uint32_t i = 0; i < j.pull_count; i++)
        close_fd(&j.pull_fds[i]); /* the mappings keep the peers' segments */
    if (s != NEXAR_OK)
        goto fail_fds;
    if (nx_req_init() < 0)
        goto fail_nomem_req; /* it frees what it took */
    if (nx_arena_init(nx_S.hdr.heap_bytes) < 0)
        goto fail_nomem_req;
    nx_list_init(&nx_S.active);
    nx_list_init(&nx_S.comms);
    nx_S.world = nx_comm_new(j.world_comm, (int)j.rank, (int)j.size, true);
    if (!nx_S.world)
        goto fail_nomem_arena;
    nx_S.world->plan = j.plan;
    nx_list_add_tail(&nx_S.comms, &nx_S.world->link);

    nx_S.sock = j.sock;
    nx_S.sq_efd = j.sq_efd;
    nx_S.cq_efd = j.cq_efd;
    nx_S.client_id = j.client_id;
    nx_S.features = j.features;
    memcpy(nx_S.device_note, j.device_note, sizeof(nx_S.device_note));
    nx_S.timeout_ms = j.timeout_ms;
    nx_S.safety_ns = ((uint64_t)j.timeout_ms + NX_SAFETY_MS) * 1000000ull;
    nx_S.dead = NEXAR_OK;
    nx_S.dead_text[0] = '\0';
    nx_S.poller = false;
    nx_S.sq_blocked = false;
    nx_S.owed = 0;
    nx_S.next_deadline_check_ns = 0;
    nx_S.next_sock_check_ns = 0;
    nx_S.inited = true;
    nx_fork_watch();
    *world = nx_S.world;
    s = NEXAR_OK;
    goto out;

fail_nomem_arena:
    nx_arena_fini();
fail_nomem_req:
    nx_req_fini();
    s = nx_fail(NEXAR_ERR_NOMEM, "nexar_init: out of memory");
    nx_pull_unmap();
    munmap(nx_S.seg, (size_t)nx_S.seg_bytes);
    nx_S.seg = NULL;
fail_fds:
    close_fd(&j.sq_efd);
    close_fd(&j.cq_efd);
    close_fd(&j.sock);
out:
    nx_unlock();
    return s;
}

/* Frees this rank's membership of every communicator in the daemon.  Failures are
 * ignored: a failed or unreachable communicator has nothing left to leave cleanly. */
static void leave_all(void)
{
    for (struct nx_list *l = nx_S.comms.next; l != &nx_S.comms && !nx_S.dead; l = l->next) {
        struct nexar_comm *c = nx_container_of(l, struct nexar_comm, link);
        struct nexar_request *r;
        struct nx_call op = {.kind = NX_K_COMM_FREE};
        if (nx_req_start(c, &op, &r) == NEXAR_OK)
            nx_wait_locked(r);
    }
}

/* Waits for every outstanding send no call owns (their results are the program's to
 * have asked for; here they only need to reach nexard). */
static void finish_sends(void)
{
    bool again = true;
    while (again && !nx_S.dead) {
        again = false;
        for (struct nx_list *l = nx_S.comms.next; l != &nx_S.comms && !again; l = l->next) {
            struct nexar_comm *c = nx_container_of(l, struct nexar_comm, link);
            for (struct nx_list *q = c->reqs.next; q != &c->reqs; q = q->next) {
                struct nexar_request *r = nx_container_of(q, struct nexar_request, comm_link);
                if (r->tmpl.kind == NX_K_SEND && !r->complete && !r->owned) {
                    nx_wait_locked(r);
                    again = true; /* the lists changed while we waited */
                    break;
                }
            }
        }
    }
}

/*
 * Waits for this rank's device ops in flight.  nexard's GPU work on them reads and writes
 * the rank's memory, and a stream-ordered op holds the caller's stream until its done
 * word is set.  Abandoning one would set the word here (the stream goes on) while that
 * work may still run, and the page of done words is unpinned below, so a stream must not
 * wait on it any more.  The wait is bounded as every wait is: nexard completes each op,
 * or fails it when its ranks do not all arrive within the op deadline (NEXAR_TIMEOUT);
 * when nexard completes nothing (a GPU op that never finishes) the shim gives up after
 * NEXAR_TIMEOUT + 30 s (progress.c) and abandons it, which releases the stream early as
 * the only alternative to a stream that waits forever.
 */
static void finish_device_ops(void)
{
    bool again = true;
    while (again && !nx_S.dead) {
        again = false;
        for (struct nx_list *l = nx_S.active.next; l != &nx_S.active; l = l->next) {
            struct nexar_request *r = nx_container_of(l, struct nexar_request, active_link);
            if (r->dev && !r->complete) {
                r->refs++; /* a detached request frees itself when it completes */
                nx_progress_wait(r);
                nx_req_unref(r);
                again = true; /* the list changed while we waited */
                break;
            }
        }
    }
}

nexar_status_t nexar_finalize(void)
{
    nx_lock();
    if (!nx_S.inited) {
        nx_unlock();
        return NEXAR_OK;
    }
    if (nx_S.forked_from) {
        /* A forked child: everything here is the parent's (fork.c).  Only forget it. */
        nx_S.inited = false;
        nx_unlock();
        return NEXAR_OK;
    }
    /* A send the daemon does not hold yet (beyond its eager budget, its receive not
     * posted) is waited for: a send the program started is delivered, or ends with the
     * daemon's verdict (its p2p deadline).  Everything else outstanding is abandoned. */
    finish_sends();
    /* Device ops are waited for too: their GPU work must not outlive finalize. */
    finish_device_ops();
    /* Nothing more will complete: outstanding requests are abandoned and freed. */
    nx_req_abandon_all(NEXAR_ERR_UNAVAILABLE, "nexar_finalize() abandoned this request");
    for (struct nx_list *l = nx_S.comms.next; l != &nx_S.comms; l = l->next) {
        struct nexar_comm *c = nx_container_of(l, struct nexar_comm, link);
        while (!nx_list_empty(&c->reqs))
            nx_req_free(nx_container_of(c->reqs.next, struct nexar_request, comm_link));
    }
    leave_all();
    nx_dev_fini(); /* while the socket still works: nexard lets go of our memory first */
    while (!nx_list_empty(&nx_S.comms)) {
        struct nexar_comm *c = nx_container_of(nx_S.comms.next, struct nexar_comm, link);
        nx_comm_destroy(c);
    }
    nx_S.world = NULL;
    nx_arena_fini();
    nx_req_fini();
    nx_pull_unmap();
    munmap(nx_S.seg, (size_t)nx_S.seg_bytes);
    nx_S.seg = NULL;
    nx_S.seg_bytes = 0;
    nx_S.arena = NULL;
    close_fd(&nx_S.sq_efd);
    close_fd(&nx_S.cq_efd);
    close_fd(&nx_S.sock);
    nx_S.inited = false;
    nx_S.dead = NEXAR_OK;
    pthread_cond_broadcast(&nx_S.cv);
    nx_unlock();
    return NEXAR_OK;
}
