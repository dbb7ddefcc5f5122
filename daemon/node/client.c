/* client.c - see client.h.
 *
 * Drops are deferred: nx_client_drop() marks the client dead and queues it, and the
 * teardown (failing its communicators, freeing its segment) runs in nx_clients_flush()
 * at the end of the event callback.  Deep inside the matcher a completion may find a
 * client's ring corrupt; tearing it down right there would free ops the caller is
 * still walking. */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "comm.h"
#include "ctlsrv.h"
#include "context.h"
#include "devop.h"
#include "frame.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "procwatch.h"
#include "ring.h"
#include "workers.h"

struct nx_client_list nx_clients = LIST_HEAD_INITIALIZER(nx_clients);
uint32_t nx_client_count;

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

/* The rank's process exited but its socket is still open: a process it forked, or one it
 * handed the socket to, holds it.  Without this the rank's communicators would wait for
 * their deadline instead of failing now. */
static void on_process_exit(void *arg)
{
    struct nx_client *cl = arg;
    char who[160];
    if (cl->dead)
        return;
    NX_INFO("client", "%s: its process exited while its connection stays open (held by a "
            "process it forked?)", nx_client_name(cl, who, sizeof(who)));
    cl->exited = true;
    nx_client_drop(cl, "its process exited");
    nx_clients_flush();
}

struct nx_client *nx_client_new(struct nx_conn *conn, pid_t pid, uid_t uid, char *err,
                                size_t errlen)
{
    const struct nx_config *cfg = &nxd.cfg;
    struct nx_shm_geom g = {
        .sq_entries = cfg->sq_entries,
        .cq_entries = cfg->cq_entries,
        .err_entries = 64,
        .slot_count = cfg->slots,
        .slot_bytes = cfg->slot_bytes,
        .heap_bytes = cfg->heap_bytes,
        .max_pending = cfg->max_pending,
    };
    char name[64], why[160];
    int saved;
    struct nx_client *cl = nx_xcalloc(1, sizeof(*cl));
    cl->id = next_id++;
    cl->dev.id = cl->id;
    cl->pull_index = NX_PULL_NONE;
    cl->conn = conn;
    cl->pid = pid;
    cl->uid = uid;
    cl->sq_efd = cl->cq_efd = -1;
    snprintf(name, sizeof(name), "nexar-client-%u", cl->id);

    int rv = nx_segment_create(&cl->seg, &g, name);
    if (rv < 0) {
        saved = -rv;
        if (rv == -EINVAL)
            snprintf(err, errlen, "bad segment geometry in the configuration");
        else
            snprintf(err, errlen, "cannot create the shared segment (memfd): %s",
                     nx_fd_why(-rv, "nexard", "raise LimitNOFILE", why, sizeof(why)));
        goto fail;
    }
    cl->sq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    cl->cq_efd = cl->sq_efd < 0 ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (cl->sq_efd < 0 || cl->cq_efd < 0) {
        saved = errno;
        snprintf(err, errlen, "cannot create eventfds: %s",
                 nx_fd_why(saved, "nexard", "raise LimitNOFILE", why, sizeof(why)));
        goto fail;
    }
    if (conn) /* the watch backs up a connection's hang-up; without one there is none */
        cl->exit_watch = nx_procwatch_start(nxd.loop, pid, on_process_exit, cl);
    LIST_INSERT_HEAD(&nx_clients, cl, link);
    nx_client_count++;
    nx_workers_set_ranks(nx_client_count);
    nxd.stats.clients_accepted++;
    return cl;

fail:
    if (cl->sq_efd >= 0)
        close(cl->sq_efd);
    if (cl->cq_efd >= 0)
        close(cl->cq_efd);
    nx_segment_destroy(&cl->seg);
    free(cl);
    errno = saved;
    return NULL;
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
    nx_client_name(cl, name, sizeof(name));
    NX_WARN("client", "protocol violation by %s: %s; dropping it", name, why);
    /* The rank hears why before its socket closes (else it could only say that nexard
     * went away), and so do the ranks that lose it. */
    snprintf(cl->violation, sizeof(cl->violation), "nexard dropped it for a protocol "
             "violation (%s)", why);
    if (cl->conn) {
        char text[NX_ERR_TEXT_BYTES - 64];
        snprintf(text, sizeof(text), "a protocol violation by %s: %s", name, why);
        nx_conn_error(cl->conn, NEXAR_ERR_INTERNAL, text);
    }
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
        nx_comm_leave(m.comm, m.rank, true, who,
                      cl->exited     ? "its process exited"
                      : cl->violated ? cl->violation
                                     : "its connection to nexard closed");
    }
    nx_job_client_gone(cl, lost);
    if (nx_device)
        nx_device->client_gone(&cl->dev);
    nx_ring_forget(cl);
    nx_procwatch_stop(cl->exit_watch);
    cl->exit_watch = NULL;
    LIST_REMOVE(cl, link);
    nx_client_count--;
    nx_workers_set_ranks(nx_client_count);
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
    nx_ring_doorbells();
    if (ndrops > 0)
        nx_clients_flush();
}
