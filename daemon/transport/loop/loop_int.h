/*
 * loop_int.h - the loop transport's insides, shared by its three files:
 *   loop_net.c        the simulated packet network (delay, loss, reorder, bandwidth, cuts)
 *   transport_loop.c  endpoints, peer records, connections, the ops table
 *   loop_stream.c     reliable ordered messages per channel over lossy packets: sending
 *   loop_recv.c       the same: receiving (acknowledgements, reorder ring, reassembly)
 *
 * Freeing while callbacks run: the net counts how deep the loop is inside its own code
 * (net->depth).  Records that a callback forgets, and endpoints it destroys, are only
 * marked; the sweep at depth 0 frees them, so no frame below ever holds a dangling pointer.
 */
#ifndef NX_LOOP_INT_H
#define NX_LOOP_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <uv.h>

#include "transport.h"
#include "transport_loop.h"

/* One message's bytes, shared by the sender's queue, packets in flight and the receiver's
 * reorder buffer; freed with the last reference. */
struct lbuf {
    uint32_t refs;
    size_t len;
    uint8_t data[];
};

struct lbuf *lbuf_new(size_t len);
struct lbuf *lbuf_ref(struct lbuf *b);
void lbuf_unref(struct lbuf *b);

enum lpkt_kind {
    LPKT_DATA = 1, /* one fragment of a message on a channel */
    LPKT_ACK,      /* acknowledges one DATA packet, and all below cum */
    LPKT_PING,     /* keep-alive; also opens a connection */
    LPKT_CLOSE,    /* the sender closed the connection: reason */
    LPKT_RESET,    /* the sender has no such connection */
};

#define LPKT_HDR_BYTES 40 /* what a packet header would cost on a wire (bandwidth) */

struct lpkt {
    uint64_t due;   /* loop time (ms) of delivery */
    uint64_t order; /* send order: ties of due keep it */
    enum lpkt_kind kind;
    char src[NX_TADDR_MAX], dst[NX_TADDR_MAX];
    uint64_t src_conn, dst_conn; /* connection ids; dst_conn 0: not yet known */
    uint64_t channel, pseq;      /* DATA, ACK */
    uint64_t cum;                /* ACK: every pseq below it arrived */
    uint64_t tx;                 /* DATA: transmission number; ACK: the one it answers */
    struct lbuf *buf;            /* DATA: the whole message */
    uint64_t frag_off;           /* DATA: this fragment is buf->data[frag_off, +len) */
    uint32_t len;
    char reason[96];             /* CLOSE */
};

struct lpkt *lpkt_new(enum lpkt_kind kind);
void lpkt_free(struct lpkt *pkt);

/* ---- the net (loop_net.c) ---- */

struct lep;

struct nx_loopnet {
    uv_loop_t *loop;
    struct nx_loopnet_conf conf;
    struct lep *eps;           /* live and dying endpoints */
    struct lcut *cuts;
    struct llink *links;       /* per direction: PRNG, bandwidth queue */
    struct lpkt **heap;        /* packets in flight, min-heap on (due, order) */
    size_t nheap, capheap;
    uint64_t next_order;
    uint64_t next_conn_id;     /* connection ids only grow: newer means later */
    uv_timer_t timer;
    int depth;                 /* frames of our own code on the stack (see above) */
    int need_sweep;
    int freeing;
    struct nx_loopnet_stats st;
};

/* Takes pkt: drops it (loss, cut) or schedules its delivery. */
void lnet_send(struct nx_loopnet *net, struct lpkt *pkt);
/* Around every entry from libuv into code that may call callbacks. */
void lnet_enter(struct nx_loopnet *net);
void lnet_leave(struct nx_loopnet *net);
uint64_t lnet_now(const struct nx_loopnet *net);

/* ---- endpoints and peers (transport_loop.c) ---- */

struct lchan;
struct lseg;

struct lpeer {
    struct nx_tpeer base;
    struct lep *ep;
    struct lpeer *next;
    enum nx_tpeer_state state;
    int inbound;
    int current;   /* the record peer(addr) finds; 0 once a newer one replaced it */
    int forgotten; /* freed by the sweep */
    uint64_t lid, rid; /* our and their connection id; lid 0: not connected yet */
    uint64_t last_recv, last_sent; /* loop ms */
    char reason[128];

    /* loop_stream.c */
    struct lchan **chans; /* open-addressing map on channel */
    size_t nchans, capchans;
    struct lchan *ready_head, *ready_tail; /* channels with bytes not yet packetized */
    struct lseg *fl_head, *fl_tail;        /* sent, unacknowledged, oldest first */
    uint64_t fl_bytes;
    uint32_t fl_pkts;
    uint64_t next_tx;        /* transmission number, grows with every (re)send */
    double srtt, rttvar, min_rtt; /* ms; srtt 0: no sample yet */
    uint32_t rto;            /* ms, with backoff */

    struct nx_tpeer_stats st; /* counters; the rest is filled by stats() */
};

struct lep {
    struct nx_transport base;
    struct nx_loopnet *net;
    struct lep *next;
    struct lpeer *peers;
    uv_timer_t timer;
    int dying; /* destroy() was called: freed by the sweep */
};

/* Hands a packet from p to the net, filling in addresses and connection ids. */
void lpeer_xmit(struct lpeer *p, struct lpkt *pkt);
/* 1 while p may still carry messages: not LOST, not forgotten, endpoint alive. */
int lpeer_alive(const struct lpeer *p);
/* Marks p LOST with reason; calls on_peer(LOST) when notify. */
void lpeer_lost(struct lpeer *p, const char *reason, int notify);
/* Re-arms the endpoint's timer after p's deadlines changed. */
void lep_rearm(struct lep *ep);
/* A packet arrived for ep. */
void lep_input(struct lep *ep, const struct lpkt *pkt);
/* Frees what callbacks asked to free: forgotten records, LOST records' streams, dying
 * endpoints.  Only at depth 0. */
void lep_sweep(struct lep *ep);
struct lep *lnet_find_ep(struct nx_loopnet *net, const char *addr);
void lep_free_now(struct lep *ep);

/* ---- reliable channels (loop_stream.c, loop_recv.c) ---- */

#define CHAN_WINDOW 2048u /* pseq span a sender may open ahead of its oldest unacked */
#define RECV_WINDOW 4096u /* pseq span a receiver buffers (>= CHAN_WINDOW) */

struct lmsg;

struct lfrag {
    struct lbuf *buf; /* NULL: the slot is empty */
    uint64_t off;
    uint32_t len;
};

struct lchan {
    uint64_t id;
    /* send side */
    struct lmsg *sq_head, *sq_tail; /* messages not yet done, in send order */
    struct lmsg *cursor;            /* the first message not yet fully cut */
    struct lchan *ready_next;
    int ready;
    uint64_t snd_una, snd_next;     /* segments [snd_una, snd_next) are kept in sring */
    struct lseg **sring;
    size_t scap;                    /* power of two */
    /* receive side */
    uint64_t rcv_next;
    struct lfrag *rring;            /* [rcv_next, rcv_next + rcap) */
    size_t rcap;
    uint8_t *asm_buf;               /* the message being reassembled */
    uint64_t asm_len, asm_have;
    int asm_on;
};

/* The channel record, created on first use (send or arrival). */
struct lchan *lchan_get(struct lpeer *p, uint64_t id);
void lrecv_free(struct lchan *c);

int lstream_send(struct lpeer *p, uint64_t channel, const struct iovec *iov, int iovcnt,
                 uint64_t token);
void lstream_pump(struct lpeer *p);
void lstream_on_data(struct lpeer *p, const struct lpkt *pkt);
void lstream_on_ack(struct lpeer *p, const struct lpkt *pkt);
void lstream_on_timer(struct lpeer *p, uint64_t now);
uint64_t lstream_deadline(const struct lpeer *p); /* UINT64_MAX: none */
void lstream_init(struct lpeer *p);
void lstream_free_all(struct lpeer *p);
uint32_t lstream_count(const struct lpeer *p);

#endif
