/* comm.c - see comm.h. */
#include "comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cluster_ops.h"
#include "context.h"
#include "devop.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "op.h"
#include "grow.h"
#include "shrink.h"

struct nx_comm_list nx_comms = LIST_HEAD_INITIALIZER(nx_comms);
uint32_t nx_comm_count;
static uint32_t next_id = 1;

struct nx_comm *nx_comm_new(struct nx_job *job, uint32_t size, struct nx_client *const *clients,
                            const uint32_t *world_ranks, uint32_t timeout_ms)
{
    struct nx_comm *c = nx_xcalloc(1, sizeof(*c));
    c->id = next_id++;
    if (next_id == 0)
        next_id = 1;
    c->job = job;
    c->size = size;
    c->live = size;
    c->timeout_ms = timeout_ms;
    c->nodes = 1;
    c->closed_from = UINT64_MAX;
    c->span_size = size;
    c->ranks = nx_xcalloc(size, sizeof(*c->ranks));
    for (uint32_t r = 0; r < size; r++) {
        c->ranks[r].client = clients[r];
        c->ranks[r].world_rank = world_ranks[r];
        nx_client_add_member(clients[r], c, r);
    }
    nx_match_init(&c->match, size);
    nx_p2p_init(&c->p2p);
    LIST_INSERT_HEAD(&nx_comms, c, link);
    nx_comm_count++;
    return c;
}

void nx_comm_set_plan(struct nx_comm *c, bool local)
{
    c->plan_local = local;
    c->plan_cma = local && c->job && c->job->single_copy && c->size >= 2 &&
                  c->size <= NX_PULL_MAX_RANKS;
    for (uint32_t r = 0; c->plan_cma && r < c->size; r++) /* a joiner reads no peer */
        c->plan_cma = c->ranks[r].client && c->ranks[r].client->pull_index != NX_PULL_NONE;
}

static void comm_free(struct nx_comm *c)
{
    nx_shrink_forget(c);
    nx_grow_forget(c);
    nx_match_fail_all(c);
    nx_pull_drain_tick(c, 0, true); /* its ranks are gone: completes no one */
    nx_p2p_fail_all(c);
    nx_cluster_ops->comm_gone(c);
    if (nx_device)
        nx_device->comm_gone(c->id);
    nx_match_fini(&c->match);
    LIST_REMOVE(c, link);
    nx_comm_count--;
    free(c->failed_text);
    free(c->failed);
    free(c->closed_text);
    free(c->span_rank);
    free(c->ranks);
    free(c);
}

void nx_comm_span(struct nx_comm *c, uint32_t nodes, uint32_t span_size,
                  const uint32_t *span_rank)
{
    c->nodes = nodes;
    c->span_size = span_size;
    free(c->span_rank);
    c->span_rank = nx_xcalloc(c->size, sizeof(*c->span_rank));
    memcpy(c->span_rank, span_rank, c->size * sizeof(*c->span_rank));
}

void nx_comm_fail(struct nx_comm *c, uint32_t status, const char *fmt, ...)
{
    if (c->failed_status)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&c->failed_text, fmt, ap) < 0)
        c->failed_text = NULL;
    va_end(ap);
    if (!c->failed_text)
        c->failed_text = nx_xstrdup(nx_status_text(status));
    c->failed_status = status;
    nxd.stats.ops_failed++;
    NX_INFO("comm", "communicator %u of job \"%s\" failed: %s", c->id,
            c->job ? c->job->name : "?", c->failed_text);
    nx_match_fail_all(c);
    nx_p2p_fail_all(c);
    nx_grow_comm_failed(c);
    nx_cluster_ops->comm_failed(c);
}

void nx_comm_mark_failed(struct nx_comm *c, uint32_t rank)
{
    nx_u32_set_add(&c->failed, &c->nfailed, rank);
}

void nx_comm_leave(struct nx_comm *c, uint32_t rank, bool lost, const char *who,
                   const char *how)
{
    if (rank >= c->size || !c->ranks[rank].client)
        return;
    struct nx_client *cl = c->ranks[rank].client;
    c->ranks[rank].client = NULL;
    nx_client_del_member(cl, c);
    nx_pull_drain_leave(c, rank);
    char busy[256];
    if (lost) {
        nxd.stats.peers_lost++;
        nx_comm_mark_failed(c, nx_comm_span_rank(c, rank));
        nx_comm_fail(c, NEXAR_ERR_PEER_LOST, "%s (rank %u of communicator %u) is gone: %s",
                     who, nx_comm_span_rank(c, rank), c->id, how);
    } else if (nx_match_rank_busy(c, rank) || nx_cluster_ops->comm_busy(c)) {
        nx_comm_fail(c, NEXAR_ERR_PEER_LOST,
                     "%s freed communicator %u while operations on it were in flight", who,
                     c->id);
    } else if (!c->failed_status && nx_p2p_leave(c, cl, rank, busy, sizeof(busy)) < 0) {
        nx_comm_fail(c, NEXAR_ERR_PEER_LOST, "%s freed communicator %u while %s", who, c->id,
                     busy);
    } else if (!c->failed_status && c->x) {
        /* Its collectives so far are done everywhere; the other nodes fail the ones from
         * here on at once, instead of waiting for it until their deadline. */
        nx_cluster_ops->comm_left(c, rank, c->match.next_seq[rank], who);
    }
    if (--c->live == 0)
        comm_free(c);
    else {
        nx_shrink_rank_gone(c);
        nx_grow_rank_gone(c);
    }
}

void nx_comm_close_from(struct nx_comm *c, uint64_t seq, uint32_t status, const char *text)
{
    if (c->failed_status || c->closed_text)
        return;
    c->closed_from = seq;
    c->closed_status = status;
    c->closed_text = nx_xstrdup(text);
    struct nx_op *op;
    TAILQ_FOREACH(op, &c->match.ops, link)
        if (op->seq >= seq) {
            nx_comm_fail(c, status, "%s", text);
            return;
        }
}

const char *nx_comm_rank_name(const struct nx_comm *c, uint32_t r, char *buf, size_t len)
{
    uint32_t cr = nx_comm_span_rank(c, r), wr = c->ranks[r].world_rank;
    if (cr == wr)
        snprintf(buf, len, "rank %u", cr);
    else
        snprintf(buf, len, "rank %u (world rank %u)", cr, wr);
    return buf;
}

void nx_comms_fini(void)
{
    while (!LIST_EMPTY(&nx_comms)) {
        struct nx_comm *c = LIST_FIRST(&nx_comms);
        for (uint32_t r = 0; r < c->size; r++)
            if (c->ranks[r].client)
                nx_client_del_member(c->ranks[r].client, c);
        comm_free(c);
    }
}
