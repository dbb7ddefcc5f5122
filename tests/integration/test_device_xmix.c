/*
 * test_device_xmix.c - device buffers on a communicator across nodes, without a GPU
 * (issue 15): two test nexards (itest_nexard_fakedev: daemon/main.c with the fake device
 * backend) on loopback with QUIC, 2 nodes x 2 ranks, and ranks with the fake libcuda
 * (fake_cuda.c), which calls a rank's buffer device memory.  It tests nexard's logic, not
 * CUDA.  NEXAR_TIMEOUT is 30 s; every op must end within 5 s.
 *
 *  1. cross: ranks 0 and 1 (node A) pass device buffers, ranks 2 and 3 (node B) host
 *     buffers.  Every rank gets NEXAR_ERR_MISMATCH with one text, which names rank 0 on
 *     node A with the device signature and rank 2 on node B with the host one; the
 *     communicator stays failed (a host op after it gets the same status and text).
 *     Before the fix ranks 0 and 1 got NEXAR_ERR_UNSUPPORTED at once and ranks 2 and 3
 *     NEXAR_ERR_TIMEOUT after 30 s.
 *  2. local: rank 0 passes a device buffer, ranks 1-3 host buffers (ranks 1-3 call 0.3 s
 *     later, so that node A's matcher sees both ranks first).  Every rank gets the
 *     matcher's NEXAR_ERR_MISMATCH naming rank 0 (device) and rank 1 (host).  Before the
 *     fix: UNSUPPORTED on rank 0, TIMEOUT on the others.
 *  3. alldev: every rank passes device buffers (the fake libcuda's shared memory, which
 *     the fake backend's staging copies move).  Every rank gets NEXAR_OK and the exact
 *     sum in all 16 elements, and a host all_reduce after it sums exactly.  Before
 *     device buffers crossed nodes: NEXAR_ERR_UNSUPPORTED.
 *  4. copyfail: as alldev, with node B's daemon restarted so that its first staging copy
 *     fails (NX_FAKEDEV_FAIL_COPY=1).  Every rank gets NEXAR_ERR_INTERNAL within the
 *     budget, with one text that names the op, node B (its address and ranks) and the
 *     failed copy; the communicator stays failed.
 *  5. inflight: as copyfail, with node A's copies taking 400 ms (NX_FAKEDEV_DELAY_MS), so
 *     that node B's failure reaches node A while A still copies its ranks' buffers.  A's
 *     ranks must complete only after that copy ended (their done words would let their
 *     streams reuse the buffers under it): at least 0.3 s after the call, with B's text.
 *     Before the fix they completed at once.
 *  6. waits: a broadcast from rank 0 on device buffers (XM_OP=bcast), with each daemon's
 *     fake backend logging its copies.  Node B's ranks have nothing to send, but the copy
 *     back writes their buffers: their staging must still wait for each rank's ready event
 *     (the work its stream queued before the op), so node B's copy in carries two
 *     zero-byte ranges that wait ("2 ranges 0 bytes 2 waits"); node A's carries rank 0's
 *     input and rank 1's wait.  Before the fix node B's had none, and on a GPU its copy
 *     back could write a buffer that a kernel queued before the broadcast still read.
 *  7. recv waits: rank 0 sends 16 floats from device memory to rank 2's device memory
 *     (XM_OP=p2p).  Rank 2 gets them exactly, and node B's first copy of the message to
 *     the device waits for rank 2's ready event ("1 ranges 64 bytes 1 waits").  Before the
 *     fix it did not wait.
 *  8. shutdown: node A's copies take 1.5 s; 0.4 s into a device all_reduce node A's nexard
 *     is stopped (SIGTERM) while its copies are in flight.  It must exit cleanly within
 *     5 s, and every rank must end in error within the budget: B's at once (node A was
 *     lost), A's only once the copies of their buffers ended (at 1.5 s): told earlier
 *     that nexard went away, a rank could reuse a buffer under a copy.  Before the fix
 *     A's ranks lost their connection at 0.4 s.
 *
 * 10. sendstall (run before 8): rank 0 sends 16 floats of device memory to rank 2, which
 *     posts no receive, with node A's copies taking 3 s and NEXAR_TIMEOUT 2 s.  The send's
 *     copy off the device is what waits, and only node A knows it: rank 0 gets
 *     NEXAR_ERR_TIMEOUT whose text names the message, node A and the copy off the GPU
 *     (once the copy ended, at 3 s: until then it reads the rank's buffer).  Before the
 *     fix node A gave a send without a piece out no deadline, and it ended OK once the
 *     copy did (the receiver holds early sends).
 *  9. pipeline (run before 8): a device all_reduce of 9 parts and a bit (36 MiB a rank),
 *     every copy taking 20 ms.  The sum is exact; each node's fake backend logged its
 *     copies in (one per part) in the parts' order, with 3 to 8 outstanding at once: the
 *     parts overlap, and no more than XC_PARTS_PER_OP (8) are live.
 *
 * Every device rank first leaves a stale shm segment under the name of its first fake
 * allocation, as a dead rank with its pid would have; odd ranks never free their device
 * memory, as a killed rank does not; every rank, once exited, has left no segment
 * (before the fix the first made a rank fail, and the second leaked 1,916 segments).
 *
 *   itest_test_device_xmix            the test (starts the daemons and the ranks)
 *   itest_test_device_xmix rank       one rank (XM_DEV=0|1, XM_DELAY_MS, XM_OP, XM_COUNT)
 *                                     (XM_OP: all_reduce, bcast, p2p, p2pstall)
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_util.h"
#include "fake_cuda.h"
#include "itest.h"
#include "outfile.h"

#define NR 4
#define BUDGET_S 5.0

/* ---- the rank ------------------------------------------------------------------------ */

/* The fake libcuda names its shared segments "/nxfk.PID.SEQ" (nx_fake_cuda_shm_prefix),
 * SEQ from 0 in each process.  Pids come round: a rank killed before it freed left its names behind,
 * and the next process with its pid once got no memory (O_EXCL) and exited before it
 * joined, so the test waited 40 s a rank.  Every device rank here first leaves such a
 * segment under the name its first allocation takes. */
static void leave_stale_segment(void)
{
    char name[32];
    int pre = nx_fake_cuda_shm_prefix(name, sizeof(name), (int)getpid());
    snprintf(name + pre, sizeof(name) - (size_t)pre, "0");
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd >= 0)
        close(fd);
}

/* Names the fake libcuda made for process pid that are still in /dev/shm (each goes when
 * it is freed, and all at exit). */
static int stale_segments_of(pid_t pid)
{
    char prefix[32];
    int n = nx_fake_cuda_shm_prefix(prefix, sizeof(prefix), (int)pid), found = 0;
    DIR *d = opendir("/dev/shm");
    struct dirent *de;
    while (d && (de = readdir(d))) /* /dev/shm lists the names without their '/' */
        found += strncmp(de->d_name, prefix + 1, (size_t)n - 1) == 0;
    if (d)
        closedir(d);
    return found;
}

static int rank_main(void)
{
    struct nx_fake_cuda f;
    char err[512];
    if (nx_fake_cuda_load(&f, err, sizeof(err))) {
        fprintf(stderr, "xmix rank: %s\n", err);
        return 1;
    }
    int me = atoi(getenv("NEXAR_RANK"));
    /* XM_COUNT: an all_reduce of that many floats instead of 16 */
    size_t count = getenv("XM_COUNT") ? strtoul(getenv("XM_COUNT"), NULL, 10) : 16;
    size_t n = count > 64 ? count : 64;
    bool dev = atoi(getenv("XM_DEV") ? getenv("XM_DEV") : "0");
    if (dev)
        leave_stale_segment();
    float *a = dev ? f.shared(n * sizeof(float)) : malloc(n * sizeof(float));
    if (!a) {
        fprintf(stderr, "xmix rank %d: no %s memory for %zu floats\n", me,
                dev ? "shared fake device" : "host", n);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = 1.0f;
    nexar_comm_t *w = NULL;
    if (nexar_init(&w) != NEXAR_OK) {
        fprintf(stderr, "xmix rank %d: nexar_init: %s\n", me, nexar_last_error());
        return 1;
    }
    const char *delay = getenv("XM_DELAY_MS");
    if (delay)
        usleep((useconds_t)atoi(delay) * 1000);
    double t0 = tl_now();
    const char *op = getenv("XM_OP") ? getenv("XM_OP") : "all_reduce";
    bool bcast = !strcmp(op, "bcast"), stall = !strcmp(op, "p2pstall");
    bool p2p = stall || !strcmp(op, "p2p");
    if (bcast || p2p)
        for (int i = 0; i < 64; i++)
            a[i] = me == 0 ? (float)NR : -1.0f; /* the check below wants NR everywhere */
    nexar_status_t st = NEXAR_OK;
    if (bcast)
        st = nexar_broadcast(w, a, 16, NEXAR_F32, 0);
    else if (p2p && me == 0)
        st = nexar_send(w, a, 16, NEXAR_F32, 2, 5);
    else if (p2p && me == 2 && !stall)
        st = nexar_recv(w, a, 16, NEXAR_F32, 0, 5);
    else if (!p2p)
        st = nexar_all_reduce(w, a, count, NEXAR_F32, NEXAR_SUM);
    double dt = tl_now() - t0;
    int exact = 0; /* elements equal to the sum over the ranks */
    for (size_t i = 0; i < (bcast || p2p ? 16 : count); i++)
        exact += a[i] == (float)NR;
    char text1[1024];
    snprintf(text1, sizeof(text1), "%s", st ? nexar_last_error() : "");
    /* The communicator after it: failed for good, or usable.  (p2pstall: the others wait
     * until rank 0's send has had its deadline, which their all_reduce would have too.) */
    if (stall && me != 0)
        usleep(2500 * 1000);
    int32_t v = 1;
    nexar_status_t st2 = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
    char out[3072];
    snprintf(out, sizeof(out), "%d %.3f %d %d %d\n%s\n%s\n", st, dt, st2, v, exact, text1,
             st2 ? nexar_last_error() : "");
    tl_put_file(getenv("HX_OUT"), "end", me, out);
    nexar_finalize();
    /* Even ranks free their device memory, odd ones leave it to their exit, as a rank that
     * is killed does: either way no name of theirs may stay in /dev/shm (run_job). */
    if (!dev)
        free(a);
    else if (me % 2 == 0)
        f.free_(a);
    return 0;
}

/* ---- the test ------------------------------------------------------------------------ */

static int fails;
static struct cu_node nd[2];
static char g_self[512];

struct end {
    int st, st2, v, exact;
    double dt;
    char text[1024], text2[1024];
};

static int read_end(int r, pid_t pid, struct end *e)
{
    char buf[3072];
    if (cu_wait_file_of("end", r, pid, 40) || cu_read("end", r, buf, sizeof(buf)))
        return -1;
    memset(e, 0, sizeof(*e));
    int off = 0;
    if (sscanf(buf, "%d %lf %d %d %d\n%n", &e->st, &e->dt, &e->st2, &e->v, &e->exact, &off) < 5)
        return -1;
    const char *l1 = buf + off, *l2 = strchr(l1, '\n');
    snprintf(e->text, sizeof(e->text), "%.*s", (int)(l2 ? l2 - l1 : (long)strlen(l1)), l1);
    if (l2)
        snprintf(e->text2, sizeof(e->text2), "%.*s", (int)strcspn(l2 + 1, "\n"), l2 + 1);
    return 0;
}

/* Called by run_job once the ranks are started (NULL: nothing). */
static void (*g_mid)(void);
static int g_timeout_s = 30; /* the ranks' NEXAR_TIMEOUT */

/* Runs one job: dev[r] says whether rank r passes device memory, delay_ms[r] when it
 * calls.  Fills e[] (status -1: the rank reported nothing). */
static void run_job(const char *tag, const int *dev, const int *delay_ms, char *job,
                    size_t joblen, struct end *e)
{
    static const int node[NR] = {0, 0, 1, 1};
    pid_t pid[NR];
    hx_rmtree(cu_out());
    mkdir(cu_out(), 0700);
    hx_job_name(job, joblen, tag);
    const char *argv[] = {g_self, "rank", NULL};
    for (int r = 0; r < NR; r++) {
        char e_dev[32], e_delay[32];
        snprintf(e_dev, sizeof(e_dev), "XM_DEV=%d", dev[r]);
        snprintf(e_delay, sizeof(e_delay), "XM_DELAY_MS=%d", delay_ms[r]);
        const char *env[] = {e_dev, e_delay, NULL};
        pid[r] = cu_rank_exec(nd[node[r]].d.sock, nd[0].addr, job, r, NR, g_timeout_s, argv,
                              env, NULL);
    }
    if (g_mid)
        g_mid();
    for (int r = 0; r < NR; r++) {
        if (read_end(r, pid[r], &e[r])) {
            e[r].st = -1;
            EXPECT_TRUE(fails, 0, "%s: rank %d reported nothing", tag, r);
        } else {
            tl_log("   rank %d (node %c, %s): %s after %.2f s: \"%s\"; then a host all_reduce: "
                   "%s \"%s\"", r, 'A' + node[r], dev[r] ? "device" : "host",
                   tl_status_name(e[r].st), e[r].dt, e[r].text, tl_status_name(e[r].st2),
                   e[r].text2);
            EXPECT_TRUE(fails, e[r].dt <= BUDGET_S, "%s: rank %d waited %.2f s (NEXAR_TIMEOUT "
                        "is 30 s: nobody may wait for the deadline)", tag, r, e[r].dt);
        }
    }
    for (int r = 0; r < NR; r++) {
        int code = cu_wait_exit(pid[r], 20);
        EXPECT_TRUE(fails, code == 0, "%s: rank %d exited %d", tag, r, code);
        int left = stale_segments_of(pid[r]);
        EXPECT_TRUE(fails, left == 0, "%s: rank %d (pid %d) exited and left %d shm segment(s) "
                    "/dev/shm/nxfk.%d.*", tag, r, (int)pid[r], left, (int)pid[r] % 10000000);
    }
}

static double g_stop_s;
static int g_stop_rc;

/* Case 8: node A's nexard stopped while its copies are in flight. */
static void stop_a(void)
{
    usleep(400 * 1000);
    double t0 = tl_now();
    g_stop_rc = hx_daemon_stop(&nd[0].d);
    g_stop_s = tl_now() - t0;
}

/* The communicator's id in a text ("on comm 3", "communicator 3"): nexard numbers
 * communicators itself, so the expected texts take it from there.  0 when absent. */
static unsigned comm_id(const char *text)
{
    const char *p = strstr(text, "on comm ");
    unsigned id = 0;
    if (p && sscanf(p, "on comm %u", &id) == 1)
        return id;
    p = strstr(text, "communicator ");
    if (p && sscanf(p, "communicator %u", &id) == 1)
        return id;
    return 0;
}

/* got is want as rank r's own node wrote it, or as the other node reported it: then
 * "node ADDR reported: " comes first (daemon/cluster/xcomm.c). */
static bool same_text(const char *got, const char *want, int r)
{
    char pre[96];
    snprintf(pre, sizeof(pre), "node %s reported: ", nd[r < 2 ? 1 : 0].addr);
    size_t n = strlen(pre);
    return !strcmp(got, want) || (!strncmp(got, pre, n) && !strcmp(got + n, want));
}

/* Every rank: MISMATCH with exactly fmt (%u: the communicator's id, then %s the job), and
 * the communicator failed with it. */
static void expect_mismatch(const char *tag, const struct end *e, const char *fmt,
                            const char *job)
{
    char want[1024];
    for (int r = 0; r < NR; r++) {
        if (e[r].st < 0)
            continue;
        snprintf(want, sizeof(want), fmt, comm_id(e[r].text), job);
        EXPECT_TRUE(fails, e[r].st == NEXAR_ERR_MISMATCH, "%s: rank %d got %s, expected "
                    "NEXAR_ERR_MISMATCH", tag, r, tl_status_name(e[r].st));
        EXPECT_TRUE(fails, same_text(e[r].text, want, r), "%s: rank %d's text\n     \"%s\"\n   "
                    "expected\n     \"%s\"", tag, r, e[r].text, want);
        EXPECT_TRUE(fails, e[r].st2 == NEXAR_ERR_MISMATCH && same_text(e[r].text2, want, r),
                    "%s: rank %d: the next op got %s \"%s\", expected the failed "
                    "communicator's NEXAR_ERR_MISMATCH and text", tag, r,
                    tl_status_name(e[r].st2), e[r].text2);
    }
}

/* Stops node i's daemon and starts it again with NAME=VALUE in its environment (name
 * NULL: none).  0, or -1 when it did not start. */
static int restart(int i, const char *name, const char *value)
{
    EXPECT_TRUE(fails, hx_daemon_stop(&nd[i].d) == 0, "daemon %c did not stop cleanly",
                'A' + i);
    if (name)
        setenv(name, value, 1);
    int rv = cu_node_start(&nd[i], i ? "node1" : "node0", "ca", NULL);
    if (name)
        unsetenv(name);
    return rv;
}

/* Every rank: NEXAR_ERR_INTERNAL with node B's text for its failed first staging copy (node
 * A hears it through the communicator's abort, as node B's report), and the communicator failed after it;
 * node A's ranks no sooner than min_a seconds after their call. */
static void expect_copyfail(const char *tag, const struct end *e, const char *job,
                            double min_a)
{
    char want[1024];
    for (int r = 0; r < NR; r++) {
        if (e[r].st < 0)
            continue;
        snprintf(want, sizeof(want),
                 "all_reduce seq 0 on comm %u (job \"%s\"): staging device buffers in failed "
                 "on node 1 (%s, ranks 2-3): copy 1 failed as NX_FAKEDEV_FAIL_COPY asked",
                 comm_id(e[r].text), job, nd[1].addr);
        EXPECT_TRUE(fails, e[r].st == NEXAR_ERR_INTERNAL && same_text(e[r].text, want, r),
                    "%s: rank %d got %s \"%s\", expected NEXAR_ERR_INTERNAL with \"%s\"", tag,
                    r, tl_status_name(e[r].st), e[r].text, want);
        EXPECT_TRUE(fails, e[r].st2 != NEXAR_OK, "%s: rank %d: a host all_reduce after the "
                    "failure succeeded; the communicator must stay failed", tag, r);
        if (r < 2)
            EXPECT_TRUE(fails, e[r].dt >= min_a, "%s: rank %d on node A completed %.3f s "
                        "after its call, while node A's copy of its buffer still ran", tag, r,
                        e[r].dt);
    }
}

/* Case 9: 9 parts of 4 MiB a rank (NX_DEV_XCHUNK_BYTES), and a little more. */
#define PIPE_COUNT (9 * (1 << 20) + 5)
#define PARTS_LIVE 8 /* XC_PARTS_PER_OP */

/* Node n's fake backend log of case 9: its copies in, one per part, were issued in the
 * parts' order; several were outstanding at once (a part's copies do not wait for the
 * part before it); never more than PARTS_LIVE (each live part has one copy out). */
static void check_pipeline(const char *path, char n)
{
    char *lg = tl_read_file(path);
    int nin = 0, most = 0, ordered = 1;
    unsigned long long last = 0;
    for (const char *p = lg; p && (p = strstr(p, "copy ")); p++) {
        unsigned long long infl = 0, off = 0;
        const char *q = strstr(p, "; ");
        if (!q || sscanf(q, "; %llu in flight, off %llu", &infl, &off) != 2 ||
            !strstr(p, "all_reduce seq 0") || (strchr(p, '\n') && q > strchr(p, '\n')))
            continue;
        most = (int)infl + 1 > most ? (int)infl + 1 : most;
        if (strncmp(p, "copy d2h", 8) == 0) {
            ordered &= nin == 0 || off > last;
            last = off;
            nin++;
        }
    }
    tl_log("   node %c: %d copies in, at most %d copies outstanding, %s", n, nin, most,
           ordered ? "in the parts' order" : "OUT OF ORDER");
    EXPECT_TRUE(fails, nin >= 9 && ordered, "pipeline: node %c copied in %d parts (9 or 10 "
                "expected) %s:\n%s", n, nin, ordered ? "in order" : "out of order",
                lg ? lg : "(no log)");
    EXPECT_TRUE(fails, most >= 3 && most <= PARTS_LIVE, "pipeline: node %c had at most %d "
                "copies outstanding (expected 3 to %d: parts overlap, and no more than %d "
                "parts live)", n, most, PARTS_LIVE, PARTS_LIVE);
    free(lg);
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
        tl_log("SKIP: this libnexarshim was built with -Dcuda=disabled: it refuses every "
               "device buffer before nexard sees it");
        return HX_SKIP;
    }
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof(g_self) - 1);
    if (n <= 0) {
        tl_log("FAIL: readlink /proc/self/exe");
        return 1;
    }
    g_self[n] = '\0';
    const char *scratch = cu_init("xmix");
    if (cu_node_start(&nd[0], "node0", "ca", NULL) < 0 ||
        cu_node_start(&nd[1], "node1", "ca", NULL) < 0)
        return 1;

    char job[64], want[1024];
    struct end e[NR];
    static const int none[NR] = {0, 0, 0, 0};

    tl_log("1. cross: device buffers on node A (ranks 0, 1), host buffers on node B (2, 3)");
    static const int dev1[NR] = {1, 1, 0, 0};
    run_job("xm-cross", dev1, none, job, sizeof(job), e);
    snprintf(want, sizeof(want),
             "all_reduce seq 0 on comm %%u (job \"%%s\"): rank 0 on node 0 (%s, ranks 0-1) "
             "called all_reduce(count=16, f32, device, sum) but rank 2 on node 1 (%s, ranks "
             "2-3) called all_reduce(count=16, f32, sum): one op takes device buffers on "
             "every rank or host buffers on every rank", nd[0].addr, nd[1].addr);
    expect_mismatch("cross", e, want, job);

    tl_log("2. local: a device buffer on rank 0, a host buffer on rank 1 (0.3 s later), "
           "host buffers on node B (1 s later)");
    static const int dev2[NR] = {1, 0, 0, 0}, late[NR] = {0, 300, 1000, 1000};
    run_job("xm-local", dev2, late, job, sizeof(job), e);
    expect_mismatch("local", e,
                    "all_reduce seq 0 on comm %u (job \"%s\"): rank 0 called all_reduce("
                    "count=16, f32, device, sum) but rank 1 called all_reduce(count=16, f32, "
                    "sum)", job);

    tl_log("3. alldev: device buffers on every rank");
    static const int dev3[NR] = {1, 1, 1, 1};
    run_job("xm-alldev", dev3, none, job, sizeof(job), e);
    for (int r = 0; r < NR; r++) {
        if (e[r].st < 0)
            continue;
        EXPECT_TRUE(fails, e[r].st == NEXAR_OK && e[r].exact == 16, "alldev: rank %d got %s "
                    "\"%s\" with %d of 16 elements equal to %d, expected NEXAR_OK and all 16",
                    r, tl_status_name(e[r].st), e[r].text, e[r].exact, NR);
        EXPECT_TRUE(fails, e[r].st2 == NEXAR_OK && e[r].v == NR, "alldev: rank %d: the host "
                    "all_reduce after it got %s, sum %d (expected %d): the communicator must "
                    "stay usable", r, tl_status_name(e[r].st2), e[r].v, NR);
    }

    tl_log("4. copyfail: device buffers on every rank; node B's first staging copy fails");
    if (restart(1, "NX_FAKEDEV_FAIL_COPY", "1") < 0)
        return 1;
    run_job("xm-copyfail", dev3, none, job, sizeof(job), e);
    expect_copyfail("copyfail", e, job, 0);

    tl_log("5. inflight: node A's copies take 400 ms; node B's first copy fails at once");
    if (restart(0, "NX_FAKEDEV_DELAY_MS", "400") < 0 ||
        restart(1, "NX_FAKEDEV_FAIL_COPY", "1") < 0)
        return 1;
    run_job("xm-inflight", dev3, none, job, sizeof(job), e);
    expect_copyfail("inflight", e, job, 0.3);

    tl_log("6. waits: a device broadcast from rank 0; node B's staging waits for its ranks");
    char logs[2][512];
    for (int i = 0; i < 2; i++) {
        snprintf(logs[i], sizeof(logs[i]), "%s/fakedev-%c.log", scratch, 'A' + i);
        if (restart(i, "NX_FAKEDEV_LOG", logs[i]) < 0)
            return 1;
    }
    setenv("XM_OP", "bcast", 1);
    run_job("xm-waits", dev3, none, job, sizeof(job), e);
    unsetenv("XM_OP");
    for (int r = 0; r < NR; r++)
        EXPECT_TRUE(fails, e[r].st == NEXAR_OK && e[r].exact == 16, "waits: rank %d got %s "
                    "\"%s\" with %d of 16 elements equal to %d", r, tl_status_name(e[r].st),
                    e[r].text, e[r].exact, NR);
    static const char *const want_in[2] = {"copy d2h 2 ranges 64 bytes 2 waits broadcast seq 0",
                                           "copy d2h 2 ranges 0 bytes 2 waits broadcast seq 0"};
    for (int i = 0; i < 2; i++) {
        char *lg = tl_read_file(logs[i]);
        EXPECT_TRUE(fails, lg && strstr(lg, want_in[i]), "waits: node %c's fake backend logged "
                    "no \"%s\":\n%s", 'A' + i, want_in[i], lg ? lg : "(no log)");
        free(lg);
    }

    tl_log("7. recv waits: rank 0 sends device memory to rank 2's device memory");
    setenv("XM_OP", "p2p", 1);
    run_job("xm-recvwait", dev3, none, job, sizeof(job), e);
    unsetenv("XM_OP");
    for (int r = 0; r < NR; r++)
        EXPECT_TRUE(fails, e[r].st == NEXAR_OK && (r != 2 || e[r].exact == 16),
                    "recv waits: rank %d got %s \"%s\" with %d of 16 elements equal to %d", r,
                    tl_status_name(e[r].st), e[r].text, e[r].exact, NR);
    char *lg = tl_read_file(logs[1]);
    const char *want_h2d = "copy h2d 1 ranges 64 bytes 1 waits message 0 from rank 0 to rank 2";
    EXPECT_TRUE(fails, lg && strstr(lg, want_h2d), "recv waits: node B's fake backend logged "
                "no \"%s\":\n%s", want_h2d, lg ? lg : "(no log)");
    free(lg);

    tl_log("9. pipeline: a device all_reduce of 9 parts, each copy taking 20 ms");
    char plogs[2][512];
    setenv("NX_FAKEDEV_DELAY_MS", "20", 1);
    for (int i = 0; i < 2; i++) {
        snprintf(plogs[i], sizeof(plogs[i]), "%s/fakedev-pipe-%c.log", scratch, 'A' + i);
        if (restart(i, "NX_FAKEDEV_LOG", plogs[i]) < 0)
            return 1;
    }
    unsetenv("NX_FAKEDEV_DELAY_MS");
    char e_count[32];
    snprintf(e_count, sizeof(e_count), "%d", PIPE_COUNT);
    setenv("XM_COUNT", e_count, 1);
    run_job("xm-pipeline", dev3, none, job, sizeof(job), e);
    unsetenv("XM_COUNT");
    for (int r = 0; r < NR; r++)
        EXPECT_TRUE(fails, e[r].st == NEXAR_OK && e[r].exact == PIPE_COUNT, "pipeline: rank "
                    "%d got %s \"%s\" with %d of %d elements equal to %d", r,
                    tl_status_name(e[r].st), e[r].text, e[r].exact, PIPE_COUNT, NR);
    for (int i = 0; i < 2; i++)
        check_pipeline(plogs[i], 'A' + i);

    tl_log("10. sendstall: a device send to a rank that posts no receive, node A's copies "
           "taking 3 s, NEXAR_TIMEOUT 2 s");
    if (restart(0, "NX_FAKEDEV_DELAY_MS", "3000") < 0 || restart(1, NULL, NULL) < 0)
        return 1;
    setenv("XM_OP", "p2pstall", 1);
    g_timeout_s = 2;
    run_job("xm-sendstall", dev3, none, job, sizeof(job), e);
    g_timeout_s = 30;
    unsetenv("XM_OP");
    EXPECT_TRUE(fails, e[0].st == NEXAR_ERR_TIMEOUT && e[0].dt >= 1.5 &&
                strstr(e[0].text, "message 0 from rank 0 to rank 2") &&
                strstr(e[0].text, "not copied off the GPU") && strstr(e[0].text, nd[0].addr),
                "sendstall: rank 0 got %s after %.2f s: \"%s\"; expected NEXAR_ERR_TIMEOUT "
                "after 2 s that names the message, the copy off the GPU and node A (%s)",
                tl_status_name(e[0].st), e[0].dt, e[0].text, nd[0].addr);

    tl_log("8. shutdown: node A's nexard stopped while its 1.5 s copies are in flight");
    if (restart(0, "NX_FAKEDEV_DELAY_MS", "1500") < 0 || restart(1, NULL, NULL) < 0)
        return 1;
    g_mid = stop_a;
    run_job("xm-shutdown", dev3, none, job, sizeof(job), e);
    g_mid = NULL;
    tl_log("   node A's nexard stopped %s after %.2f s", g_stop_rc ? "UNCLEANLY" : "cleanly",
           g_stop_s);
    EXPECT_TRUE(fails, g_stop_rc == 0 && g_stop_s < 5.0, "shutdown: node A's nexard %s after "
                "%.2f s, with device copies in flight", g_stop_rc ? "did not stop cleanly"
                                                          : "stopped", g_stop_s);
    for (int r = 0; r < NR; r++) {
        EXPECT_TRUE(fails, e[r].st != NEXAR_OK && e[r].st != -1, "shutdown: rank %d got %s "
                    "\"%s\"; its op could not have ended well", r, tl_status_name(e[r].st),
                    e[r].text);
        if (r < 2) {
            EXPECT_TRUE(fails, e[r].dt >= 1.2, "shutdown: rank %d on node A ended %.2f s "
                        "after its call, while node A's 1.5 s copy of its buffer still ran",
                        r, e[r].dt);
            /* what ended it, not a symptom (it said "No route to host") */
            EXPECT_TRUE(fails, e[r].st == NEXAR_ERR_UNAVAILABLE &&
                        strstr(e[r].text, "the nexard of node 0 is shutting down") &&
                        strstr(e[r].text, "all_reduce seq 0 on comm 1"),
                        "shutdown: rank %d on node A got %s \"%s\"", r,
                        tl_status_name(e[r].st), e[r].text);
        }
    }
    EXPECT_TRUE(fails, hx_daemon_stop(&nd[1].d) == 0, "daemon B did not stop cleanly");
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
