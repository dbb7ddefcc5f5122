/*
 * ctl.h - nexarctl: inspect a running nexard over its control socket.
 *
 * main.c connects, sends HELLO (CLIENT_CTL) and one CTL request, decodes the
 * CtlReply and hands it to the command's printers.  Each family of commands
 * lives in its own file and prints either human tables or one JSON object:
 *   status.c  status, stats
 *   jobs.c    jobs, comms (with their ranks)
 *   ops.c     ops in flight and the ranks each one waits for
 *   peers.c   peers (other daemons) and peer-test
 *   config.c  the settings in effect and where each came from
 *   remote.c  --remote: the same CtlReply from another node, over HTTP/3
 * The JSON of every report is proto/ctl_json.c's, which nexard's inspection endpoint
 * also writes when asked for JSON.
 */
#ifndef NXC_CTL_H
#define NXC_CTL_H

#include <stdbool.h>
#include <stdio.h>

#include "ctl_json.h"
#include "nexar.pb-c.h"

struct nxc_command {
    const char *name;
    Nexar__CtlCommand command;
    const char *help;
    void (*human)(FILE *f, const Nexar__CtlReply *r); /* the JSON: ctl_json.h */
};

/* Escapes every string of m, at any depth, in place (escape.c): for the tables. */
void nxc_escape_message(ProtobufCMessage *m);

void nxc_status_human(FILE *f, const Nexar__CtlReply *r);
void nxc_stats_human(FILE *f, const Nexar__CtlReply *r);
void nxc_reload_human(FILE *f, const Nexar__CtlReply *r);
void nxc_jobs_human(FILE *f, const Nexar__CtlReply *r);
void nxc_comms_human(FILE *f, const Nexar__CtlReply *r);
void nxc_ops_human(FILE *f, const Nexar__CtlReply *r);
void nxc_config_human(FILE *f, const Nexar__CtlReply *r);

void nxc_peers_human(FILE *f, const Nexar__CtlReply *r);
/* peer-test parses its own command line (it has options of its own): main() hands it
 * argv when the command is peer-test, and exits with what it returns. */
bool nxc_is_peer_test(int argc, char **argv);
int nxc_peer_test_main(int argc, char **argv);

/* --remote HOST:PORT and its TLS files (NULL: the environment, then /etc/nexar/tls). */
struct nxc_remote {
    const char *addr;
    const char *ca, *cert, *key;
};
/* GETs the report of command from the daemon at r->addr.  0 with *out decoded (free with
 * nexar__ctl_reply__free_unpacked), or a nexar_status_t with a reason in err. */
int nxc_remote_query(const struct nxc_remote *r, Nexar__CtlCommand command, int timeout_ms,
                     Nexar__CtlReply **out, char *err, size_t errlen);

/* ---- aligned text tables (table.c) ---------------------------------------- */

struct nxc_table {
    int ncols, nrows, pending; /* pending: cells of the unfinished row */
    char **cells; /* nrows * ncols, malloc'd */
};

/* A table of ncols columns whose first row is the header: ncols strings follow. */
void nxc_table_init(struct nxc_table *t, int ncols, ...);
/* Appends the next cell, row by row; takes ownership of a malloc'd string (nxc_fmt). */
void nxc_table_add(struct nxc_table *t, char *cell);
/* Prints with two spaces between columns, each line prefixed by indent. */
void nxc_table_print(struct nxc_table *t, FILE *f, const char *indent);
void nxc_table_free(struct nxc_table *t);

/* Helpers for cells: formatted into a malloc'd string owned by the table. */
char *nxc_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "1.5s", "2m03s", "1h02m" */
const char *nxc_fmt_age(double s, char *buf, size_t len);

/* Rank list as ranges: "0-3,7"; "-" when empty. */
const char *nxc_fmt_ranks(const uint32_t *v, size_t n, char *buf, size_t len);

#endif /* NXC_CTL_H */
