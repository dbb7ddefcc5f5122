/*
 * loop_recv.c - the receiving side of the loop transport's channels.
 *
 * Every DATA packet is acknowledged, duplicates included (their first ACK may have been
 * lost), with the channel's cumulative point and the transmission number it answers.
 * Segments ahead of the next expected one wait in a reorder ring; in-order ones are
 * reassembled and delivered.  A message that fits one segment is delivered straight from
 * the packet's buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop_int.h"
#include "mem.h"

static struct lfrag *rslot(struct lchan *c, uint64_t pseq)
{
    return &c->rring[pseq & (c->rcap - 1)];
}

static void rring_room(struct lchan *c, uint64_t span)
{
    if (span < c->rcap)
        return;
    size_t cap = c->rcap ? c->rcap : 16;
    while (cap <= span)
        cap *= 2;
    struct lfrag *r = nx_xcalloc(cap, sizeof(*r));
    for (uint64_t q = c->rcv_next; q < c->rcv_next + c->rcap; q++)
        r[q & (cap - 1)] = *rslot(c, q);
    free(c->rring);
    c->rring = r;
    c->rcap = cap;
}

static void send_ack(struct lpeer *p, const struct lchan *c, uint64_t pseq, uint64_t tx)
{
    struct lpkt *pkt = lpkt_new(LPKT_ACK);
    pkt->channel = c->id;
    pkt->pseq = pseq;
    pkt->tx = tx;
    pkt->cum = c->rcv_next;
    lpeer_xmit(p, pkt);
}

static void deliver(struct lpeer *p, const struct lchan *c, const void *data, size_t len)
{
    struct nx_transport *t = &p->ep->base;
    p->st.msgs_recv++;
    p->st.bytes_recv += len;
    if (t->cb.on_message)
        t->cb.on_message(t->cb.arg, &p->base, c->id, data, len);
}

static void violation(struct lpeer *p, const char *what)
{
    char why[120];
    snprintf(why, sizeof(why), "protocol violation: %s", what);
    NX_WARN("loopnet", "%s -> %s: %s", p->ep->base.local_addr, p->base.addr, why);
    struct lpkt *pkt = lpkt_new(LPKT_CLOSE);
    snprintf(pkt->reason, sizeof(pkt->reason), "%.*s", (int)sizeof(pkt->reason) - 1, why);
    lpeer_xmit(p, pkt);
    lpeer_lost(p, why, 1);
}

/* Takes one in-order fragment; 0 when p went away (a callback closed it, or a bad
 * fragment did). */
static int absorb(struct lpeer *p, struct lchan *c, const struct lbuf *b, uint64_t off,
                  uint32_t len)
{
    /* The fragment's bytes are the only thing read from b; its length only marks the
     * message's end, as a length field would on a wire. */
    uint64_t msg_len = b->len;
    if (off > msg_len || len > msg_len - off) {
        violation(p, "fragment outside its message");
        return 0;
    }
    if (!c->asm_on) {
        if (off != 0) {
            violation(p, "message does not start at offset 0");
            return 0;
        }
        if (len == msg_len) {
            deliver(p, c, b->data, len);
            return lpeer_alive(p);
        }
        c->asm_buf = nx_xmalloc(msg_len);
        c->asm_len = msg_len;
        c->asm_have = 0;
        c->asm_on = 1;
    } else if (off != c->asm_have || msg_len != c->asm_len || len == 0) {
        violation(p, "fragments out of order within a message");
        return 0;
    }
    memcpy(c->asm_buf + c->asm_have, b->data + off, len);
    c->asm_have += len;
    if (c->asm_have < c->asm_len)
        return 1;
    uint8_t *msg = c->asm_buf;
    c->asm_buf = NULL;
    c->asm_on = 0;
    deliver(p, c, msg, c->asm_len);
    free(msg);
    return lpeer_alive(p);
}

void lstream_on_data(struct lpeer *p, const struct lpkt *pkt)
{
    struct lchan *c = lchan_get(p, pkt->channel);
    uint64_t q = pkt->pseq;
    if (!pkt->buf)
        return;
    if (q < c->rcv_next) { /* a duplicate: its ACK was lost or is late */
        send_ack(p, c, q, pkt->tx);
        return;
    }
    if (q - c->rcv_next >= RECV_WINDOW)
        return; /* further ahead than any honest sender goes */
    if (q != c->rcv_next) {
        rring_room(c, q - c->rcv_next);
        struct lfrag *f = rslot(c, q);
        if (!f->buf) {
            f->buf = lbuf_ref(pkt->buf);
            f->off = pkt->frag_off;
            f->len = pkt->len;
        }
        send_ack(p, c, q, pkt->tx);
        return;
    }
    /* In order: acknowledge the whole run that is now contiguous, then deliver it. */
    uint64_t end = q + 1;
    while (c->rcap && end < c->rcv_next + c->rcap && rslot(c, end)->buf)
        end++;
    uint64_t first = c->rcv_next;
    c->rcv_next = end;
    send_ack(p, c, q, pkt->tx);
    if (!absorb(p, c, pkt->buf, pkt->frag_off, pkt->len))
        return;
    for (uint64_t s = first + 1; s < end; s++) {
        struct lfrag f = *rslot(c, s);
        memset(rslot(c, s), 0, sizeof(f));
        int ok = absorb(p, c, f.buf, f.off, f.len);
        lbuf_unref(f.buf);
        if (!ok)
            return;
    }
}

void lrecv_free(struct lchan *c)
{
    for (size_t i = 0; i < c->rcap; i++)
        lbuf_unref(c->rring[i].buf);
    free(c->rring);
    c->rring = NULL;
    c->rcap = 0;
    free(c->asm_buf);
    c->asm_buf = NULL;
}
