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
    uint32_t max_conns_per_uid; /* control connections of one uid at once */
    uint32_t conn_timeout_s;    /* HELLO, a rank's JOIN, and the rest of a begun frame */
    uint32_t ctl_idle_s;        /* a nexarctl connection that asks nothing is closed */
    uint32_t max_pending; /* descriptors one client may have parked in the daemon */
    uint32_t max_world_size; /* the largest job a rank may ask for */
    uint32_t max_timeout_s;  /* the longest deadline a rank may ask for (NEXAR_TIMEOUT) */
    uint32_t workers;     /* threads sharing a large chunk's copies and reductions */
    bool peer_reads;      /* ranks of a job on this node read each other's slots (shm_abi.h) */
    bool single_copy;     /* and each other's buffers, with process_vm_readv (shm_abi.h) */
    /* Network (empty listen: this daemon serves one node only). */
    char *listen;      /* host:port or [v6]:port to bind the QUIC endpoint */
    char *advertise;   /* host:port other daemons reach us at; NULL: listen */
    char *tls_ca, *tls_cert, *tls_key; /* PEM files: cluster CA, node cert, node key */
    uint32_t peer_idle_timeout_ms;     /* silence after which a peer is declared lost */
    uint32_t keepalive_ms;             /* PING interval on an idle connection */
    uint32_t formation_timeout_s;      /* a multi-node job must form within this */
    uint64_t quic_window_bytes;        /* connection flow-control window */
    uint64_t quic_stream_window_bytes; /* per-stream flow-control window */
    uint32_t quic_max_udp_payload;     /* largest datagram we send (loopback allows more) */
    char *quic_cc;                     /* congestion control: "bbr" or "cubic" */
    uint32_t quic_lanes;               /* QUIC connections (threads) per peer daemon */
    bool inspect;                      /* serve HTTP/3 inspection (ALPN h3) on the port */
    uint32_t inspect_max_conns;        /* inspection connections up at once */
    char *algo;        /* algorithms across nodes, "kind=algo,..." (NULL: automatic); the
                        * text as given, checked by the caller (nx_algo_pref_parse) */
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

/* Whether a rank of uid may join a job owned by uid owner: its own, or both uids are in
 * allow_uids (a group that shares jobs), or allow_uids is "*".  Root is no exception. */
bool nx_config_uid_allowed(const struct nx_config *c, uid_t owner, uid_t uid);

#endif
