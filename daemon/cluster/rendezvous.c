/* rendezvous.c - the member side of rendezvous.h: this daemon's part of multi-node jobs. */
#include "rendezvous.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "algo.h"
#include "client.h"
#include "cluster.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "rdv_int.h"
#include "xcomm.h"
#include "rdv_join.h"
#include "xgrow.h"
#include "xshrink.h"
#include "xsplit.h"

/* Aborts that named a job key before the table announcing that key arrived here (the
 * table and the abort travel on different connections). */
#define NX_TOMB_MAX 64
#define NX_TOMB_TTL_S 120.0

struct tomb {
    char job[NX_PEER_MAX_JOB + 1];
    uint64_t key;
    uint32_t status;
    char reason[NX_PEER_MAX_TEXT + 1];
    double expires;
};

static struct tomb tombs[NX_TOMB_MAX];

uint64_t nx_rdv_new_key(void)
{
    uint64_t k = 0;
    while (k == 0) {
        if (getrandom(&k, sizeof(k), 0) != (ssize_t)sizeof(k))
            k = (uint64_t)(nx_now() * 1e9) ^ ((uint64_t)getpid() << 32);
    }
    return k;
}

void nx_rdv_fmt_ranks(const uint32_t *v, size_t n, uint32_t want, char *buf, size_t len)
{
    size_t off = 0;
    unsigned shown = 0, more = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (v[i] != want)
            continue;
        size_t k = i;
        while (k + 1 < n && v[k + 1] == want)
            k++;
        if (shown < 30 && off < len) {
            if (k == i)
                off += (size_t)snprintf(buf + off, len - off, "%s%zu", shown ? ", " : "", i);
            else
                off += (size_t)snprintf(buf + off, len - off, "%s%zu-%zu", shown ? ", " : "",
                                        i, k);
            shown++;
        } else {
            more += (unsigned)(k - i + 1);
        }
        i = k;
    }
    if (more && off < len)
        snprintf(buf + off, len - off, " and %u more", more);
    if (!shown)
        snprintf(buf, len, "none");
}

/* torchrun's MASTER_ADDR with the port this daemon listens at. */
static uint32_t guess_coord(const char *coord, char *canon, size_t canonlen)
{
    char host[NX_ADDR_MAX], with_port[NX_ADDR_MAX + 8], err[160];
    if (nx_addr_split(coord, true, host, sizeof(host), NULL) < 0)
        return 0;
    bool v6 = strchr(host, ':') != NULL;
    snprintf(with_port, sizeof(with_port), v6 ? "[%s]:%u" : "%s:%u", host,
             nx_addr_port(nx_cluster_addr()));
    if (nx_addr_numeric(with_port, canon, canonlen, err, sizeof(err)) < 0)
        canon[0] = '\0';
    return 0;
}

uint32_t nx_rdv_check_coord(const char *coord, bool guessed, char *canon, size_t canonlen,
                            char *msg, size_t msglen)
{
    canon[0] = '\0';
    if (!coord || !*coord || (guessed && !nx_cluster_enabled()))
        return 0;
    if (guessed)
        return guess_coord(coord, canon, canonlen);
    if (!nx_cluster_enabled()) {
        snprintf(msg, msglen,
                 "nexard at %s has no network (set listen=...); NEXAR_COORD=%s asks for a job "
                 "across nodes", nxd.cfg.socket_path, coord);
        return NEXAR_ERR_UNAVAILABLE;
    }
    char err[160];
    if (nx_addr_numeric(coord, canon, canonlen, err, sizeof(err)) < 0) {
        snprintf(msg, msglen, "NEXAR_COORD: %s", err);
        canon[0] = '\0';
        return NEXAR_ERR_INVALID;
    }
    if (nx_addr_port(canon) == 0 || nx_addr_is_wildcard(canon)) {
        snprintf(msg, msglen, "NEXAR_COORD=%s does not name one daemon (port 0 or a wildcard "
                 "address)", coord);
        canon[0] = '\0';
        return NEXAR_ERR_INVALID;
    }
    return 0;
}

uint32_t nx_rdv_formation_ms(uint32_t timeout_ms)
{
    return timeout_ms ? timeout_ms : nxd.cfg.formation_timeout_s * 1000u;
}

void nx_rdv_job_init(struct nx_job *j)
{
    struct nx_jobnet *n = nx_xcalloc(1, sizeof(*n));
    n->is_coord = nx_cluster_is_self(j->coord);
    n->key = nx_rdv_new_key();
    j->net = n;
}

void nx_rdv_job_fini(struct nx_job *j)
{
    if (!j->net)
        return;
    free(j->net->nodes);
    free(j->net->rank_node);
    free(j->net->rank_pid);
    free(j->net->rank_uid);
    free(j->net->joiners_at);
    free(j->net);
    j->net = NULL;
}

uint32_t nx_rdv_nodes(const struct nx_job *j)
{
    return j->net && j->net->formed ? j->net->nnodes : 1;
}

struct nx_job *nx_rdv_job_by_key(uint64_t key)
{
    struct nx_job *j;
    LIST_FOREACH(j, &nx_jobs, link)
        if (j->net && j->net->formed && j->net->key == key)
            return j;
    return NULL;
}

static void send_register(struct nx_job *j, Nexar__PeerRegister *g)
{
    if (j->net->is_coord)
        return nx_rdvc_register(NULL, g);
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_REGISTER;
    m.register_ = g;
    int rv = nx_cluster_send_addr(j->coord, &m);
    if (rv < 0 && !g->withdraw && j->state == NX_JOB_FORMING) {
        char msg[256];
        snprintf(msg, sizeof(msg), "cannot reach coordinator %s of job \"%s\"", j->coord,
                 j->name);
        nx_job_fail(j, NEXAR_ERR_UNAVAILABLE, msg);
    }
}

void nx_rdv_rank_joined(struct nx_job *j, uint32_t rank, uid_t uid, uint32_t timeout_ms)
{
    const struct nx_client *cl = nx_job_rank(j, rank);
    uint32_t pid = cl ? (uint32_t)cl->pid : 0;
    Nexar__PeerRegister g = NEXAR__PEER_REGISTER__INIT;
    g.job = j->name;
    g.key = j->net->key;
    g.uid = (uint32_t)uid;
    g.world_size = j->world_size;
    g.n_ranks = 1;
    g.ranks = &rank;
    g.addr = (char *)nx_cluster_addr();
    g.version = NX_PEER_VERSION;
    g.timeout_ms = timeout_ms;
    g.algo = j->algo;
    g.slot_bytes = nxd.cfg.slot_bytes;
    g.n_pids = 1;
    g.pids = &pid;
    NX_DEBUG("rdv", "rank %u of job \"%s\" registers with %s%s", rank, j->name, j->coord,
             j->net->is_coord ? " (this daemon)" : "");
    send_register(j, &g);
}

/* Tells every other node of a formed job that it failed here. */
static void abort_others(struct nx_job *j, uint32_t status, const char *reason)
{
    Nexar__PeerAbort a = NEXAR__PEER_ABORT__INIT;
    a.job = j->name;
    a.key = j->net->key;
    a.status = status;
    a.reason = (char *)reason;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_ABORT;
    m.abort = &a;
    for (uint32_t i = 0; i < j->net->nnodes; i++)
        if (i != j->net->node)
            nx_cluster_send_addr(j->net->nodes[i], &m);
}

void nx_rdv_rank_left(struct nx_job *j, uint32_t rank, bool lost, const char *who)
{
    if (!j->net)
        return;
    if (!j->net->formed) {
        if (j->state != NX_JOB_FORMING)
            return;
        Nexar__PeerRegister g = NEXAR__PEER_REGISTER__INIT;
        g.job = j->name;
        g.key = j->net->key;
        g.uid = (uint32_t)j->owner;
        g.world_size = j->world_size;
        g.n_ranks = 1;
        g.ranks = &rank;
        g.addr = (char *)nx_cluster_addr();
        g.version = NX_PEER_VERSION;
        g.withdraw = true;
        send_register(j, &g);
        return;
    }
    /* A lost rank of a running job fails the communicators it belongs to, each telling its
     * other nodes with its failed ranks (xcomm.c, from nx_comm_fail): the job and its
     * other communicators go on, so that the survivors can shrink. */
    (void)lost;
    (void)who;
}

static struct tomb *tomb_find(const char *job, uint64_t key)
{
    double now = nx_now();
    for (int i = 0; i < NX_TOMB_MAX; i++)
        if (tombs[i].key == key && tombs[i].expires > now && !strcmp(tombs[i].job, job))
            return &tombs[i];
    return NULL;
}

static void tomb_add(const Nexar__PeerAbort *a)
{
    int slot = 0;
    for (int i = 1; i < NX_TOMB_MAX; i++)
        if (tombs[i].expires < tombs[slot].expires)
            slot = i;
    struct tomb *t = &tombs[slot];
    snprintf(t->job, sizeof(t->job), "%s", a->job);
    t->key = a->key;
    t->status = a->status;
    snprintf(t->reason, sizeof(t->reason), "%s", a->reason);
    t->expires = nx_now() + NX_TOMB_TTL_S;
}

/* A rank table must put exactly our attached ranks on our node, with this node's staging
 * geometry (ops are cut into the same parts everywhere) and algorithm choices we know.
 * 0 or a status. */
static uint32_t check_table(struct nx_job *j, const Nexar__PeerRankTable *t, char *why,
                            size_t len)
{
    if (t->slot_bytes != nxd.cfg.slot_bytes) {
        snprintf(why, len, "job \"%s\": node %s has slot_bytes = %" PRIu64 " but its "
                 "coordinator %s has %" PRIu64 "; every node of a job needs the same",
                 j->name, nx_cluster_addr(), nxd.cfg.slot_bytes, j->coord, t->slot_bytes);
        return NEXAR_ERR_MISMATCH;
    }
    char err[256];
    if (nx_algo_pref_parse(t->algo, j->algo_pref, err, sizeof(err)) < 0) {
        snprintf(why, len, "job \"%s\": the coordinator's algorithm choices \"%s\": %s",
                 j->name, t->algo, err);
        return NEXAR_ERR_INVALID;
    }
    if (t->n_rank_node != j->world_size) {
        snprintf(why, len, "the rank table of job \"%s\" has %zu ranks, the job %u", j->name,
                 t->n_rank_node, j->world_size);
        return NEXAR_ERR_INTERNAL;
    }
    for (uint32_t r = 0; r < j->world_size; r++) {
        bool here = t->rank_node[r] == t->node, have = nx_job_rank(j, r) != NULL;
        if (here && !have) {
            snprintf(why, len, "rank %u of job \"%s\" left node %s before the job formed", r,
                     j->name, nx_cluster_addr());
            return NEXAR_ERR_PEER_LOST;
        }
        if (!here && have) {
            snprintf(why, len, "rank %u of job \"%s\" joined at node %s, but the rank table puts "
                     "it on node %s", r, j->name, nx_cluster_addr(), t->nodes[t->rank_node[r]]);
            return NEXAR_ERR_INTERNAL;
        }
    }
    return 0;
}

bool nx_rdv_from_node(const struct nx_jobnet *net, uint32_t node, const struct nx_tpeer *p)
{
    return node < net->nnodes && node != net->node && !strcmp(net->nodes[node], p->addr);
}

void nx_rdv_hello_all(struct nx_job *j)
{
    Nexar__PeerHello h = NEXAR__PEER_HELLO__INIT;
    h.version = NX_PEER_VERSION;
    h.addr = (char *)nx_cluster_addr();
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_HELLO;
    m.hello = &h;
    for (uint32_t i = 0; i < j->net->nnodes; i++)
        if (i != j->net->node && strcmp(j->net->nodes[i], j->coord))
            nx_cluster_send_addr(j->net->nodes[i], &m);
}

/* The job of a message from the coordinator (from == NULL: this daemon is it). */
static struct nx_job *coord_job(struct nx_tpeer *from, const char *name, uint64_t key)
{
    struct nx_job *j = nx_job_find(name);
    if (!j || !j->net || j->net->formed || j->net->key != key ||
        j->state != NX_JOB_FORMING)
        return NULL;
    if (from ? strcmp(from->addr, j->coord) != 0 : !j->net->is_coord) {
        NX_WARN("rdv", "%s sent a message about job \"%s\", whose coordinator is %s; ignored",
                from ? from->addr : "this daemon", name, j->coord);
        return NULL;
    }
    return j;
}

/* A malloc'd copy of v[0..n), NULL when n is 0. */
static uint32_t *copy_u32(const uint32_t *v, size_t n)
{
    if (!n)
        return NULL;
    uint32_t *c = nx_xmalloc(n * sizeof(*c));
    memcpy(c, v, n * sizeof(*c));
    return c;
}

void nx_rdv_member_table(struct nx_tpeer *from, const Nexar__PeerRankTable *t)
{
    struct nx_job *j = coord_job(from, t->job, t->key);
    if (!j) {
        NX_DEBUG("rdv", "rank table for job \"%s\" matches no forming job here", t->job);
        return;
    }
    struct nx_jobnet *n = j->net;
    char why[512];
    uint32_t status = check_table(j, t, why, sizeof(why));
    n->formed = true;
    n->key = t->job_key;
    n->nnodes = (uint32_t)t->n_nodes;
    n->nodes = nx_xcalloc(t->n_nodes, sizeof(*n->nodes));
    for (size_t i = 0; i < t->n_nodes; i++)
        snprintf(n->nodes[i], sizeof(n->nodes[i]), "%s", t->nodes[i]);
    n->rank_node = nx_xcalloc(t->n_rank_node, sizeof(*n->rank_node));
    memcpy(n->rank_node, t->rank_node, t->n_rank_node * sizeof(*n->rank_node));
    n->rank_pid = copy_u32(t->rank_pid, t->n_rank_pid);
    n->rank_uid = copy_u32(t->rank_uid, t->n_rank_uid);
    n->node = t->node;
    if (strcmp(n->nodes[n->node], nx_cluster_addr()))
        NX_WARN("rdv", "job \"%s\": the rank table calls this node %s, we advertise %s",
                j->name, n->nodes[n->node], nx_cluster_addr());
    if (status) {
        NX_WARN("rdv", "%s", why);
        abort_others(j, status, why);
        nx_job_fail(j, status, why);
        return;
    }
    if (t->timeout_ms && t->timeout_ms < j->timeout_ms)
        j->timeout_ms = t->timeout_ms;
    /* The hellos first: they replace the records of nodes whose connection was lost
     * before this job (nx_cluster_peer dials them afresh).  The data path takes whatever
     * record is there, and a rank's first op can run inside nx_job_form: handing a rank
     * over serves at once what its ring holds (nx_client_start). */
    nx_rdv_hello_all(j);
    nx_job_form(j);
    struct tomb *tb = tomb_find(j->name, n->key);
    if (tb) {
        nx_job_fail(j, tb->status, tb->reason);
        tb->expires = 0;
    }
}

void nx_rdv_member_refused(struct nx_tpeer *from, const Nexar__PeerRegisterReply *r)
{
    struct nx_job *j = coord_job(from, r->job, r->key);
    if (!j)
        return;
    for (size_t i = 0; i < r->n_ranks; i++)
        if (r->ranks[i] < j->world_size)
            nx_job_refuse_rank(j, r->ranks[i], r->status, r->error);
}

static bool in_table(const struct nx_jobnet *n, const char *addr)
{
    for (uint32_t i = 0; i < n->nnodes; i++)
        if (!strcmp(n->nodes[i], addr))
            return true;
    return false;
}

bool nx_rdv_member_abort(struct nx_tpeer *from, const Nexar__PeerAbort *a)
{
    struct nx_job *j = nx_job_find(a->job);
    if (!j || !j->net || j->net->key != a->key)
        return false;
    if (j->net->formed ? from && !in_table(j->net, from->addr)
                       : !coord_job(from, a->job, a->key))
        return false;
    if (j->state == NX_JOB_FAILED)
        return true;
    if (a->comm) {
        /* One communicator failed at another node: only it fails here. */
        if (j->net->formed)
            nx_xcomm_remote_abort(j, a, from ? from->addr : j->coord);
        return true;
    }
    NX_INFO("rdv", "job \"%s\" aborted by %s: %s", j->name, from ? from->addr : "its coordinator",
            a->reason);
    nx_job_fail(j, a->status, a->reason);
    return true;
}

const char *nx_rdv_on_msg(struct nx_tpeer *p, const Nexar__PeerMsg *m)
{
    switch (m->body_case) {
    case NEXAR__PEER_MSG__BODY_REGISTER:
        nx_rdvc_register(p, m->register_);
        return NULL;
    case NEXAR__PEER_MSG__BODY_REGISTER_REPLY:
        nx_rdv_member_refused(p, m->register_reply);
        return NULL;
    case NEXAR__PEER_MSG__BODY_RANK_TABLE:
        nx_rdv_member_table(p, m->rank_table);
        return NULL;
    case NEXAR__PEER_MSG__BODY_ABORT:
        if (nx_rdv_member_abort(p, m->abort) || nx_rdvc_abort(p, m->abort))
            return NULL;
        /* For a job whose table has not come: one communicator's abort waits for that
         * communicator; a whole job's fails the job when its table comes. */
        if (m->abort->comm)
            nx_xcomm_keep_abort(m->abort->key, m->abort->comm, m->abort->left,
                                m->abort->seq, m->abort->status, p->addr, m->abort->reason);
        else
            tomb_add(m->abort);
        return NULL;
    case NEXAR__PEER_MSG__BODY_HELLO:
        return NULL;
    case NEXAR__PEER_MSG__BODY_SPLIT:
        return nx_xsplit_on_msg(p, m->split);
    case NEXAR__PEER_MSG__BODY_SHRINK:
        return nx_xshrink_on_msg(p, m->shrink);
    case NEXAR__PEER_MSG__BODY_GROW:
        return nx_xgrow_on_msg(p, m->grow);
    case NEXAR__PEER_MSG__BODY_JOINER:
        return nx_rdvj_on_joiner(p, m->joiner);
    case NEXAR__PEER_MSG__BODY_JOINER_TABLE:
        return nx_rdvj_on_table(p, m->joiner_table);
    case NEXAR__PEER_MSG__BODY_JOINER_NOTE:
        return nx_rdvj_on_note(p, m->joiner_note);
    default:
        return "unexpected control message";
    }
}

void nx_rdv_peer_lost(const char *addr, const char *reason, bool was_up)
{
    nx_rdvc_peer_lost(addr, reason);
    struct nx_job *j;
    char msg[768];
    /* nx_job_fail() frees nothing here (drops are deferred), so the walk is safe. */
    LIST_FOREACH(j, &nx_jobs, link) {
        struct nx_jobnet *n = j->net;
        if (!n || j->state == NX_JOB_FAILED)
            continue;
        if (!n->formed) {
            if (n->is_coord || strcmp(j->coord, addr))
                continue;
            snprintf(msg, sizeof(msg), "coordinator %s of job \"%s\" %s: %s", addr, j->name,
                     was_up ? "was lost" : "is unreachable", reason);
            nx_job_fail(j, was_up ? NEXAR_ERR_PEER_LOST : NEXAR_ERR_UNAVAILABLE, msg);
            continue;
        }
        for (uint32_t i = 0; i < n->nnodes; i++) {
            if (i == n->node || strcmp(n->nodes[i], addr))
                continue;
            char ranks[256];
            nx_rdv_fmt_ranks(n->rank_node, j->world_size, i, ranks, sizeof(ranks));
            snprintf(msg, sizeof(msg), "node %s (rank(s) %s) of job \"%s\" was lost: %s", addr,
                     ranks, j->name, reason);
            /* Only the communicators with ranks there fail; the job goes on. */
            nx_xcomm_node_lost(j, i, msg);
            break;
        }
    }
}

void nx_rdv_tick(double now)
{
    nx_rdvc_tick(now);
}

void nx_rdv_fini(void)
{
    nx_rdvc_fini();
    memset(tombs, 0, sizeof(tombs));
}
