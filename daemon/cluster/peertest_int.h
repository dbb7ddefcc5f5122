/* peertest_int.h - the receiving half of the peer test (peertest_recv.c), for
 * peertest.c, which owns the sending half and the dispatch. */
#ifndef NX_PEERTEST_INT_H
#define NX_PEERTEST_INT_H

#include <stdint.h>

#include "peer.pb-c.h"

struct nx_tpeer;
struct nx_wire_msg;

const char *nx_ptrecv_begin(struct nx_tpeer *p, uint32_t ch, const Nexar__PeerTestBegin *b);
const char *nx_ptrecv_end(struct nx_tpeer *p, uint32_t ch, const Nexar__PeerTestEnd *e);
const char *nx_ptrecv_data(struct nx_tpeer *p, uint32_t ch, const struct nx_wire_msg *w);
void nx_ptrecv_peer_lost(struct nx_tpeer *p);
void nx_ptrecv_tick(double now);
void nx_ptrecv_fini(void);

#endif
