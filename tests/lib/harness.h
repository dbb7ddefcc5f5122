/*
 * harness.h - real daemons on temporary paths and real rank processes.
 *
 * A test program starts a private nexard (the binary named by $NEXARD) with its
 * socket and runtime directory in a fresh mkdtemp() directory, waits until the
 * socket answers a HELLO, forks rank processes with the NEXAR_* environment of a
 * job, and collects their exit statuses under a hard limit: nothing may hang, so
 * after the limit every process still running is killed and the test fails.
 * hx_daemon_stop() sends SIGTERM and requires exit status 0 (a clean shutdown is
 * part of the contract).  Every child dies with the test (PR_SET_PDEATHSIG).
 *
 * A rank function runs in the forked child and returns its exit status (0 = pass).
 * It calls nexar_init() itself.
 */
#ifndef TL_HARNESS_H
#define TL_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#include "check.h"
#include "refnum.h"

#define HX_MAX_RANKS 16
#define HX_SKIP 77 /* meson: the test was skipped */

struct hx_daemon {
    pid_t pid;
    char dir[128];    /* the mkdtemp() directory, removed by stop */
    char sock[160];   /* dir/nexard.sock */
    char rundir[160]; /* dir/run */
    char log[160];    /* dir/nexard.log: the daemon's stdout and stderr */
    int reaped;
    int wstatus;
};

/* $NEXARD, or NULL (tests then exit HX_SKIP). */
const char *hx_nexard_path(void);

/* Exits the process with HX_SKIP when $NEXARD is not set or not executable. */
void hx_require_nexard(void);

/*
 * Starts nexard --foreground --socket ... --runtime-dir ... --log-level L plus
 * extra args (NULL-terminated, may be NULL), with env_extra ("K=V", NULL-terminated,
 * may be NULL) added to its environment.  Waits until it answers HELLO (20 s).
 * Returns 0, or -1 after printing why and the log.
 */
int hx_daemon_start(struct hx_daemon *d, const char *const *args);
int hx_daemon_start_env(struct hx_daemon *d, const char *const *args,
                        const char *const *env_extra);

/* Only creates the directory and paths (for tests that spawn nexard themselves). */
int hx_daemon_paths(struct hx_daemon *d);

/* SIGTERM; requires exit status 0 within 20 s (else SIGKILL and failure).  Removes
 * the directory.  Returns 0 or -1 (with the log printed). */
int hx_daemon_stop(struct hx_daemon *d);

/* SIGKILL and reap (cleanup paths, daemon-death tests).  Keeps the directory. */
void hx_daemon_kill(struct hx_daemon *d);

/* 1 when the process is still running (not reaped). */
int hx_daemon_running(struct hx_daemon *d);

/* Prints the last `lines` lines of the daemon's log to stderr. */
void hx_daemon_log_tail(const struct hx_daemon *d, int lines);

/* Removes a directory tree (best effort). */
void hx_rmtree(const char *dir);

/* ---- processes -------------------------------------------------------------------- */

/* fork + exec argv with env_extra added and stdout+stderr to outpath (NULL:
 * inherited).  The child dies with this process.  Returns the pid or -1. */
pid_t hx_spawn(const char *const *argv, const char *const *env_extra, const char *outpath);

/* Waits for pid up to limit_s; returns 0 with *wstatus, or -1 on timeout (the
 * process is left running). */
int hx_wait_pid(pid_t pid, double limit_s, int *wstatus);

/* Waits up to limit_s until every one of the n flags (in hx_shared memory, set by the
 * ranks) is nonzero.  0, or -1 on timeout. */
int hx_wait_flags(const volatile int *flags, int n, double limit_s);

/* "exit 3", "signal 9 (Killed)". */
const char *hx_describe_status(int wstatus, char *buf, size_t len);

/* Memory shared by the test and every rank it forks later (MAP_SHARED). */
void *hx_shared(size_t bytes);

/* ---- jobs --------------------------------------------------------------------------- */

struct hx_rank {
    int rank, size;
    const char *job;
    const char *sock;
    void *arg;
};

typedef int (*hx_rank_fn)(struct hx_rank *r);

struct hx_job_opts {
    const char *sock;       /* NEXAR_SOCKET */
    int size;               /* NEXAR_WORLD_SIZE */
    int nexar_timeout_s;    /* NEXAR_TIMEOUT; 0 = 60, < 0 = unset */
    hx_rank_fn fn;
    void *arg;
    const char *job;        /* NEXAR_JOB; NULL = a unique name */
    int no_nexar_env;       /* set no NEXAR_* rank variables (env-fallback tests) */
    const char *const *env_extra; /* "K=V", with "{rank}" replaced by the rank */
};

struct hx_job {
    char name[64];
    int size;
    pid_t pid[HX_MAX_RANKS];
    int wstatus[HX_MAX_RANKS];
    int reaped[HX_MAX_RANKS];
    double t_start;
};

/* Forks the ranks.  Returns 0 or -1. */
int hx_job_start(struct hx_job *j, const struct hx_job_opts *o);

/*
 * Collects every rank within limit_s of the start.  After the first rank that
 * exits with a non-zero status the others get grace_s more (their peers' failure
 * must reach them).  Whatever still runs then is SIGKILLed and reported.
 * Returns 0 when every rank was collected without killing, -1 otherwise.
 */
int hx_job_wait(struct hx_job *j, double limit_s, double grace_s);

/* 0 when every rank exited 0; prints each one that did not. */
int hx_job_check_ok(const struct hx_job *j);

/* start + wait(limit_s, 10 s grace) + check_ok. */
int hx_run(const struct hx_job_opts *o, double limit_s);

/* A job of 2 ranks on sock running nops all_reduces of one i64 each, every result checked:
 * its wall time in seconds, or -1 when it failed.  The yardstick of the tests that run a
 * healthy job beside something hostile. */
double hx_timed_allreduces(const char *sock, int nops);

/* A short unique job name ("itest-<pid>-<n>-<tag>"). */
void hx_job_name(char *out, size_t len, const char *tag);

/* In a rank: nexar_init() with a message on failure.  Returns its status. */
nexar_status_t hx_init(nexar_comm_t **world);

/* An env flag (HX_LONG=1 etc.) is set to something other than "" or "0". */
int hx_env_flag(const char *name);

#endif /* TL_HARNESS_H */
