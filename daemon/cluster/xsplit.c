/* xsplit.c - see xsplit.h. */
#include "xsplit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "client.h"
#include "cluster.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "op.h"
#include "peer_msg.h"
#include "rendezvous.h"
#include "xcomm.h"

#define NONE UINT32_MAX
/* Splits of one communicator that other nodes may open ahead of ours. */
#define XS_MAX_PER_COMM 16

struct xs_local {
    struct nx_client *cl;
    uint32_t idx; /* the rank's index among the communicator's local ranks */
    uint64_t user_data;
    bool direct;  /* its pending count drops at completion (staged ones already did) */
};

struct xs {
    struct nx_comm *c;
    uint64_t seq;
    uint32_t span;
    uint32_t *color, *key; /* by rank as the communicator numbers them */
    uint8_t *have;
    uint32_t nhave;
    bool local_in;         /* our ranks' part arrived from the matcher */
    struct xs_local *loc;
    uint32_t nloc;
    double deadline;
    LIST_ENTRY(xs) link;
};

static LIST_HEAD(, xs) all = LIST_HEAD_INITIALIZER(all);

static void xs_free(struct xs *x)
{
    LIST_REMOVE(x, link);
    free(x->color);
    free(x->key);
    free(x->have);
    free(x->loc);
    free(x);
}

static struct xs *get(struct nx_comm *c, uint64_t seq, bool always)
{
    struct xs *x;
    unsigned n = 0;
    LIST_FOREACH(x, &all, link) {
        if (x->c != c)
            continue;
        if (x->seq == seq)
            return x;
        n++;
    }
    if (n >= XS_MAX_PER_COMM && !always)
        return NULL;
    x = nx_xcalloc(1, sizeof(*x));
    x->c = c;
    x->seq = seq;
    x->span = nx_comm_span_size(c);
    x->color = nx_xcalloc(x->span, sizeof(*x->color));
    x->key = nx_xcalloc(x->span, sizeof(*x->key));
    x->have = nx_xcalloc(x->span, 1);
    LIST_INSERT_HEAD(&all, x, link);
    return x;
}

struct kv {
    uint32_t color, key, rank;
};

static int cmp_kv(const void *a, const void *b)
{
    const struct kv *x = a, *y = b;
    if (x->color != y->color)
        return x->color < y->color ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static void complete_all(struct xs *x, const struct nx_done *res, char *const *text)
{
    for (uint32_t i = 0; i < x->nloc; i++) {
        struct nx_done d = res[i];
        d.user_data = x->loc[i].user_data;
        nx_client_complete(x->loc[i].cl, &d, text ? text[i] : NULL);
        if (x->loc[i].direct)
            x->loc[i].cl->pending--;
    }
}

/* Every rank's color and key is known: the same groups on every node. */
static void finish(struct xs *x)
{
    struct nx_comm *c = x->c;
    uint32_t S = x->span;
    struct kv *kv = nx_xcalloc(S, sizeof(*kv));
    for (uint32_t r = 0; r < S; r++)
        kv[r] = (struct kv){.color = x->color[r], .key = x->key[r], .rank = r};
    qsort(kv, S, sizeof(*kv), cmp_kv);
    uint32_t *local_of = nx_xmalloc(S * sizeof(*local_of));
    for (uint32_t r = 0; r < S; r++)
        local_of[r] = NONE;
    for (uint32_t i = 0; i < x->nloc; i++)
        local_of[nx_comm_span_rank(c, x->loc[i].idx)] = i;
    struct nx_done *res = nx_xcalloc(x->nloc, sizeof(*res));
    struct nx_client **cls = nx_xcalloc(S, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(S, sizeof(*wr)), *span = nx_xcalloc(S, sizeof(*span));
    uint32_t *job_node = nx_xcalloc(S, sizeof(*job_node));
    for (uint32_t i = 0; i < S;) {
        uint32_t j = i, color = kv[i].color, ours = 0;
        bool all_here = true;
        for (; j < S && kv[j].color == color; j++) {
            bool here = local_of[kv[j].rank] != NONE;
            ours += here;
            all_here &= here;
        }
        if (color == NEXAR_UNDEFINED || ours == 0) {
            i = j;
            continue;
        }
        /* This node's ranks of the group, in the group's rank order. */
        uint32_t g = 0;
        for (uint32_t k = i; k < j; k++) {
            uint32_t li = local_of[kv[k].rank];
            if (li == NONE)
                continue;
            cls[g] = x->loc[li].cl;
            wr[g] = c->ranks[x->loc[li].idx].world_rank;
            span[g++] = k - i;
        }
        struct nx_comm *nc = nx_comm_new(c->job, g, cls, wr, c->timeout_ms);
        nx_comm_set_plan(nc, all_here); /* a group on this node alone runs as one node's */
        if (!all_here) {
            /* A group across nodes: every node makes its part of the same communicator. */
            for (uint32_t k = i; k < j; k++)
                job_node[k - i] = c->x->node_job[c->x->rank_node[kv[k].rank]];
            nx_comm_span(nc, 0, j - i, span);
            nx_xcomm_attach(nc, nx_xcomm_split_key(c->x->key, x->seq, color), job_node);
        }
        for (uint32_t k = i; k < j; k++)
            if (local_of[kv[k].rank] != NONE)
                res[local_of[kv[k].rank]] = (struct nx_done){.res_comm = nc->id,
                                                             .res_rank = k - i,
                                                             .res_size = j - i,
                                                             .res_local = nx_comm_plan(nc)};
        i = j;
    }
    complete_all(x, res, NULL);
    NX_DEBUG("xsplit", "split seq %" PRIu64 " of communicator %u done", x->seq, c->id);
    free(res);
    free(cls);
    free(wr);
    free(span);
    free(job_node);
    free(local_of);
    free(kv);
    xs_free(x);
}

static void maybe_finish(struct xs *x)
{
    if (x->local_in && x->nhave == x->span)
        finish(x);
}

void nx_xsplit_take(struct nx_op *op)
{
    struct nx_comm *c = op->comm;
    struct nx_job *j = c->job;
    struct xs *x = get(c, op->seq, true);
    x->local_in = true;
    x->deadline = nx_now() + c->timeout_ms / 1000.0;
    x->nloc = c->size;
    x->loc = nx_xcalloc(c->size, sizeof(*x->loc));
    uint32_t *ranks = nx_xcalloc(c->size, sizeof(*ranks));
    uint32_t *colors = nx_xcalloc(c->size, sizeof(*colors));
    uint32_t *keys = nx_xcalloc(c->size, sizeof(*keys));
    for (uint32_t i = 0; i < c->size; i++) {
        const struct nx_part *p = &op->parts[i];
        uint32_t r = nx_comm_span_rank(c, i);
        x->loc[i] = (struct xs_local){.cl = p->client, .idx = i, .user_data = p->first.user_data,
                                      .direct = (p->first.flags & NX_SQE_DIRECT) != 0};
        ranks[i] = r;
        colors[i] = x->color[r] = p->first.peer;
        keys[i] = x->key[r] = p->first.tag;
        if (!x->have[r]) {
            x->have[r] = 1;
            x->nhave++;
        }
    }
    Nexar__PeerSplit s = NEXAR__PEER_SPLIT__INIT;
    s.job = j->name;
    s.key = j->net->key;
    s.comm = c->x->key;
    s.seq = op->seq;
    s.node = j->net->node;
    s.ranks = ranks;
    s.n_ranks = c->size;
    s.colors = colors;
    s.n_colors = c->size;
    s.keys = keys;
    s.n_keys = c->size;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_SPLIT;
    m.split = &s;
    nx_xcomm_send_ctl(c, &m);
    free(ranks);
    free(colors);
    free(keys);
    maybe_finish(x);
}

/* A split of a communicator not here yet (this node's ranks have not finished the
 * split that makes it): kept whole until it appears, like xcomm.c's orphans. */
struct early {
    struct early *next;
    uint64_t job, comm;
    char addr[NX_ADDR_MAX];
    double expires;
    size_t len;
    uint8_t *packed;
};
static struct early *early_head;
static unsigned early_count;
#define XS_EARLY_MAX 1024

static void keep_early(struct nx_tpeer *p, const Nexar__PeerSplit *m)
{
    if (early_count >= XS_EARLY_MAX) {
        NX_WARN("xsplit", "%s: more than %d splits of communicators not here; ignored", p->addr,
                XS_EARLY_MAX);
        return;
    }
    Nexar__PeerMsg w = NEXAR__PEER_MSG__INIT;
    w.version = NX_PEER_VERSION;
    w.body_case = NEXAR__PEER_MSG__BODY_SPLIT;
    w.split = (Nexar__PeerSplit *)m;
    struct early *e = nx_xcalloc(1, sizeof(*e));
    e->packed = nx_peer_msg_pack(&w, &e->len);
    e->job = m->key;
    e->comm = m->comm;
    e->expires = nx_now() + NX_XCOMM_ORPHAN_S;
    snprintf(e->addr, sizeof(e->addr), "%s", p->addr);
    struct early **tail = &early_head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = e;
    early_count++;
}

static void early_free(struct early **pp)
{
    struct early *e = *pp;
    *pp = e->next;
    free(e->packed);
    free(e);
    early_count--;
}

void nx_xsplit_comm_attached(struct nx_comm *c)
{
    struct nx_transport *t = nx_cluster_transport();
    struct early **pp = &early_head;
    while (*pp) {
        struct early *e = *pp;
        if (e->job != c->job->net->key || e->comm != c->x->key) {
            pp = &e->next;
            continue;
        }
        char err[160];
        const char *why = NULL;
        struct nx_tpeer *p = t ? t->ops->peer(t, e->addr, err, sizeof(err)) : NULL;
        Nexar__PeerMsg *m = p ? nx_peer_msg_decode(e->packed, e->len, &why) : NULL;
        early_free(pp);
        if (!m)
            continue;
        why = nx_xsplit_on_msg(p, m->split);
        nx_peer_msg_free(m);
        if (why)
            nx_cluster_drop(p, why);
        pp = &early_head; /* the walk may have changed the list */
    }
}

const char *nx_xsplit_on_msg(struct nx_tpeer *p, const Nexar__PeerSplit *m)
{
    struct nx_job *j = nx_job_find(m->job);
    if (!j || !j->net || j->state == NX_JOB_FAILED)
        return NULL; /* a job that ended or failed here */
    if (!j->net->formed) {
        /* The rank table is still on its way: a node that formed first (the coordinator,
         * which forms as it sends the tables) may split before we hear of the job.  Kept
         * until its communicator appears, and checked then. */
        keep_early(p, m);
        return NULL;
    }
    if (j->net->key != m->key)
        return NULL; /* another incarnation of the name */
    const struct nx_jobnet *net = j->net;
    if (!nx_rdv_from_node(net, m->node, p))
        return "split: the sender is not that node of the job";
    struct nx_comm *c = nx_xcomm_find(net->key, m->comm);
    if (!c) {
        if (j->state != NX_JOB_FAILED)
            keep_early(p, m);
        return NULL;
    }
    if (c->failed_status)
        return NULL;
    const struct nx_xcomm *xc = c->x;
    uint32_t cn = UINT32_MAX, S = nx_comm_span_size(c);
    for (uint32_t i = 0; i < xc->nnodes; i++)
        if (xc->node_job[i] == m->node && i != xc->me)
            cn = i;
    if (cn == UINT32_MAX)
        return "split: the sender is not a node of the communicator";
    size_t on_node = 0;
    for (uint32_t r = 0; r < S; r++)
        on_node += xc->rank_node[r] == cn;
    if (m->n_ranks != on_node)
        return "split: not every rank of the sender's node";
    for (size_t i = 0; i < m->n_ranks; i++)
        if (m->ranks[i] >= S || xc->rank_node[m->ranks[i]] != cn)
            return "split: a rank that is not on the sender's node";
    struct xs *x = get(c, m->seq, false);
    if (!x) {
        NX_WARN("xsplit", "%s: more than %d splits of communicator %u pending; ignored",
                p->addr, XS_MAX_PER_COMM, c->id);
        return NULL;
    }
    for (size_t i = 0; i < m->n_ranks; i++)
        if (x->have[m->ranks[i]])
            return "split: a rank's color sent twice";
    for (size_t i = 0; i < m->n_ranks; i++) {
        uint32_t r = m->ranks[i];
        x->color[r] = m->colors[i];
        x->key[r] = m->keys[i];
        x->have[r] = 1;
        x->nhave++;
    }
    maybe_finish(x);
    return NULL;
}

void nx_xsplit_fail(struct nx_comm *c)
{
    struct xs *x, *tmp;
    for (x = LIST_FIRST(&all); x; x = tmp) {
        tmp = LIST_NEXT(x, link);
        if (x->c != c)
            continue;
        if (x->local_in) {
            struct nx_done *res = nx_xcalloc(x->nloc, sizeof(*res));
            char **text = nx_xcalloc(x->nloc, sizeof(*text));
            for (uint32_t i = 0; i < x->nloc; i++) {
                res[i].status = c->failed_status;
                text[i] = c->failed_text;
            }
            complete_all(x, res, text);
            free(res);
            free(text);
        }
        xs_free(x);
    }
}

void nx_xsplit_comm_gone(struct nx_comm *c)
{
    struct xs *x, *tmp;
    for (x = LIST_FIRST(&all); x; x = tmp) {
        tmp = LIST_NEXT(x, link);
        if (x->c == c)
            xs_free(x);
    }
}

bool nx_xsplit_pending(const struct nx_comm *c)
{
    struct xs *x;
    LIST_FOREACH(x, &all, link)
        if (x->c == c && x->local_in)
            return true;
    return false;
}

void nx_xsplit_tick(double now)
{
    for (struct early **pp = &early_head; *pp;) {
        if ((*pp)->expires <= now)
            early_free(pp);
        else
            pp = &(*pp)->next;
    }
    struct xs *x, *tmp;
    for (x = LIST_FIRST(&all); x; x = tmp) {
        tmp = LIST_NEXT(x, link);
        if (!x->local_in || now < x->deadline)
            continue;
        struct nx_comm *c = x->c;
        const struct nx_jobnet *net = c->job->net;
        /* The nodes that never sent their part. */
        char nodes[256] = "";
        size_t off = 0;
        uint8_t *named = nx_xcalloc(net->nnodes, 1);
        for (uint32_t r = 0; r < x->span && off < sizeof(nodes) - 8; r++) {
            uint32_t n = c->x->node_job[c->x->rank_node[r]];
            if (x->have[r] || named[n])
                continue;
            named[n] = 1;
            off += (size_t)snprintf(nodes + off, sizeof(nodes) - off, "%s%s", off ? ", " : "",
                                    net->nodes[n]);
        }
        free(named);
        nxd.stats.timeouts++;
        nx_comm_fail(c, NEXAR_ERR_TIMEOUT,
                     "comm_split seq %" PRIu64 " on communicator %u (job \"%s\") timed out after "
                     "%.0f s: node(s) %s never sent their ranks' colors",
                     x->seq, c->id, c->job->name, c->timeout_ms / 1000.0, nodes);
        /* Failing freed every record of c: start over. */
        tmp = LIST_FIRST(&all);
    }
}

void nx_xsplit_fini(void)
{
    while (early_head)
        early_free(&early_head);
    while (!LIST_EMPTY(&all))
        xs_free(LIST_FIRST(&all));
}
