/*
 * cuda_backend.h - the CUDA adapter as nexard's main.c sees it: an init/stop/fini module.
 * init installs the device backend (device.h) when a usable GPU is there, and otherwise
 * leaves the reason in nx_device_note; nexard runs either way.
 */
#ifndef NX_CUDA_BACKEND_H
#define NX_CUDA_BACKEND_H

/* 0, or a negative errno when the loop handles could not be set up. */
int nx_cuda_init(void);
/* Shutdown, from the signal handler: finishes queued device work, closes loop handles. */
void nx_cuda_stop(void);
/* After the communicators and clients are gone. */
void nx_cuda_fini(void);

#endif
