/* config.c - see config.h. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"

void nx_config_defaults(struct nx_config *c)
{
    memset(c, 0, sizeof(*c));
    c->socket_path = nx_xstrdup("/run/nexar/nexard.sock");
    c->runtime_dir = nx_xstrdup("/run/nexar");
    c->log_level = NX_LOG_INFO;
    c->slot_bytes = 4u << 20;
    c->slots = 4;
    c->heap_bytes = 256u << 20;
    c->sq_entries = 256;
    c->cq_entries = 256;
    c->op_timeout_s = 300;
    c->p2p_eager_bytes = 64u << 20;
    c->max_clients = 1024;
    c->max_conns_per_uid = 512;
    c->conn_timeout_s = 10;
    c->ctl_idle_s = 60;
    c->max_world_size = 65536;
    c->max_timeout_s = 86400;
    c->max_pending = 4096;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c->workers = ncpu < 1 ? 1 : ncpu > 4 ? 4 : (uint32_t)ncpu;
    c->peer_idle_timeout_ms = 5000;
    c->keepalive_ms = 1000;
    c->formation_timeout_s = 60;
    c->quic_window_bytes = 64u << 20;
    c->quic_stream_window_bytes = 16u << 20;
    c->quic_max_udp_payload = 1452;
    c->quic_cc = nx_xstrdup("bbr");
    c->quic_lanes = 1;
    c->inspect = true;
    c->inspect_max_conns = 8;
    c->peer_reads = true;
    c->single_copy = true;
}

void nx_config_free(struct nx_config *c)
{
    free(c->config_path);
    free(c->socket_path);
    free(c->runtime_dir);
    free(c->listen);
    free(c->advertise);
    free(c->algo);
    free(c->tls_ca);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->quic_cc);
    memset(c, 0, sizeof(*c));
}

/* Unsigned integer with an optional K/M/G suffix (powers of 1024). */
static int parse_size(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v > (max >> shift))
        return -EINVAL;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_uids(struct nx_config *c, const char *v, char *err, size_t errlen)
{
    c->allow_all_uids = false;
    c->n_allow_uids = 0;
    char *copy = nx_xstrdup(v), *save = NULL;
    int rv = 0;
    for (char *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        uint64_t uid;
        if (!strcmp(tok, "*")) {
            c->allow_all_uids = true;
        } else if (parse_size(tok, UINT32_MAX - 1, &uid) < 0 ||
                   c->n_allow_uids == NX_CONFIG_MAX_UIDS) {
            snprintf(err, errlen, "allow_uids: bad uid '%s' (numbers or *, at most %d)", tok,
                     NX_CONFIG_MAX_UIDS);
            rv = -EINVAL;
            break;
        } else {
            c->allow_uids[c->n_allow_uids++] = (uid_t)uid;
        }
    }
    free(copy);
    return rv;
}

static bool at_least(uint64_t v, uint64_t lo)
{
    return v >= lo;
}

static bool pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

int nx_config_set(struct nx_config *c, const char *key, const char *value, char *err,
                  size_t errlen)
{
    uint64_t v;
#define SIZE_KEY(name, field, lo, hi, extra, expect)                                       \
    if (!strcmp(key, name)) {                                                              \
        if (parse_size(value, hi, &v) < 0 || !at_least(v, lo) || !(extra)) {               \
            snprintf(err, errlen, "%s: bad value '%s' (expected %s)", name, value, expect);  \
            return -EINVAL;                                                                \
        }                                                                                  \
        c->field = v;                                                                      \
        return 0;                                                                          \
    }
    if (!strcmp(key, "socket")) {
        if (!*value || strlen(value) >= 108) {
            snprintf(err, errlen, "socket: path empty or longer than 107 bytes");
            return -EINVAL;
        }
        free(c->socket_path);
        c->socket_path = nx_xstrdup(value);
        return 0;
    }
    if (!strcmp(key, "runtime_dir")) {
        if (!*value) {
            snprintf(err, errlen, "runtime_dir: empty");
            return -EINVAL;
        }
        free(c->runtime_dir);
        c->runtime_dir = nx_xstrdup(value);
        return 0;
    }
    static const struct {
        const char *key;
        size_t off;
    } strings[] = {
        {"listen", offsetof(struct nx_config, listen)},
        {"advertise", offsetof(struct nx_config, advertise)},
        {"tls_ca", offsetof(struct nx_config, tls_ca)},
        {"tls_cert", offsetof(struct nx_config, tls_cert)},
        {"tls_key", offsetof(struct nx_config, tls_key)},
    };
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        if (strcmp(key, strings[i].key))
            continue;
        char **field = (char **)((char *)c + strings[i].off);
        free(*field);
        *field = *value ? nx_xstrdup(value) : NULL;
        return 0;
    }
    if (!strcmp(key, "algo")) {
        /* Its grammar is the algorithms' (nx_algo_pref_parse): main.c checks it once
         * everything is read, so that the settings need not know every algorithm. */
        free(c->algo);
        c->algo = *value ? nx_xstrdup(value) : NULL;
        return 0;
    }
    if (!strcmp(key, "log_level")) {
        int l = nx_log_level_parse(value);
        if (l < 0) {
            snprintf(err, errlen, "log_level: '%s' is not debug, info, warn or error", value);
            return -EINVAL;
        }
        c->log_level = l;
        return 0;
    }
    if (!strcmp(key, "quic_cc")) {
        if (strcmp(value, "bbr") && strcmp(value, "cubic")) {
            snprintf(err, errlen, "quic_cc: '%s' is not bbr or cubic", value);
            return -EINVAL;
        }
        free(c->quic_cc);
        c->quic_cc = nx_xstrdup(value);
        return 0;
    }
    if (!strcmp(key, "allow_uids"))
        return parse_uids(c, value, err, errlen);
    if (!strcmp(key, "inspect") || !strcmp(key, "peer_reads") || !strcmp(key, "single_copy")) {
        bool *flag = !strcmp(key, "inspect")      ? &c->inspect
                     : !strcmp(key, "peer_reads") ? &c->peer_reads
                                                  : &c->single_copy;
        static const char *const on[] = {"on", "yes", "true", "1"};
        static const char *const off[] = {"off", "no", "false", "0"};
        for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
            if (!strcmp(value, on[i]) || !strcmp(value, off[i])) {
                *flag = !strcmp(value, on[i]);
                return 0;
            }
        }
        snprintf(err, errlen, "%s: '%s' is not on or off", key, value);
        return -EINVAL;
    }
    SIZE_KEY("slot_bytes", slot_bytes, 4096, 1ull << 30, v % 64 == 0,
             "a multiple of 64 from 4K to 1G")
    /* One slot cannot hold a rank's receive and, beside it, the send or the
     * collective its peer waits for (libshim/request.c): 2 is the least that works. */
    SIZE_KEY("slots", slots, 2, 64, 1,
             "2 to 64: a rank needs a slot for a receive and another beside it")
    SIZE_KEY("heap_bytes", heap_bytes, 0, 64ull << 30, v % 64 == 0,
             "a multiple of 64 up to 64G")
    SIZE_KEY("sq_entries", sq_entries, 8, 65536, pow2(v), "a power of two from 8 to 65536")
    SIZE_KEY("cq_entries", cq_entries, 8, 65536, pow2(v), "a power of two from 8 to 65536")
    SIZE_KEY("op_timeout_s", op_timeout_s, 1, 86400 * 7, 1, "1 to 604800 seconds")
    SIZE_KEY("p2p_eager_bytes", p2p_eager_bytes, 0, 1ull << 40, 1, "at most 1T")
    SIZE_KEY("max_clients", max_clients, 1, 1u << 20, 1, "1 to 1048576")
    SIZE_KEY("max_conns_per_uid", max_conns_per_uid, 1, 1u << 20, 1, "1 to 1048576")
    SIZE_KEY("conn_timeout_s", conn_timeout_s, 1, 3600, 1, "1 to 3600 seconds")
    SIZE_KEY("ctl_idle_s", ctl_idle_s, 1, 86400, 1, "1 to 86400 seconds")
    SIZE_KEY("max_pending", max_pending, 16, 1u << 24, 1, "16 to 16777216")
    SIZE_KEY("max_world_size", max_world_size, 1, 1u << 20, 1, "1 to 1048576")
    SIZE_KEY("max_timeout_s", max_timeout_s, 1, 86400 * 7, 1, "1 to 604800 seconds")
    SIZE_KEY("workers", workers, 1, 64, 1, "1 to 64 threads")
    SIZE_KEY("peer_idle_timeout_ms", peer_idle_timeout_ms, 200, 3600000, 1,
             "200 to 3600000 milliseconds")
    SIZE_KEY("keepalive_ms", keepalive_ms, 50, 600000, 1, "50 to 600000 milliseconds")
    SIZE_KEY("formation_timeout_s", formation_timeout_s, 1, 86400, 1, "1 to 86400 seconds")
    SIZE_KEY("quic_window_bytes", quic_window_bytes, 64u << 10, 1ull << 32, 1, "64K to 4G")
    SIZE_KEY("quic_stream_window_bytes", quic_stream_window_bytes, 64u << 10, 1ull << 32, 1,
             "64K to 4G")
    SIZE_KEY("quic_max_udp_payload", quic_max_udp_payload, 1200, 65527, 1,
             "1200 to 65527 bytes")
    SIZE_KEY("quic_lanes", quic_lanes, 1, 16, 1, "1 to 16 connections per peer")
    SIZE_KEY("inspect_max_conns", inspect_max_conns, 1, 64, 1, "1 to 64")
#undef SIZE_KEY
    snprintf(err, errlen, "unknown key '%s'", key);
    return -EINVAL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int nx_config_load_file(struct nx_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    /* getline: a line of any length is one line.  A fixed buffer cut a long one in two
     * and read its tail as a line of its own, so a long comment could set a key. */
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned lineno = 0;
    int rv = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (strlen(line) != (size_t)len) {
            snprintf(err, errlen, "%s:%u: a NUL byte in the line", path, lineno);
            rv = -EINVAL;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        char why[256];
        if (!eq) {
            snprintf(err, errlen, "%s:%u: expected 'key = value'", path, lineno);
            rv = -EINVAL;
            break;
        }
        *eq = '\0';
        if (nx_config_set(c, trim(s), trim(eq + 1), why, sizeof(why)) < 0) {
            snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
            rv = -EINVAL;
            break;
        }
    }
    free(line);
    fclose(f);
    return rv;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: nexard [options]\n"
            "  -c, --config FILE      read settings from FILE (key = value lines)\n"
            "      --socket PATH      control socket (default /run/nexar/nexard.sock)\n"
            "      --runtime-dir DIR  lock file directory (default /run/nexar)\n"
            "      --log-level LEVEL  debug, info, warn or error (default info)\n"
            "  -f, --foreground       stay in the foreground (systemd, nexar-run)\n"
            "      --slot-bytes N     staging slot size per client (K/M/G suffixes)\n"
            "      --slots N          staging slots per client\n"
            "      --heap-bytes N     nexar_alloc arena per client\n"
            "      --listen ADDR      QUIC endpoint for other daemons (host:port, [v6]:port)\n"
            "      --tls-ca FILE      cluster CA (PEM); --tls-cert FILE, --tls-key FILE: this node\n"
            "      --set KEY=VALUE    any config file key\n"
            "      --version          print the version\n"
            "  -h, --help             this text\n");
}

int nx_config_parse_args(struct nx_config *c, int argc, char **argv, char *err,
                         size_t errlen)
{
    enum { O_SOCKET = 256, O_RUNDIR, O_LOGLEVEL, O_SLOTB, O_SLOTS, O_HEAP, O_SET, O_VERSION,
           O_LISTEN, O_TLS_CA, O_TLS_CERT, O_TLS_KEY };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"socket", required_argument, NULL, O_SOCKET},
        {"runtime-dir", required_argument, NULL, O_RUNDIR},
        {"log-level", required_argument, NULL, O_LOGLEVEL},
        {"foreground", no_argument, NULL, 'f'},
        {"slot-bytes", required_argument, NULL, O_SLOTB},
        {"slots", required_argument, NULL, O_SLOTS},
        {"heap-bytes", required_argument, NULL, O_HEAP},
        {"set", required_argument, NULL, O_SET},
        {"listen", required_argument, NULL, O_LISTEN},
        {"tls-ca", required_argument, NULL, O_TLS_CA},
        {"tls-cert", required_argument, NULL, O_TLS_CERT},
        {"tls-key", required_argument, NULL, O_TLS_KEY},
        {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int o;

    /* First pass: only the config file, so that flags override it in any order. */
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:fh", opts, NULL)) != -1) {
        if (o == 'c') {
            free(c->config_path);
            c->config_path = nx_xstrdup(optarg);
        }
    }
    if (c->config_path) {
        int rv = nx_config_load_file(c, c->config_path, err, errlen);
        if (rv < 0)
            return rv;
    }

    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:fh", opts, NULL)) != -1) {
        const char *key = NULL;
        char kv[512];
        switch (o) {
        case 'c':
            break;
        case 'f':
            c->foreground = true;
            break;
        case 'h':
            usage(stdout);
            return 1;
        case O_VERSION:
            printf("nexard %s\n", NEXAR_VERSION);
            return 1;
        case O_SOCKET: key = "socket"; break;
        case O_RUNDIR: key = "runtime_dir"; break;
        case O_LOGLEVEL: key = "log_level"; break;
        case O_SLOTB: key = "slot_bytes"; break;
        case O_SLOTS: key = "slots"; break;
        case O_HEAP: key = "heap_bytes"; break;
        case O_LISTEN: key = "listen"; break;
        case O_TLS_CA: key = "tls_ca"; break;
        case O_TLS_CERT: key = "tls_cert"; break;
        case O_TLS_KEY: key = "tls_key"; break;
        case O_SET: {
            snprintf(kv, sizeof(kv), "%s", optarg);
            char *eq = strchr(kv, '=');
            if (!eq) {
                snprintf(err, errlen, "--set needs KEY=VALUE, got '%s'", optarg);
                return -EINVAL;
            }
            *eq = '\0';
            if (nx_config_set(c, trim(kv), trim(eq + 1), err, errlen) < 0)
                return -EINVAL;
            break;
        }
        default:
            snprintf(err, errlen, "unknown or incomplete option '%s' (try --help)",
                     argv[optind - 1]);
            return -EINVAL;
        }
        if (key && nx_config_set(c, key, optarg, err, errlen) < 0)
            return -EINVAL;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

static bool in_group(const struct nx_config *c, uid_t uid)
{
    for (size_t i = 0; i < c->n_allow_uids; i++)
        if (c->allow_uids[i] == uid)
            return true;
    return false;
}

bool nx_config_uid_allowed(const struct nx_config *c, uid_t owner, uid_t uid)
{
    /* Root is not special: a rank of root joining a user's job would hand that user
     * root's data (a job name is easy to guess), so root shares jobs only as a member of
     * the configured group like any uid. */
    if (uid == owner || c->allow_all_uids)
        return true;
    return in_group(c, uid) && in_group(c, owner);
}
