/* cluster_ops.c - the installed cluster ops, and those of a node without a network. */
#include "cluster_ops.h"

#include <stdio.h>

#include "context.h"
#include "nexar.h"

static uint32_t local_check_coord(const char *coord, bool guessed, char *canon,
                                  size_t canonlen, char *msg, size_t msglen)
{
    if (canonlen)
        canon[0] = '\0';
    /* A guessed coordinator (torchrun's MASTER_ADDR) names a host, not a daemon: without
     * a network the job is simply local. */
    if (!coord || !*coord || guessed)
        return 0;
    snprintf(msg, msglen,
             "nexard at %s has no network (set listen=...); NEXAR_COORD=%s asks for a job "
             "across nodes", nxd.cfg.socket_path, coord);
    return NEXAR_ERR_UNAVAILABLE;
}

static uint32_t local_formation_ms(uint32_t timeout_ms)
{
    return timeout_ms;
}

static void local_job(struct nx_job *j)
{
    (void)j;
}

static void local_rank_joined(struct nx_job *j, uint32_t rank, uid_t uid, uint32_t timeout_ms)
{
    (void)j, (void)rank, (void)uid, (void)timeout_ms;
}

static void local_rank_left(struct nx_job *j, uint32_t rank, bool lost, const char *who)
{
    (void)j, (void)rank, (void)lost, (void)who;
}

static uint32_t local_world_formed(struct nx_job *j, const uint32_t *wr)
{
    (void)j, (void)wr;
    return 1;
}

static uint32_t local_job_node(const struct nx_job *j)
{
    (void)j;
    return 0;
}

static void local_comm(struct nx_comm *c)
{
    (void)c;
}

static bool local_comm_busy(const struct nx_comm *c)
{
    (void)c;
    return false;
}

static void local_comm_left(struct nx_comm *c, uint32_t rank, uint64_t seq, const char *who)
{
    (void)c, (void)rank, (void)seq, (void)who;
}

static void local_op(struct nx_op *op)
{
    (void)op;
}

static void local_coll_describe(const struct nx_op *op, char *buf, size_t len)
{
    (void)op;
    if (len)
        buf[0] = '\0';
}

static uint32_t local_coll_held(const struct nx_op *op, uint32_t r)
{
    (void)op;
    (void)r;
    return 0;
}

static bool local_p2p_send(struct nx_comm *c, uint32_t rank, struct nx_client *cl,
                           const struct nx_sqe *e)
{
    (void)c, (void)rank, (void)cl, (void)e;
    return false;
}

static void local_p2p_ack(struct nx_comm *c, const struct nx_sqe *send, uint32_t src,
                          uint64_t offset)
{
    (void)c, (void)send, (void)src, (void)offset;
}

static void local_p2p_tick(struct nx_comm *c, double now)
{
    (void)c, (void)now;
}

static bool local_rank_node(const struct nx_comm *c, uint32_t rank, char *buf, size_t len)
{
    (void)c, (void)rank, (void)buf, (void)len;
    return false;
}

static void local_progress(void)
{
}

/* A node without a network has no communicator across nodes: never called. */
static void local_grow_ready(struct nx_comm *c, uint32_t add)
{
    (void)c, (void)add;
}

static void local_grow_attach(struct nx_comm *nc, uint64_t key, const uint32_t *job_node)
{
    (void)nc, (void)key, (void)job_node;
}

static void local_joiners_changed(struct nx_job *j, uid_t uid)
{
    (void)j, (void)uid;
}

static void local_shrink_attach(struct nx_comm *nc, struct nx_comm *c, const uint32_t *surv,
                                uint32_t n, uint64_t key)
{
    (void)nc, (void)c, (void)surv, (void)n, (void)key;
}

const struct nx_cluster_ops nx_cluster_ops_local = {
    .check_coord = local_check_coord,
    .formation_ms = local_formation_ms,
    .job_init = local_job,
    .job_fini = local_job,
    .rank_joined = local_rank_joined,
    .rank_left = local_rank_left,
    .world_formed = local_world_formed,
    .job_node = local_job_node,
    .comm_failed = local_comm,
    .comm_gone = local_comm,
    .comm_busy = local_comm_busy,
    .comm_left = local_comm_left,
    .coll_run = local_op,
    .coll_free = local_op,
    .coll_describe = local_coll_describe,
    .coll_held = local_coll_held,
    .split_take = local_op,
    .p2p_send = local_p2p_send,
    .p2p_ack = local_p2p_ack,
    .p2p_fail_all = local_comm,
    .p2p_tick = local_p2p_tick,
    .rank_node = local_rank_node,
    .progress = local_progress,
    .shrink_ready = local_comm,
    .shrink_attach = local_shrink_attach,
    .grow_ready = local_grow_ready,
    .grow_attach = local_grow_attach,
    .joiners_changed = local_joiners_changed,
};

const struct nx_cluster_ops *nx_cluster_ops = &nx_cluster_ops_local;

void nx_cluster_ops_set(const struct nx_cluster_ops *ops)
{
    nx_cluster_ops = ops ? ops : &nx_cluster_ops_local;
}
