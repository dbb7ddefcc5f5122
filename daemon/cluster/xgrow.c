/* xgrow.c - see xgrow.h. */
#include "xgrow.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "cluster.h"
#include "comm.h"
#include "grow.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "rendezvous.h"
#include "xagree.h"
#include "xcomm.h"

struct xg {
    struct nx_xagree a;      /* first: the part every agreement has */
    uint32_t *add, *joiners; /* by job node */
    uint32_t nranks;         /* the most world ranks any node knows */
};

static void xg_init(struct nx_xagree *a)
{
    struct xg *x = (struct xg *)a;
    x->add = nx_xcalloc(a->nnodes, sizeof(*x->add));
    x->joiners = nx_xcalloc(a->nnodes, sizeof(*x->joiners));
}

static void xg_fini(struct nx_xagree *a)
{
    struct xg *x = (struct xg *)a;
    free(x->add);
    free(x->joiners);
}

static struct nx_xagree_table grows = {
    .all = LIST_HEAD_INITIALIZER(grows.all), .size = sizeof(struct xg), .init = xg_init,
    .fini = xg_fini};
static uint64_t decisions;

static struct xg *get(uint64_t job_key, uint64_t comm_key, uint32_t round, uint32_t nnodes,
                      bool create)
{
    return (struct xg *)nx_xagree_get(&grows, job_key, comm_key, round, nnodes, create);
}

static void xg_free(struct xg *x)
{
    nx_xagree_free(&grows, &x->a);
}

static void fill(Nexar__PeerGrow *g, const struct nx_comm *c, const struct xg *x)
{
    g->job = c->job->name;
    g->key = c->job->net->key;
    g->comm = c->x->key;
    g->node = c->job->net->node;
    g->round = x->a.round;
}

static void send_all(struct nx_comm *c, Nexar__PeerGrow *g)
{
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_GROW;
    m.grow = g;
    nx_xcomm_send_ctl(c, &m);
}

static bool is_comm_node(const struct nx_comm *c, uint32_t jn)
{
    for (uint32_t cn = 0; cn < c->x->nnodes; cn++)
        if (c->x->node_job[cn] == jn)
            return true;
    return false;
}

/* Comm node 0 decides once every node is ready and enough joiners wait. */
static void try_decide(struct xg *x)
{
    struct nx_comm *c = nx_xcomm_find(x->a.job_key, x->a.comm_key);
    if (!c || !x->a.local_ready || c->x->me != 0 || c->grows != x->a.round)
        return;
    uint32_t nn = c->x->nnodes, add = 0, avail = 0;
    for (uint32_t cn = 0; cn < nn; cn++) {
        uint32_t jn = c->x->node_job[cn];
        if (!x->a.ready[jn])
            return;
        avail += x->joiners[jn];
    }
    Nexar__PeerGrow g = NEXAR__PEER_GROW__INIT;
    fill(&g, c, x);
    g.decide = true;
    char text[NX_PEER_MAX_TEXT];
    add = x->add[c->x->node_job[0]];
    for (uint32_t cn = 1; cn < nn; cn++) {
        uint32_t jn = c->x->node_job[cn];
        if (x->add[jn] == add)
            continue;
        snprintf(text, sizeof(text), "nexar_comm_grow on communicator %u (job \"%s\"): the "
                 "ranks at node %s asked to add %u but those at node %s asked to add %u",
                 c->id, c->job->name, c->job->net->nodes[c->x->node_job[0]], add,
                 c->job->net->nodes[jn], x->add[jn]);
        g.status = NEXAR_ERR_MISMATCH;
        g.error = text;
        send_all(c, &g);
        xg_free(x);
        nx_grow_decide(c, 0, 0, NULL, 0, 0, NEXAR_ERR_MISMATCH, text);
        return;
    }
    /* Then the joiners of the job's other nodes (replacements) that the coordinator told
     * us of. */
    struct nx_jobnet *net = c->job->net;
    for (uint32_t jn = 0; jn < net->nnodes; jn++)
        if (!is_comm_node(c, jn) && net->joiners_at)
            avail += net->joiners_at[jn];
    if (avail < add)
        return; /* more joiners may come: each node says so again */
    uint32_t S = nx_comm_span_size(c), n = S + add, k = S, left = add;
    uint32_t *job_node = nx_xcalloc(n, sizeof(*job_node));
    for (uint32_t r = 0; r < S; r++)
        job_node[r] = c->x->node_job[c->x->rank_node[r]];
    for (uint32_t cn = 0; cn < nn && left; cn++)
        for (uint32_t i = 0; i < x->joiners[c->x->node_job[cn]] && left; i++, left--)
            job_node[k++] = c->x->node_job[cn];
    for (uint32_t jn = 0; jn < net->nnodes && left; jn++) {
        if (is_comm_node(c, jn) || !net->joiners_at)
            continue;
        uint32_t t = 0;
        for (; t < net->joiners_at[jn] && left; t++, left--)
            job_node[k++] = jn;
        net->joiners_at[jn] -= t; /* taken: until that node says otherwise */
    }
    uint64_t key = nx_xcomm_mix64(x->a.comm_key ^ nx_xcomm_mix64(0x67726f77ull + x->a.round));
    key = nx_xcomm_mix64(key ^ nx_xcomm_mix64(((uint64_t)net->node << 32) ^ ++decisions));
    if (key <= NX_XCOMM_WORLD)
        key += 2;
    g.new_key = key;
    g.first_rank = x->nranks;
    g.job_node = job_node;
    g.n_job_node = n;
    g.members = S;
    send_all(c, &g);
    /* Replacement nodes with joiners taken hear it too: they have no part of c. */
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_GROW;
    m.grow = &g;
    for (uint32_t jn = 0; jn < net->nnodes; jn++) {
        bool gives = false;
        for (uint32_t p = S; p < n && !gives; p++)
            gives = job_node[p] == jn;
        if (gives && !is_comm_node(c, jn))
            nx_cluster_send_addr(net->nodes[jn], &m);
    }
    uint32_t first = x->nranks;
    xg_free(x);
    NX_DEBUG("xgrow", "communicator %u: decided, %u joiner(s), new key %016" PRIx64, c->id,
             add, key);
    nx_grow_decide(c, key, first, job_node, n, net->node, 0, NULL);
    free(job_node);
}

void nx_xgrow_ready(struct nx_comm *c, uint32_t add)
{
    struct nx_job *j = c->job;
    struct xg *x = get(j->net->key, c->x->key, c->grows, j->net->nnodes, true);
    nx_xagree_local_ready(&x->a, c);
    uint32_t me = j->net->node;
    x->a.ready[me] = 1;
    x->add[me] = add;
    x->joiners[me] = j->njoiners;
    if (j->nranks > x->nranks)
        x->nranks = j->nranks;
    Nexar__PeerGrow g = NEXAR__PEER_GROW__INIT;
    fill(&g, c, x);
    g.add = add;
    g.joiners = j->njoiners;
    g.nranks = j->nranks;
    send_all(c, &g);
    try_decide(x);
}

void nx_xgrow_attach(struct nx_comm *nc, uint64_t key, const uint32_t *job_node)
{
    nx_xcomm_attach(nc, key, job_node);
}

static void decide_agreement(struct nx_xagree *a)
{
    try_decide((struct xg *)a);
}

void nx_xgrow_joiners_noted(struct nx_job *j)
{
    if (j->net)
        nx_xagree_each_of_job(&grows, j->net->key, decide_agreement);
}

void nx_xgrow_comm_gone(struct nx_comm *c)
{
    nx_xagree_comm_gone(&grows, c);
}

const char *nx_xgrow_on_msg(struct nx_tpeer *p, const Nexar__PeerGrow *m)
{
    struct nx_job *j = nx_job_find(m->job);
    if (!j || !j->net || !j->net->formed || j->net->key != m->key)
        return NULL;
    const struct nx_jobnet *net = j->net;
    if (!nx_rdv_from_node(net, m->node, p))
        return "grow: the sender is not that node of the job";
    struct nx_comm *c = nx_xcomm_find(net->key, m->comm);
    if (c && m->round < c->grows)
        return NULL;
    if (!m->decide) {
        struct xg *x = get(net->key, m->comm, m->round, net->nnodes, true);
        if (m->node >= x->a.nnodes)
            return NULL; /* a node added since this grow began: not one of its nodes */
        x->a.ready[m->node] = 1;
        x->add[m->node] = m->add;
        x->joiners[m->node] = m->joiners;
        if (m->nranks > x->nranks)
            x->nranks = m->nranks;
        try_decide(x);
        return NULL;
    }
    struct xg *x = get(net->key, m->comm, m->round, net->nnodes, false);
    if (x)
        xg_free(x);
    for (size_t i = 0; i < m->n_job_node; i++)
        if (m->job_node[i] >= net->nnodes)
            return "grow: a decision naming a node the job does not have";
    if (!c) {
        /* A node with joiners and no rank of the communicator: a replacement. */
        bool mine = false;
        for (size_t i = m->members; i < m->n_job_node && !mine; i++)
            mine = m->job_node[i] == net->node;
        if (mine && m->status == 0)
            nx_grow_take_remote(j, m->new_key, m->first_rank, m->job_node,
                                (uint32_t)m->n_job_node, m->members, net->node);
        return NULL;
    }
    if (m->status == 0 && m->members != nx_comm_span_size(c))
        return "grow: a decision for a communicator of another size";
    nx_grow_decide(c, m->new_key, m->first_rank, m->job_node, (uint32_t)m->n_job_node,
                   net->node, m->status, m->error);
    return NULL;
}

void nx_xgrow_tick(double now)
{
    nx_xagree_tick(&grows, now);
}

void nx_xgrow_fini(void)
{
    nx_xagree_fini(&grows);
}
