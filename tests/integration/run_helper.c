/*
 * run_helper.c - the rank program that test_nexar_run launches through nexar-run.
 *
 *   itest_run_helper MODE      (files go to $HX_OUT)
 *     ok      init, allreduce of the ranks (checked), write env<rank>, exit 0
 *     exit3   rank 1 exits 3 right after init; the others sleep 120 s
 *     exit3c  rank 1 exits 3 right after init; the others wait in an allreduce, get
 *             PEER_LOST and exit with it 0.5 s later
 *     sleep   init, write ready<rank>, sleep; SIGTERM writes term<rank> and exits 143
 *     kill9   rank 0 raises SIGKILL after init; the others sleep 120 s
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nexar.h"

static char g_dir[512];
static int g_rank = -1;

static void put(const char *name, const char *text)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%s%d", g_dir, name, g_rank);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static char g_term_path[700];

static void on_term(int sig)
{
    (void)sig;
    int fd = open(g_term_path, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* async-signal-safe */
    if (fd >= 0) {
        ssize_t w = write(fd, "1\n", 2);
        (void)w;
        close(fd);
    }
    _exit(143);
}

static const char *env(const char *k)
{
    const char *v = getenv(k);
    return v ? v : "";
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    snprintf(g_dir, sizeof(g_dir), "%s", env("HX_OUT"));
    g_rank = atoi(env("NEXAR_RANK"));
    snprintf(g_term_path, sizeof(g_term_path), "%s/term%d", g_dir, g_rank);
    signal(SIGTERM, on_term);
    nexar_comm_t *w = NULL;
    nexar_status_t st = nexar_init(&w);
    if (st != NEXAR_OK) {
        fprintf(stderr, "rank %d: nexar_init: %s: %s\n", g_rank, nexar_strerror(st),
                nexar_last_error());
        return 20;
    }
    int me = nexar_comm_rank(w), n = nexar_comm_size(w);
    if (!strcmp(mode, "ok")) {
        int32_t v = me;
        st = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
        if (st != NEXAR_OK || v != n * (n - 1) / 2) {
            fprintf(stderr, "rank %d: allreduce %s, %d\n", me, nexar_strerror(st), v);
            return 21;
        }
        char text[1024];
        snprintf(text, sizeof(text), "%s\n%s\n%s\n%s\n%s\n%d\n%d\n%s\n%s\n%s\n%s\n%s\n%s\n",
                 env("NEXAR_RANK"), env("NEXAR_WORLD_SIZE"), env("NEXAR_LOCAL_RANK"),
                 env("NEXAR_JOB"), env("NEXAR_SOCKET"), me, n, env("RANK"), env("WORLD_SIZE"),
                 env("LOCAL_RANK"), env("LOCAL_WORLD_SIZE"), env("MASTER_ADDR"),
                 env("MASTER_PORT"));
        put("env", text);
        nexar_finalize();
        return 0;
    }
    if (!strcmp(mode, "exit3") || !strcmp(mode, "exit3c")) {
        if (me == 1)
            _exit(3);
        if (!strcmp(mode, "exit3c")) {
            int32_t v = 1;
            st = nexar_all_reduce(w, &v, 1, NEXAR_I32, NEXAR_SUM);
            /* The kernel closes rank 1's socket (so the daemon fails us) before it
             * makes rank 1 a zombie: linger so that "first" is unambiguous. */
            usleep(500000);
            nexar_finalize();
            return st == NEXAR_OK ? 0 : (int)st;
        }
        sleep(120);
        return 0;
    }
    /* grow: 3 members grow the world by 2 joiners (nexar-run --join); every rank of the 5
     * checks an all_reduce and writes grown<rank of 5>. */
    if (!strcmp(mode, "grow") || !strcmp(mode, "joiner")) {
        nexar_comm_t *g = w;
        if (!strcmp(mode, "grow") && (st = nexar_comm_grow(w, 2, &g)) != NEXAR_OK) {
            fprintf(stderr, "rank %d: grow: %s\n", me, nexar_last_error());
            return 23;
        }
        int gr = nexar_comm_rank(g), gn = nexar_comm_size(g);
        int32_t v = gr;
        st = nexar_all_reduce(g, &v, 1, NEXAR_I32, NEXAR_SUM);
        if (gn != 5 || st != NEXAR_OK || v != 10) {
            fprintf(stderr, "rank %d of %d: grown all_reduce %s, %d\n", gr, gn,
                    nexar_strerror(st), v);
            return 24;
        }
        g_rank = gr;
        put("grown", "ok\n");
        if (g != w)
            nexar_comm_free(g);
        nexar_finalize();
        return 0;
    }
    if (!strcmp(mode, "sleep")) {
        put("ready", "1\n");
        sleep(120);
        return 0;
    }
    if (!strcmp(mode, "kill9")) {
        if (me == 0)
            raise(SIGKILL);
        sleep(120);
        return 0;
    }
    return 22;
}
