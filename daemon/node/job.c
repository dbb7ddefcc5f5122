/* job.c - see job.h. */
#include "job.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo.h"
#include "client.h"
#include "cluster_ops.h"
#include "comm.h"
#include "ctlsrv.h"
#include "context.h"
#include "grow.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "nexar.pb-c.h"

struct nx_job_list nx_jobs = LIST_HEAD_INITIALIZER(nx_jobs);


const char *nx_job_state_name(enum nx_job_state s)
{
    switch (s) {
    case NX_JOB_FORMING: return "forming";
    case NX_JOB_RUNNING: return "running";
    default: return "failed";
    }
}

struct nx_job *nx_job_find(const char *name)
{
    struct nx_job *j;
    LIST_FOREACH(j, &nx_jobs, link)
        if (!strcmp(j->name, name))
            return j;
    return NULL;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255)
        return false;
    for (; *s; s++)
        if (!isprint((unsigned char)*s))
            return false;
    return true;
}

static void job_free(struct nx_job *j)
{
    LIST_REMOVE(j, link);
    nx_cluster_ops->job_fini(j);
    free(j->ranks);
    free(j->pending);
    free(j->joiners);
    free(j->name);
    free(j->algo);
    free(j);
}

/* The pending rank with world rank r: its index, or where it would go. */
static uint32_t pending_at(const struct nx_job *j, uint32_t r)
{
    uint32_t lo = 0, hi = j->npending;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (j->pending[mid]->world_rank < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct nx_client *nx_job_rank(const struct nx_job *j, uint32_t r)
{
    if (j->ranks)
        return r < j->nranks ? j->ranks[r] : NULL;
    uint32_t i = pending_at(j, r);
    return i < j->npending && j->pending[i]->world_rank == r ? j->pending[i] : NULL;
}

/* World rank r of j is cl now (NULL: gone), in whichever form the table has. */
static void set_rank(struct nx_job *j, uint32_t r, struct nx_client *cl)
{
    if (j->ranks) {
        if (r < j->nranks)
            j->ranks[r] = cl;
        return;
    }
    uint32_t i = pending_at(j, r);
    bool have = i < j->npending && j->pending[i]->world_rank == r;
    if (cl && !have) {
        j->pending = nx_xrealloc(j->pending, (j->npending + 1) * sizeof(*j->pending));
        memmove(j->pending + i + 1, j->pending + i, (j->npending - i) * sizeof(*j->pending));
        j->pending[i] = cl;
        j->npending++;
    } else if (cl) {
        j->pending[i] = cl;
    } else if (have) {
        memmove(j->pending + i, j->pending + i + 1,
                (j->npending - i - 1) * sizeof(*j->pending));
        j->npending--;
    }
}

/* Appends "a, b, c" of the ranks whose presence equals want (at most ~30 named). */
static void list_ranks(const struct nx_job *j, bool want, char *buf, size_t len)
{
    size_t off = 0;
    unsigned shown = 0, total = 0;
    buf[0] = '\0';
    for (uint32_t r = 0; r < j->world_size; r++) {
        if ((nx_job_rank(j, r) != NULL) != want)
            continue;
        total++;
        if (shown < 30 && off < len) {
            off += (size_t)snprintf(buf + off, len - off, "%s%u", shown ? ", " : "", r);
            shown++;
        }
    }
    if (total > shown && off < len)
        snprintf(buf + off, len - off, " and %u more", total - shown);
}

/* The successful JoinReply with the segment's fds, and the rank's rings start.  False when
 * that failed (the client is dropped). */
static bool hand_over(struct nx_client *cl, const struct nx_job *j, const struct nx_comm *c,
                      uint32_t rank, uint32_t size, uint32_t nodes, uint32_t local_size,
                      uint32_t local_rank, const int *pull_fds, uint32_t *pull_pids,
                      uint32_t pull_count)
{
    Nexar__JoinReply rep = NEXAR__JOIN_REPLY__INIT;
    rep.status = NEXAR_OK;
    rep.client_id = cl->id;
    rep.world_comm = c->id;
    rep.local_plan = c->plan_local;
    rep.single_copy = c->plan_cma;
    rep.rank = rank;
    rep.size = size;
    rep.segment_bytes = cl->seg.bytes;
    rep.timeout_ms = j->timeout_ms;
    rep.nodes = nodes;
    rep.node = nx_cluster_ops->job_node(j);
    rep.local_size = local_size;
    rep.local_rank = local_rank;
    int fds[3 + NX_PULL_MAX_RANKS] = {cl->seg.memfd, cl->sq_efd, cl->cq_efd}, nfds = 3;
    if (pull_count) {
        rep.pull_count = pull_count;
        rep.pull_index = cl->pull_index;
        for (uint32_t i = 0; i < pull_count; i++)
            if (i != cl->pull_index)
                fds[nfds++] = pull_fds[i];
    }
    if (pull_pids) {
        rep.n_pull_pids = pull_count;
        rep.pull_pids = pull_pids;
    }
    if (!cl->conn || nx_conn_send(cl->conn, NX_MSG_JOIN_REPLY, &rep, fds, nfds) < 0 ||
        nx_client_start(cl) < 0) {
        nx_client_drop(cl, "could not hand over its segment");
        return false;
    }
    /* The mapping stays; the fd is the rank's now. */
    close(cl->seg.memfd);
    cl->seg.memfd = -1;
    return true;
}

_Static_assert(3 + NX_PULL_MAX_RANKS - 1 <= NX_FRAME_MAX_FDS,
               "a JoinReply carries three fds and every other peer reader's segment");

/*
 * Peer reads (shm_abi.h): when every one of the n ranks here asked for them, each gets the
 * others' segments, read-only, and reads the chunks of ops that only move data (broadcast,
 * all_gather, gather, scatter, all_to_all) from their slots itself.  Read-only: a rank of
 * the job may see its peers' slots, whose contents it is about to receive anyway, but
 * never write into their rings.  Returns how many segments there are (0: none), with a
 * read-only fd of each in fds, by pull index.
 */
static uint32_t pull_setup(struct nx_job *j, struct nx_client **cls, uint32_t n, int *fds)
{
    if (!nxd.cfg.peer_reads || n < 2 || n > NX_PULL_MAX_RANKS)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (!cls[i]->peer_reads)
            return 0;
    /* Single copy (shm_abi.h): process_vm_readv needs the reader to be allowed to ptrace
     * the source, which one uid (and Yama, which each shim checked) gives; and the pids
     * handed out must be the ranks' own, which one pid namespace gives.  Within a job the
     * ranks trust each other with their data already: one uid adds no other reach. */
    bool cma = nxd.cfg.single_copy;
    for (uint32_t i = 0; i < n; i++)
        cma &= cls[i]->single_copy && cls[i]->uid == cls[0]->uid;
    for (uint32_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", cls[i]->seg.memfd);
        fds[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0) {
            NX_WARN("job", "no peer reads for job \"%s\": reopening a segment read-only: %s",
                    cls[i]->job->name, strerror(errno));
            while (i-- > 0)
                close(fds[i]);
            return 0;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        cls[i]->pull_index = i;
    j->single_copy = cma;
    return n;
}

void nx_job_form(struct nx_job *j)
{
    /* This node's ranks, in world order; on one node that is every rank. */
    uint32_t n = j->npending;
    struct nx_client **cls = nx_xcalloc(n ? n : 1, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(n ? n : 1, sizeof(*wr));
    /* The dense table by world rank from here on. */
    j->ranks = nx_xcalloc(j->world_size, sizeof(*j->ranks));
    j->nranks = j->world_size;
    for (uint32_t i = 0; i < n; i++) {
        cls[i] = j->pending[i];
        wr[i] = cls[i]->world_rank;
        j->ranks[wr[i]] = cls[i];
    }
    free(j->pending);
    j->pending = NULL;
    j->npending = 0;
    j->world = nx_comm_new(j, n, cls, wr, j->timeout_ms);
    uint32_t nodes = nx_cluster_ops->world_formed(j, wr);
    int pull_fds[NX_PULL_MAX_RANKS];
    uint32_t pulls = pull_setup(j, cls, n, pull_fds);
    nx_comm_set_plan(j->world, nodes == 1); /* what hand_over tells the ranks */
    j->state = NX_JOB_RUNNING;
    NX_INFO("job", "job \"%s\" formed: %u ranks (%u here, %u node%s), world comm %u%s",
            j->name, j->world_size, n, nodes, nodes == 1 ? "" : "s", j->world->id,
            pulls ? (j->single_copy ? ", peer reads, single copy" : ", peer reads") : "");

    /* Single copy: every rank reads its peers by pid, in pull index order (cls's). */
    uint32_t pids[NX_PULL_MAX_RANKS];
    for (uint32_t i = 0; i < pulls; i++)
        pids[i] = (uint32_t)cls[i]->pid;
    for (uint32_t i = 0; i < n; i++)
        hand_over(cls[i], j, j->world, wr[i], j->world_size, nodes, n, i, pull_fds,
                  pulls && j->single_copy ? pids : NULL, pulls);
    for (uint32_t i = 0; i < pulls; i++)
        close(pull_fds[i]);
    free(cls);
    free(wr);
}

static void refuse(struct nx_conn *conn, uint32_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct nx_conn *conn, uint32_t status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    Nexar__JoinReply rep = NEXAR__JOIN_REPLY__INIT;
    rep.status = status;
    rep.error = msg;
    NX_INFO("job", "join refused for pid %d: %s", (int)conn->pid, msg);
    nx_conn_send(conn, NX_MSG_JOIN_REPLY, &rep, NULL, 0);
    nx_conn_close(conn);
}

/* Refuses conn when its uid may not join j (the owner rule, allow_uids). */
static bool uid_refused(struct nx_conn *conn, const struct nx_job *j, const char *hint)
{
    if (nx_config_uid_allowed(&nxd.cfg, j->owner, conn->uid))
        return false;
    refuse(conn, NEXAR_ERR_PERMISSION,
           "job \"%s\" belongs to uid %u; uid %u may not join it (only the owner's ranks join "
           "a job, or uids that share the daemon's allow_uids group with it)%s", j->name,
           (unsigned)j->owner, (unsigned)conn->uid, hint);
    return true;
}

/* The client of a JOIN that passed the job's checks, or NULL after refusing it (the
 * daemon's maximum, or no memory). */
static struct nx_client *new_client(struct nx_conn *conn)
{
    char err[256];
    if (nx_client_count >= nxd.cfg.max_clients) {
        refuse(conn, NEXAR_ERR_UNAVAILABLE, "nexard serves its maximum of %u ranks",
               nxd.cfg.max_clients);
        return NULL;
    }
    struct nx_client *cl = nx_client_new(conn, conn->pid, conn->uid, err, sizeof(err));
    if (!cl)
        refuse(conn, errno == EMFILE || errno == ENFILE ? NEXAR_ERR_UNAVAILABLE : NEXAR_ERR_NOMEM,
               "%s", err);
    return cl;
}

/* NEXAR_JOIN=1: a process that joins a running job, to be taken by a communicator that
 * grows (grow.h); its JoinReply comes then. */
static void join_running(struct nx_conn *conn, const Nexar__JoinRequest *req)
{
    struct nx_job *j = nx_job_find(req->job);
    char coord[NX_ADDR_MAX], msg[512];
    uint32_t st = nx_cluster_ops->check_coord(req->coord, req->coord_guessed, coord,
                                              sizeof(coord), msg, sizeof(msg));
    if (st)
        return refuse(conn, st, "%s", msg);
    /* A joiner-only job here (world_size 0) is forming while the coordinator answers. */
    bool joiner_job = j && j->world_size == 0;
    if (!j && coord[0]) {
        /* A node without a rank of the job (a replacement): its coordinator makes this
         * daemon a node of it (rdv_join.h). */
        j = nx_xcalloc(1, sizeof(*j));
        j->name = nx_xstrdup(req->job);
        j->owner = conn->uid;
        j->state = NX_JOB_FORMING;
        j->algo = nx_xstrdup(req->algo ? req->algo : "");
        nx_algo_pref_parse(NULL, j->algo_pref, msg, sizeof(msg));
        uint32_t asked = req->timeout_ms;
        if (asked > nxd.cfg.max_timeout_s * 1000u)
            asked = nxd.cfg.max_timeout_s * 1000u;
        j->timeout_ms = asked ? asked : nxd.cfg.op_timeout_s * 1000u;
        snprintf(j->coord, sizeof(j->coord), "%s", coord);
        nx_cluster_ops->job_init(j);
        j->formation_ms = nx_cluster_ops->formation_ms(asked);
        j->deadline = nx_now() + j->formation_ms / 1000.0;
        LIST_INSERT_HEAD(&nx_jobs, j, link);
        joiner_job = true;
    }
    if (!j || (j->state != NX_JOB_RUNNING && !(joiner_job && j->state == NX_JOB_FORMING)))
        return refuse(conn, NEXAR_ERR_INVALID,
                      "NEXAR_JOIN=1: job \"%s\" is %s at this nexard; a joiner joins a running "
                      "job at a node of it, or with NEXAR_COORD, its coordinator", req->job,
                      j ? nx_job_state_name(j->state) : "not running");
    if (uid_refused(conn, j, ""))
        return;
    struct nx_client *cl = new_client(conn);
    if (!cl)
        return;
    conn->client = cl;
    cl->job = j;
    cl->world_rank = UINT32_MAX; /* until a communicator takes it */
    /* Its own NEXAR_TIMEOUT when shorter than the job's: the shim waits that long. */
    uint32_t ms = j->timeout_ms;
    if (req->timeout_ms && req->timeout_ms < ms)
        ms = req->timeout_ms;
    cl->join_deadline = nx_now() + ms / 1000.0;
    j->joiners = nx_xrealloc(j->joiners, (j->njoiners + 1) * sizeof(*j->joiners));
    j->joiners[j->njoiners++] = cl;
    j->live++;
    NX_INFO("job", "a joiner of job \"%s\" waits for a communicator to grow (pid %d, %u "
            "waiting)", j->name, (int)conn->pid, j->njoiners);
    if (j->net)
        nx_cluster_ops->joiners_changed(j, conn->uid);
    nx_grow_joiner_came(j);
}

/* Joiner cl waits no more (taken, or gone). */
static void unlist_joiner(struct nx_job *j, struct nx_client *cl)
{
    for (uint32_t i = 0; i < j->njoiners; i++)
        if (j->joiners[i] == cl) {
            memmove(j->joiners + i, j->joiners + i + 1,
                    (j->njoiners - i - 1) * sizeof(*j->joiners));
            j->njoiners--;
            return;
        }
}

void nx_job_reserve_ranks(struct nx_job *j, uint32_t n)
{
    if (n <= j->nranks)
        return;
    j->ranks = nx_xrealloc(j->ranks, n * sizeof(*j->ranks));
    memset(j->ranks + j->nranks, 0, (n - j->nranks) * sizeof(*j->ranks));
    j->nranks = n;
}

void nx_job_take_joiner(struct nx_job *j, struct nx_client *cl, struct nx_comm *c,
                        uint32_t rank, uint32_t world_rank, uint32_t nodes, uint32_t local_size,
                        uint32_t local_rank)
{
    unlist_joiner(j, cl);
    nx_job_reserve_ranks(j, world_rank + 1);
    cl->world_rank = world_rank;
    set_rank(j, world_rank, cl);
    j->joined++;
    hand_over(cl, j, c, rank, nx_comm_span_size(c), nodes, local_size, local_rank, NULL, NULL, 0);
}

void nx_job_refuse_joiner(struct nx_client *cl, uint32_t status, const char *msg)
{
    Nexar__JoinReply rep = NEXAR__JOIN_REPLY__INIT;
    rep.status = status;
    rep.error = (char *)msg;
    if (cl->conn)
        nx_conn_send(cl->conn, NX_MSG_JOIN_REPLY, &rep, NULL, 0);
    nx_client_drop(cl, "no communicator grew to take it");
}

void nx_job_join(struct nx_conn *conn, const Nexar__JoinRequest *req)
{
    if (!req->job || !name_ok(req->job))
        return refuse(conn, NEXAR_ERR_INVALID, "job name must be 1-255 printable characters");
    if (req->joiner)
        return join_running(conn, req);
    /* What a pending job costs the daemon grows with its world (the rank table), and its
     * formation deadline is the ranks' word: both are bounded by the daemon's settings. */
    if (req->world_size == 0 || req->world_size > nxd.cfg.max_world_size)
        return refuse(conn, NEXAR_ERR_INVALID,
                      "world size %u out of range 1..%u (this nexard's max_world_size)",
                      req->world_size, nxd.cfg.max_world_size);
    uint32_t asked_ms = req->timeout_ms;
    if (asked_ms > nxd.cfg.max_timeout_s * 1000u)
        asked_ms = nxd.cfg.max_timeout_s * 1000u;
    if (req->rank >= req->world_size)
        return refuse(conn, NEXAR_ERR_INVALID, "rank %u out of range for world size %u",
                      req->rank, req->world_size);

    char coord[NX_ADDR_MAX], msg[512];
    uint32_t st = nx_cluster_ops->check_coord(req->coord, req->coord_guessed, coord,
                                              sizeof(coord), msg, sizeof(msg));
    if (st)
        return refuse(conn, st, "%s", msg);

    uint8_t pref[NX_K_MAX + 1];
    const char *algo = req->algo && *req->algo ? req->algo : NULL;
    if (nx_algo_pref_parse(algo ? algo : nxd.cfg.algo, pref, msg, sizeof(msg)) < 0)
        return refuse(conn, NEXAR_ERR_INVALID, "%s=\"%s\": %s",
                      algo ? "NEXAR_ALGO" : "the daemon's algo setting",
                      algo ? algo : nxd.cfg.algo, msg);

    struct nx_job *j = nx_job_find(req->job);
    if (j) {
        if (j->state != NX_JOB_FORMING)
            return refuse(conn, NEXAR_ERR_INVALID,
                          "job \"%s\" is %s; ranks cannot join it again (use a new NEXAR_JOB)",
                          j->name, nx_job_state_name(j->state));
        if (strcmp(j->coord, coord))
            return refuse(conn, NEXAR_ERR_MISMATCH,
                          "rank %u of job \"%s\" names coordinator \"%s\", but the job's other "
                          "ranks here named \"%s\" (NEXAR_COORD)",
                          req->rank, j->name, req->coord ? req->coord : "", j->coord);
        if (j->world_size != req->world_size)
            return refuse(conn, NEXAR_ERR_MISMATCH,
                          "rank %u says job \"%s\" has %u ranks, but it was created with %u",
                          req->rank, j->name, req->world_size, j->world_size);
        if (strcmp(j->algo, algo ? algo : ""))
            return refuse(conn, NEXAR_ERR_MISMATCH,
                          "rank %u of job \"%s\" has NEXAR_ALGO=\"%s\", but the job's other "
                          "ranks here have \"%s\"", req->rank, j->name, algo ? algo : "",
                          j->algo);
        if (uid_refused(conn, j, ": choose another NEXAR_JOB"))
            return;
        if (nx_job_rank(j, req->rank))
            return refuse(conn, NEXAR_ERR_INVALID, "rank %u of job \"%s\" already joined (pid %d)",
                          req->rank, j->name, (int)nx_job_rank(j, req->rank)->pid);
    }
    struct nx_client *cl = new_client(conn);
    if (!cl)
        return;
    if (!j) {
        j = nx_xcalloc(1, sizeof(*j));
        j->name = nx_xstrdup(req->job);
        j->world_size = req->world_size;
        j->owner = conn->uid;
        j->state = NX_JOB_FORMING;
        /* No table yet: the pending list grows with the ranks that join (set_rank). */
        j->algo = nx_xstrdup(algo ? algo : "");
        memcpy(j->algo_pref, pref, sizeof(pref));
        j->timeout_ms = asked_ms ? asked_ms : nxd.cfg.op_timeout_s * 1000u;
        j->formation_ms = j->timeout_ms;
        snprintf(j->coord, sizeof(j->coord), "%s", coord);
        if (coord[0]) {
            nx_cluster_ops->job_init(j);
            j->formation_ms = nx_cluster_ops->formation_ms(asked_ms);
        }
        j->deadline = nx_now() + j->formation_ms / 1000.0;
        LIST_INSERT_HEAD(&nx_jobs, j, link);
    } else if (asked_ms && asked_ms < j->timeout_ms) {
        j->timeout_ms = asked_ms;
    }
    conn->client = cl;
    cl->job = j;
    cl->world_rank = req->rank;
    cl->peer_reads = req->peer_reads;
    cl->single_copy = req->peer_reads && req->single_copy && conn->same_pidns;
    set_rank(j, req->rank, cl);
    j->joined++;
    j->live++;
    NX_DEBUG("job", "rank %u of job \"%s\" joined (pid %d, %u/%u)", req->rank, j->name,
             (int)conn->pid, j->joined, j->world_size);
    if (j->net)
        nx_cluster_ops->rank_joined(j, req->rank, conn->uid, asked_ms);
    else if (j->joined == j->world_size)
        nx_job_form(j);
}

/* Answers each waiting rank of a forming job with status and drops it. */
static void fail_forming(struct nx_job *j, uint32_t status, const char *msg, const char *why)
{
    j->state = NX_JOB_FAILED;
    /* Joiners waiting for a node's place in the job (rdv_join.h) hear it too. */
    for (uint32_t left = j->njoiners; j->njoiners && left; left--)
        nx_job_refuse_joiner(j->joiners[0], status, msg); /* drops it: out of the list */
    /* A copy: each drop takes its rank out of the pending list. */
    uint32_t n = j->npending;
    struct nx_client **cls = nx_xcalloc(n ? n : 1, sizeof(*cls));
    if (n)
        memcpy(cls, j->pending, n * sizeof(*cls));
    for (uint32_t i = 0; i < n; i++) {
        struct nx_client *cl = cls[i];
        if (!cl->conn || cl->dead)
            continue;
        Nexar__JoinReply rep = NEXAR__JOIN_REPLY__INIT;
        rep.status = status;
        rep.error = (char *)msg;
        nx_conn_send(cl->conn, NX_MSG_JOIN_REPLY, &rep, NULL, 0);
        nx_client_drop(cl, why);
    }
    free(cls);
}

void nx_job_fail(struct nx_job *j, uint32_t status, const char *msg)
{
    if (j->state == NX_JOB_FAILED)
        return;
    if (j->state == NX_JOB_FORMING) {
        NX_WARN("job", "%s", msg);
        return fail_forming(j, status, msg, "its job failed to form");
    }
    j->state = NX_JOB_FAILED;
    struct nx_comm *c;
    LIST_FOREACH(c, &nx_comms, link)
        if (c->job == j)
            nx_comm_fail(c, status, "%s", msg);
}

void nx_job_refuse_rank(struct nx_job *j, uint32_t rank, uint32_t status, const char *msg)
{
    struct nx_client *cl = nx_job_rank(j, rank);
    if (j->state != NX_JOB_FORMING || !cl || !cl->conn || cl->dead)
        return;
    Nexar__JoinReply rep = NEXAR__JOIN_REPLY__INIT;
    rep.status = status;
    rep.error = (char *)msg;
    nx_conn_send(cl->conn, NX_MSG_JOIN_REPLY, &rep, NULL, 0);
    nx_client_drop(cl, "the job's coordinator refused it");
}

void nx_job_client_gone(struct nx_client *cl, bool lost)
{
    struct nx_job *j = cl->job;
    if (!j)
        return;
    if (j->net) {
        char who[160];
        nx_cluster_ops->rank_left(j, cl->world_rank, lost, nx_client_name(cl, who, sizeof(who)));
    }
    cl->job = NULL;
    if (cl->world_rank == UINT32_MAX) { /* a joiner no communicator took */
        unlist_joiner(j, cl);
        if (j->net && j->state == NX_JOB_RUNNING)
            nx_cluster_ops->joiners_changed(j, j->owner); /* the coordinator's count */
    } else if (nx_job_rank(j, cl->world_rank) == cl) {
        set_rank(j, cl->world_rank, NULL);
    }
    /* A running job stays running when a rank leaves or dies: its communicators with that
     * rank fail, the others go on, and the survivors may shrink (shrink.h). */
    if (j->state == NX_JOB_FORMING)
        j->joined--;
    if (--j->live == 0)
        job_free(j);
}

void nx_jobs_tick(double now)
{
    struct nx_job *j, *tmp;
    for (j = LIST_FIRST(&nx_jobs); j; j = tmp) {
        tmp = LIST_NEXT(j, link);
        /* A multi-node job's coordinator decides (and names the missing ranks); our own
         * deadline, a little later, covers a coordinator that went silent. */
        double deadline = j->deadline + (j->net ? NX_JOB_COORD_GRACE_S : 0);
        if (j->state != NX_JOB_FORMING || now < deadline)
            continue;
        char missing[256], present[256];
        list_ranks(j, false, missing, sizeof(missing));
        list_ranks(j, true, present, sizeof(present));
        char msg[768];
        if (j->net)
            snprintf(msg, sizeof(msg),
                     "job \"%s\" did not form within %.0f s: no rank table from its "
                     "coordinator %s (rank(s) %s of %u joined at this node)",
                     j->name, j->formation_ms / 1000.0, j->coord, present, j->world_size);
        else
            snprintf(msg, sizeof(msg),
                     "job \"%s\" did not form within %.0f s: rank(s) %s of %u never joined "
                     "(joined: %s)",
                     j->name, j->formation_ms / 1000.0, missing, j->world_size, present);
        NX_WARN("job", "%s", msg);
        nxd.stats.timeouts++;
        j->live++; /* keep j alive while its clients go */
        fail_forming(j, NEXAR_ERR_TIMEOUT, msg, "job did not form in time");
        nx_clients_flush();
        if (--j->live == 0)
            job_free(j);
        /* Dropping clients may have freed other jobs: start over (this one is no
         * longer forming, so the walk ends). */
        tmp = LIST_FIRST(&nx_jobs);
    }
}

void nx_jobs_fini(void)
{
    while (!LIST_EMPTY(&nx_jobs)) {
        struct nx_job *j = LIST_FIRST(&nx_jobs);
        job_free(j);
    }
}
