/*
 * cluster.h - this daemon among the others: the QUIC endpoint, a node record per peer
 * daemon, and the dispatch of what the peers send.
 *
 * Without `listen` in the config there is no endpoint and nexard serves its own node
 * only, exactly as before the network existed; nx_cluster_enabled() says which.  With
 * it, nx_cluster_init() binds the endpoint (the TLS files are then required) and owns
 * the transport callbacks:
 *   on_message: the wire.h envelope is checked, a CTL body is decoded and checked by
 *               peer_msg.c and handed to its module by type (rendezvous, peertest), a
 *               TEST body goes to peertest; anything malformed drops that peer with a
 *               log line naming why, and everyone else keeps going.
 *   on_peer:    the node record follows the peer's state; a lost peer is reported to
 *               the rendezvous (jobs spanning it fail) and to peertest.
 *   on_sent:    tokens are routed by their top bits (NX_TOKEN_*).
 *
 * Channels (transport.h): NX_CHAN_CTL carries every PeerMsg except a peer test's begin
 * and end, which travel on the test channel they describe, ahead of and behind its data.
 */
#ifndef NX_CLUSTER_H
#define NX_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "netaddr.h"
#include "peer.pb-c.h"
#include "transport.h"

struct nx_quic_inspect;

#define NX_CHAN_CTL 0ull
#define NX_CHAN_TEST(c) ((1ull << 62) | (uint64_t)(c)) /* c < NX_PEERTEST_MAX_STREAMS */
#define NX_CHAN_IS_TEST(ch) (((ch) >> 62) == 1 && ((ch) & 0xffffffffull) < 64)
/* xcomm.c: a spanning communicator's collectives (the aligned block of NX_XCOLL_CHANNELS
 * around this one), and its point-to-point per tag. */
#define NX_CHAN_COLL(h) ((2ull << 62) | ((h) >> 2))
#define NX_CHAN_P2P(h) ((3ull << 62) | ((h) >> 2))

/* Transport tokens, by their top bits. */
#define NX_TOKEN_TEST (1ull << 63)  /* peertest.c: the rest is its own */
#define NX_TOKEN_XCOLL (1ull << 62) /* bit 63 clear: xcoll.c, the rest is its own */
#define NX_TOKEN_XP2P (1ull << 61)  /* bits 63, 62 clear: xp2p.c, the rest is its own */

/* The cluster's record of one peer daemon (tpeer->user). */
struct nx_node {
    struct nx_tpeer *tp;
    enum nx_tpeer_state state;
    bool was_up;       /* the handshake completed at least once */
    double since;      /* nx_now() of the last state change */
    uint32_t version;  /* peer protocol version it announced, 0 before it did */
    char reason[128];  /* why it was lost */
};

/* 0 (also when no listen is configured), or -errno after logging why; nexard exits.
 * inspect: the remote inspection endpoint's routes (ctl/h3_routes.c), NULL for none. */
int nx_cluster_init(const struct nx_quic_inspect *inspect);
/* Closes every connection (peers see "shutdown") and frees the endpoint. */
void nx_cluster_fini(void);
/* Deadlines of the modules above the transport; from the daemon's tick. */
void nx_cluster_tick(double now);

bool nx_cluster_enabled(void);
/* SIGHUP or nexarctl reload: reads the TLS files again and hands every peer connection
 * over to one made with them (transport_quic.h, nx_quic_reload).  0, or -errno (the old
 * credentials stay); msg gets what was logged. */
int nx_cluster_reload_tls(char *msg, size_t len);
/* When this node's certificate proof ends (certwatch.h), with its subject; (time_t)-1
 * without a network or a certificate. */
time_t nx_cluster_cert(char *subject, size_t len);
struct nx_transport *nx_cluster_transport(void);
/* Sends what the ops just served queued, now (transport progress). */
void nx_cluster_progress(void);
/* The canonical address other daemons know us by; "" without a network. */
const char *nx_cluster_addr(void);
/* Whether a canonical address names this daemon (its advertised or bound address, or
 * its port on one of this machine's addresses when bound to a wildcard). */
bool nx_cluster_is_self(const char *canon);

/* The node record of a peer, created on first use. */
struct nx_node *nx_cluster_node(struct nx_tpeer *p);

/*
 * The peer at a canonical address, ready to send to: a record the transport declared
 * lost is forgotten and dialed afresh.  NULL with a reason in err.
 */
struct nx_tpeer *nx_cluster_peer(const char *addr, char *err, size_t errlen);

/* Packs m behind the envelope and sends it on channel (NX_CHAN_CTL for most).
 * 0, or -errno from the transport (-ENOTCONN: the peer is lost). */
int nx_cluster_send(struct nx_tpeer *p, uint64_t channel, Nexar__PeerMsg *m);
/* The same to an address (nx_cluster_peer first); logs a failure. */
int nx_cluster_send_addr(const char *addr, Nexar__PeerMsg *m);

/* Drops a peer that broke the protocol: logged with why, its connection closed, and
 * the layers above told as for any lost peer. */
void nx_cluster_drop(struct nx_tpeer *p, const char *why);

#endif
