/*
 * ring_daemon.h - nexard's side of one rank's rings for test_ring.c, in this process:
 * a real client record with its real segment (memfd) and eventfds (daemon/node/client.c,
 * ring.c), on a communicator of one, served by a libuv loop the test turns.  Kept in its
 * own translation unit because the daemon's headers and the shim's are two worlds: the
 * shim's internals are on no daemon include path.
 */
#ifndef TEST_RING_DAEMON_H
#define TEST_RING_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "shm_abi.h"

struct rd_seg {
    void *base; /* the daemon's mapping; the test's shim side uses the same memory */
    uint64_t bytes;
    int sq_efd, cq_efd;
    uint32_t comm_id;
};

/* Makes the client with sq/cq entries, sets every ring index (the segment's and the
 * daemon's private copies) to sq_start / cq_start, and starts serving it. */
void rd_start(uint32_t sq_entries, uint32_t cq_entries, uint32_t sq_start, uint32_t cq_start,
              struct rd_seg *out);

/* Posts a completion the way the matcher does (nx_client_complete). */
void rd_complete(uint64_t user_data, uint32_t status, const char *text);

/* Turns the loop until nothing is left to do right now: a rung doorbell is served. */
void rd_serve(void);

/* The daemon's private submission head; completions it holds back for want of room. */
uint32_t rd_sq_head(void);
size_t rd_held_back(void);

/* Protocol violations counted, and whether the client was dropped. */
uint64_t rd_violations(void);
int rd_dropped(void);

/* Tears everything down and closes the loop (leak-free under ASan). */
void rd_stop(void);

#endif
