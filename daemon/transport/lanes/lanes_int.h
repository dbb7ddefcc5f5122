/*
 * lanes_int.h - the lanes' internals (transport_lanes.c on the loop thread, lanes_thread.c
 * on each lane's thread).
 *
 * The threads share two kinds of queue, each a mutex-held list with a libuv async handle
 * to wake its reader: commands from the loop thread to a lane (send, close, forget,
 * adopt, reload, resume, stats, stop) and events from the lanes to the loop thread
 * (message, sent, up, lost, copied); besides them only the buffer pool, the hand-off
 * counters, the count of lent messages copied, and the answers to reload and stats,
 * which the loop thread waits for.  A peer incarnation is named across them by an id
 * the loop thread gives it and never reuses, so an event about a peer forgotten
 * meanwhile finds nothing and is dropped.  Each queue is first in, first out: after a
 * lane handled "forget id", no event of its about id follows.
 */
#ifndef NX_LANES_INT_H
#define NX_LANES_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "bufpool.h"
#include "transport_lanes.h"

/* The pool lanes 1 and up share with the loop thread (base/bufpool.h): a send buffer is
 * taken on the loop thread and given back on a lane once acknowledged, a received one the
 * other way round.  Lane 0 keeps its endpoint's own: its connections give buffers back
 * from close callbacks that may run after this pool is gone. */
#define NX_LPOOL_KEEP 32
#define NX_LPOOL_BYTES (512u << 20)

#define NX_LENT_HEAD 96 /* the most of a lent message's header copied at lend() */

enum nx_lcmd_kind {
    NX_LC_SEND, NX_LC_ADOPT, NX_LC_CLOSE, NX_LC_FORGET, NX_LC_RELOAD, NX_LC_RESUME,
    NX_LC_STATS, NX_LC_STOP
};

struct nx_lcmd {
    struct nx_lcmd *next;
    enum nx_lcmd_kind kind;
    uint64_t id;                /* the peer incarnation */
    uint64_t channel, token;    /* SEND */
    void *msg;                  /* SEND: from nx_quic_msg_new, the lane's from here */
    /* SEND of a lent message (msg NULL until the lane copies it): the header, copied,
     * then the caller's iov, read on the lane. */
    struct iovec *lent;
    int nlent;
    size_t total;
    uint8_t head[NX_LENT_HEAD];
    size_t headlen;
    char addr[NX_TADDR_MAX];    /* ADOPT: the peer's address on this lane */
    char reason[100];           /* CLOSE */
    uint64_t seq;               /* STATS: answered in nx_lane.stat under this number */
};

enum nx_levt_kind { NX_LE_MSG, NX_LE_SENT, NX_LE_UP, NX_LE_LOST, NX_LE_COPIED };

struct nx_levt {
    struct nx_levt *next;
    enum nx_levt_kind kind;
    uint32_t lane;
    uint64_t id;
    uint64_t channel, token;
    uint8_t *data;              /* MSG: inl, or a pool buffer of cap bytes */
    size_t len, cap;
    char reason[128];           /* LOST */
    uint8_t inl[];
};

/* A lane's view of one peer connection (lane thread only). */
struct nx_lrec {
    struct nx_lrec *next;
    uint64_t id;                /* 0: arrived before lane 0 was up here (held) */
    char addr[NX_TADDR_MAX];    /* on this lane */
    struct nx_tpeer *qp;        /* NULL until dialed or arrived */
    struct nx_levt *held, *held_tail; /* id 0: what it sent meanwhile */
};

struct nx_lanes;

struct nx_lane {
    struct nx_lanes *L;
    uint32_t idx;
    uv_loop_t loop;
    uv_async_t wake;
    pthread_t th;
    struct nx_transport *t;     /* this lane's QUIC endpoint */
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* reload, stats: the loop thread waits for the answer;
                                 * settle: for lent_done */
    uint64_t lent_posted;       /* lent messages posted (loop thread only) */
    uint64_t lent_done;         /* of them copied or dropped by the lane (under mu) */
    struct nx_lcmd *head, *tail;
    int reload_done, reload_rv, rolled;
    char reload_err[256];
    struct nx_tpeer_lane stat;  /* STATS: the answer to the request stat_seq */
    uint64_t stat_seq;
    struct nx_lrec *recs;       /* lane thread only */
    /* Bytes of messages handed to the loop thread and not yet consumed there.  Past the
     * lanes' limit the lane stops reading its socket, until the loop thread has taken
     * them down to half (NX_LC_RESUME): memory stays bounded when the lanes together
     * receive faster than the one loop thread consumes. */
    atomic_size_t rx_queued;
    atomic_int rx_paused, resume_posted;
    atomic_size_t rx_peak;
};

struct nx_lpeer {
    struct nx_tpeer base;
    struct nx_lpeer *next;
    uint64_t id;
    struct nx_tpeer *p0;        /* lane 0's record */
    enum nx_tpeer_state state;
    int hello_sent;
    char reason[128];
    struct nx_lcmd *held, *held_tail; /* sends to lanes >= 1 before UP */
    uint64_t bytes_sent, bytes_recv, msgs_sent, msgs_recv; /* lanes >= 1 */
};

struct nx_lanes {
    struct nx_transport base;
    struct nx_transport *t0;
    uint32_t n;
    struct nx_lane *lane;       /* [n]; [0] unused: lane 0 is t0 on the loop thread */
    struct nx_bufpool pool;
    uv_async_t ev_wake;
    pthread_mutex_t ev_mu;
    struct nx_levt *ev_head, *ev_tail;
    struct nx_levt *delivering; /* the message event in on_message now (ops->take) */
    struct nx_lpeer *peers;
    uint64_t next_id;
    uint64_t stat_seq;          /* the last STATS request's number */
    size_t rx_limit;            /* NX_LANES_RX_LIMIT, or what nx_lanes_set_rx_limit says */
    atomic_int stopping;        /* destroy: post nothing more to the lanes */
};

/* lanes_thread.c */
int nx_lane_start(struct nx_lane *ln, const struct nx_quic_conf *conf, char *err,
                  size_t errlen);
void nx_lane_post(struct nx_lane *ln, struct nx_lcmd *c);
/* Frees a command the lane will not carry out (a stop came first). */
void nx_lcmd_drop(struct nx_lane *ln, struct nx_lcmd *c);
void nx_lane_stop(struct nx_lane *ln);

/* transport_lanes.c: called by lanes (any thread) */
void nx_lanes_event(struct nx_lanes *L, struct nx_levt *e);
void nx_levt_free(struct nx_lanes *L, struct nx_levt *e);

/* "host:port" with port moved by delta; -1 when it leaves 1..65535. */
int nx_lanes_addr_shift(const char *addr, int delta, char *out, size_t len);

#endif
