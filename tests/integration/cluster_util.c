/* cluster_util.c - see cluster_util.h. */
#include "cluster_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char g_dir[128], g_certs[160], g_out[160];

static const char *need_env(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "SKIP: $%s is not set (run through meson test)\n", name);
        exit(HX_SKIP);
    }
    return v;
}

const char *cu_init(const char *tag)
{
    hx_require_nexard();
    const char *q = getenv("NEXAR_HAVE_QUIC");
    if (!q || strcmp(q, "1")) {
        fprintf(stderr, "SKIP: nexard is built without QUIC\n");
        exit(HX_SKIP);
    }
    need_env("NEXARCTL");
    need_env("CLUSTER_RANK");
    const char *sh = need_env("CERTS_SH");
    if (access("/usr/bin/certtool", X_OK) != 0 && system("command -v certtool >/dev/null")) {
        fprintf(stderr, "SKIP: certtool (gnutls-bin) is not installed\n");
        exit(HX_SKIP);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/nxcl-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(g_certs, sizeof(g_certs), "%s/certs", g_dir);
    snprintf(g_out, sizeof(g_out), "%s/out", g_dir);
    mkdir(g_out, 0700);
    const char *argv[] = {"/bin/sh", sh, g_certs, "4", NULL};
    pid_t p = hx_spawn(argv, NULL, NULL);
    int ws;
    if (p < 0 || hx_wait_pid(p, 30, &ws) || !WIFEXITED(ws) || WEXITSTATUS(ws)) {
        tl_log("FAIL: %s could not make the test certificates", sh);
        exit(1);
    }
    return g_dir;
}

const char *cu_certs(void)
{
    return g_certs;
}

const char *cu_out(void)
{
    return g_out;
}

void cu_fini(void)
{
    if (g_dir[0] && !getenv("CU_KEEP"))
        hx_rmtree(g_dir);
}

int cu_ctl(const char *sock, const char *const *args, char *out, size_t outlen,
           double limit_s)
{
    static int seq;
    char path[256];
    snprintf(path, sizeof(path), "%s/ctl-%d.out", g_dir, seq++);
    const char *argv[32];
    int n = 0;
    argv[n++] = getenv("NEXARCTL");
    argv[n++] = "-s";
    argv[n++] = sock;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    /* stdout only: stderr (the warnings) goes to a file of its own. */
    char errpath[300];
    snprintf(errpath, sizeof(errpath), "%s.err", path);
    char cmd[2048];
    size_t off = 0;
    for (int i = 0; argv[i]; i++)
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, "'%s' ", argv[i]);
    snprintf(cmd + off, sizeof(cmd) - off, ">'%s' 2>'%s'", path, errpath);
    const char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    pid_t p = hx_spawn(sh, NULL, NULL);
    int ws = 0;
    if (p < 0)
        return -1;
    if (hx_wait_pid(p, limit_s, &ws)) {
        kill(p, SIGKILL);
        waitpid(p, &ws, 0);
        return -1;
    }
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(out, 1, outlen - 1, f) : 0;
    out[got] = '\0';
    if (f)
        fclose(f);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int cu_node_start(struct cu_node *n, const char *cert, const char *ca,
                  const char *const *extra)
{
    char capath[256], certpath[256], keypath[256];
    snprintf(capath, sizeof(capath), "%s/%s.pem", g_certs, ca);
    snprintf(certpath, sizeof(certpath), "%s/%s.pem", g_certs, cert);
    snprintf(keypath, sizeof(keypath), "%s/%s.key", g_certs, cert);
    const char *args[40] = {"--listen", "127.0.0.1:0", "--tls-ca", capath, "--tls-cert",
                            certpath, "--tls-key", keypath};
    int k = 8;
    for (int i = 0; extra && extra[i] && k < 39; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    memset(n, 0, sizeof(*n));
    if (hx_daemon_start(&n->d, args) < 0)
        return -1;
    char out[4096];
    const char *q[] = {"--json", "peers", NULL};
    int rc = cu_ctl(n->d.sock, q, out, sizeof(out), 10);
    const char *l = strstr(out, "\"listen\":\"");
    if (rc != 0 || !l) {
        tl_log("FAIL: nexarctl peers on %s: exit %d, %s", n->d.sock, rc, out);
        return -1;
    }
    l += strlen("\"listen\":\"");
    size_t len = strcspn(l, "\"");
    if (len >= sizeof(n->addr))
        return -1;
    memcpy(n->addr, l, len);
    n->addr[len] = '\0';
    return 0;
}

pid_t cu_rank(const char *sock, const char *coord, const char *job, int rank, int world,
              const char *mode, int timeout_s)
{
    char log[300];
    snprintf(log, sizeof(log), "%s/rank%d-%s.log", g_dir, rank, mode);
    const char *argv[] = {getenv("CLUSTER_RANK"), mode, NULL};
    return cu_rank_exec(sock, coord, job, rank, world, timeout_s, argv, NULL, log);
}

pid_t cu_rank_exec(const char *sock, const char *coord, const char *job, int rank, int world,
                   int timeout_s, const char *const *argv, const char *const *env_extra,
                   const char *log)
{
    char e_rank[32], e_world[32], e_job[300], e_sock[300], e_coord[128], e_out[300], e_to[32];
    snprintf(e_rank, sizeof(e_rank), "NEXAR_RANK=%d", rank);
    snprintf(e_world, sizeof(e_world), "NEXAR_WORLD_SIZE=%d", world);
    snprintf(e_job, sizeof(e_job), "NEXAR_JOB=%s", job);
    snprintf(e_sock, sizeof(e_sock), "NEXAR_SOCKET=%s", sock);
    snprintf(e_out, sizeof(e_out), "HX_OUT=%s", g_out);
    const char *env[40] = {e_rank, e_world, e_job, e_sock, e_out};
    int n = 5;
    if (coord) {
        snprintf(e_coord, sizeof(e_coord), "NEXAR_COORD=%s", coord);
        env[n++] = e_coord;
    }
    if (timeout_s) {
        snprintf(e_to, sizeof(e_to), "NEXAR_TIMEOUT=%d", timeout_s);
        env[n++] = e_to;
    }
    for (int i = 0; env_extra && env_extra[i] && n < 39; i++)
        env[n++] = env_extra[i];
    env[n] = NULL;
    return hx_spawn(argv, env, log);
}

int cu_read(const char *name, int rank, char *buf, size_t len)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/%s%d", g_out, name, rank);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    size_t got = fread(buf, 1, len - 1, f);
    buf[got] = '\0';
    fclose(f);
    return 0;
}

int cu_wait_file(const char *name, int rank, double limit_s)
{
    return cu_wait_file_of(name, rank, 0, limit_s);
}

int cu_wait_file_of(const char *name, int rank, pid_t pid, double limit_s)
{
    char p[300];
    snprintf(p, sizeof(p), "%s/%s%d", g_out, name, rank);
    double end = tl_now() + limit_s;
    while (tl_now() < end) {
        if (access(p, F_OK) == 0)
            return 0;
        siginfo_t si = {0};
        /* exited without writing it: looked at, not reaped (cu_wait_exit does that) */
        if (pid > 0 && waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == pid)
            return access(p, F_OK) == 0 ? 0 : -1;
        usleep(10000);
    }
    return -1;
}

int cu_wait_exit(pid_t pid, double limit_s)
{
    int ws;
    if (hx_wait_pid(pid, limit_s, &ws)) {
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
        return -1;
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int cu_count(const char *hay, const char *needle)
{
    int n = 0;
    size_t l = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)); p += l)
        n++;
    return n;
}
