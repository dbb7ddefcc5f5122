/* xcomm.c - see xcomm.h. */
#include "xcomm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "rendezvous.h"
#include "transport_lanes.h"
#include "xcoll.h"
#include "xp2p.h"
#include "xshrink.h"
#include "xsplit.h"

/* A message for a communicator not (yet) here, kept whole. */
struct orphan {
    struct orphan *next;
    uint64_t job, comm, channel;
    char addr[NX_TADDR_MAX];
    double expires;
    size_t len;
    uint8_t data[];
};

static struct {
    struct orphan *head;
    uint64_t bytes;
    bool warned;
} orph;

/* The abort of a communicator not (yet) here: another node failed it before this node's
 * ranks finished the split that makes it, or before the job's rank table came.  Applied
 * when it appears, so that its ranks fail at once instead of waiting for a deadline. */
#define NX_XCOMM_EARLY_ABORTS 64
static struct early_abort {
    uint64_t job, comm;
    bool left;     /* a rank left: only collectives from seq on fail */
    uint64_t seq;
    uint32_t status;
    double expires; /* 0: a free slot */
    char reason[NX_PEER_MAX_TEXT + 1];
} early_aborts[NX_XCOMM_EARLY_ABORTS];

/* A reason from another node as this node's ranks get it: which node saw it comes first,
 * since its words ("its ranks here", "waiting for node 1") are that node's view. */
static void reported(char *buf, size_t len, const char *from, const char *reason)
{
    snprintf(buf, len, "node %s reported: %s", from, reason);
}

void nx_xcomm_keep_abort(uint64_t job_key, uint64_t key, bool left, uint64_t seq,
                         uint32_t status, const char *from, const char *reason)
{
    struct early_abort *slot = &early_aborts[0];
    for (int i = 0; i < NX_XCOMM_EARLY_ABORTS; i++) {
        struct early_abort *a = &early_aborts[i];
        if (a->expires && a->job == job_key && a->comm == key)
            return; /* the first reason stands, as in nx_comm_fail */
        if (a->expires < slot->expires)
            slot = a;
    }
    *slot = (struct early_abort){.job = job_key, .comm = key, .left = left, .seq = seq,
                                 .status = status, .expires = nx_now() + NX_XCOMM_ORPHAN_S};
    reported(slot->reason, sizeof(slot->reason), from, reason);
}

/* c just appeared here: an abort that came first fails it now. */
static void apply_early_abort(struct nx_comm *c, uint64_t job_key)
{
    double now = nx_now();
    for (int i = 0; i < NX_XCOMM_EARLY_ABORTS; i++) {
        struct early_abort *a = &early_aborts[i];
        if (!a->expires || a->expires < now || a->job != job_key || a->comm != c->x->key)
            continue;
        a->expires = 0;
        c->x->remote_fail = true;
        if (a->left)
            nx_comm_close_from(c, a->seq, a->status, a->reason);
        else
            nx_comm_fail(c, a->status, "%s", a->reason);
        return;
    }
}

uint64_t nx_xcomm_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t nx_xcomm_split_key(uint64_t parent, uint64_t seq, uint32_t color)
{
    uint64_t k = nx_xcomm_mix64(nx_xcomm_mix64(nx_xcomm_mix64(parent) ^ seq) ^ color);
    return k > NX_XCOMM_WORLD ? k : k + 2; /* 0 is nothing, 1 the world */
}

_Static_assert(NX_XCOLL_CHANNELS <= NX_LANES_MAX &&
                   (NX_XCOLL_CHANNELS & (NX_XCOLL_CHANNELS - 1)) == 0,
               "collective channels: a power of 2 within one block of lanes");

/* The communicator's hashed channel: its collective channels are the aligned block of
 * NX_XCOLL_CHANNELS around it, and its point-to-point channels derive from it whole (as
 * they did when it was the only collective channel). */
static uint64_t coll_hash(uint64_t job_key, uint64_t key)
{
    return NX_CHAN_COLL(nx_xcomm_mix64(job_key ^ nx_xcomm_mix64(key)));
}

uint64_t nx_xcomm_coll_channel(const struct nx_comm *c, uint64_t i)
{
    return c->x->chan0 + i % NX_XCOLL_CHANNELS;
}

struct nx_comm *nx_xcomm_find(uint64_t job_key, uint64_t comm_key)
{
    struct nx_comm *c;
    LIST_FOREACH(c, &nx_comms, link)
        if (c->x && c->x->key == comm_key && c->job && c->job->net &&
            c->job->net->key == job_key)
            return c;
    return NULL;
}

static void replay(struct orphan *o)
{
    struct nx_transport *t = nx_cluster_transport();
    char err[160];
    struct nx_tpeer *p = t ? t->ops->peer(t, o->addr, err, sizeof(err)) : NULL;
    struct nx_wire_msg w;
    const char *why = NULL;
    if (!p || nx_wire_decode(o->data, o->len, &w, &why) < 0)
        return;
    if (w.type == NX_WIRE_DATA)
        why = nx_xcoll_on_data(p, o->channel, &w, o->data, o->len);
    else
        why = nx_xp2p_on_msg(p, o->channel, &w, o->data, o->len);
    if (why)
        nx_cluster_drop(p, why);
}

void nx_xcomm_attach(struct nx_comm *c, uint64_t key, const uint32_t *job_node)
{
    const struct nx_jobnet *net = c->job->net;
    uint32_t S = nx_comm_span_size(c);
    struct nx_xcomm *x = nx_xcalloc(1, sizeof(*x));
    x->key = key;
    x->p2p_seed = coll_hash(net->key, key);
    /* From a multiple of the lanes' block: part k on lane k mod K, part 0 (all a small op
     * has) on lane 0, the loop thread's (transport_lanes.h). */
    x->chan0 = x->p2p_seed & ~(uint64_t)(NX_LANES_MAX - 1);
    TAILQ_INIT(&x->held);
    TAILQ_INIT(&x->sends);
    /* The comm's nodes: the job nodes that host its ranks, in job order. */
    uint32_t *comm_node_of_job = nx_xmalloc(net->nnodes * sizeof(uint32_t));
    for (uint32_t i = 0; i < net->nnodes; i++)
        comm_node_of_job[i] = UINT32_MAX;
    for (uint32_t r = 0; r < S; r++)
        comm_node_of_job[job_node[r]] = 0;
    x->node_job = nx_xcalloc(net->nnodes, sizeof(uint32_t));
    for (uint32_t i = 0; i < net->nnodes; i++) {
        if (comm_node_of_job[i] == UINT32_MAX)
            continue;
        if (i == net->node)
            x->me = x->nnodes;
        comm_node_of_job[i] = x->nnodes;
        x->node_job[x->nnodes++] = i;
    }
    x->rank_node = nx_xcalloc(S, sizeof(uint32_t));
    for (uint32_t r = 0; r < S; r++)
        x->rank_node[r] = comm_node_of_job[job_node[r]];
    free(comm_node_of_job);
    c->x = x;
    c->nodes = x->nnodes;

    /* What came early for it, in arrival order. */
    struct orphan **pp = &orph.head, *mine = NULL, **tail = &mine;
    while (*pp) {
        struct orphan *o = *pp;
        if (o->job == net->key && o->comm == key) {
            *pp = o->next;
            orph.bytes -= o->len;
            o->next = NULL;
            *tail = o;
            tail = &o->next;
        } else {
            pp = &o->next;
        }
    }
    while (mine) {
        struct orphan *o = mine;
        mine = o->next;
        replay(o);
        free(o);
    }
    nx_xsplit_comm_attached(c);
    apply_early_abort(c, net->key);
}

void nx_xcomm_detach(struct nx_comm *c)
{
    if (!c->x)
        return;
    nx_xcoll_comm_gone(c);
    free(c->x->node_job);
    free(c->x->rank_node);
    free(c->x);
    c->x = NULL;
}

static void keep_orphan(struct nx_tpeer *p, uint64_t channel, uint64_t job, uint64_t comm,
                        const void *raw, size_t len)
{
    if (orph.bytes + len > NX_XCOMM_ORPHAN_BYTES) {
        if (!orph.warned)
            NX_WARN("xcomm", "%s: more than %llu MiB of messages for communicators not "
                    "(yet) at this node; dropping such messages", p->addr,
                    (unsigned long long)(NX_XCOMM_ORPHAN_BYTES >> 20));
        orph.warned = true;
        return;
    }
    struct orphan *o = nx_xmalloc(sizeof(*o) + len);
    *o = (struct orphan){.job = job, .comm = comm, .channel = channel,
                         .expires = nx_now() + NX_XCOMM_ORPHAN_S, .len = len};
    snprintf(o->addr, sizeof(o->addr), "%s", p->addr);
    memcpy(o->data, raw, len);
    struct orphan **tail = &orph.head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = o;
    orph.bytes += len;
}

static uint32_t job_node_of(const struct nx_jobnet *net, const char *addr)
{
    for (uint32_t i = 0; i < net->nnodes; i++)
        if (!strcmp(net->nodes[i], addr))
            return i;
    return UINT32_MAX;
}

static uint32_t comm_node_of(const struct nx_xcomm *x, uint32_t job_node)
{
    for (uint32_t i = 0; i < x->nnodes; i++)
        if (x->node_job[i] == job_node)
            return i;
    return UINT32_MAX;
}

int nx_xcomm_route(struct nx_tpeer *p, uint64_t channel, const struct nx_wire_msg *w,
                   const void *raw, size_t rawlen, struct nx_comm **cp, uint32_t *node,
                   const char **why)
{
    bool p2p = w->type == NX_WIRE_P2P;
    uint64_t job_key = p2p ? w->p2p.job : w->hdr.job;
    uint64_t comm_key = p2p ? w->p2p.comm : w->hdr.comm;
    struct nx_job *j = nx_rdv_job_by_key(job_key);
    struct nx_comm *c = j ? nx_xcomm_find(job_key, comm_key) : NULL;
    if (!c) {
        /* A job that failed here keeps its key: its messages are stale, not early. */
        if (raw && (!j || j->state != NX_JOB_FAILED))
            keep_orphan(p, channel, job_key, comm_key, raw, rawlen);
        return 0;
    }
    const struct nx_xcomm *x = c->x;
    uint32_t from = job_node_of(j->net, p->addr), cn;
    if (from == UINT32_MAX) {
        *why = "data for a job whose rank table does not name the sender";
        return -1;
    }
    if (p2p) {
        uint32_t S = nx_comm_span_size(c);
        if (w->p2p.src >= S || w->p2p.dst >= S) {
            *why = "p2p message names a rank outside its communicator";
            return -1;
        }
        /* Data travels from the src rank's node, its acknowledgement back from dst's. */
        bool ack = (w->flags & NX_WIRE_F_ACK) != 0;
        uint32_t remote = ack ? w->p2p.dst : w->p2p.src, local = ack ? w->p2p.src : w->p2p.dst;
        cn = x->rank_node[remote];
        if (x->node_job[cn] != from) {
            *why = "p2p message about a rank that is not on the sending node";
            return -1;
        }
        if (x->rank_node[local] != x->me) {
            *why = "p2p message about a rank that is not on this node";
            return -1;
        }
        if (channel != nx_xcomm_p2p_channel(c, w->p2p.tag)) {
            *why = "p2p message outside its channel";
            return -1;
        }
    } else {
        if (w->hdr.src != from) {
            *why = "data whose header names another node than its sender";
            return -1;
        }
        cn = comm_node_of(x, from);
        if (cn == UINT32_MAX || cn == x->me) {
            *why = "data from a node that is not in its communicator";
            return -1;
        }
        if (channel - x->chan0 >= NX_XCOLL_CHANNELS) {
            *why = "collective data outside its communicator's channels";
            return -1;
        }
    }
    if (c->failed_status)
        return 0;
    *cp = c;
    *node = cn;
    return 1;
}

uint64_t nx_xcomm_p2p_channel(const struct nx_comm *c, uint32_t tag)
{
    /* Lane 0 (low bits 0): a message is as fast as its latency allows, and a large one
     * goes on one channel, hence one lane, anyway. */
    return NX_CHAN_P2P(nx_xcomm_mix64(c->x->p2p_seed ^ nx_xcomm_mix64(tag))) &
           ~(uint64_t)(NX_LANES_MAX - 1);
}

static int xsend(struct nx_comm *c, uint32_t node, uint64_t channel, const struct iovec *iov,
                 int iovcnt, uint64_t token, bool lend)
{
    struct nx_transport *t = nx_cluster_transport();
    const char *addr = c->job->net->nodes[c->x->node_job[node]];
    char err[160];
    if (!t)
        return -ESHUTDOWN; /* the daemon is stopping: its transport is gone */
    struct nx_tpeer *p = t->ops->peer(t, addr, err, sizeof(err));
    if (!p)
        return -EHOSTUNREACH;
    if (lend && t->ops->lend)
        return t->ops->lend(p, channel, iov, iovcnt, token);
    return t->ops->send(p, channel, iov, iovcnt, token);
}

int nx_xcomm_send(struct nx_comm *c, uint32_t node, uint64_t channel, const struct iovec *iov,
                  int iovcnt, uint64_t token)
{
    return xsend(c, node, channel, iov, iovcnt, token, false);
}

int nx_xcomm_lend(struct nx_comm *c, uint32_t node, uint64_t channel, const struct iovec *iov,
                  int iovcnt, uint64_t token)
{
    return xsend(c, node, channel, iov, iovcnt, token, true);
}

/* Whether every rank of c at comm node cn is known failed (its daemon lost, or its ranks
 * dead): nothing is sent there, so that a lost node is not dialled again. */
static bool node_failed(const struct nx_comm *c, uint32_t cn)
{
    if (c->nfailed == 0)
        return false;
    for (uint32_t r = 0, i = 0; r < nx_comm_span_size(c); r++) {
        if (c->x->rank_node[r] != cn)
            continue;
        while (i < c->nfailed && c->failed[i] < r)
            i++;
        if (i == c->nfailed || c->failed[i] != r)
            return false;
    }
    return true;
}

void nx_xcomm_send_ctl(struct nx_comm *c, Nexar__PeerMsg *m)
{
    for (uint32_t i = 0; i < c->x->nnodes; i++)
        if (i != c->x->me && !node_failed(c, i))
            nx_cluster_send_addr(c->job->net->nodes[c->x->node_job[i]], m);
}

void nx_xcomm_node_where(const struct nx_comm *c, uint32_t node, char *buf, size_t len)
{
    char ranks[128];
    nx_rdv_fmt_ranks(c->x->rank_node, nx_comm_span_size(c), node, ranks, sizeof(ranks));
    snprintf(buf, len, "%s, rank%s %s", c->job->net->nodes[c->x->node_job[node]],
             strpbrk(ranks, ",-") ? "s" : "", ranks);
}

void nx_xcomm_node_name(const struct nx_comm *c, uint32_t node, char *buf, size_t len)
{
    char where[256];
    nx_xcomm_node_where(c, node, where, sizeof(where));
    snprintf(buf, len, "node %u (%s)", node, where);
}

bool nx_xcomm_rank_node(const struct nx_comm *c, uint32_t rank, char *buf, size_t len)
{
    if (!c->x || rank >= nx_comm_span_size(c) || c->x->rank_node[rank] == c->x->me)
        return false;
    nx_xcomm_node_name(c, c->x->rank_node[rank], buf, len);
    return true;
}

void nx_xcomm_failed(struct nx_comm *c)
{
    struct nx_job *j = c->job;
    if (!c->x || c->x->remote_fail || !j || j->state == NX_JOB_FAILED)
        return;
    Nexar__PeerAbort a = NEXAR__PEER_ABORT__INIT;
    a.job = j->name;
    a.key = j->net->key;
    a.status = c->failed_status;
    a.reason = c->failed_text;
    a.comm = c->x->key;
    a.failed_ranks = c->failed;
    a.n_failed_ranks = c->nfailed;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_ABORT;
    m.abort = &a;
    nx_xcomm_send_ctl(c, &m);
}

void nx_xcomm_remote_abort(struct nx_job *j, const Nexar__PeerAbort *a, const char *from)
{
    struct nx_comm *c = nx_xcomm_find(j->net->key, a->comm);
    if (!c) {
        nx_xcomm_keep_abort(j->net->key, a->comm, a->left, a->seq, a->status, from,
                            a->reason);
        return;
    }
    /* What failed is news even for a communicator that failed already: a shrink in
     * progress must leave those ranks out. */
    size_t before = c->nfailed;
    for (size_t i = 0; i < a->n_failed_ranks; i++)
        if (a->failed_ranks[i] < nx_comm_span_size(c))
            nx_comm_mark_failed(c, a->failed_ranks[i]);
    if (c->nfailed != before)
        nx_xshrink_failed_grew(c);
    bool left = a->left;
    uint64_t seq = a->seq;
    uint32_t status = a->status;
    char reason[NX_PEER_MAX_TEXT + 64];
    reported(reason, sizeof(reason), from, a->reason);
    if (c->failed_status)
        return;
    c->x->remote_fail = true;
    if (left)
        nx_comm_close_from(c, seq, status, reason);
    else
        nx_comm_fail(c, status, "%s", reason);
}

void nx_xcomm_node_lost(struct nx_job *j, uint32_t job_node, const char *msg)
{
    struct nx_comm *c;
    LIST_FOREACH(c, &nx_comms, link) {
        if (c->job != j || !c->x)
            continue;
        uint32_t cn = comm_node_of(c->x, job_node);
        if (cn == UINT32_MAX)
            continue;
        size_t before = c->nfailed;
        for (uint32_t r = 0; r < nx_comm_span_size(c); r++)
            if (c->x->rank_node[r] == cn)
                nx_comm_mark_failed(c, r);
        /* Told to the other nodes (with the failed ranks): they may not have noticed yet. */
        nx_comm_fail(c, NEXAR_ERR_PEER_LOST, "%s", msg);
        if (c->nfailed != before)
            nx_xshrink_failed_grew(c);
    }
}

void nx_xcomm_left(struct nx_comm *c, uint32_t rank, uint64_t seq, const char *who)
{
    struct nx_job *j = c->job;
    if (!c->x || !j || j->state == NX_JOB_FAILED)
        return;
    char reason[512];
    snprintf(reason, sizeof(reason),
             "%s at node %s freed the communicator (its rank %u) after %llu collective(s) "
             "on it: collective seq %llu and later can never complete",
             who, nx_cluster_addr(), nx_comm_span_rank(c, rank), (unsigned long long)seq,
             (unsigned long long)seq);
    Nexar__PeerAbort a = NEXAR__PEER_ABORT__INIT;
    a.job = j->name;
    a.key = j->net->key;
    a.status = NEXAR_ERR_PEER_LOST;
    a.reason = reason;
    a.comm = c->x->key;
    a.left = true;
    a.seq = seq;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_ABORT;
    m.abort = &a;
    nx_xcomm_send_ctl(c, &m);
}


void nx_xcomm_tick(double now)
{
    struct orphan **pp = &orph.head;
    while (*pp) {
        struct orphan *o = *pp;
        if (o->expires > now) {
            pp = &o->next;
            continue;
        }
        NX_DEBUG("xcomm", "dropping a message from %s for communicator %llx of job key %llx "
                 "that never appeared here", o->addr, (unsigned long long)o->comm,
                 (unsigned long long)o->job);
        *pp = o->next;
        orph.bytes -= o->len;
        free(o);
    }
    if (!orph.head)
        orph.warned = false;
}

void nx_xcomm_fini(void)
{
    while (orph.head) {
        struct orphan *o = orph.head;
        orph.head = o->next;
        free(o);
    }
    orph.bytes = 0;
    memset(early_aborts, 0, sizeof(early_aborts));
}
