/*
 * device.h - device (CUDA) buffers as the daemon's core sees them.
 *
 * The core stays CPU-only.  It answers the ranks' registrations of device memory and
 * events (DEV_REGISTER, devctl.c), copies and validates the record of every device
 * descriptor (devop.c), matches device ops like any other (a device op's signature says
 * it is one, so a rank with host buffers against one with device buffers is a
 * mismatch), and hands a matched op to the backend.  The backend owns the op from then
 * on and completes each rank's descriptor when the device work has finished.
 *
 * cuda/ installs the backend at start-up (nx_device) when it finds a usable GPU.
 * Without one nx_device stays NULL, HelloReply says why (nx_device_note), and a shim
 * never sends device descriptors: one that does is a protocol violation, since no
 * registration could have succeeded.
 */
#ifndef NX_DEVICE_H
#define NX_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm_abi.h"

struct nx_client;
struct nx_conn;
struct nx_frame_hdr;

/* Registration kinds (nexar.proto DeviceKind). */
enum { NX_DEV_MEMORY = 1, NX_DEV_EVENT = 2 };

/* One rank's side of a device op, loaded from its descriptor. */
struct nx_dev_part {
    uint32_t client_id;       /* looked up again at completion: the client may be gone */
    uint64_t user_data;
    struct nx_dev_op rec;     /* validated copy of the record */
    struct nx_dev_iov *iov;   /* bucketed: rec.niov validated entries (malloc'd) */
};

/* A matched op.  Collectives: parts[r] is rank r of the communicator.  Send/recv:
 * kind NX_K_SEND, size 2, parts[0] the sender and parts[1] the receiver. */
struct nx_dev_job {
    uint32_t comm_id;
    uint64_t seq;
    uint8_t kind, dtype, redop;
    uint32_t root;
    uint32_t size;
    uint64_t count;
    struct nx_dev_part *parts;
    const char *what; /* "all_reduce seq 3 on comm 2 (job \"j\")", for messages */
};

struct nx_device_ops {
    const char *name;
    /* A registration of cl (kind NX_DEV_*).  Returns 0 with *id (never 0) and, for
     * memory, the bytes mapped in *mapped; or a nexar_status_t with the reason in err. */
    uint32_t (*reg)(struct nx_client *cl, int kind, const uint8_t *handle, size_t handle_len,
                    uint64_t base, uint64_t size, const char *pci_bus_id, uint32_t *id,
                    uint64_t *mapped, char *err, size_t errlen);
    /* cl no longer names id; its mapping goes once no queued work uses it.  False for
     * an id cl does not hold. */
    bool (*unreg)(struct nx_client *cl, uint32_t id);
    /* [off, off + bytes) lies inside memory registration id of cl. */
    bool (*mem_ok)(struct nx_client *cl, uint32_t id, uint64_t off, uint64_t bytes);
    /* id is an event registration of cl. */
    bool (*event_ok)(struct nx_client *cl, uint32_t id);
    /* Runs a matched op.  From here on the backend completes every part (with
     * nx_dev_part_complete) and decrements its client's pending count; the job and its
     * parts stay the caller's (copy what is kept). */
    void (*run)(const struct nx_dev_job *job);
    /* cl is being torn down: its registrations go once no queued work uses them. */
    void (*client_gone)(struct nx_client *cl);
    /* The communicator was freed: its streams may go. */
    void (*comm_gone)(uint32_t comm_id);
};

/* The backend, NULL without device support. */
extern const struct nx_device_ops *nx_device;
/* Why there is none, or which devices there are (HelloReply.device_note). */
extern char nx_device_note[256];

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
