/*
 * client.h - a rank attached to this daemon: its control connection, its shared
 * segment and doorbells, the communicators it belongs to.
 *
 * Everything read from the segment is untrusted.  A client that violates the
 * protocol is dropped exactly like one that died: its communicators fail on every
 * other rank with NEXAR_ERR_PEER_LOST, and its memory and fds are released.
 */
#ifndef NX_CLIENT_H
#define NX_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <uv.h>

#include "device.h"
#include "segment.h"

#define NX_PULL_NONE UINT32_MAX

struct nx_conn;
struct nx_job;
struct nx_comm;

struct nx_member {
    struct nx_comm *comm;
    uint32_t rank;
};

/* A completion as the daemon produces it. */
struct nx_done {
    uint64_t user_data;
    uint32_t status;
    uint32_t res_comm, res_rank, res_size;
    uint32_t res_local; /* nx_cqe.res_local (plan bits, NX_PLAN_*), with res_comm */
    uint32_t algo;  /* nx_cqe.algo, without res_comm */
    uint32_t pull_n, pull_hold; /* nx_cqe's: a peer-read chunk (without res_comm) */
};

struct nx_client {
    uint32_t id;
    struct nx_conn *conn; /* NULL once the connection is gone */
    pid_t pid;
    uid_t uid;
    struct nx_job *job;
    uint32_t world_rank;

    struct nx_segment seg;
    int sq_efd, cq_efd;
    uv_poll_t sq_poll;
    bool polling;
    uint32_t sq_head; /* our copies: never re-read from shm */
    uint32_t cq_tail;
    uint32_t err_seq;

    struct nx_cqe *ovf; /* completions waiting for room in the cq */
    size_t ovf_head, ovf_len, ovf_cap;
    bool cq_dirty; /* posted since the last doorbell */

    struct nx_member *mem;
    size_t nmem, mem_cap;

    uint32_t pending; /* descriptors parked in the daemon (device ops: until done) */
    uint32_t dev_regs; /* device registrations held (device.h) */
    struct nx_dev_client dev; /* as the device backend sees it (device.h) */
    uint64_t p2p_buffered; /* eager send bytes held for this sender */
    bool peer_reads;     /* its shim reads other ranks' slots when told (JoinRequest) */
    bool single_copy;    /* and their buffers (JoinRequest.single_copy), from nexard's pid
                            namespace */
    uint32_t pull_index; /* its segment's index among its job's peer readers on this node
                            (JoinReply.pull_index); NX_PULL_NONE: it reads no slot */
    /* nexarctl jobs: descriptors taken from the ring and completions posted (a staged
     * op has one per chunk; send/recv included), and the payload bytes of those
     * descriptors' inputs. */
    uint64_t ops_submitted, ops_completed, bytes_in;
    bool dead, violated;
    bool exited; /* its process is gone, while something else held its socket open */
    struct nx_procwatch *exit_watch; /* NULL: the socket's hang-up is all we learn */
    double join_deadline; /* a joiner (NEXAR_JOIN=1): when it gives up waiting */
    const char *drop_why; /* static text */
    char violation[224];  /* for the ranks that lose it: why nexard dropped it */

    LIST_ENTRY(nx_client) link;
    LIST_ENTRY(nx_client) dirty_link;
    bool on_dirty;
};

LIST_HEAD(nx_client_list, nx_client);
extern struct nx_client_list nx_clients;
extern uint32_t nx_client_count;

/* Creates a client for conn with a fresh segment.  NULL on failure, with why in err and
 * errno set (EMFILE, ENFILE: out of descriptors; else out of memory or a bad geometry). */
struct nx_client *nx_client_new(struct nx_conn *conn, pid_t pid, uid_t uid, char *err,
                                size_t errlen);

/* Starts watching the submission doorbell (after the join reply went out; ring.c). */
int nx_client_start(struct nx_client *cl);

/* Posts a completion; text (may be NULL) is the detailed error for a failure (ring.c). */
void nx_client_complete(struct nx_client *cl, const struct nx_done *d, const char *text);

/* Completes an unmatched descriptor that was counted in cl->pending (shrink, grow): its
 * result names a communicator (0 on failure) with this rank and size. */
void nx_client_finish(struct nx_client *cl, uint64_t user_data, uint32_t status,
                      const char *text, uint32_t comm, uint32_t rank, uint32_t size,
                      unsigned plan);

/* The live client with this id, or NULL (device completions outlive their op). */
struct nx_client *nx_client_by_id(uint32_t id);

/* Closes the busy poll's loop handle (at shutdown; ring.c). */
void nx_clients_fini(void);

/* Rings the completion doorbells of every client posted to since the last call. */
void nx_clients_flush(void);

/* Membership bookkeeping for descriptor lookup. */
void nx_client_add_member(struct nx_client *cl, struct nx_comm *comm, uint32_t rank);
void nx_client_del_member(struct nx_client *cl, struct nx_comm *comm);
struct nx_member *nx_client_member(struct nx_client *cl, uint32_t comm_id);

/*
 * Drops the client: logs why, fails its communicators with NEXAR_ERR_PEER_LOST, leaves
 * its job, closes its connection and frees everything once libuv is done with its
 * handles.  Safe to call twice.
 */
void nx_client_drop(struct nx_client *cl, const char *why);

/* A protocol violation: counted, logged with the reason, then dropped. */
void nx_client_violation(struct nx_client *cl, const char *why);

/* "rank 3 (pid 1234) of job \"j\"" into buf. */
const char *nx_client_name(const struct nx_client *cl, char *buf, size_t len);

#endif
