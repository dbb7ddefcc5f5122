/*
 * devstage.h - device buffers on communicators that span nodes, staged through host
 * memory that the device backend copies to and from (device.h's host_alloc and copy).
 *
 * Collectives (cluster/xcoll.c): each part of a device op is staged on its own.  The
 * backend copies the part's ranges of every local rank's device buffers into host
 * buffers laid out as a staged chunk is (each block's n elements one after another), the
 * part then runs exactly as a staged host chunk does (the node-local combine, the
 * algorithm across nodes, the hand-back), and the backend copies the ranks' outputs
 * back.  Parts run concurrently, so the copies of one part overlap the network steps of
 * another.
 *
 * Send/recv (cluster/xp2p.c, p2p.c): a device send to another node is staged and sent
 * piece by piece, a window ahead of the receiver's acknowledgements; a device recv from
 * another node copies each piece to the device as it comes.
 *
 * The backend orders the copies after the device work it queued before for the same
 * communicator, and a copy in waits for its rank's ready event first: in stream-ordered
 * mode the rank's stream never waits on the CPU.  A staging area whose owner goes while
 * a copy is in flight lives until the copy ends (nx_devstage_release).
 */
#ifndef NX_DEVSTAGE_H
#define NX_DEVSTAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll_local.h"
#include "device.h"

struct nx_op;
struct nx_devstage;

typedef void (*nx_devstage_done)(void *arg, uint32_t status, const char *text);

/* Whether the device backend can stage across nodes. */
bool nx_devstage_available(void);

/* ---- the staging area: host memory and the copies through it ------------------------ */

/* bytes of the backend's host memory for comm_id's copies (what names the op in texts).
 * NULL, with the reason in err, when there is none. */
struct nx_devstage *nx_devstage_new(uint32_t comm_id, uint64_t bytes, const char *what,
                                    char *err, size_t errlen);
uint8_t *nx_devstage_host(const struct nx_devstage *d);
/* Moves the ranges v (their host pointers inside d's memory) in direction dir
 * (NX_DEV_D2H or NX_DEV_H2D); done(arg, ...) after, from the loop. */
void nx_devstage_copy(struct nx_devstage *d, const struct nx_dev_copy *v, size_t n, int dir,
                      nx_devstage_done done, void *arg);

/* nx_devstage_copy of elements [off, off + n) of one buffer b of part p (or of its iovs,
 * for a bucketed part), from or to the start of d's host memory, after ready event wait
 * (0: none). */
void nx_devstage_copy_buf(struct nx_devstage *d, const struct nx_dev_part *p,
                          const struct nx_dev_buf *b, uint64_t off, uint64_t n, uint32_t es,
                          uint32_t wait, int dir, nx_devstage_done done, void *arg);

/* ---- a part of a collective (xcoll.c) ----------------------------------------------- */

/*
 * Elements [off, off + n) of every block of op's device parts go to host memory: io (one
 * entry per local rank) gets the host buffers, and done(arg, ...) comes once the copies
 * are in.  NULL, with the reason in err, when there is no host memory for them.
 */
struct nx_devstage *nx_devstage_in(const struct nx_op *op, uint64_t off, uint64_t n,
                                   struct nx_rank_io *io, nx_devstage_done done, void *arg,
                                   char *err, size_t errlen);

/* The ranks' outputs in io go back to their device buffers; done(arg, ...) after. */
void nx_devstage_out(struct nx_devstage *d, nx_devstage_done done, void *arg);

/* The part is gone: d goes now, or when the copies in flight end (done is not called). */
void nx_devstage_release(struct nx_devstage *d);

/*
 * Completions that wait for copies in flight.  An op that fails while a staging copy
 * still reads or writes a rank's device buffer must not set the rank's done word before
 * that copy ends: the rank's stream would go on and reuse the buffer under it.  So the
 * failing side collects the ranks' parts in a devwait, releases its stages to it, and
 * arms it: the parts complete (with status and text) when the last of those copies
 * ended, at once when none was in flight.
 */
struct nx_devwait;
struct nx_devwait *nx_devwait_new(uint32_t status, const char *text);
void nx_devwait_add(struct nx_devwait *w, const struct nx_dev_part *p);
/* nx_devstage_release, with w waiting for d's copy in flight (if any). */
void nx_devstage_release_to(struct nx_devstage *d, struct nx_devwait *w);
void nx_devwait_arm(struct nx_devwait *w);

#endif
