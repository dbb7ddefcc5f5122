/*
 * test_cudrv_abi.c - libshim/cudrv.h declares the few driver API pieces the shim uses by
 * itself, so that the shim builds without the CUDA toolkit.  This test (built only with
 * -Dcuda, where the toolkit is there) holds those declarations to the toolkit's cuda.h:
 * every constant, every type size, and every symbol name the loader looks up must be
 * the one cuda.h binds the API name to (cuEventDestroy -> cuEventDestroy_v2, ...).
 * Compile time does most of the work; no GPU is needed.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "../../libshim/cudrv.c"

#define SAME(ours, theirs) _Static_assert((ours) == (theirs), #ours " != " #theirs)

SAME(NX_CUDA_SUCCESS, CUDA_SUCCESS);
SAME(NX_CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME(NX_CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_READY);
SAME(NX_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
SAME(NX_CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_CONTEXT);
SAME(NX_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
SAME(NX_CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_BUFFER_ID);
SAME(NX_CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_IS_MANAGED);
SAME(NX_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
SAME(NX_CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
SAME(NX_CU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING);
SAME(NX_CU_EVENT_INTERPROCESS, CU_EVENT_INTERPROCESS);
SAME(NX_CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WAIT_VALUE_GEQ);
SAME(NX_CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE);
SAME(NX_CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP);
SAME(NX_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
     CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS);
SAME(NX_CU_IPC_HANDLE_SIZE, CU_IPC_HANDLE_SIZE);
SAME(sizeof(nx_cu_ipc_handle), sizeof(CUipcMemHandle));
SAME(sizeof(nx_cu_ipc_handle), sizeof(CUipcEventHandle));
SAME(sizeof(nx_cu_devptr), sizeof(CUdeviceptr));
SAME(sizeof(nx_cu_result), sizeof(CUresult));
SAME(sizeof(nx_cu_device), sizeof(CUdevice));
SAME(sizeof(nx_cu_ctx), sizeof(CUcontext));
SAME(sizeof(int), sizeof(CUpointer_attribute));

#define XSTR(x) STR(x)
#define STR(x) #x

/* What cuda.h makes of each API name, in the order of cudrv.c's table. */
static const char *const expected[] = {
    XSTR(cuGetErrorString),  XSTR(cuDriverGetVersion),      XSTR(cuPointerGetAttributes),
    XSTR(cuMemGetAddressRange), XSTR(cuIpcGetMemHandle),    XSTR(cuIpcGetEventHandle),
    XSTR(cuEventCreate),     XSTR(cuEventDestroy),          XSTR(cuEventRecord),
    XSTR(cuEventSynchronize), XSTR(cuEventQuery),           XSTR(cuStreamWaitEvent),
    XSTR(cuStreamGetCtx),    XSTR(cuStreamWaitValue64),     XSTR(cuCtxPushCurrent),
    XSTR(cuCtxPopCurrent),   XSTR(cuCtxGetDevice),          XSTR(cuDeviceGetPCIBusId),
    XSTR(cuDeviceGetAttribute), XSTR(cuMemHostRegister),    XSTR(cuMemHostUnregister),
    XSTR(cuMemHostGetDevicePointer),
};

int main(void)
{
    int failures = 0;
    size_t n = sizeof(syms) / sizeof(syms[0]);
    if (n != sizeof(expected) / sizeof(expected[0])) {
        fprintf(stderr, "cudrv.c looks up %zu symbols, this test knows %zu\n", n,
                sizeof(expected) / sizeof(expected[0]));
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(syms[i].name, expected[i]) != 0) {
            fprintf(stderr, "cudrv.c looks up %s where cuda.h binds %s\n", syms[i].name,
                    expected[i]);
            failures++;
        }
    }
    /* Without a driver the loader must say so, not crash. */
    const char *why = NULL;
    if (!nx_cudrv_get(true, &why) && !why) {
        fprintf(stderr, "nx_cudrv_get gave no reason\n");
        failures++;
    }
    if (failures)
        return 1;
    printf("test_cudrv_abi: ok (%zu symbols match cuda.h %d)\n", n, CUDA_VERSION);
    return 0;
}
