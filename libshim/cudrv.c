/*
 * cudrv.c - loading libcuda.so.1 (see cudrv.h).  Called with the shim's lock held.
 *
 * The symbol names are the versions cuda.h 13 binds each API name to (cuEventDestroy is
 * cuEventDestroy_v2, and so on): dlsym by the plain name would give the old ABI.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "cudrv.h"

static struct nx_cudrv drv;
static void *lib;
static bool resolved;
static char load_err[192];
/* The loader's count of objects loaded when a probe last found no libcuda.  A probe
 * runs on every op of a CPU-only program, and dlopen(RTLD_NOLOAD) costs ~100 us (it
 * searches the library path); the count costs ~15 ns and changes when anything loads. */
static unsigned long long probed_adds = ~0ull;

struct sym {
    const char *name;
    size_t off;
};

#define SYM(field, name) {name, offsetof(struct nx_cudrv, field)}
static const struct sym syms[] = {
    SYM(GetErrorString, "cuGetErrorString"),
    SYM(DriverGetVersion, "cuDriverGetVersion"),
    SYM(PointerGetAttributes, "cuPointerGetAttributes"),
    SYM(MemGetAddressRange, "cuMemGetAddressRange_v2"),
    SYM(IpcGetMemHandle, "cuIpcGetMemHandle"),
    SYM(IpcGetEventHandle, "cuIpcGetEventHandle"),
    SYM(EventCreate, "cuEventCreate"),
    SYM(EventDestroy, "cuEventDestroy_v2"),
    SYM(EventRecord, "cuEventRecord"),
    SYM(EventSynchronize, "cuEventSynchronize"),
    SYM(EventQuery, "cuEventQuery"),
    SYM(StreamWaitEvent, "cuStreamWaitEvent"),
    SYM(StreamGetCtx, "cuStreamGetCtx"),
    SYM(StreamWaitValue64, "cuStreamWaitValue64_v2"),
    SYM(CtxPushCurrent, "cuCtxPushCurrent_v2"),
    SYM(CtxPopCurrent, "cuCtxPopCurrent_v2"),
    SYM(CtxGetDevice, "cuCtxGetDevice"),
    SYM(DeviceGetPCIBusId, "cuDeviceGetPCIBusId"),
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute"),
    SYM(MemHostRegister, "cuMemHostRegister_v2"),
    SYM(MemHostUnregister, "cuMemHostUnregister"),
    SYM(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
};

/* Resolves every symbol or none: a driver too old for one of them is no driver to us. */
static bool resolve(void *h)
{
    struct nx_cudrv t;
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            snprintf(load_err, sizeof(load_err),
                     "libcuda.so.1 has no %s (the driver is older than CUDA 12)", syms[i].name);
            return false;
        }
        memcpy((char *)&t + syms[i].off, &f, sizeof(f));
    }
    drv = t;
    return true;
}

static int adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
        *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* the first object carries the count */
}

const struct nx_cudrv *nx_cudrv_get(bool probe, const char **why)
{
    if (resolved)
        return &drv;
    if (probe) {
        unsigned long long adds = ~0ull - 1; /* no count: probe every time */
        dl_iterate_phdr(adds_cb, &adds);
        if (adds == probed_adds) {
            if (why)
                *why = "libcuda.so.1 is not loaded in this process";
            return NULL;
        }
        if (adds != ~0ull - 1)
            probed_adds = adds;
    }
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | (probe ? RTLD_NOLOAD : 0));
    if (!h) {
        if (!probe) {
            const char *e = dlerror();
            snprintf(load_err, sizeof(load_err), "libcuda.so.1 not found (%s)",
                     e ? e : "dlopen failed");
        }
        if (why)
            *why = probe ? "libcuda.so.1 is not loaded in this process" : load_err;
        return NULL;
    }
    if (!resolve(h)) {
        dlclose(h);
        if (why)
            *why = load_err;
        return NULL;
    }
    lib = h; /* kept for the life of the process: the driver cannot be unloaded safely */
    resolved = true;
    return &drv;
}

const char *nx_cudrv_errstr(nx_cu_result rc)
{
    static __thread char buf[96];
    const char *s = NULL;
    if (resolved && drv.GetErrorString(rc, &s) != NX_CUDA_SUCCESS)
        s = NULL;
    snprintf(buf, sizeof(buf), "CUDA error %d%s%s%s", rc, s ? " (" : "", s ? s : "",
             s ? ")" : "");
    return buf;
}
