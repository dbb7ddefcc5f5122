/* fake_cuda_load.c - see fake_cuda.h. */
#include "fake_cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int nx_fake_cuda_load(struct nx_fake_cuda *f, char *err, size_t errlen)
{
    const char *path = getenv("NX_FAKE_CUDA");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!lib) {
        snprintf(err, errlen, "cannot load the fake libcuda (%s): %s",
                 path ? path : "NX_FAKE_CUDA unset", path ? dlerror() : "no path");
        return -1;
    }
    f->mark = (void (*)(void *, size_t))dlsym(lib, "nx_fake_cuda_device_range");
    f->free_ = (void (*)(void *))dlsym(lib, "nx_fake_cuda_free");
    f->stream = (void *(*)(void))dlsym(lib, "nx_fake_cuda_stream");
    f->waits = (int (*)(struct nx_fake_wait *, int))dlsym(lib, "nx_fake_cuda_waits");
    f->shared = (void *(*)(size_t))dlsym(lib, "nx_fake_cuda_shared");
    if (!f->mark || !f->free_ || !f->stream || !f->waits || !f->shared) {
        snprintf(err, errlen, "the fake libcuda %s lacks the tests' entry points", path);
        return -1;
    }
    return 0;
}
