/*
 * cuda_backend.h - the CUDA adapter as nexard's main.c sees it: an init/stop/fini module.
 * init returns the device backend (device.h) when a usable GPU is there, and otherwise
 * the reason in note; nexard runs either way.
 */
#ifndef NX_CUDA_BACKEND_H
#define NX_CUDA_BACKEND_H

#include <stddef.h>

#include "device.h"

/* Starts the backend on host (the daemon's loop and completion path; kept until fini).
 * Returns 0 with *ops the backend, or NULL with why in note (no device, no driver); or a
 * negative errno when the loop handles could not be set up.  note always says which
 * devices there are or why there are none (HelloReply.device_note). */
int nx_cuda_init(const struct nx_device_host *host, const struct nx_device_ops **ops,
                 char *note, size_t notelen);
/* Shutdown, from the signal handler: lets the device work in flight finish (for at most
 * a grace period, never waiting on this thread) and closes the loop handles; then calls
 * idle (may be NULL), at once when nothing is in flight.  Until then the ranks' buffers
 * may still be in use: their connections stay open. */
void nx_cuda_stop(void (*idle)(void));
/* After the communicators and clients are gone. */
void nx_cuda_fini(void);

#endif
