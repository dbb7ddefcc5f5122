/*
 * test_device_api.c - the device side of the API where there is no GPU: every refusal
 * must be NEXAR_ERR_UNSUPPORTED (or INVALID for a bad argument) with a text that says
 * why, must leave the user's memory and the communicator alone, and nexard must say in
 * its HELLO reply whether it takes device buffers.
 *
 *   1. without libcuda in the process: nexar_comm_set_stream(), nexar_event_create()
 *      refuse (no CUDA here); set_stream(NULL) is fine; host collectives work.
 *   2. with a fake libcuda.so.1 loaded ($NX_FAKE_CUDA, tests/integration/fake_cuda.c)
 *      that reports a malloc'd buffer as device memory: collectives and send/recv on it,
 *      and a device/host mix in one call, are refused before anything is submitted; the
 *      buffer is untouched; the communicator still works.
 *
 * Where this host has a real libcuda.so.1 the no-CUDA checks of part 1 are skipped.
 */
#include <dlfcn.h>
#include <stdlib.h>

#include "fake_cuda.h"
#include "frame.h"
#include "itest.h"
#include "nexar.pb-c.h"
#include "rawclient.h"

static int g_have_libcuda; /* this host has a real driver library */

static int expect_refusal(int *fails, const char *what, nexar_status_t want, nexar_status_t st,
                          const char *needle)
{
    if (tl_check_status(what, want, st) ||
        (needle && tl_check_contains(what, nexar_last_error(), needle))) {
        (*fails)++;
        return -1;
    }
    return 0;
}

static int host_allreduce_ok(int *fails, nexar_comm_t *w, const char *after)
{
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);
    int32_t v[4] = {me, me, me, me};
    char what[128];
    snprintf(what, sizeof(what), "host all_reduce after %s", after);
    if (EXPECT_OK(*fails, what, nexar_all_reduce(w, v, 4, NEXAR_I32, NEXAR_SUM)))
        return -1;
    EXPECT_TRUE(*fails, v[0] == size * (size - 1) / 2, "%s: got %d", what, v[0]);
    return 0;
}

/* Part 1: no libcuda in the process. */
static int rank_no_cuda(struct hx_rank *r)
{
    nexar_comm_t *w = NULL;
    int fails = 0;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    if (!g_have_libcuda) {
        expect_refusal(&fails, "nexar_comm_set_stream without libcuda", NEXAR_ERR_UNSUPPORTED,
                       nexar_comm_set_stream(w, (void *)0x1234), "CUDA");
        nexar_event_t *ev = (nexar_event_t *)0x1;
        expect_refusal(&fails, "nexar_event_create without libcuda", NEXAR_ERR_UNSUPPORTED,
                       nexar_event_create(w, &ev), "CUDA");
        EXPECT_TRUE(fails, ev == NULL, "nexar_event_create left *ev set");
        expect_refusal(&fails, "nexar_stream_wait_event without libcuda", NEXAR_ERR_UNSUPPORTED,
                       nexar_stream_wait_event((void *)0x1234, NULL), "CUDA");
    }
    EXPECT_OK(fails, "nexar_comm_set_stream(NULL)", nexar_comm_set_stream(w, NULL));
    expect_refusal(&fails, "nexar_comm_set_stream on a NULL comm", NEXAR_ERR_INVALID,
                   nexar_comm_set_stream(NULL, NULL), "comm is NULL");
    host_allreduce_ok(&fails, w, "the refusals");
    nexar_finalize();
    return fails ? 1 : 0;
}

/* Part 2: a fake driver that calls one buffer device memory. */
static int rank_fake_device(struct hx_rank *r)
{
    int fails = 0;
    struct nx_fake_cuda f;
    char err[512];
    if (nx_fake_cuda_load(&f, err, sizeof(err))) {
        tl_log("FAIL: %s", err);
        return 1;
    }
    nexar_comm_t *w = NULL;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    int me = nexar_comm_rank(w), size = nexar_comm_size(w);
    float *dev = malloc(1024 * sizeof(float)), host[1024];
    for (int i = 0; i < 1024; i++)
        dev[i] = host[i] = (float)(i + me);
    f.mark(dev, 1024 * sizeof(float));

    expect_refusal(&fails, "all_reduce on device memory, nexard without device support",
                   NEXAR_ERR_UNSUPPORTED, nexar_all_reduce(w, dev, 1024, NEXAR_F32, NEXAR_SUM),
                   "device memory");
    if (me == 0)
        tl_log("the refusal reads: %s", nexar_last_error());
    nexar_request_t *req = (nexar_request_t *)0x1;
    expect_refusal(&fails, "iall_gather device -> device", NEXAR_ERR_UNSUPPORTED,
                   nexar_iall_gather(w, dev, dev + 512, 512 / size, NEXAR_F32, &req),
                   "device memory");
    EXPECT_TRUE(fails, req == NULL, "a refused nonblocking op handed out a request");
    expect_refusal(&fails, "all_gather host -> device", NEXAR_ERR_UNSUPPORTED,
                   nexar_all_gather(w, host, dev, 4, NEXAR_F32), "device memory");
    expect_refusal(&fails, "send from device memory", NEXAR_ERR_UNSUPPORTED,
                   nexar_send(w, dev, 4, NEXAR_F32, (me + 1) % size, 3), "device memory");
    nexar_iov_t iov[2] = {{host, 8}, {dev, 8}};
    expect_refusal(&fails, "bucketed allreduce over a host and a device buffer",
                   NEXAR_ERR_UNSUPPORTED,
                   nexar_all_reduce_bucketed(w, iov, 2, NEXAR_F32, NEXAR_SUM), "device memory");
    /* A count of 0 touches no buffer: nothing to refuse. */
    EXPECT_OK(fails, "all_reduce of 0 elements at a device pointer",
              nexar_all_reduce(w, dev, 0, NEXAR_F32, NEXAR_SUM));
    for (int i = 0; i < 1024; i++) {
        if (dev[i] != (float)(i + me)) {
            tl_log("FAIL: the refused ops wrote to the buffer (element %d is %g)", i, dev[i]);
            fails++;
            break;
        }
    }
    /* With a driver in the process the stream call gets past loading it, to nexard. */
    expect_refusal(&fails, "nexar_comm_set_stream, nexard without device support",
                   NEXAR_ERR_UNSUPPORTED, nexar_comm_set_stream(w, (void *)0x1234), NULL);
    host_allreduce_ok(&fails, w, "the device refusals");
    nexar_finalize();
    free(dev);
    return fails ? 1 : 0;
}

/* The HELLO reply announces no device support, with a reason. */
static int hello_features(const char *sock)
{
    int fd = rc_connect(sock), bad = 0;
    uint8_t *p = NULL, *pl = NULL;
    struct nx_frame_hdr h;
    size_t n = rc_pack_hello(1, &p);
    if (fd < 0 || nx_chan_send(fd, NX_MSG_HELLO, p, (uint32_t)n, NULL, 0) ||
        nx_chan_recv(fd, &h, &pl, 5000, NULL, 0, NULL) || h.type != NX_MSG_HELLO_REPLY) {
        tl_log("FAIL: no HELLO reply");
        free(p);
        return 1;
    }
    Nexar__HelloReply *r = nexar__hello_reply__unpack(NULL, h.length, pl);
    if (r && (r->features & NX_FEATURE_DEVICE)) {
        tl_log("SKIP: nexard takes device buffers here (%s); this test is for hosts without "
               "a GPU, and suite gpu covers this one", r->device_note);
        bad = HX_SKIP;
    } else if (!r || !r->device_note || !*r->device_note) {
        tl_log("FAIL: HELLO reply features 0x%x, note \"%s\": expected no device support and "
               "a reason", r ? r->features : 0, r && r->device_note ? r->device_note : "");
        bad = 1;
    } else {
        tl_log("ok: nexard says: no device buffers (%s)", r->device_note);
    }
    if (r)
        nexar__hello_reply__free_unpacked(r, NULL);
    free(p);
    free(pl);
    close(fd);
    return bad;
}

int main(void)
{
    hx_require_nexard();
    void *real = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    g_have_libcuda = real != NULL; /* loading is not initializing: forking stays safe */
    if (real)
        tl_log("note: this host has a libcuda.so.1; the no-CUDA refusals are not checked");
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL))
        return 1;
    int rv = hello_features(d.sock);
    if (rv == HX_SKIP) {
        hx_daemon_stop(&d);
        return HX_SKIP;
    }
    rv |= itest_run(&d, 2, rank_no_cuda, NULL, 60, 120) != 0;
    rv |= itest_run(&d, 2, rank_fake_device, NULL, 60, 120) != 0;
    if (hx_daemon_stop(&d))
        rv = 1;
    tl_log("%s", rv ? "FAILED" : "PASSED");
    return rv;
}
