/*
 * inspect.h - the remote inspection endpoint: HTTP/3 (ALPN "h3") on nexard's QUIC port.
 *
 * nexard serves each report of nexarctl at a fixed path; nexarctl --remote asks for it.
 * Both sides take the paths from this one table, so they cannot drift apart:
 *
 *   GET /v1/status  /v1/jobs  /v1/comms  /v1/ops  /v1/stats  /v1/peers  /v1/config
 *     200, content-type NX_INSPECT_CTYPE, body: the CtlReply (proto/nexar.proto) that the
 *     Unix-socket control server gives for CTL_STATUS ... CTL_CONFIG, byte for byte.
 *
 * JSON instead, for curl-style and third-party HTTP/3 clients: `Accept: application/json`
 * (weighed against application/x-protobuf by its q-values, RFC 9110 12.5.1; no Accept,
 * or one that prefers neither, is protobuf) or `?format=json` on the path, which wins
 * over Accept (`?format=protobuf` asks for protobuf; another format is a 400).  The body
 * is then the object `nexarctl --json` prints for the same reply (ctl_json.h), with
 * content-type NX_INSPECT_CTYPE_JSON; a refusal asked for JSON is {"http_status":404,
 * "error":"no such report"} rather than text/plain.
 *
 * Version history of the paths: v1 (this table; /v1/config and JSON came later, and an
 * older daemon answers them 404 and protobuf).  A new report gets a new path; a path's
 * meaning never changes.
 */
#ifndef NX_INSPECT_H
#define NX_INSPECT_H

#include <stddef.h>

#define NX_INSPECT_ALPN "h3"
#define NX_INSPECT_CTYPE "application/x-protobuf; proto=nexar.CtlReply"
#define NX_INSPECT_CTYPE_JSON "application/json"

/* What a request asked the body to be. */
enum nx_inspect_format { NX_INSPECT_PROTOBUF = 0, NX_INSPECT_JSON = 1 };

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
