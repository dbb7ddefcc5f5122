/*
 * conn.c - connect to nexard and perform the HELLO handshake.
 */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "status.h"

const char *nxt_socket_path(const char *opt)
{
    if (opt && *opt)
        return opt;
    const char *env = getenv("NEXAR_SOCKET");
    return env && *env ? env : NXT_DEFAULT_SOCKET;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Maps a connect() errno to a status; the text says what to do about it. */
static int connect_failed(int e, const char *path, char *err, size_t errlen)
{
    switch (e) {
    case EACCES:
    case EPERM:
        snprintf(err, errlen, "permission denied opening %s", path);
        return -NEXAR_ERR_PERMISSION;
    case ENOENT:
    case ECONNREFUSED:
    case ENOTDIR:
        snprintf(err, errlen, "no nexard answers at %s (is nexard running?)", path);
        return -NEXAR_ERR_UNAVAILABLE;
    default:
        snprintf(err, errlen, "cannot connect to %s: %s", path, strerror(e));
        return -NEXAR_ERR_UNAVAILABLE;
    }
}

/*
 * A non-blocking connect: on a Unix socket it either succeeds at once or fails
 * with EAGAIN when the listen backlog is full (a daemon that stopped accepting).
 * Retrying until the deadline keeps a hung daemon from hanging us.
 */
static int connect_until(int fd, const struct sockaddr_un *sa, int64_t deadline)
{
    for (;;) {
        if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
            return 0;
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        if (now_ms() >= deadline)
            return -ETIMEDOUT;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int nxt_error_reply(const uint8_t *payload, uint32_t len, char *err, size_t errlen)
{
    Nexar__ErrorReply *er = nexar__error_reply__unpack(NULL, len, payload);
    if (!er) {
        snprintf(err, errlen, "the daemon sent an ERROR frame that does not decode");
        return NEXAR_ERR_INTERNAL;
    }
    int status = er->status ? (int)er->status : NEXAR_ERR_INTERNAL;
    snprintf(err, errlen, "%s", er->error && *er->error ? er->error
                                                         : nxt_status_text(status));
    nexar__error_reply__free_unpacked(er, NULL);
    return status;
}

int nxt_request(int fd, uint16_t type, const uint8_t *req, uint32_t req_len,
                int timeout_ms, uint16_t *reply_type, uint8_t **payload, uint32_t *len,
                char *err, size_t errlen)
{
    int rv = nx_chan_send(fd, type, req, req_len, NULL, 0);
    if (rv < 0) {
        snprintf(err, errlen, "cannot send to the daemon: %s", strerror(-rv));
        return rv == -EPIPE || rv == -ECONNRESET ? -NEXAR_ERR_UNAVAILABLE
                                                 : -NEXAR_ERR_INTERNAL;
    }
    struct nx_frame_hdr h;
    int fds[NX_FRAME_MAX_FDS], nfds = 0;
    rv = nx_chan_recv(fd, &h, payload, timeout_ms, fds, NX_FRAME_MAX_FDS, &nfds);
    for (int i = 0; i < nfds; i++)
        close(fds[i]); /* a control reply carries none; never leak what came anyway */
    switch (rv) {
    case 0:
        *reply_type = h.type;
        *len = h.length;
        return 0;
    case -ETIMEDOUT:
        snprintf(err, errlen, "the daemon did not answer within %d ms", timeout_ms);
        return -NEXAR_ERR_TIMEOUT;
    case -ECONNRESET:
    case -EPIPE:
        snprintf(err, errlen, "the daemon closed the connection");
        return -NEXAR_ERR_UNAVAILABLE;
    case -EPROTO:
    case -EPROTONOSUPPORT:
        snprintf(err, errlen, "the daemon sent a malformed frame");
        return -NEXAR_ERR_INTERNAL;
    default:
        snprintf(err, errlen, "cannot read from the daemon: %s", strerror(-rv));
        return -NEXAR_ERR_INTERNAL;
    }
}

/* Sends HELLO and checks that HELLO_REPLY comes back. */
static int handshake(int fd, int kind, int timeout_ms, struct nxt_hello *hello, char *err,
                     size_t errlen)
{
    Nexar__Hello msg = NEXAR__HELLO__INIT;
    msg.proto_version = NX_PROTO_VERSION;
    msg.kind = (Nexar__ClientKind)kind;
    msg.pid = (uint32_t)getpid();
    msg.client_version = (char *)NEXAR_VERSION;
    uint8_t buf[256];
    size_t n = nexar__hello__get_packed_size(&msg);
    if (n > sizeof(buf)) {
        snprintf(err, errlen, "HELLO does not fit its buffer");
        return -NEXAR_ERR_INTERNAL;
    }
    nexar__hello__pack(&msg, buf);

    uint16_t type;
    uint8_t *payload = NULL;
    uint32_t len;
    int rv = nxt_request(fd, NX_MSG_HELLO, buf, (uint32_t)n, timeout_ms, &type, &payload,
                         &len, err, errlen);
    if (rv < 0)
        return rv;
    if (type == NX_MSG_ERROR) {
        rv = -nxt_error_reply(payload, len, err, errlen);
        goto out;
    }
    Nexar__HelloReply *rep = type == NX_MSG_HELLO_REPLY
                                 ? nexar__hello_reply__unpack(NULL, len, payload)
                                 : NULL;
    if (!rep) {
        snprintf(err, errlen, "the daemon answered HELLO with frame type %u", type);
        rv = -NEXAR_ERR_INTERNAL;
        goto out;
    }
    if (hello) {
        hello->proto_version = rep->proto_version;
        hello->daemon_pid = rep->daemon_pid;
        snprintf(hello->daemon_version, sizeof(hello->daemon_version), "%s",
                 rep->daemon_version ? rep->daemon_version : "");
    }
    nexar__hello_reply__free_unpacked(rep, NULL);
out:
    free(payload);
    return rv;
}

int nxt_connect(const char *path, int kind, int timeout_ms, struct nxt_hello *hello,
                char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "socket path too long (at most %zu bytes): %s",
                 sizeof(sa.sun_path) - 1, path);
        return -NEXAR_ERR_INVALID;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -NEXAR_ERR_INTERNAL;
    }
    int rv = connect_until(fd, &sa, now_ms() + timeout_ms);
    if (rv == -ETIMEDOUT) {
        snprintf(err, errlen, "nexard at %s accepts no connections (backlog full)", path);
        rv = -NEXAR_ERR_TIMEOUT;
        goto fail;
    }
    if (rv < 0) {
        rv = connect_failed(-rv, path, err, errlen);
        goto fail;
    }
    /* The channel helpers block with their own timeouts. */
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
        snprintf(err, errlen, "fcntl: %s", strerror(errno));
        rv = -NEXAR_ERR_INTERNAL;
        goto fail;
    }
    rv = handshake(fd, kind, timeout_ms, hello, err, errlen);
    if (rv < 0) {
        if (rv == -NEXAR_ERR_UNAVAILABLE)
            snprintf(err, errlen, "no nexard answers at %s (it closed the connection)",
                     path);
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return rv;
}
