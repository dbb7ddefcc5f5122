/*
 * udp_jitter.h - a UDP relay between two daemons on loopback that holds every datagram
 * for its own random time, so that datagrams overtake each other.  QUIC keeps each stream
 * (each transport channel) in order whatever the datagrams do, but nothing across
 * streams: what one channel sent later can arrive before what another sent earlier, as
 * it can on a real network with several paths or, with the transport's lanes, several
 * connections.  The tests put it where the loop transport's jitter cannot reach: between
 * real nexards.
 *
 * Node i listens at 127.0.0.1:real[i] and advertises 127.0.0.1:relay[i] (config
 * `advertise`), so every packet between them crosses the relay, and each sees the other
 * at the address it advertises: a datagram to relay[d] from real[s] leaves from relay[s]
 * for real[d].
 */
#ifndef UDP_JITTER_H
#define UDP_JITTER_H

#include <stdint.h>

struct uj_stats {
    uint64_t relayed;   /* datagrams passed on */
    uint64_t overtaken; /* datagrams that left after one that came in later */
    uint64_t dropped;   /* from an unknown sender, or past the queue's bound */
};

/* Binds the two relay ports.  0, or -1 (logged). */
int uj_open(uint16_t relay[2]);
/* Starts relaying on a thread of its own: every datagram waits uniform 0..jitter_ms, and
 * a datagram of at most 256 bytes (a short message alone: a note, a credit, an
 * acknowledgement) small_ms more, so that short messages fall behind long ones sent after
 * them.  seed: the draws.  0 or -1. */
int uj_start(const uint16_t real[2], uint32_t jitter_ms, uint32_t small_ms, uint64_t seed);
/* Stops the thread, frees what it held, and says what it did. */
void uj_stop(struct uj_stats *st);

#endif
