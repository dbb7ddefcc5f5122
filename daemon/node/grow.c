/* grow.c - see grow.h. */
#include "grow.h"

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

struct nx_grow {
    struct nx_comm *c;
    bool *in;          /* by local rank: it called */
    uint64_t *ud;
    uint32_t *add;     /* what each caller asked for */
    double started, deadline;
    LIST_ENTRY(nx_grow) link;
};

static LIST_HEAD(, nx_grow) all = LIST_HEAD_INITIALIZER(all);

static struct nx_grow *find(const struct nx_comm *c)
{
    struct nx_grow *g;
    LIST_FOREACH(g, &all, link)
        if (g->c == c)
            return g;
    return NULL;
}

static void grow_release(struct nx_grow *g)
{
    free(g->in);
    free(g->ud);
    free(g->add);
    free(g);
}

static void grow_free(struct nx_grow *g)
{
    LIST_REMOVE(g, link);
    grow_release(g);
}

static void fail_all(struct nx_grow *g, uint32_t status, const char *text)
{
    struct nx_comm *c = g->c;
    NX_INFO("comm", "%s", text);
    for (uint32_t r = 0; r < c->size; r++)
        if (c->ranks[r].client && g->in[r])
            nx_client_finish(c->ranks[r].client, g->ud[r], status, text, 0, 0, 0, false);
    grow_free(g);
}

/* Every member called and enough joiners wait: the grown communicator. */
static void check(struct nx_grow *g)
{
    struct nx_comm *c = g->c;
    struct nx_job *j = c->job;
    uint32_t members = 0, add = 0, first = 0;
    for (uint32_t r = 0; r < c->size; r++) {
        if (!c->ranks[r].client)
            continue;
        if (!g->in[r])
            return;
        if (!members++) {
            add = g->add[r];
            first = r;
        } else if (g->add[r] != add) {
            char text[NX_ERR_TEXT_BYTES];
            snprintf(text, sizeof(text), "nexar_comm_grow on communicator %u (job \"%s\"): "
                     "rank %u asked to add %u but rank %u asked to add %u", c->id, j->name,
                     nx_comm_span_rank(c, first), add, nx_comm_span_rank(c, r), g->add[r]);
            return fail_all(g, NEXAR_ERR_MISMATCH, text);
        }
    }
    if (!members) {
        grow_free(g);
        return;
    }
    if (c->x) { /* the nodes decide together (cluster/xgrow.c) */
        nx_cluster_ops->grow_ready(c, add);
        return;
    }
    if (j->njoiners < add)
        return;
    uint32_t n = members + add, k = 0;
    struct nx_client **cls = nx_xcalloc(n, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(n, sizeof(*wr));
    for (uint32_t r = 0; r < c->size; r++)
        if (c->ranks[r].client) {
            cls[k] = c->ranks[r].client;
            wr[k++] = c->ranks[r].world_rank;
        }
    struct nx_client **joiners = nx_xcalloc(add, sizeof(*joiners));
    memcpy(joiners, j->joiners, add * sizeof(*joiners));
    for (uint32_t i = 0; i < add; i++) {
        cls[k] = joiners[i];
        wr[k++] = j->nranks + i; /* the world rank nx_job_take_joiner gives it */
    }
    struct nx_comm *nc = nx_comm_new(j, n, cls, wr, c->timeout_ms);
    nc->grown_from = c->id;
    nx_comm_set_plan(nc, c->plan_local); /* with joiners: never single-copy */
    c->grows++;
    NX_INFO("comm", "communicator %u of job \"%s\" grew to communicator %u: %u members and %u "
            "joiner(s) in %.3f s", c->id, j->name, nc->id, members, add,
            nx_now() - g->started);
    nxd.stats.recoveries++;
    for (uint32_t r = 0, m = 0; r < c->size; r++)
        if (c->ranks[r].client)
            nx_client_finish(c->ranks[r].client, g->ud[r], NEXAR_OK, NULL, nc->id, m++, n,
                             nx_comm_plan(nc));
    grow_free(g);
    uint32_t base = j->nranks;
    for (uint32_t i = 0; i < add; i++)
        nx_job_take_joiner(j, joiners[i], nc, members + i, base + i, 1, n, members + i);
    free(joiners);
    free(cls);
    free(wr);
}

void nx_grow_submit(struct nx_comm *c, uint32_t r, struct nx_client *cl, uint64_t user_data,
                    uint32_t add)
{
    cl->pending++;
    char text[NX_ERR_TEXT_BYTES];
    if (add == 0 || add > nxd.cfg.max_world_size) {
        snprintf(text, sizeof(text), "nexar_comm_grow: add %u out of range 1..%u", add,
                 nxd.cfg.max_world_size);
        nx_client_finish(cl, user_data, NEXAR_ERR_INVALID, text, 0, 0, 0, false);
        return;
    }
    struct nx_grow *g = find(c);
    if (!g) {
        g = nx_xcalloc(1, sizeof(*g));
        g->c = c;
        g->in = nx_xcalloc(c->size, sizeof(*g->in));
        g->ud = nx_xcalloc(c->size, sizeof(*g->ud));
        g->add = nx_xcalloc(c->size, sizeof(*g->add));
        g->started = nx_now();
        g->deadline = g->started + c->timeout_ms / 1000.0;
        LIST_INSERT_HEAD(&all, g, link);
    }
    if (g->in[r]) {
        nx_client_finish(cl, user_data, NEXAR_ERR_INVALID,
                 "nexar_comm_grow: this rank is already growing this communicator", 0, 0, 0,
                 false);
        return;
    }
    g->in[r] = true;
    g->ud[r] = user_data;
    g->add[r] = add;
    check(g);
}

/* The grown communicator's part at this node (job node me): c's members here (when c is
 * here) and this node's joiners at the positions of table job_node[S..n) that name me, in
 * the order they came.  Returns the part (its callers not completed yet). */
static struct nx_comm *make_part(struct nx_job *j, struct nx_comm *c, struct nx_grow *g,
                                 uint64_t key, uint32_t first_rank, const uint32_t *job_node,
                                 uint32_t n, uint32_t S, uint32_t me, uint32_t timeout_ms)
{
    uint32_t want = 0;
    for (uint32_t p = S; p < n; p++)
        want += job_node[p] == me;
    /* A joiner that left since this node was counted leaves a rank nobody holds: the
     * grown communicator fails at once below, naming it, instead of waiting for it. */
    uint32_t here = want < j->njoiners ? want : j->njoiners;
    uint32_t cap = (c ? c->size : 0) + here, k = 0;
    struct nx_client **cls = nx_xcalloc(cap ? cap : 1, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(cap ? cap : 1, sizeof(*wr));
    uint32_t *span = nx_xcalloc(cap ? cap : 1, sizeof(*span));
    for (uint32_t r = 0; c && r < c->size; r++)
        if (c->ranks[r].client && g->in[r]) {
            cls[k] = c->ranks[r].client;
            wr[k] = c->ranks[r].world_rank;
            span[k++] = nx_comm_span_rank(c, r);
        }
    uint32_t members = k;
    struct nx_client **joiners = nx_xcalloc(here ? here : 1, sizeof(*joiners));
    if (here)
        memcpy(joiners, j->joiners, here * sizeof(*joiners));
    uint32_t *pos = nx_xcalloc(want ? want : 1, sizeof(*pos)), np = 0;
    for (uint32_t p = S; p < n; p++)
        if (job_node[p] == me)
            pos[np++] = p;
    for (uint32_t i = 0; i < here; i++) {
        cls[k] = joiners[i];
        wr[k] = first_rank + pos[i] - S;
        span[k++] = pos[i];
    }
    struct nx_comm *nc = nx_comm_new(j, k, cls, wr, timeout_ms);
    if (c)
        nc->grown_from = c->id;
    nx_comm_span(nc, 0, n, span);
    nx_cluster_ops->grow_attach(nc, key, job_node);
    for (uint32_t i = here; i < want; i++)
        nx_comm_mark_failed(nc, pos[i]);
    if (here < want)
        nx_comm_fail(nc, NEXAR_ERR_PEER_LOST, "%u joiner(s) at this node left before "
                     "communicator %u grew to take them", want - here, nc->id);
    /* The world ranks the other nodes' joiners take, so that every node numbers alike. */
    nx_job_reserve_ranks(j, first_rank + n - S);
    for (uint32_t i = 0; i < here; i++)
        nx_job_take_joiner(j, joiners[i], nc, pos[i], first_rank + pos[i] - S, nc->nodes, k,
                           members + i);
    /* The coordinator's count of the joiners here is smaller now (rdv_join.h). */
    if (here && j->net)
        nx_cluster_ops->joiners_changed(j, j->owner);
    free(pos);
    free(joiners);
    free(cls);
    free(wr);
    free(span);
    return nc;
}

void nx_grow_decide(struct nx_comm *c, uint64_t key, uint32_t first_rank,
                    const uint32_t *job_node, uint32_t n, uint32_t me, uint32_t status,
                    const char *text)
{
    struct nx_grow *g = find(c);
    if (!g) {
        NX_WARN("comm", "communicator %u: the nodes decided a grow this node no longer waits "
                "for", c->id);
        return;
    }
    if (status)
        return fail_all(g, status, text ? text : "nexar_comm_grow failed at another node");
    uint32_t S = nx_comm_span_size(c);
    /* Out of the list before make_part: a joiner dropped while it is handed over must not
     * bring check() back to this grow. */
    LIST_REMOVE(g, link);
    struct nx_comm *nc = make_part(c->job, c, g, key, first_rank, job_node, n, S, me,
                                   c->timeout_ms);
    c->grows++;
    NX_INFO("comm", "communicator %u of job \"%s\" grew to communicator %u: %u ranks across "
            "nodes (%u joiner(s)), agreed in %.3f s", c->id, c->job->name, nc->id, n, n - S,
            nx_now() - g->started);
    nxd.stats.recoveries++;
    for (uint32_t r = 0; r < c->size; r++)
        if (c->ranks[r].client && g->in[r])
            nx_client_finish(c->ranks[r].client, g->ud[r], NEXAR_OK, NULL, nc->id,
                             nx_comm_span_rank(c, r), n, nx_comm_plan(nc));
    grow_release(g);
}

void nx_grow_take_remote(struct nx_job *j, uint64_t key, uint32_t first_rank,
                         const uint32_t *job_node, uint32_t n, uint32_t S, uint32_t me)
{
    struct nx_comm *nc = make_part(j, NULL, NULL, key, first_rank, job_node, n, S, me,
                                   j->timeout_ms);
    NX_INFO("comm", "job \"%s\": joiners here became ranks of communicator %u (%u ranks "
            "across nodes)", j->name, nc->id, n);
}

void nx_grow_comm_failed(struct nx_comm *c)
{
    struct nx_grow *g = find(c);
    if (g)
        fail_all(g, c->failed_status, c->failed_text);
}

void nx_grow_joiner_came(struct nx_job *j)
{
    struct nx_grow *g, *tmp;
    for (g = LIST_FIRST(&all); g; g = tmp) {
        tmp = LIST_NEXT(g, link);
        if (g->c->job == j)
            check(g);
    }
}

void nx_grow_rank_gone(struct nx_comm *c)
{
    struct nx_grow *g = find(c);
    if (g)
        check(g);
}

void nx_grow_forget(struct nx_comm *c)
{
    struct nx_grow *g = find(c);
    if (g)
        grow_free(g);
}

void nx_grow_tick(double now)
{
    struct nx_grow *g, *tmp;
    for (g = LIST_FIRST(&all); g; g = tmp) {
        tmp = LIST_NEXT(g, link);
        if (now < g->deadline)
            continue;
        struct nx_comm *c = g->c;
        uint32_t add = 0;
        char missing[160] = "";
        size_t off = 0;
        for (uint32_t r = 0; r < c->size; r++) {
            if (!c->ranks[r].client)
                continue;
            if (g->in[r])
                add = g->add[r];
            else if (off < sizeof(missing))
                off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u",
                                        off ? ", " : "", nx_comm_span_rank(c, r));
        }
        char text[NX_ERR_TEXT_BYTES];
        if (missing[0])
            snprintf(text, sizeof(text), "nexar_comm_grow on communicator %u (job \"%s\"): "
                     "rank(s) %s did not call it within %.0f s", c->id, c->job->name, missing,
                     c->timeout_ms / 1000.0);
        else
            snprintf(text, sizeof(text), "nexar_comm_grow on communicator %u (job \"%s\"): %u "
                     "of %u joiner(s) came within %.0f s (processes started with "
                     "NEXAR_JOIN=1 and NEXAR_JOB=%s)", c->id, c->job->name,
                     c->job->njoiners, add, c->timeout_ms / 1000.0, c->job->name);
        fail_all(g, NEXAR_ERR_TIMEOUT, text);
    }
    /* Joiners that no grow took in their job's deadline. */
    struct nx_job *j;
    LIST_FOREACH(j, &nx_jobs, link) {
        for (uint32_t i = 0; i < j->njoiners;) {
            struct nx_client *cl = j->joiners[i];
            if (now < cl->join_deadline) {
                i++;
                continue;
            }
            char text[NX_ERR_TEXT_BYTES];
            snprintf(text, sizeof(text), "NEXAR_JOIN=1: no communicator of job \"%s\" grew to "
                     "take this process in time (its members call nexar_comm_grow)",
                     j->name);
            nx_job_refuse_joiner(cl, NEXAR_ERR_TIMEOUT, text); /* removes it from joiners */
        }
    }
}
