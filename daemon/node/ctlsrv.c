/* ctlsrv.c - see ctlsrv.h. */
#include "ctlsrv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "context.h"
#include "devop.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "nexar.pb-c.h"

static uv_pipe_t server;
static bool server_open;
static int lock_fd = -1;
static char *lock_path;
static uint32_t nconns;
static nx_ctl_handler on_ctl_request;
static LIST_HEAD(, nx_conn) conns = LIST_HEAD_INITIALIZER(conns);

/* A connection must say HELLO this soon, or it is closed: idle sockets must not
 * use up max_clients and lock real ranks out. */
#define NX_HELLO_DEADLINE_S 5.0

/* Refuses a runtime directory that others could plant files in. */
static int check_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        NX_ERROR("ctl", "cannot create runtime directory %s: %s", dir, strerror(errno));
        return -errno;
    }
    if (stat(dir, &st) < 0) {
        NX_ERROR("ctl", "cannot stat runtime directory %s: %s", dir, strerror(errno));
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        NX_ERROR("ctl", "runtime directory %s is not a directory", dir);
        return -ENOTDIR;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        NX_ERROR("ctl", "runtime directory %s belongs to uid %u, not to us (uid %u) or root",
                 dir, (unsigned)st.st_uid, (unsigned)geteuid());
        return -EPERM;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        NX_ERROR("ctl", "runtime directory %s is writable by others (mode %03o)", dir,
                 (unsigned)(st.st_mode & 0777));
        return -EPERM;
    }
    return 0;
}

static int take_lock(const char *dir)
{
    lock_path = nx_xasprintf("%s/nexard.lock", dir);
    lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0) {
        NX_ERROR("ctl", "cannot open lock file %s: %s", lock_path, strerror(errno));
        return -errno;
    }
    if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
        char pid[32] = "?";
        ssize_t n = pread(lock_fd, pid, sizeof(pid) - 1, 0);
        if (n > 0) {
            pid[n] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
        }
        NX_ERROR("ctl", "another nexard (pid %s) holds %s; is it still running?", pid,
                 lock_path);
        close(lock_fd);
        lock_fd = -1;
        return -EBUSY;
    }
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    if (ftruncate(lock_fd, 0) < 0 || pwrite(lock_fd, buf, (size_t)len, 0) != len)
        NX_WARN("ctl", "cannot write pid to %s: %s", lock_path, strerror(errno));
    return 0;
}

/* A socket file nobody answers on is left over from a daemon that died: remove it.
 * One that answers belongs to a live daemon (with another runtime directory). */
static int clear_stale_socket(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        NX_ERROR("ctl", "%s exists and is not a socket; refusing to replace it", path);
        return -EEXIST;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        close(fd);
        NX_ERROR("ctl", "a live daemon already answers on %s", path);
        return -EADDRINUSE;
    }
    if (fd >= 0)
        close(fd);
    NX_INFO("ctl", "removing stale socket %s", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static void on_conn_closed(uv_handle_t *h)
{
    struct nx_conn *c = h->data;
    LIST_REMOVE(c, link);
    nx_frame_parser_fini(&c->parser);
    free(c);
    nconns--;
}

void nx_conn_close(struct nx_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (c->on_close)
        c->on_close(c);
    if (c->client) {
        struct nx_client *cl = c->client;
        c->client = NULL;
        cl->conn = NULL;
        nx_client_drop(cl, "control connection closed (the rank exited or finalized)");
    }
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* A frame (or the rest of one) queued on a connection's libuv stream. */
struct out_frame {
    uv_write_t req;
    uint8_t data[];
};

static void on_written(uv_write_t *req, int status)
{
    (void)status; /* a failed write shows as the connection's end, read side */
    free((struct out_frame *)((char *)req - offsetof(struct out_frame, req)));
}

int nx_conn_send(struct nx_conn *c, uint16_t type, const void *msg_pb, const int *fds,
                 int nfds)
{
    const ProtobufCMessage *m = msg_pb;
    if (c->closing)
        return -EPIPE;
    size_t len = protobuf_c_message_get_packed_size(m);
    if (len > NX_FRAME_MAX)
        return -EMSGSIZE;
    size_t total = NX_FRAME_HDR_BYTES + len;
    struct out_frame *o = nx_xmalloc(sizeof(*o) + total);
    nx_frame_hdr_encode(o->data, type, (uint32_t)len);
    protobuf_c_message_pack(m, o->data + NX_FRAME_HDR_BYTES);
    /* Never wait for a client: what it does not take now is queued on its stream, up to
     * NX_CONN_QUEUE_MAX, and a client that lets more pile up is dropped.  (Blocking here
     * for a client that does not read stalled every job of the node.) */
    size_t queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe), off = 0;
    if (nfds > 0) {
        /* Descriptors travel with the first byte of their frame, which must not overtake
         * anything queued: written directly, or the client is not keeping up. */
        ssize_t n = queued ? 0 : nx_chan_try_send(c->fd, o->data, total, fds, nfds);
        if (n <= 0) {
            free(o);
            NX_WARN("ctl", "pid %d does not take its messages (%zu bytes unread); "
                    "closing its connection", (int)c->pid, queued);
            nx_conn_close(c);
            return n < 0 ? (int)n : -ENOBUFS;
        }
        off = (size_t)n;
        if (off == total) {
            free(o);
            return 0;
        }
    }
    if (queued + (total - off) > NX_CONN_QUEUE_MAX) {
        free(o);
        NX_WARN("ctl", "pid %d does not read its control socket (%zu bytes unread); "
                "closing its connection", (int)c->pid, queued);
        nx_conn_close(c);
        return -ENOBUFS;
    }
    uv_buf_t b = uv_buf_init((char *)o->data + off, (unsigned)(total - off));
    int rv = uv_write(&o->req, (uv_stream_t *)&c->pipe, &b, 1, on_written);
    if (rv < 0) {
        free(o);
        return rv;
    }
    return 0;
}

void nx_conn_fail(struct nx_conn *c, uint32_t status, const char *text)
{
    Nexar__ErrorReply er = NEXAR__ERROR_REPLY__INIT;
    er.status = status;
    er.error = (char *)text;
    NX_INFO("ctl", "refusing pid %d: %s", (int)c->pid, text);
    nx_conn_send(c, NX_MSG_ERROR, &er, NULL, 0);
    nx_conn_close(c);
}

static int on_hello(struct nx_conn *c, const uint8_t *p, uint32_t len)
{
    Nexar__Hello *h = nexar__hello__unpack(NULL, len, p);
    if (!h) {
        nx_conn_fail(c, NEXAR_ERR_INVALID, "HELLO does not decode");
        return -1;
    }
    uint32_t ver = h->proto_version;
    int kind = h->kind;
    nexar__hello__free_unpacked(h, NULL);
    if (ver != NX_PROTO_VERSION) {
        char msg[128];
        snprintf(msg, sizeof(msg), "protocol version %u is not supported (nexard speaks %u)",
                 ver, NX_PROTO_VERSION);
        nx_conn_fail(c, NEXAR_ERR_UNSUPPORTED, msg);
        return -1;
    }
    if (kind != NEXAR__CLIENT_KIND__CLIENT_RANK && kind != NEXAR__CLIENT_KIND__CLIENT_CTL) {
        nx_conn_fail(c, NEXAR_ERR_INVALID, "HELLO names an unknown client kind");
        return -1;
    }
    c->kind = kind;
    Nexar__HelloReply r = NEXAR__HELLO_REPLY__INIT;
    r.proto_version = NX_PROTO_VERSION;
    r.daemon_version = NEXAR_VERSION;
    r.daemon_pid = (uint64_t)getpid();
    r.features = nx_device_features();
    r.device_note = nx_device_note;
    if (nx_conn_send(c, NX_MSG_HELLO_REPLY, &r, NULL, 0) < 0) {
        nx_conn_close(c);
        return -1;
    }
    return 0;
}

static int on_frame(void *arg, const struct nx_frame_hdr *h, const uint8_t *payload)
{
    struct nx_conn *c = arg;
    if (c->closing)
        return -1;
    if (c->kind == 0) {
        if (h->type != NX_MSG_HELLO) {
            nx_conn_fail(c, NEXAR_ERR_INVALID, "the first message must be HELLO");
            return -1;
        }
        return on_hello(c, payload, h->length);
    }
    if (c->kind == NEXAR__CLIENT_KIND__CLIENT_RANK && h->type == NX_MSG_JOIN && !c->client) {
        Nexar__JoinRequest *req = nexar__join_request__unpack(NULL, h->length, payload);
        if (!req) {
            nx_conn_fail(c, NEXAR_ERR_INVALID, "JOIN does not decode");
            return -1;
        }
        nx_job_join(c, req);
        nexar__join_request__free_unpacked(req, NULL);
        return c->closing ? -1 : 0;
    }
    if (c->kind == NEXAR__CLIENT_KIND__CLIENT_RANK && c->client &&
        (h->type == NX_MSG_DEV_REGISTER || h->type == NX_MSG_DEV_UNREGISTER))
        return nx_devctl_frame(c, h, payload) < 0 || c->closing ? -1 : 0;
    if (c->kind == NEXAR__CLIENT_KIND__CLIENT_CTL && h->type == NX_MSG_CTL) {
        Nexar__CtlRequest *req = nexar__ctl_request__unpack(NULL, h->length, payload);
        if (!req) {
            nx_conn_fail(c, NEXAR_ERR_INVALID, "CTL does not decode");
            return -1;
        }
        on_ctl_request(c, req);
        nexar__ctl_request__free_unpacked(req, NULL);
        return c->closing ? -1 : 0;
    }
    char msg[96];
    snprintf(msg, sizeof(msg), "unexpected message type %u at this point", h->type);
    nx_conn_fail(c, NEXAR_ERR_INVALID, msg);
    return -1;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char slab[65536];
    buf->base = slab;
    buf->len = sizeof(slab);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct nx_conn *c = s->data;
    if (n > 0) {
        int rv = nx_frame_parser_feed(&c->parser, (const uint8_t *)buf->base, (size_t)n,
                                      on_frame, c);
        if (rv < 0 && !c->closing) {
            const char *why = c->parser.why ? c->parser.why : "bad frame";
            NX_WARN("ctl", "dropping connection of pid %d: %s", (int)c->pid, why);
            nxd.stats.protocol_violations++;
            /* Tell the peer why before closing: an old or new client learns that its
             * protocol version is the problem, not that the daemon crashed. */
            nx_conn_fail(c, rv == -EPROTONOSUPPORT ? NEXAR_ERR_UNSUPPORTED : NEXAR_ERR_INVALID,
                         why);
        }
    } else if (n < 0) {
        nx_conn_close(c);
    }
    nx_clients_flush();
}

static void on_connection(uv_stream_t *srv, int status)
{
    if (status < 0) {
        NX_WARN("ctl", "accept failed: %s", uv_strerror(status));
        return;
    }
    struct nx_conn *c = nx_xcalloc(1, sizeof(*c));
    uv_pipe_init(nxd.loop, &c->pipe, 0);
    c->pipe.data = c;
    c->accepted = nx_now();
    LIST_INSERT_HEAD(&conns, c, link);
    nconns++;
    if (uv_accept(srv, (uv_stream_t *)&c->pipe) < 0) {
        c->closing = 1;
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
        return;
    }
    nx_frame_parser_init(&c->parser);
    uv_os_fd_t fd;
    uv_fileno((uv_handle_t *)&c->pipe, &fd);
    c->fd = fd;
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
        NX_WARN("ctl", "SO_PEERCRED failed: %s", strerror(errno));
        nx_conn_close(c);
        return;
    }
    c->pid = cred.pid;
    c->uid = cred.uid;
    c->gid = cred.gid;
    if (nconns > nxd.cfg.max_clients + 16) {
        nx_conn_fail(c, NEXAR_ERR_UNAVAILABLE, "too many connections to nexard");
        return;
    }
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

void nx_ctlsrv_tick(double now)
{
    struct nx_conn *c, *tmp;
    for (c = LIST_FIRST(&conns); c; c = tmp) {
        tmp = LIST_NEXT(c, link);
        if (c->kind == 0 && !c->closing && now - c->accepted > NX_HELLO_DEADLINE_S) {
            NX_INFO("ctl", "closing connection of pid %d: no HELLO within %.0f s", (int)c->pid,
                    NX_HELLO_DEADLINE_S);
            nx_conn_fail(c, NEXAR_ERR_INVALID, "no HELLO within the handshake deadline");
        }
    }
}

int nx_ctlsrv_init(nx_ctl_handler on_ctl)
{
    on_ctl_request = on_ctl;
    const char *path = nxd.cfg.socket_path;
    int rv = check_dir(nxd.cfg.runtime_dir);
    if (rv < 0)
        return rv;
    if ((rv = take_lock(nxd.cfg.runtime_dir)) < 0)
        return rv;
    if ((rv = clear_stale_socket(path)) < 0)
        return rv;
    uv_pipe_init(nxd.loop, &server, 0);
    server_open = true;
    mode_t old = umask(0);
    rv = uv_pipe_bind(&server, path);
    umask(old);
    if (rv < 0) {
        NX_ERROR("ctl", "cannot bind %s: %s", path, uv_strerror(rv));
        return rv;
    }
    /* Any local user may connect; which jobs they may join is decided per job by uid. */
    chmod(path, 0666);
    if ((rv = uv_listen((uv_stream_t *)&server, 128, on_connection)) < 0) {
        NX_ERROR("ctl", "cannot listen on %s: %s", path, uv_strerror(rv));
        return rv;
    }
    NX_INFO("ctl", "listening on %s", path);
    return 0;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (h->type == UV_NAMED_PIPE && h != (uv_handle_t *)&server && !uv_is_closing(h) &&
        h->data)
        nx_conn_close(h->data);
}

void nx_ctlsrv_fini(void)
{
    if (server_open) {
        uv_close((uv_handle_t *)&server, NULL);
        unlink(nxd.cfg.socket_path);
        server_open = false;
    }
    uv_walk(nxd.loop, close_walk, NULL);
    nx_clients_flush();
    if (lock_fd >= 0) {
        unlink(lock_path);
        close(lock_fd);
        lock_fd = -1;
    }
    free(lock_path);
    lock_path = NULL;
}
