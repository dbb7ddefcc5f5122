/* ctl_config.c - see ctl_config.h. */
#include "ctl_config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "config.h"
#include "context.h"
#include "mem.h"
#include "nexar.pb-c.h"

#define VALUE_MAX 4096

/* ---- values, in the form the config file takes them back ---- */

static void fmt_str(const struct nx_config *c, const char *v, char *b, size_t l)
{
    (void)c;
    snprintf(b, l, "%s", v ? v : "");
}

static void fmt_u32(const struct nx_config *c, uint32_t v, char *b, size_t l)
{
    (void)c;
    snprintf(b, l, "%" PRIu32, v);
}

static void fmt_u64(const struct nx_config *c, uint64_t v, char *b, size_t l)
{
    (void)c;
    snprintf(b, l, "%" PRIu64, v);
}

static void fmt_bool(const struct nx_config *c, bool v, char *b, size_t l)
{
    (void)c;
    snprintf(b, l, "%s", v ? "on" : "off");
}

static void fmt_level(const struct nx_config *c, int v, char *b, size_t l)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    (void)c;
    snprintf(b, l, "%s", v >= 0 && v < 4 ? names[v] : "?");
}

/* "*" and the listed uids, comma-separated; "" when neither. */
static void fmt_uids(const struct nx_config *c, const uid_t *v, char *b, size_t l)
{
    size_t off = 0;
    b[0] = '\0';
    if (c->allow_all_uids)
        off += (size_t)snprintf(b, l, "*");
    for (size_t i = 0; i < c->n_allow_uids && off < l; i++)
        off += (size_t)snprintf(b + off, l - off, "%s%u", off ? "," : "", (unsigned)v[i]);
}

/* Each key's formatter, chosen by the type of its field, so that a field whose type
 * changes fails to compile here instead of printing garbage. */
#define FMT(v)                                                                           \
    _Generic((v), char *: fmt_str, int: fmt_level, bool: fmt_bool, uint32_t: fmt_u32,    \
             uint64_t: fmt_u64, const uid_t *: fmt_uids)

/* Every key of nx_config_set (daemon/base/config.c), in the order of
 * docs/configuration.md; test_ctl_cli checks against config.c that none is missing. */
#define CONFIG_KEYS(X)                                       \
    X("socket", socket_path)                                 \
    X("runtime_dir", runtime_dir)                            \
    X("log_level", log_level)                                \
    X("slot_bytes", slot_bytes)                              \
    X("slots", slots)                                        \
    X("heap_bytes", heap_bytes)                              \
    X("sq_entries", sq_entries)                              \
    X("cq_entries", cq_entries)                              \
    X("op_timeout_s", op_timeout_s)                          \
    X("p2p_eager_bytes", p2p_eager_bytes)                    \
    X("algo", algo)                                          \
    X("max_clients", max_clients)                            \
    X("max_conns_per_uid", max_conns_per_uid)                \
    X("conn_timeout_s", conn_timeout_s)                      \
    X("ctl_idle_s", ctl_idle_s)                              \
    X("max_world_size", max_world_size)                      \
    X("max_timeout_s", max_timeout_s)                        \
    X("max_pending", max_pending)                            \
    X("workers", workers)                                    \
    X("peer_reads", peer_reads)                              \
    X("single_copy", single_copy)                            \
    X("allow_uids", allow_uids)                              \
    X("listen", listen)                                      \
    X("advertise", advertise)                                \
    X("tls_ca", tls_ca)                                      \
    X("tls_cert", tls_cert)                                  \
    X("tls_key", tls_key)                                    \
    X("peer_idle_timeout_ms", peer_idle_timeout_ms)          \
    X("keepalive_ms", keepalive_ms)                          \
    X("formation_timeout_s", formation_timeout_s)            \
    X("quic_window_bytes", quic_window_bytes)                \
    X("quic_stream_window_bytes", quic_stream_window_bytes)  \
    X("quic_max_udp_payload", quic_max_udp_payload)          \
    X("quic_cc", quic_cc)                                    \
    X("quic_lanes", quic_lanes)                              \
    X("inspect", inspect)                                    \
    X("inspect_max_conns", inspect_max_conns)

#define GETTER(name, field)                                                              \
    static void get_##field(const struct nx_config *c, char *b, size_t l)              \
    {                                                                                    \
        FMT(c->field)(c, c->field, b, l);                                                \
    }
CONFIG_KEYS(GETTER)
#undef GETTER

static const struct {
    const char *key;
    void (*get)(const struct nx_config *c, char *b, size_t l);
} keys[] = {
#define ENTRY(name, field) {name, get_##field},
    CONFIG_KEYS(ENTRY)
#undef ENTRY
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* ---- where each value came from ---- */

/* The defaults with the config file applied again, into *file.  false (with why in note)
 * when that cannot tell what the file set at start: unreadable now, or changed since. */
static bool reread(const char *path, struct nx_config *file, char *note, size_t len)
{
    struct stat st;
    char err[512];
    if (!path)
        return true;
    if (stat(path, &st) < 0) {
        snprintf(err, sizeof(err), "%s: %s", path, strerror(errno));
        goto unsure;
    }
    if (nx_config_load_file(file, path, err, sizeof(err)) < 0)
        goto unsure;
    /* When nexard started, on the clock of file times. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double started = (double)now.tv_sec + now.tv_nsec / 1e9 - (nx_now() - nxd.start_time);
    if ((double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 > started) {
        snprintf(note, len, "%s changed after nexard started: values that are not defaults "
                 "came from it or from the command line", path);
        return false;
    }
    return true;
unsure:
    snprintf(note, len, "the config file cannot be read again (%s): values that are not "
             "defaults came from it or from the command line", err);
    return false;
}

static const char *source(const char *now, const char *def, const char *file, bool file_ok)
{
    if (!strcmp(now, def) && (!file_ok || !strcmp(file, def)))
        return "default";
    if (!file_ok)
        return "config file or command line";
    return strcmp(now, file) ? "command line" : "config file";
}

void nx_ctl_config_report(nx_ctl_emit emit, void *arg)
{
    const struct nx_config *cfg = &nxd.cfg;
    struct nx_config def, file;
    char note[1024] = "";
    nx_config_defaults(&def);
    nx_config_defaults(&file);
    bool file_ok = reread(cfg->config_path, &file, note, sizeof(note));

    Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
    Nexar__ConfigEntry *entries = nx_xcalloc(NKEYS, sizeof(*entries));
    rep.config = nx_xcalloc(NKEYS, sizeof(*rep.config));
    rep.config_file = cfg->config_path ? cfg->config_path : "";
    rep.config_note = note;
    char *now = nx_xmalloc(VALUE_MAX), *d = nx_xmalloc(VALUE_MAX), *f = nx_xmalloc(VALUE_MAX);
    for (size_t i = 0; i < NKEYS; i++) {
        Nexar__ConfigEntry *e = &entries[i];
        nexar__config_entry__init(e);
        keys[i].get(cfg, now, VALUE_MAX);
        keys[i].get(&def, d, VALUE_MAX);
        keys[i].get(&file, f, VALUE_MAX);
        e->key = (char *)keys[i].key;
        e->value = nx_xstrdup(now);
        e->source = (char *)source(now, d, f, file_ok);
        rep.config[rep.n_config++] = e;
    }
    emit(arg, &rep);
    for (size_t i = 0; i < NKEYS; i++)
        free(entries[i].value);
    free(entries);
    free(rep.config);
    free(now);
    free(d);
    free(f);
    nx_config_free(&def);
    nx_config_free(&file);
}
