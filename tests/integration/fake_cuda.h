/*
 * fake_cuda.h - the test side of the fake libcuda (fake_cuda.c): its entry points beyond
 * the driver API, which a rank reaches with dlopen/dlsym, and the record of a stream wait
 * they share with it.  One definition, so that the library and its tests cannot drift.
 */
#ifndef NX_FAKE_CUDA_H
#define NX_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One stream wait the fake modelled (nx_fake_cuda_waits). */
struct nx_fake_wait {
    uint64_t value, t_enq_ns, t_rel_ns; /* t_rel_ns 0: not released */
    int dropped;
};

struct nx_fake_cuda {
    void (*mark)(void *p, size_t len);        /* nx_fake_cuda_device_range: "device" */
    void (*free_)(void *p);                   /* nx_fake_cuda_free: the allocation goes */
    void *(*stream)(void);                    /* nx_fake_cuda_stream: a new stream */
    int (*waits)(struct nx_fake_wait *, int); /* nx_fake_cuda_waits: copies them out */
    void *(*shared)(size_t n);                /* nx_fake_cuda_shared: data nexard moves */
};

/* nx_fake_cuda_shared names the segments of process pid "/nxfk.PID.SEQ", SEQ counting
 * from 0: this writes "/nxfk.PID." into buf and returns its length. */
static inline int nx_fake_cuda_shm_prefix(char *buf, size_t len, int pid)
{
    return snprintf(buf, len, "/nxfk.%d.", pid % 10000000);
}

/*
 * Loads $NX_FAKE_CUDA with RTLD_GLOBAL, so that the shim finds it as libcuda.so.1, and
 * its entry points.  0, or -1 with why in err.
 */
int nx_fake_cuda_load(struct nx_fake_cuda *f, char *err, size_t errlen);

#endif
