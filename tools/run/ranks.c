/*
 * ranks.c - start the ranks.
 *
 * The ranks stay in nexar-run's process group and session (so the terminal's
 * Ctrl-C and job control reach them as they would reach any foreground job);
 * nexar-run tracks them by pid.  PR_SET_PDEATHSIG makes a rank get SIGTERM when
 * nexar-run itself dies, so a killed launcher leaves no orphans behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"
#include "util.h"

/* execvp()'s search, done once up front: a typo should cost one message, not
 * N ranks failing with 127 (and a daemon started for nothing). */
void run_resolve_program(const struct run_opts *o)
{
    const char *prog = o->argv[0];
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) < 0)
            nxt_die(NXR_EXIT_NOTFOUND, "cannot run %s: %s", prog, strerror(errno));
        if (!S_ISREG(st.st_mode) || access(prog, X_OK) < 0)
            nxt_die(NXR_EXIT_NOEXEC, "cannot run %s: not an executable file", prog);
        return;
    }
    const char *path = getenv("PATH");
    char *dirs = nxt_xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    char *save = NULL;
    bool found = false;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *p = nxt_xasprintf("%s/%s", *d ? d : ".", prog);
        found = stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
        free(p);
    }
    free(dirs);
    if (!found)
        nxt_die(NXR_EXIT_NOTFOUND, "cannot run %s: command not found", prog);
}

static void set_env_int(const char *name, long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%ld", v);
    setenv(name, buf, 1);
}

/* The first rank of node k: the smallest i with i * nodes / nranks == k. */
static int node_first(const struct run_opts *o, int node)
{
    return (int)(((long long)node * o->nranks + o->nodes - 1) / o->nodes);
}

/* A port of 127.0.0.1 that was free a moment ago, for torch's rendezvous store; 0 when
 * none could be had (the ranks then need MASTER_PORT from the caller). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* torchrun's variables, so that torch.distributed's env:// rendezvous (which every
 * backend goes through, nexar's too) works under nexar-run unchanged.  MASTER_ADDR and
 * MASTER_PORT are left alone when the caller set them. */
static void set_torch_env(const struct run_opts *o, const struct run_rank *r, int port)
{
    set_env_int("RANK", r->rank);
    set_env_int("WORLD_SIZE", o->nranks);
    set_env_int("LOCAL_RANK", r->local_rank);
    set_env_int("LOCAL_WORLD_SIZE", node_first(o, r->node + 1) - node_first(o, r->node));
    setenv("MASTER_ADDR", "127.0.0.1", 0);
    if (port > 0 && !getenv("MASTER_PORT"))
        set_env_int("MASTER_PORT", port);
}

/* In the child: environment, signals, stdin, then exec.  Never returns. */
static void exec_rank(const struct run_opts *o, const char *job, const struct run_daemon *d,
                      const char *coord, const struct run_rank *r, pid_t parent, int port)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(128 + SIGTERM); /* nexar-run died before prctl took effect */
    run_child_signals();
    run_bind_child(o, r->node, r->local_rank,
                   node_first(o, r->node + 1) - node_first(o, r->node));

    set_env_int("NEXAR_RANK", r->rank);
    set_env_int("NEXAR_WORLD_SIZE", o->nranks);
    set_env_int("NEXAR_LOCAL_RANK", r->local_rank);
    setenv("NEXAR_JOB", job, 1);
    setenv("NEXAR_SOCKET", d->socket, 1);
    if (o->nodes > 1)
        setenv("NEXAR_COORD", coord, 1);
    if (o->timeout)
        setenv("NEXAR_TIMEOUT", o->timeout, 1);
    if (o->join)
        setenv("NEXAR_JOIN", "1", 1);
    else
        set_torch_env(o, r, port);

    /* As mpirun does: only rank 0 reads the terminal; the others would race it. */
    if (r->rank != 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0 && null != STDIN_FILENO) {
            dup2(null, STDIN_FILENO);
            close(null);
        }
    }
    execvp(o->argv[0], o->argv);
    int e = errno;
    fprintf(stderr, "nexar-run: rank %d: cannot run %s: %s\n", r->rank, o->argv[0],
            strerror(e));
    _exit(e == ENOENT ? NXR_EXIT_NOTFOUND : NXR_EXIT_NOEXEC);
}

int run_ranks_start(const struct run_opts *o, const char *job, const struct run_daemon *d,
                    struct run_rank *ranks)
{
    pid_t parent = getpid();
    int port = o->join || getenv("MASTER_PORT") ? 0 : free_port();
    fflush(NULL); /* nothing buffered may be written twice */
    for (int i = 0; i < o->nranks; i++) {
        struct run_rank *r = &ranks[i];
        r->rank = i;
        r->node = (int)((long long)i * o->nodes / o->nranks);
        r->local_rank = i - node_first(o, r->node);
        pid_t pid = fork();
        if (pid == 0)
            exec_rank(o, job, &d[r->node], d[0].addr, r, parent, port);
        if (pid < 0) {
            nxt_warn("fork for rank %d: %s", i, strerror(errno));
            for (int k = 0; k < i; k++)
                kill(ranks[k].pid, SIGKILL);
            for (int k = 0; k < i; k++)
                waitpid(ranks[k].pid, NULL, 0);
            return NXR_EXIT_OSERR;
        }
        r->pid = pid;
    }
    return 0;
}
