/*
 * cudrv.h - the few CUDA driver API entry points the shim uses, loaded at run time.
 *
 * Why dlopen and our own declarations: one libnexarshim serves hosts with and without a
 * GPU.  Linking libcuda would make the library fail to load where there is no driver,
 * and building against the toolkit's cuda.h would tie the shim's build to the toolkit.
 * The declarations below copy the driver ABI (types, constants and the symbol versions
 * that cuda.h 13 maps each name to); tests/unit/test_cudrv_abi.c checks them against
 * the toolkit's cuda.h whenever the build has CUDA.
 *
 * Detection never initializes CUDA: the shim only asks the driver about a pointer when
 * the process already loaded libcuda.so.1 (RTLD_NOLOAD) - a process that did not cannot
 * own device memory - and CUDA_ERROR_NOT_INITIALIZED or an unknown pointer mean host
 * memory.  Stream and event calls load the library for real.
 */
#ifndef NX_CUDRV_H
#define NX_CUDRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int nx_cu_result;                 /* CUresult; 0 is CUDA_SUCCESS */
typedef int nx_cu_device;                 /* CUdevice */
typedef unsigned long long nx_cu_devptr;  /* CUdeviceptr */
typedef struct nx_cu_ctx_st *nx_cu_ctx;   /* CUcontext */
typedef struct nx_cu_stream_st *nx_cu_stream; /* CUstream */
typedef struct nx_cu_event_st *nx_cu_event;   /* CUevent */

#define NX_CU_IPC_HANDLE_SIZE 64
typedef struct {
    char reserved[NX_CU_IPC_HANDLE_SIZE];
} nx_cu_ipc_handle; /* CUipcMemHandle and CUipcEventHandle */

/* cuda.h values */
#define NX_CUDA_SUCCESS 0
#define NX_CUDA_ERROR_NOT_INITIALIZED 3
#define NX_CUDA_ERROR_NOT_READY 600
#define NX_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define NX_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define NX_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define NX_CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define NX_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define NX_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define NX_CU_MEMORYTYPE_DEVICE 2
#define NX_CU_EVENT_DISABLE_TIMING 0x2
#define NX_CU_EVENT_INTERPROCESS 0x4
#define NX_CU_STREAM_WAIT_VALUE_GEQ 0x0
#define NX_CU_MEMHOSTREGISTER_PORTABLE 0x1
#define NX_CU_MEMHOSTREGISTER_DEVICEMAP 0x2
#define NX_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS 122
#define NX_CU_STREAM_LEGACY ((nx_cu_stream)0x1)

struct nx_cudrv {
    nx_cu_result (*GetErrorString)(nx_cu_result, const char **);
    nx_cu_result (*DriverGetVersion)(int *);
    nx_cu_result (*PointerGetAttributes)(unsigned, int *, void **, nx_cu_devptr);
    nx_cu_result (*MemGetAddressRange)(nx_cu_devptr *, size_t *, nx_cu_devptr);
    nx_cu_result (*IpcGetMemHandle)(nx_cu_ipc_handle *, nx_cu_devptr);
    nx_cu_result (*IpcGetEventHandle)(nx_cu_ipc_handle *, nx_cu_event);
    nx_cu_result (*EventCreate)(nx_cu_event *, unsigned);
    nx_cu_result (*EventDestroy)(nx_cu_event);
    nx_cu_result (*EventRecord)(nx_cu_event, nx_cu_stream);
    nx_cu_result (*EventSynchronize)(nx_cu_event);
    nx_cu_result (*EventQuery)(nx_cu_event);
    nx_cu_result (*StreamWaitEvent)(nx_cu_stream, nx_cu_event, unsigned);
    nx_cu_result (*StreamGetCtx)(nx_cu_stream, nx_cu_ctx *);
    nx_cu_result (*StreamWaitValue64)(nx_cu_stream, nx_cu_devptr, uint64_t, unsigned);
    nx_cu_result (*CtxPushCurrent)(nx_cu_ctx);
    nx_cu_result (*CtxPopCurrent)(nx_cu_ctx *);
    nx_cu_result (*CtxGetDevice)(nx_cu_device *);
    nx_cu_result (*DeviceGetPCIBusId)(char *, int, nx_cu_device);
    nx_cu_result (*DeviceGetAttribute)(int *, int, nx_cu_device);
    nx_cu_result (*MemHostRegister)(void *, size_t, unsigned);
    nx_cu_result (*MemHostUnregister)(void *);
    nx_cu_result (*MemHostGetDevicePointer)(nx_cu_devptr *, void *, unsigned);
};

/* The table when libcuda.so.1 is loaded, else NULL.  probe: only if the process
 * already has it (pointer detection); otherwise load it (streams, events).  On
 * failure why (if not NULL) gets a static or thread-local reason. */
const struct nx_cudrv *nx_cudrv_get(bool probe, const char **why);

/* "CUDA_ERROR_INVALID_VALUE (invalid argument)"-style text for rc; thread-local. */
const char *nx_cudrv_errstr(nx_cu_result rc);

#endif
