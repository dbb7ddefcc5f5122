/*
 * device.h - the contract between nexard's node layer and a device (CUDA) backend.
 *
 * The node layer stays CPU-only.  It answers the ranks' registrations of device memory
 * and events (node/devctl.c), copies and validates the record of every device descriptor
 * (node/devop.c), matches device ops like any other (a device op's signature says it is
 * one, so a rank with host buffers against one with device buffers is a mismatch), and
 * hands a matched op to the backend.  The backend owns the op from then on and completes
 * each rank's part, through the host interface it was given at start-up, when the device
 * work has finished.
 *
 * cuda/ is such a backend: main.c starts it with the node layer's host interface
 * (nx_device_host, node/devop.h) and installs the ops it returns.  Without one no backend
 * is installed, HelloReply says why (nx_device_note), and a shim never sends device
 * descriptors: one that does is a protocol violation, since no registration could have
 * succeeded.
 */
#ifndef NX_DEVICE_H
#define NX_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "shm_abi.h"

/* Registration kinds (nexar.proto DeviceKind). */
enum { NX_DEV_MEMORY = 1, NX_DEV_EVENT = 2 };

/* A rank as the backend sees it: its client id, and a slot for the backend's own state of
 * it (its registrations), NULL until the backend sets it. */
struct nx_dev_client {
    uint32_t id;
    void *state;
};

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
    uint32_t timeout_ms; /* the communicator's: work not ended by then fails the op (0: never) */
};

/* What the backend may ask of the daemon: given at start-up, valid until it stops.
 * Everything is called on the loop thread. */
struct nx_device_host {
    uv_loop_t *loop;
    /* Completes part p of a job handed to run(): sets its done word (so that the rank's
     * stream never waits forever, whatever the status), posts the completion and
     * releases the rank's hold on the daemon.  Nothing when the rank is gone. */
    void (*part_done)(const struct nx_dev_part *p, uint32_t status, const char *text);
    /* Rings the completion doorbells of the ranks posted to since the last call. */
    void (*flush)(void);
    /* An op of communicator comm_id ended in a way that fails the communicator, as a host
     * op's does (its GPU work passed the deadline): its parts were told first. */
    void (*comm_fail)(uint32_t comm_id, uint32_t status, const char *text);
    /* The live rank with this client id, or NULL when it is gone. */
    struct nx_dev_client *(*client)(uint32_t client_id);
};

/* The parts a device op across nodes is cut into: this many bytes of each block, on
 * every node alike (xcoll.c finds a part by its offset). */
#define NX_DEV_XCHUNK_BYTES (4u << 20)

/* The end of every text for a device op whose GPU work waits on a ready event past its
 * deadline (cuda/exec.c, and across nodes xp2p.c and p2p.c): the usual cause. */
#define NX_DEV_CYCLE_HINT                                                                 \
    "does an earlier stream-ordered op there wait for this one (a receive queued before " \
    "the send on every rank of a ring)?"

/* One range of a rank's device memory and the host memory it moves from or to: the
 * cross-node path (node/devstage.c) stages a device op's chunks through host memory. */
struct nx_dev_copy {
    uint32_t client_id;
    uint32_t mem;        /* the rank's registration */
    uint64_t off, bytes; /* inside it (validated when the op was loaded) */
    uint32_t wait_event; /* the rank's ready event, waited for before the copy; or 0 */
    uint8_t *host;       /* from the backend's host_alloc */
};

enum { NX_DEV_D2H = 1, NX_DEV_H2D = 2 };

/* On the loop thread, never from within copy(): status NEXAR_OK, or why it failed. */
typedef void (*nx_dev_copy_done)(void *arg, uint32_t status, const char *text);

struct nx_device_ops {
    const char *name;
    /* A registration of rank dc (kind NX_DEV_*).  Returns 0 with *id (never 0) and, for
     * memory, the bytes mapped in *mapped; or a nexar_status_t with the reason in err. */
    uint32_t (*reg)(struct nx_dev_client *dc, int kind, const uint8_t *handle,
                    size_t handle_len, uint64_t base, uint64_t size, const char *pci_bus_id,
                    uint32_t *id, uint64_t *mapped, char *err, size_t errlen);
    /* dc no longer names id; its mapping goes once no queued work uses it.  False for
     * an id dc does not hold. */
    bool (*unreg)(struct nx_dev_client *dc, uint32_t id);
    /* [off, off + bytes) lies inside memory registration id of dc. */
    bool (*mem_ok)(struct nx_dev_client *dc, uint32_t id, uint64_t off, uint64_t bytes);
    /* id is an event registration of dc. */
    bool (*event_ok)(struct nx_dev_client *dc, uint32_t id);
    /* Runs a matched op.  From here on the backend completes every part (the host's
     * part_done); the job and its parts stay the caller's (copy what is kept). */
    void (*run)(const struct nx_dev_job *job);
    /* dc is being torn down: its registrations go once no queued work uses them, and
     * dc->state is cleared. */
    void (*client_gone)(struct nx_dev_client *dc);
    /* The communicator was freed: its streams may go. */
    void (*comm_gone)(uint32_t comm_id);
    /*
     * Staging across nodes; NULL in a backend without it (device buffers across nodes
     * are then UNSUPPORTED).  host_alloc: host memory that copy() moves fastest (pinned),
     * NULL when there is none.  copy: moves every range of v in direction dir, after the
     * device work queued before it for comm_id and each range's wait_event (a range of
     * no bytes only waits), and calls done once all are through or one failed.  n may be
     * 0, with v NULL (a part with nothing to move here): done then comes from the loop at
     * once, never from within the call.  The
     * backend holds the registrations until then; the host memory must stay until done
     * is called.  what names the op for messages.
     */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    void (*copy)(uint32_t comm_id, const struct nx_dev_copy *v, size_t n, int dir,
                 const char *what, nx_dev_copy_done done, void *arg);
};

#endif
