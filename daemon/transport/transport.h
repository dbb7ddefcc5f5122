/*
 * transport.h - moving whole messages between daemons.
 *
 * This is all the layers above (rendezvous, peer tests, the collective algorithms) see of
 * the network.  Two implementations: QUIC (transport_quic*.c, the real one) and an
 * in-process loop (transport_loop.c) with simulated delay, loss and reorder for tests.
 * The transport knows nothing about jobs or collectives.
 *
 * Model:
 * - An endpoint is this daemon's; a peer is another daemon, named by the address it
 *   listens at ("host:port", "[v6]:port").  One connection per pair of daemons, opened
 *   lazily by the first send, shared by everything.  A simultaneous open resolves to one
 *   connection (the one dialed by the smaller address) before any message moves.
 * - A message is a byte string up to NX_TMSG_MAX, sent on a channel (a 64-bit key the
 *   caller picks).  Messages on one channel of one peer arrive whole, once and in order;
 *   messages on different channels never wait behind each other (QUIC: one stream per
 *   channel).
 * - send() copies the message: the caller's memory is free when it returns.  The transport
 *   holds its copy until the peer acknowledged it, then calls on_sent(token) if token != 0,
 *   which is how a caller keeps a bounded amount in flight.
 * - lend() is send() for a transport that sends on threads of its own (QUIC lanes): the
 *   copy is made on the thread that sends, not the caller's, which reads the caller's
 *   memory until on_copied(token).
 * - A peer that cannot be reached, fails the TLS check, or stays silent past the idle
 *   timeout is lost: on_peer(LOST, reason) once, every later send to it fails with
 *   -ENOTCONN until a send after peer_forget() dials it afresh.
 * - All callbacks run on the daemon's loop thread, never from inside send().
 */
#ifndef NX_TRANSPORT_H
#define NX_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define NX_TMSG_MAX (64u << 20) /* largest message, bytes */
#define NX_TADDR_MAX 64         /* "host:port" with the NUL */
#define NX_TSTREAM_MIN 4096     /* the shortest message offered streamed (on_stream) */
#define NX_TSTREAM_HEAD 128     /* at least this much of it comes with the offer */

struct nx_transport;
struct nx_tpeer;

enum nx_tpeer_state {
    NX_TPEER_CONNECTING, /* dialing or handshaking */
    NX_TPEER_UP,         /* handshake done, peer authenticated */
    NX_TPEER_LOST,       /* unreachable, rejected, silent or closed: see reason */
};

struct nx_tpeer_stats {
    char addr[NX_TADDR_MAX];
    enum nx_tpeer_state state;
    int inbound;         /* 1: the peer dialed us */
    double rtt_ms, min_rtt_ms, rttvar_ms;
    double pto_ms;       /* how long a lost last packet waits before it is sent again */
    uint64_t cwnd;       /* bytes */
    uint64_t bytes_sent, bytes_recv;  /* payload bytes of messages */
    uint64_t pkts_sent, pkts_recv, pkts_lost;
    uint64_t msgs_sent, msgs_recv;
    uint64_t queued_bytes;            /* copied by send(), not yet acknowledged */
    uint32_t streams_open;
    char cipher[48];                  /* e.g. "TLS_AES_128_GCM_SHA256", "" before UP */
    uint32_t handovers;               /* times the connection moved to a successor */
    uint32_t conns;                   /* connections to the peer now (0 or 1); 2 or 3 while
                                       * one is handed over (its successor, the one left) */
    int64_t cert_end;                 /* Unix time the proof the peer showed ends (the
                                       * earliest expiry in its chain); 0: none shown */
    char reason[128];                 /* why LOST */
};

/* One of the connections that carry a peer when the transport runs several per pair (QUIC
 * lanes): lane i takes channels whose low 4 bits mod the lane count are i. */
#define NX_TPEER_LANES_MAX 16

struct nx_tpeer_lane {
    enum nx_tpeer_state state;        /* CONNECTING also while the lane has not dialed */
    double rtt_ms;
    uint64_t cwnd;
    uint64_t bytes_sent, bytes_recv;  /* payload bytes of messages */
    uint64_t pkts_sent, pkts_recv, pkts_lost;
    uint64_t queued_bytes;
    uint32_t streams_open;
};

struct nx_transport_cb {
    void *arg;
    /* A whole message arrived; data is valid during the call only. */
    void (*on_message)(void *arg, struct nx_tpeer *p, uint64_t channel, const void *data,
                       size_t len);
    /* The peer came up (inbound peers first appear here) or was lost. */
    void (*on_peer)(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *reason);
    /* A message sent with this token was acknowledged by the peer.  May be NULL. */
    void (*on_sent)(void *arg, struct nx_tpeer *p, uint64_t token);
    /* A message lend() kept pointers into is copied: the memory is the caller's again.
     * Comes for every lend() that returned 1, the peer lost or not (so no peer), before
     * its on_sent.  May be NULL for a caller that never lends. */
    void (*on_copied)(void *arg, uint64_t token);
    /* Optional (NULL: every message comes whole, by on_message).  A message of at least
     * NX_TSTREAM_MIN bytes that arrives in pieces (QUIC packets) is offered as it begins,
     * with its first headlen >= NX_TSTREAM_HEAD bytes (valid during the call): NULL lets
     * it come whole; anything else is the caller's sink, which then gets every byte of
     * the message from the first, in order, piece by piece as packets bring them
     * (on_stream_data; valid during the call), then on_stream_end(sink, 1) after the last
     * one, or on_stream_end(sink, 0) when the connection ends inside the message.  The
     * rest of that one never comes; a connection that carries the peer on (a handover)
     * may bring the whole message again, by on_message or on_stream. */
    void *(*on_stream)(void *arg, struct nx_tpeer *p, uint64_t channel, const void *head,
                       size_t headlen, size_t len);
    void (*on_stream_data)(void *arg, void *sink, const void *data, size_t n);
    void (*on_stream_end)(void *arg, void *sink, int whole);
};

struct nx_transport_ops {
    const char *name;
    /* The peer at addr, created (not yet dialed) if new.  NULL with err on a bad address. */
    struct nx_tpeer *(*peer)(struct nx_transport *t, const char *addr, char *err,
                             size_t errlen);
    /* Queues one message (iov gathered, total <= NX_TMSG_MAX).  0, -ENOTCONN for a lost
     * peer, -EMSGSIZE, -ENOMEM. */
    int (*send)(struct nx_tpeer *p, uint64_t channel, const struct iovec *iov, int iovcnt,
                uint64_t token);
    /* Optional (NULL: use send).  As send(), but iov[1..iovcnt) may be read after it
     * returns (iov[0], a header, is copied at once): 1 when the transport kept pointers to
     * them and reads them until it calls on_copied(token) (token != 0), 0 when it copied
     * them at once as send() does, or send()'s errors. */
    int (*lend)(struct nx_tpeer *p, uint64_t channel, const struct iovec *iov, int iovcnt,
                uint64_t token);
    /* Optional (NULL: never).  From inside on_message: takes the buffer data (the message's
     * first byte) lies in, which is the caller's from then on, to free(); NULL when it
     * cannot be taken (it lies in a packet, or is small): copy it then. */
    void *(*take)(struct nx_transport *t, const void *data);
    /* Optional, with lend: returns once every lent message is copied (its on_copied may
     * still be on its way).  For a caller about to free or reuse memory it lent without
     * waiting for on_copied (an op that failed).  Waits for other threads. */
    void (*settle)(struct nx_transport *t);
    /* Closes the connection now (the peer sees it lost with reason); state becomes LOST. */
    void (*close_peer)(struct nx_tpeer *p, const char *reason);
    /* Drops a LOST peer's record; the pointer is invalid afterwards. */
    void (*peer_forget)(struct nx_tpeer *p);
    /* Hands what send() queued to the network now rather than at the loop's next turn.
     * For the end of a burst of sends (the node layer after serving its ranks); never
     * from inside a transport callback. */
    void (*progress)(struct nx_transport *t);
    void (*stats)(struct nx_tpeer *p, struct nx_tpeer_stats *out);
    /* The connections that carry p, one per lane, into out[0..max): how many there are
     * (0 for a transport with one connection a pair, where stats says it all).  May
     * wait for other threads: for inspection (nexarctl), not the data path.  NULL: none. */
    uint32_t (*lanes)(struct nx_tpeer *p, struct nx_tpeer_lane *out, uint32_t max);
    /* Calls fn for every peer record. */
    void (*each_peer)(struct nx_transport *t, void (*fn)(struct nx_tpeer *, void *), void *arg);
    /* Closes every connection (reason "shutdown") and frees everything.  Loop handles are
     * closed, so run the loop once more before closing it. */
    void (*destroy)(struct nx_transport *t);
};

/* Every implementation's endpoint starts with this. */
struct nx_transport {
    const struct nx_transport_ops *ops;
    struct nx_transport_cb cb;
    char local_addr[NX_TADDR_MAX]; /* the address peers know us by */
};

/* Every implementation's peer starts with this. */
struct nx_tpeer {
    struct nx_transport *t;
    char addr[NX_TADDR_MAX]; /* canonical: numeric host, port ("[::1]:7000") */
    void *user;              /* the layer above's slot (e.g. the cluster's node record) */
};

const char *nx_tpeer_state_name(enum nx_tpeer_state st);

/* A lane's figures, from the stats of the connection that is that lane. */
static inline struct nx_tpeer_lane nx_tpeer_lane_of(const struct nx_tpeer_stats *s)
{
    return (struct nx_tpeer_lane){.state = s->state, .rtt_ms = s->rtt_ms, .cwnd = s->cwnd,
                                  .bytes_sent = s->bytes_sent, .bytes_recv = s->bytes_recv,
                                  .pkts_sent = s->pkts_sent, .pkts_recv = s->pkts_recv,
                                  .pkts_lost = s->pkts_lost, .queued_bytes = s->queued_bytes,
                                  .streams_open = s->streams_open};
}

#endif
