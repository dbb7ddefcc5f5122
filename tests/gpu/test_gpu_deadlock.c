/*
 * test_gpu_deadlock.c - a stream-ordered program that waits for itself on the GPU ends
 * with an error at NEXAR_TIMEOUT, and nexard goes on.
 *
 *   test_gpu_deadlock --world N [--nodes K] --nexar-timeout S
 *
 * Every rank queues, stream-ordered on one stream, a receive from its left and then a
 * send to its right.  A stream runs its ops one after another, so each send's ready
 * event waits on the GPU for its rank's receive, which waits for the left rank's send:
 * a cycle no rank can break (NCCL's programs need a group call here; nexar has none, and
 * the program must alternate the order, as test_gpu_coll does).  nexard's work for each
 * message waits on the GPU for ever, and its loop thread must neither block (a close of a
 * mapping waits for the device) nor forget the op: at NEXAR_TIMEOUT both requests of
 * every rank end with NEXAR_ERR_TIMEOUT and a text that names the message, its ranks and
 * the likely cause, the ranks' streams go on, the communicator has failed (as with a host
 * op's timeout), and its shrink reduces exactly.  Across nodes (--nodes 2) the same
 * must hold, and the receiving node, which hears nothing of a send stuck on the GPU
 * elsewhere, must say so rather than that no send matched; a message between two ranks
 * of one node may then be delivered after all (OK, with exact data).
 * The harness then checks that nexard exits on SIGTERM.
 */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "harness.h"

#define N ((1u << 16) + 3)

#define CU(call) GX_CU(call, 1)

static int expect_timeout(const char *what, nexar_status_t st, double took, double limit)
{
    const char *text = nexar_last_error();
    if (st != NEXAR_ERR_TIMEOUT) {
        tl_log("FAIL %s: %s (%d), expected NEXAR_ERR_TIMEOUT; last error \"%s\"", what,
               nexar_strerror(st), (int)st, text);
        return 1;
    }
    /* One node: the device work did not end.  Across nodes: the receiving node heard
     * nothing of the message, or the sending node could not copy it off the GPU.  Each
     * says which message, and that it waits for a ready event. */
    if (!strstr(text, "from rank") || !strstr(text, "ready event") ||
        (!strstr(text, "did not end within") && !strstr(text, "received none of it") &&
         !strstr(text, "not copied off the GPU"))) {
        tl_log("FAIL %s: the text does not say which message waits and why: \"%s\"", what,
               text);
        return 1;
    }
    if (took < limit - 0.5 || took > limit + 10) {
        tl_log("FAIL %s: ended after %.1f s, NEXAR_TIMEOUT is %.0f s", what, took, limit);
        return 1;
    }
    return 0;
}

static int rank_main(struct hx_rank *hr)
{
    (void)hr;
    CU(cudaSetDevice(0));
    CU(cudaFree(0));
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w), bad = 0;
    const char *tv = getenv("NEXAR_TIMEOUT");
    double limit = tv ? atof(tv) : 120;
    float *h = malloc(N * sizeof(float)), *d_in, *d_out, *d_sum;
    for (size_t i = 0; i < N; i++)
        h[i] = (float)(me * 1000 + (int)(i % 997));
    CU(cudaMalloc((void **)&d_in, N * sizeof(float)));
    CU(cudaMalloc((void **)&d_out, N * sizeof(float)));
    CU(cudaMalloc((void **)&d_sum, N * sizeof(float)));
    CU(cudaMemcpy(d_in, h, N * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d_sum, h, N * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (tl_check_status("nexar_comm_set_stream", NEXAR_OK, nexar_comm_set_stream(w, s)))
        return 1;

    int right = (me + 1) % size, left = (me + size - 1) % size;
    nexar_request_t *rq[2] = {NULL, NULL};
    double t0 = tl_now();
    nexar_status_t st = nexar_irecv(w, d_out, N, NEXAR_F32, left, 3, &rq[0]);
    if (st == NEXAR_OK)
        st = nexar_isend(w, d_in, N, NEXAR_F32, right, 3, &rq[1]);
    if (tl_check_status("queueing the receive and the send", NEXAR_OK, st))
        return 1;
    /* Across nodes a message whose two ranks share a node can still be delivered: once
     * the communicator failed elsewhere, its ranks' streams go on and its copy runs.  It
     * may then end OK, and a receive that does must hold the left rank's data. */
    bool across = getenv("NEXAR_COORD") != NULL, recv_ok = false;
    st = nexar_wait(rq[0]); /* before the clock is read: arguments have no order */
    if (across && st == NEXAR_OK)
        recv_ok = true;
    else
        bad |= expect_timeout("the receive", st, tl_now() - t0, limit);
    st = nexar_wait(rq[1]);
    if (!(across && st == NEXAR_OK))
        bad |= expect_timeout("the send", st, tl_now() - t0, limit);
    if (me == 0 && !bad)
        tl_log("the ring that waits for itself ended after %.1f s (NEXAR_TIMEOUT %.0f s): %s",
               tl_now() - t0, limit, nexar_last_error());

    /* The streams go on once nexard wrote the done words. */
    double t1 = tl_now();
    CU(cudaStreamSynchronize(s));
    if (tl_now() - t1 > 10) {
        tl_log("FAIL: the stream was held %.1f s after the ops ended", tl_now() - t1);
        bad = 1;
    }
    nexar_comm_set_stream(w, NULL);
    if (recv_ok) {
        CU(cudaMemcpy(h, d_out, N * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < N; i++) {
            float want = (float)(left * 1000 + (int)(i % 997));
            if (h[i] != want) {
                tl_log("FAIL the receive ended OK, but element %zu is %g, expected %g", i,
                       h[i], want);
                bad = 1;
                break;
            }
        }
    }

    /* A timeout fails the communicator, as a host op's does; a shrink, where nothing
     * failed, gives a copy of it, and nexard still reduces there exactly. */
    st = nexar_all_reduce(w, d_sum, N, NEXAR_F32, NEXAR_SUM);
    if (tl_check_status("all_reduce on the communicator that timed out",
                        NEXAR_ERR_TIMEOUT, st) ||
        tl_check_contains("its text", nexar_last_error(), "ready event"))
        return 1;
    nexar_comm_t *w2 = NULL;
    st = nexar_comm_shrink(w, &w2);
    if (tl_check_status("nexar_comm_shrink", NEXAR_OK, st))
        return 1;
    if (nexar_comm_size(w2) != size) {
        tl_log("FAIL: the shrink left %d of %d ranks", nexar_comm_size(w2), size);
        return 1;
    }
    st = nexar_all_reduce(w2, d_sum, N, NEXAR_F32, NEXAR_SUM);
    if (tl_check_status("all_reduce after the shrink", NEXAR_OK, st))
        return 1;
    CU(cudaMemcpy(h, d_sum, N * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < N; i++) {
        float want = 0;
        for (int r = 0; r < size; r++)
            want += (float)(r * 1000 + (int)(i % 997));
        if (h[i] != want) {
            tl_log("FAIL all_reduce after the shrink: element %zu is %g, expected %g", i, h[i],
                   want);
            bad = 1;
            break;
        }
    }
    if (me == 0 && !bad)
        tl_log("the communicator failed; its shrink reduces exactly over %d ranks", size);
    nexar_comm_free(w2);
    cudaStreamDestroy(s);
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_sum);
    free(h);
    nexar_finalize();
    return bad;
}

int main(int argc, char **argv)
{
    return gx_job_main(argc, argv, "test_gpu_deadlock", "gpu-deadlock", rank_main, 120);
}
