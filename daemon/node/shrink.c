/* shrink.c - see shrink.h. */
#include "shrink.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "client.h"
#include "comm.h"
#include "context.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"

struct nx_shrink {
    struct nx_comm *c;
    bool *in;           /* by local rank: it called */
    uint64_t *ud;       /* its descriptor's user_data */
    double started, deadline;
    LIST_ENTRY(nx_shrink) link;
};

static LIST_HEAD(, nx_shrink) all = LIST_HEAD_INITIALIZER(all);

static struct nx_shrink *find(const struct nx_comm *c)
{
    struct nx_shrink *s;
    LIST_FOREACH(s, &all, link)
        if (s->c == c)
            return s;
    return NULL;
}

static void shrink_free(struct nx_shrink *s)
{
    LIST_REMOVE(s, link);
    free(s->in);
    free(s->ud);
    free(s);
}

static void complete(struct nx_client *cl, uint64_t ud, uint32_t status, const char *text,
                     uint32_t comm, uint32_t rank, uint32_t size)
{
    struct nx_done d = {.user_data = ud, .status = status, .res_comm = comm,
                        .res_rank = rank, .res_size = size};
    nx_client_complete(cl, &d, text);
    cl->pending--;
}

/* Every survivor called: the new communicator, and each caller's completion. */
static void finish(struct nx_shrink *s)
{
    struct nx_comm *c = s->c;
    struct nx_client **cls = nx_xcalloc(c->size, sizeof(*cls));
    uint32_t *wr = nx_xcalloc(c->size, sizeof(*wr)), n = 0;
    for (uint32_t r = 0; r < c->size; r++)
        if (c->ranks[r].client && s->in[r]) {
            cls[n] = c->ranks[r].client;
            wr[n++] = c->ranks[r].world_rank;
        }
    struct nx_comm *nc = nx_comm_new(c->job, n, cls, wr, c->timeout_ms);
    nc->shrunk_from = c->id;
    NX_INFO("comm", "communicator %u of job \"%s\" shrunk to communicator %u: %u of %u "
            "ranks (%u failed) in %.3f s", c->id, c->job->name, nc->id, n, c->size,
            c->nfailed, nx_now() - s->started);
    nxd.stats.recoveries++;
    for (uint32_t r = 0, k = 0; r < c->size; r++)
        if (c->ranks[r].client && s->in[r])
            complete(c->ranks[r].client, s->ud[r], NEXAR_OK, NULL, nc->id, k++, n);
    free(cls);
    free(wr);
    shrink_free(s);
}

/* Done when every rank still attached has called. */
static void check(struct nx_shrink *s)
{
    const struct nx_comm *c = s->c;
    uint32_t callers = 0;
    for (uint32_t r = 0; r < c->size; r++) {
        if (!c->ranks[r].client)
            continue;
        if (!s->in[r])
            return;
        callers++;
    }
    if (callers)
        finish(s);
    else
        shrink_free(s);
}

void nx_shrink_submit(struct nx_comm *c, uint32_t r, struct nx_client *cl, uint64_t user_data)
{
    cl->pending++;
    if (c->x) {
        char text[200];
        snprintf(text, sizeof(text), "nexar_comm_shrink: communicator %u spans %u nodes; "
                 "shrinking across nodes is not available yet (only within one node)", c->id,
                 c->nodes);
        complete(cl, user_data, NEXAR_ERR_UNSUPPORTED, text, 0, 0, 0);
        return;
    }
    struct nx_shrink *s = find(c);
    if (!s) {
        s = nx_xcalloc(1, sizeof(*s));
        s->c = c;
        s->in = nx_xcalloc(c->size, sizeof(*s->in));
        s->ud = nx_xcalloc(c->size, sizeof(*s->ud));
        s->started = nx_now();
        s->deadline = s->started + c->timeout_ms / 1000.0;
        LIST_INSERT_HEAD(&all, s, link);
    }
    if (s->in[r]) {
        complete(cl, user_data, NEXAR_ERR_INVALID,
                 "nexar_comm_shrink: this rank is already shrinking this communicator", 0, 0,
                 0);
        return;
    }
    s->in[r] = true;
    s->ud[r] = user_data;
    check(s);
}

void nx_shrink_rank_gone(struct nx_comm *c)
{
    struct nx_shrink *s = find(c);
    if (s)
        check(s);
}

void nx_shrink_forget(struct nx_comm *c)
{
    struct nx_shrink *s = find(c);
    if (s)
        shrink_free(s);
}

void nx_shrink_tick(double now)
{
    struct nx_shrink *s, *tmp;
    for (s = LIST_FIRST(&all); s; s = tmp) {
        tmp = LIST_NEXT(s, link);
        if (now < s->deadline)
            continue;
        struct nx_comm *c = s->c;
        char missing[160], text[NX_ERR_TEXT_BYTES];
        size_t off = 0;
        unsigned shown = 0;
        missing[0] = '\0';
        for (uint32_t r = 0; r < c->size && off < sizeof(missing); r++)
            if (c->ranks[r].client && !s->in[r] && shown++ < 16)
                off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%u",
                                        shown > 1 ? ", " : "", nx_comm_span_rank(c, r));
        snprintf(text, sizeof(text), "nexar_comm_shrink on communicator %u (job \"%s\"): "
                 "rank(s) %s did not call it within %.0f s", c->id, c->job->name, missing,
                 c->timeout_ms / 1000.0);
        NX_INFO("comm", "%s", text);
        for (uint32_t r = 0; r < c->size; r++)
            if (c->ranks[r].client && s->in[r])
                complete(c->ranks[r].client, s->ud[r], NEXAR_ERR_TIMEOUT, text, 0, 0, 0);
        shrink_free(s);
    }
}
