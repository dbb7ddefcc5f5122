/*
 * test_qmap.c - connection-ID routing: the byte-keyed hash map
 * (daemon/transport/quic/quic_map.c) against a plain array that is obviously right, and the
 * route table on top of it (nx_qroute_add/del/del_all in quic_server.c) with connections
 * that never touch ngtcp2.
 *
 * Keys from the network are only looked up, our own are inserted, so the map must be
 * exact for every key length 0..20 (CIDs, address keys, 8-byte channel numbers), through
 * bucket collisions and growth, and must never mistake a key for its prefix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qh.h"
#include "quic_int.h"

/* ---- the reference: an array, searched linearly ---- */

struct ref_ent {
    uint8_t key[20];
    size_t klen;
    void *val;
    int live;
};

struct ref {
    struct ref_ent *e;
    size_t n, cap, live;
};

/* A key's one entry, live or deleted (a deleted key put again comes back to life). */
static struct ref_ent *ref_find(struct ref *r, const uint8_t *k, size_t klen)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->e[i].klen == klen && !memcmp(r->e[i].key, k, klen))
            return &r->e[i];
    return NULL;
}

static void ref_put(struct ref *r, const uint8_t *k, size_t klen, void *val)
{
    struct ref_ent *e = ref_find(r, k, klen);
    if (!e) {
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 64;
            r->e = realloc(r->e, r->cap * sizeof(*r->e));
        }
        e = &r->e[r->n++];
        memcpy(e->key, k, klen);
        e->klen = klen;
        e->live = 0;
    }
    if (!e->live)
        r->live++;
    e->live = 1;
    e->val = val;
}

static int ref_del(struct ref *r, const uint8_t *k, size_t klen)
{
    struct ref_ent *e = ref_find(r, k, klen);
    if (!e || !e->live)
        return 0;
    e->live = 0;
    r->live--;
    return 1;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Every value is the address of a distinct counter here: each() counts its visits. */
static unsigned visits[1 << 14];

static void count_visit(void *val, void *arg)
{
    (void)arg;
    visits[(unsigned *)val - visits]++;
}

/* Every key the reference has (live or deleted) answers as the reference does; each()
 * visits every live value once and nothing else. */
static void agree(struct nx_qmap *m, struct ref *r, const char *ctx)
{
    int bad = 0;
    for (size_t i = 0; i < r->n; i++) {
        void *want = r->e[i].live ? r->e[i].val : NULL;
        if (nx_qmap_get(m, r->e[i].key, r->e[i].klen) != want && bad++ < 3)
            fprintf(stderr, "%s: key %zu (len %zu) answers wrong\n", ctx, i, r->e[i].klen);
    }
    QH_CHECK(bad == 0);
    QH_CHECK(m->n == r->live);
    QH_CHECK(m->n <= m->nb); /* grown in time: chains stay short */
    memset(visits, 0, sizeof(visits));
    nx_qmap_each(m, count_visit, NULL);
    size_t live_seen = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->e[i].live) {
            unsigned *v = r->e[i].val;
            if (*v != 1 && bad++ < 3)
                fprintf(stderr, "%s: value of key %zu visited %u times\n", ctx, i, *v);
            live_seen += *v;
        }
    size_t total = 0;
    for (size_t i = 0; i < sizeof(visits) / sizeof(visits[0]); i++)
        total += visits[i];
    QH_CHECK(bad == 0 && total == r->live && live_seen == r->live);
}

/* Random keys, thousands of them, lengths 0..20 (16 most often, as our CIDs), random
 * put / overwrite / del / del of an absent key, checked against the reference as it goes
 * (whose linear search bounds the count). */
static void test_random(void)
{
    struct nx_qmap m;
    struct ref r = {0};
    nx_qmap_init(&m);
    size_t nb0 = m.nb;
    size_t next_val = 0;
    for (int step = 0; step < 10000; step++) {
        uint8_t k[20];
        size_t klen;
        uint64_t x = rnd();
        if (r.n && x % 4 == 0) { /* an old key again: overwrite or delete it */
            struct ref_ent *e = &r.e[rnd() % r.n];
            klen = e->klen;
            memcpy(k, e->key, klen);
        } else {
            klen = x % 3 ? 16 : (size_t)(rnd() % 21);
            for (size_t i = 0; i < klen; i++)
                k[i] = (uint8_t)rnd();
        }
        if (x % 7 == 0) {
            int had = ref_del(&r, k, klen);
            QH_CHECK(nx_qmap_del(&m, k, klen) == had);
        } else {
            ref_put(&r, k, klen, &visits[next_val]);
            nx_qmap_put(&m, k, klen, &visits[next_val++]);
        }
        if (step % 1000 == 999)
            agree(&m, &r, "random");
    }
    agree(&m, &r, "random, end");
    QH_CHECK(m.nb > nb0); /* it grew */
    if (m.nb <= nb0)
        fprintf(stderr, "random: %zu keys, still %zu buckets\n", m.n, m.nb);

    /* Delete everything, through the map's own keys; absent ones stay absent. */
    for (size_t i = 0; i < r.n; i++) {
        int had = r.e[i].live;
        QH_CHECK(nx_qmap_del(&m, r.e[i].key, r.e[i].klen) == had);
        r.e[i].live = 0;
    }
    r.live = 0;
    agree(&m, &r, "emptied");
    nx_qmap_fini(&m);
    free(r.e);
}

/* Keys that are prefixes of each other, all-zero keys of every length, the empty key. */
static void test_lengths(void)
{
    struct nx_qmap m;
    struct ref r = {0};
    unsigned *vals = visits;
    uint8_t zero[20] = {0}, abc[20];
    for (int i = 0; i < 20; i++)
        abc[i] = (uint8_t)('a' + i);
    nx_qmap_init(&m);
    for (size_t len = 0; len <= 20; len++) {
        nx_qmap_put(&m, zero, len, &vals[len]);
        ref_put(&r, zero, len, &vals[len]);
        nx_qmap_put(&m, abc, len, &vals[21 + len]);
        ref_put(&r, abc, len, &vals[21 + len]);
    }
    agree(&m, &r, "lengths");
    /* Too long to be a key: never found, never deleted. */
    uint8_t big[32] = {0};
    QH_CHECK(nx_qmap_get(&m, big, 21) == NULL);
    QH_CHECK(nx_qmap_del(&m, big, 21) == 0);
    /* The map keeps its own copy of the key bytes. */
    uint8_t k[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    nx_qmap_put(&m, k, 8, &vals[50]);
    ref_put(&r, k, 8, &vals[50]);
    k[0] = 9;
    QH_CHECK(nx_qmap_get(&m, k, 8) == NULL);
    k[0] = 1;
    QH_CHECK(nx_qmap_get(&m, k, 8) == &vals[50]);
    /* Deleting a prefix leaves the longer key, and the other way round. */
    QH_CHECK(nx_qmap_del(&m, abc, 5) == 1 && ref_del(&r, abc, 5) == 1);
    QH_CHECK(nx_qmap_del(&m, zero, 20) == 1 && ref_del(&r, zero, 20) == 1);
    QH_CHECK(nx_qmap_del(&m, zero, 20) == 0); /* twice: absent */
    agree(&m, &r, "lengths after del");
    nx_qmap_fini(&m);
    /* A finished map answers nothing and deletes nothing. */
    QH_CHECK(nx_qmap_get(&m, k, 8) == NULL && nx_qmap_del(&m, k, 8) == 0);
    free(r.e);
}

/* Which bucket a key lands in: the only non-empty one of a map holding just it. */
static size_t bucket_of(struct nx_qmap *m, const uint8_t *k, size_t klen)
{
    nx_qmap_put(m, k, klen, visits);
    size_t b = m->nb;
    for (size_t i = 0; i < m->nb; i++)
        if (m->b[i])
            b = i;
    nx_qmap_del(m, k, klen);
    return b;
}

/* Real collisions: six keys of one bucket, found by trying, so that the chain is walked
 * and cut at its head, middle and tail. */
static void test_collisions(void)
{
    struct nx_qmap m;
    struct ref r = {0};
    unsigned *vals = visits + 100;
    uint8_t keys[6][16];
    nx_qmap_init(&m);
    size_t target = m.nb, found = 0;
    for (int tries = 0; found < 6 && tries < 100000; tries++) {
        uint8_t k[16];
        for (int i = 0; i < 16; i++)
            k[i] = (uint8_t)rnd();
        size_t b = bucket_of(&m, k, 16);
        if (target == m.nb)
            target = b;
        if (b == target)
            memcpy(keys[found++], k, 16);
    }
    QH_CHECK(found == 6);
    /* Five fit without growth (nb 16), so the chain is really five long. */
    for (int i = 0; i < 5; i++) {
        nx_qmap_put(&m, keys[i], 16, &vals[i]);
        ref_put(&r, keys[i], 16, &vals[i]);
    }
    QH_CHECK(m.nb == 16);
    agree(&m, &r, "chain");
    QH_CHECK(nx_qmap_get(&m, keys[5], 16) == NULL); /* same bucket, not there */
    QH_CHECK(nx_qmap_del(&m, keys[5], 16) == 0);
    int order[5] = {2, 0, 4, 1, 3}; /* middle, then ends */
    for (int i = 0; i < 5; i++) {
        QH_CHECK(nx_qmap_del(&m, keys[order[i]], 16) == 1);
        ref_del(&r, keys[order[i]], 16);
        agree(&m, &r, "chain, cut");
    }
    nx_qmap_fini(&m);
    free(r.e);
}

/* ---- the route table: CIDs -> connections ---- */

static ngtcp2_cid cid_of(uint8_t tag, size_t len)
{
    ngtcp2_cid c;
    memset(&c, 0, sizeof(c));
    c.datalen = len;
    for (size_t i = 0; i < len; i++)
        c.data[i] = (uint8_t)(tag + i);
    return c;
}

static void test_routes(void)
{
    struct nx_quic *q = calloc(1, sizeof(*q));
    struct nx_qconn *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    nx_qmap_init(&q->routes);
    a->q = b->q = q;

    /* a gets 16 CIDs (its limit), the 17th is not routed; an empty CID never is. */
    for (uint8_t i = 0; i < 17; i++) {
        ngtcp2_cid c = cid_of((uint8_t)(i * 15), NX_QSCID_LEN);
        nx_qroute_add(a, &c);
    }
    ngtcp2_cid empty = cid_of(0, 0);
    nx_qroute_add(b, &empty);
    QH_CHECK(a->ncids == 16 && b->ncids == 0 && q->routes.n == 16);
    ngtcp2_cid c17 = cid_of(16 * 15, NX_QSCID_LEN);
    QH_CHECK(nx_qmap_get(&q->routes, c17.data, c17.datalen) == NULL);
    for (uint8_t i = 0; i < 16; i++) {
        ngtcp2_cid c = cid_of((uint8_t)(i * 15), NX_QSCID_LEN);
        QH_CHECK(nx_qmap_get(&q->routes, c.data, c.datalen) == a);
    }

    /* A client-chosen DCID of another length routes too (an accepted Initial's). */
    ngtcp2_cid odd = cid_of(7, 8);
    nx_qroute_add(b, &odd);
    QH_CHECK(nx_qmap_get(&q->routes, odd.data, 8) == b);

    /* b takes over one of a's CIDs (a newer connection from the same peer): a's
     * teardown must not unroute it. */
    ngtcp2_cid shared = cid_of(30, NX_QSCID_LEN);
    nx_qroute_add(b, &shared);
    QH_CHECK(nx_qmap_get(&q->routes, shared.data, shared.datalen) == b);

    /* del: one CID; route_hit (the one-entry cache in front of the map) is dropped. */
    q->route_hit = a;
    ngtcp2_cid c0 = cid_of(0, NX_QSCID_LEN);
    nx_qroute_del(a, &c0);
    QH_CHECK(q->route_hit == NULL);
    QH_CHECK(nx_qmap_get(&q->routes, c0.data, c0.datalen) == NULL && a->ncids == 15);
    nx_qroute_del(a, &c0); /* again: nothing */
    QH_CHECK(a->ncids == 15);
    nx_qroute_del(b, &c17); /* never b's: nothing */
    QH_CHECK(b->ncids == 2);

    q->route_hit = a;
    nx_qroute_del_all(a);
    QH_CHECK(q->route_hit == NULL && a->ncids == 0);
    QH_CHECK(q->routes.n == 2); /* b's two remain, the shared one included */
    QH_CHECK(nx_qmap_get(&q->routes, shared.data, shared.datalen) == b);
    QH_CHECK(nx_qmap_get(&q->routes, odd.data, 8) == b);
    nx_qroute_del_all(b);
    QH_CHECK(q->routes.n == 0);

    nx_qmap_fini(&q->routes);
    free(a);
    free(b);
    free(q);
}

int main(void)
{
    test_lengths();
    test_collisions();
    test_random();
    test_routes();
    if (qh_failures) {
        fprintf(stderr, "test_qmap: %d failures\n", qh_failures);
        return 1;
    }
    printf("test_qmap: ok\n");
    return 0;
}
