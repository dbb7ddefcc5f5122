/* ctl_peers.h - answers `nexarctl peers`: every peer daemon the transport knows, with
 * its state, RTT, congestion window, traffic, losses, streams, cipher and the multi-node
 * jobs that span it. */
#ifndef NX_CTL_PEERS_H
#define NX_CTL_PEERS_H

#include "ctl_info.h"

/* Builds the CTL_PEERS reply and hands it to emit (see nx_ctl_report). */
void nx_ctl_peers_report(nx_ctl_emit emit, void *arg);

#endif
