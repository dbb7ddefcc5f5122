/* config.h - nexard's settings: built-in defaults, then the config file, then flags. */
#ifndef NX_CONFIG_H
#define NX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NX_CONFIG_MAX_UIDS 64

struct nx_config {
    char *config_path; /* NULL: none given */
    char *socket_path;
    char *runtime_dir;
    int log_level;
    bool foreground;
    uint64_t slot_bytes;
    uint32_t slots;
    uint64_t heap_bytes;
    uint32_t sq_entries, cq_entries;
    uint32_t op_timeout_s;
    uint64_t p2p_eager_bytes;
    uint32_t max_clients;
    uint32_t max_pending; /* descriptors one client may have parked in the daemon */
    bool allow_all_uids;
    uid_t allow_uids[NX_CONFIG_MAX_UIDS];
    size_t n_allow_uids;
};

void nx_config_defaults(struct nx_config *c);
void nx_config_free(struct nx_config *c);

/* Applies one `key = value`.  0, or -EINVAL with a message in err (errlen bytes). */
int nx_config_set(struct nx_config *c, const char *key, const char *value, char *err,
                  size_t errlen);

/* Reads a file of `key = value` lines (# comments, blank lines).  0 or -errno / -EINVAL
 * with "path:line: reason" in err. */
int nx_config_load_file(struct nx_config *c, const char *path, char *err, size_t errlen);

/*
 * Parses the command line.  A -c/--config file is loaded first, so that flags win
 * whatever their order.  Returns 0 to run, 1 when --help or --version was printed,
 * -EINVAL with a message in err.
 */
int nx_config_parse_args(struct nx_config *c, int argc, char **argv, char *err,
                         size_t errlen);

bool nx_config_uid_allowed(const struct nx_config *c, uid_t owner, uid_t uid);

#endif
