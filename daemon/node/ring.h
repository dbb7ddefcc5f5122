/*
 * ring.h - what client.c asks of ring.c, the daemon's side of a rank's rings.  The rest
 * of ring.c's interface is in client.h (nx_client_start, nx_client_complete,
 * nx_clients_fini), where the other layers look for it.
 */
#ifndef NX_RING_H
#define NX_RING_H

struct nx_client;

/* Rings the completion doorbell of every client posted to since the last call (a
 * failed doorbell drops its client); from nx_clients_flush. */
void nx_ring_doorbells(void);

/* cl is being torn down: no doorbell for it any more. */
void nx_ring_forget(struct nx_client *cl);

#endif
