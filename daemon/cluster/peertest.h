/*
 * peertest.h - `nexarctl peer-test`: the transport's throughput and integrity test
 * between two real daemons, and an operator's tool.
 *
 * The sending daemon (asked over its control socket, CTL_PEER_TEST) opens K channels
 * (NX_CHAN_TEST(0..K-1)) to the receiving daemon.  On each channel it sends
 *   PeerTestBegin (CTL) -> TEST messages (wire.h: job = test id, comm = channel,
 *   seq = message index, offset = byte offset in the channel) -> PeerTestEnd (CTL)
 * splitting N bytes over the channels.  The payload is a deterministic pattern of
 * (test id, channel, offset), so the receiver verifies every byte without a copy of
 * the data, and the order of each channel (seq and offset must follow on).  When every
 * channel has ended it answers one PeerTestResult (bytes, first bad offset, order
 * errors) on the control channel.  The sender keeps at most NX_PEERTEST_WINDOW bytes
 * unacknowledged (transport on_sent tokens), times the data phase from the peer's
 * handshake to the result, and answers the control request with a PeerTestReport.
 *
 * Failures end the request with a status: the peer lost or refused during the test
 * (NEXAR_ERR_PEER_LOST with the transport's reason, e.g. a TLS failure), no answer in
 * time (NEXAR_ERR_TIMEOUT), a byte or an order error (NEXAR_ERR_MISMATCH, with the
 * report saying where).
 */
#ifndef NX_PEERTEST_H
#define NX_PEERTEST_H

#include <stddef.h>
#include <stdint.h>

#include "nexar.pb-c.h"
#include "peer.pb-c.h"

struct nx_conn;
struct nx_tpeer;
struct nx_wire_msg;

#define NX_PEERTEST_WINDOW (32u << 20)       /* unacknowledged bytes per test */
#define NX_PEERTEST_DEFAULT_MSG (1u << 20)   /* --msg-bytes */
#define NX_PEERTEST_MAX_TESTS 16             /* running at once, each side */
#define NX_PEERTEST_IDLE_S 60.0              /* a receiver forgets a silent test */

/* The pattern: byte i of channel ch of test id is byte (i % 8) (little-endian) of
 * splitmix64(seed(id, ch) + (i / 8 + 1) * golden). */
void nx_peertest_fill(uint32_t id, uint32_t ch, uint64_t offset, uint8_t *buf, size_t len);
/* Index of the first byte of buf that differs from the pattern, or -1. */
int64_t nx_peertest_check(uint32_t id, uint32_t ch, uint64_t offset, const uint8_t *buf,
                          size_t len);

/* A CTL_PEER_TEST request on conn; the reply comes when the test ends. */
void nx_peertest_start(struct nx_conn *conn, const Nexar__PeerTestRequest *req);

/* From cluster.c.  The message handlers return NULL, or why the peer must be dropped. */
const char *nx_peertest_on_ctl(struct nx_tpeer *p, uint64_t channel, const Nexar__PeerMsg *m);
const char *nx_peertest_on_data(struct nx_tpeer *p, uint64_t channel,
                                const struct nx_wire_msg *w);
void nx_peertest_on_sent(struct nx_tpeer *p, uint64_t token);
void nx_peertest_peer_up(struct nx_tpeer *p);
void nx_peertest_peer_lost(struct nx_tpeer *p, const char *reason);
void nx_peertest_tick(double now);
void nx_peertest_fini(void);

#endif
