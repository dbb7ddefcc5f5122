/*
 * test_semantics.c - runs sem_rank.c under nexar-run, the same configuration many times,
 * and passes when every run's ranks all exit 0 within the limit.
 *
 *   itest_test_semantics [--nodes K] -n N [--repeat R] [--timeout S] [--limit S]
 *                        [--daemon-arg ARG]... -- MODE [ARGS...]
 *
 * --nodes K (K >= 2) simulates K nodes (nexar-run --nodes); without it one private
 * daemon serves every rank (a socket in a scratch directory, so that a system nexard is
 * never used).  --timeout is the ranks' NEXAR_TIMEOUT (default 10); --daemon-arg goes to
 * nexar-run's daemons (up to 8).  A failing run prints
 * nexar-run's output and the test goes on to count how many of the R runs failed.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "outfile.h"
#include "check.h"

int main(int argc, char **argv)
{
    int nodes = 1, n = 2, repeat = 1, timeout = 10, ndarg = 0;
    const char *dargs[8];
    double limit = 120;
    static const struct option opts[] = {
        {"nodes", required_argument, NULL, 'k'}, {"np", required_argument, NULL, 'n'},
        {"repeat", required_argument, NULL, 'r'}, {"timeout", required_argument, NULL, 't'},
        {"limit", required_argument, NULL, 'l'}, {"daemon-arg", required_argument, NULL, 'd'},
        {0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
        switch (o) {
        case 'k': nodes = atoi(optarg); break;
        case 'n': n = atoi(optarg); break;
        case 'r': repeat = atoi(optarg); break;
        case 't': timeout = atoi(optarg); break;
        case 'l': limit = atof(optarg); break;
        case 'd':
            if (ndarg == 8)
                return 2;
            dargs[ndarg++] = optarg;
            break;
        default: return 2;
        }
    }
    const char *run = getenv("NEXAR_RUN"), *rank = getenv("SEM_RANK");
    if (optind >= argc || !run || !rank) {
        fprintf(stderr, "usage: NEXAR_RUN=... SEM_RANK=... test_semantics [--nodes K] -n N "
                "[--repeat R] -- MODE [ARGS]\n");
        return 77;
    }
    char dir[] = "/tmp/nx-sem-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char sock[256], out[256], np[16], kk[16], tt[16];
    snprintf(sock, sizeof(sock), "%s/nobody.sock", dir);
    snprintf(np, sizeof(np), "%d", n);
    snprintf(kk, sizeof(kk), "%d", nodes);
    snprintf(tt, sizeof(tt), "%d", timeout);
    int failed = 0;
    for (int i = 0; i < repeat; i++) {
        const char *av[64] = {run, "-n", np, "--timeout", tt, "--grace", "3"};
        int a = 7;
        if (nodes > 1) {
            av[a++] = "--nodes";
            av[a++] = kk;
        } else {
            av[a++] = "--socket";
            av[a++] = sock;
        }
        for (int j = 0; j < ndarg; j++) {
            av[a++] = "--daemon-arg";
            av[a++] = dargs[j];
        }
        av[a++] = "--";
        av[a++] = rank;
        for (int j = optind; j < argc && a < 62; j++)
            av[a++] = argv[j];
        av[a] = NULL;
        snprintf(out, sizeof(out), "%s/run%d.log", dir, i);
        pid_t pid = hx_spawn(av, NULL, out);
        int ws = 0;
        char st[64];
        int rv = pid > 0 ? hx_wait_pid(pid, limit, &ws) : -1;
        if (rv || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            char *text = tl_read_file(out);
            tl_log("FAIL run %d of %d (%s %s, nodes %d): %s\n%s", i + 1, repeat, argv[optind],
                   optind + 1 < argc ? argv[optind + 1] : "", nodes,
                   rv ? "still running at the limit" : hx_describe_status(ws, st, sizeof(st)),
                   text ? text : "");
            free(text);
            if (rv) {
                kill(pid, SIGKILL);
                hx_wait_pid(pid, 10, &ws);
            }
            failed++;
        }
    }
    hx_rmtree(dir);
    if (failed) {
        tl_log("FAIL %d of %d runs of %s failed", failed, repeat, argv[optind]);
        return 1;
    }
    tl_log("ok: %d of %d runs of %s (%d ranks, %d node%s)", repeat, repeat, argv[optind], n,
           nodes, nodes == 1 ? "" : "s");
    return 0;
}
