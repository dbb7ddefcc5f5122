/*
 * run.h - nexar-run: launch N ranks of a nexar program on this machine.
 *
 * Flow (main.c): parse the command line, find the program, make sure a nexard
 * answers (an existing one, or a private one in a temporary directory), start
 * the ranks with the NEXAR_* environment, supervise them until all have exited,
 * stop the private daemon.
 *
 * Multi-node simulation (--nodes K) gives every simulated node its own private
 * daemon with a QUIC endpoint on 127.0.0.1 and a certificate from a CA made for
 * the run (nodes.c); the ranks are spread over them in blocks and all name node
 * 0's daemon as their coordinator (NEXAR_COORD).
 *
 * Modules:
 *   opts.c       command line
 *   daemon.c     probe, find, start and stop nexard
 *   ranks.c      fork/exec the ranks with their environment
 *   supervise.c  signals, failures, the grace period, the exit status
 *   nodes.c      --nodes: certificates and the daemons' network addresses
 *   bind.c       --nodes: each node's daemon and ranks on that node's CPUs; --bind
 *                rank: each rank on its share of them
 */
#ifndef NXR_RUN_H
#define NXR_RUN_H

#include <stdbool.h>
#include <sys/types.h>

/* nexar-run's own failures; anything else it exits with is a rank's status. */
#define NXR_EXIT_NO_DAEMON 2  /* NEXAR_ERR_UNAVAILABLE: no daemon reachable or startable */
#define NXR_EXIT_USAGE 64     /* sysexits EX_USAGE */
#define NXR_EXIT_OSERR 71     /* sysexits EX_OSERR: fork, mkdtemp, signalfd failed */
#define NXR_EXIT_NOEXEC 126   /* the program is not executable (as the shell) */
#define NXR_EXIT_NOTFOUND 127 /* the program was not found (as the shell) */

enum run_bind { RUN_BIND_NODE, RUN_BIND_NONE, RUN_BIND_RANK };

struct run_opts {
    int nranks;          /* -n, default 1 */
    int nodes;           /* --nodes: simulated nodes (private daemons), default 1 */
    const char *socket;  /* --socket; NULL: $NEXAR_SOCKET, then the default */
    const char *job;     /* --job; NULL: "run-<pid>-<time>" */
    const char *join;    /* --join JOB: the ranks are joiners of that running job */
    const char *timeout; /* --timeout, passed on verbatim as NEXAR_TIMEOUT */
    double grace;        /* --grace seconds, default 5 */
    const char *daemon;  /* --daemon: the nexard binary */
    char **daemon_args;  /* --daemon-arg, in order */
    int n_daemon_args;
    enum run_bind bind;  /* --bind: with --nodes, each node's processes on its CPUs; rank:
                            also each rank on its share of them */
    bool keep_daemon;    /* --keep-daemon */
    bool quiet;          /* --quiet: no summary or notes */
    bool verbose;        /* --verbose: notes, and the daemon's log on stderr */
    char **argv;         /* the program and its arguments (NULL-terminated) */
};

/* Parses argv; prints usage errors and exits NXR_EXIT_USAGE, --help exits 0. */
void run_opts_parse(struct run_opts *o, int argc, char **argv);

/* In a forked child before exec: the signal mask and the SIGPIPE disposition
 * nexar-run was started with (main.c changes both for itself). */
void run_child_signals(void);

/* ---- daemons (daemon.c) ---------------------------------------------------- */

struct run_daemon {
    char *socket; /* what the ranks get as NEXAR_SOCKET (malloc'd) */
    char *dir;    /* the private runtime directory; NULL for a shared daemon */
    char *log;    /* DIR/nexard.log, where a private daemon's output goes */
    pid_t pid;    /* > 0 while a private daemon we started has not been reaped */
    int status;   /* its wait status once reaped */
    /* --nodes: its network (NULL on one node). */
    char *tls_ca, *tls_cert, *tls_key;
    char *addr;   /* the address it listens at, as it reports it */
    int node;     /* its index among the simulated nodes */
};

/*
 * Makes sure d has a daemon: the one answering at the configured socket, or a
 * private one started and waited for (up to 10 s).  sigfd is the signalfd of
 * main.c, so that Ctrl-C during the start stops it.  Returns 0, or the exit
 * status nexar-run should end with (having printed why).
 */
int run_daemon_attach(const struct run_opts *o, struct run_daemon *d, int sigfd);

/* --nodes: starts d's private daemon with its network (d->tls_* set) and learns its
 * address.  0, or the exit status nexar-run should end with. */
int run_daemon_start_node(const struct run_opts *o, struct run_daemon *d, int sigfd);

/* The supervisor reaped pid: returns true when it was one of the o->nodes daemons in
 * d (and records it). */
bool run_daemon_reaped(const struct run_opts *o, struct run_daemon *d, pid_t pid,
                       int status);

/* Stops a private daemon (SIGTERM, then SIGKILL after 5 s) and removes its
 * directory, or leaves both in place for --keep-daemon.  No-op for a shared one. */
void run_daemon_detach(const struct run_opts *o, struct run_daemon *d);

/* ---- simulated nodes (nodes.c) ---------------------------------------------- */

/* Makes a CA and o->nodes node certificates in a new directory (*certdir, malloc'd)
 * and points d[0..nodes) at them.  0, or the exit status after printing why. */
int run_nodes_certs(const struct run_opts *o, struct run_daemon *d, char **certdir);

/* Asks d's daemon the address it listens at (d->addr).  0 or an exit status. */
int run_nodes_address(struct run_daemon *d);

/* Removes the certificate directory (kept with --keep-daemon) and frees certdir. */
void run_nodes_cleanup(const struct run_opts *o, char *certdir);

/* ---- CPU binding of simulated nodes (bind.c) ---------------------------------- */

#include <sched.h>
/* The CPUs of node's processes into *out: their count, 0 when unbound (--bind none; one
 * node, unless --bind rank; one CPU). */
int run_bind_cpus(const struct run_opts *o, int node, cpu_set_t *out);
/* In a forked child before exec: binds local rank `local` of node's nlocal ranks (local
 * < 0: its daemon) to the node's CPUs, or with --bind rank, while the node has a CPU for
 * each, to the rank's own share of them (a warning if refused). */
void run_bind_child(const struct run_opts *o, int node, int local, int nlocal);
/* "cpu 0,1" or "unbound", for --verbose. */
void run_bind_describe(const struct run_opts *o, int node, char *buf, size_t len);

/* ---- ranks (ranks.c) -------------------------------------------------------- */

struct run_rank {
    pid_t pid;
    int rank, local_rank, node;
    bool exited;
    int status;          /* wait status, once exited */
    bool stopped_by_us;  /* nexar-run signalled it after another rank failed */
};

/* The program's path as execvp() would find it; exits 126/127 with a message
 * when there is none, so that no rank (and no daemon) is started in vain. */
void run_resolve_program(const struct run_opts *o);

/*
 * Starts every rank: NEXAR_RANK, NEXAR_WORLD_SIZE, NEXAR_LOCAL_RANK, NEXAR_JOB,
 * NEXAR_SOCKET, NEXAR_TIMEOUT (when given) and with --nodes NEXAR_COORD in the
 * environment, stdin only for rank 0.  d is indexed by node; rank i runs on node
 * i * nodes / nranks (blocks that differ by at most one rank).  Returns 0, or NXR_EXIT_OSERR after killing
 * the ranks already started.
 */
int run_ranks_start(const struct run_opts *o, const char *job, const struct run_daemon *d,
                    struct run_rank *ranks);

/* ---- supervision (supervise.c) -------------------------------------------------- */

/* Waits for every rank; forwards SIGINT/SIGTERM/SIGHUP; after the first failure
 * waits --grace seconds, then SIGTERM, then SIGKILL 2 s later.  Returns the exit
 * status of nexar-run (see supervise.c). */
int run_supervise(const struct run_opts *o, int sigfd, struct run_rank *ranks,
                  struct run_daemon *d);

/* A wait status as an exit code: the exit status, or 128 + signal. */
int run_exit_code(int status);

#endif /* NXR_RUN_H */
