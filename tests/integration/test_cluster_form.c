/*
 * test_cluster_form.c - a multi-node job forms across K real daemons.
 *
 *   itest_test_cluster_form --nodes K [--split]
 *
 * nexar-run --nodes K starts K private daemons on loopback (QUIC, certificates from a CA
 * made for the run) and 2K-1 ranks of cluster_rank.c ("form") spread over them.  Every
 * rank's nexar_init succeeds with the world's rank and size; an allreduce and a ring of
 * send/recv on the multi-node world give the exact results.  While the ranks wait, `nexarctl jobs --json` on every daemon
 * shows the same node table: K distinct node addresses (the daemons'), the ranks grouped
 * by node as nexar-run placed them, and the daemon's own index.  Then the ranks finalize
 * and nexar-run exits 0.
 *
 * With --split the ranks split the multi-node world instead (cluster_rank.c "split"):
 * by node, which gives node-local communicators that work; by rank parity, which gives
 * communicators across nodes that work; and with one color, a communicator of one.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster_util.h"
#include "itest.h"
#include "nexar.h"

#define MAXK 8

static int fails;

/* The strings of the JSON array after `"key":[` (at most max). */
static int json_strs(const char *json, const char *key, char out[][64], int max)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":[", key);
    const char *p = strstr(json, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    int n = 0;
    while (*p == '"' && n < max) {
        size_t l = strcspn(p + 1, "\"");
        snprintf(out[n++], 64, "%.*s", (int)l, p + 1);
        p += l + 2;
        if (*p == ',')
            p++;
    }
    return n;
}

static int json_nums(const char *json, const char *key, long *out, int max)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":[", key);
    const char *p = strstr(json, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    int n = 0;
    while (*p != ']' && *p && n < max) {
        char *end;
        out[n++] = strtol(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* "simulated node at ADDR: nexard SOCK" lines of nexar-run -v. */
static int parse_nodes(const char *log, char addr[][64], char sock[][256], int max)
{
    static const char key[] = "simulated node at ", mid[] = ": nexard ";
    FILE *f = fopen(log, "r");
    char line[1024];
    int n = 0;
    while (f && fgets(line, sizeof(line), f) && n < max) {
        const char *p = strstr(line, key);
        const char *m = p ? strstr(p, mid) : NULL;
        if (!m)
            continue;
        p += strlen(key);
        snprintf(addr[n], 64, "%.*s", (int)(m - p), p);
        m += strlen(mid);
        snprintf(sock[n], 256, "%.*s", (int)strcspn(m, "\n"), m);
        n++;
    }
    if (f)
        fclose(f);
    return n;
}

/* nexar-run --nodes K with the ranks in mode split: every rank reports ok. */
static int split_test(int K, const char *run, const char *dir)
{
    int N = 2 * K - 1;
    char nodes_arg[8], n_arg[8], log[300], env_out[300], env_k[32];
    snprintf(nodes_arg, sizeof(nodes_arg), "%d", K);
    snprintf(n_arg, sizeof(n_arg), "%d", N);
    snprintf(log, sizeof(log), "%s/nexar-run-split.log", dir);
    snprintf(env_out, sizeof(env_out), "HX_OUT=%s", cu_out());
    snprintf(env_k, sizeof(env_k), "HX_NODES=%d", K);
    const char *args[] = {run, "-v", "--nodes", nodes_arg, "-n", n_arg, "--timeout", "30",
                          getenv("CLUSTER_RANK"), "split", NULL};
    const char *env[] = {env_out, env_k, NULL};
    tl_log("nexar-run --nodes %d -n %d: comm_split of the multi-node world", K, N);
    int code = cu_wait_exit(hx_spawn(args, env, log), 50);
    for (int r = 0; r < N; r++) {
        char buf[1024] = "";
        cu_read("split", r, buf, sizeof(buf));
        EXPECT_TRUE(fails, !strcmp(buf, "ok\n"), "rank %d: %s", r, buf[0] ? buf : "no result");
    }
    EXPECT_TRUE(fails, code == 0, "nexar-run exited %d", code);
    if (!fails)
        tl_log("split by node: local communicators work; by parity: across nodes, work; one color: "
               "a communicator of one");
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int K = 2, split = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
            K = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--split"))
            split = 1;
    }
    if (K < 2 || K > MAXK) {
        fprintf(stderr, "--nodes 2..%d\n", MAXK);
        return 1;
    }
    const char *run = getenv("NEXAR_RUN");
    if (!run || !*run) {
        fprintf(stderr, "SKIP: $NEXAR_RUN is not set\n");
        return HX_SKIP;
    }
    const char *dir = cu_init("form");
    if (split)
        return split_test(K, run, dir);
    int N = 2 * K - 1;
    char job[64], nodes_arg[8], n_arg[8], log[300], env_out[300];
    hx_job_name(job, sizeof(job), "form");
    snprintf(nodes_arg, sizeof(nodes_arg), "%d", K);
    snprintf(n_arg, sizeof(n_arg), "%d", N);
    snprintf(log, sizeof(log), "%s/nexar-run.log", dir);
    snprintf(env_out, sizeof(env_out), "HX_OUT=%s", cu_out());
    const char *args[] = {run, "-v", "--nodes", nodes_arg, "-n", n_arg, "--job", job,
                          "--timeout", "30", getenv("CLUSTER_RANK"), "form", NULL};
    const char *env[] = {env_out, NULL};
    tl_log("nexar-run --nodes %d -n %d: %d daemons on loopback, one multi-node job", K, N, K);
    double t0 = tl_now();
    pid_t pr = hx_spawn(args, env, log);

    for (int r = 0; r < N; r++)
        if (cu_wait_file("form", r, 40)) {
            EXPECT_TRUE(fails, 0, "rank %d did not form within 40 s", r);
            break;
        }
    tl_log("formed in %.2f s", tl_now() - t0);

    for (int r = 0; r < N && !fails; r++) {
        char buf[1024];
        int me, n, st, sst;
        cu_read("form", r, buf, sizeof(buf));
        EXPECT_TRUE(fails, sscanf(buf, "%d %d %d %d", &me, &n, &st, &sst) == 4 && me == r &&
                    n == N, "rank %d reports \"%s\"", r, buf);
        EXPECT_TRUE(fails, st == 0 && sst == 0,
                    "rank %d: allreduce / send-recv on the multi-node world: %s", r, buf);
    }

    char addr[MAXK][64], sock[MAXK][256];
    int nd = parse_nodes(log, addr, sock, MAXK);
    EXPECT_TRUE(fails, nd == K, "nexar-run -v named %d simulated nodes, not %d", nd, K);
    char first_nodes[MAXK][64];
    long first_rn[64];
    int n_first = -1;
    for (int i = 0; i < nd && !fails; i++) {
        char out[16384];
        const char *q[] = {"--json", "jobs", NULL};
        int rc = cu_ctl(sock[i], q, out, sizeof(out), 10);
        EXPECT_TRUE(fails, rc == 0 && strstr(out, job) && strstr(out, "\"state\":\"running\""),
                    "nexarctl jobs on node %d: exit %d: %.300s", i, rc, out);
        char nodes[MAXK][64];
        long rn[64];
        int nn = json_strs(out, "nodes", nodes, MAXK);
        int nr = json_nums(out, "rank_node", rn, 64);
        EXPECT_TRUE(fails, nn == K && nr == N, "node %d: table of %d nodes, %d ranks: %.400s", i,
                    nn, nr, out);
        if (fails)
            break;
        /* The daemons' addresses, each once, and this daemon's index. */
        int self = -1;
        for (int k = 0; k < K; k++) {
            int seen = 0;
            for (int m = 0; m < K; m++)
                seen += !strcmp(nodes[m], addr[k]);
            EXPECT_TRUE(fails, seen == 1, "node %s appears %d times in the table", addr[k], seen);
            if (!strcmp(nodes[k], addr[i]))
                self = k;
        }
        char pat[32];
        snprintf(pat, sizeof(pat), "\"node\":%d", self);
        EXPECT_TRUE(fails, self >= 0 && strstr(out, pat), "node %d does not know its index (%d)",
                    i, self);
        /* nexar-run's blocks: rank r on node r*K/N; the same grouping in the table. */
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                EXPECT_TRUE(fails, (a * K / N == b * K / N) == (rn[a] == rn[b]),
                            "ranks %d and %d grouped differently than placed", a, b);
        for (int r = 0; r < N; r++)
            EXPECT_TRUE(fails, !strcmp(nodes[rn[r]], addr[r * K / N]),
                        "rank %d is on %s, the table says %s", r, addr[r * K / N], nodes[rn[r]]);
        if (n_first < 0) {
            n_first = nn;
            memcpy(first_nodes, nodes, sizeof(nodes));
            memcpy(first_rn, rn, sizeof(rn));
        } else {
            EXPECT_TRUE(fails, !memcmp(first_nodes, nodes, sizeof(nodes)) &&
                        !memcmp(first_rn, rn, sizeof(long) * (size_t)N),
                        "node %d has another table than node 0", i);
        }
        const char *h[] = {"jobs", NULL};
        cu_ctl(sock[i], h, out, sizeof(out), 10);
        EXPECT_TRUE(fails, strstr(out, "(this nexard)") && strstr(out, "coordinator"),
                    "nexarctl jobs on node %d shows no node table:\n%s", i, out);
    }
    if (!fails)
        tl_log("every daemon shows the same table of %d nodes and %d ranks", K, N);

    char rel[300];
    snprintf(rel, sizeof(rel), "%s/release", cu_out());
    FILE *f = fopen(rel, "w");
    if (f)
        fclose(f);
    int code = cu_wait_exit(pr, 40);
    EXPECT_TRUE(fails, code == 0, "nexar-run exited %d", code);
    if (fails) {
        char line[512];
        FILE *lf = fopen(log, "r");
        int k = 0;
        while (lf && fgets(line, sizeof(line), lf) && k++ < 80)
            fprintf(stderr, "    | %s", line);
        if (lf)
            fclose(lf);
    }
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
