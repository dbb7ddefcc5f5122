/*
 * cuda_int.h - what the files of the CUDA adapter share: the check macros, the adapter's
 * stream binding, the per-communicator streams, the completion path and the pinned
 * memory of the staging across nodes.  Everything runs on nexard's loop thread, except the host function that a
 * stream calls when an op's work is done (it only queues the op for the loop).
 */
#ifndef NX_CUDA_INT_H
#define NX_CUDA_INT_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adapter.h"
#include "device.h"
#include "log.h"

/* Evaluates a CUDA runtime call; on failure logs where and why and jumps to label. */
#define CU_TRY(call, label)                                                                \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            nx_cuda_note_error(#call, e_, __FILE__, __LINE__);                             \
            goto label;                                                                    \
        }                                                                                  \
    } while (0)

/* Logs a failed call and keeps its text for the op's error message. */
void nx_cuda_note_error(const char *what, cudaError_t e, const char *file, int line);
/* The last noted error, "cudaMemcpyAsync(...): out of memory". */
const char *nx_cuda_last_error(void);

/* The daemon, as given to nx_cuda_init (backend.c); NULL while the backend is off. */
extern const struct nx_device_host *nx_cuda_host;

/* ---- the adapter (adapter_cuda.c) ------------------------------------------------- */

extern const struct nx_adapter nx_adapter_cuda;

/* ---- running ops (exec.c) ----------------------------------------------------------- */

/* Runs a matched op: queues its work and its completion on a stream and returns; never
 * waits for the GPU (exec.c says why). */
void nx_cuda_exec_run(const struct nx_dev_job *job);
void nx_cuda_exec_copy(uint32_t comm_id, const struct nx_dev_copy *v, size_t n, int dir,
                       const char *what, nx_dev_copy_done done, void *arg);
void nx_cuda_exec_comm_gone(uint32_t comm_id);
/* Closes a mapping of a rank's memory (cudaIpcCloseMemHandle, which waits for the
 * device's work): now when nexard has nothing queued on dev, else once that work ended. */
void nx_cuda_exec_close_mem(int dev, void *mapped);
/* Whether nexard has no work queued on any device (cudaFreeHost would wait for it). */
bool nx_cuda_exec_idle(void);

/* ---- pinned host memory for staging across nodes (hostmem.c) ------------------------ */

void *nx_cuda_host_alloc(size_t bytes);
void nx_cuda_host_free(void *p);
/* Frees the cached blocks (at exit). */
void nx_cuda_hostmem_fini(void);
int nx_cuda_exec_init(void);
/* Shutdown: returns at once.  The loop runs on while ops are in flight, completing them;
 * the last one, or nx_cuda_stop_grace_ms, closes the handles so that the loop ends. */
void nx_cuda_exec_stop(void (*idle)(void));
void nx_cuda_exec_fini(void);
/* How long shutdown lets the ops in flight run (5000; tests set less). */
extern unsigned nx_cuda_stop_grace_ms;

/* ---- registrations (backend.c) -------------------------------------------------------- */

struct nx_reg;
/* The live memory / event registration id of client, or NULL. */
struct nx_reg *nx_cuda_reg_mem(uint32_t client_id, uint32_t id);
struct nx_reg *nx_cuda_reg_event(uint32_t client_id, uint32_t id);

#endif
