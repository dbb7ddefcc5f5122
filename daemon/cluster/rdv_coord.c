/*
 * rdv_coord.c - the coordinator side of rendezvous.h: registrations of the jobs this
 * daemon coordinates, until each one forms (rank table out), times out or loses a node.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "cluster.h"
#include "config.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "rdv_int.h"
#include "rendezvous.h"

#define NONE UINT32_MAX
/* Forming jobs one coordinator tracks, and their ranks in all: each costs 12 bytes per
 * rank of its world (node, pid, uid), and a peer must not make us hold gigabytes. */
#define NX_RDV_MAX 256
#define NX_RDV_MAX_RANKS (1u << 22)

struct rnode {
    char addr[NX_ADDR_MAX]; /* what the rank table says (the advertised address) */
    char via[NX_ADDR_MAX];  /* the peer it registered through; "" for this daemon */
    uint64_t key;           /* its member key */
    uint32_t nranks;        /* 0: withdrawn (the entry may be reused) */
};

struct rdv {
    char *name;
    uint32_t world;
    uid_t owner;
    uint32_t timeout_ms;   /* smallest the ranks asked for; 0: none asked */
    char *algo;            /* the ranks' NEXAR_ALGO (all the same) */
    double created, deadline;
    uint32_t registered;
    uint32_t *rank_node;   /* index into nodes, NONE: not registered */
    uint32_t *rank_pid;    /* as its node registered it (0: unknown), for the table */
    uint32_t *rank_uid;
    struct rnode *nodes;
    size_t nnodes, cap;
    LIST_ENTRY(rdv) link;
};

static LIST_HEAD(, rdv) rdvs = LIST_HEAD_INITIALIZER(rdvs);
static unsigned nrdv;
static uint64_t nranks_held;

static struct rdv *find(const char *name)
{
    struct rdv *r;
    LIST_FOREACH(r, &rdvs, link)
        if (!strcmp(r->name, name))
            return r;
    return NULL;
}

static void rdv_free(struct rdv *r)
{
    LIST_REMOVE(r, link);
    nrdv--;
    nranks_held -= r->world;
    free(r->name);
    free(r->algo);
    free(r->rank_node);
    free(r->rank_pid);
    free(r->rank_uid);
    free(r->nodes);
    free(r);
}

static void send_msg(const struct rnode *n, Nexar__PeerMsg *m)
{
    nx_cluster_send_addr(n->via, m);
}

static void refuse(struct nx_tpeer *from, const Nexar__PeerRegister *g, const uint32_t *ranks,
                   size_t n, uint32_t status, const char *msg)
{
    Nexar__PeerRegisterReply rep = NEXAR__PEER_REGISTER_REPLY__INIT;
    rep.job = g->job;
    rep.key = g->key;
    rep.ranks = (uint32_t *)ranks;
    rep.n_ranks = n;
    rep.status = status;
    rep.error = (char *)msg;
    NX_INFO("rdv", "refusing %zu rank(s) of job \"%s\" from %s: %s", n, g->job,
            from ? from->addr : "this daemon", msg);
    if (!from)
        return nx_rdv_member_refused(NULL, &rep);
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_REGISTER_REPLY;
    m.register_reply = &rep;
    nx_cluster_send(from, NX_CHAN_CTL, &m);
}

/* Fails the forming job at every registered node but skip, and forgets it. */
static void rdv_fail(struct rdv *r, uint32_t status, const char *reason, const struct rnode *skip)
{
    NX_WARN("rdv", "%s", reason);
    char *name = nx_xstrdup(r->name);
    Nexar__PeerAbort a = NEXAR__PEER_ABORT__INIT;
    a.job = name;
    a.status = status;
    a.reason = (char *)reason;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_ABORT;
    m.abort = &a;
    /* Copied first: a local abort can call back into this module (a withdraw). */
    size_t nn = r->nnodes;
    struct rnode *nodes = nx_xcalloc(nn, sizeof(*nodes));
    memcpy(nodes, r->nodes, nn * sizeof(*nodes));
    rdv_free(r);
    for (size_t i = 0; i < nn; i++) {
        if (!nodes[i].nranks || (skip && !strcmp(nodes[i].addr, skip->addr)))
            continue;
        a.key = nodes[i].key;
        if (nodes[i].via[0])
            send_msg(&nodes[i], &m);
        else
            nx_rdv_member_abort(NULL, &a);
    }
    free(nodes);
    free(name);
}

static void publish(struct rdv *r)
{
    uint64_t job_key = nx_rdv_new_key();
    /* Copied, and r freed before delivering: our own node's part forms synchronously and
     * may call back into this module. */
    size_t nn = r->nnodes;
    uint32_t world = r->world, timeout_ms = r->timeout_ms;
    /* The ranks' choices, else this coordinator's setting: one answer for every node. */
    char *algo = nx_xstrdup(r->algo[0] ? r->algo : nxd.cfg.algo ? nxd.cfg.algo : "");
    struct rnode *nodes = nx_xcalloc(nn, sizeof(*nodes));
    memcpy(nodes, r->nodes, nn * sizeof(*nodes));
    uint32_t *map = nx_xmalloc(nn * sizeof(*map));
    char **addrs = nx_xcalloc(nn, sizeof(*addrs));
    /* Job order: the nodes by their lowest rank, not by which registered first, so that
     * every order derived from it (a grow's joiner ranks, a shrink's leader) follows the
     * ranks and not a race between the nodes.  UINT32_MAX: a node not placed yet. */
    memset(map, 0xff, nn * sizeof(*map));
    uint32_t n = 0;
    for (uint32_t k = 0; k < world; k++) {
        uint32_t i = r->rank_node[k];
        if (map[i] == UINT32_MAX) {
            map[i] = n;
            addrs[n++] = nodes[i].addr;
        }
    }
    uint32_t *rn = nx_xcalloc(world, sizeof(*rn));
    for (uint32_t k = 0; k < world; k++)
        rn[k] = map[r->rank_node[k]];
    /* Taken over before r goes: nexarctl jobs on every node names the others' ranks. */
    uint32_t *pids = r->rank_pid, *uids = r->rank_uid;
    r->rank_pid = r->rank_uid = NULL;
    char *name = nx_xstrdup(r->name);
    NX_INFO("rdv", "job \"%s\" formed: %u ranks on %u node(s); rank tables go out", name,
            world, n);
    rdv_free(r);

    Nexar__PeerRankTable t = NEXAR__PEER_RANK_TABLE__INIT;
    t.job = name;
    t.job_key = job_key;
    t.nodes = addrs;
    t.n_nodes = n;
    t.rank_node = rn;
    t.n_rank_node = world;
    t.timeout_ms = timeout_ms;
    t.slot_bytes = nxd.cfg.slot_bytes;
    t.algo = algo;
    t.rank_pid = pids;
    t.n_rank_pid = world;
    t.rank_uid = uids;
    t.n_rank_uid = world;
    /* The other members' tables go out before this node forms its own part: its ranks
     * may start at once, and what they send a member travels behind the table. */
    for (int self = 0; self < 2; self++) {
        for (size_t i = 0; i < nn; i++) {
            bool local = !nodes[i].via[0];
            if (!nodes[i].nranks || local != (self == 1))
                continue;
            t.key = nodes[i].key;
            t.node = map[i];
            if (self) {
                nx_rdv_member_table(NULL, &t);
            } else {
                Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
                m.body_case = NEXAR__PEER_MSG__BODY_RANK_TABLE;
                m.rank_table = &t;
                send_msg(&nodes[i], &m);
            }
        }
    }
    free(name);
    free(algo);
    free(nodes);
    free(rn);
    free(pids);
    free(uids);
    free(addrs);
    free(map);
}

/* The registering node's entry; NULL with why when its address is taken. */
static struct rnode *node_get(struct rdv *r, const char *addr, const char *via, uint64_t key,
                              char *why, size_t len)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        struct rnode *n = &r->nodes[i];
        if (strcmp(n->addr, addr))
            continue;
        if (n->nranks && (n->key != key || strcmp(n->via, via))) {
            snprintf(why, len, "node %s already registered ranks of job \"%s\" (through %s, "
                     "another nexard instance?)", addr, r->name, n->via[0] ? n->via : "itself");
            return NULL;
        }
        n->key = key;
        snprintf(n->via, sizeof(n->via), "%s", via);
        return n;
    }
    if (r->nnodes >= NX_PEER_MAX_NODES) {
        snprintf(why, len, "job \"%s\" already spans %u nodes", r->name, NX_PEER_MAX_NODES);
        return NULL;
    }
    nx_grow((void **)&r->nodes, &r->cap, r->nnodes + 1, sizeof(*r->nodes));
    struct rnode *n = &r->nodes[r->nnodes++];
    memset(n, 0, sizeof(*n));
    snprintf(n->addr, sizeof(n->addr), "%s", addr);
    snprintf(n->via, sizeof(n->via), "%s", via);
    n->key = key;
    return n;
}

static struct rdv *rdv_new(const Nexar__PeerRegister *g)
{
    struct rdv *r = nx_xcalloc(1, sizeof(*r));
    r->name = nx_xstrdup(g->job);
    r->world = g->world_size;
    r->owner = (uid_t)g->uid;
    r->created = nx_now();
    /* A member bounds its ranks' deadline by its own max_timeout_s; ours bounds it here. */
    uint32_t tmo = g->timeout_ms < nxd.cfg.max_timeout_s * 1000u ? g->timeout_ms
                                                                  : nxd.cfg.max_timeout_s * 1000u;
    r->deadline = r->created + nx_rdv_formation_ms(tmo) / 1000.0;
    r->timeout_ms = tmo;
    r->algo = nx_xstrdup(g->algo);
    r->rank_node = nx_xmalloc(r->world * sizeof(*r->rank_node));
    for (uint32_t k = 0; k < r->world; k++)
        r->rank_node[k] = NONE;
    r->rank_pid = nx_xcalloc(r->world, sizeof(*r->rank_pid));
    r->rank_uid = nx_xcalloc(r->world, sizeof(*r->rank_uid));
    LIST_INSERT_HEAD(&rdvs, r, link);
    nrdv++;
    nranks_held += r->world;
    NX_DEBUG("rdv", "coordinating job \"%s\" (%u ranks, formation within %.0f s)", r->name,
             r->world, r->deadline - r->created);
    return r;
}

static void withdraw(struct rdv *r, const char *addr, const Nexar__PeerRegister *g)
{
    for (size_t i = 0; i < r->nnodes; i++) {
        struct rnode *n = &r->nodes[i];
        if (strcmp(n->addr, addr) || n->key != g->key)
            continue;
        for (size_t k = 0; k < g->n_ranks; k++) {
            /* peer_msg.c bounds the ranks by the message's world size, not the job's. */
            if (g->ranks[k] >= r->world || r->rank_node[g->ranks[k]] != i)
                continue;
            r->rank_node[g->ranks[k]] = NONE;
            r->rank_pid[g->ranks[k]] = 0;
            r->registered--;
            n->nranks--;
        }
        NX_DEBUG("rdv", "job \"%s\": node %s withdrew %zu rank(s); %u of %u registered", r->name,
                 addr, g->n_ranks, r->registered, r->world);
    }
    if (r->registered == 0)
        rdv_free(r);
}

void nx_rdvc_register(struct nx_tpeer *from, const Nexar__PeerRegister *g)
{
    char addr[NX_ADDR_MAX], why[512];
    const char *via = from ? from->addr : "";
    char err[128];
    /* The advertised address names the node in the table; a wildcard one says nothing,
     * and then the address its packets come from does. */
    if (!from) {
        /* Our own ranks.  Bound to a wildcard without advertise, we are known by the
         * address the ranks named us with (NEXAR_COORD), which the others dial too. */
        const struct nx_job *j = nx_job_find(g->job);
        bool named = nx_addr_is_wildcard(nx_cluster_addr()) && j && j->net;
        snprintf(addr, sizeof(addr), "%s", named ? j->coord : nx_cluster_addr());
    }
    else if (nx_addr_numeric(g->addr, addr, sizeof(addr), err, sizeof(err)) < 0 ||
             nx_addr_is_wildcard(addr))
        snprintf(addr, sizeof(addr), "%s", from->addr);
    struct rdv *r = find(g->job);
    if (g->withdraw) {
        if (r)
            withdraw(r, addr, g);
        return;
    }
    if (!r) {
        if (nrdv >= NX_RDV_MAX || nranks_held + g->world_size > NX_RDV_MAX_RANKS) {
            snprintf(why, sizeof(why), "coordinator %s is forming %u jobs of %llu ranks "
                     "already; try later", nx_cluster_addr(), nrdv,
                     (unsigned long long)nranks_held);
            return refuse(from, g, g->ranks, g->n_ranks, NEXAR_ERR_UNAVAILABLE, why);
        }
        r = rdv_new(g);
    }
    if (g->world_size != r->world) {
        char ranks[64];
        snprintf(ranks, sizeof(ranks), "%u%s", g->ranks[0], g->n_ranks > 1 ? " and more" : "");
        snprintf(why, sizeof(why), "rank %s at node %s says job \"%s\" has %u ranks, but it "
                 "was created with %u", ranks, addr, r->name, g->world_size, r->world);
        return refuse(from, g, g->ranks, g->n_ranks, NEXAR_ERR_MISMATCH, why);
    }
    /* Every node cuts an op into the same parts: the staging slots must agree. */
    if (g->slot_bytes != nxd.cfg.slot_bytes) {
        snprintf(why, sizeof(why), "node %s has slot_bytes = %llu but the coordinator %s of "
                 "job \"%s\" has %llu; every node of a job needs the same", addr,
                 (unsigned long long)g->slot_bytes, nx_cluster_addr(), r->name,
                 (unsigned long long)nxd.cfg.slot_bytes);
        return refuse(from, g, g->ranks, g->n_ranks, NEXAR_ERR_MISMATCH, why);
    }
    if (strcmp(g->algo, r->algo)) {
        snprintf(why, sizeof(why), "rank %u at node %s of job \"%s\" has NEXAR_ALGO=\"%s\", "
                 "but the job's first ranks have \"%s\"", g->ranks[0], addr, r->name, g->algo,
                 r->algo);
        return refuse(from, g, g->ranks, g->n_ranks, NEXAR_ERR_MISMATCH, why);
    }
    if (!nx_config_uid_allowed(&nxd.cfg, r->owner, (uid_t)g->uid)) {
        snprintf(why, sizeof(why), "job \"%s\" belongs to uid %u; uid %u (at node %s) may not "
                 "join it (only the owner's ranks join a job, or uids that share the "
                 "coordinator's allow_uids group with it): choose another NEXAR_JOB", r->name,
                 (unsigned)r->owner, g->uid, addr);
        return refuse(from, g, g->ranks, g->n_ranks, NEXAR_ERR_PERMISSION, why);
    }
    struct rnode *n = node_get(r, addr, via, g->key, why, sizeof(why));
    if (!n)
        return refuse(from, g, g->ranks, g->n_ranks, NEXAR_ERR_INVALID, why);
    uint32_t idx = (uint32_t)(n - r->nodes);
    uint32_t *dup = nx_xcalloc(g->n_ranks, sizeof(*dup));
    size_t ndup = 0;
    for (size_t k = 0; k < g->n_ranks; k++) {
        uint32_t rank = g->ranks[k];
        if (r->rank_node[rank] != NONE) {
            dup[ndup++] = rank;
            continue;
        }
        r->rank_node[rank] = idx;
        r->rank_pid[rank] = k < g->n_pids ? g->pids[k] : 0;
        r->rank_uid[rank] = g->uid;
        r->registered++;
        n->nranks++;
    }
    if (ndup) {
        uint32_t other = r->rank_node[dup[0]];
        snprintf(why, sizeof(why), "rank %u%s of job \"%s\" is already registered at node %s",
                 dup[0], ndup > 1 ? " and more" : "", r->name, r->nodes[other].addr);
        refuse(from, g, dup, ndup, NEXAR_ERR_INVALID, why);
    }
    free(dup);
    if (g->timeout_ms && g->timeout_ms <= nxd.cfg.max_timeout_s * 1000u &&
        (!r->timeout_ms || g->timeout_ms < r->timeout_ms)) {
        r->timeout_ms = g->timeout_ms;
        double dl = r->created + g->timeout_ms / 1000.0;
        if (dl < r->deadline)
            r->deadline = dl;
    }
    NX_DEBUG("rdv", "job \"%s\": %u of %u ranks registered (%zu from %s)", r->name,
             r->registered, r->world, g->n_ranks - ndup, addr);
    if (r->registered == r->world)
        publish(r);
}

bool nx_rdvc_abort(struct nx_tpeer *from, const Nexar__PeerAbort *a)
{
    struct rdv *r = find(a->job);
    if (!r)
        return false;
    for (size_t i = 0; i < r->nnodes; i++) {
        struct rnode *n = &r->nodes[i];
        if (n->nranks && n->key == a->key && !strcmp(n->via, from ? from->addr : "")) {
            struct rnode skip = *n;
            rdv_fail(r, a->status, a->reason, &skip);
            return true;
        }
    }
    return false;
}

void nx_rdvc_peer_lost(const char *addr, const char *reason)
{
    struct rdv *r, *tmp;
    char msg[768], ranks[256];
    for (r = LIST_FIRST(&rdvs); r; r = tmp) {
        tmp = LIST_NEXT(r, link);
        for (size_t i = 0; i < r->nnodes; i++) {
            struct rnode *n = &r->nodes[i];
            if (!n->nranks || !n->via[0] || (strcmp(n->via, addr) && strcmp(n->addr, addr)))
                continue;
            nx_rdv_fmt_ranks(r->rank_node, r->world, (uint32_t)i, ranks, sizeof(ranks));
            snprintf(msg, sizeof(msg), "node %s (rank(s) %s) was lost while job \"%s\" was "
                     "forming: %s", n->addr, ranks, r->name, reason);
            struct rnode skip = *n;
            rdv_fail(r, NEXAR_ERR_PEER_LOST, msg, &skip);
            /* Failing may have withdrawn ranks of other jobs: start over. */
            tmp = LIST_FIRST(&rdvs);
            break;
        }
    }
}

void nx_rdvc_tick(double now)
{
    struct rdv *r, *tmp;
    for (r = LIST_FIRST(&rdvs); r; r = tmp) {
        tmp = LIST_NEXT(r, link);
        if (now < r->deadline)
            continue;
        char missing[256], present[256], msg[768];
        nx_rdv_fmt_ranks(r->rank_node, r->world, NONE, missing, sizeof(missing));
        /* "registered": every rank whose node is known. */
        uint32_t *reg = nx_xcalloc(r->world, sizeof(*reg));
        for (uint32_t k = 0; k < r->world; k++)
            reg[k] = r->rank_node[k] == NONE ? 0 : 1;
        nx_rdv_fmt_ranks(reg, r->world, 1, present, sizeof(present));
        free(reg);
        size_t nodes = 0;
        for (size_t i = 0; i < r->nnodes; i++)
            nodes += r->nodes[i].nranks > 0;
        snprintf(msg, sizeof(msg), "job \"%s\" did not form within %.0f s: rank(s) %s of %u "
                 "never registered with coordinator %s (registered: %s, on %zu node(s))",
                 r->name, r->deadline - r->created, missing, r->world, nx_cluster_addr(),
                 present, nodes);
        nxd.stats.timeouts++;
        rdv_fail(r, NEXAR_ERR_TIMEOUT, msg, NULL);
        tmp = LIST_FIRST(&rdvs);
    }
}

void nx_rdvc_fini(void)
{
    while (!LIST_EMPTY(&rdvs))
        rdv_free(LIST_FIRST(&rdvs));
}
