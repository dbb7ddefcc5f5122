/* rdv_join.c - see rdv_join.h. */
#include "rdv_join.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "cluster.h"
#include "config.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "rendezvous.h"
#include "xgrow.h"

void nx_rdvj_joiners_changed(struct nx_job *j, uid_t uid)
{
    if (!j->net)
        return;
    Nexar__PeerJoiner m = NEXAR__PEER_JOINER__INIT;
    m.job = j->name;
    m.key = j->net->key;
    m.uid = (uint32_t)uid;
    m.addr = (char *)nx_cluster_addr();
    m.joiners = j->njoiners;
    m.version = NX_PEER_VERSION;
    m.slot_bytes = nxd.cfg.slot_bytes;
    if (j->net->is_coord) {
        const char *why = nx_rdvj_on_joiner(NULL, &m);
        if (why)
            NX_WARN("rdv", "job \"%s\": %s", j->name, why);
        return;
    }
    Nexar__PeerMsg pm = NEXAR__PEER_MSG__INIT;
    pm.body_case = NEXAR__PEER_MSG__BODY_JOINER;
    pm.joiner = &m;
    if (nx_cluster_send_addr(j->coord, &pm) < 0 && !j->net->formed) {
        char msg[320];
        snprintf(msg, sizeof(msg), "NEXAR_JOIN=1: cannot reach coordinator %s of job \"%s\"",
                 j->coord, j->name);
        nx_job_fail(j, NEXAR_ERR_UNAVAILABLE, msg);
    }
}

/* The coordinator's refusal of a node's joiners. */
static void refuse(struct nx_tpeer *p, const Nexar__PeerJoiner *m, uint32_t status,
                   const char *why)
{
    NX_INFO("rdv", "joiners of job \"%s\" at %s refused: %s", m->job, m->addr, why);
    if (!p)
        return;
    Nexar__PeerAbort a = NEXAR__PEER_ABORT__INIT;
    a.job = m->job;
    a.key = m->key;
    a.status = status;
    a.reason = (char *)why;
    Nexar__PeerMsg pm = NEXAR__PEER_MSG__INIT;
    pm.body_case = NEXAR__PEER_MSG__BODY_ABORT;
    pm.abort = &a;
    nx_cluster_send(p, 0, &pm);
}

/* Node jn of j (at addr) has joiners waiting: every other node hears it. */
static void note_all(struct nx_job *j, uint32_t jn, uint32_t joiners)
{
    struct nx_jobnet *n = j->net;
    Nexar__PeerJoinerNote note = NEXAR__PEER_JOINER_NOTE__INIT;
    note.job = j->name;
    note.key = n->key;
    note.node = jn;
    note.addr = n->nodes[jn];
    note.joiners = joiners;
    Nexar__PeerMsg pm = NEXAR__PEER_MSG__INIT;
    pm.body_case = NEXAR__PEER_MSG__BODY_JOINER_NOTE;
    pm.joiner_note = &note;
    for (uint32_t i = 0; i < n->nnodes; i++)
        if (i != n->node && i != jn)
            nx_cluster_send_addr(n->nodes[i], &pm);
}

/* Appends addr to j's nodes (a node that was not in the job): its index. */
static uint32_t add_node(struct nx_jobnet *n, const char *addr)
{
    uint32_t old = n->nnodes;
    if (!n->joiners_at)
        n->joiners_at = nx_xcalloc(old ? old : 1, sizeof(*n->joiners_at));
    n->nodes = nx_xrealloc(n->nodes, (old + 1) * sizeof(*n->nodes));
    snprintf(n->nodes[old], sizeof(n->nodes[old]), "%s", addr);
    n->joiners_at = nx_xrealloc(n->joiners_at, (old + 1) * sizeof(*n->joiners_at));
    n->joiners_at[old] = 0;
    n->nnodes = old + 1;
    return old;
}

const char *nx_rdvj_on_joiner(struct nx_tpeer *p, const Nexar__PeerJoiner *m)
{
    struct nx_job *j = nx_job_find(m->job);
    char why[512];
    if (!j || !j->net || !j->net->formed || j->state != NX_JOB_RUNNING || !j->net->is_coord ||
        j->net->joiner_node) {
        snprintf(why, sizeof(why), "job \"%s\" is not running at its coordinator %s (its "
                 "joiners join a job that runs)", m->job, nx_cluster_addr());
        refuse(p, m, NEXAR_ERR_INVALID, why);
        return NULL;
    }
    struct nx_jobnet *n = j->net;
    if (!n->joiners_at)
        n->joiners_at = nx_xcalloc(n->nnodes, sizeof(*n->joiners_at));
    uint32_t jn = UINT32_MAX;
    for (uint32_t i = 0; i < n->nnodes; i++)
        if (!strcmp(n->nodes[i], m->addr))
            jn = i;
    if (m->key == n->key) { /* a node of the job: its count of joiners */
        if (jn == UINT32_MAX)
            return "joiner: a node that is not in the job speaks with its key";
        n->joiners_at[jn] = m->joiners;
        note_all(j, jn, m->joiners);
        nx_xgrow_joiners_noted(j);
        return NULL;
    }
    if (!nx_config_uid_allowed(&nxd.cfg, j->owner, m->uid)) {
        snprintf(why, sizeof(why), "job \"%s\" belongs to uid %u; uid %u may not join it",
                 j->name, (unsigned)j->owner, m->uid);
        refuse(p, m, NEXAR_ERR_PERMISSION, why);
        return NULL;
    }
    if (m->slot_bytes != nxd.cfg.slot_bytes) {
        snprintf(why, sizeof(why), "job \"%s\": node %s has slot_bytes = %" PRIu64 " but its "
                 "coordinator has %" PRIu64, j->name, m->addr, m->slot_bytes,
                 nxd.cfg.slot_bytes);
        refuse(p, m, NEXAR_ERR_MISMATCH, why);
        return NULL;
    }
    if (jn == UINT32_MAX)
        jn = add_node(n, m->addr);
    n->joiners_at[jn] = m->joiners;
    NX_INFO("rdv", "job \"%s\": node %u is %s, with %u joiner(s) (a replacement node)",
            j->name, jn, m->addr, m->joiners);
    if (p) {
        char algo[256];
        nx_algo_pref_format(j->algo_pref, algo, sizeof(algo));
        Nexar__PeerJoinerTable t = NEXAR__PEER_JOINER_TABLE__INIT;
        t.job = j->name;
        t.key = m->key;
        t.job_key = n->key;
        t.n_nodes = n->nnodes;
        t.nodes = nx_xcalloc(n->nnodes, sizeof(char *));
        for (uint32_t i = 0; i < n->nnodes; i++)
            t.nodes[i] = n->nodes[i];
        t.node = jn;
        t.timeout_ms = j->timeout_ms;
        t.slot_bytes = nxd.cfg.slot_bytes;
        t.algo = j->algo;
        Nexar__PeerMsg pm = NEXAR__PEER_MSG__INIT;
        pm.body_case = NEXAR__PEER_MSG__BODY_JOINER_TABLE;
        pm.joiner_table = &t;
        nx_cluster_send(p, 0, &pm);
        free(t.nodes);
    }
    note_all(j, jn, m->joiners);
    nx_xgrow_joiners_noted(j);
    return NULL;
}

const char *nx_rdvj_on_table(struct nx_tpeer *p, const Nexar__PeerJoinerTable *t)
{
    struct nx_job *j = nx_job_find(t->job);
    if (!j || !j->net || j->net->formed || j->net->key != t->key || j->world_size != 0 ||
        j->state != NX_JOB_FORMING)
        return NULL; /* no joiners of it wait here any more */
    if (strcmp(p->addr, j->coord))
        return "joiner table: not from the job's coordinator";
    struct nx_jobnet *n = j->net;
    char err[256];
    if (t->slot_bytes != nxd.cfg.slot_bytes ||
        nx_algo_pref_parse(t->algo, j->algo_pref, err, sizeof(err)) < 0) {
        nx_job_fail(j, NEXAR_ERR_MISMATCH, "NEXAR_JOIN=1: this node's slot_bytes or algorithm "
                    "choices differ from the job's coordinator's");
        return NULL;
    }
    n->formed = true;
    n->joiner_node = true;
    n->key = t->job_key;
    n->nnodes = (uint32_t)t->n_nodes;
    n->nodes = nx_xcalloc(t->n_nodes, sizeof(*n->nodes));
    for (size_t i = 0; i < t->n_nodes; i++)
        snprintf(n->nodes[i], sizeof(n->nodes[i]), "%s", t->nodes[i]);
    n->node = t->node;
    n->joiners_at = nx_xcalloc(t->n_nodes, sizeof(*n->joiners_at));
    if (t->timeout_ms && t->timeout_ms < j->timeout_ms)
        j->timeout_ms = t->timeout_ms;
    j->state = NX_JOB_RUNNING;
    NX_INFO("rdv", "job \"%s\": this daemon is its node %u for %u joiner(s)", j->name, n->node,
            j->njoiners);
    nx_rdv_hello_all(j);
    return NULL;
}

const char *nx_rdvj_on_note(struct nx_tpeer *p, const Nexar__PeerJoinerNote *t)
{
    struct nx_job *j = nx_job_find(t->job);
    if (!j || !j->net || !j->net->formed || j->net->key != t->key)
        return NULL;
    if (strcmp(p->addr, j->coord))
        return "joiner note: not from the job's coordinator";
    struct nx_jobnet *n = j->net;
    if (t->node > n->nnodes)
        return "joiner note: a node index beyond the next one";
    if (t->node == n->nnodes) {
        add_node(n, t->addr);
    } else {
        if (strcmp(n->nodes[t->node], t->addr))
            return "joiner note: another address for a node of the job";
        if (!n->joiners_at)
            n->joiners_at = nx_xcalloc(n->nnodes, sizeof(*n->joiners_at));
    }
    n->joiners_at[t->node] = t->joiners;
    nx_xgrow_joiners_noted(j);
    return NULL;
}
