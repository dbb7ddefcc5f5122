/* gpu_util.cu - see gpu_util.h. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"

static char last_error[160];

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(last_error, sizeof(last_error), "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

extern "C" const char *gx_cuda_error(void)
{
    return last_error;
}

extern "C" void gx_require_gpu(const char *test)
{
    int fds[2];
    char why[160] = "the check could not run";
    if (pipe(fds) == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            int n = 0;
            cudaError_t e = cudaGetDeviceCount(&n);
            char msg[160];
            int len = snprintf(msg, sizeof(msg), "%s%s",
                               e != cudaSuccess ? cudaGetErrorString(e)
                               : n == 0         ? "cudaGetDeviceCount found 0 devices"
                                                : "",
                               e == cudaErrorInsufficientDriver
                                   ? ": no NVIDIA driver here, or one older than the runtime"
                                   : "");
            if (write(fds[1], msg, (size_t)len) < 0)
                _exit(2);
            _exit(e == cudaSuccess && n > 0 ? 0 : 1);
        }
        close(fds[1]);
        ssize_t r = pid > 0 ? read(fds[0], why, sizeof(why) - 1) : -1;
        why[r > 0 ? r : 0] = '\0';
        close(fds[0]);
        int ws = 0;
        if (pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
            return;
    }
    printf("%s: no CUDA device: skipped (%s)\n", test, why);
    fflush(stdout);
    exit(GX_SKIP);
}

__global__ void spin_k(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

__global__ void fill_k(float *d, size_t n, unsigned seed)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        d[i] = (float)((int)((i * 31u + seed) % 97u) - 48);
}

__global__ void scale_k(float *d, size_t n, float k)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        d[i] = d[i] * k;
}

static unsigned blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 1024 ? (b ? b : 1) : 1024);
}

extern "C" int gx_spin(void *stream, unsigned usec)
{
    int khz = 0, dev = 0;
    if (check(cudaGetDevice(&dev), "cudaGetDevice") ||
        check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev), "cudaDeviceGetAttribute"))
        return -1;
    spin_k<<<1, 1, 0, (cudaStream_t)stream>>>((long long)khz * usec / 1000);
    return check(cudaGetLastError(), "spin kernel");
}

extern "C" int gx_fill_f32(float *d, size_t n, unsigned seed, void *stream)
{
    fill_k<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(d, n, seed);
    return check(cudaGetLastError(), "fill kernel");
}

extern "C" int gx_scale_f32(float *d, size_t n, float k, void *stream)
{
    scale_k<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(d, n, k);
    return check(cudaGetLastError(), "scale kernel");
}
