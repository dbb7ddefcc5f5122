/*
 * test_gpu_events.c - the event functions and nexar_comm_stream_synchronize on a real
 * GPU (suite gpu; exits 77 without one).  tests/integration/test_device_events.c checks
 * their arguments and logic without a GPU; this checks what only a device can show.
 *
 *   test_gpu_events --world N
 *
 *   1. nexar_event_record on a compute stream behind a 300 ms spin kernel:
 *      nexar_event_query reads 0 while it spins, nexar_event_synchronize returns after
 *      it, and the query then reads 1.
 *   2. nexar_comm_wait_event: the compute stream spins, then writes each rank's input;
 *      its event is the communicator's stream's condition, so the stream-ordered
 *      all_reduce reduces the written input, and a kernel on the comm stream doubles
 *      the result.  nexar_comm_stream_synchronize then returns only when all of it is
 *      done: the result is read with a copy that does not wait for the streams
 *      (non-blocking streams), and must be exact.  Every call before it returns long
 *      before the spin ends.
 *   3. nexar_comm_stream_synchronize on a communicator without a stream is nexar_sync.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu_util.h"
#include "harness.h"

#define SPIN_MS 300
#define N ((1u << 18) + 3)

#define CU(call) GX_CU(call, 1)

#define ST(what, call)                                                                     \
    do {                                                                                   \
        if (tl_check_status((what), NEXAR_OK, (call)))                                     \
            return 1;                                                                      \
    } while (0)

/* What gx_fill_f32 writes at i. */
static float fill_at(size_t i, unsigned seed)
{
    return (float)((int)((i * 31u + seed) % 97u) - 48);
}

static int rank_main(struct hx_rank *hr)
{
    (void)hr;
    CU(cudaSetDevice(0));
    CU(cudaFree(0));
    nexar_comm_t *w = NULL, *plain = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    cudaStream_t s, compute;
    float *d, *h = malloc(N * sizeof(float));
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CU(cudaMalloc((void **)&d, N * sizeof(float)));
    ST("nexar_comm_set_stream", nexar_comm_set_stream(w, s));
    gx_fill_f32(d, N, 0, s); /* warm-up: registrations happen on first use */
    ST("warm-up all_reduce", nexar_all_reduce(w, d, N, NEXAR_F32, NEXAR_SUM));
    ST("warm-up sync", nexar_sync(w));

    /* 1. record / query / synchronize on a compute stream. */
    nexar_event_t *spun = NULL, *written = NULL;
    ST("nexar_event_create", nexar_event_create(w, &spun));
    ST("nexar_event_create", nexar_event_create(w, &written));
    if (gx_spin(compute, SPIN_MS * 1000)) {
        tl_log("FAIL spin kernel: %s", gx_cuda_error());
        return 1;
    }
    double t0 = tl_now();
    int done = 7;
    ST("nexar_event_record", nexar_event_record(spun, compute));
    ST("nexar_event_query", nexar_event_query(spun, &done));
    if (done != 0) {
        tl_log("FAIL nexar_event_query reads done while the stream spins");
        bad = 1;
    }
    ST("nexar_event_synchronize", nexar_event_synchronize(spun));
    double dt = tl_now() - t0;
    ST("nexar_event_query", nexar_event_query(spun, &done));
    if (done != 1 || dt < SPIN_MS / 2000.0) {
        tl_log("FAIL nexar_event_synchronize returned after %.0f ms (spin %d ms), query %d",
               dt * 1e3, SPIN_MS, done);
        bad = 1;
    }

    /* 2. compute -> comm stream -> nexar_comm_stream_synchronize. */
    unsigned seed = 500;
    t0 = tl_now();
    if (gx_spin(compute, SPIN_MS * 1000) || gx_fill_f32(d, N, seed + (unsigned)me, compute)) {
        tl_log("FAIL kernel launch: %s", gx_cuda_error());
        return 1;
    }
    ST("nexar_event_record (input written)", nexar_event_record(written, compute));
    ST("nexar_comm_wait_event", nexar_comm_wait_event(w, written));
    ST("stream-ordered all_reduce", nexar_all_reduce(w, d, N, NEXAR_F32, NEXAR_SUM));
    if (gx_scale_f32(d, N, 2.0f, s)) {
        tl_log("FAIL scale kernel: %s", gx_cuda_error());
        return 1;
    }
    double t_calls = tl_now() - t0;
    ST("nexar_comm_stream_synchronize", nexar_comm_stream_synchronize(w));
    dt = tl_now() - t0;
    /* cudaMemcpy on the legacy stream does not wait for non-blocking streams: only the
     * synchronize above makes the result be there. */
    CU(cudaMemcpy(h, d, N * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < N && !bad; i++) {
        float sum = 0;
        for (int r = 0; r < size; r++)
            sum += fill_at(i, seed + (unsigned)r);
        if (h[i] != 2.0f * sum) {
            tl_log("FAIL rank %d: element %zu is %g after nexar_comm_stream_synchronize, "
                   "expected %g", me, i, h[i], 2.0f * sum);
            bad = 1;
        }
    }
    if (t_calls > SPIN_MS / 2000.0 || dt < SPIN_MS / 2000.0) {
        tl_log("FAIL rank %d: the calls took %.0f ms and the synchronize returned after "
               "%.0f ms, with a %d ms spin before the input", me, t_calls * 1e3, dt * 1e3,
               SPIN_MS);
        bad = 1;
    }

    /* 3. without a stream: nexar_sync. */
    ST("nexar_comm_split", nexar_comm_split(w, 0, me, &plain));
    int32_t v[8] = {me, me, me, me, me, me, me, me};
    nexar_request_t *rq = NULL;
    ST("host iall_reduce", nexar_iall_reduce(plain, v, 8, NEXAR_I32, NEXAR_SUM, &rq));
    ST("nexar_comm_stream_synchronize (no stream)", nexar_comm_stream_synchronize(plain));
    if (v[7] != size * (size - 1) / 2) {
        tl_log("FAIL host op not complete after nexar_comm_stream_synchronize: %d", v[7]);
        bad = 1;
    }
    if (me == 0 && !bad)
        tl_log("events: query/synchronize around a %d ms spin; compute -> comm stream -> "
               "nexar_comm_stream_synchronize exact over %d ranks (calls %.2f ms)",
               SPIN_MS, size, t_calls * 1e3);
    nexar_event_destroy(spun);
    nexar_event_destroy(written);
    nexar_comm_free(plain);
    nexar_finalize();
    return bad;
}

int main(int argc, char **argv)
{
    return gx_job_main(argc, argv, "test_gpu_events", "gpu-events", rank_main, 300);
}
