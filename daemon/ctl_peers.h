/* ctl_peers.h - answers `nexarctl peers`: every peer daemon the transport knows, with
 * its state, RTT, congestion window, traffic, losses, streams, cipher and the multi-node
 * jobs that span it. */
#ifndef NX_CTL_PEERS_H
#define NX_CTL_PEERS_H

struct nx_conn;

void nx_ctl_peers_reply(struct nx_conn *c);

#endif
