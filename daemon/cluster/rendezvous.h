/*
 * rendezvous.h - forming jobs whose ranks sit on several nodes.
 *
 * A rank names its job (NEXAR_JOB) and the job's coordinator (NEXAR_COORD: the
 * host:port of one nexard).  Without a coordinator the job is local and job.c forms it
 * as always.  With one:
 *   - every daemon keeps its local part of the job in struct nx_job, with a struct
 *     nx_jobnet (below) and a random member key;
 *   - a daemon that is not the coordinator sends PeerRegister for each local rank that
 *     joins (withdraw for one that leaves before formation);
 *   - the coordinator (possibly this daemon, whose own ranks register without the
 *     network) collects registrations per job name: duplicates, a world size that
 *     disagrees and a uid the config does not allow are refused to the offending ranks
 *     (PeerRegisterReply); once all world_size ranks are in, it picks the job key and
 *     sends each member node the rank table (node addresses, rank -> node) and forgets
 *     the job;
 *   - each member checks the table against its attached ranks, forms its local part
 *     (join replies go out) and says hello to every other node of the table, so that
 *     each pair of member daemons holds a connection and its keep-alive.
 * Failure:
 *   - the coordinator's deadline (the ranks' NEXAR_TIMEOUT, else formation_timeout_s)
 *     fails every member with NEXAR_ERR_TIMEOUT naming the ranks that never
 *     registered; a member that hears nothing falls back on its own deadline plus a
 *     grace period;
 *   - the coordinator unreachable before formation: NEXAR_ERR_UNAVAILABLE (never
 *     connected) or NEXAR_ERR_PEER_LOST (connection lost), with its address;
 *   - a node of a formed job lost (transport LOST): every communicator of that job
 *     fails with NEXAR_ERR_PEER_LOST naming the node and its ranks;
 *   - a local rank of a formed job lost, or a spanning communicator aborted: the other
 *     nodes are told (PeerAbort) and fail the same way.
 */
#ifndef NX_RENDEZVOUS_H
#define NX_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "netaddr.h"
#include "peer.pb-c.h"

struct nx_job;
struct nx_comm;
struct nx_tpeer;

/* The multi-node part of a job at this daemon (nx_job.net). */
struct nx_jobnet {
    bool is_coord;           /* the coordinator (nx_job.coord) is this daemon */
    bool formed;             /* the rank table arrived */
    uint64_t key;            /* our member key, the job key once formed */
    uint32_t nnodes;
    char (*nodes)[NX_ADDR_MAX];
    uint32_t *rank_node;     /* world rank -> node id */
    /* World rank -> pid and uid at its node, as the coordinator published them (pid 0:
     * unknown); NULL from a coordinator that sent none.  Reports only (nexarctl jobs). */
    uint32_t *rank_pid, *rank_uid;
    uint32_t node;           /* ours */
    uint32_t *joiners_at;    /* by node: joiners waiting there, as the coordinator told
                              * (PeerJoinerNote; rdv_join.c); NULL until a note came */
    bool joiner_node;        /* we hold no rank of the job: joiners made us its node */
};

/*
 * Checks a joining rank's coordinator.  coord empty: returns 0 and canon "" (a local
 * job).  Else 0 with the canonical address in canon, or a nexar status with a message
 * (no network here, unparseable address).  A guessed coord (torchrun's MASTER_ADDR:
 * MASTER_PORT, whose port is torchrun's own) names a host only: without a network it
 * is ignored (a local job), with one the coordinator is that host at our own port.
 */
uint32_t nx_rdv_check_coord(const char *coord, bool guessed, char *canon, size_t canonlen,
                            char *msg, size_t msglen);

/* Makes j (just created, its coord set) a multi-node job. */
void nx_rdv_job_init(struct nx_job *j);
void nx_rdv_job_fini(struct nx_job *j);

/* The formation deadline for a job whose ranks asked for timeout_ms (0: the default). */
uint32_t nx_rdv_formation_ms(uint32_t timeout_ms);

/* A local rank attached to j: registers it with the coordinator. */
void nx_rdv_rank_joined(struct nx_job *j, uint32_t rank, uid_t uid, uint32_t timeout_ms);

/* A local rank of j left.  Forming: withdrawn.  Formed and lost: the other nodes fail
 * the job's communicators. */
void nx_rdv_rank_left(struct nx_job *j, uint32_t rank, bool lost, const char *who);

/* Number of nodes of j (1 for a local job). */
uint32_t nx_rdv_nodes(const struct nx_job *j);

/* Whether p is node `node` of the formed job net, and not this daemon: a peer message
 * that names its sender's node is believed only then. */
bool nx_rdv_from_node(const struct nx_jobnet *net, uint32_t node, const struct nx_tpeer *p);

/* A PeerHello to every node of j but ours and the coordinator's (already connected), so
 * that each pair of its daemons holds a connection whose keep-alive notices a loss. */
void nx_rdv_hello_all(struct nx_job *j);

/* The formed multi-node job whose job key is key, or NULL. */
struct nx_job *nx_rdv_job_by_key(uint64_t key);

/* "0-3, 7" of the indices i < n where v[i] == want (at most ~30 ranges, then "and N
 * more"); buf is written even when nothing matches ("none"). */
void nx_rdv_fmt_ranks(const uint32_t *v, size_t n, uint32_t want, char *buf, size_t len);

/* ---- from cluster.c ---- */

/* Register, register reply, rank table, abort, hello.  NULL, or why the peer must be
 * dropped. */
const char *nx_rdv_on_msg(struct nx_tpeer *p, const Nexar__PeerMsg *m);
/* The peer at addr was lost (was_up: after its handshake had completed). */
void nx_rdv_peer_lost(const char *addr, const char *reason, bool was_up);
void nx_rdv_tick(double now);
void nx_rdv_fini(void);

#endif
