/* ctl_peers.c - see ctl_peers.h. */
#include "ctl_peers.h"

#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "context.h"
#include "job.h"
#include "mem.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "rendezvous.h"

struct walk {
    Nexar__CtlReply *rep;
    size_t cap;
    double now;
};

/* Names of the multi-node jobs whose table has addr (pointers into the jobs). */
static void jobs_of(Nexar__PeerInfo *pi, const char *addr)
{
    struct nx_job *j;
    size_t n = 0;
    LIST_FOREACH(j, &nx_jobs, link)
        n += j->net != NULL;
    if (!n)
        return;
    pi->jobs = nx_xcalloc(n, sizeof(*pi->jobs));
    LIST_FOREACH(j, &nx_jobs, link) {
        const struct nx_jobnet *net = j->net;
        if (!net)
            continue;
        bool in = !net->formed && !strcmp(j->coord, addr);
        for (uint32_t i = 0; i < net->nnodes && !in; i++)
            in = !strcmp(net->nodes[i], addr);
        if (in)
            pi->jobs[pi->n_jobs++] = j->name;
    }
}

/* Each lane's connection; the peer's packet, queue and stream counts become their sums
 * (its stats give lane 0's; its byte and message counts already cover every lane). */
static void lanes_of(Nexar__PeerInfo *pi, struct nx_transport *t, struct nx_tpeer *p)
{
    struct nx_tpeer_lane l[NX_TPEER_LANES_MAX];
    uint32_t n = t->ops->lanes ? t->ops->lanes(p, l, NX_TPEER_LANES_MAX) : 0;
    if (!n)
        return;
    pi->lanes = nx_xcalloc(n, sizeof(*pi->lanes));
    pi->pkts_sent = pi->pkts_recv = pi->pkts_lost = pi->queued_bytes = 0;
    pi->streams_open = 0;
    for (uint32_t i = 0; i < n; i++) {
        Nexar__LaneInfo *li = nx_xcalloc(1, sizeof(*li));
        nexar__lane_info__init(li);
        li->lane = i;
        li->state = (char *)nx_tpeer_state_name(l[i].state);
        li->rtt_ms = l[i].rtt_ms;
        li->cwnd = l[i].cwnd;
        li->bytes_sent = l[i].bytes_sent;
        li->bytes_recv = l[i].bytes_recv;
        li->pkts_sent = l[i].pkts_sent;
        li->pkts_recv = l[i].pkts_recv;
        li->pkts_lost = l[i].pkts_lost;
        li->queued_bytes = l[i].queued_bytes;
        li->streams_open = l[i].streams_open;
        pi->pkts_sent += li->pkts_sent;
        pi->pkts_recv += li->pkts_recv;
        pi->pkts_lost += li->pkts_lost;
        pi->queued_bytes += li->queued_bytes;
        pi->streams_open += li->streams_open;
        pi->lanes[pi->n_lanes++] = li;
    }
}

static void one_peer(struct nx_tpeer *p, void *arg)
{
    struct walk *w = arg;
    struct nx_transport *t = nx_cluster_transport();
    struct nx_tpeer_stats s;
    t->ops->stats(p, &s);
    const struct nx_node *node = p->user;

    Nexar__PeerInfo *pi = nx_xcalloc(1, sizeof(*pi));
    nexar__peer_info__init(pi);
    pi->addr = nx_xstrdup(p->addr);
    pi->state = (char *)nx_tpeer_state_name(s.state);
    pi->inbound = s.inbound;
    pi->rtt_ms = s.rtt_ms;
    pi->min_rtt_ms = s.min_rtt_ms;
    pi->rttvar_ms = s.rttvar_ms;
    pi->pto_ms = s.pto_ms;
    pi->cwnd = s.cwnd;
    pi->bytes_sent = s.bytes_sent;
    pi->bytes_recv = s.bytes_recv;
    pi->pkts_sent = s.pkts_sent;
    pi->pkts_recv = s.pkts_recv;
    pi->pkts_lost = s.pkts_lost;
    pi->msgs_sent = s.msgs_sent;
    pi->msgs_recv = s.msgs_recv;
    pi->queued_bytes = s.queued_bytes;
    pi->streams_open = s.streams_open;
    pi->cipher = nx_xstrdup(s.cipher);
    pi->cert_not_after = s.cert_end;
    pi->handovers = s.handovers;
    pi->connections = s.conns;
    pi->reason = nx_xstrdup(s.state == NX_TPEER_LOST && node && node->reason[0] ? node->reason
                                                                                 : s.reason);
    if (node) {
        pi->since_s = w->now - node->since;
        pi->version = node->version;
    }
    lanes_of(pi, t, p);
    jobs_of(pi, p->addr);
    nx_grow((void **)&w->rep->peers, &w->cap, w->rep->n_peers + 1, sizeof(*w->rep->peers));
    w->rep->peers[w->rep->n_peers++] = pi;
}

void nx_ctl_peers_report(nx_ctl_emit emit, void *arg)
{
    Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
    struct walk w = {.rep = &rep, .now = nx_now()};
    struct nx_transport *t = nx_cluster_transport();
    rep.listen = (char *)nx_cluster_addr();
    if (t)
        t->ops->each_peer(t, one_peer, &w);
    emit(arg, &rep);
    for (size_t i = 0; i < rep.n_peers; i++) {
        free(rep.peers[i]->addr);
        free(rep.peers[i]->cipher);
        free(rep.peers[i]->reason);
        free(rep.peers[i]->jobs);
        for (size_t k = 0; k < rep.peers[i]->n_lanes; k++)
            free(rep.peers[i]->lanes[k]);
        free(rep.peers[i]->lanes);
        free(rep.peers[i]);
    }
    free(rep.peers);
}
