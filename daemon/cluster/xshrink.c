/* xshrink.c - see xshrink.h. */
#include "xshrink.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "cluster.h"
#include "comm.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "rendezvous.h"
#include "shrink.h"
#include "xagree.h"
#include "xcomm.h"

struct xsh {
    struct nx_xagree a; /* first: the part every agreement has */
    uint32_t *failed;   /* the union of what every node said, ascending */
    uint32_t nfailed;
};

static void xsh_fini(struct nx_xagree *a)
{
    free(((struct xsh *)a)->failed);
}

static struct nx_xagree_table shrinks = {
    .all = LIST_HEAD_INITIALIZER(shrinks.all), .size = sizeof(struct xsh), .fini = xsh_fini};
static uint64_t decisions; /* makes this daemon's keys differ from one decision to the next */

static struct xsh *get(uint64_t job_key, uint64_t comm_key, uint32_t round, uint32_t nnodes,
                       bool create)
{
    return (struct xsh *)nx_xagree_get(&shrinks, job_key, comm_key, round, nnodes, create);
}

static void xsh_free(struct xsh *x)
{
    nx_xagree_free(&shrinks, &x->a);
}

static bool in_set(const uint32_t *v, size_t n, uint32_t r)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] == r)
            return true;
        if (v[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static void add_failed(struct xsh *x, uint32_t r)
{
    nx_u32_set_add(&x->failed, &x->nfailed, r);
}

/* The agreement's failed set and c's, both ways: each knows all from now on. */
static void merge(struct xsh *x, struct nx_comm *c)
{
    for (uint32_t i = 0; i < c->nfailed; i++)
        add_failed(x, c->failed[i]);
    for (size_t i = 0; i < x->nfailed; i++)
        if (x->failed[i] < nx_comm_span_size(c))
            nx_comm_mark_failed(c, x->failed[i]);
}

/* Which comm nodes still have a rank not known failed. */
static void live_nodes(const struct nx_comm *c, const struct xsh *x, bool *live)
{
    for (uint32_t cn = 0; cn < c->x->nnodes; cn++)
        live[cn] = false;
    for (uint32_t r = 0; r < nx_comm_span_size(c); r++)
        if (!in_set(x->failed, x->nfailed, r))
            live[c->x->rank_node[r]] = true;
}

static void send_to(struct nx_comm *c, uint32_t cn, Nexar__PeerMsg *m)
{
    const struct nx_jobnet *net = c->job->net;
    nx_cluster_send_addr(net->nodes[c->x->node_job[cn]], m);
}

static void fill(Nexar__PeerShrink *s, struct nx_comm *c, const struct xsh *x)
{
    s->job = c->job->name;
    s->key = c->job->net->key;
    s->comm = c->x->key;
    s->node = c->job->net->node;
    s->round = x->a.round;
    s->failed_ranks = x->failed;
    s->n_failed_ranks = x->nfailed;
}

static void send_ready(struct nx_comm *c, struct xsh *x)
{
    Nexar__PeerShrink s = NEXAR__PEER_SHRINK__INIT;
    fill(&s, c, x);
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_SHRINK;
    m.shrink = &s;
    bool *live = nx_xcalloc(c->x->nnodes, sizeof(*live));
    live_nodes(c, x, live);
    for (uint32_t cn = 0; cn < c->x->nnodes; cn++)
        if (cn != c->x->me && live[cn])
            send_to(c, cn, &m);
    free(live);
}

/* The leader decides once every node with a survivor is ready. */
static void try_decide(struct xsh *x)
{
    struct nx_comm *c = nx_xcomm_find(x->a.job_key, x->a.comm_key);
    if (!c || !x->a.local_ready || c->shrinks != x->a.round)
        return;
    merge(x, c);
    uint32_t nn = c->x->nnodes;
    bool *live = nx_xcalloc(nn, sizeof(*live));
    live_nodes(c, x, live);
    uint32_t leader = 0;
    while (leader < nn && !live[leader])
        leader++;
    bool go = leader == c->x->me;
    for (uint32_t cn = 0; go && cn < nn; cn++)
        go = !live[cn] || cn == c->x->me || x->a.ready[c->x->node_job[cn]];
    if (!go) {
        free(live);
        return;
    }
    uint64_t key = x->a.comm_key;
    for (size_t i = 0; i < x->nfailed; i++)
        key = nx_xcomm_mix64(key ^ (x->failed[i] + 1));
    uint64_t who = (uint64_t)c->job->net->node << 32;
    key = nx_xcomm_mix64(key ^ nx_xcomm_mix64(who ^ ++decisions));
    if (key <= NX_XCOMM_WORLD)
        key += 2;
    Nexar__PeerShrink s = NEXAR__PEER_SHRINK__INIT;
    fill(&s, c, x);
    s.decide = true;
    s.new_key = key;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_SHRINK;
    m.shrink = &s;
    for (uint32_t cn = 0; cn < nn; cn++)
        if (cn != c->x->me && live[cn])
            send_to(c, cn, &m);
    free(live);
    NX_DEBUG("xshrink", "communicator %u: decided, %u rank(s) failed, new key %016" PRIx64,
             c->id, x->nfailed, key);
    uint32_t *failed = x->failed;
    size_t nfailed = x->nfailed;
    x->failed = NULL;
    xsh_free(x);
    nx_shrink_decide(c, failed, nfailed, key);
    free(failed);
}

void nx_xshrink_ready(struct nx_comm *c)
{
    struct xsh *x = get(c->job->net->key, c->x->key, c->shrinks, c->job->net->nnodes, true);
    nx_xagree_local_ready(&x->a, c);
    merge(x, c);
    send_ready(c, x);
    try_decide(x);
}

void nx_xshrink_failed_grew(struct nx_comm *c)
{
    if (!c->x || !c->job || !c->job->net)
        return;
    struct xsh *x = get(c->job->net->key, c->x->key, c->shrinks, 0, false);
    if (!x || !x->a.local_ready)
        return;
    merge(x, c);
    send_ready(c, x);
    try_decide(x);
}

void nx_xshrink_attach(struct nx_comm *nc, struct nx_comm *c, const uint32_t *survivors,
                       uint32_t n, uint64_t key)
{
    uint32_t *job_node = nx_xcalloc(n, sizeof(*job_node));
    for (uint32_t k = 0; k < n; k++)
        job_node[k] = c->x->node_job[c->x->rank_node[survivors[k]]];
    nx_xcomm_attach(nc, key, job_node);
    free(job_node);
}

void nx_xshrink_comm_gone(struct nx_comm *c)
{
    nx_xagree_comm_gone(&shrinks, c);
}

const char *nx_xshrink_on_msg(struct nx_tpeer *p, const Nexar__PeerShrink *m)
{
    struct nx_job *j = nx_job_find(m->job);
    if (!j || !j->net || !j->net->formed || j->net->key != m->key)
        return NULL; /* a job that ended here, or another incarnation of the name */
    const struct nx_jobnet *net = j->net;
    if (!nx_rdv_from_node(net, m->node, p))
        return "shrink: the sender is not that node of the job";
    struct nx_comm *c = nx_xcomm_find(net->key, m->comm);
    if (c && m->round < c->shrinks)
        return NULL; /* an earlier round's, late */
    struct xsh *x = get(net->key, m->comm, m->round, net->nnodes, true);
    if (!m->decide) {
        if (m->node >= x->a.nnodes)
            return NULL; /* a node added since this shrink began: not one of its nodes */
        for (size_t i = 0; i < m->n_failed_ranks; i++)
            add_failed(x, m->failed_ranks[i]);
        x->a.ready[m->node] = 1;
        if (c) {
            size_t before = c->nfailed;
            merge(x, c);
            /* What the sender knew and we did not: our ranks may be waiting for it. */
            if (c->nfailed != before && x->a.local_ready)
                send_ready(c, x);
        }
        try_decide(x);
        return NULL;
    }
    xsh_free(x);
    if (!c)
        return NULL; /* none of our ranks is in it any more */
    /* Exactly the leader's set, which every node applies alike: a rank we learned of
     * since is caught by the shrunk communicator itself (nx_shrink_decide). */
    NX_DEBUG("xshrink", "communicator %u: %s decided, %zu rank(s) failed", c->id, p->addr,
             m->n_failed_ranks);
    nx_shrink_decide(c, m->failed_ranks, m->n_failed_ranks, m->new_key);
    return NULL;
}

void nx_xshrink_tick(double now)
{
    nx_xagree_tick(&shrinks, now);
}

void nx_xshrink_fini(void)
{
    nx_xagree_fini(&shrinks);
}
