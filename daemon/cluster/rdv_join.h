/*
 * rdv_join.h - joiners (NEXAR_JOIN=1) and the job's coordinator: how a node that has no
 * rank of a job (a replacement machine, or a restarted nexard) becomes its node, and how
 * every node learns where joiners wait, so that a grow anywhere may take them.
 *
 *   joiner node                 coordinator                      the job's other nodes
 *   PeerJoiner{member key} ---> job running, uid allowed: the
 *                               node's index (its address added
 *                               when new) and its joiners
 *               <--- PeerJoinerTable{job key, nodes, index}
 *                               PeerJoinerNote{index, addr, n} ---> node appended, count
 * A node of the job sends PeerJoiner with the job key whenever its count of joiners changes:
 * the coordinator notes it to the others the same way.  Refusals come back as a PeerAbort
 * naming the member key, which fails the joiners waiting there.
 */
#ifndef NX_RDV_JOIN_H
#define NX_RDV_JOIN_H

#include <sys/types.h>

#include "peer.pb-c.h"

struct nx_job;
struct nx_tpeer;

/* cluster_ops.joiners_changed: j's joiners here changed; tell the coordinator. */
void nx_rdvj_joiners_changed(struct nx_job *j, uid_t uid);
/* The coordinator's side of a PeerJoiner (p NULL: from this daemon itself). */
const char *nx_rdvj_on_joiner(struct nx_tpeer *p, const Nexar__PeerJoiner *m);
/* A joiner node's table from the coordinator. */
const char *nx_rdvj_on_table(struct nx_tpeer *p, const Nexar__PeerJoinerTable *t);
/* A note from the coordinator: joiners at a node (maybe a new one). */
const char *nx_rdvj_on_note(struct nx_tpeer *p, const Nexar__PeerJoinerNote *t);

#endif
