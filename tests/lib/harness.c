/*
 * harness.c - private daemons and forked ranks for the integration tests
 * (see harness.h).
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"
#include "rawclient.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

int hx_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

const char *hx_nexard_path(void)
{
    const char *p = getenv("NEXARD");
    return p && *p ? p : NULL;
}

void hx_require_nexard(void)
{
    const char *p = hx_nexard_path();
    if (!p || access(p, X_OK) != 0) {
        tl_log("SKIP: $NEXARD (%s) is not an executable nexard", p ? p : "unset");
        exit(HX_SKIP);
    }
    /* The sandbox suite: every nexard under the unit's restrictions (tests/sandbox). */
    const char *sb = getenv("NX_SANDBOX_EXEC");
    static int checked;
    if (sb && *sb && !checked) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "%s --check >/dev/null 2>&1", sb);
        int rc = system(cmd);
        if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
            tl_log("SKIP: %s cannot build the unit's sandbox here", sb);
            exit(HX_SKIP);
        }
        checked = 1;
    }
}

const char *hx_describe_status(int ws, char *buf, size_t len)
{
    if (WIFEXITED(ws))
        snprintf(buf, len, "exit %d", WEXITSTATUS(ws));
    else if (WIFSIGNALED(ws))
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    else
        snprintf(buf, len, "status 0x%x", ws);
    return buf;
}

void *hx_shared(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        tl_log("FAIL: mmap(%zu) shared: %s", bytes, strerror(errno));
        exit(1);
    }
    return p;
}

/* ---- processes -------------------------------------------------------------------- */

static void child_common(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    signal(SIGPIPE, SIG_DFL);
}

pid_t hx_spawn(const char *const *argv, const char *const *env_extra, const char *outpath)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        tl_log("FAIL: fork: %s", strerror(errno));
        return -1;
    }
    if (pid > 0)
        return pid;
    child_common(parent);
    for (size_t i = 0; env_extra && env_extra[i]; i++)
        putenv((char *)env_extra[i]);
    if (outpath) {
        int fd = open(outpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
    }
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int hx_wait_pid(pid_t pid, double limit_s, int *wstatus)
{
    double end = tl_now() + limit_s;
    for (;;) {
        pid_t r = waitpid(pid, wstatus, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (tl_now() >= end)
            return -1;
        sleep_ms(5);
    }
}

int hx_wait_flags(const volatile int *flags, int n, double limit_s)
{
    double end = tl_now() + limit_s;
    for (;;) {
        int k = 0;
        for (int i = 0; i < n; i++)
            k += flags[i] != 0;
        if (k == n)
            return 0;
        if (tl_now() > end)
            return -1;
        sleep_ms(2);
    }
}

/* ---- the daemon ------------------------------------------------------------------- */

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

void hx_rmtree(const char *dir)
{
    if (dir && *dir && !hx_env_flag("HX_KEEP"))
        nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int hx_daemon_paths(struct hx_daemon *d)
{
    memset(d, 0, sizeof(*d));
    d->pid = -1;
    const char *tmp = getenv("TMPDIR");
    /* sun_path is short: keep the directory short too */
    snprintf(d->dir, sizeof(d->dir), "%s/nxit-XXXXXX",
             tmp && *tmp && strlen(tmp) < 60 ? tmp : "/tmp");
    if (!mkdtemp(d->dir)) {
        tl_log("FAIL: mkdtemp(%s): %s", d->dir, strerror(errno));
        return -1;
    }
    snprintf(d->sock, sizeof(d->sock), "%s/nexard.sock", d->dir);
    snprintf(d->rundir, sizeof(d->rundir), "%s/run", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/nexard.log", d->dir);
    return 0;
}

void hx_daemon_log_tail(const struct hx_daemon *d, int lines)
{
    FILE *f = fopen(d->log, "r");
    if (!f) {
        tl_log("(no daemon log at %s)", d->log);
        return;
    }
    char **ring = calloc((size_t)lines, sizeof(char *));
    char buf[1024];
    long n = 0;
    while (fgets(buf, sizeof(buf), f)) {
        free(ring[n % lines]);
        ring[n % lines] = strdup(buf);
        n++;
    }
    fclose(f);
    tl_log("---- last %d lines of %s ----", lines, d->log);
    for (long i = n > lines ? n - lines : 0; i < n; i++)
        fprintf(stderr, "    | %s", ring[i % lines]);
    tl_log("---- end of daemon log ----");
    for (int i = 0; i < lines; i++)
        free(ring[i]);
    free(ring);
}

int hx_daemon_running(struct hx_daemon *d)
{
    if (d->pid <= 0 || d->reaped)
        return 0;
    if (waitpid(d->pid, &d->wstatus, WNOHANG) == d->pid) {
        d->reaped = 1;
        return 0;
    }
    return 1;
}

/* A daemon of the sandbox suite must really be in the sandbox: a seccomp filter, no new
 * privileges, no capability (else the suite would pass without proving anything). */
static int check_sandboxed(struct hx_daemon *d)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
    char *st = tl_read_file(path);
    int ok = st && strstr(st, "\nSeccomp:\t2\n") && strstr(st, "\nNoNewPrivs:\t1\n") &&
             strstr(st, "\nCapEff:\t0000000000000000\n");
    free(st);
    if (ok)
        return 0;
    tl_log("FAIL: nexard (pid %d) is not in the unit's sandbox (%s)", (int)d->pid, path);
    hx_daemon_kill(d);
    return -1;
}

int hx_daemon_start_env(struct hx_daemon *d, const char *const *args,
                        const char *const *env_extra)
{
    hx_require_nexard();
    if (hx_daemon_paths(d))
        return -1;
    const char *lvl = getenv("HX_LOG_LEVEL");
    const char *argv[72];
    int n = 0;
    const char *sb = getenv("NX_SANDBOX_EXEC");
    if (sb && *sb) {
        /* Read-only everywhere but its own directory, as ProtectSystem=strict leaves it
         * only RuntimeDirectory=. */
        argv[n++] = sb;
        argv[n++] = "--syscalls";
        argv[n++] = getenv("NX_SANDBOX_SYSCALLS");
        argv[n++] = "--rw";
        argv[n++] = d->dir;
        argv[n++] = "--";
    }
    argv[n++] = hx_nexard_path();
    argv[n++] = "--foreground";
    argv[n++] = "--socket";
    argv[n++] = d->sock;
    argv[n++] = "--runtime-dir";
    argv[n++] = d->rundir;
    argv[n++] = "--log-level";
    argv[n++] = lvl && *lvl ? lvl : "info";
    for (int i = 0; args && args[i] && n < 70; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    d->pid = hx_spawn(argv, env_extra, d->log);
    if (d->pid < 0)
        return -1;
    double end = tl_now() + 20.0;
    sb = getenv("NX_SANDBOX_EXEC");
    while (tl_now() < end) {
        if (!hx_daemon_running(d)) {
            char s[64];
            tl_log("FAIL: nexard exited during start-up (%s)",
                   hx_describe_status(d->wstatus, s, sizeof(s)));
            hx_daemon_log_tail(d, 40);
            return -1;
        }
        if (rc_ping(d->sock, 2000) == 0)
            return sb && *sb ? check_sandboxed(d) : 0;
        sleep_ms(10);
    }
    tl_log("FAIL: nexard did not answer HELLO on %s within 20 s", d->sock);
    hx_daemon_log_tail(d, 40);
    hx_daemon_kill(d);
    return -1;
}

int hx_daemon_start(struct hx_daemon *d, const char *const *args)
{
    return hx_daemon_start_env(d, args, NULL);
}

void hx_daemon_kill(struct hx_daemon *d)
{
    if (d->pid > 0 && !d->reaped) {
        kill(d->pid, SIGKILL);
        if (waitpid(d->pid, &d->wstatus, 0) == d->pid)
            d->reaped = 1;
    }
}

int hx_daemon_stop(struct hx_daemon *d)
{
    char s[64];
    int rv = 0;
    if (d->pid <= 0)
        return -1;
    if (d->reaped) {
        tl_log("FAIL: nexard was no longer running at stop (%s)",
               hx_describe_status(d->wstatus, s, sizeof(s)));
        rv = -1;
    } else {
        kill(d->pid, SIGTERM);
        if (hx_wait_pid(d->pid, 20.0, &d->wstatus) != 0) {
            tl_log("FAIL: nexard did not exit within 20 s of SIGTERM; killing it");
            hx_daemon_kill(d);
            rv = -1;
        } else {
            d->reaped = 1;
            if (!WIFEXITED(d->wstatus) || WEXITSTATUS(d->wstatus) != 0) {
                tl_log("FAIL: nexard after SIGTERM: %s, expected exit 0",
                       hx_describe_status(d->wstatus, s, sizeof(s)));
                rv = -1;
            }
        }
    }
    /* sanitizer reports that did not change the exit status */
    FILE *f = fopen(d->log, "r");
    char line[1024];
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "runtime error:") || strstr(line, "AddressSanitizer") ||
            strstr(line, "LeakSanitizer")) {
            tl_log("FAIL: nexard's log has a sanitizer report: %s", line);
            rv = -1;
            break;
        }
    if (f)
        fclose(f);
    if (rv)
        hx_daemon_log_tail(d, 60);
    else
        hx_rmtree(d->dir);
    return rv;
}

/* ---- jobs --------------------------------------------------------------------------- */

void hx_job_name(char *out, size_t len, const char *tag)
{
    static int counter;
    snprintf(out, len, "itest-%d-%d-%s", (int)getpid(), ++counter, tag ? tag : "job");
}

static const char *const scrub[] = {
    "NEXAR_RANK", "NEXAR_WORLD_SIZE", "NEXAR_LOCAL_RANK", "NEXAR_JOB", "NEXAR_COORD",
    "NEXAR_SOCKET", "NEXAR_TIMEOUT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
    "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID",
    "SLURM_STEP_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", NULL};

static void setenv_int(const char *k, int v)
{
    char b[32];
    snprintf(b, sizeof(b), "%d", v);
    setenv(k, b, 1);
}

static void rank_child(struct hx_job *j, const struct hx_job_opts *o, int rank)
{
    for (int i = 0; scrub[i]; i++)
        unsetenv(scrub[i]);
    if (!o->no_nexar_env) {
        setenv_int("NEXAR_RANK", rank);
        setenv_int("NEXAR_WORLD_SIZE", o->size);
        setenv_int("NEXAR_LOCAL_RANK", rank);
        setenv("NEXAR_JOB", j->name, 1);
        if (o->nexar_timeout_s >= 0)
            setenv_int("NEXAR_TIMEOUT", o->nexar_timeout_s > 0 ? o->nexar_timeout_s : 60);
        else
            unsetenv("NEXAR_TIMEOUT");
    }
    if (o->sock)
        setenv("NEXAR_SOCKET", o->sock, 1);
    for (size_t i = 0; o->env_extra && o->env_extra[i]; i++) {
        char kv[512];
        const char *src = o->env_extra[i];
        const char *at = strstr(src, "{rank}");
        if (at)
            snprintf(kv, sizeof(kv), "%.*s%d%s", (int)(at - src), src, rank, at + 6);
        else
            snprintf(kv, sizeof(kv), "%s", src);
        char *eq = strchr(kv, '=');
        if (eq) {
            *eq = 0;
            setenv(kv, eq + 1, 1);
        }
    }
    char tag[96];
    snprintf(tag, sizeof(tag), "%s r%d/%d", j->name, rank, o->size);
    tl_set_log_tag(tag);
    struct hx_rank r = {.rank = rank, .size = o->size, .job = j->name, .sock = o->sock,
                        .arg = o->arg};
    int rc = o->fn(&r);
    fflush(NULL);
    exit(rc & 0xff);
}

int hx_job_start(struct hx_job *j, const struct hx_job_opts *o)
{
    memset(j, 0, sizeof(*j));
    if (o->size < 1 || o->size > HX_MAX_RANKS)
        return -1;
    j->size = o->size;
    if (o->job)
        snprintf(j->name, sizeof(j->name), "%s", o->job);
    else
        hx_job_name(j->name, sizeof(j->name), "j");
    j->t_start = tl_now();
    pid_t parent = getpid();
    for (int r = 0; r < o->size; r++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            tl_log("FAIL: fork: %s", strerror(errno));
            for (int k = 0; k < r; k++)
                kill(j->pid[k], SIGKILL);
            for (int k = 0; k < r; k++)
                waitpid(j->pid[k], &j->wstatus[k], 0);
            return -1;
        }
        if (pid == 0) {
            child_common(parent);
            rank_child(j, o, r);
        }
        j->pid[r] = pid;
    }
    return 0;
}

int hx_job_wait(struct hx_job *j, double limit_s, double grace_s)
{
    double end = j->t_start + limit_s;
    int left = 0;
    for (int r = 0; r < j->size; r++)
        left += !j->reaped[r];
    while (left > 0) {
        for (int r = 0; r < j->size; r++) {
            if (j->reaped[r])
                continue;
            if (waitpid(j->pid[r], &j->wstatus[r], WNOHANG) == j->pid[r]) {
                j->reaped[r] = 1;
                left--;
                int bad = !WIFEXITED(j->wstatus[r]) || WEXITSTATUS(j->wstatus[r]) != 0;
                if (bad && tl_now() + grace_s < end)
                    end = tl_now() + grace_s;
            }
        }
        if (left == 0)
            break;
        if (tl_now() >= end) {
            for (int r = 0; r < j->size; r++) {
                if (j->reaped[r])
                    continue;
                tl_log("FAIL: job %s rank %d (pid %d) still running %.1f s after the "
                       "start; killing it", j->name, r, (int)j->pid[r], tl_now() - j->t_start);
                kill(j->pid[r], SIGKILL);
                waitpid(j->pid[r], &j->wstatus[r], 0);
                j->reaped[r] = 1;
            }
            return -1;
        }
        sleep_ms(5);
    }
    return 0;
}

int hx_job_check_ok(const struct hx_job *j)
{
    int rv = 0;
    for (int r = 0; r < j->size; r++) {
        if (WIFEXITED(j->wstatus[r]) && WEXITSTATUS(j->wstatus[r]) == 0)
            continue;
        char s[64];
        tl_log("FAIL: job %s rank %d: %s", j->name, r,
               hx_describe_status(j->wstatus[r], s, sizeof(s)));
        rv = -1;
    }
    return rv;
}

int hx_run(const struct hx_job_opts *o, double limit_s)
{
    struct hx_job j;
    if (hx_job_start(&j, o))
        return -1;
    int w = hx_job_wait(&j, limit_s, 10.0);
    int c = hx_job_check_ok(&j);
    return w || c ? -1 : 0;
}

nexar_status_t hx_init(nexar_comm_t **world)
{
    nexar_status_t st = nexar_init(world);
    if (st != NEXAR_OK)
        tl_log("FAIL: nexar_init: %s (%d): %s", tl_status_name((int)st), (int)st,
               nexar_last_error());
    return st;
}

static int timed_rank(struct hx_rank *r)
{
    int nops = *(const int *)r->arg;
    nexar_comm_t *w;
    if (hx_init(&w) != NEXAR_OK)
        return 1;
    for (int k = 0; k < nops; k++) {
        int64_t v = r->rank + k;
        nexar_status_t s = nexar_all_reduce(w, &v, 1, NEXAR_I64, NEXAR_SUM);
        if (s != NEXAR_OK || v != 2 * k + 1) {
            tl_log("FAIL all_reduce %d: %s, %lld", k, nexar_strerror(s), (long long)v);
            return 1;
        }
    }
    return nexar_finalize() == NEXAR_OK ? 0 : 1;
}

double hx_timed_allreduces(const char *sock, int nops)
{
    struct hx_job_opts o = {.sock = sock, .size = 2, .fn = timed_rank, .arg = &nops,
                            .nexar_timeout_s = 60};
    double t0 = tl_now();
    if (hx_run(&o, 120))
        return -1;
    return tl_now() - t0;
}
