/*
 * transport_loop.h - an in-process implementation of transport.h for simulation tests.
 *
 * A "net" joins any number of endpoints that live on one libuv loop.  Between them it
 * carries packets (at most mtu payload bytes each) with a delay, jitter, loss, reordering
 * and an optional bandwidth cap, all drawn from a seeded PRNG.  Each endpoint is a
 * struct nx_transport with the promises of QUIC, kept by a small reliability layer
 * (loop_stream.c): per-channel packet sequence numbers, acknowledgements, retransmission
 * on timeout and on later packets' acknowledgements, a reorder buffer, duplicate removal.
 *
 *     struct nx_loopnet_conf c;
 *     nx_loopnet_conf_defaults(&c);
 *     c.delay_ms = 2;  c.jitter_ms = 1;  c.loss = 0.05;  c.reorder = 0.02;
 *     c.seed = 42;  c.idle_timeout_ms = 300;
 *     struct nx_loopnet *net = nx_loopnet_new(loop, &c);
 *     struct nx_transport *a = nx_loopnet_endpoint(net, "node0:1", &callbacks, err, sizeof err);
 *     struct nx_transport *b = nx_loopnet_endpoint(net, "node1:1", &callbacks, err, sizeof err);
 *     struct nx_tpeer *p = a->ops->peer(a, "node1:1", err, sizeof err);
 *     a->ops->send(p, channel, iov, 1, token);       // b's on_message fires from the loop
 *     nx_loopnet_partition(net, "node0:1", "node1:1", 1);   // both sides LOST after idle
 *     ...
 *     a->ops->destroy(a);  b->ops->destroy(b);  nx_loopnet_free(net);
 *     uv_run(loop, UV_RUN_NOWAIT);                   // let the timers close
 *
 * Behaviour, the same as the QUIC transport's where transport.h is silent:
 * - Addresses are "name:port" strings (any name without ':' or spaces; port 1..65535), used
 *   as given: "node1:1", "10.0.0.1:7000".  A peer at an address no endpoint holds is
 *   dialed like any other and is LOST after the idle timeout.
 * - A peer is UP once the first packet from it arrives: for the dialing side that is the
 *   first acknowledgement, for the other side the first data packet (on_peer UP comes
 *   before that packet's message).  Data flows before UP; simultaneous dials merge into one
 *   connection.
 * - LOST reasons: "idle timeout: nothing heard for N ms", "peer closed: <its reason>"
 *   (close_peer or destroy on the other side), "connection reset by peer" (the other
 *   endpoint was destroyed and a new one took its address, or it forgot us),
 *   "peer opened a new connection (it restarted or lost ours)".  Records are never
 *   revived: a LOST record stays until peer_forget(); a later connection gets a new record.
 * - close_peer() calls no on_peer for the local side; destroy() calls no callback.
 *   close_peer(), peer_forget() and send() may be called from inside any callback, and so
 *   may destroy() of the endpoint or of any other endpoint of the net.
 * - on_sent fires per channel in send order, once every packet of the message was
 *   acknowledged.  Messages still queued when a peer is lost are dropped without on_sent.
 * - Keep-alives (every keepalive_ms of silence) keep idle connections up, as QUIC's do.
 *
 * Reproducibility: every link direction draws loss, jitter and reordering from its own
 * PRNG seeded by (seed, source, destination), in the order its packets are sent.  The same
 * seed and the same sequence of sends give the same fate to the same packets; timing
 * (libuv's millisecond clock) can still shift which packet is which under heavy load.
 */
#ifndef NX_TRANSPORT_LOOP_H
#define NX_TRANSPORT_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "transport.h"

struct nx_loopnet;

struct nx_loopnet_conf {
    uint32_t delay_ms;        /* one-way delay of every packet */
    uint32_t jitter_ms;       /* plus a uniform 0..jitter_ms per packet */
    double loss;              /* probability that a packet (any kind) is dropped, 0 <= loss < 1 */
    double reorder;           /* probability that a packet is held back by 1..reorder_ms
                               * more, so that later ones overtake it */
    uint32_t reorder_ms;      /* 0: delay_ms + jitter_ms + 2 */
    uint64_t bandwidth;       /* bytes/s per direction of each link (packets queue); 0: no cap */
    uint64_t seed;
    uint32_t mtu;             /* payload bytes per packet (default 16 KiB, at least 64) */
    uint32_t idle_timeout_ms; /* silence after which a peer is lost (default 5000) */
    uint32_t keepalive_ms;    /* ping after this much quiet (0: idle_timeout_ms / 5) */
    uint32_t rto_min_ms;      /* smallest retransmission timeout (default 20) */
    uint64_t window_bytes;    /* unacknowledged payload bytes per peer (default 4 MiB) */
};

/* The defaults above: no delay, no loss, no cap, seed 1. */
void nx_loopnet_conf_defaults(struct nx_loopnet_conf *c);

/* A net on loop; conf is copied (NULL: defaults).  NULL with a log line when conf is out of
 * range (loss or reorder outside [0, 1), mtu < 64). */
struct nx_loopnet *nx_loopnet_new(uv_loop_t *loop, const struct nx_loopnet_conf *conf);

/*
 * An endpoint at addr on net.  The callbacks are copied.  Returns NULL with a message in
 * err for a malformed address or one that another live endpoint holds.  Free it with
 * t->ops->destroy(t): the peers see "peer closed: shutdown" (if that packet is not lost).
 */
struct nx_transport *nx_loopnet_endpoint(struct nx_loopnet *net, const char *addr,
                                         const struct nx_transport_cb *cb, char *err,
                                         size_t errlen);

/* Cuts (on = 1) or restores (on = 0) the link between the endpoints at a and b, both
 * directions; b NULL: every link of a.  Packets in flight on a cut link are dropped when
 * they arrive.  Cuts are by address, so they outlive endpoints. */
void nx_loopnet_partition(struct nx_loopnet *net, const char *a, const char *b, int on);

/* Packet counters of the whole net, for tests that want to see the faults happen. */
struct nx_loopnet_stats {
    uint64_t pkts_sent;       /* handed to the net, every kind */
    uint64_t pkts_dropped;    /* lost by the loss draw */
    uint64_t pkts_cut;        /* dropped by a partition */
    uint64_t pkts_reordered;  /* held back by the reorder draw */
    uint64_t pkts_unrouted;   /* no endpoint at the destination */
    uint64_t pkts_delivered;
};
void nx_loopnet_stats(const struct nx_loopnet *net, struct nx_loopnet_stats *out);

/* Destroys the endpoints still open (no callbacks), drops the packets in flight and
 * closes the net's timer: run the loop once more before closing it. */
void nx_loopnet_free(struct nx_loopnet *net);

#endif
