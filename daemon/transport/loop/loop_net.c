/*
 * loop_net.c - the loop transport's simulated packet network: per-direction links with a
 * PRNG, a bandwidth queue and cuts; the packets in flight in one heap ordered by delivery
 * time; one libuv timer that delivers them.
 *
 * Delivery only ever happens from that timer, so no callback runs inside send().  A timer
 * run delivers only packets that were already in flight when it started: a zero-delay
 * exchange then takes one loop iteration per round trip instead of starving the loop.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop_int.h"
#include "mem.h"

struct lcut {
    struct lcut *next;
    char a[NX_TADDR_MAX], b[NX_TADDR_MAX]; /* b "": every link of a */
};

struct llink {
    struct llink *next;
    char src[NX_TADDR_MAX], dst[NX_TADDR_MAX];
    uint64_t rng;
    uint64_t busy_until_ns; /* the bandwidth queue drains at this time */
};

/* ---- buffers and packets ---- */

struct lbuf *lbuf_new(size_t len)
{
    struct lbuf *b = nx_xmalloc(sizeof(*b) + len);
    b->refs = 1;
    b->len = len;
    return b;
}

struct lbuf *lbuf_ref(struct lbuf *b)
{
    b->refs++;
    return b;
}

void lbuf_unref(struct lbuf *b)
{
    if (b && --b->refs == 0)
        free(b);
}

struct lpkt *lpkt_new(enum lpkt_kind kind)
{
    struct lpkt *pkt = nx_xcalloc(1, sizeof(*pkt));
    pkt->kind = kind;
    return pkt;
}

void lpkt_free(struct lpkt *pkt)
{
    if (!pkt)
        return;
    lbuf_unref(pkt->buf);
    free(pkt);
}

/* ---- PRNG: splitmix64, one stream per link direction ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) * 0x1.0p-53;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* ---- the heap of packets in flight ---- */

static int before(const struct lpkt *a, const struct lpkt *b)
{
    return a->due < b->due || (a->due == b->due && a->order < b->order);
}

static void heap_push(struct nx_loopnet *net, struct lpkt *pkt)
{
    nx_grow((void **)&net->heap, &net->capheap, net->nheap + 1, sizeof(*net->heap));
    size_t i = net->nheap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(pkt, net->heap[up]))
            break;
        net->heap[i] = net->heap[up];
        i = up;
    }
    net->heap[i] = pkt;
}

static struct lpkt *heap_pop(struct nx_loopnet *net)
{
    struct lpkt *top = net->heap[0];
    struct lpkt *last = net->heap[--net->nheap];
    size_t i = 0, n = net->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(net->heap[c + 1], net->heap[c]))
            c++;
        if (!before(net->heap[c], last))
            break;
        net->heap[i] = net->heap[c];
        i = c;
    }
    if (n > 0)
        net->heap[i] = last;
    return top;
}

/* ---- links and cuts ---- */

static struct llink *link_get(struct nx_loopnet *net, const char *src, const char *dst)
{
    for (struct llink *l = net->links; l; l = l->next)
        if (strcmp(l->src, src) == 0 && strcmp(l->dst, dst) == 0)
            return l;
    struct llink *l = nx_xcalloc(1, sizeof(*l));
    snprintf(l->src, sizeof(l->src), "%s", src);
    snprintf(l->dst, sizeof(l->dst), "%s", dst);
    /* Keyed by the addresses, not by creation order: a link's fate does not depend on
     * which other links happened to carry a packet first. */
    l->rng = net->conf.seed ^ fnv(src) ^ (fnv(dst) * 0x9e3779b97f4a7c15ull);
    splitmix(&l->rng);
    l->next = net->links;
    net->links = l;
    return l;
}

static int is_cut(const struct nx_loopnet *net, const char *x, const char *y)
{
    for (const struct lcut *c = net->cuts; c; c = c->next) {
        if (!c->b[0]) {
            if (strcmp(c->a, x) == 0 || strcmp(c->a, y) == 0)
                return 1;
        } else if ((strcmp(c->a, x) == 0 && strcmp(c->b, y) == 0) ||
                   (strcmp(c->a, y) == 0 && strcmp(c->b, x) == 0)) {
            return 1;
        }
    }
    return 0;
}

void nx_loopnet_partition(struct nx_loopnet *net, const char *a, const char *b, int on)
{
    if (!b)
        b = "";
    struct lcut **pp = &net->cuts;
    while (*pp) {
        struct lcut *c = *pp;
        int same = (strcmp(c->a, a) == 0 && strcmp(c->b, b) == 0) ||
                   (b[0] && strcmp(c->a, b) == 0 && strcmp(c->b, a) == 0);
        if (same) {
            if (on)
                return;
            *pp = c->next;
            free(c);
            NX_DEBUG("loopnet", "link %s <-> %s restored", a, b[0] ? b : "*");
            return;
        }
        pp = &c->next;
    }
    if (!on)
        return;
    struct lcut *c = nx_xcalloc(1, sizeof(*c));
    snprintf(c->a, sizeof(c->a), "%s", a);
    snprintf(c->b, sizeof(c->b), "%s", b);
    c->next = net->cuts;
    net->cuts = c;
    NX_DEBUG("loopnet", "link %s <-> %s cut", a, b[0] ? b : "*");
}

/* ---- sending and delivering ---- */

uint64_t lnet_now(const struct nx_loopnet *net)
{
    /* The loop's cached time is that of the iteration's start: a callback that copies
     * megabytes, or a test that sends before running the loop, would stamp packets with
     * a past time, and every timeout would fire at once. */
    uv_update_time(net->loop);
    return uv_now(net->loop);
}

static void timer_cb(uv_timer_t *h);

static void arm(struct nx_loopnet *net)
{
    if (net->freeing)
        return;
    if (net->nheap == 0) {
        uv_timer_stop(&net->timer);
        return;
    }
    uint64_t now = lnet_now(net), due = net->heap[0]->due;
    uv_timer_start(&net->timer, timer_cb, due > now ? due - now : 0, 0);
}

void lnet_send(struct nx_loopnet *net, struct lpkt *pkt)
{
    const struct nx_loopnet_conf *c = &net->conf;
    net->st.pkts_sent++;
    if (net->freeing || is_cut(net, pkt->src, pkt->dst)) {
        net->st.pkts_cut++;
        lpkt_free(pkt);
        return;
    }
    struct llink *l = link_get(net, pkt->src, pkt->dst);
    /* Always four draws, so that one packet's fate never shifts the next one's. */
    double r_loss = unit(&l->rng), r_jitter = unit(&l->rng);
    double r_reorder = unit(&l->rng), r_extra = unit(&l->rng);
    if (r_loss < c->loss) {
        net->st.pkts_dropped++;
        lpkt_free(pkt);
        return;
    }
    uint64_t now = lnet_now(net), depart = now;
    if (c->bandwidth) {
        uint64_t bytes = LPKT_HDR_BYTES + (pkt->kind == LPKT_DATA ? pkt->len : 0);
        if (l->busy_until_ns < now * 1000000ull)
            l->busy_until_ns = now * 1000000ull;
        l->busy_until_ns += (uint64_t)((double)bytes * 1e9 / (double)c->bandwidth);
        depart = (l->busy_until_ns + 999999) / 1000000;
    }
    uint64_t due = depart + c->delay_ms + (uint64_t)(r_jitter * (c->jitter_ms + 1));
    if (r_reorder < c->reorder) {
        due += 1 + (uint64_t)(r_extra * c->reorder_ms);
        net->st.pkts_reordered++;
    }
    pkt->due = due;
    pkt->order = net->next_order++;
    heap_push(net, pkt);
    if (net->heap[0] == pkt)
        arm(net);
}

struct lep *lnet_find_ep(struct nx_loopnet *net, const char *addr)
{
    for (struct lep *ep = net->eps; ep; ep = ep->next)
        if (!ep->dying && strcmp(ep->base.local_addr, addr) == 0)
            return ep;
    return NULL;
}

static void deliver(struct nx_loopnet *net, struct lpkt *pkt)
{
    if (is_cut(net, pkt->src, pkt->dst)) {
        net->st.pkts_cut++;
        return;
    }
    struct lep *ep = lnet_find_ep(net, pkt->dst);
    if (!ep) {
        net->st.pkts_unrouted++;
        return;
    }
    net->st.pkts_delivered++;
    lep_input(ep, pkt);
}

static void timer_cb(uv_timer_t *h)
{
    struct nx_loopnet *net = h->data;
    uint64_t now = lnet_now(net), limit = net->next_order;
    lnet_enter(net);
    while (net->nheap && net->heap[0]->due <= now && net->heap[0]->order < limit) {
        struct lpkt *pkt = heap_pop(net);
        deliver(net, pkt);
        lpkt_free(pkt);
    }
    arm(net);
    lnet_leave(net);
}

/* ---- freeing outside callbacks ---- */

void lnet_enter(struct nx_loopnet *net)
{
    net->depth++;
}

void lnet_leave(struct nx_loopnet *net)
{
    if (--net->depth > 0 || !net->need_sweep)
        return;
    net->need_sweep = 0;
    for (struct lep *ep = net->eps, *next; ep; ep = next) {
        next = ep->next;
        lep_sweep(ep);
    }
}

/* ---- the net ---- */

void nx_loopnet_conf_defaults(struct nx_loopnet_conf *c)
{
    memset(c, 0, sizeof(*c));
    c->seed = 1;
    c->mtu = 16384;
    c->idle_timeout_ms = 5000;
    c->rto_min_ms = 20;
    c->window_bytes = 4u << 20;
}

struct nx_loopnet *nx_loopnet_new(uv_loop_t *loop, const struct nx_loopnet_conf *conf)
{
    struct nx_loopnet_conf c;
    if (conf)
        c = *conf;
    else
        nx_loopnet_conf_defaults(&c);
    if (!(c.loss >= 0 && c.loss < 1) || !(c.reorder >= 0 && c.reorder < 1) || c.mtu < 64) {
        NX_ERROR("loopnet", "bad configuration: loss %g, reorder %g (both in [0, 1)), mtu %u "
                 "(at least 64)", c.loss, c.reorder, c.mtu);
        return NULL;
    }
    if (!c.idle_timeout_ms)
        c.idle_timeout_ms = 5000;
    if (!c.keepalive_ms)
        c.keepalive_ms = c.idle_timeout_ms / 5 ? c.idle_timeout_ms / 5 : 1;
    if (!c.rto_min_ms)
        c.rto_min_ms = 20;
    if (!c.reorder_ms)
        c.reorder_ms = c.delay_ms + c.jitter_ms + 2;
    if (!c.window_bytes)
        c.window_bytes = 4u << 20;
    if (c.window_bytes < c.mtu)
        c.window_bytes = c.mtu;
    struct nx_loopnet *net = nx_xcalloc(1, sizeof(*net));
    net->loop = loop;
    net->conf = c;
    uv_timer_init(loop, &net->timer);
    net->timer.data = net;
    NX_DEBUG("loopnet", "net: delay %u+%u ms, loss %g, reorder %g, bandwidth %llu B/s, "
             "seed %llu, mtu %u, idle %u ms", c.delay_ms, c.jitter_ms, c.loss, c.reorder,
             (unsigned long long)c.bandwidth, (unsigned long long)c.seed, c.mtu,
             c.idle_timeout_ms);
    return net;
}

void nx_loopnet_stats(const struct nx_loopnet *net, struct nx_loopnet_stats *out)
{
    *out = net->st;
}

static void net_close_cb(uv_handle_t *h)
{
    free(h->data);
}

void nx_loopnet_free(struct nx_loopnet *net)
{
    if (!net)
        return;
    net->freeing = 1;
    while (net->eps)
        lep_free_now(net->eps);
    while (net->nheap)
        lpkt_free(heap_pop(net));
    free(net->heap);
    while (net->links) {
        struct llink *l = net->links;
        net->links = l->next;
        free(l);
    }
    while (net->cuts) {
        struct lcut *c = net->cuts;
        net->cuts = c->next;
        free(c);
    }
    uv_timer_stop(&net->timer);
    uv_close((uv_handle_t *)&net->timer, net_close_cb);
}
