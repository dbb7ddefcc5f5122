/*
 * transport_lanes.h - several QUIC connections per pair of daemons, each driven by a thread
 * of its own, behind the one transport.h interface.
 *
 * One loop thread runs a QUIC connection's packet protection, UDP I/O and ngtcp2 for every
 * peer, so a daemon moves what one core can encrypt however many it has.  Lanes spread
 * that: lane 0 is an ordinary QUIC endpoint on the daemon's loop (listen port P; it also
 * serves inspection and names every peer), and lane i (1 <= i < n) is another endpoint on
 * port P + i, with its own libuv loop on its own thread.  A message on channel ch travels
 * on lane (ch mod 16) mod n (nx_lanes_of): each channel keeps its order, consecutive
 * channels use different lanes, and a channel whose low 4 bits are 0 stays on lane 0.
 * The layer above spreads a large op over consecutive channels from a multiple of 16, so
 * that its first part, all a small op has, needs no hand-off between threads: on 2 cores
 * an 8 B all_reduce took 120 us on another lane against 33 us on lane 0.
 *
 * What the layer above sees is transport.h unchanged: one record per peer (named by its
 * lane-0 address), all callbacks on the daemon's loop thread.  Beyond transport.h:
 * - Lane 0 comes first.  A send on lane i before the peer is UP waits (copied) until
 *   lane 0 is, and the first send of all goes out on lane 0 as a hello naming this
 *   node's lane count, which the peer checks: nodes with different counts are refused
 *   with a reason that says so.  A connection that arrives on lane i from an address
 *   whose lane-0 connection is not up here yet is held (its messages too) until it is.
 * - A peer is UP when its lane-0 connection is; it is LOST as soon as any lane is (the
 *   reason names the lane), and every other lane's connection is closed with it.
 * - Every node's lane i listens on its lane-0 port + i: a daemon behind a port mapping
 *   needs the n ports mapped alike.  With listen port 0 the lanes follow the port the
 *   kernel gave lane 0 (the set is picked again when a port above it is taken).
 * - A lane holds at most NX_LANES_RX_LIMIT (and one read batch) for the loop thread:
 *   past it, it stops reading its socket until the loop thread has caught up.
 * - A message received on lane i >= 1 is handed to the loop thread in the buffer it was
 *   assembled in (nx_quic_take_delivered), or copied on the lane's thread when it came
 *   whole in one packet; sends are copied once on the loop thread (as send() promises)
 *   and queued on the lane without another copy.  Large buffers come from one pool shared
 *   by all lanes, so a steady transfer does not fault in fresh pages.
 * - Streamed receives (on_stream) come from lane 0 alone, which runs on the loop thread;
 *   the other lanes hand over whole messages.
 */
#ifndef NX_TRANSPORT_LANES_H
#define NX_TRANSPORT_LANES_H

#include <stdint.h>

#include <uv.h>

#include "transport.h"
#include "transport_quic.h"

#define NX_LANES_MAX 16 /* a power of 2: the channel bits that pick a lane */
/* Lane 0's hello; a node with one lane (no lanes layer) refuses what arrives on it. */
#define NX_LANES_HELLO (UINT64_MAX - 1)

static inline uint32_t nx_lanes_of(uint64_t channel, uint32_t n)
{
    return (uint32_t)(channel & (NX_LANES_MAX - 1)) % n;
}

/* The hello (lanes_hello.c): "nexar-lanes N".  put: its length (0: cap too small);
 * parse: 0 with *n in 1..NX_LANES_MAX, or -1 for anything else. */
size_t nx_lanes_hello_put(char *buf, size_t cap, unsigned n);
int nx_lanes_hello_parse(const void *data, size_t len, unsigned *n);

/* n lanes (2..NX_LANES_MAX) from conf; lane i binds conf->listen's port + i (and
 * advertises conf->advertise's + i).  NULL with err as nx_quic_new, or naming the lane. */
struct nx_transport *nx_lanes_new(uv_loop_t *loop, const struct nx_quic_conf *conf,
                                  uint32_t n, const struct nx_transport_cb *cb, char *err,
                                  size_t errlen);
/* Lane 0's QUIC endpoint: for nx_quic_port(), nx_quic_own_cert(). */
struct nx_transport *nx_lanes_first(struct nx_transport *t);
/* nx_quic_reload() on every lane, one after another (the other lanes wait for theirs);
 * *rolled counts the connections of all lanes.  On an error in lane i > 0, lanes below
 * it already use the new credentials: err says which lane failed. */
int nx_lanes_reload(struct nx_transport *t, int *rolled, char *err, size_t errlen);

/* Received bytes the lanes may hold for the loop thread before they stop reading their
 * sockets (until it took them down to half): 256 MiB a lane unless set (tests). */
#define NX_LANES_RX_LIMIT (256u << 20)
void nx_lanes_set_rx_limit(struct nx_transport *t, size_t bytes);
/* Bytes the lanes hold for the loop thread now, and the most any lane held at once. */
size_t nx_lanes_rx_queued(struct nx_transport *t, size_t *peak);

#endif
