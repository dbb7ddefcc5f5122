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
#include "context.h"
#include "grow.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "rendezvous.h"
#include "xcomm.h"

#define XG_KEEP_S 30.0

struct xg {
    uint64_t job_key, comm_key;
    uint32_t round;
    uint32_t nnodes;   /* job nodes */
    uint8_t *ready;    /* by job node */
    uint32_t *add, *joiners;
    uint32_t nranks;   /* the most world ranks any node knows */
    bool local_ready;
    double expires;
    LIST_ENTRY(xg) link;
};

static LIST_HEAD(, xg) all = LIST_HEAD_INITIALIZER(all);
static uint64_t decisions;

static struct xg *get(uint64_t job_key, uint64_t comm_key, uint32_t round, uint32_t nnodes,
                      bool create)
{
    struct xg *x;
    LIST_FOREACH(x, &all, link)
        if (x->job_key == job_key && x->comm_key == comm_key && x->round == round)
            return x;
    if (!create)
        return NULL;
    x = nx_xcalloc(1, sizeof(*x));
    x->job_key = job_key;
    x->comm_key = comm_key;
    x->round = round;
    x->nnodes = nnodes;
    x->ready = nx_xcalloc(nnodes, 1);
    x->add = nx_xcalloc(nnodes, sizeof(*x->add));
    x->joiners = nx_xcalloc(nnodes, sizeof(*x->joiners));
    x->expires = nx_now() + XG_KEEP_S;
    LIST_INSERT_HEAD(&all, x, link);
    return x;
}

static void xg_free(struct xg *x)
{
    LIST_REMOVE(x, link);
    free(x->ready);
    free(x->add);
    free(x->joiners);
    free(x);
}

static void fill(Nexar__PeerGrow *g, const struct nx_comm *c, const struct xg *x)
{
    g->job = c->job->name;
    g->key = c->job->net->key;
    g->comm = c->x->key;
    g->node = c->job->net->node;
    g->round = x->round;
}

static void send_all(struct nx_comm *c, Nexar__PeerGrow *g)
{
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_GROW;
    m.grow = g;
    nx_xcomm_send_ctl(c, &m);
}

static uint64_t mix64(uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdull;
    v ^= v >> 33;
    v *= 0xc4ceb9fe1a85ec53ull;
    v ^= v >> 33;
    return v;
}

/* Comm node 0 decides once every node is ready and enough joiners wait. */
static void try_decide(struct xg *x)
{
    struct nx_comm *c = nx_xcomm_find(x->job_key, x->comm_key);
    if (!c || !x->local_ready || c->x->me != 0 || c->grows != x->round)
        return;
    uint32_t nn = c->x->nnodes, add = 0, avail = 0;
    for (uint32_t cn = 0; cn < nn; cn++) {
        uint32_t jn = c->x->node_job[cn];
        if (!x->ready[jn])
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
    if (avail < add)
        return; /* more joiners may come: each node says so again */
    uint32_t *take = nx_xcalloc(nn, sizeof(*take)), left = add;
    for (uint32_t cn = 0; cn < nn && left; cn++) {
        uint32_t have = x->joiners[c->x->node_job[cn]];
        take[cn] = have < left ? have : left;
        left -= take[cn];
    }
    uint64_t key = mix64(x->comm_key ^ mix64(0x67726f77ull + x->round));
    key = mix64(key ^ mix64(((uint64_t)c->job->net->node << 32) ^ ++decisions));
    if (key <= NX_XCOMM_WORLD)
        key += 2;
    g.new_key = key;
    g.first_rank = x->nranks;
    g.take = take;
    g.n_take = nn;
    send_all(c, &g);
    uint32_t base = x->nranks;
    xg_free(x);
    NX_DEBUG("xgrow", "communicator %u: decided, %u joiner(s), new key %016" PRIx64, c->id,
             add, key);
    nx_grow_decide(c, key, base, take, nn, c->x->me, 0, NULL);
    free(take);
}

void nx_xgrow_ready(struct nx_comm *c, uint32_t add)
{
    struct nx_job *j = c->job;
    struct xg *x = get(j->net->key, c->x->key, c->grows, j->net->nnodes, true);
    x->local_ready = true;
    x->expires = nx_now() + c->timeout_ms / 1000.0 + XG_KEEP_S;
    uint32_t me = j->net->node;
    x->ready[me] = 1;
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

void nx_xgrow_attach(struct nx_comm *nc, struct nx_comm *c, const uint32_t *take,
                     uint32_t ntake, uint64_t key)
{
    uint32_t S = nx_comm_span_size(c), n = S;
    for (uint32_t cn = 0; cn < ntake; cn++)
        n += take[cn];
    uint32_t *job_node = nx_xcalloc(n, sizeof(*job_node)), k = S;
    for (uint32_t r = 0; r < S; r++)
        job_node[r] = c->x->node_job[c->x->rank_node[r]];
    for (uint32_t cn = 0; cn < ntake; cn++)
        for (uint32_t i = 0; i < take[cn]; i++)
            job_node[k++] = c->x->node_job[cn];
    nx_xcomm_attach(nc, key, job_node);
    free(job_node);
}

void nx_xgrow_comm_gone(struct nx_comm *c)
{
    if (!c->x || !c->job || !c->job->net)
        return;
    struct xg *x, *tmp;
    for (x = LIST_FIRST(&all); x; x = tmp) {
        tmp = LIST_NEXT(x, link);
        if (x->job_key == c->job->net->key && x->comm_key == c->x->key)
            xg_free(x);
    }
}

const char *nx_xgrow_on_msg(struct nx_tpeer *p, const Nexar__PeerGrow *m)
{
    struct nx_job *j = nx_job_find(m->job);
    if (!j || !j->net || !j->net->formed || j->net->key != m->key)
        return NULL;
    const struct nx_jobnet *net = j->net;
    if (m->node >= net->nnodes || m->node == net->node || strcmp(net->nodes[m->node], p->addr))
        return "grow: the sender is not that node of the job";
    struct nx_comm *c = nx_xcomm_find(net->key, m->comm);
    if (c && m->round < c->grows)
        return NULL;
    if (!m->decide) {
        struct xg *x = get(net->key, m->comm, m->round, net->nnodes, true);
        x->ready[m->node] = 1;
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
    if (!c)
        return NULL;
    if (m->status == 0 && m->n_take != c->x->nnodes)
        return "grow: a decision that does not name every node of the communicator";
    nx_grow_decide(c, m->new_key, m->first_rank, m->take, m->n_take, c->x->me, m->status,
                   m->error);
    return NULL;
}

void nx_xgrow_tick(double now)
{
    struct xg *x, *tmp;
    for (x = LIST_FIRST(&all); x; x = tmp) {
        tmp = LIST_NEXT(x, link);
        if (now > x->expires)
            xg_free(x);
    }
}

void nx_xgrow_fini(void)
{
    while (!LIST_EMPTY(&all))
        xg_free(LIST_FIRST(&all));
}
