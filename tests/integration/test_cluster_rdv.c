/*
 * test_cluster_rdv.c - the rendezvous of multi-node jobs when it goes wrong.
 *
 * Two daemons A (the coordinator) and B on loopback, with real certificates:
 *  - formation timeout: 3 of 4 ranks join (NEXAR_TIMEOUT=3); every one of them gets
 *    NEXAR_ERR_TIMEOUT naming rank 3 as never registered, about 3 s after;
 *  - a duplicate rank: rank 0 joins at A, then again at B: the second gets
 *    NEXAR_ERR_INVALID ("already registered at node A"); the job forms with the first;
 *  - world sizes that disagree: NEXAR_ERR_MISMATCH for the rank that says otherwise;
 *  - a daemon without listen and a rank with NEXAR_COORD: NEXAR_ERR_UNAVAILABLE,
 *    "has no network (set listen=...)";
 *  - a coordinator address where nothing answers: NEXAR_ERR_UNAVAILABLE naming it;
 *  - a JOIN (from a client other than the library, which looks names up itself) whose
 *    coordinator is a host name, NEXAR_COORD's or a guessed MASTER_ADDR's: refused at
 *    once with NEXAR_ERR_INVALID ("is a host name, not an address"), or for the guess
 *    taken as a job of this node, without a lookup on nexard's loop (tests/netns/
 *    test_netns_names.sh shows what a lookup there held up);
 *  - a rank of another uid: the job is created by uid 65534 at A, and uid 65533 joins at
 *    B: NEXAR_ERR_PERMISSION from the coordinator;
 *  - root is no exception: uid 65534's job, root's rank joins at B (the coordinator
 *    refuses) and at A (the job's own node refuses), NEXAR_ERR_PERMISSION naming the owner
 *    (root could join any job before, and so hand a user's job its data).
 *  These parts need root (to run the ranks as those uids) and are skipped otherwise.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster_util.h"
#include "itest.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "rawclient.h"

static int fails;
static struct cu_node A, B;
static const char *g_dir;

/* The status and text of init<rank>. */
static int init_result(int rank, char *text, size_t len)
{
    char buf[2048];
    if (cu_read("init", rank, buf, sizeof(buf)))
        return -1;
    int st = atoi(buf);
    const char *sp = strchr(buf, ' ');
    snprintf(text, len, "%s", sp ? sp + 1 : "");
    return st;
}

static void clear_out(void)
{
    hx_rmtree(cu_out());
    mkdir(cu_out(), 0777);
    chmod(cu_out(), 0777);
}

static void formation_timeout(void)
{
    tl_log("formation timeout: ranks 0, 1 at A, 2 at B of 4; rank 3 never comes");
    clear_out();
    char job[64];
    hx_job_name(job, sizeof(job), "timeout");
    pid_t p[3];
    double t0 = tl_now();
    p[0] = cu_rank(A.d.sock, A.addr, job, 0, 4, "init", 3);
    p[1] = cu_rank(A.d.sock, A.addr, job, 1, 4, "init", 3);
    p[2] = cu_rank(B.d.sock, A.addr, job, 2, 4, "init", 3);
    for (int r = 0; r < 3; r++) {
        int code = cu_wait_exit(p[r], 20);
        double dt = tl_now() - t0;
        char text[1024];
        int st = init_result(r, text, sizeof(text));
        EXPECT_TRUE(fails, code == 0 && st == NEXAR_ERR_TIMEOUT,
                    "rank %d: exit %d, status %d: %s", r, code, st, text);
        EXPECT_TRUE(fails, strstr(text, "rank(s) 3 of 4 never registered") != NULL,
                    "rank %d: the timeout does not name rank 3: %s", r, text);
        EXPECT_TRUE(fails, dt < 8, "rank %d: the timeout came after %.1f s", r, dt);
        if (r == 2)
            tl_log("rank 2 (at B) after %.2f s: %s", dt, text);
    }
}

static void duplicate_rank(void)
{
    tl_log("duplicate rank: rank 0 at A, then rank 0 again at B, then rank 1 at B");
    clear_out();
    char job[64];
    hx_job_name(job, sizeof(job), "dup");
    pid_t p0 = cu_rank(A.d.sock, A.addr, job, 0, 2, "init", 10);
    /* Let the first rank 0 register before the second. */
    char out[8192];
    const char *q[] = {"--json", "jobs", NULL};
    for (int i = 0; i < 200; i++) {
        cu_ctl(A.d.sock, q, out, sizeof(out), 5);
        if (strstr(out, job))
            break;
        usleep(20000);
    }
    usleep(200000);
    pid_t pd = cu_rank(B.d.sock, A.addr, job, 0, 2, "init", 10);
    int code = cu_wait_exit(pd, 20);
    char text[1024];
    int st = init_result(0, text, sizeof(text));
    /* init0 of the duplicate is written first: the first rank 0 still waits. */
    EXPECT_TRUE(fails, code == 0 && st == NEXAR_ERR_INVALID && strstr(text, "already registered"),
                "duplicate rank 0: exit %d, status %d: %s", code, st, text);
    tl_log("duplicate rank 0 at B: %s", text);
    clear_out();
    pid_t p1 = cu_rank(B.d.sock, A.addr, job, 1, 2, "init", 10);
    int c0 = cu_wait_exit(p0, 20), c1 = cu_wait_exit(p1, 20);
    int s0 = init_result(0, text, sizeof(text));
    EXPECT_TRUE(fails, c0 == 0 && s0 == 0, "rank 0 at A: exit %d, status %d: %s", c0, s0, text);
    int s1 = init_result(1, text, sizeof(text));
    EXPECT_TRUE(fails, c1 == 0 && s1 == 0, "rank 1 at B: exit %d, status %d: %s", c1, s1, text);
}

static void world_mismatch(void)
{
    tl_log("world size disagreement: rank 0 at A says 2, rank 1 at B says 3");
    clear_out();
    char job[64];
    hx_job_name(job, sizeof(job), "world");
    pid_t p0 = cu_rank(A.d.sock, A.addr, job, 0, 2, "init", 3);
    usleep(300000);
    pid_t p1 = cu_rank(B.d.sock, A.addr, job, 1, 3, "init", 3);
    int c1 = cu_wait_exit(p1, 20);
    char text[1024];
    int st = init_result(1, text, sizeof(text));
    EXPECT_TRUE(fails, c1 == 0 && st == NEXAR_ERR_MISMATCH && strstr(text, "has 3 ranks"),
                "rank 1: exit %d, status %d: %s", c1, st, text);
    tl_log("rank 1 at B: %s", text);
    int c0 = cu_wait_exit(p0, 20);
    st = init_result(0, text, sizeof(text));
    EXPECT_TRUE(fails, c0 == 0 && st == NEXAR_ERR_TIMEOUT, "rank 0: exit %d, status %d: %s", c0,
                st, text);
}

static void no_network(void)
{
    tl_log("a daemon without listen, a rank with NEXAR_COORD");
    clear_out();
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL)) {
        fails++;
        return;
    }
    char job[64];
    hx_job_name(job, sizeof(job), "nonet");
    pid_t p = cu_rank(d.sock, A.addr, job, 0, 2, "init", 10);
    int code = cu_wait_exit(p, 20);
    char text[1024];
    int st = init_result(0, text, sizeof(text));
    EXPECT_TRUE(fails, code == 0 && st == NEXAR_ERR_UNAVAILABLE &&
                strstr(text, "has no network (set listen=...)") && strstr(text, d.sock),
                "status %d: %s", st, text);
    tl_log("%s", text);
    if (hx_daemon_stop(&d))
        fails++;
}

static void coordinator_unreachable(void)
{
    /* A UDP port nothing listens on: bound and closed again. */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    char coord[64];
    snprintf(coord, sizeof(coord), "127.0.0.1:%u", ntohs(sa.sin_port));
    tl_log("coordinator %s where nothing answers", coord);
    clear_out();
    char job[64];
    hx_job_name(job, sizeof(job), "unreach");
    double t0 = tl_now();
    pid_t p = cu_rank(B.d.sock, coord, job, 1, 2, "init", 30);
    int code = cu_wait_exit(p, 40);
    char text[1024];
    int st = init_result(1, text, sizeof(text));
    EXPECT_TRUE(fails, code == 0 && st == NEXAR_ERR_UNAVAILABLE && strstr(text, coord) &&
                strstr(text, "unreachable"), "status %d: %s", st, text);
    tl_log("after %.1f s: %s", tl_now() - t0, text);
}

/* A rank as another uid (the test runs as root). */
/* A raw JOIN of rank 0 of 2 at `sock` with the given coord; its JoinReply's status (-1
 * without one within 5 s), text, and how long it took in ms. */
static int raw_join(const char *sock, const char *job, const char *coord, bool guessed,
                    char *text, size_t len, long *ms)
{
    text[0] = '\0';
    int fd = rc_connect(sock);
    const char *why = NULL;
    if (fd < 0 || rc_hello(fd, NEXAR__CLIENT_KIND__CLIENT_RANK, 5000, &why) < 0) {
        if (fd >= 0)
            close(fd);
        snprintf(text, len, "no HELLO: %s", why ? why : "cannot connect");
        return -1;
    }
    Nexar__JoinRequest jr = NEXAR__JOIN_REQUEST__INIT;
    jr.job = (char *)job;
    jr.world_size = 2;
    jr.timeout_ms = 3000;
    jr.coord = (char *)coord;
    jr.coord_guessed = guessed;
    size_t n = nexar__join_request__get_packed_size(&jr);
    uint8_t *p = malloc(n ? n : 1);
    nexar__join_request__pack(&jr, p);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = rc_send_frame(fd, 3 /* JOIN */, p, (uint32_t)n) == 0
                 ? rc_join_reply(fd, 5000, text, len)
                 : -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    free(p);
    close(fd);
    return st;
}

static void host_names(void)
{
    char job[64], coord[96], text[512];
    long ms;
    /* "localhost" resolves at once here; nexard must not try either way. */
    snprintf(coord, sizeof(coord), "localhost%s", strrchr(A.addr, ':'));
    hx_job_name(job, sizeof(job), "name");
    int st = raw_join(A.d.sock, job, coord, false, text, sizeof(text), &ms);
    EXPECT_TRUE(fails, st == NEXAR_ERR_INVALID && strstr(text, "NEXAR_COORD") &&
                strstr(text, "'localhost' is a host name, not an address") && ms < 1000,
                "a raw JOIN with coord %s: status %d in %ld ms: %s", coord, st, ms, text);
    tl_log("a raw JOIN with coord %s: status %d in %ld ms: %s", coord, st, ms, text);
    /* A guessed coordinator nexard cannot use makes a job of this node (as one it could
     * not resolve did): the JOIN waits for rank 1, which never comes, until its 3 s. */
    hx_job_name(job, sizeof(job), "guess");
    st = raw_join(A.d.sock, job, "localhost:29500", true, text, sizeof(text), &ms);
    EXPECT_TRUE(fails, st == NEXAR_ERR_TIMEOUT && strstr(text, "rank(s) 1 of 2 never joined") && ms < 4500,
                "a raw JOIN with a guessed coord localhost:29500: status %d in %ld ms: %s", st,
                ms, text);
    tl_log("a raw JOIN with a guessed coord localhost:29500: status %d in %ld ms: %s", st, ms,
           text);
}

static pid_t rank_as(uid_t uid, const char *sock, const char *job, int rank, int world)
{
    pid_t p = fork();
    if (p == 0) {
        if (setgid(uid) < 0 || setuid(uid) < 0)
            _exit(99);
        const char *argv[] = {getenv("CLUSTER_RANK"), "init", NULL};
        char e[6][320];
        snprintf(e[0], sizeof(e[0]), "NEXAR_RANK=%d", rank);
        snprintf(e[1], sizeof(e[1]), "NEXAR_WORLD_SIZE=%d", world);
        snprintf(e[2], sizeof(e[2]), "NEXAR_JOB=%s", job);
        snprintf(e[3], sizeof(e[3]), "NEXAR_SOCKET=%s", sock);
        snprintf(e[4], sizeof(e[4]), "HX_OUT=%s", cu_out());
        snprintf(e[5], sizeof(e[5]), "NEXAR_COORD=%s", A.addr);
        for (int i = 0; i < 6; i++)
            putenv(e[i]);
        putenv("NEXAR_TIMEOUT=3");
        execv(argv[0], (char *const *)argv);
        _exit(98);
    }
    return p;
}

/* Rank 0 of a refusal case waits for a rank 1 that was turned away; what it then gets is
 * the formation timeout, which formation_timeout() checks: end it rather than wait 3 s. */
static void stop_waiting_rank(pid_t p)
{
    kill(p, SIGTERM);
    cu_wait_exit(p, 20);
}

static void uid_refused(void)
{
    if (geteuid() != 0) {
        tl_log("uid refusal: skipped (needs root to run ranks as two other uids)");
        return;
    }
    tl_log("uid refusal: uid 65534 creates the job at A, uid 65533 joins at B");
    clear_out();
    /* The scratch directory and the daemons' sockets must be reachable by those uids. */
    chmod(g_dir, 0755);
    chmod(A.d.dir, 0755);
    chmod(B.d.dir, 0755);
    char job[64];
    hx_job_name(job, sizeof(job), "uid");
    pid_t p0 = rank_as(65534, A.d.sock, job, 0, 2);
    usleep(300000);
    pid_t p1 = rank_as(65533, B.d.sock, job, 1, 2);
    int c1 = cu_wait_exit(p1, 20);
    char text[1024];
    int st = init_result(1, text, sizeof(text));
    EXPECT_TRUE(fails, c1 == 0 && st == NEXAR_ERR_PERMISSION && strstr(text, "may not join"),
                "rank 1 as uid 65533: exit %d, status %d: %s", c1, st, text);
    tl_log("rank 1 as uid 65533: %s", text);
    stop_waiting_rank(p0);
}

static void root_refused(void)
{
    if (geteuid() != 0) {
        tl_log("root refusal: skipped (needs root)");
        return;
    }
    for (int local = 0; local < 2; local++) {
        tl_log("root refusal: uid 65534 creates the job at A, root joins at %s", local ? "A" : "B");
        clear_out();
        chmod(g_dir, 0755);
        chmod(A.d.dir, 0755);
        chmod(B.d.dir, 0755);
        char job[64];
        hx_job_name(job, sizeof(job), local ? "rootA" : "rootB");
        pid_t p0 = rank_as(65534, A.d.sock, job, 0, 2);
        usleep(300000);
        pid_t p1 = rank_as(0, local ? A.d.sock : B.d.sock, job, 1, 2);
        int c1 = cu_wait_exit(p1, 20);
        char text[1024];
        int st = init_result(1, text, sizeof(text));
        EXPECT_TRUE(fails, c1 == 0 && st == NEXAR_ERR_PERMISSION &&
                    strstr(text, "belongs to uid 65534; uid 0") &&
                    strstr(text, "choose another NEXAR_JOB"),
                    "root's rank 1 at %s: exit %d, status %d: %s", local ? "A" : "B", c1, st,
                    text);
        tl_log("root's rank 1 at %s: %s", local ? "A" : "B", text);
        stop_waiting_rank(p0);
    }
}

int main(void)
{
    g_dir = cu_init("rdv");
    const char *quick[] = {"--set", "peer_idle_timeout_ms=2000", NULL};
    if (cu_node_start(&A, "node0", "ca", quick) || cu_node_start(&B, "node1", "ca", quick)) {
        cu_fini();
        return 1;
    }
    tl_log("A %s, B %s", A.addr, B.addr);
    formation_timeout();
    duplicate_rank();
    world_mismatch();
    no_network();
    coordinator_unreachable();
    host_names();
    uid_refused();
    root_refused();
    if (hx_daemon_stop(&A.d) || hx_daemon_stop(&B.d))
        fails++;
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
