/*
 * comm.c - communicator objects: rank/size, split, free, abort, the failure state,
 * and the per-(peer, tag, direction) point-to-point message counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct nexar_comm *nx_comm_new(uint32_t id, int rank, int size, bool world)
{
    struct nexar_comm *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    nx_list_init(&c->link);
    nx_list_init(&c->reqs);
    c->id = id;
    c->rank = rank;
    c->size = size;
    c->world = world;
    return c;
}

void nx_comm_destroy(struct nexar_comm *c)
{
    for (uint32_t b = 0; b < c->p2p_buckets; b++) {
        struct nx_p2p_stream *s = c->p2p[b];
        while (s) {
            struct nx_p2p_stream *n = s->next;
            free(s);
            s = n;
        }
    }
    free(c->p2p);
    free(c->fail_text);
    nx_list_del(&c->link);
    free(c);
}

static uint32_t stream_hash(uint32_t peer, uint32_t tag, uint8_t dir)
{
    uint32_t h = peer * 0x9e3779b1u ^ (tag + 0x7f4a7c15u) * 0x85ebca77u ^ dir;
    return h ^ (h >> 15);
}

/* Doubles the bucket array; the stream nodes stay where they are. */
static int stream_rehash(struct nexar_comm *c)
{
    uint32_t nb = c->p2p_buckets ? c->p2p_buckets * 2 : 16;
    struct nx_p2p_stream **t = calloc(nb, sizeof(*t));
    if (!t)
        return -1;
    for (uint32_t b = 0; b < c->p2p_buckets; b++) {
        struct nx_p2p_stream *s = c->p2p[b];
        while (s) {
            struct nx_p2p_stream *n = s->next;
            uint32_t i = stream_hash(s->peer, s->tag, s->dir) & (nb - 1);
            s->next = t[i];
            t[i] = s;
            s = n;
        }
    }
    free(c->p2p);
    c->p2p = t;
    c->p2p_buckets = nb;
    return 0;
}

struct nx_p2p_stream *nx_comm_stream(struct nexar_comm *c, uint32_t peer, uint32_t tag,
                                     uint8_t dir)
{
    uint32_t h = stream_hash(peer, tag, dir);
    if (c->p2p_buckets) {
        for (struct nx_p2p_stream *s = c->p2p[h & (c->p2p_buckets - 1)]; s; s = s->next)
            if (s->peer == peer && s->tag == tag && s->dir == dir)
                return s;
    }
    if (c->p2p_count >= c->p2p_buckets * 2u && stream_rehash(c) < 0 && !c->p2p_buckets)
        return NULL;
    struct nx_p2p_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->peer = peer;
    s->tag = tag;
    s->dir = dir;
    uint32_t i = h & (c->p2p_buckets - 1);
    s->next = c->p2p[i];
    c->p2p[i] = s;
    c->p2p_count++;
    return s;
}

void nx_comm_set_failed(struct nexar_comm *c, nexar_status_t s, const char *text)
{
    if (c->fail)
        return;
    c->fail = s;
    c->fail_text = text && *text ? strdup(text) : NULL;
}

nexar_status_t nx_comm_check(const struct nexar_comm *c, const char *fn)
{
    if (!c->fail)
        return NEXAR_OK;
    if (c->fail_text)
        return nx_fail_text(c->fail, c->fail_text);
    return nx_fail(c->fail, "%s: communicator %u failed earlier: %s", fn, c->id,
                   nexar_strerror(c->fail));
}

/* True when c is a live communicator of this shim (guards free and abort). */
static bool comm_live(const struct nexar_comm *c)
{
    for (const struct nx_list *l = nx_S.comms.next; l != &nx_S.comms; l = l->next)
        if (nx_container_of(l, const struct nexar_comm, link) == c)
            return true;
    return false;
}

int nexar_comm_rank(const nexar_comm_t *c)
{
    return c ? c->rank : -1;
}

int nexar_comm_size(const nexar_comm_t *c)
{
    return c ? c->size : -1;
}

const char *nexar_comm_algorithm(const nexar_comm_t *c)
{
    if (!c)
        return NULL;
    nx_lock();
    const char *name = c->algo_seen ? nx_algo_code_name(c->last_algo) : NULL;
    nx_unlock();
    return name;
}

/* split, shrink and grow: one descriptor whose completion names a new communicator of
 * this rank.  min_size..max_size bound what nexard may answer; split may answer none. */
static nexar_status_t new_comm_op(nexar_comm_t *c, const struct nx_call *op, const char *fn,
                                  uint32_t min_size, uint32_t max_size, nexar_comm_t **out)
{
    if (!out)
        return nx_fail(NEXAR_ERR_INVALID, "%s: out is NULL", fn);
    *out = NULL;
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "%s: comm is NULL", fn);
    nx_lock();
    nexar_status_t s;
    struct nexar_request *r;
    struct nexar_comm *nc = NULL;
    if ((s = nx_shim_check(fn)))
        goto out;
    if (!comm_live(c)) {
        s = nx_fail(NEXAR_ERR_INVALID, "%s: not a live communicator", fn);
        goto out;
    }
    /* A failed communicator is what one shrinks; the others refuse one. */
    if (op->kind != NX_K_COMM_SHRINK && (s = nx_comm_check(c, fn)))
        goto out;
    /* Allocated before the daemon creates anything, so NOMEM leaves nothing behind. */
    if (!(nc = nx_comm_new(0, 0, 0, false))) {
        s = nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", fn);
        goto out;
    }
    if ((s = nx_req_start(c, op, &r)) != NEXAR_OK)
        goto out;
    nx_wait_owned(r);
    s = nx_req_result(r);
    uint32_t id = r->res_comm, rank = r->res_rank, size = r->res_size;
    unsigned plan = r->res_plan;
    nx_req_free(r);
    if (s != NEXAR_OK || (id == 0 && op->kind == NX_K_SPLIT))
        goto out;
    if (id == 0 || size < min_size || size > max_size || rank >= size) {
        s = nx_fail(NEXAR_ERR_INTERNAL, "%s: nexard answered rank %u of %u for communicator %u",
                    fn, rank, size, id);
        goto out;
    }
    nc->id = id;
    nc->rank = (int)rank;
    nc->size = (int)size;
    nc->plan = plan;
    nx_list_add_tail(&nx_S.comms, &nc->link);
    *out = nc;
    nc = NULL;
out:
    if (nc)
        nx_comm_destroy(nc);
    nx_unlock();
    return s;
}

nexar_status_t nexar_comm_split(nexar_comm_t *c, uint32_t color, uint32_t key,
                                nexar_comm_t **out)
{
    struct nx_call op = {.kind = NX_K_SPLIT, .peer = color, .tag = key};
    return new_comm_op(c, &op, "nexar_comm_split", 1, c ? (uint32_t)c->size : 0, out);
}

nexar_status_t nexar_comm_shrink(nexar_comm_t *c, nexar_comm_t **out)
{
    struct nx_call op = {.kind = NX_K_COMM_SHRINK};
    return new_comm_op(c, &op, "nexar_comm_shrink", 1, c ? (uint32_t)c->size : 0, out);
}

nexar_status_t nexar_comm_grow(nexar_comm_t *c, uint32_t add, nexar_comm_t **out)
{
    if (add == 0) {
        if (out)
            *out = NULL;
        return nx_fail(NEXAR_ERR_INVALID, "nexar_comm_grow: add is 0 (it adds at least one "
                       "process)");
    }
    struct nx_call op = {.kind = NX_K_COMM_GROW, .peer = add};
    uint32_t size = c ? (uint32_t)c->size + add : 0;
    return new_comm_op(c, &op, "nexar_comm_grow", size, size, out);
}

nexar_status_t nexar_comm_failed_ranks(nexar_comm_t *c, uint32_t *ranks, size_t cap,
                                       size_t *n)
{
    if (!c || !n || (cap && !ranks))
        return nx_fail(NEXAR_ERR_INVALID, "nexar_comm_failed_ranks: %s is NULL",
                       !c ? "comm" : !n ? "n" : "ranks");
    *n = 0;
    nx_lock();
    nexar_status_t s = nx_shim_check("nexar_comm_failed_ranks");
    if (s == NEXAR_OK && !comm_live(c))
        s = nx_fail(NEXAR_ERR_INVALID, "nexar_comm_failed_ranks: not a live communicator");
    if (s == NEXAR_OK)
        s = nx_control_comm_failed(c->id, ranks, cap, n);
    nx_unlock();
    return s;
}

nexar_status_t nexar_comm_free(nexar_comm_t *c)
{
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "nexar_comm_free: comm is NULL");
    nx_lock();
    nexar_status_t s = NEXAR_OK;
    if (!nx_S.inited || !comm_live(c)) {
        s = nx_fail(NEXAR_ERR_INVALID, "nexar_comm_free: not a live communicator");
        goto out;
    }
    if ((s = nx_fork_check("nexar_comm_free")) != NEXAR_OK)
        goto out;
    if (c->world) {
        s = nx_fail(NEXAR_ERR_INVALID,
                    "nexar_comm_free: the world communicator is freed by nexar_finalize()");
        goto out;
    }
    /* Complete (and free) what is outstanding; their failures are theirs.  A request
     * another thread is blocked on is waited for; that thread frees it. */
    nx_comm_drain(c, UINT64_MAX);
    /* Left: complete requests of blocking calls on other threads that have not woken
     * yet.  They free them; c must not know them any more. */
    while (!nx_list_empty(&c->reqs))
        nx_list_del(c->reqs.next);
    if (!nx_S.dead) {
        struct nexar_request *r;
        struct nx_call op = {.kind = NX_K_COMM_FREE};
        if ((s = nx_req_start(c, &op, &r)) != NEXAR_OK)
            goto out; /* out of memory: c stays, the caller may retry */
        bool failed_before = c->fail != NEXAR_OK;
        s = nx_wait_locked(r);
        /* Leaving a failed communicator is what the caller should do: not an error. */
        if (failed_before || s == NEXAR_ERR_UNAVAILABLE || c->fail == s)
            s = NEXAR_OK;
    }
    nx_comm_destroy(c);
out:
    nx_unlock();
    return s;
}

nexar_status_t nexar_comm_abort(nexar_comm_t *c)
{
    if (!c)
        return nx_fail(NEXAR_ERR_INVALID, "nexar_comm_abort: comm is NULL");
    nx_lock();
    nexar_status_t s;
    struct nexar_request *r;
    if (!nx_S.inited || !comm_live(c)) {
        s = nx_fail(NEXAR_ERR_INVALID, "nexar_comm_abort: not a live communicator");
        goto out;
    }
    if ((s = nx_shim_check("nexar_comm_abort")) != NEXAR_OK)
        goto out;
    struct nx_call op = {.kind = NX_K_COMM_ABORT};
    if ((s = nx_req_start(c, &op, &r)) != NEXAR_OK)
        goto out;
    s = nx_wait_locked(r);
    if (s == NEXAR_OK || s == NEXAR_ERR_ABORTED || s == c->fail) {
        char text[160];
        snprintf(text, sizeof(text),
                 "communicator %u was aborted by nexar_comm_abort() on its rank %d", c->id,
                 c->rank);
        nx_comm_set_failed(c, NEXAR_ERR_ABORTED, text);
        s = NEXAR_OK;
    }
    /* Queued requests of c fail now rather than at their next progress. */
    nx_progress();
out:
    nx_unlock();
    return s;
}
