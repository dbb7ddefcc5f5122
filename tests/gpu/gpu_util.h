/*
 * gpu_util.h - what the gpu suite's programs share: the skip rule and a few kernels.
 *
 * Every program of the suite starts with gx_require_gpu(): without a CUDA device it
 * prints "no CUDA device: skipped (...)" and exits 77, which meson counts as skipped.
 * The check runs in a child process, because a process that touched CUDA cannot fork
 * ranks that use it.
 */
#ifndef GX_GPU_UTIL_H
#define GX_GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GX_SKIP 77

/* Exits GX_SKIP, saying why, unless a CUDA device is usable; test names the program. */
void gx_require_gpu(const char *test);

/*
 * The main of a program whose ranks share the GPU: --world N (default 2) ranks of fn
 * against a private nexard (NEXAR_TIMEOUT 120), stopped after limit_s.  --nodes K: the
 * ranks in blocks on K simulated nodes instead, started by $NEXAR_RUN --nodes K as this
 * program once more (each runs fn and exits), so that device buffers cross nodes.
 * --nexar-timeout S: NEXAR_TIMEOUT for the ranks instead of 120.
 * Skips (exits GX_SKIP) without a GPU, as gx_require_gpu(test) does; tag prefixes the
 * log.  0 when every rank returned 0, else 1.
 */
struct hx_rank;
int gx_job_main(int argc, char **argv, const char *test, const char *tag,
                int (*fn)(struct hx_rank *r), double limit_s);

/* Runs a CUDA runtime call; on an error logs where and what (tl_log, harness.h) and
 * returns ret from the calling function. */
#define GX_CU(call, ret)                                                                   \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            tl_log("FAIL %s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            return ret;                                                                    \
        }                                                                                  \
    } while (0)

/* CUDA error text of the last failed call in this process ("" when none). */
const char *gx_cuda_error(void);

/* ---- kernels, queued on stream (a cudaStream_t; NULL: the legacy stream) ---------- */

/* Busy-waits on the GPU for about usec microseconds: work that is not ready yet. */
int gx_spin(void *stream, unsigned usec);
/* d[i] = (float)(((i * 31 + seed) % 97) - 48): exact in every float sum of few ranks. */
int gx_fill_f32(float *d, size_t n, unsigned seed, void *stream);
/* d[i] *= k. */
int gx_scale_f32(float *d, size_t n, float k, void *stream);

#ifdef __cplusplus
}
#endif

#endif
