/* main.c - nexard: modules start in dependency order and stop in reverse. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo.h"
#include "client.h"
#include "cluster.h"
#include "comm.h"
#include "config.h"
#include "ctl_info.h"
#include "ctlsrv.h"
#include "devop.h"
#include "fdlimit.h"
#include "context.h"
#include "h3_routes.h"
#include "job.h"
#include "log.h"
#include "loopwatch.h"
#include "notify.h"
#include "matcher.h"
#include "grow.h"
#include "shrink.h"
#include "workers.h"
#if NX_HAVE_CUDA
#include "cuda_backend.h"
#endif

static uv_signal_t sig_term, sig_int, sig_hup;
static uv_timer_t tick;

/* Deadlines (formation, op progress, p2p) are checked on one coarse timer: a
 * timeout is seconds long, and one timer costs nothing per op. */
static void on_tick(uv_timer_t *t)
{
    double now = nx_now();
    nx_ctlsrv_tick(now);
    nx_jobs_tick(now);
    nx_cluster_tick(now);
    nx_match_tick(now);
    nx_shrink_tick(now);
    nx_grow_tick(now);
    nx_clients_flush();
}

/* Shutdown, once no device work uses the ranks' buffers. */
static void close_ranks(void)
{
    nx_clients_flush(); /* the last completions reach their ranks before the close */
    nx_ctlsrv_fini();
    nx_clients_fini();
}

/* SIGHUP (systemctl reload): new TLS files without a restart, and without failing a job:
 * the connections to other daemons are handed over to ones made with them. */
static void on_hup(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    if (nxd.stopping)
        return;
    char msg[512];
    nx_notify("RELOADING=1");
    NX_INFO("main", "SIGHUP: reloading the TLS credentials");
    nx_cluster_reload_tls(msg, sizeof(msg));
    nx_notify("READY=1");
}

static void on_signal(uv_signal_t *s, int signum)
{
    if (nxd.stopping)
        return;
    nxd.stopping = 1;
    NX_INFO("main", "%s: shutting down", strsignal(signum));
    nx_notify("STOPPING=1");
    uv_timer_stop(&tick);
    uv_signal_stop(&sig_term);
    uv_signal_stop(&sig_int);
    uv_signal_stop(&sig_hup);
    nx_cluster_fini();
#if NX_HAVE_CUDA
    /* The ranks keep their connections until no device work uses their buffers: a rank
     * told earlier that nexard went away could reuse a buffer under a copy in flight. */
    nx_ctlsrv_stop_listening();
    nx_cuda_stop(close_ranks);
#else
    close_ranks();
#endif
    uv_close((uv_handle_t *)&tick, NULL);
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&sig_int, NULL);
    uv_close((uv_handle_t *)&sig_hup, NULL);
}

/* Without --foreground: the write end of the pipe the starter waits on; -1 otherwise. */
static int ready_fd = -1;

/* Points descriptors first..last at /dev/null. */
static void to_dev_null(int first, int last)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    for (int i = first; i <= last; i++)
        dup2(fd, i);
    if (fd > last)
        close(fd);
}

/*
 * Without --foreground: the classic double-fork-free daemon (setsid + /dev/null), whose
 * starter waits until it is ready: it exits 0 then, or 1 when the daemon could not start
 * (the daemon told it why on the starter's stderr, which it keeps until it is ready).
 */
static int background(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0) {
        close(p[1]);
        char c;
        ssize_t n;
        do
            n = read(p[0], &c, 1);
        while (n < 0 && errno == EINTR);
        if (n == 1)
            _exit(0);
        int ws = 0;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
        if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0)
            _exit(WEXITSTATUS(ws));
        fprintf(stderr, "nexard: stopped before it was ready\n");
        _exit(1);
    }
    close(p[0]);
    ready_fd = p[1];
    if (setsid() < 0)
        return -errno;
    to_dev_null(0, 0);
    return 0;
}

/* Ready: the starter may go, and the terminal is let go of. */
static void detach_ready(void)
{
    if (ready_fd < 0)
        return;
    if (write(ready_fd, "R", 1) < 0)
        NX_WARN("main", "cannot tell the starter we are ready: %s", strerror(errno));
    close(ready_fd);
    ready_fd = -1;
    nx_log_also_stderr(0);
    to_dev_null(1, 2);
}

int main(int argc, char **argv)
{
    char err[512];
    int rv;

    signal(SIGPIPE, SIG_IGN);
    /* Every op allocates and frees message and part buffers of tens of KiB to MiB.  With
     * glibc's defaults the heap top is trimmed and grown again (brk, and page faults on
     * fresh pages) every op: a 512 KiB all_reduce across 2 nodes took twice as long.  Keep
     * up to 256 MiB of freed heap, and use the heap below 32 MiB. */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
    nx_config_defaults(&nxd.cfg);
    rv = nx_config_parse_args(&nxd.cfg, argc, argv, err, sizeof(err));
    if (rv != 0) {
        if (rv < 0)
            fprintf(stderr, "nexard: %s\n", err);
        nx_config_free(&nxd.cfg);
        return rv > 0 ? 0 : 2;
    }
    uint8_t pref[NX_K_MAX + 1];
    if (nxd.cfg.algo && nx_algo_pref_parse(nxd.cfg.algo, pref, err, sizeof(err)) < 0) {
        fprintf(stderr, "nexard: algo = \"%s\": %s\n", nxd.cfg.algo, err);
        nx_config_free(&nxd.cfg);
        return 2;
    }
    if (!nxd.cfg.foreground && background() < 0) {
        fprintf(stderr, "nexard: cannot go to the background: %s\n", strerror(errno));
        return 1;
    }
    nx_log_init(nxd.cfg.log_level, !nxd.cfg.foreground);
    nx_log_also_stderr(!nxd.cfg.foreground);
    nx_fdlimit_raise();
    nxd.loop = uv_default_loop();
    nxd.start_time = nx_now();
    nx_loopwatch_start(nxd.loop);

    nx_workers_init(nxd.cfg.workers);
#if NX_HAVE_CUDA
    rv = nx_cuda_init(nx_device_host(), &nx_device, nx_device_note, sizeof(nx_device_note));
    if (rv < 0)
        goto out_ctl;
#endif
    rv = nx_ctlsrv_init(nx_ctl_info_reply);
    if (rv < 0)
        goto out_ctl;
    rv = nx_cluster_init(nx_h3_routes(&nxd.cfg));
    if (rv < 0)
        goto out_ctl;
    uv_timer_init(nxd.loop, &tick);
    uv_timer_start(&tick, on_tick, 100, 100);
    uv_signal_init(nxd.loop, &sig_term);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_init(nxd.loop, &sig_int);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    uv_signal_init(nxd.loop, &sig_hup);
    uv_signal_start(&sig_hup, on_hup, SIGHUP);

    NX_INFO("main", "nexard %s ready (pid %d, slots %u x %llu B, heap %llu B)", NEXAR_VERSION,
            (int)getpid(), nxd.cfg.slots, (unsigned long long)nxd.cfg.slot_bytes,
            (unsigned long long)nxd.cfg.heap_bytes);
    char ready[64];
    snprintf(ready, sizeof(ready), "READY=1\nMAINPID=%d", (int)getpid());
    nx_notify(ready);
    detach_ready();

    uv_run(nxd.loop, UV_RUN_DEFAULT);
    rv = 0;

out_ctl:
    if (rv < 0)
        nx_ctlsrv_fini();
    nx_comms_fini();
    nx_jobs_fini();
#if NX_HAVE_CUDA
    if (rv < 0)
        nx_cuda_stop(NULL);
    nx_device = NULL;
    nx_cuda_fini();
#endif
    nx_workers_fini();
    uv_run(nxd.loop, UV_RUN_NOWAIT);
    uv_loop_close(nxd.loop);
    NX_INFO("main", "stopped");
    nx_log_fini();
    nx_config_free(&nxd.cfg);
    /* A failure before ready: the starter, still waiting, exits 1 with our stderr. */
    return rv < 0 ? 1 : 0;
}
