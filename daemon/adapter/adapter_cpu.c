/* adapter_cpu.c - the adapter for host memory: memcpy and the CPU reduce kernels. */
#include <stdbool.h>
#include <string.h>

#include "adapter.h"
#include "reduce.h"

/* A rank may legitimately hand us the same buffer as source and destination (in
 * place), and memcpy must not see overlapping arguments. */
static void copy_bytes(void *dst, const void *src, size_t bytes)
{
    if (dst == src || bytes == 0)
        return;
    const char *d = dst, *s = src;
    if (d + bytes <= s || s + bytes <= d)
        memcpy(dst, src, bytes);
    else
        memmove(dst, src, bytes);
}

static int cpu_copy(void *dst, const void *src, size_t bytes)
{
    copy_bytes(dst, src, bytes);
    return 0;
}

static int cpu_scan(void *const *dsts, const void *const *srcs, size_t nranks, size_t n,
                    uint8_t dtype, uint8_t op, int exclusive)
{
    return nx_scan_fanout(dsts, srcs, nranks, n, dtype, op, exclusive != 0);
}

static int cpu_gather_iov(void *host_dst, const struct nx_iov *src, size_t n)
{
    char *d = host_dst;
    for (size_t i = 0; i < n; i++) {
        copy_bytes(d, src[i].ptr, src[i].bytes);
        d += src[i].bytes;
    }
    return 0;
}

static int cpu_scatter_iov(const struct nx_iov *dst, size_t n, const void *host_src)
{
    const char *s = host_src;
    for (size_t i = 0; i < n; i++) {
        copy_bytes(dst[i].ptr, s, dst[i].bytes);
        s += dst[i].bytes;
    }
    return 0;
}

const struct nx_adapter nx_adapter_cpu = {
    .name = "cpu",
    .stage_for_send = cpu_copy,
    .receive_to_device = cpu_copy,
    .reduce_inplace = nx_reduce_inplace,
    .reduce_fanout = nx_reduce_fanout,
    .scan_fanout = cpu_scan,
    .fill_identity = nx_fill_identity,
    .widen_half = nx_half_widen,
    .narrow_half = nx_half_narrow,
    .stage_for_send_iov = cpu_gather_iov,
    .receive_to_device_iov = cpu_scatter_iov,
};
