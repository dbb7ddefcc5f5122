/*
 * p2p.h - send/recv between ranks of one communicator.  The k-th send from a to b with
 * tag t matches the k-th receive at b from a with tag t.  Send chunks are copied into
 * daemon memory and completed at once while the sender's eager budget lasts, so a
 * send never waits for its receive unless the receiver is far behind.
 */
#ifndef NX_P2P_H
#define NX_P2P_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "shm_abi.h"

struct nx_client;
struct nx_comm;
struct nx_msg;

TAILQ_HEAD(nx_msg_list, nx_msg);

struct nx_p2p {
    struct nx_msg_list msgs;
    uint64_t nmsgs;
    uint64_t remote_buffered; /* bytes from other nodes' sends held and acknowledged */
    uint64_t orphan_bytes;    /* bytes of completed sends whose ranks left (nx_p2p_leave) */
};

void nx_p2p_init(struct nx_p2p *p);
/* Submits a validated send or recv of rank `rank` of comm. */
void nx_p2p_submit(struct nx_comm *comm, uint32_t rank, struct nx_client *cl,
                   const struct nx_sqe *e);
/* Fails the comm with NEXAR_ERR_TIMEOUT when a message side waited too long. */
void nx_p2p_tick(struct nx_comm *comm, double now);
/* Completes everything pending with the comm's failure and frees all messages. */
void nx_p2p_fail_all(struct nx_comm *comm);

/*
 * Local rank `rank` (client cl) leaves comm in order (comm_free, finalize).  A send of
 * it that completed is in our custody (its data copied out eagerly): it stays, to be
 * delivered when its receive comes, as MPI delivers a completed standard send.  Returns
 * 0 when nothing else of it is in flight; else -EBUSY with what is in why (a send or
 * receive of it not completed, another rank's send to it that waits for its receive),
 * and nothing changed.
 */
int nx_p2p_leave(struct nx_comm *comm, struct nx_client *cl, uint32_t rank, char *why,
                 size_t len);

struct nx_p2p_hdr;
/*
 * One piece of a send from a rank on another node (xp2p.c routed it to comm; its ranks
 * are the communicator's).  It is matched with the receive like a local send's chunk;
 * the sending node is acknowledged once the piece is delivered, or at once while the
 * communicator's remote buffer (p2p_eager_bytes) lasts.  A size that differs from the
 * receive's fails the communicator (NEXAR_ERR_MISMATCH).  NULL, or why the peer broke
 * the protocol.
 */
const char *nx_p2p_remote_piece(struct nx_comm *comm, const struct nx_p2p_hdr *h,
                                const uint8_t *data, size_t len);

#endif
