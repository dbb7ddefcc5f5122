/* ctl_json.c - see ctl_json.h. */
#include "ctl_json.h"

#include <string.h>

static const Nexar__StatusInfo empty_status = NEXAR__STATUS_INFO__INIT;
static const Nexar__Stats empty_stats = NEXAR__STATS__INIT;

const Nexar__StatusInfo *nx_ctl_status_of(const Nexar__CtlReply *r)
{
    return r->status_info ? r->status_info : &empty_status;
}

const Nexar__Stats *nx_ctl_stats_of(const Nexar__CtlReply *r)
{
    return r->stats ? r->stats : &empty_stats;
}

static void u32s_json(struct nx_json *j, const char *name, const uint32_t *v, size_t n)
{
    nx_json_arr_begin(j, name);
    for (size_t k = 0; k < n; k++)
        nx_json_u64(j, NULL, v[k]);
    nx_json_arr_end(j);
}

static void strs_json(struct nx_json *j, const char *name, char *const *v, size_t n)
{
    nx_json_arr_begin(j, name);
    for (size_t k = 0; k < n; k++)
        nx_json_str(j, NULL, v[k]);
    nx_json_arr_end(j);
}

/* A Unix time, null when unknown (0). */
static void time_json(struct nx_json *j, const char *key, int64_t t)
{
    if (t)
        nx_json_i64(j, key, t);
    else
        nx_json_str(j, key, NULL);
}

static void status_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    const Nexar__StatusInfo *s = nx_ctl_status_of(r);
    nx_json_str(j, "version", s->version);
    nx_json_u64(j, "pid", s->pid);
    nx_json_double(j, "uptime_s", s->uptime_s);
    nx_json_str(j, "socket", s->socket);
    nx_json_u64(j, "clients", s->clients);
    nx_json_u64(j, "jobs", s->jobs);
    nx_json_u64(j, "comms", s->comms);
    nx_json_u64(j, "shm_bytes", s->shm_bytes);
    nx_json_u64(j, "rss_bytes", s->rss_bytes);
    nx_json_u64(j, "heap_bytes", s->heap_bytes);
    time_json(j, "cert_not_after", s->cert_not_after);
    nx_json_str(j, "cert_subject", s->cert_subject && *s->cert_subject ? s->cert_subject : NULL);
}

static void stats_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    const Nexar__Stats *s = nx_ctl_stats_of(r);
#define FIELD(field, label, bytes) nx_json_u64(j, #field, s->field);
    NX_CTL_STATS_FIELDS(FIELD)
#undef FIELD
}

static void rank_json(struct nx_json *j, const Nexar__RankInfo *ri)
{
    nx_json_u64(j, "rank", ri->rank);
    nx_json_u64(j, "world_rank", ri->world_rank);
    nx_json_u64(j, "pid", ri->pid);
    nx_json_u64(j, "uid", ri->uid);
    nx_json_str(j, "state", ri->state);
    nx_json_u64(j, "ops_submitted", ri->ops_submitted);
    nx_json_u64(j, "ops_completed", ri->ops_completed);
    nx_json_u64(j, "bytes_in", ri->bytes_in);
}

static void ranks_json(struct nx_json *j, Nexar__RankInfo *const *v, size_t n)
{
    nx_json_arr_begin(j, "ranks");
    for (size_t i = 0; i < n; i++) {
        nx_json_obj_begin(j, NULL);
        rank_json(j, v[i]);
        nx_json_obj_end(j);
    }
    nx_json_arr_end(j);
}

static void jobs_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    nx_json_arr_begin(j, "jobs");
    for (size_t i = 0; i < r->n_jobs; i++) {
        const Nexar__JobInfo *job = r->jobs[i];
        nx_json_obj_begin(j, NULL);
        nx_json_str(j, "job", job->job);
        nx_json_str(j, "state", job->state);
        nx_json_u64(j, "world_size", job->world_size);
        nx_json_u64(j, "joined", job->joined);
        nx_json_u64(j, "uid", job->uid);
        nx_json_u64(j, "joiners_waiting", job->joiners_waiting);
        nx_json_str(j, "coord", job->coord && *job->coord ? job->coord : NULL);
        strs_json(j, "nodes", job->nodes, job->n_nodes);
        u32s_json(j, "rank_node", job->rank_node, job->n_rank_node);
        if (job->n_nodes) {
            nx_json_u64(j, "node", job->node);
            nx_json_str(j, "algo", job->algo);
        }
        ranks_json(j, job->ranks, job->n_ranks);
        nx_json_obj_end(j);
    }
    nx_json_arr_end(j);
}

static void comms_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    nx_json_arr_begin(j, "comms");
    for (size_t i = 0; i < r->n_comms; i++) {
        const Nexar__CommInfo *c = r->comms[i];
        nx_json_obj_begin(j, NULL);
        nx_json_u64(j, "id", c->id);
        nx_json_str(j, "job", c->job);
        nx_json_u64(j, "size", c->size);
        nx_json_str(j, "state", c->state);
        nx_json_u64(j, "next_seq", c->next_seq);
        u32s_json(j, "failed_ranks", c->failed_ranks, c->n_failed_ranks);
        nx_json_u64(j, "shrunk_from", c->shrunk_from);
        nx_json_u64(j, "grown_from", c->grown_from);
        ranks_json(j, c->ranks, c->n_ranks);
        nx_json_obj_end(j);
    }
    nx_json_arr_end(j);
}

static void ops_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    nx_json_arr_begin(j, "ops");
    for (size_t i = 0; i < r->n_ops; i++) {
        const Nexar__OpInfo *op = r->ops[i];
        nx_json_obj_begin(j, NULL);
        nx_json_u64(j, "comm", op->comm);
        nx_json_str(j, "job", op->job);
        nx_json_u64(j, "seq", op->seq);
        nx_json_str(j, "kind", op->kind);
        nx_json_str(j, "signature", op->signature);
        nx_json_str(j, "algorithm", op->algorithm);
        nx_json_str(j, "across", op->across);
        nx_json_u64(j, "chunks_done", op->chunks_done);
        nx_json_u64(j, "chunks_total", op->chunks_total);
        nx_json_double(j, "age_s", op->age_s);
        u32s_json(j, "waiting_for", op->waiting_for, op->n_waiting_for);
        nx_json_obj_end(j);
    }
    nx_json_arr_end(j);
}

/* A peer's connections with quic_lanes > 1, lane 0 first; [] for one connection. */
static void lanes_json(struct nx_json *j, const Nexar__PeerInfo *p)
{
    nx_json_arr_begin(j, "lanes");
    for (size_t k = 0; k < p->n_lanes; k++) {
        const Nexar__LaneInfo *l = p->lanes[k];
        nx_json_obj_begin(j, NULL);
        nx_json_u64(j, "lane", l->lane);
        nx_json_str(j, "state", l->state);
        nx_json_double(j, "rtt_ms", l->rtt_ms);
        nx_json_u64(j, "cwnd", l->cwnd);
        nx_json_u64(j, "bytes_sent", l->bytes_sent);
        nx_json_u64(j, "bytes_recv", l->bytes_recv);
        nx_json_u64(j, "pkts_sent", l->pkts_sent);
        nx_json_u64(j, "pkts_recv", l->pkts_recv);
        nx_json_u64(j, "pkts_lost", l->pkts_lost);
        nx_json_u64(j, "queued_bytes", l->queued_bytes);
        nx_json_u64(j, "streams_open", l->streams_open);
        nx_json_obj_end(j);
    }
    nx_json_arr_end(j);
}

static void peers_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    nx_json_str(j, "listen", r->listen && *r->listen ? r->listen : NULL);
    nx_json_arr_begin(j, "peers");
    for (size_t i = 0; i < r->n_peers; i++) {
        const Nexar__PeerInfo *p = r->peers[i];
        nx_json_obj_begin(j, NULL);
        nx_json_str(j, "addr", p->addr);
        nx_json_str(j, "state", p->state);
        nx_json_double(j, "since_s", p->since_s);
        nx_json_bool(j, "inbound", p->inbound);
        nx_json_double(j, "rtt_ms", p->rtt_ms);
        nx_json_double(j, "min_rtt_ms", p->min_rtt_ms);
        nx_json_double(j, "rttvar_ms", p->rttvar_ms);
        nx_json_double(j, "pto_ms", p->pto_ms);
        nx_json_u64(j, "cwnd", p->cwnd);
        nx_json_u64(j, "bytes_sent", p->bytes_sent);
        nx_json_u64(j, "bytes_recv", p->bytes_recv);
        nx_json_u64(j, "pkts_sent", p->pkts_sent);
        nx_json_u64(j, "pkts_recv", p->pkts_recv);
        nx_json_u64(j, "pkts_lost", p->pkts_lost);
        nx_json_u64(j, "msgs_sent", p->msgs_sent);
        nx_json_u64(j, "msgs_recv", p->msgs_recv);
        nx_json_u64(j, "queued_bytes", p->queued_bytes);
        nx_json_u64(j, "streams_open", p->streams_open);
        nx_json_str(j, "cipher", p->cipher);
        time_json(j, "cert_not_after", p->cert_not_after);
        nx_json_u64(j, "handovers", p->handovers);
        nx_json_u64(j, "connections", p->connections);
        nx_json_str(j, "reason", p->reason);
        nx_json_u64(j, "version", p->version);
        strs_json(j, "jobs", p->jobs, p->n_jobs);
        lanes_json(j, p);
        nx_json_obj_end(j);
    }
    nx_json_arr_end(j);
}

static void config_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    nx_json_str(j, "config_file", r->config_file && *r->config_file ? r->config_file : NULL);
    nx_json_str(j, "config_note", r->config_note && *r->config_note ? r->config_note : NULL);
    nx_json_arr_begin(j, "config");
    for (size_t i = 0; i < r->n_config; i++) {
        const Nexar__ConfigEntry *e = r->config[i];
        nx_json_obj_begin(j, NULL);
        nx_json_str(j, "key", e->key);
        nx_json_str(j, "value", e->value);
        nx_json_str(j, "source", e->source);
        nx_json_obj_end(j);
    }
    nx_json_arr_end(j);
}

static void reload_json(struct nx_json *j, const Nexar__CtlReply *r)
{
    nx_json_str(j, "result", r->result);
}

static const struct {
    int command;
    void (*members)(struct nx_json *j, const Nexar__CtlReply *r);
} reports[] = {
    {NEXAR__CTL_COMMAND__CTL_STATUS, status_json},
    {NEXAR__CTL_COMMAND__CTL_JOBS, jobs_json},
    {NEXAR__CTL_COMMAND__CTL_COMMS, comms_json},
    {NEXAR__CTL_COMMAND__CTL_OPS, ops_json},
    {NEXAR__CTL_COMMAND__CTL_STATS, stats_json},
    {NEXAR__CTL_COMMAND__CTL_PEERS, peers_json},
    {NEXAR__CTL_COMMAND__CTL_CONFIG, config_json},
    {NEXAR__CTL_COMMAND__CTL_RELOAD, reload_json},
};

static void (*members_of(int command))(struct nx_json *, const Nexar__CtlReply *)
{
    for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++)
        if (reports[i].command == command)
            return reports[i].members;
    return NULL;
}

bool nx_ctl_json_members(struct nx_json *j, int command, const Nexar__CtlReply *r)
{
    void (*members)(struct nx_json *, const Nexar__CtlReply *) = members_of(command);
    if (!members)
        return false;
    members(j, r);
    return true;
}

bool nx_ctl_json_report(FILE *f, const char *name, int command, const Nexar__CtlReply *r)
{
    if (!members_of(command))
        return false;
    struct nx_json j;
    nx_json_init(&j, f);
    nx_json_obj_begin(&j, NULL);
    nx_json_str(&j, "command", name);
    nx_json_u64(&j, "status", 0);
    nx_ctl_json_members(&j, command, r);
    nx_json_obj_end(&j);
    nx_json_finish(&j);
    return true;
}
