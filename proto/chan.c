/* chan.c - frame I/O on a Unix stream socket, with fd passing: blocking for the shim and
 * the tools; one nonblocking attempt for the daemon (nx_chan_try_send), which reads
 * through libuv and queues what a client does not take. */
#include "frame.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Room for the SCM_RIGHTS of one frame, aligned for a cmsghdr. */
union nx_fdbuf {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * NX_FRAME_MAX_FDS)];
};

/* Puts fds (nfds <= NX_FRAME_MAX_FDS, none when 0) on msg as SCM_RIGHTS, in cbuf. */
static void attach_fds(struct msghdr *msg, union nx_fdbuf *cbuf, const int *fds, int nfds)
{
    if (nfds <= 0)
        return;
    memset(cbuf, 0, sizeof(*cbuf));
    msg->msg_control = cbuf->buf;
    msg->msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
}

ssize_t nx_chan_try_send(int sock, const uint8_t *buf, size_t len, const int *fds, int nfds)
{
    if (nfds < 0 || nfds > NX_FRAME_MAX_FDS)
        return -EINVAL;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union nx_fdbuf cbuf;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    attach_fds(&msg, &cbuf, fds, nfds);
    for (;;) {
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
}

int nx_chan_send(int sock, uint16_t type, const uint8_t *payload, uint32_t length,
                 const int *fds, int nfds)
{
    uint8_t hdr[NX_FRAME_HDR_BYTES];
    if (length > NX_FRAME_MAX || nfds < 0 || nfds > NX_FRAME_MAX_FDS)
        return -EINVAL;
    nx_frame_hdr_encode(hdr, type, length);

    struct iovec iov[2] = {
        {.iov_base = hdr, .iov_len = sizeof(hdr)},
        {.iov_base = (void *)payload, .iov_len = length},
    };
    union nx_fdbuf cbuf;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = length ? 2 : 1};
    attach_fds(&msg, &cbuf, fds, nfds);

    size_t total = sizeof(hdr) + length;
    size_t sent = 0;
    while (sent < total) {
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                /* The daemon's sockets are nonblocking: a peer that does not read for
                 * a second is not worth stalling everyone else for. */
                struct pollfd pfd = {.fd = sock, .events = POLLOUT};
                if (poll(&pfd, 1, 1000) == 1)
                    continue;
                return -ETIMEDOUT;
            }
            return -errno;
        }
        sent += (size_t)n;
        /* The fds went with the first byte; never send them twice. */
        msg.msg_control = NULL;
        msg.msg_controllen = 0;
        size_t skip = (size_t)n;
        while (msg.msg_iovlen > 0 && skip >= msg.msg_iov[0].iov_len) {
            skip -= msg.msg_iov[0].iov_len;
            msg.msg_iov++;
            msg.msg_iovlen--;
        }
        if (msg.msg_iovlen > 0) {
            msg.msg_iov[0].iov_base = (char *)msg.msg_iov[0].iov_base + skip;
            msg.msg_iov[0].iov_len -= skip;
        }
    }
    return 0;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* Reads exactly len bytes; collects fds from any control message on the way, and sets
 * *ctrunc when the kernel could not hand them all over (our descriptor table is full). */
static int read_full(int sock, uint8_t *buf, size_t len, int64_t deadline, int *fds,
                     int max_fds, int *nfds, int *ctrunc)
{
    size_t have = 0;
    while (have < len) {
        if (deadline >= 0) {
            int64_t left = deadline - now_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            struct pollfd pfd = {.fd = sock, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)(left > 1000000 ? 1000000 : left));
            if (pr < 0) {
                if (errno == EINTR)
                    continue;
                return -errno;
            }
            if (pr == 0)
                return -ETIMEDOUT;
        }
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(sizeof(int) * NX_FRAME_MAX_FDS)];
        } cbuf;
        struct iovec iov = {.iov_base = buf + have, .iov_len = len - have};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf)};
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (msg.msg_flags & MSG_CTRUNC)
            *ctrunc = 1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int got[NX_FRAME_MAX_FDS];
            if (cnt > NX_FRAME_MAX_FDS)
                cnt = NX_FRAME_MAX_FDS;
            memcpy(got, CMSG_DATA(c), sizeof(int) * (size_t)cnt);
            for (int i = 0; i < cnt; i++) {
                if (fds && *nfds < max_fds)
                    fds[(*nfds)++] = got[i];
                else
                    close(got[i]);
            }
        }
        if (n == 0)
            return -ECONNRESET;
        have += (size_t)n;
    }
    return 0;
}

int nx_chan_recv(int sock, struct nx_frame_hdr *h, uint8_t **payload, int timeout_ms,
                 int *fds, int max_fds, int *nfds)
{
    uint8_t hdr[NX_FRAME_HDR_BYTES];
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    int dummy = 0, ctrunc = 0;
    if (!nfds)
        nfds = &dummy;
    *nfds = 0;
    *payload = NULL;

    int rv = read_full(sock, hdr, sizeof(hdr), deadline, fds, max_fds, nfds, &ctrunc);
    if (rv < 0)
        goto fail;
    rv = nx_frame_hdr_decode(hdr, h, NULL);
    if (rv < 0) {
        rv = -EPROTO;
        goto fail;
    }
    uint8_t *p = malloc((size_t)h->length + 1);
    if (!p) {
        rv = -ENOMEM;
        goto fail;
    }
    rv = read_full(sock, p, h->length, deadline, fds, max_fds, nfds, &ctrunc);
    if (rv == 0 && ctrunc && fds)
        rv = -EMFILE; /* the frame is read whole: the stream stays in step */
    if (rv < 0) {
        free(p);
        goto fail;
    }
    *payload = p;
    return 0;

fail:
    close_fds(fds, *nfds);
    *nfds = 0;
    return rv;
}

const char *nx_fd_why(int err, const char *who, const char *raise, char *buf, size_t len)
{
    struct rlimit r;
    if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &r) == 0)
        snprintf(buf, len, "%s has its maximum of %llu open files (%s)", who,
                 (unsigned long long)r.rlim_cur, raise);
    else if (err == ENFILE)
        snprintf(buf, len, "the system's table of open files is full (fs.file-max)");
    else
        snprintf(buf, len, "%s", strerror(err));
    return buf;
}
