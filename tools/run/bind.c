/*
 * bind.c - --bind node: the processes of one simulated node share that node's CPUs.
 *
 * Simulated nodes run on one machine, but real nodes each have their own cores, and a
 * node's daemon and ranks hand every op to each other.  Left to the scheduler, two
 * nodes' daemons may share one core while their ranks share the other: a daemon then
 * waits for the other node's daemon to be scheduled on every message (on 2 cores an
 * 8 B all_reduce across 2 nodes took twice as long).  So nexar-run gives node i its
 * share of the CPUs nexar-run may use: contiguous blocks when there are at least as many
 * CPUs as nodes, CPU i mod n when there are fewer.  Open MPI's mpirun binds its ranks
 * to cores by default for the same reason.
 *
 * --bind rank also gives each rank of a node its own share of the node's CPUs, as
 * Open MPI does with its ranks, one node included: left to the scheduler, two ranks that
 * copy at once sometimes share one CPU for hundreds of ops while the daemon's spin holds
 * the other, and the balancer, seeing two runnable tasks against one, moves neither.
 * Where ranks have every CPU between them, the daemon then always shares one with a rank:
 * on 2 CPUs that cost the broadcast more than it saved the all_gather (docs/performance.md).
 * Not the default: that, and a rank of a PyTorch job runs threads of its own, which a
 * share of one CPU would serialise.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "run.h"

/* Share i of k of from's CPUs into *out: the i-th of k contiguous blocks of them, or with
 * fewer CPUs than k, the (i mod their count)-th CPU.  Their count. */
static int share(const cpu_set_t *from, int i, int k, cpu_set_t *out)
{
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, from))
            cpus[n++] = c;
    CPU_ZERO(out);
    if (k >= n) {
        CPU_SET(cpus[i % n], out);
        return 1;
    }
    for (int j = i * n / k; j < (i + 1) * n / k; j++)
        CPU_SET(cpus[j], out);
    return CPU_COUNT(out);
}

int run_bind_cpus(const struct run_opts *o, int node, cpu_set_t *out)
{
    cpu_set_t all;
    CPU_ZERO(out);
    if (o->bind == RUN_BIND_NONE || (o->nodes < 2 && o->bind != RUN_BIND_RANK) || node < 0 ||
        sched_getaffinity(0, sizeof(all), &all) != 0)
        return 0;
    if (CPU_COUNT(&all) < 2)
        return 0; /* one CPU: nothing to share out */
    return share(&all, node, o->nodes, out);
}

/* Local rank `local` of the nlocal ranks of node (local < 0: its daemon): with --bind
 * rank and no more ranks than the node's CPUs, the rank's share of them; else the node's.
 * Their count, 0 when unbound. */
static int rank_cpus(const struct run_opts *o, int node, int local, int nlocal, cpu_set_t *out)
{
    int m = run_bind_cpus(o, node, out);
    if (o->bind != RUN_BIND_RANK || local < 0 || local >= nlocal || m < nlocal)
        return m;
    cpu_set_t set = *out;
    return share(&set, local, nlocal, out);
}

void run_bind_child(const struct run_opts *o, int node, int local, int nlocal)
{
    cpu_set_t set;
    /* Best effort: a container may forbid it, and the run is still right unbound. */
    if (rank_cpus(o, node, local, nlocal, &set) > 0 &&
        sched_setaffinity(0, sizeof(set), &set) != 0)
        fprintf(stderr, "nexar-run: node %d: cannot bind to its CPUs: %s\n", node,
                strerror(errno));
}

void run_bind_describe(const struct run_opts *o, int node, char *buf, size_t len)
{
    cpu_set_t set;
    size_t off = 0;
    buf[0] = '\0';
    if (run_bind_cpus(o, node, &set) <= 0) {
        snprintf(buf, len, "unbound");
        return;
    }
    for (int c = 0; c < CPU_SETSIZE && off + 1 < len; c++)
        if (CPU_ISSET(c, &set))
            off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "cpu ", c);
}
