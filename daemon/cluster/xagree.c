/* xagree.c - see xagree.h. */
#include "xagree.h"

#include <stdlib.h>

#include "comm.h"
#include "context.h"
#include "job.h"
#include "mem.h"
#include "rendezvous.h"
#include "xcomm.h"

struct nx_xagree *nx_xagree_get(struct nx_xagree_table *t, uint64_t job_key,
                                uint64_t comm_key, uint32_t round, uint32_t nnodes,
                                bool create)
{
    struct nx_xagree *a;
    LIST_FOREACH(a, &t->all, link)
        if (a->job_key == job_key && a->comm_key == comm_key && a->round == round)
            return a;
    if (!create)
        return NULL;
    a = nx_xcalloc(1, t->size);
    a->job_key = job_key;
    a->comm_key = comm_key;
    a->round = round;
    a->nnodes = nnodes;
    a->ready = nx_xcalloc(nnodes, 1);
    a->expires = nx_now() + NX_XAGREE_KEEP_S;
    if (t->init)
        t->init(a);
    LIST_INSERT_HEAD(&t->all, a, link);
    return a;
}

void nx_xagree_free(struct nx_xagree_table *t, struct nx_xagree *a)
{
    LIST_REMOVE(a, link);
    if (t->fini)
        t->fini(a);
    free(a->ready);
    free(a);
}

void nx_xagree_local_ready(struct nx_xagree *a, const struct nx_comm *c)
{
    a->local_ready = true;
    a->expires = nx_now() + c->timeout_ms / 1000.0 + NX_XAGREE_KEEP_S;
}

void nx_xagree_each_of_job(struct nx_xagree_table *t, uint64_t job_key,
                           void (*fn)(struct nx_xagree *a))
{
    struct nx_xagree *a, *next;
    for (a = LIST_FIRST(&t->all); a; a = next) {
        next = LIST_NEXT(a, link);
        if (a->job_key == job_key)
            fn(a);
    }
}

void nx_xagree_comm_gone(struct nx_xagree_table *t, const struct nx_comm *c)
{
    if (!c->x || !c->job || !c->job->net)
        return;
    struct nx_xagree *a, *next;
    for (a = LIST_FIRST(&t->all); a; a = next) {
        next = LIST_NEXT(a, link);
        if (a->job_key == c->job->net->key && a->comm_key == c->x->key)
            nx_xagree_free(t, a);
    }
}

void nx_xagree_tick(struct nx_xagree_table *t, double now)
{
    struct nx_xagree *a, *next;
    for (a = LIST_FIRST(&t->all); a; a = next) {
        next = LIST_NEXT(a, link);
        if (now > a->expires)
            nx_xagree_free(t, a);
    }
}

void nx_xagree_fini(struct nx_xagree_table *t)
{
    while (!LIST_EMPTY(&t->all))
        nx_xagree_free(t, LIST_FIRST(&t->all));
}
