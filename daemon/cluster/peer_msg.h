/*
 * peer_msg.h - decoding and checking the control messages between daemons
 * (proto/peer.proto), and packing them into a wire.h CTL message.
 *
 * A PeerMsg comes from another machine: nx_peer_msg_decode() accepts it only when every
 * field is within range (counts, ranks below the world size, no duplicate ranks or
 * nodes, bounded printable strings, parseable addresses, a body present), so the modules
 * that handle it (cluster, rendezvous, peertest) can index arrays with its numbers.
 */
#ifndef NX_PEER_MSG_H
#define NX_PEER_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "peer.pb-c.h"

#define NX_PEER_VERSION 1              /* PeerMsg.version this daemon speaks */
#define NX_PEER_MAX_WORLD (1u << 20)   /* ranks per job (as job.c) */
#define NX_PEER_MAX_NODES 4096u        /* nodes per job */
#define NX_PEER_MAX_JOB 255u           /* job name bytes */
#define NX_PEER_MAX_TEXT 1024u         /* error and reason bytes */
#define NX_PEER_MAX_ALGO 255u          /* NEXAR_ALGO / `algo` bytes */
#define NX_PEER_MAX_MSG (16u << 20)    /* a packed PeerMsg */
#define NX_PEERTEST_MAX_STREAMS 64u    /* channels of one peer test */
#define NX_PEERTEST_MAX_BYTES (1ull << 40)

/*
 * Unpacks len bytes (the body of a CTL message) and checks every field.  Returns the
 * message, to be freed with nx_peer_msg_free(), or NULL with a reason in *why (static
 * text, for the log line that drops the peer).
 */
Nexar__PeerMsg *nx_peer_msg_decode(const uint8_t *buf, size_t len, const char **why);

void nx_peer_msg_free(Nexar__PeerMsg *m);

/*
 * Packs m (whose version this sets) behind the wire envelope into one malloc'd buffer.
 * Returns the buffer and its length in *len; the caller frees it.
 */
uint8_t *nx_peer_msg_pack(Nexar__PeerMsg *m, size_t *len);

#endif
