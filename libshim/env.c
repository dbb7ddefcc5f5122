/*
 * env.c - the job description from the environment.
 *
 * The rank, world size and local rank come from the first launcher whose rank
 * variable is set, in this order (the most specific launcher wins; Open MPI goes
 * before Slurm because mpirun ranks inside an allocation inherit SLURM_PROCID=0):
 *   NEXAR_RANK / NEXAR_WORLD_SIZE / NEXAR_LOCAL_RANK
 *   torchrun: RANK / WORLD_SIZE / LOCAL_RANK
 *   Open MPI: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK
 *   Slurm:    SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID
 * With none of them the process is rank 0 of 1 (source "default").  NEXAR_LOCAL_RANK, NEXAR_JOB,
 * NEXAR_COORD, NEXAR_SOCKET, NEXAR_TIMEOUT and NEXAR_ALGO apply whatever the source.  Without
 * NEXAR_JOB the job id comes from the launcher (torchrun's run id and master
 * address, Open MPI's job id, Slurm's job and step ids); a single rank gets a
 * private one.  NEXAR_JOIN=1 makes the process a joiner of the running job NEXAR_JOB,
 * ranked by the communicator that grows to take it (nexar_comm_grow).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "shim.h"

#define NX_DEFAULT_SOCKET "/run/nexar/nexard.sock"
#define NX_MAX_WORLD (1u << 24)

struct nx_env_source {
    const char *name, *rank, *size, *local;
};

static const struct nx_env_source sources[] = {
    {"NEXAR_*", "NEXAR_RANK", "NEXAR_WORLD_SIZE", "NEXAR_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A switch that is on unless set to 0: anything but 0 or 1 is INVALID, named. */
static nexar_status_t switch_on(const char *name, bool *out)
{
    const char *v = env(name);
    if (v && strcmp(v, "0") && strcmp(v, "1"))
        return nx_fail(NEXAR_ERR_INVALID, "nexar_init: %s=\"%s\" is not 0 or 1", name, v);
    *out = !v || !strcmp(v, "1");
    return NEXAR_OK;
}

/* A decimal number in [0, max]; false when v is not one. */
static bool parse_u32(const char *v, uint32_t max, uint32_t *out)
{
    char *end;
    if (!v || *v < '0' || *v > '9')
        return false;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end != '\0' || x > max)
        return false;
    *out = (uint32_t)x;
    return true;
}

static nexar_status_t read_ranks(struct nx_env *e, const struct nx_env_source **src)
{
    *src = NULL;
    for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
        if (env(sources[i].rank) || env(sources[i].size)) {
            *src = &sources[i];
            break;
        }
    }
    e->rank = 0;
    e->size = 1;
    e->source = "default";
    if (*src) {
        const struct nx_env_source *s = *src;
        e->source = s->name;
        if (!parse_u32(env(s->size), NX_MAX_WORLD, &e->size) || e->size == 0)
            return nx_fail(NEXAR_ERR_INVALID,
                           "nexar_init: %s=\"%s\" is not a world size (1..%u; from %s)",
                           s->size, env(s->size) ? env(s->size) : "", NX_MAX_WORLD, s->name);
        if (!parse_u32(env(s->rank), UINT32_MAX, &e->rank) || e->rank >= e->size)
            return nx_fail(NEXAR_ERR_INVALID,
                           "nexar_init: %s=\"%s\" is not a rank below %s=%u (from %s)",
                           s->rank, env(s->rank) ? env(s->rank) : "", s->size, e->size,
                           s->name);
    }
    e->local_rank = e->rank;
    const char *lname = env("NEXAR_LOCAL_RANK") ? "NEXAR_LOCAL_RANK" : *src ? (*src)->local : NULL;
    if (lname && env(lname) && !parse_u32(env(lname), UINT32_MAX, &e->local_rank))
        return nx_fail(NEXAR_ERR_INVALID, "nexar_init: %s=\"%s\" is not a local rank", lname,
                       env(lname));
    return NEXAR_OK;
}

static nexar_status_t read_job(struct nx_env *e, const struct nx_env_source *src)
{
    const char *v = env("NEXAR_JOB");
    int n = -1;
    if (v) {
        n = snprintf(e->job, sizeof(e->job), "%s", v);
    } else if (src && strcmp(src->name, "torchrun") == 0 && env("MASTER_ADDR") &&
               env("MASTER_PORT")) {
        const char *id = env("TORCHELASTIC_RUN_ID");
        n = snprintf(e->job, sizeof(e->job), "torchrun-%s-%s:%s", id ? id : "none",
                     env("MASTER_ADDR"), env("MASTER_PORT"));
    } else if (src && strcmp(src->name, "Open MPI") == 0 &&
               (env("OMPI_MCA_ess_base_jobid") || env("PMIX_NAMESPACE"))) {
        v = env("OMPI_MCA_ess_base_jobid");
        n = snprintf(e->job, sizeof(e->job), "ompi-%s", v ? v : env("PMIX_NAMESPACE"));
    } else if (src && strcmp(src->name, "Slurm") == 0 && env("SLURM_JOB_ID")) {
        v = env("SLURM_STEP_ID");
        n = snprintf(e->job, sizeof(e->job), "slurm-%s.%s", env("SLURM_JOB_ID"), v ? v : "0");
    } else if (e->size == 1) {
        char host[64] = "";
        gethostname(host, sizeof(host) - 1);
        n = snprintf(e->job, sizeof(e->job), "solo-%s-%ld", host, (long)getpid());
    } else {
        return nx_fail(NEXAR_ERR_INVALID,
                       "nexar_init: NEXAR_JOB is not set and %s gives no job id; "
                       "set NEXAR_JOB to the same name on every rank of the job",
                       e->source);
    }
    if (n < 0 || (size_t)n >= sizeof(e->job))
        return nx_fail(NEXAR_ERR_INVALID, "nexar_init: the job id is longer than %zu bytes",
                       sizeof(e->job) - 1);
    return NEXAR_OK;
}

static nexar_status_t read_misc(struct nx_env *e, const struct nx_env_source *src)
{
    const char *v = env("NEXAR_COORD");
    int n = 0;
    e->coord[0] = '\0';
    e->coord_guessed = false;
    if (v) {
        n = snprintf(e->coord, sizeof(e->coord), "%s", v);
    } else if (src && strcmp(src->name, "torchrun") == 0 && env("MASTER_ADDR") &&
               env("MASTER_PORT")) {
        n = snprintf(e->coord, sizeof(e->coord), "%s:%s", env("MASTER_ADDR"),
                     env("MASTER_PORT"));
        e->coord_guessed = true;
    }
    if (n < 0 || (size_t)n >= sizeof(e->coord))
        return nx_fail(NEXAR_ERR_INVALID, "nexar_init: NEXAR_COORD is too long");
    if (e->coord[0] && nx_addr_split(e->coord, true, NULL, 0, NULL) == 0) {
        /* A host name is looked up here, in the rank, which is the one to wait for its
         * name server: nexard takes numeric addresses only (addr.h).  What is not an
         * address at all goes as it is, for nexard to refuse in its own words. */
        char canon[NX_ADDR_MAX], err[160];
        if (nx_addr_canon(e->coord, canon, sizeof(canon), err, sizeof(err)) == 0) {
            snprintf(e->coord, sizeof(e->coord), "%s", canon);
        } else if (e->coord_guessed) {
            /* As nexard did with a MASTER_ADDR it could not use: a job of this node. */
            e->coord[0] = '\0';
            e->coord_guessed = false;
        } else {
            return nx_fail(NEXAR_ERR_INVALID, "nexar_init: NEXAR_COORD=%s: %s", v, err);
        }
    }

    v = env("NEXAR_SOCKET");
    if (!v)
        v = NX_DEFAULT_SOCKET;
    n = snprintf(e->socket, sizeof(e->socket), "%s", v);
    if (n < 0 || (size_t)n >= sizeof(e->socket))
        return nx_fail(NEXAR_ERR_INVALID,
                       "nexar_init: NEXAR_SOCKET \"%s\" is longer than a Unix socket path "
                       "allows (%zu bytes)",
                       v, sizeof(e->socket) - 1);

    /* 0: not set, so the daemon's op_timeout_s applies (JoinReply says which). */
    e->timeout_ms = 0;
    v = env("NEXAR_TIMEOUT");
    if (v) {
        char *end;
        errno = 0;
        double s = strtod(v, &end);
        if (errno || *end != '\0' || !isfinite(s) || s <= 0 || s * 1000.0 > 4.0e9)
            return nx_fail(NEXAR_ERR_INVALID,
                           "nexar_init: NEXAR_TIMEOUT=\"%s\" is not a number of seconds "
                           "(> 0, at most 4000000)",
                           v);
        uint32_t ms = (uint32_t)(s * 1000.0);
        if ((double)ms < s * 1000.0)
            ms++; /* round up: a deadline is never shorter than asked */
        e->timeout_ms = ms ? ms : 1u;
    }
    v = env("NEXAR_ALGO");
    if (v && snprintf(e->algo, sizeof(e->algo), "%s", v) >= (int)sizeof(e->algo))
        return nx_fail(NEXAR_ERR_INVALID, "nexar_init: NEXAR_ALGO is longer than %zu bytes",
                       sizeof(e->algo) - 1);
    if (!v)
        e->algo[0] = '\0';
    nexar_status_t st;
    /* Peer reads (shm_abi.h) are on unless NEXAR_PEER_READS=0: for a comparison, or a
     * rank that must not map its peers' slots. */
    if ((st = switch_on("NEXAR_PEER_READS", &e->peer_reads)) != NEXAR_OK)
        return st;
    /* Single copy (shm_abi.h) is on unless NEXAR_SINGLE_COPY=0: for a comparison, or a
     * rank whose memory its peers must not read. */
    if ((st = switch_on("NEXAR_SINGLE_COPY", &e->single_copy)) != NEXAR_OK)
        return st;
    /* Streaming copies into the slots (stream_copy.c) are on unless NEXAR_STREAM_COPY=0:
     * for a comparison, or a host where they measure slower. */
    if ((st = switch_on("NEXAR_STREAM_COPY", &e->stream_copy)) != NEXAR_OK)
        return st;
    return NEXAR_OK;
}

nexar_status_t nx_env_read(struct nx_env *e)
{
    const struct nx_env_source *src;
    nexar_status_t s;
    memset(e, 0, sizeof(*e));
    /* NEXAR_JOIN=1: this process joins a running job; its rank and size come from the
     * communicator that grows to take it, and NEXAR_JOB names that job. */
    const char *jv = env("NEXAR_JOIN");
    if (jv && strcmp(jv, "0")) {
        if (strcmp(jv, "1"))
            return nx_fail(NEXAR_ERR_INVALID, "nexar_init: NEXAR_JOIN=\"%s\" is not 0 or 1",
                           jv);
        if (!env("NEXAR_JOB"))
            return nx_fail(NEXAR_ERR_INVALID, "nexar_init: NEXAR_JOIN=1 needs NEXAR_JOB, the "
                           "name of the running job to join");
        e->joiner = true;
    }
    if ((s = read_ranks(e, &src)) != NEXAR_OK)
        return s;
    if ((s = read_job(e, src)) != NEXAR_OK)
        return s;
    return read_misc(e, src);
}
