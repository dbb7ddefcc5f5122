/*
 * qh_relay.c - a UDP relay between two endpoints of one loop, which drops what a rule
 * says.  Why: some faults of a handover need one packet lost and not its neighbours
 * (the close of a connection both ends have left), which loss at random gives only now
 * and then.  A talks to the relay's A side as if it were B, and B sees A at the relay's
 * B side; each datagram goes on unchanged unless the rule drops it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qh.h"

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct qh_relay *r = h->data;
    (void)hint;
    *buf = uv_buf_init((char *)r->buf, sizeof(r->buf));
}

static void on_recv(uv_udp_t *u, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                    unsigned flags)
{
    struct qh_relay *r = u->data;
    (void)flags;
    if (n <= 0 || !from)
        return;
    int from_a = u == &r->ua;
    if (from_a) { /* A's address: whoever writes to the A side */
        memcpy(&r->a_addr, from, sizeof(struct sockaddr_in));
        r->have_a = 1;
    } else if (!r->have_a) {
        return;
    }
    if (r->drop && r->drop(r->arg, from_a, (const uint8_t *)buf->base, (size_t)n)) {
        r->dropped++;
        return;
    }
    uv_buf_t b = uv_buf_init(buf->base, (unsigned)n);
    uv_udp_try_send(from_a ? &r->ub : &r->ua, &b, 1,
                    from_a ? (const struct sockaddr *)&r->b_addr
                           : (const struct sockaddr *)&r->a_addr);
}

static int side(uv_loop_t *loop, struct qh_relay *r, uv_udp_t *u, char *name, size_t len)
{
    struct sockaddr_in me;
    int namelen = sizeof(me);
    uv_ip4_addr("127.0.0.1", 0, &me);
    if (uv_udp_init(loop, u) != 0)
        return -1;
    u->data = r;
    if (uv_udp_bind(u, (const struct sockaddr *)&me, 0) != 0 ||
        uv_udp_getsockname(u, (struct sockaddr *)&me, &namelen) != 0 ||
        uv_udp_recv_start(u, on_alloc, on_recv) != 0)
        return -1;
    snprintf(name, len, "127.0.0.1:%u", (unsigned)ntohs(me.sin_port));
    return 0;
}

int qh_relay_start(uv_loop_t *loop, struct qh_relay *r, const char *b_addr)
{
    const char *colon = strrchr(b_addr, ':');
    memset(&r->have_a, 0, sizeof(*r) - offsetof(struct qh_relay, have_a));
    if (!colon || uv_ip4_addr("127.0.0.1", atoi(colon + 1), &r->b_addr) != 0)
        return -1;
    if (side(loop, r, &r->ua, r->a_side, sizeof(r->a_side)) != 0 ||
        side(loop, r, &r->ub, r->b_side, sizeof(r->b_side)) != 0)
        return -1;
    return 0;
}

void qh_relay_stop(struct qh_relay *r)
{
    uv_close((uv_handle_t *)&r->ua, NULL);
    uv_close((uv_handle_t *)&r->ub, NULL);
}
