/*
 * test_cluster_algo.c - which algorithm carries a collective between nodes, who chooses
 * it, and what the nodes of a job must agree on.
 *
 * Daemons A (coordinator, `algo = all_reduce=hd` in its settings), B (no setting), C
 * (coordinator without a setting) and D (other slot_bytes), on loopback with real
 * certificates.  Ranks of cluster_rank.c "algo" run an all_reduce of 2 floats, a
 * broadcast of 2 and an all_reduce of 1 Mi floats, checked, and report
 * nexar_comm_algorithm() after each:
 *  - coordinated by C, no NEXAR_ALGO: chosen by size (rd, tree, ring for two nodes);
 *  - coordinated by A: A's setting holds on every node of the job, B's too (hd, tree,
 *    hd), and `nexarctl jobs` on B shows it;
 *  - NEXAR_ALGO=all_reduce=ring,broadcast=ring beats A's setting (ring, ring, ring);
 *  - NEXAR_ALGO naming an algorithm a collective lacks: NEXAR_ERR_INVALID at init;
 *  - ranks of one job with different NEXAR_ALGO: the one that registers second gets
 *    NEXAR_ERR_MISMATCH naming it, the other a formation timeout;
 *  - a node whose slot_bytes differs from the coordinator's: its rank is refused with
 *    NEXAR_ERR_MISMATCH naming slot_bytes, and the job never forms.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cluster_util.h"
#include "itest.h"
#include "nexar.h"

static int fails;
static struct cu_node A, B, C, D;

static void clear_out(void)
{
    hx_rmtree(cu_out());
    mkdir(cu_out(), 0777);
    chmod(cu_out(), 0777);
}

static void release(void)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/release", cu_out());
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

/* Ranks 0 at `at0` and 1 at `at1`, coordinated by coord, NEXAR_ALGO = algo (NULL: unset):
 * both must report status 0 and the three algorithm names in want. */
static void run_job(const char *tag, struct cu_node *at0, struct cu_node *at1,
                    struct cu_node *coord, const char *algo, const char *want,
                    const char *ctl_want)
{
    tl_log("%s: NEXAR_ALGO=%s, coordinator %s: want \"%s\"", tag, algo ? algo : "(unset)",
           coord->addr, want);
    clear_out();
    char job[64], e_algo[300];
    hx_job_name(job, sizeof(job), tag);
    snprintf(e_algo, sizeof(e_algo), "NEXAR_ALGO=%s", algo ? algo : "");
    const char *env[] = {algo ? e_algo : NULL, NULL};
    const char *argv[] = {getenv("CLUSTER_RANK"), "algo", NULL};
    pid_t p[2];
    p[0] = cu_rank_exec(at0->d.sock, coord->addr, job, 0, 2, 30, argv, env, NULL);
    p[1] = cu_rank_exec(at1->d.sock, coord->addr, job, 1, 2, 30, argv, env, NULL);
    for (int r = 0; r < 2; r++) {
        char buf[2048] = "";
        EXPECT_TRUE(fails, cu_wait_file("algo", r, 40) == 0, "%s: rank %d wrote nothing", tag,
                    r);
        cu_read("algo", r, buf, sizeof(buf));
        EXPECT_TRUE(fails, buf[0] == '0' && buf[1] == ' ' && !strncmp(buf + 2, want, strlen(want)),
                    "%s: rank %d reports \"%s\", want \"0 %s\"", tag, r, buf, want);
    }
    if (ctl_want) {
        char out[8192];
        const char *q[] = {"--json", "jobs", NULL};
        int rc = cu_ctl(at1->d.sock, q, out, sizeof(out), 10);
        EXPECT_TRUE(fails, rc == 0 && strstr(out, ctl_want),
                    "%s: nexarctl jobs on %s does not show %s: %s", tag, at1->addr, ctl_want,
                    out);
    }
    release();
    for (int r = 0; r < 2; r++)
        EXPECT_TRUE(fails, cu_wait_exit(p[r], 30) == 0, "%s: rank %d failed", tag, r);
}

/* Both ranks' init results; returns rank r's status, its text in txt[r]. */
static void init_pair(const char *tag, struct cu_node *at1, const char *algo0,
                      const char *algo1, int st[2], char txt[2][1024])
{
    clear_out();
    char job[64], e0[300], e1[300];
    hx_job_name(job, sizeof(job), tag);
    snprintf(e0, sizeof(e0), "NEXAR_ALGO=%s", algo0 ? algo0 : "");
    snprintf(e1, sizeof(e1), "NEXAR_ALGO=%s", algo1 ? algo1 : "");
    const char *env0[] = {algo0 ? e0 : NULL, NULL}, *env1[] = {algo1 ? e1 : NULL, NULL};
    const char *argv[] = {getenv("CLUSTER_RANK"), "init", NULL};
    pid_t p0 = cu_rank_exec(A.d.sock, A.addr, job, 0, 2, 3, argv, env0, NULL);
    pid_t p1 = cu_rank_exec(at1->d.sock, A.addr, job, 1, 2, 3, argv, env1, NULL);
    cu_wait_exit(p0, 20);
    cu_wait_exit(p1, 20);
    for (int r = 0; r < 2; r++) {
        char buf[2048] = "";
        cu_read("init", r, buf, sizeof(buf));
        st[r] = buf[0] ? atoi(buf) : -1;
        const char *sp = strchr(buf, ' ');
        snprintf(txt[r], sizeof(txt[r]), "%s", sp ? sp + 1 : buf);
        tl_log("%s:   rank %d: %s", tag, r, buf[0] ? buf : "no result");
    }
}

int main(void)
{
    cu_init("algo");
    const char *setting[] = {"--set", "algo=all_reduce=hd", NULL};
    const char *slots[] = {"--slot-bytes", "1048576", NULL};
    if (cu_node_start(&A, "node0", "ca", setting) || cu_node_start(&B, "node1", "ca", NULL) ||
        cu_node_start(&C, "node2", "ca", NULL) || cu_node_start(&D, "node3", "ca", slots)) {
        cu_fini();
        return 1;
    }

    run_job("auto", &C, &B, &C, NULL, "rd tree ring", NULL);
    run_job("setting", &A, &B, &A, NULL, "hd tree hd", "\"algo\":\"all_reduce=hd\"");
    run_job("env", &A, &B, &A, "all_reduce=ring,broadcast=ring", "ring ring ring",
            "\"algo\":\"all_reduce=ring,broadcast=ring\"");

    int st[2];
    char txt[2][1024];
    tl_log("unknown algorithm: NEXAR_ALGO=all_reduce=tree");
    init_pair("badalgo", &B, "all_reduce=tree", "all_reduce=tree", st, txt);
    for (int r = 0; r < 2; r++)
        EXPECT_TRUE(fails, st[r] == NEXAR_ERR_INVALID && strstr(txt[r], "has no algorithm"),
                    "bad NEXAR_ALGO: rank %d: %d %s", r, st[r], txt[r]);

    tl_log("ranks that disagree: all_reduce=ring at A, all_reduce=rd at B");
    init_pair("disagree", &B, "all_reduce=ring", "all_reduce=rd", st, txt);
    /* Whichever registers second is refused; the first waits for a job that never forms. */
    int late = st[0] == NEXAR_ERR_MISMATCH ? 0 : 1;
    EXPECT_TRUE(fails, st[late] == NEXAR_ERR_MISMATCH && strstr(txt[late], "NEXAR_ALGO"),
                "different NEXAR_ALGO: rank %d: %d %s", late, st[late], txt[late]);
    EXPECT_TRUE(fails, st[1 - late] == NEXAR_ERR_TIMEOUT, "different NEXAR_ALGO: rank %d: %d %s",
                1 - late, st[1 - late], txt[1 - late]);

    tl_log("slot_bytes 1 MiB at D, 4 MiB at its coordinator A");
    init_pair("slots", &D, NULL, NULL, st, txt);
    EXPECT_TRUE(fails, st[1] == NEXAR_ERR_MISMATCH && strstr(txt[1], "slot_bytes"),
                "slot_bytes: rank 1: %d %s", st[1], txt[1]);
    EXPECT_TRUE(fails, st[0] == NEXAR_ERR_TIMEOUT, "slot_bytes: rank 0: %d %s", st[0], txt[0]);

    struct cu_node *all[] = {&A, &B, &C, &D};
    for (int i = 0; i < 4; i++)
        EXPECT_TRUE(fails, hx_daemon_stop(&all[i]->d) == 0, "daemon %d did not stop cleanly", i);
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
