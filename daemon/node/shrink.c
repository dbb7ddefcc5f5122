/* shrink.c - see shrink.h. */
#include "shrink.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "client.h"
#include "cluster_ops.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"

struct nx_shrink {
    struct nx_comm *c;
    bool *in;           /* by local rank: it called */
    uint64_t *ud;       /* its descriptor's user_data */
    double started, deadline;
    LIST_ENTRY(nx_shrink) link;
};

static LIST_HEAD(, nx_shrink) all = LIST_HEAD_INITIALIZER(all);

static struct nx_shrink *find(const struct nx_comm *c)
{
    struct nx_shrink *s;
    LIST_FOREACH(s, &all, link)
        if (s->c == c)
            return s;
    return NULL;
}

static void shrink_free(struct nx_shrink *s)
{
    LIST_REMOVE(s, link);
    free(s->in);
    free(s->ud);
    free(s);
}

/* Every survivor called (one node): the new communicator, and each caller's completion. */
static void finish(struct nx_shrink *s)
{
    struct nx_comm *c = s->c;
    struct nx_client **cls = nx_xcalloc(c->size, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(c->size, sizeof(*wr)), n = 0;
    for (uint32_t r = 0; r < c->size; r++)
        if (c->ranks[r].client && s->in[r]) {
            cls[n] = c->ranks[r].client;
            wr[n++] = c->ranks[r].world_rank;
        }
    struct nx_comm *nc = nx_comm_new(c->job, n, cls, wr, c->timeout_ms);
    nc->shrunk_from = c->id;
    nx_comm_set_plan(nc, c->plan_local);
    c->shrinks++;
    NX_INFO("comm", "communicator %u of job \"%s\" shrunk to communicator %u: %u of %u "
            "ranks (%u failed) in %.3f s", c->id, c->job->name, nc->id, n, c->size,
            c->nfailed, nx_now() - s->started);
    nxd.stats.recoveries++;
    for (uint32_t r = 0, k = 0; r < c->size; r++)
        if (c->ranks[r].client && s->in[r])
            nx_client_finish(c->ranks[r].client, s->ud[r], NEXAR_OK, NULL, nc->id, k++, n,
                             nx_comm_plan(nc));
    free(cls);
    free(wr);
    shrink_free(s);
}

/* Done when every rank still attached has called: on one node at once, across nodes once
 * the daemons agree (the cluster layer calls nx_shrink_decide). */
static void check(struct nx_shrink *s)
{
    struct nx_comm *c = s->c;
    uint32_t callers = 0;
    for (uint32_t r = 0; r < c->size; r++) {
        if (!c->ranks[r].client)
            continue;
        if (!s->in[r])
            return;
        callers++;
    }
    if (!callers)
        shrink_free(s);
    else if (c->x)
        nx_cluster_ops->shrink_ready(c);
    else
        finish(s);
}

void nx_shrink_decide(struct nx_comm *c, const uint32_t *failed, size_t nfailed, uint64_t key)
{
    struct nx_shrink *s = find(c);
    if (!s) {
        NX_WARN("comm", "communicator %u: the nodes agreed on a shrink this node no longer "
                "waits for", c->id);
        return;
    }
    uint32_t S = nx_comm_span_size(c), n = 0, g = 0;
    uint32_t *surv = nx_xcalloc(S, sizeof(*surv)), *newrank = nx_xcalloc(S, sizeof(*newrank));
    for (size_t i = 0, r = 0; r < S; r++) {
        while (i < nfailed && failed[i] < r)
            i++;
        if (i < nfailed && failed[i] == r)
            continue;
        newrank[r] = n;
        surv[n++] = (uint32_t)r;
    }
    for (size_t i = 0; i < nfailed; i++)
        if (failed[i] < S)
            nx_comm_mark_failed(c, failed[i]);
    struct nx_client **cls = nx_xcalloc(c->size, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(c->size, sizeof(*wr)), *span = nx_xcalloc(c->size, sizeof(*span));
    uint32_t *of = nx_xcalloc(c->size, sizeof(*of));
    bool late_failed = false;
    for (uint32_t r = 0; r < c->size; r++) {
        if (!c->ranks[r].client || !s->in[r])
            continue;
        uint32_t sr = nx_comm_span_rank(c, r);
        bool out = false;
        for (size_t i = 0; i < nfailed && !out; i++)
            out = failed[i] == sr;
        if (out) {
            /* Counted failed by the others (a lost connection, not a dead process): it
             * cannot join what they made without it. */
            nx_client_finish(c->ranks[r].client, s->ud[r], NEXAR_ERR_PEER_LOST,
                     "nexar_comm_shrink: the other nodes count this rank as failed", 0, 0, 0,
                     false);
            continue;
        }
        cls[g] = c->ranks[r].client;
        wr[g] = c->ranks[r].world_rank;
        span[g] = newrank[sr];
        of[g++] = r;
    }
    c->shrinks++;
    if (g > 0) {
        struct nx_comm *nc = nx_comm_new(c->job, g, cls, wr, c->timeout_ms);
        nc->shrunk_from = c->id;
        if (g < n) {
            nx_comm_span(nc, 0, n, span);
            nx_cluster_ops->shrink_attach(nc, c, surv, n, key);
        }
        NX_INFO("comm", "communicator %u of job \"%s\" shrunk to communicator %u: %u of %u "
                "ranks across nodes (%zu failed), %u here, agreed in %.3f s", c->id,
                c->job->name, nc->id, n, S, nfailed, g, nx_now() - s->started);
        nxd.stats.recoveries++;
        for (uint32_t k = 0; k < g; k++)
            nx_client_finish(cls[k], s->ud[of[k]], NEXAR_OK, NULL, nc->id, span[k], n,
                             nx_comm_plan(nc));
        /* A survivor of the agreement that this node knows failed since: the new
         * communicator fails at once, and says so to its other nodes. */
        for (uint32_t k = 0; k < n && !late_failed; k++)
            for (uint32_t i = 0; i < c->nfailed && !late_failed; i++)
                if (c->failed[i] == surv[k]) {
                    late_failed = true;
                    nx_comm_mark_failed(nc, k);
                    nx_comm_fail(nc, NEXAR_ERR_PEER_LOST,
                                 "rank %u of communicator %u (rank %u of communicator %u) "
                                 "failed while its survivors agreed on it", k, nc->id,
                                 surv[k], c->id);
                }
    }
    free(surv);
    free(newrank);
    free(cls);
    free(wr);
    free(span);
    free(of);
    shrink_free(s);
}

void nx_shrink_submit(struct nx_comm *c, uint32_t r, struct nx_client *cl, uint64_t user_data)
{
    cl->pending++;
    struct nx_shrink *s = find(c);
    if (!s) {
        s = nx_xcalloc(1, sizeof(*s));
        s->c = c;
        s->in = nx_xcalloc(c->size, sizeof(*s->in));
        s->ud = nx_xcalloc(c->size, sizeof(*s->ud));
        s->started = nx_now();
        s->deadline = s->started + c->timeout_ms / 1000.0;
        LIST_INSERT_HEAD(&all, s, link);
    }
    if (s->in[r]) {
        nx_client_finish(cl, user_data, NEXAR_ERR_INVALID,
                 "nexar_comm_shrink: this rank is already shrinking this communicator", 0, 0,
                 0, false);
        return;
    }
    s->in[r] = true;
    s->ud[r] = user_data;
    check(s);
}

void nx_shrink_rank_gone(struct nx_comm *c)
{
    struct nx_shrink *s = find(c);
    if (s)
        check(s);
}

void nx_shrink_forget(struct nx_comm *c)
{
    struct nx_shrink *s = find(c);
    if (s)
        shrink_free(s);
}

void nx_shrink_tick(double now)
{
    struct nx_shrink *s, *tmp;
    for (s = LIST_FIRST(&all); s; s = tmp) {
        tmp = LIST_NEXT(s, link);
        if (now < s->deadline)
            continue;
        struct nx_comm *c = s->c;
        char missing[160], text[NX_ERR_TEXT_BYTES];
        size_t off = 0;
        unsigned shown = 0;
        missing[0] = '\0';
        for (uint32_t r = 0; r < c->size && off < sizeof(missing); r++)
            if (c->ranks[r].client && !s->in[r] && shown++ < 16)
                off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u",
                                        shown > 1 ? ", " : "", nx_comm_span_rank(c, r));
        snprintf(text, sizeof(text), "nexar_comm_shrink on communicator %u (job \"%s\"): "
                 "rank(s) %s did not call it within %.0f s", c->id, c->job->name, missing,
                 c->timeout_ms / 1000.0);
        NX_INFO("comm", "%s", text);
        for (uint32_t r = 0; r < c->size; r++)
            if (c->ranks[r].client && s->in[r])
                nx_client_finish(c->ranks[r].client, s->ud[r], NEXAR_ERR_TIMEOUT, text, 0, 0, 0,
                                 false);
        shrink_free(s);
    }
}
