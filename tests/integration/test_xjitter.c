/*
 * test_xjitter.c - a communicator's collectives spread over its channels (xcoll.h) while
 * the network reorders datagrams: two test nexards (itest_nexard_fakedev, the fake device
 * backend) whose every packet crosses udp_jitter.c, which holds each datagram 0..8 ms and
 * a short one 25 ms more.  So a message on one channel routinely arrives before one that
 * was sent earlier on another.  2 nodes x 1 rank, the ranks with the fake libcuda.
 *
 * Each rank runs XJ_ROUNDS rounds of: an all_reduce on device buffers of two parts (4 MiB
 * and 64 KiB: part 1 on the second channel, short enough to outrun a note), a host
 * all_reduce of several parts, and a host broadcast (whose nodes confirm it).  Every op
 * must end NEXAR_OK with every element exact, and the relay must have reordered.
 *
 * What it catches: a node takes another node's data for a device op only after that node's
 * device note (NX_XSTEP_DEVICE).  Sent on one channel while part 1's data goes on another,
 * the note arrives after the data often enough here that such a daemon fails a round with
 * a false NEXAR_ERR_MISMATCH ("one op takes device buffers on every rank or host buffers
 * on every rank"); the note goes on every channel instead (xcoll.c, send_note).
 *
 *   itest_test_xjitter            the test
 *   itest_test_xjitter rank       one rank
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_util.h"
#include "fake_cuda.h"
#include "itest.h"
#include "outfile.h"
#include "udp_jitter.h"

#define NR 2
#define XJ_ROUNDS 6
#define DEV_COUNT ((4u << 20) / 4 + (64u << 10) / 4) /* floats: two device parts */
#define HOST_COUNT (3u << 20)                         /* floats: several host parts */

/* ---- the rank ------------------------------------------------------------------------ */

/* Element i of rank r's input: small integers, so every sum is exact in f32. */
static float val(int r, size_t i)
{
    return (float)((i * 7u + (size_t)r * 3u) % 13u);
}

/* How many of the n elements of a differ from the sum over the ranks (bcast: rank 0's). */
static size_t wrong(const float *a, size_t n, int bcast)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = bcast ? val(0, i) : 0;
        for (int r = 0; r < NR && !bcast; r++)
            want += val(r, i);
        bad += a[i] != want;
    }
    return bad;
}

static int rank_main(void)
{
    struct nx_fake_cuda f;
    char err[512];
    if (nx_fake_cuda_load(&f, err, sizeof(err))) {
        fprintf(stderr, "xjitter rank: %s\n", err);
        return 1;
    }
    int me = atoi(getenv("NEXAR_RANK"));
    float *d = f.shared(DEV_COUNT * sizeof(float)), *h = malloc(HOST_COUNT * sizeof(float));
    nexar_comm_t *w = NULL;
    if (!d || !h || nexar_init(&w) != NEXAR_OK) {
        fprintf(stderr, "xjitter rank %d: no memory or nexar_init: %s\n", me, nexar_last_error());
        return 1;
    }
    char out[2048] = "";
    nexar_status_t st = NEXAR_OK;
    const char *what = "";
    size_t bad = 0;
    for (int round = 0; round < XJ_ROUNDS && st == NEXAR_OK && !bad; round++) {
        for (size_t i = 0; i < DEV_COUNT; i++)
            d[i] = val(me, i);
        what = "device all_reduce";
        st = nexar_all_reduce(w, d, DEV_COUNT, NEXAR_F32, NEXAR_SUM);
        bad = st ? 0 : wrong(d, DEV_COUNT, 0);
        for (size_t i = 0; i < HOST_COUNT && st == NEXAR_OK && !bad; i++)
            h[i] = val(me, i);
        if (st == NEXAR_OK && !bad) {
            what = "host all_reduce";
            st = nexar_all_reduce(w, h, HOST_COUNT, NEXAR_F32, NEXAR_SUM);
            bad = st ? 0 : wrong(h, HOST_COUNT, 0);
        }
        for (size_t i = 0; i < HOST_COUNT && st == NEXAR_OK && !bad; i++)
            h[i] = me == 0 ? val(0, i) : -1.0f;
        if (st == NEXAR_OK && !bad) {
            what = "host broadcast";
            st = nexar_broadcast(w, h, HOST_COUNT, NEXAR_F32, 0);
            bad = st ? 0 : wrong(h, HOST_COUNT, 1);
        }
        snprintf(out, sizeof(out), "%d %d %zu\n%s: %s\n", st, round + 1, bad, what,
                 st ? nexar_last_error() : "");
    }
    tl_put_file(getenv("HX_OUT"), "end", me, out);
    nexar_finalize();
    f.free_(d);
    free(h);
    return 0;
}

/* ---- the test ------------------------------------------------------------------------ */

/* A loopback UDP port free now (the daemon binds it next). */
static uint16_t free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof(a);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    uint16_t port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "rank"))
        return rank_main();
    if (!getenv("NX_FAKE_CUDA")) {
        tl_log("SKIP: NX_FAKE_CUDA is not set");
        return HX_SKIP;
    }
    const char *shim_cuda = getenv("NX_SHIM_CUDA");
    if (shim_cuda && !strcmp(shim_cuda, "0")) {
        tl_log("SKIP: this libnexarshim refuses device buffers (-Dcuda=disabled)");
        return HX_SKIP;
    }
    char self[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (sl <= 0)
        return 1;
    self[sl] = '\0';
    cu_init("xjitter");
    int fails = 0;
    uint16_t relay[2], real[2];
    struct cu_node nd[2];
    char listen[2][32], adv[2][48], coord[32];
    if (uj_open(relay) < 0)
        return 1;
    for (int i = 0; i < 2; i++) {
        real[i] = free_port();
        snprintf(listen[i], sizeof(listen[i]), "127.0.0.1:%u", real[i]);
        snprintf(adv[i], sizeof(adv[i]), "advertise=127.0.0.1:%u", relay[i]);
        const char *extra[] = {"--listen", listen[i], "--set", adv[i], NULL};
        if (!real[i] || cu_node_start(&nd[i], i ? "node1" : "node0", "ca", extra) < 0)
            return 1;
    }
    uint64_t seed = getenv("NX_SIM_SEED") ? strtoull(getenv("NX_SIM_SEED"), NULL, 0) : 7;
    if (uj_start(real, 8, 25, seed) < 0)
        return 1;
    tl_log("nodes at %s and %s, advertised %s and %s (the relay), seed %llu", listen[0],
           listen[1], nd[0].addr, nd[1].addr, (unsigned long long)seed);
    snprintf(coord, sizeof(coord), "127.0.0.1:%u", relay[0]);

    char job[64];
    pid_t pid[NR];
    mkdir(cu_out(), 0700);
    hx_job_name(job, sizeof(job), "xjitter");
    const char *rargv[] = {self, "rank", NULL};
    for (int r = 0; r < NR; r++)
        pid[r] = cu_rank_exec(nd[r].d.sock, coord, job, r, NR, 60, rargv, NULL, NULL);
    for (int r = 0; r < NR; r++) {
        char buf[2048];
        int st = -1, rounds = 0;
        size_t bad = 0;
        if (cu_wait_file_of("end", r, pid[r], 150) == 0 && cu_read("end", r, buf, sizeof(buf)) == 0)
            sscanf(buf, "%d %d %zu", &st, &rounds, &bad);
        else
            snprintf(buf, sizeof(buf), "(nothing)");
        tl_log("rank %d: %s", r, buf);
        EXPECT_TRUE(fails, st == NEXAR_OK && rounds == XJ_ROUNDS && bad == 0,
                    "rank %d: status %d after %d of %d rounds, %zu elements wrong: %s", r, st,
                    rounds, XJ_ROUNDS, bad, buf);
        int code = cu_wait_exit(pid[r], 20);
        EXPECT_TRUE(fails, code == 0, "rank %d exited %d", r, code);
    }
    for (int i = 0; i < 2; i++)
        EXPECT_TRUE(fails, hx_daemon_stop(&nd[i].d) == 0, "node %d did not stop cleanly", i);
    struct uj_stats us;
    uj_stop(&us);
    tl_log("relay: %llu datagrams, %llu overtaken, %llu dropped",
           (unsigned long long)us.relayed, (unsigned long long)us.overtaken,
           (unsigned long long)us.dropped);
    EXPECT_TRUE(fails, us.overtaken > 0, "the relay reordered nothing: the test tested nothing");
    cu_fini();
    return fails ? 1 : 0;
}
