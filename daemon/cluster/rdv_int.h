/*
 * rdv_int.h - the two halves of the rendezvous, for each other only.
 *
 * rendezvous.c is the member side (this daemon's part of a job); rdv_coord.c is the
 * coordinator side (the registrations of jobs this daemon coordinates).  The coordinator
 * talks to its own node's member side by calling it with the message it would have
 * sent (from == NULL), so both paths check the same things.
 */
#ifndef NX_RDV_INT_H
#define NX_RDV_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peer.pb-c.h"

struct nx_tpeer;

/* ---- member side (rendezvous.c); from == NULL: from this daemon's coordinator ---- */
void nx_rdv_member_table(struct nx_tpeer *from, const Nexar__PeerRankTable *t);
void nx_rdv_member_refused(struct nx_tpeer *from, const Nexar__PeerRegisterReply *r);
/* true when the abort matched a job here. */
bool nx_rdv_member_abort(struct nx_tpeer *from, const Nexar__PeerAbort *a);

/* ---- coordinator side (rdv_coord.c); from == NULL: a rank of this daemon ---- */
void nx_rdvc_register(struct nx_tpeer *from, const Nexar__PeerRegister *g);
bool nx_rdvc_abort(struct nx_tpeer *from, const Nexar__PeerAbort *a);
void nx_rdvc_peer_lost(const char *addr, const char *reason);
void nx_rdvc_tick(double now);
void nx_rdvc_fini(void);

/* ---- shared helpers (rendezvous.c) ---- */
/* A random non-zero key. */
uint64_t nx_rdv_new_key(void);

#endif
