/*
 * devop.h - device (CUDA) buffers in the node layer: the installed backend
 * (adapter/device.h), the host interface it is given, the records of device
 * descriptors, and the registrations on the control socket.
 */
#ifndef NX_DEVOP_H
#define NX_DEVOP_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "shm_abi.h"

struct nx_client;
struct nx_conn;
struct nx_frame_hdr;

/* The backend, NULL without device support (main.c installs it). */
extern const struct nx_device_ops *nx_device;
/* Why there is none, or which devices there are (HelloReply.device_note). */
extern char nx_device_note[256];
/* What the node layer offers a backend (device.h) on the daemon's loop: main.c hands it
 * to cuda/ at start. */
const struct nx_device_host *nx_device_host(void);

/* HelloReply.features of this daemon. */
uint32_t nx_device_features(void);

/*
 * Copies the record of device descriptor e (validated by nx_sqe_validate) out of cl's
 * arena and validates it for rank `rank` of a communicator of comm_size ranks: the
 * stateless checks, the registrations, every extent, element alignment.  Returns 0, or
 * -EINVAL with the reason in why (a protocol violation).  nx_dev_part_release() frees
 * what it allocated.
 */
int nx_dev_part_load(struct nx_client *cl, const struct nx_sqe *e, uint32_t comm_size,
                     uint32_t rank, struct nx_dev_part *p, char *why, size_t len);
void nx_dev_part_release(struct nx_dev_part *p);

/*
 * Completes a device part: sets its done word (so that the rank's stream never waits
 * forever, whatever the status), then posts the completion.  Returns the client, or
 * NULL when it is gone (nothing was written).  The caller adjusts pending.
 */
struct nx_client *nx_dev_part_complete(const struct nx_dev_part *p, uint32_t status,
                                       const char *text);

/* The control socket's DEV_REGISTER / DEV_UNREGISTER of a joined rank (devctl.c).
 * Returns 0, or -1 when the connection was closed. */
int nx_devctl_frame(struct nx_conn *c, const struct nx_frame_hdr *h, const uint8_t *payload);

#endif
