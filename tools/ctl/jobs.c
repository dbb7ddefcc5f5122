/*
 * jobs.c - `nexarctl jobs` and `nexarctl comms`: what the daemon serves, rank by rank.
 */
#include <stdlib.h>

#include "ctl.h"
#include "util.h"

static const char *str(const char *s)
{
    return s && *s ? s : "-";
}

void nxc_rank_json(struct nxc_json *j, const Nexar__RankInfo *ri)
{
    nxc_json_u64(j, "rank", ri->rank);
    nxc_json_u64(j, "world_rank", ri->world_rank);
    nxc_json_u64(j, "pid", ri->pid);
    nxc_json_u64(j, "uid", ri->uid);
    nxc_json_str(j, "state", ri->state);
    nxc_json_u64(j, "ops_submitted", ri->ops_submitted);
    nxc_json_u64(j, "ops_completed", ri->ops_completed);
    nxc_json_u64(j, "bytes_in", ri->bytes_in);
}

static void ranks_json(struct nxc_json *j, Nexar__RankInfo *const *v, size_t n)
{
    nxc_json_arr_begin(j, "ranks");
    for (size_t i = 0; i < n; i++) {
        nxc_json_obj_begin(j, NULL);
        nxc_rank_json(j, v[i]);
        nxc_json_obj_end(j);
    }
    nxc_json_arr_end(j);
}

/* The ranks of a job or communicator, indented under its line. */
static void ranks_human(FILE *f, Nexar__RankInfo *const *v, size_t n, bool comm)
{
    if (n == 0)
        return;
    struct nxc_table t;
    char b[32];
    nxc_table_init(&t, 7, "RANK", comm ? "WORLD" : "UID", "PID", "STATE", "SUBMITTED",
                   "COMPLETED", "BYTES IN");
    for (size_t i = 0; i < n; i++) {
        const Nexar__RankInfo *ri = v[i];
        nxc_table_add(&t, nxc_fmt("%u", ri->rank));
        nxc_table_add(&t, nxc_fmt("%u", comm ? ri->world_rank : ri->uid));
        nxc_table_add(&t, nxc_fmt("%llu", (unsigned long long)ri->pid));
        nxc_table_add(&t, nxt_xstrdup(str(ri->state)));
        nxc_table_add(&t, nxc_fmt("%llu", (unsigned long long)ri->ops_submitted));
        nxc_table_add(&t, nxc_fmt("%llu", (unsigned long long)ri->ops_completed));
        nxc_table_add(&t, nxt_xstrdup(nxt_fmt_bytes(ri->bytes_in, b, sizeof(b))));
    }
    nxc_table_print(&t, f, "    ");
    nxc_table_free(&t);
}

/* A multi-node job's node table: one line per node with its ranks. */
static void nodes_human(FILE *f, const Nexar__JobInfo *job)
{
    if (job->coord && *job->coord)
        fprintf(f, "  coordinator %s%s\n", job->coord,
                job->n_nodes ? "" : "; waiting for the rank table");
    if (job->n_nodes)
        fprintf(f, "  algorithms across nodes: %s\n",
                job->algo && *job->algo ? job->algo : "chosen by size");
    uint32_t *ranks = nxt_xcalloc(job->n_rank_node + 1, sizeof(*ranks));
    for (size_t i = 0; i < job->n_nodes; i++) {
        size_t n = 0;
        for (size_t r = 0; r < job->n_rank_node; r++)
            if (job->rank_node[r] == i)
                ranks[n++] = (uint32_t)r;
        char b[256];
        fprintf(f, "  node %zu %s: rank%s %s%s\n", i, str(job->nodes[i]), n == 1 ? "" : "s",
                nxc_fmt_ranks(ranks, n, b, sizeof(b)), i == job->node ? " (this nexard)" : "");
    }
    free(ranks);
}

void nxc_jobs_human(FILE *f, const Nexar__CtlReply *r)
{
    if (r->n_jobs == 0) {
        fprintf(f, "no jobs\n");
        return;
    }
    for (size_t i = 0; i < r->n_jobs; i++) {
        const Nexar__JobInfo *job = r->jobs[i];
        fprintf(f, "%sjob %s: %s, %u/%u ranks joined, uid %u\n", i ? "\n" : "",
                str(job->job), str(job->state), job->joined, job->world_size, job->uid);
        if (job->joiners_waiting)
            fprintf(f, "  %u joiner%s waiting for a communicator to grow\n",
                    job->joiners_waiting, job->joiners_waiting > 1 ? "s" : "");
        nodes_human(f, job);
        ranks_human(f, job->ranks, job->n_ranks, false);
    }
}

void nxc_jobs_json(struct nxc_json *j, const Nexar__CtlReply *r)
{
    nxc_json_arr_begin(j, "jobs");
    for (size_t i = 0; i < r->n_jobs; i++) {
        const Nexar__JobInfo *job = r->jobs[i];
        nxc_json_obj_begin(j, NULL);
        nxc_json_str(j, "job", job->job);
        nxc_json_str(j, "state", job->state);
        nxc_json_u64(j, "world_size", job->world_size);
        nxc_json_u64(j, "joined", job->joined);
        nxc_json_u64(j, "uid", job->uid);
        nxc_json_u64(j, "joiners_waiting", job->joiners_waiting);
        nxc_json_str(j, "coord", job->coord && *job->coord ? job->coord : NULL);
        nxc_json_arr_begin(j, "nodes");
        for (size_t k = 0; k < job->n_nodes; k++)
            nxc_json_str(j, NULL, job->nodes[k]);
        nxc_json_arr_end(j);
        nxc_json_arr_begin(j, "rank_node");
        for (size_t k = 0; k < job->n_rank_node; k++)
            nxc_json_u64(j, NULL, job->rank_node[k]);
        nxc_json_arr_end(j);
        if (job->n_nodes) {
            nxc_json_u64(j, "node", job->node);
            nxc_json_str(j, "algo", job->algo);
        }
        ranks_json(j, job->ranks, job->n_ranks);
        nxc_json_obj_end(j);
    }
    nxc_json_arr_end(j);
}

void nxc_comms_human(FILE *f, const Nexar__CtlReply *r)
{
    if (r->n_comms == 0) {
        fprintf(f, "no communicators\n");
        return;
    }
    for (size_t i = 0; i < r->n_comms; i++) {
        const Nexar__CommInfo *c = r->comms[i];
        fprintf(f, "%scomm %u of job %s: %u ranks, next seq %llu, %s\n", i ? "\n" : "",
                c->id, str(c->job), c->size, (unsigned long long)c->next_seq, str(c->state));
        if (c->shrunk_from)
            fprintf(f, "  shrunk from comm %u\n", c->shrunk_from);
        if (c->grown_from)
            fprintf(f, "  grown from comm %u\n", c->grown_from);
        if (c->n_failed_ranks) {
            fprintf(f, "  failed rank%s:", c->n_failed_ranks > 1 ? "s" : "");
            for (size_t k = 0; k < c->n_failed_ranks; k++)
                fprintf(f, "%s%u", k ? ", " : " ", c->failed_ranks[k]);
            fputc('\n', f);
        }
        ranks_human(f, c->ranks, c->n_ranks, true);
    }
}

void nxc_comms_json(struct nxc_json *j, const Nexar__CtlReply *r)
{
    nxc_json_arr_begin(j, "comms");
    for (size_t i = 0; i < r->n_comms; i++) {
        const Nexar__CommInfo *c = r->comms[i];
        nxc_json_obj_begin(j, NULL);
        nxc_json_u64(j, "id", c->id);
        nxc_json_str(j, "job", c->job);
        nxc_json_u64(j, "size", c->size);
        nxc_json_str(j, "state", c->state);
        nxc_json_u64(j, "next_seq", c->next_seq);
        nxc_json_arr_begin(j, "failed_ranks");
        for (size_t k = 0; k < c->n_failed_ranks; k++)
            nxc_json_u64(j, NULL, c->failed_ranks[k]);
        nxc_json_arr_end(j);
        nxc_json_u64(j, "shrunk_from", c->shrunk_from);
        nxc_json_u64(j, "grown_from", c->grown_from);
        ranks_json(j, c->ranks, c->n_ranks);
        nxc_json_obj_end(j);
    }
    nxc_json_arr_end(j);
}
