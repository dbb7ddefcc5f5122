/*
 * adapter.h - how the algorithms touch rank buffers.  Mirrors nexar's DeviceAdapter:
 * the algorithms stage data for sending, receive into a rank's buffer and reduce in
 * place only through these ops, so that a device adapter (CUDA IPC buffers, staged
 * through pinned host memory on async streams) replaces the CPU one without changing
 * an algorithm.  Pointers are the adapter's own kind of address (host pointers for
 * the CPU adapter, device pointers mapped in nexard for the CUDA one, cuda/).
 *
 * Every op returns 0 or a negative errno, and is done when it returns - unless a stream
 * is bound (the stream forms below): then it is queued on that stream and returns at
 * once, and the caller learns of its end from the stream.
 */
#ifndef NX_ADAPTER_H
#define NX_ADAPTER_H

#include <stddef.h>
#include <stdint.h>

struct nx_iov {
    void *ptr;
    size_t bytes;
};

struct nx_adapter {
    const char *name;
    /* Copies bytes of a rank buffer into host memory that the transport will send. */
    int (*stage_for_send)(void *host_dst, const void *src, size_t bytes);
    /* Copies received host bytes into a rank buffer. */
    int (*receive_to_device)(void *dst, const void *host_src, size_t bytes);
    /* dst = dst op src, n elements; src is host memory. */
    int (*reduce_inplace)(void *dst, const void *src, size_t n, uint8_t dtype, uint8_t op);
    /* dsts[0..ndst) = op over srcs[0..nsrc): the many-rank local reduction. */
    int (*reduce_fanout)(void *const *dsts, size_t ndst, const void *const *srcs,
                         size_t nsrc, size_t n, uint8_t dtype, uint8_t op);
    /* Prefix over ranks (scan / exscan). */
    int (*scan_fanout)(void *const *dsts, const void *const *srcs, size_t nranks,
                       size_t n, uint8_t dtype, uint8_t op, int exclusive);
    int (*fill_identity)(void *dst, size_t n, uint8_t dtype, uint8_t op);
    /* F16/BF16 <-> f32: a reduction across nodes keeps its node-level partials in f32,
     * so that every element is rounded once, as on one node.  host_dst / host_src is
     * host memory of n floats; NULL where the adapter cannot. */
    int (*widen_half)(float *host_dst, const void *src, size_t n, uint8_t dtype);
    int (*narrow_half)(void *dst, const float *host_src, size_t n, uint8_t dtype);
    /* iov forms: gather scattered rank buffers into one host buffer and back. */
    int (*stage_for_send_iov)(void *host_dst, const struct nx_iov *src, size_t n);
    int (*receive_to_device_iov)(const struct nx_iov *dst, size_t n, const void *host_src);
    /* Stream forms; NULL in an adapter without streams (the CPU's), whose ops may also
     * run on several threads at once (coll_local.c splits big chunks across workers).
     * use_stream(s): until the next call from this thread, the ops above queue their
     * work on s (a cudaStream_t for CUDA) and return at once.  Returns the previous
     * stream.  The CUDA adapter has no synchronous form: with no stream bound its ops
     * fail (-EINVAL). */
    void *(*use_stream)(void *stream);
};

extern const struct nx_adapter nx_adapter_cpu;

#endif
