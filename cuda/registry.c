/* registry.c - see registry.h.  Linear scans: a rank registers a few allocations and
 * one event per op it keeps in flight. */
#include "registry.h"

#include <stdlib.h>

struct nx_regtab *nx_regtab_new(nx_reg_close_fn close)
{
    struct nx_regtab *t = calloc(1, sizeof(*t));
    if (t) {
        t->close = close;
        t->next_id = 1;
    }
    return t;
}

struct nx_reg *nx_regtab_add(struct nx_regtab *t, int kind, int device, void *handle,
                             uint64_t size)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct nx_reg **v = realloc(t->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        t->v = v;
        t->cap = cap;
    }
    struct nx_reg *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    *r = (struct nx_reg){.tab = t, .id = t->next_id++, .kind = kind, .device = device,
                         .handle = handle, .size = size};
    if (t->next_id == 0) /* ids name registrations on the wire: 0 is "none" */
        t->next_id = 1;
    t->v[t->n++] = r;
    return r;
}

struct nx_reg *nx_regtab_get(struct nx_regtab *t, uint32_t id, int kind)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i]->id == id && !t->v[i]->dead)
            return t->v[i]->kind == kind ? t->v[i] : NULL;
    return NULL;
}

static void table_free_if_done(struct nx_regtab *t)
{
    if (t->orphan && t->n == 0) {
        free(t->v);
        free(t);
    }
}

/* Closes and frees r; r must be dead and unreferenced. */
static void reg_drop(struct nx_reg *r)
{
    struct nx_regtab *t = r->tab;
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i] == r) {
            t->v[i] = t->v[--t->n];
            break;
        }
    }
    t->close(r);
    free(r);
    table_free_if_done(t);
}

bool nx_regtab_remove(struct nx_regtab *t, uint32_t id)
{
    for (size_t i = 0; i < t->n; i++) {
        struct nx_reg *r = t->v[i];
        if (r->id != id || r->dead)
            continue;
        r->dead = true;
        if (r->refs == 0)
            reg_drop(r);
        return true;
    }
    return false;
}

void nx_reg_ref(struct nx_reg *r)
{
    r->refs++;
}

void nx_reg_unref(struct nx_reg *r)
{
    if (r->refs > 0 && --r->refs == 0 && r->dead)
        reg_drop(r);
}

void nx_regtab_orphan(struct nx_regtab *t)
{
    t->orphan = true;
    for (size_t k = 0; k < t->n; k++)
        t->v[k]->dead = true;
    if (t->n == 0) {
        table_free_if_done(t);
        return;
    }
    for (size_t i = 0; i < t->n;) {
        struct nx_reg *r = t->v[i];
        if (r->refs) {
            i++;
            continue;
        }
        bool last = t->n == 1;
        reg_drop(r); /* moves the last entry to i; frees t with its last entry */
        if (last)
            return;
    }
}

size_t nx_regtab_count(const struct nx_regtab *t)
{
    return t->n;
}
