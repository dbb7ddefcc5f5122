/*
 * inspect.h - the remote inspection endpoint: HTTP/3 (ALPN "h3") on nexard's QUIC port.
 *
 * nexard serves each report of nexarctl at a fixed path; nexarctl --remote asks for it.
 * Both sides take the paths from this one table, so they cannot drift apart:
 *
 *   GET /v1/status  /v1/jobs  /v1/comms  /v1/ops  /v1/stats  /v1/peers
 *     200, content-type NX_INSPECT_CTYPE, body: the CtlReply (proto/nexar.proto) that the
 *     Unix-socket control server gives for CTL_STATUS ... CTL_PEERS, byte for byte.
 *
 * Version history of the paths: v1 (this table).  A new report gets a new path; a path's
 * meaning never changes.
 */
#ifndef NX_INSPECT_H
#define NX_INSPECT_H

#include <stddef.h>

#define NX_INSPECT_ALPN "h3"
#define NX_INSPECT_CTYPE "application/x-protobuf; proto=nexar.CtlReply"

struct nx_inspect_route {
    const char *path;    /* "/v1/status" */
    const char *name;    /* "status": nexarctl's command */
    int command;         /* Nexar__CtlCommand */
};

/* The route of a CtlCommand; NULL when the command has none (peer-test). */
const struct nx_inspect_route *nx_inspect_by_command(int command);

/* The route at exactly path[0..len) (no query string); NULL when there is none. */
const struct nx_inspect_route *nx_inspect_by_path(const char *path, size_t len);

#endif /* NX_INSPECT_H */
