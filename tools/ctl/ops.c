/*
 * ops.c - `nexarctl ops`: collectives in flight, and the ranks each one waits for.
 *
 * This is the command for a hung job: an op whose WAITING FOR column names
 * ranks has been entered by the others and is blocked on exactly those.  An op
 * across nodes whose ranks here are all in says which node it waits for.
 */
#include <stdlib.h>

#include "ctl.h"
#include "util.h"

void nxc_ops_human(FILE *f, const Nexar__CtlReply *r)
{
    if (r->n_ops == 0) {
        fprintf(f, "no operations in flight\n");
        return;
    }
    struct nxc_table t;
    nxc_table_init(&t, 8, "COMM", "JOB", "SEQ", "OPERATION", "AGE", "CHUNKS", "ALGORITHM",
                   "WAITING FOR");
    for (size_t i = 0; i < r->n_ops; i++) {
        const Nexar__OpInfo *op = r->ops[i];
        char age[32];
        size_t cap = 16 + op->n_waiting_for * 12;
        char *waiting = nxt_xmalloc(cap);
        nxc_fmt_ranks(op->waiting_for, op->n_waiting_for, waiting, cap);
        nxc_table_add(&t, nxc_fmt("%u", op->comm));
        nxc_table_add(&t, nxt_xstrdup(op->job && *op->job ? op->job : "-"));
        nxc_table_add(&t, nxc_fmt("%llu", (unsigned long long)op->seq));
        nxc_table_add(&t, nxt_xstrdup(op->signature && *op->signature
                                          ? op->signature
                                          : op->kind && *op->kind ? op->kind : "?"));
        nxc_table_add(&t, nxt_xstrdup(nxc_fmt_age(op->age_s, age, sizeof(age))));
        nxc_table_add(&t, nxc_fmt("%llu/%llu", (unsigned long long)op->chunks_done,
                                  (unsigned long long)op->chunks_total));
        nxc_table_add(&t, nxt_xstrdup(op->algorithm && *op->algorithm ? op->algorithm : "-"));
        nxc_table_add(&t, op->n_waiting_for ? nxc_fmt("rank%s %s",
                                                      op->n_waiting_for > 1 ? "s" : "",
                                                      waiting)
                                            : nxt_xstrdup("-"));
        free(waiting);
    }
    nxc_table_print(&t, f, "");
    nxc_table_free(&t);
    /* Where an op across nodes stands does not fit a column. */
    for (size_t i = 0; i < r->n_ops; i++)
        if (r->ops[i]->across && *r->ops[i]->across)
            fprintf(f, "comm %u seq %llu across nodes: %s\n", r->ops[i]->comm,
                    (unsigned long long)r->ops[i]->seq, r->ops[i]->across);
}

