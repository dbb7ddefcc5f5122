/*
 * node_ops.c - the cluster layer's ops for the node layer (node/cluster_ops.h): jobs go
 * to the rendezvous, communicators spanning nodes to xcomm, xsplit, xcoll and xp2p.
 */
#include "node_ops.h"

#include "cluster.h"
#include "cluster_ops.h"
#include "comm.h"
#include "job.h"
#include "rdv_join.h"
#include "rendezvous.h"
#include "xcoll.h"
#include "xcomm.h"
#include "xp2p.h"
#include "xgrow.h"
#include "xshrink.h"
#include "xsplit.h"

static uint32_t world_formed(struct nx_job *j, const uint32_t *wr)
{
    uint32_t nodes = nx_rdv_nodes(j);
    if (j->net) {
        nx_comm_span(j->world, nodes, j->world_size, wr);
        nx_xcomm_attach(j->world, NX_XCOMM_WORLD, j->net->rank_node);
    }
    return nodes;
}

static uint32_t job_node(const struct nx_job *j)
{
    return j->net && j->net->formed ? j->net->node : 0;
}

static void comm_failed(struct nx_comm *c)
{
    nx_xsplit_fail(c);
    nx_xcomm_failed(c);
}

static void comm_gone(struct nx_comm *c)
{
    nx_xsplit_comm_gone(c);
    nx_xshrink_comm_gone(c);
    nx_xgrow_comm_gone(c);
    nx_xcomm_detach(c);
}

static bool p2p_send(struct nx_comm *c, uint32_t rank, struct nx_client *cl,
                     const struct nx_sqe *e)
{
    if (c->x->rank_node[e->peer] == c->x->me)
        return false;
    nx_xp2p_submit(c, rank, cl, e);
    return true;
}

static const struct nx_cluster_ops ops = {
    .check_coord = nx_rdv_check_coord,
    .formation_ms = nx_rdv_formation_ms,
    .job_init = nx_rdv_job_init,
    .job_fini = nx_rdv_job_fini,
    .rank_joined = nx_rdv_rank_joined,
    .rank_left = nx_rdv_rank_left,
    .world_formed = world_formed,
    .job_node = job_node,
    .comm_failed = comm_failed,
    .comm_gone = comm_gone,
    .comm_busy = nx_xsplit_pending,
    .comm_left = nx_xcomm_left,
    .coll_run = nx_xcoll_run,
    .coll_free = nx_xcoll_op_free,
    .coll_describe = nx_xcoll_describe,
    .coll_held = nx_xcoll_held,
    .split_take = nx_xsplit_take,
    .p2p_send = p2p_send,
    .p2p_ack = nx_xp2p_ack,
    .p2p_fail_all = nx_xp2p_fail_all,
    .p2p_tick = nx_xp2p_tick,
    .rank_node = nx_xcomm_rank_node,
    .progress = nx_cluster_progress,
    .shrink_ready = nx_xshrink_ready,
    .shrink_attach = nx_xshrink_attach,
    .grow_ready = nx_xgrow_ready,
    .grow_attach = nx_xgrow_attach,
    .joiners_changed = nx_rdvj_joiners_changed,
};

void nx_cluster_node_ops_install(void)
{
    nx_cluster_ops_set(&ops);
}
