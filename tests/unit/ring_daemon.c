/* ring_daemon.c - see ring_daemon.h.  Only daemon headers here. */
#include "ring_daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "client.h"
#include "comm.h"
#include "context.h"

static struct nx_client *cl; /* freed by the daemon once it dropped it: see gone() */
static uv_loop_t loop;
static uint32_t last_head;

/* The client was torn down (its record freed on the loop): it was the only one. */
static int gone(void)
{
    return nx_client_count == 0;
}

void rd_start(uint32_t sq_entries, uint32_t cq_entries, uint32_t sq_start, uint32_t cq_start,
              struct rd_seg *out)
{
    if (uv_loop_init(&loop) < 0)
        abort();
    nxd.loop = &loop;
    nx_config_defaults(&nxd.cfg);
    nxd.cfg.sq_entries = sq_entries;
    nxd.cfg.cq_entries = cq_entries;
    nxd.cfg.slots = 2;
    nxd.cfg.slot_bytes = 4096;
    nxd.cfg.heap_bytes = 4096;
    nxd.start_time = nx_now();
    char err[256];
    cl = nx_client_new(NULL, getpid(), getuid(), err, sizeof(err));
    if (!cl) {
        fprintf(stderr, "nx_client_new: %s\n", err);
        exit(1);
    }
    uint32_t wr = 0;
    struct nx_comm *c = nx_comm_new(NULL, 1, &cl, &wr, 60000);
    struct nx_segment *s = &cl->seg;
    s->sq_ctl->head = s->sq_ctl->tail = cl->sq_head = sq_start;
    s->cq_ctl->head = s->cq_ctl->tail = cl->cq_tail = cq_start;
    last_head = sq_start;
    if (nx_client_start(cl) < 0)
        abort();
    *out = (struct rd_seg){.base = s->base, .bytes = s->bytes, .sq_efd = cl->sq_efd,
                           .cq_efd = cl->cq_efd, .comm_id = c->id};
}

void rd_complete(uint64_t user_data, uint32_t status, const char *text)
{
    struct nx_done d = {.user_data = user_data, .status = status};
    nx_client_complete(cl, &d, text);
    nx_clients_flush();
}

void rd_serve(void)
{
    /* A doorbell is one poll event; the busy poll after it spins for 50 us, then says it
     * sleeps (wake = 1) and stops.  Turn until it did and nothing is left in the ring. */
    double end = nx_now() + 1.0;
    do {
        uv_run(&loop, UV_RUN_NOWAIT);
        if (!gone())
            last_head = cl->sq_head;
    } while (nx_now() < end && !gone() &&
             (__atomic_load_n(&cl->seg.sq_ctl->wake, __ATOMIC_ACQUIRE) != 1 ||
              __atomic_load_n(&cl->seg.sq_ctl->tail, __ATOMIC_ACQUIRE) != cl->sq_head));
}

uint32_t rd_sq_head(void)
{
    return gone() ? last_head : cl->sq_head;
}

size_t rd_held_back(void)
{
    return gone() ? 0 : cl->ovf_len;
}

uint64_t rd_violations(void)
{
    return nxd.stats.protocol_violations;
}

int rd_dropped(void)
{
    return gone() || cl->dead;
}

void rd_stop(void)
{
    if (!gone())
        nx_client_drop(cl, "the test ends");
    cl = NULL;
    nx_clients_flush(); /* tears the client down; its poll handle closes on the loop */
    nx_clients_fini();
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop) < 0)
        fprintf(stderr, "ring_daemon: the loop still has handles\n");
    nx_config_free(&nxd.cfg);
}
