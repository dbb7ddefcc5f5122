/*
 * fake_cuda.c - a stand-in for libcuda.so.1 (its SONAME) on hosts without a GPU, so that
 * the shim's device-pointer path can be tested: the test loads it by path, as a CUDA
 * program has the real one loaded, and names one address range that the fake then
 * reports as device memory.  Every call the shim would use to really work with that
 * memory fails, which the test never gets to: without device support in nexard the
 * shim must refuse first.  The symbol names are those the shim resolves (cudrv.c).
 */
#include <stddef.h>
#include <stdint.h>

#define API __attribute__((visibility("default")))
#define FAIL 999 /* CUDA_ERROR_UNKNOWN */

typedef unsigned long long devptr;

static uintptr_t lo, hi;

/* The test's handle: [p, p + n) is "device memory" from now on. */
API void nx_fake_cuda_device_range(void *p, size_t n);
void nx_fake_cuda_device_range(void *p, size_t n)
{
    lo = (uintptr_t)p;
    hi = lo + n;
}

static int inside(devptr p)
{
    return p >= lo && p < hi;
}

API int cuGetErrorString(int rc, const char **s);
int cuGetErrorString(int rc, const char **s)
{
    *s = rc == FAIL ? "the fake libcuda of the tests does not do that" : "fake error";
    return 0;
}

API int cuDriverGetVersion(int *v);
int cuDriverGetVersion(int *v)
{
    *v = 13000;
    return 0;
}

/* MEMORY_TYPE 2 (device), IS_MANAGED 8, CONTEXT 1, BUFFER_ID 7 (cudrv.h). */
API int cuPointerGetAttributes(unsigned n, int *attrs, void **data, devptr p);
int cuPointerGetAttributes(unsigned n, int *attrs, void **data, devptr p)
{
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case 2: *(unsigned *)data[i] = inside(p) ? 2 : 0; break;
        case 8: *(unsigned *)data[i] = 0; break;
        case 1: *(void **)data[i] = inside(p) ? (void *)0x1 : NULL; break;
        case 7: *(unsigned long long *)data[i] = inside(p) ? 42 : 0; break;
        default: break;
        }
    }
    return 0;
}

API int cuMemGetAddressRange_v2(devptr *base, size_t *size, devptr p);
int cuMemGetAddressRange_v2(devptr *base, size_t *size, devptr p)
{
    if (!inside(p))
        return 1;
    *base = lo;
    *size = hi - lo;
    return 0;
}

API int cuCtxPushCurrent_v2(void *ctx);
int cuCtxPushCurrent_v2(void *ctx)
{
    (void)ctx;
    return 0;
}

API int cuCtxPopCurrent_v2(void **ctx);
int cuCtxPopCurrent_v2(void **ctx)
{
    *ctx = NULL;
    return 0;
}

#define STUB(name)                                                                         \
    API int name(void);                                                                    \
    int name(void)                                                                         \
    {                                                                                      \
        return FAIL;                                                                       \
    }
STUB(cuIpcGetMemHandle)
STUB(cuIpcGetEventHandle)
STUB(cuEventCreate)
STUB(cuEventDestroy_v2)
STUB(cuEventRecord)
STUB(cuEventSynchronize)
STUB(cuEventQuery)
STUB(cuStreamWaitEvent)
STUB(cuStreamGetCtx)
STUB(cuStreamWaitValue64_v2)
STUB(cuCtxGetDevice)
STUB(cuDeviceGetPCIBusId)
STUB(cuDeviceGetAttribute)
STUB(cuMemHostRegister_v2)
STUB(cuMemHostUnregister)
STUB(cuMemHostGetDevicePointer_v2)
