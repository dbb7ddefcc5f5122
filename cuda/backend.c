/*
 * backend.c - the CUDA device backend of nexard (device.h): start-up, the registrations
 * of the ranks' memory and events (CUDA IPC), and the ops table the core calls.
 *
 * Registrations are opened on the device the rank named by PCI bus id, since nexard
 * may see the devices in another order (CUDA_VISIBLE_DEVICES).  Nothing a rank says
 * about an allocation is believed: the size of a mapping is what the driver reports for
 * the mapped range, and every extent is checked against it (devop.c).
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_int.h"
#include "nexar.h"
#include "registry.h"

typedef CUresult (*addr_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr p);
static addr_range_fn addr_range;

const struct nx_device_host *nx_cuda_host;

/* ---- registrations ------------------------------------------------------------------ */

static void close_reg(struct nx_reg *r)
{
    if (r->kind == NX_DEV_MEMORY) {
        nx_cuda_exec_close_mem(r->device, r->handle); /* it would wait for the device */
        return;
    }
    cudaSetDevice(r->device);
    cudaEventDestroy((cudaEvent_t)r->handle);
    cudaGetLastError();
}

static struct nx_regtab *table(struct nx_dev_client *dc)
{
    if (!dc->state)
        dc->state = nx_regtab_new(close_reg);
    return dc->state;
}

static uint32_t cu_reg(struct nx_dev_client *dc, int kind, const uint8_t *handle, size_t len,
                       uint64_t base, uint64_t size, const char *pci, uint32_t *id,
                       uint64_t *mapped, char *err, size_t errlen)
{
    int dev = -1;
    void *h = NULL;
    uint64_t got = 0;
    cudaError_t e = cudaDeviceGetByPCIBusId(&dev, pci);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "device %s is not visible to nexard (%s); check its "
                 "CUDA_VISIBLE_DEVICES", pci, cudaGetErrorString(e));
        return NEXAR_ERR_UNSUPPORTED;
    }
    if ((e = cudaSetDevice(dev)) != cudaSuccess)
        goto fail;
    if (kind == NX_DEV_MEMORY) {
        cudaIpcMemHandle_t mh;
        memcpy(&mh, handle, sizeof(mh) < len ? sizeof(mh) : len);
        if ((e = cudaIpcOpenMemHandle(&h, mh, cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess)
            goto fail;
        CUdeviceptr b = 0;
        size_t sz = 0;
        if (addr_range(&b, &sz, (CUdeviceptr)(uintptr_t)h) != CUDA_SUCCESS ||
            b != (CUdeviceptr)(uintptr_t)h) {
            nx_cuda_exec_close_mem(dev, h);
            snprintf(err, errlen, "the mapping of the allocation at 0x%llx has no size",
                     (unsigned long long)base);
            return NEXAR_ERR_INTERNAL;
        }
        got = sz;
        if (sz != size)
            NX_DEBUG("cuda", "client %u: allocation 0x%llx: %llu bytes claimed, %zu mapped",
                     dc->id, (unsigned long long)base, (unsigned long long)size, sz);
    } else {
        cudaIpcEventHandle_t eh;
        cudaEvent_t ev;
        memcpy(&eh, handle, sizeof(eh) < len ? sizeof(eh) : len);
        if ((e = cudaIpcOpenEventHandle(&ev, eh)) != cudaSuccess)
            goto fail;
        h = ev;
    }
    struct nx_regtab *t = table(dc);
    struct nx_reg *r = nx_regtab_add(t, kind, dev, h, got);
    if (!r) {
        struct nx_reg tmp = {.kind = kind, .device = dev, .handle = h};
        close_reg(&tmp);
        snprintf(err, errlen, "out of memory");
        return NEXAR_ERR_NOMEM;
    }
    *id = r->id;
    *mapped = got;
    return NEXAR_OK;
fail:
    cudaGetLastError();
    snprintf(err, errlen, "cannot open the rank's CUDA IPC %s handle on device %s: %s",
             kind == NX_DEV_MEMORY ? "memory" : "event", pci, cudaGetErrorString(e));
    return NEXAR_ERR_INVALID;
}

static bool cu_unreg(struct nx_dev_client *dc, uint32_t id)
{
    return dc->state && nx_regtab_remove(dc->state, id);
}

static bool cu_mem_ok(struct nx_dev_client *dc, uint32_t id, uint64_t off, uint64_t bytes)
{
    struct nx_reg *r = dc->state ? nx_regtab_get(dc->state, id, NX_DEV_MEMORY) : NULL;
    return r && off <= r->size && bytes <= r->size - off;
}

static bool cu_event_ok(struct nx_dev_client *dc, uint32_t id)
{
    return dc->state && nx_regtab_get(dc->state, id, NX_DEV_EVENT);
}

static void cu_client_gone(struct nx_dev_client *dc)
{
    if (dc->state)
        nx_regtab_orphan(dc->state); /* mappings in use by queued ops close after them */
    dc->state = NULL;
}

struct nx_reg *nx_cuda_reg_mem(uint32_t client_id, uint32_t id)
{
    struct nx_dev_client *dc = nx_cuda_host->client(client_id);
    return dc && dc->state ? nx_regtab_get(dc->state, id, NX_DEV_MEMORY) : NULL;
}

struct nx_reg *nx_cuda_reg_event(uint32_t client_id, uint32_t id)
{
    struct nx_dev_client *dc = nx_cuda_host->client(client_id);
    return dc && dc->state ? nx_regtab_get(dc->state, id, NX_DEV_EVENT) : NULL;
}

static const struct nx_device_ops cuda_ops = {
    .name = "cuda",
    .reg = cu_reg,
    .unreg = cu_unreg,
    .mem_ok = cu_mem_ok,
    .event_ok = cu_event_ok,
    .run = nx_cuda_exec_run,
    .client_gone = cu_client_gone,
    .comm_gone = nx_cuda_exec_comm_gone,
    .host_alloc = nx_cuda_host_alloc,
    .host_free = nx_cuda_host_free,
    .copy = nx_cuda_exec_copy,
};

/* ---- start and stop ------------------------------------------------------------------- */

static void describe(int n, char *note, size_t len)
{
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    size_t off = (size_t)snprintf(note, len, "CUDA runtime %d.%d, driver %d.%d: %d device%s",
                                  rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, n,
                                  n == 1 ? "" : "s");
    for (int d = 0; d < n && off < len; d++) {
        struct cudaDeviceProp p;
        char pci[32] = "?";
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
            continue;
        cudaDeviceGetPCIBusId(pci, sizeof(pci), d);
        off += (size_t)snprintf(note + off, len - off, "%s %d %s [%s]", d ? ";" : ":", d,
                                p.name, pci);
    }
}

int nx_cuda_init(const struct nx_device_host *host, const struct nx_device_ops **ops,
                 char *note, size_t notelen)
{
    int n = 0;
    *ops = NULL;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(note, notelen, "built with CUDA, but no usable CUDA device (%s%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no device found",
                 e == cudaErrorInsufficientDriver
                     ? ": no NVIDIA driver here, or one older than the runtime"
                     : "");
        cudaGetLastError();
        NX_INFO("cuda", "device buffers off: %s", note);
        return 0;
    }
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&addr_range, 12000,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !addr_range) {
        snprintf(note, notelen, "built with CUDA, but the driver has no cuMemGetAddressRange");
        NX_WARN("cuda", "device buffers off: %s", note);
        return 0;
    }
    nx_cuda_host = host;
    int rv = nx_cuda_exec_init();
    if (rv < 0) {
        snprintf(note, notelen, "CUDA set-up failed (uv_async_init)");
        nx_cuda_host = NULL;
        return rv;
    }
    describe(n, note, notelen);
    *ops = &cuda_ops;
    NX_INFO("cuda", "device buffers on: %s", note);
    return 0;
}

void nx_cuda_stop(void (*idle)(void))
{
    if (nx_cuda_host)
        nx_cuda_exec_stop(idle);
    else if (idle)
        idle();
}

void nx_cuda_fini(void)
{
    if (!nx_cuda_host)
        return;
    nx_cuda_exec_fini();
    nx_cuda_hostmem_fini();
    nx_cuda_host = NULL;
}
