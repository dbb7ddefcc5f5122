/*
 * test_gpu_coll.c - collectives and send/recv on device buffers, N ranks sharing one GPU
 * through CUDA IPC, a real nexard built with CUDA.
 *
 *   test_gpu_coll --world N [--nodes K]
 *
 * --nodes K: the ranks in blocks on K simulated nodes (gpu_job.c), so that the device
 * buffers cross nodes through nexard's staging copies; the refusals then see a host
 * buffer against device buffers across nodes (MISMATCH as well).
 *
 * Every rank computes every rank's input from (seed, rank, index) with tests/lib's
 * patterns, copies its own to the GPU, runs the op on device pointers, copies the
 * result back and compares it bit for bit with the reference: allreduce (sum, max,
 * prod), broadcast (every root), all_gather, reduce_scatter, bucketed allreduce (over
 * three separate allocations) and send/recv around a ring, for f32, f16, bf16 and i32
 * at 1, 7, 1001 and ~1 Mi elements.  Then the same ops once more stream-ordered
 * (nexar_comm_set_stream + nexar_sync), the nonblocking forms, and the refusals: a
 * device and a host buffer in one call (NEXAR_ERR_UNSUPPORTED, the communicator stays
 * usable), device buffers on one rank against host buffers on another
 * (NEXAR_ERR_MISMATCH, on a split communicator).
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "harness.h"

enum { C_ALLREDUCE, C_BROADCAST, C_ALLGATHER, C_REDSCAT, C_BUCKETED, C_SENDRECV, C_COUNT };
static const char *const cname[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                    "all_reduce_bucketed", "send_recv"};

struct gcase {
    int coll, dtype, op, root;
    size_t count;
    int ordered; /* on the comm's stream */
    int nonblocking;
    uint64_t seed;
};

static int g_fail;

#define CU(call) GX_CU(call, -1)

static size_t in_elems(const struct gcase *c, int size)
{
    return c->coll == C_REDSCAT ? c->count * (size_t)size : c->count;
}

static size_t out_elems(const struct gcase *c, int size)
{
    return c->coll == C_ALLGATHER ? c->count * (size_t)size : c->count;
}

/* Rank r's input of case c (host memory, in_elems elements). */
static void input_of(const struct gcase *c, int r, int size, void *out)
{
    int pat = c->coll == C_ALLREDUCE || c->coll == C_REDSCAT || c->coll == C_BUCKETED ? c->op : -1;
    tl_pattern(c->dtype, pat, c->seed, r, 0, out, in_elems(c, size));
}

/* What rank me must hold afterwards. */
static void expected_of(const struct gcase *c, int me, int size, void *out)
{
    size_t es = tl_esize(c->dtype), n = c->count;
    void *in[HX_MAX_RANKS];
    for (int r = 0; r < size; r++) {
        in[r] = malloc(in_elems(c, size) * es + 1);
        input_of(c, r, size, in[r]);
    }
    switch (c->coll) {
    case C_ALLREDUCE:
    case C_BUCKETED:
        tl_reduce(c->dtype, c->op, out, (const void *const *)in, size, n);
        break;
    case C_BROADCAST:
        memcpy(out, in[c->root], n * es);
        break;
    case C_ALLGATHER:
        for (int r = 0; r < size; r++)
            memcpy((uint8_t *)out + (size_t)r * n * es, in[r], n * es);
        break;
    case C_REDSCAT: {
        const void *blk[HX_MAX_RANKS];
        for (int r = 0; r < size; r++)
            blk[r] = (const uint8_t *)in[r] + (size_t)me * n * es;
        tl_reduce(c->dtype, c->op, out, blk, size, n);
        break;
    }
    case C_SENDRECV:
        memcpy(out, in[(me + size - 1) % size], n * es); /* from the left neighbour */
        break;
    }
    for (int r = 0; r < size; r++)
        free(in[r]);
}

static nexar_status_t finish(nexar_comm_t *w, const struct gcase *c, nexar_request_t **reqs,
                             int nreq, nexar_status_t st)
{
    for (int i = 0; i < nreq; i++) {
        nexar_status_t s = nexar_wait(reqs[i]);
        if (st == NEXAR_OK)
            st = s;
    }
    if (c->ordered && st == NEXAR_OK)
        st = nexar_sync(w);
    return st;
}

/* Runs case c on device buffers; 0 when the result is exact. */
static int run_case(nexar_comm_t *w, const struct gcase *c, cudaStream_t stream)
{
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);
    size_t es = tl_esize(c->dtype);
    size_t ib = in_elems(c, size) * es, ob = out_elems(c, size) * es;
    void *h_in = malloc(ib + 1), *h_out = malloc(ob + 1), *want = malloc(ob + 1);
    void *d_in = NULL, *d_out = NULL, *d_part[3] = {0};
    nexar_request_t *reqs[2] = {NULL, NULL};
    int nreq = 0, rv = -1;
    nexar_status_t st = NEXAR_OK;
    char ctx[160];
    snprintf(ctx, sizeof(ctx), "rank %d %s %s %s count=%zu root=%d%s%s", me, cname[c->coll],
             tl_dtype_name(c->dtype), tl_op_name(c->op), c->count, c->root,
             c->ordered ? " stream-ordered" : "", c->nonblocking ? " nonblocking" : "");
    input_of(c, me, size, h_in);
    expected_of(c, me, size, want);
    CU(cudaMalloc(&d_in, ib));
    CU(cudaMalloc(&d_out, ob));
    CU(cudaMemcpy(d_in, h_in, ib, cudaMemcpyHostToDevice));
    if (c->ordered)
        CU(cudaDeviceSynchronize()); /* the copy above is on the legacy stream */
    nexar_dtype_t dt = (nexar_dtype_t)c->dtype;
    nexar_op_t op = (nexar_op_t)c->op;
    nexar_request_t **rq = c->nonblocking ? &reqs[0] : NULL;

    switch (c->coll) {
    case C_ALLREDUCE:
        st = rq ? nexar_iall_reduce(w, d_in, c->count, dt, op, rq)
                : nexar_all_reduce(w, d_in, c->count, dt, op);
        nreq = rq && st == NEXAR_OK;
        d_out = (cudaFree(d_out), d_in); /* in place */
        break;
    case C_BROADCAST:
        st = rq ? nexar_ibroadcast(w, d_in, c->count, dt, c->root, rq)
                : nexar_broadcast(w, d_in, c->count, dt, c->root);
        nreq = rq && st == NEXAR_OK;
        d_out = (cudaFree(d_out), d_in);
        break;
    case C_ALLGATHER:
        st = rq ? nexar_iall_gather(w, d_in, d_out, c->count, dt, rq)
                : nexar_all_gather(w, d_in, d_out, c->count, dt);
        nreq = rq && st == NEXAR_OK;
        break;
    case C_REDSCAT:
        st = rq ? nexar_ireduce_scatter(w, d_in, d_out, c->count, dt, op, rq)
                : nexar_reduce_scatter(w, d_in, d_out, c->count, dt, op);
        nreq = rq && st == NEXAR_OK;
        break;
    case C_BUCKETED: {
        /* Three separate allocations: three registrations, one fused op. */
        size_t cnt[3] = {c->count / 3, c->count / 3, c->count - 2 * (c->count / 3)}, off = 0;
        nexar_iov_t iov[3];
        for (int i = 0; i < 3; i++) {
            CU(cudaMalloc(&d_part[i], cnt[i] * es + 1));
            CU(cudaMemcpy(d_part[i], (uint8_t *)h_in + off * es, cnt[i] * es,
                          cudaMemcpyHostToDevice));
            iov[i] = (nexar_iov_t){d_part[i], cnt[i]};
            off += cnt[i];
        }
        if (c->ordered)
            CU(cudaDeviceSynchronize());
        st = rq ? nexar_iall_reduce_bucketed(w, iov, 3, dt, op, rq)
                : nexar_all_reduce_bucketed(w, iov, 3, dt, op);
        nreq = rq && st == NEXAR_OK;
        break;
    }
    case C_SENDRECV: {
        /* A ring: nonblocking both ways, since a device send waits for its receive.
         * Stream-ordered, the second op waits on the GPU for the first, so the ranks
         * cannot all receive first (each receive would wait for a send queued behind its
         * sender's own receive): even ranks send first, odd ranks receive first. */
        int right = (me + 1) % size, left = (me + size - 1) % size;
        if (c->ordered && me % 2 == 0) {
            st = nexar_isend(w, d_in, c->count, dt, right, 7, &reqs[1]);
            if (st == NEXAR_OK)
                st = nexar_irecv(w, d_out, c->count, dt, left, 7, &reqs[0]);
        } else {
            st = nexar_irecv(w, d_out, c->count, dt, left, 7, &reqs[0]);
            if (st == NEXAR_OK)
                st = nexar_isend(w, d_in, c->count, dt, right, 7, &reqs[1]);
        }
        for (int i = 0; i < 2; i++) /* what was started is waited for */
            if (reqs[i])
                reqs[nreq++] = reqs[i];
        break;
    }
    }
    st = finish(w, c, reqs, nreq, st);
    if (tl_check_status(ctx, NEXAR_OK, st))
        goto out;
    if (c->ordered)
        CU(cudaStreamSynchronize(stream));
    if (c->coll == C_BUCKETED) {
        size_t off = 0, cnt[3] = {c->count / 3, c->count / 3, c->count - 2 * (c->count / 3)};
        for (int i = 0; i < 3; i++) {
            CU(cudaMemcpy((uint8_t *)h_out + off * es, d_part[i], cnt[i] * es,
                          cudaMemcpyDeviceToHost));
            off += cnt[i];
        }
    } else {
        CU(cudaMemcpy(h_out, d_out, ob, cudaMemcpyDeviceToHost));
    }
    rv = tl_check_elems(ctx, c->dtype, want, h_out, out_elems(c, size)) ? 1 : 0;
out:
    if (d_out != d_in)
        cudaFree(d_out);
    cudaFree(d_in);
    for (int i = 0; i < 3; i++)
        cudaFree(d_part[i]);
    free(h_in);
    free(h_out);
    free(want);
    return rv;
}

/* The refusals: a mix in one call, and a mix across ranks. */
static int refusals(nexar_comm_t *w)
{
    int me = nexar_comm_rank(w), bad = 0;
    float *d = NULL, h[16] = {0};
    CU(cudaMalloc((void **)&d, sizeof(h)));
    nexar_status_t st = nexar_all_gather(w, d, h, 4, NEXAR_F32);
    bad |= tl_check_status("all_gather from device into host memory", NEXAR_ERR_UNSUPPORTED, st);
    bad |= tl_check_contains("its text", nexar_last_error(), "device memory");
    st = nexar_all_reduce(w, d, 4, NEXAR_F32, NEXAR_SUM); /* the comm is still fine */
    bad |= tl_check_status("all_reduce after a local refusal", NEXAR_OK, st);

    nexar_comm_t *dup = NULL;
    st = nexar_comm_split(w, 0, (uint32_t)me, &dup);
    if (tl_check_status("split", NEXAR_OK, st))
        return -1;
    st = nexar_all_reduce(dup, me == 0 ? (void *)h : (void *)d, 4, NEXAR_F32, NEXAR_SUM);
    bad |= tl_check_status("host buffers on rank 0, device buffers elsewhere",
                           NEXAR_ERR_MISMATCH, st);
    bad |= tl_check_contains("its text", nexar_last_error(), "device");
    nexar_comm_free(dup);
    cudaFree(d);
    return bad ? 1 : 0;
}

static int rank_main(struct hx_rank *r)
{
    CU(cudaSetDevice(0));
    CU(cudaFree(0)); /* the context, before nexar looks at pointers */
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);
    static const int dtypes[] = {NEXAR_F32, NEXAR_F16, NEXAR_BF16, NEXAR_I32};
    static const size_t counts[] = {1, 7, 1001, (1u << 20) + 3};
    int cases = 0, wrong = 0, k = 0;
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    for (int coll = 0; coll < C_COUNT && !g_fail; coll++) {
        int before = wrong;
        for (int d = 0; d < 4; d++) {
            for (size_t ci = 0; ci < 4; ci++) {
                int nops = coll == C_ALLREDUCE ? 3 : 1;
                static const int ops[] = {NEXAR_SUM, NEXAR_MAX, NEXAR_PROD};
                for (int o = 0; o < nops; o++) {
                    int root = k++ % size;
                    struct gcase c = {.coll = coll, .dtype = dtypes[d], .op = ops[o],
                                      .root = root, .count = counts[ci],
                                      .seed = tl_mix64((uint64_t)k * 7919u)};
                    int rv = run_case(w, &c, s);
                    cases++;
                    if (rv < 0) {
                        g_fail = 1;
                        break;
                    }
                    wrong += rv;
                }
            }
        }
        if (me == 0)
            tl_log("%-20s f32 f16 bf16 i32 x counts 1 7 1001 1Mi: %s", cname[coll],
                   wrong == before ? "exact" : "WRONG (above)");
    }
    /* Stream-ordered and nonblocking forms, one of each op. */
    if (!g_fail && nexar_comm_set_stream(w, s) != NEXAR_OK) {
        tl_log("FAIL nexar_comm_set_stream: %s", nexar_last_error());
        g_fail = 1;
    }
    for (int coll = 0; coll < C_COUNT && !g_fail; coll++) {
        for (int nb = 0; nb < 2; nb++) {
            struct gcase c = {.coll = coll, .dtype = NEXAR_F32, .op = NEXAR_SUM,
                              .root = size - 1, .count = 100003, .ordered = 1,
                              .nonblocking = nb, .seed = 99 + (uint64_t)coll};
            int rv = run_case(w, &c, s);
            cases++;
            g_fail |= rv < 0;
            wrong += rv > 0;
        }
    }
    if (me == 0 && !g_fail)
        tl_log("stream-ordered and nonblocking forms of every op: %s",
               wrong ? "WRONG results so far" : "exact");
    nexar_comm_set_stream(w, NULL);
    if (!g_fail)
        wrong += refusals(w);
    cudaStreamDestroy(s);
    nexar_finalize();
    if (me == 0)
        tl_log("%d cases on %d ranks sharing one GPU: %s", cases, size,
               wrong || g_fail ? "FAILED" : "all exact");
    return wrong || g_fail ? 1 : 0;
}

int main(int argc, char **argv)
{
    return gx_job_main(argc, argv, "test_gpu_coll", "gpu-coll", rank_main, 900);
}
