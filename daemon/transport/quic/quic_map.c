/*
 * quic_map.c - a small chained hash map with byte keys (connection IDs, addresses,
 * channel numbers).  Keys from the network are only ever looked up, never inserted, so
 * chains stay as short as our own random keys make them; the seed keeps them unguessable.
 */
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>

#include "mem.h"
#include "quic_int.h"

struct nx_qmap_ent {
    struct nx_qmap_ent *next;
    uint8_t klen;
    uint8_t key[20];
    void *val;
};

static uint64_t map_hash(const struct nx_qmap *m, const uint8_t *k, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ m->seed;
    for (size_t i = 0; i < n; i++) {
        h ^= k[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

void nx_qmap_init(struct nx_qmap *m)
{
    m->nb = 16;
    m->n = 0;
    m->b = nx_xcalloc(m->nb, sizeof(*m->b));
    if (gnutls_rnd(GNUTLS_RND_NONCE, &m->seed, sizeof(m->seed)) != 0)
        m->seed = (uint64_t)(uintptr_t)m;
}

void nx_qmap_fini(struct nx_qmap *m)
{
    for (size_t i = 0; i < m->nb; i++) {
        struct nx_qmap_ent *e = m->b[i];
        while (e) {
            struct nx_qmap_ent *next = e->next;
            free(e);
            e = next;
        }
    }
    free(m->b);
    m->b = NULL;
    m->nb = m->n = 0;
}

static struct nx_qmap_ent **map_slot(const struct nx_qmap *m, const void *key, size_t klen)
{
    struct nx_qmap_ent **pe = &m->b[map_hash(m, key, klen) & (m->nb - 1)];
    while (*pe && ((*pe)->klen != klen || memcmp((*pe)->key, key, klen) != 0))
        pe = &(*pe)->next;
    return pe;
}

void *nx_qmap_get(const struct nx_qmap *m, const void *key, size_t klen)
{
    if (klen > 20 || !m->b)
        return NULL;
    struct nx_qmap_ent *e = *map_slot(m, key, klen);
    return e ? e->val : NULL;
}

static void map_grow(struct nx_qmap *m)
{
    size_t nb = m->nb * 2;
    struct nx_qmap_ent **b = nx_xcalloc(nb, sizeof(*b));
    for (size_t i = 0; i < m->nb; i++) {
        struct nx_qmap_ent *e = m->b[i];
        while (e) {
            struct nx_qmap_ent *next = e->next;
            size_t j = map_hash(m, e->key, e->klen) & (nb - 1);
            e->next = b[j];
            b[j] = e;
            e = next;
        }
    }
    free(m->b);
    m->b = b;
    m->nb = nb;
}

void nx_qmap_put(struct nx_qmap *m, const void *key, size_t klen, void *val)
{
    if (klen > 20)
        abort();
    struct nx_qmap_ent **pe = map_slot(m, key, klen);
    if (*pe) {
        (*pe)->val = val;
        return;
    }
    struct nx_qmap_ent *e = nx_xcalloc(1, sizeof(*e));
    e->klen = (uint8_t)klen;
    memcpy(e->key, key, klen);
    e->val = val;
    *pe = e;
    if (++m->n > m->nb)
        map_grow(m);
}

int nx_qmap_del(struct nx_qmap *m, const void *key, size_t klen)
{
    if (klen > 20 || !m->b)
        return 0;
    struct nx_qmap_ent **pe = map_slot(m, key, klen);
    struct nx_qmap_ent *e = *pe;
    if (!e)
        return 0;
    *pe = e->next;
    free(e);
    m->n--;
    return 1;
}

void nx_qmap_each(const struct nx_qmap *m, void (*fn)(void *val, void *arg), void *arg)
{
    for (size_t i = 0; i < m->nb; i++)
        for (struct nx_qmap_ent *e = m->b[i]; e; e = e->next)
            fn(e->val, arg);
}
