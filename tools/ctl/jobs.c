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

