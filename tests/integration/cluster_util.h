/*
 * cluster_util.h - helpers of the multi-node integration tests (test_cluster_*.c):
 * daemons with a QUIC endpoint and real certificates on loopback, nexarctl runs, rank
 * processes of tests/integration/cluster_rank.c, result files.
 *
 * Environment (set by meson): NEXARD, NEXARCTL, NEXAR_RUN, CLUSTER_RANK (the rank
 * program), CERTS_SH (tests/lib/gen-certs.sh), NEXAR_HAVE_QUIC.  cu_init() exits 77
 * (skipped) with a message when QUIC is not built or a tool is missing.
 */
#ifndef CU_CLUSTER_UTIL_H
#define CU_CLUSTER_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

struct cu_node {
    struct hx_daemon d;
    char addr[64]; /* host:port it listens at, as it reports it */
};

/* Checks the environment (skips the test without QUIC), makes a scratch directory with
 * certificates (gen-certs.sh: ca, node0..3, foreign-ca/foreign) and an output
 * directory for the ranks.  Returns the scratch directory. */
const char *cu_init(const char *tag);
/* The certificate directory and the rank output directory (HX_OUT). */
const char *cu_certs(void);
const char *cu_out(void);
/* Removes the scratch directory. */
void cu_fini(void);

/*
 * Starts a daemon listening on 127.0.0.1 at a port the kernel picks, with
 * <certs>/<cert>.pem/.key and <certs>/<ca>.pem, plus extra args (NULL-terminated, may be
 * NULL), and learns its address.  0 or -1 (logged).
 */
int cu_node_start(struct cu_node *n, const char *cert, const char *ca,
                  const char *const *extra);

/* Runs nexarctl -s sock args... (NULL-terminated) within limit_s; its stdout in out.
 * Returns its exit status, or -1 when it did not end. */
int cu_ctl(const char *sock, const char *const *args, char *out, size_t outlen,
           double limit_s);

/* Starts one rank of cluster_rank.c in mode: rank of world of job, on the daemon at
 * sock, coordinator coord (NULL: none), NEXAR_TIMEOUT timeout_s (0: unset). */
pid_t cu_rank(const char *sock, const char *coord, const char *job, int rank, int world,
              const char *mode, int timeout_s);

/* Like cu_rank for any program: argv (argv[0] the program), extra environment env_extra
 * ("K=V", NULL-terminated, may be NULL), stdout and stderr to log (NULL: this
 * process's, so that the ranks' lines land in the test log). */
pid_t cu_rank_exec(const char *sock, const char *coord, const char *job, int rank, int world,
                   int timeout_s, const char *const *argv, const char *const *env_extra,
                   const char *log);

/* Reads <out>/<name><rank> into buf; 0, or -1 while it does not exist. */
int cu_read(const char *name, int rank, char *buf, size_t len);
/* Waits up to limit_s for <out>/<name><rank>; 0 or -1. */
int cu_wait_file(const char *name, int rank, double limit_s);
/* The same, but gives up at once when process pid (the rank's) has exited without it. */
int cu_wait_file_of(const char *name, int rank, pid_t pid, double limit_s);

/* Waits for pid up to limit_s (killing it then); returns its exit code, 128+signal, or
 * -1 after a kill. */
int cu_wait_exit(pid_t pid, double limit_s);

/* Counts occurrences of needle in hay. */
int cu_count(const char *hay, const char *needle);

#endif
