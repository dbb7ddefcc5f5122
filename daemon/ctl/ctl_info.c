/* ctl_info.c - see ctl_info.h.  Builds the protobuf reply straight from the live
 * registries; nothing here changes state. */
#include "ctl_info.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Built with ASan or TSan (gcc says so in a macro, clang through __has_feature). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NX_SANITIZED_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NX_SANITIZED_MALLOC 1
#endif
#endif
#if NX_SANITIZED_MALLOC
/* The sanitizers' allocator interface (sanitizer/allocator_interface.h, which not every
 * compiler installs). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include "algo.h"
#include "client.h"
#include "cluster.h"
#include "coll_local.h"
#include "comm.h"
#include "context.h"
#include "ctl_config.h"
#include "ctl_peers.h"
#include "ctlsrv.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "op.h"
#include "peertest.h"
#include "rendezvous.h"
#include "xcoll.h"

/* Everything allocated for one reply, freed together after sending. */
struct arena {
    void **ptrs;
    size_t n, cap;
};

static void *keep(struct arena *a, void *p)
{
    nx_grow((void **)&a->ptrs, &a->cap, a->n + 1, sizeof(*a->ptrs));
    a->ptrs[a->n++] = p;
    return p;
}

static void *alloc(struct arena *a, size_t n, size_t size)
{
    return keep(a, nx_xcalloc(n, size));
}

static uint64_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* What nexard allocated and did not free, in use or not yet touched: unlike the resident
 * size it shows an array allocated for a world that never came.  A sanitizer's allocator
 * replaces glibc's, whose mallinfo2 then reads 0: ask the sanitizer. */
static uint64_t heap_bytes(void)
{
#if NX_SANITIZED_MALLOC
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
#endif
}

static const char *client_state(const struct nx_client *cl)
{
    if (!cl)
        return "gone";
    if (cl->dead)
        return "gone";
    if (!cl->polling)
        return "waiting";
    return cl->pending ? "active" : "idle";
}

static Nexar__RankInfo *rank_info(struct arena *a, uint32_t rank, uint32_t world_rank,
                                  const struct nx_client *cl, uint64_t sub, uint64_t done)
{
    Nexar__RankInfo *ri = alloc(a, 1, sizeof(*ri));
    nexar__rank_info__init(ri);
    ri->rank = rank;
    ri->world_rank = world_rank;
    ri->state = (char *)client_state(cl);
    if (cl) {
        ri->pid = (uint64_t)cl->pid;
        ri->uid = (uint32_t)cl->uid;
        ri->ops_submitted = sub;
        ri->ops_completed = done;
    }
    return ri;
}

static void fill_status(struct arena *a, Nexar__CtlReply *rep)
{
    Nexar__StatusInfo *st = alloc(a, 1, sizeof(*st));
    nexar__status_info__init(st);
    st->version = NEXAR_VERSION;
    st->pid = (uint64_t)getpid();
    st->uptime_s = nx_now() - nxd.start_time;
    st->clients = nx_client_count;
    st->comms = nx_comm_count;
    struct nx_job *j;
    LIST_FOREACH(j, &nx_jobs, link)
        st->jobs++;
    struct nx_client *cl;
    LIST_FOREACH(cl, &nx_clients, link)
        st->shm_bytes += cl->seg.bytes;
    st->rss_bytes = rss_bytes();
    st->heap_bytes = heap_bytes();
    st->socket = nxd.cfg.socket_path;
    char *subject = alloc(a, 1, 160);
    time_t end = nx_cluster_cert(subject, 160);
    if (end != (time_t)-1) {
        st->cert_not_after = (int64_t)end;
        st->cert_subject = subject;
    }
    rep->status_info = st;
}

/* Ranks of j joined: those attached here, and once a job across nodes formed, those the
 * rank table puts on the other nodes (every one of them joined there). */
static uint32_t joined(const struct nx_job *j)
{
    const struct nx_jobnet *net = j->net;
    uint32_t n = j->joined;
    if (net && net->formed)
        for (uint32_t r = 0; r < j->world_size; r++)
            n += net->rank_node[r] != net->node;
    return n;
}

/* World rank r of a formed job across nodes lives on another node: its pid and uid as
 * that node registered them (the rank table; unknown from an older coordinator). */
static void remote_rank(const struct nx_job *j, uint32_t r, Nexar__RankInfo *ri)
{
    const struct nx_jobnet *net = j->net;
    ri->state = "remote";
    if (r < j->world_size && net->rank_pid && net->rank_node[r] != net->node) {
        ri->pid = net->rank_pid[r];
        ri->uid = net->rank_uid ? net->rank_uid[r] : 0;
    }
}

static void fill_jobs(struct arena *a, Nexar__CtlReply *rep)
{
    struct nx_job *j;
    size_t n = 0;
    LIST_FOREACH(j, &nx_jobs, link)
        n++;
    rep->jobs = alloc(a, n, sizeof(*rep->jobs));
    LIST_FOREACH(j, &nx_jobs, link) {
        Nexar__JobInfo *ji = alloc(a, 1, sizeof(*ji));
        nexar__job_info__init(ji);
        ji->job = j->name;
        ji->world_size = j->world_size;
        ji->joined = joined(j);
        ji->state = (char *)nx_job_state_name(j->state);
        ji->uid = (uint32_t)j->owner;
        ji->joiners_waiting = j->njoiners;
        uint32_t nr = j->ranks ? j->nranks : j->world_size;
        ji->ranks = alloc(a, nr, sizeof(*ji->ranks));
        for (uint32_t r = 0; r < nr; r++) {
            const struct nx_client *cl = nx_job_rank(j, r);
            ji->ranks[ji->n_ranks++] =
                rank_info(a, r, r, cl, cl ? cl->ops_submitted : 0, cl ? cl->ops_completed : 0);
            if (cl)
                ji->ranks[ji->n_ranks - 1]->bytes_in = cl->bytes_in;
            else if (j->net && j->net->formed)
                remote_rank(j, r, ji->ranks[ji->n_ranks - 1]);
        }
        if (j->net) {
            const struct nx_jobnet *net = j->net;
            ji->coord = (char *)j->coord;
            char algo[256];
            nx_algo_pref_format(j->algo_pref, algo, sizeof(algo));
            ji->algo = keep(a, nx_xstrdup(algo));
            if (net->formed) {
                ji->nodes = alloc(a, net->nnodes, sizeof(*ji->nodes));
                for (uint32_t i = 0; i < net->nnodes; i++)
                    ji->nodes[ji->n_nodes++] = (char *)net->nodes[i];
                ji->rank_node = net->rank_node;
                ji->n_rank_node = j->world_size;
                ji->node = net->node;
            }
        }
        rep->jobs[rep->n_jobs++] = ji;
    }
}

static void fill_comms(struct arena *a, Nexar__CtlReply *rep)
{
    struct nx_comm *c;
    rep->comms = alloc(a, nx_comm_count, sizeof(*rep->comms));
    LIST_FOREACH(c, &nx_comms, link) {
        Nexar__CommInfo *ci = alloc(a, 1, sizeof(*ci));
        nexar__comm_info__init(ci);
        ci->id = c->id;
        ci->job = c->job ? c->job->name : "";
        ci->size = nx_comm_span_size(c);
        ci->state = c->failed_status
                        ? keep(a, nx_xasprintf("failed: %s", c->failed_text))
                        : "ok";
        ci->next_seq = c->match.done_seq;
        ci->failed_ranks = c->failed;
        ci->n_failed_ranks = c->nfailed;
        ci->shrunk_from = c->shrunk_from;
        ci->grown_from = c->grown_from;
        ci->ranks = alloc(a, c->size, sizeof(*ci->ranks));
        for (uint32_t r = 0; r < c->size; r++) {
            ci->ranks[ci->n_ranks++] =
                rank_info(a, nx_comm_span_rank(c, r), c->ranks[r].world_rank, c->ranks[r].client,
                          c->ranks[r].ops_submitted, c->ranks[r].ops_completed);
            ci->ranks[ci->n_ranks - 1]->bytes_in = c->ranks[r].bytes_in;
        }
        rep->comms[rep->n_comms++] = ci;
    }
}

static void fill_ops(struct arena *a, Nexar__CtlReply *rep)
{
    struct nx_comm *c;
    struct nx_op *op;
    size_t n = 0;
    double now = nx_now();
    LIST_FOREACH(c, &nx_comms, link)
        TAILQ_FOREACH(op, &c->match.ops, link)
            n++;
    rep->ops = alloc(a, n, sizeof(*rep->ops));
    LIST_FOREACH(c, &nx_comms, link) {
        TAILQ_FOREACH(op, &c->match.ops, link) {
            Nexar__OpInfo *oi = alloc(a, 1, sizeof(*oi));
            nexar__op_info__init(oi);
            oi->comm = c->id;
            oi->job = c->job ? c->job->name : "";
            oi->seq = op->seq;
            oi->kind = (char *)nx_kind_name(op->sig.kind);
            char sig[160];
            nx_sig_format(&op->sig, sig, sizeof(sig));
            oi->signature = keep(a, nx_xstrdup(sig));
            oi->chunks_done = op->next_chunk;
            oi->chunks_total = op->nchunks;
            oi->age_s = now - op->started;
            oi->algorithm = (char *)nx_coll_local_algo(op->sig.kind);
            if (op->pull_owe)
                oi->algorithm = (char *)(op->sig.flags & NX_SQE_CMA ? "local-single-copy"
                                                                     : "local-peer-reads");
            const char *across = nx_xcoll_algo(op);
            if (across) {
                oi->algorithm = keep(a, nx_xasprintf("%s + %s across %u nodes", oi->algorithm,
                                                     across, c->nodes));
                char where[1024];
                nx_xcoll_describe(op, where, sizeof(where));
                oi->across = keep(a, nx_xstrdup(where));
            }
            /* The ranks that hold up the next chunk, as the ranks number them. */
            oi->waiting_for = alloc(a, c->size, sizeof(*oi->waiting_for));
            for (uint32_t r = 0; r < c->size; r++)
                if (nx_op_rank_holds_up(op, r))
                    oi->waiting_for[oi->n_waiting_for++] = nx_comm_span_rank(c, r);
            /* A reader of its peers' slots holds up the ranks whose slots it reads (they
             * have none left for the next chunk): it is the one to name, as the deadline's
             * text does (matcher.c). */
            uint32_t owing = nx_pull_owing(op);
            if (owing)
                oi->n_waiting_for = 0;
            for (uint32_t r = 0; r < c->size && r < 32; r++)
                if (owing & (1u << r))
                    oi->waiting_for[oi->n_waiting_for++] = nx_comm_span_rank(c, r);
            rep->ops[rep->n_ops++] = oi;
        }
    }
}

static void fill_stats(struct arena *a, Nexar__CtlReply *rep)
{
    const struct nx_stats *s = &nxd.stats;
    Nexar__Stats *st = alloc(a, 1, sizeof(*st));
    nexar__stats__init(st);
    st->ops_completed = s->ops_completed;
    st->ops_failed = s->ops_failed;
    st->bytes_reduced = s->bytes_reduced;
    st->bytes_copied = s->bytes_copied;
    st->bytes_pulled = s->bytes_pulled;
    st->bytes_streamed = s->bytes_streamed;
    st->chunks = s->chunks;
    st->clients_accepted = s->clients_accepted;
    st->clients_dropped = s->clients_dropped;
    st->protocol_violations = s->protocol_violations;
    st->p2p_messages = s->p2p_messages;
    st->mismatches = s->mismatches;
    st->timeouts = s->timeouts;
    st->peers_lost = s->peers_lost;
    st->spin_pauses = s->spin_pauses;
    st->loop_stalls = s->loop_stalls;
    st->recoveries = s->recoveries;
    rep->stats = st;
}

int nx_ctl_report(int command, nx_ctl_emit emit, void *arg)
{
    struct arena a = {0};
    Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
    switch (command) {
    case NEXAR__CTL_COMMAND__CTL_STATUS: fill_status(&a, &rep); break;
    case NEXAR__CTL_COMMAND__CTL_JOBS: fill_jobs(&a, &rep); break;
    case NEXAR__CTL_COMMAND__CTL_COMMS: fill_comms(&a, &rep); break;
    case NEXAR__CTL_COMMAND__CTL_OPS: fill_ops(&a, &rep); break;
    case NEXAR__CTL_COMMAND__CTL_STATS: fill_stats(&a, &rep); break;
    case NEXAR__CTL_COMMAND__CTL_PEERS: nx_ctl_peers_report(emit, arg); return 0;
    case NEXAR__CTL_COMMAND__CTL_CONFIG: nx_ctl_config_report(emit, arg); return 0;
    default: return -EINVAL;
    }
    emit(arg, &rep);
    for (size_t i = 0; i < a.n; i++)
        free(a.ptrs[i]);
    free(a.ptrs);
    return 0;
}

static void send_reply(void *arg, const Nexar__CtlReply *rep)
{
    struct nx_conn *c = arg;
    if (nx_conn_send(c, NX_MSG_CTL_REPLY, rep, NULL, 0) < 0)
        nx_conn_close(c);
}

/* Commands that act for the node rather than for a job: root and nexard's own uid only.
 * 0, or the refusal sent (NEXAR_ERR_PERMISSION, naming the uid). */
static int operator_only(struct nx_conn *c, const char *what)
{
    char msg[256];
    if (c->uid == 0 || c->uid == geteuid())
        return 0;
    snprintf(msg, sizeof(msg), "uid %u may not %s (root or uid %u only)", (unsigned)c->uid,
             what, (unsigned)geteuid());
    NX_WARN("ctl", "refused for pid %d: %s", (int)c->pid, msg);
    Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
    rep.status = NEXAR_ERR_PERMISSION;
    rep.error = msg;
    send_reply(c, &rep);
    return -1;
}

/* SIGHUP's work, with its outcome for the asker: an operator's `nexarctl reload` learns
 * whether the files were taken.  The credentials are the node's. */
static void reload(struct nx_conn *c)
{
    char msg[512];
    Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
    if (operator_only(c, "reload nexard") != 0)
        return;
    NX_INFO("ctl", "reload asked by pid %d (uid %u)", (int)c->pid, (unsigned)c->uid);
    if (nx_cluster_reload_tls(msg, sizeof(msg)) != 0) {
        rep.status = NEXAR_ERR_INVALID;
        rep.error = msg;
    } else {
        rep.result = msg;
    }
    send_reply(c, &rep);
}

void nx_ctl_info_reply(struct nx_conn *c, const Nexar__CtlRequest *req)
{
    /* A peer test makes this daemon dial an address and send up to NX_PEERTEST_MAX_BYTES:
     * the node's network, not a job's. */
    if (req->command == NEXAR__CTL_COMMAND__CTL_PEER_TEST) {
        if (operator_only(c, "run a peer test") == 0)
            nx_peertest_start(c, req->peer_test);
        return;
    }
    if (req->command == NEXAR__CTL_COMMAND__CTL_RELOAD) {
        reload(c);
        return;
    }
    if (nx_ctl_report(req->command, send_reply, c) == 0)
        return;
    Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
    rep.status = NEXAR_ERR_INVALID;
    rep.error = "unknown command";
    send_reply(c, &rep);
}
