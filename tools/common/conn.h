/*
 * conn.h - connecting to a nexard control socket, shared by nexarctl and nexar-run.
 *
 * Both tools need the same first step: connect to the Unix socket and exchange
 * HELLO / HELLO_REPLY (proto/frame.h).  A daemon "answers" only when that
 * handshake completes: a stale socket file, a daemon of another protocol version
 * or a hung process all count as "no daemon here".
 */
#ifndef NXT_CONN_H
#define NXT_CONN_H

#include <stddef.h>
#include <stdint.h>

#define NXT_DEFAULT_SOCKET "/run/nexar/nexard.sock"

/* The socket to use: opt when given, else $NEXAR_SOCKET when set and not empty,
 * else NXT_DEFAULT_SOCKET.  The result points at opt, the environment or a literal. */
const char *nxt_socket_path(const char *opt);

/* What the daemon said in its HELLO_REPLY. */
struct nxt_hello {
    uint32_t proto_version;
    uint64_t daemon_pid;
    char daemon_version[64];
};

/*
 * Connects to the socket at path (close-on-exec) and performs the handshake as a
 * client of kind `kind` (a Nexar__ClientKind).  Each step waits at most timeout_ms.
 * On success returns the socket (>= 0) and fills *hello when it is not NULL.
 * On failure returns minus a nexar_status_t and writes a one-line reason to err:
 *   -NEXAR_ERR_UNAVAILABLE  nothing listens there (ENOENT, ECONNREFUSED), or the
 *                           daemon closed the connection
 *   -NEXAR_ERR_PERMISSION   the socket or its directory is not ours to open
 *   -NEXAR_ERR_TIMEOUT      it accepted but did not answer in time
 *   -NEXAR_ERR_UNSUPPORTED  it refused our protocol version
 *   -NEXAR_ERR_INTERNAL     it answered something that is not a HELLO_REPLY
 *   -NEXAR_ERR_INVALID      path is too long for a Unix socket
 *   or the status of an ERROR frame the daemon sent instead of HELLO_REPLY.
 */
int nxt_connect(const char *path, int kind, int timeout_ms, struct nxt_hello *hello,
                char *err, size_t errlen);

/*
 * Sends one request frame and waits for its answer.  The answer's type is put in
 * *type and its payload in *payload (malloc'd; the caller frees it) with its
 * length in *len.  Returns 0 or minus a nexar_status_t with a reason in err
 * (UNAVAILABLE when the daemon closed, TIMEOUT, INTERNAL for a bad frame).
 */
int nxt_request(int fd, uint16_t type, const uint8_t *req, uint32_t req_len,
                int timeout_ms, uint16_t *reply_type, uint8_t **payload, uint32_t *len,
                char *err, size_t errlen);

/* Decodes an ErrorReply payload into its status and text (in err); returns the
 * status (NEXAR_ERR_INTERNAL when the payload does not decode or says 0). */
int nxt_error_reply(const uint8_t *payload, uint32_t len, char *err, size_t errlen);

#endif /* NXT_CONN_H */
