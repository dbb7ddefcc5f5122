/*
 * test_gpu_stream.c - stream ordering: kernel -> collective -> kernel on the caller's
 * stream, with no host synchronization in between.
 *
 *   test_gpu_stream --world N [--nodes K]    (K simulated nodes: gpu_job.c)
 *
 * Each rank queues on its stream: a kernel that spins for SPIN_MS (so the data is not
 * there yet), a kernel that writes the rank's input, nexar_all_reduce on that buffer,
 * and a kernel that doubles the result; then, for the event API, the comm stream
 * records an event that a second ("compute") stream waits for before it doubles a copy.
 * Only at the very end does a rank wait for its streams.  Correct results prove both
 * directions of the ordering: nexard waited on the GPU for the input kernel (else it
 * would have reduced stale bytes), and the doubling kernel waited for the collective
 * (else it would have doubled the input, and the collective overwritten it).  Each call
 * must also return long before the spin ends: the CPU was not blocked.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "harness.h"

#define SPIN_MS 300
#define ITERS 3
#define N ((1u << 20) + 5)

#define CU(call) GX_CU(call, 1)

/* What gx_fill_f32 writes at i. */
static float fill_at(size_t i, unsigned seed)
{
    return (float)((int)((i * 31u + seed) % 97u) - 48);
}

static int check(const char *what, const float *got, int size, unsigned seed0, float k)
{
    for (size_t i = 0; i < N; i++) {
        float sum = 0;
        for (int r = 0; r < size; r++)
            sum += fill_at(i, seed0 + (unsigned)r);
        if (got[i] != k * sum) {
            tl_log("FAIL %s: element %zu is %g, expected %g", what, i, got[i], k * sum);
            return 1;
        }
    }
    return 0;
}

static int rank_main(struct hx_rank *hr)
{
    CU(cudaSetDevice(0));
    CU(cudaFree(0));
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    cudaStream_t s, compute;
    float *d[ITERS], *d_copy, *h = malloc(N * sizeof(float));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    for (int it = 0; it < ITERS; it++)
        CU(cudaMalloc((void **)&d[it], N * sizeof(float)));
    CU(cudaMalloc((void **)&d_copy, N * sizeof(float)));
    if (tl_check_status("nexar_comm_set_stream", NEXAR_OK, nexar_comm_set_stream(w, s)))
        return 1;
    /* Registration round trips happen on first use: one warm-up op, waited for. */
    gx_fill_f32(d[0], N, 0, s);
    if (tl_check_status("warm-up", NEXAR_OK, nexar_all_reduce(w, d[0], N, NEXAR_F32, NEXAR_SUM)) ||
        tl_check_status("warm-up sync", NEXAR_OK, nexar_sync(w)))
        return 1;

    double slowest = 0;
    for (int it = 0; it < ITERS; it++) {
        unsigned seed = 100u * (unsigned)it;
        if (gx_spin(s, SPIN_MS * 1000) || gx_fill_f32(d[it], N, seed + (unsigned)me, s)) {
            tl_log("FAIL kernel launch: %s", gx_cuda_error());
            return 1;
        }
        double t0 = tl_now();
        nexar_status_t st = nexar_all_reduce(w, d[it], N, NEXAR_F32, NEXAR_SUM);
        double dt = tl_now() - t0;
        if (tl_check_status("stream-ordered all_reduce", NEXAR_OK, st))
            return 1;
        slowest = dt > slowest ? dt : slowest;
        if (gx_scale_f32(d[it], N, 2.0f, s)) {
            tl_log("FAIL scale kernel: %s", gx_cuda_error());
            return 1;
        }
    }
    /* The event API: the compute stream waits for the comm stream's last op. */
    nexar_event_t *ev = NULL;
    if (tl_check_status("nexar_event_create", NEXAR_OK, nexar_event_create(w, &ev)) ||
        tl_check_status("nexar_event_record_comm", NEXAR_OK, nexar_event_record_comm(w, ev)) ||
        tl_check_status("nexar_stream_wait_event", NEXAR_OK, nexar_stream_wait_event(compute, ev)))
        return 1;
    CU(cudaMemcpyAsync(d_copy, d[ITERS - 1], N * sizeof(float), cudaMemcpyDeviceToDevice,
                       compute));
    if (gx_scale_f32(d_copy, N, 2.0f, compute))
        return 1;

    /* The only host synchronization. */
    CU(cudaStreamSynchronize(s));
    CU(cudaStreamSynchronize(compute));
    bad |= tl_check_status("nexar_sync", NEXAR_OK, nexar_sync(w));
    for (int it = 0; it < ITERS && !bad; it++) {
        char what[64];
        snprintf(what, sizeof(what), "rank %d iteration %d", me, it);
        CU(cudaMemcpy(h, d[it], N * sizeof(float), cudaMemcpyDeviceToHost));
        bad |= check(what, h, size, 100u * (unsigned)it, 2.0f);
    }
    if (!bad) {
        CU(cudaMemcpy(h, d_copy, N * sizeof(float), cudaMemcpyDeviceToHost));
        bad |= check("compute stream after the comm stream's event", h, size,
                     100u * (ITERS - 1), 4.0f);
    }
    if (slowest > SPIN_MS / 2000.0) {
        tl_log("FAIL rank %d: a stream-ordered all_reduce blocked the CPU for %.0f ms while "
               "its stream spun %d ms", me, slowest * 1e3, SPIN_MS);
        bad = 1;
    }
    if (me == 0 && !bad)
        tl_log("kernel -> all_reduce -> kernel on the caller's stream, no host sync between: "
               "exact over %d ranks; the slowest call took %.2f ms while the stream spun %d ms",
               size, slowest * 1e3, SPIN_MS);
    nexar_event_destroy(ev);
    nexar_finalize();
    return bad;
}

int main(int argc, char **argv)
{
    return gx_job_main(argc, argv, "test_gpu_stream", "gpu-stream", rank_main, 300);
}
