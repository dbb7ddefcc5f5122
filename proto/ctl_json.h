/*
 * ctl_json.h - the reports of nexard (a CtlReply) as JSON, written once for both places
 * that print them: nexarctl --json, and nexard's HTTP/3 inspection endpoint when a client
 * asks for JSON (Accept: application/json, or ?format=json; proto/inspect.h).  Both give
 * the same object for the same reply:
 *
 *   {"command":"jobs","status":0,"jobs":[...]}
 *
 * Member names are the proto field names of proto/nexar.proto.  Strings are escaped per
 * RFC 8259 with invalid UTF-8 replaced (json.h): job names, addresses and reasons are
 * chosen by ranks and peers, and the output stays valid JSON whatever they hold.
 */
#ifndef NX_CTL_JSON_H
#define NX_CTL_JSON_H

#include <stdbool.h>
#include <stdio.h>

#include "json.h"
#include "nexar.pb-c.h"

/* The counters of Stats in display order: X(field, label, is_bytes).  The JSON names are
 * the field names; nexarctl's table prints the labels. */
#define NX_CTL_STATS_FIELDS(X)                             \
    X(ops_completed, "ops completed", false)               \
    X(ops_failed, "ops failed", false)                     \
    X(bytes_reduced, "bytes reduced", true)                \
    X(bytes_copied, "bytes copied", true)                  \
    X(bytes_pulled, "bytes pulled", true)                  \
    X(bytes_streamed, "bytes streamed", true)              \
    X(chunks, "chunks", false)                             \
    X(p2p_messages, "p2p messages", false)                 \
    X(clients_accepted, "clients accepted", false)         \
    X(clients_dropped, "clients dropped", false)           \
    X(protocol_violations, "protocol violations", false)   \
    X(mismatches, "mismatches", false)                     \
    X(timeouts, "timeouts", false)                         \
    X(peers_lost, "peers lost", false)                     \
    X(recoveries, "recoveries", false)                     \
    X(spin_pauses, "spin pauses", false)                   \
    X(loop_stalls, "loop stalls", false)

/* A reply's StatusInfo and Stats; all zeros where a daemon omitted them, not a crash. */
const Nexar__StatusInfo *nx_ctl_status_of(const Nexar__CtlReply *r);
const Nexar__Stats *nx_ctl_stats_of(const Nexar__CtlReply *r);

/*
 * Writes the members of report `command` (a Nexar__CtlCommand: CTL_STATUS .. CTL_PEERS,
 * CTL_CONFIG) into the open object of j:
 *   status  the StatusInfo fields           stats   the counters
 *   jobs, comms, ops   an array of that name
 *   peers   "listen" (null without a network) and an array "peers"
 *   config  "config_file" (null: none), "config_note" (null: none) and an array "config"
 *           of {"key","value","source"}
 * false (nothing written) for a command without a report.
 */
bool nx_ctl_json_members(struct nx_json *j, int command, const Nexar__CtlReply *r);

/* One line to f: {"command":name,"status":0, members...}.  false as above. */
bool nx_ctl_json_report(FILE *f, const char *name, int command, const Nexar__CtlReply *r);

#endif /* NX_CTL_JSON_H */
