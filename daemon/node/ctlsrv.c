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
#include "commctl.h"
#include "context.h"
#include "devop.h"
#include "frame.h"
#include "job.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "nexar.pb-c.h"

/* The listening socket is polled and accepted by hand rather than by uv_listen: libuv
 * accepts on a pipe until the backlog is empty, so a process that connects in a loop kept
 * the daemon inside accept() and every job of the node starved.  NX_ACCEPT_BATCH per turn
 * of the loop, then the rings and timers get theirs. */
#define NX_ACCEPT_BATCH 16
/* And at most NX_ACCEPT_RATE a second after a burst of NX_ACCEPT_BURST (every rank of a
 * large node starting at once): a process that connects in a loop otherwise kept the
 * daemon busy refusing it, and each op of every job waited behind its knocks.  The rest
 * wait in the kernel's backlog, where a knocker's connect() waits too. */
#define NX_ACCEPT_RATE 2000.0
#define NX_ACCEPT_BURST 256.0
#define NX_ACCEPT_PAUSE_MS 100 /* out of descriptors: look again after this */
static double accept_tokens = NX_ACCEPT_BURST, accept_refilled;
static uv_timer_t accept_timer;
static uv_poll_t server;
static int server_fd = -1;
static bool server_open, server_polled;
static int lock_fd = -1;
static char *lock_path;
static uint32_t nconns;
static nx_ctl_handler on_ctl_request;
static LIST_HEAD(, nx_conn) conns = LIST_HEAD_INITIALIZER(conns);

/* Connections beyond max_clients + NX_CONN_SLACK are refused; root has NX_CONN_SLACK
 * more, so that an administrator's nexarctl gets in however full the daemon is. */
#define NX_CONN_SLACK 16

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

void nx_conn_error(struct nx_conn *c, uint32_t status, const char *text)
{
    Nexar__ErrorReply er = NEXAR__ERROR_REPLY__INIT;
    er.status = status;
    er.error = (char *)text;
    nx_conn_send(c, NX_MSG_ERROR, &er, NULL, 0);
}

static void send_error_close(struct nx_conn *c, uint32_t status, const char *text)
{
    nx_conn_error(c, status, text);
    nx_conn_close(c);
}

void nx_conn_fail(struct nx_conn *c, uint32_t status, const char *text)
{
    NX_INFO("ctl", "refusing pid %d: %s", (int)c->pid, text);
    send_error_close(c, status, text);
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
    c->same_pidns = c->pid > 0 && h->pid == (uint32_t)c->pid;
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
    c->hello_at = nx_now();
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
    if (c->kind == NEXAR__CLIENT_KIND__CLIENT_RANK && c->client && h->type == NX_MSG_COMM_QUERY)
        return nx_commctl_frame(c, payload, h->length) < 0 || c->closing ? -1 : 0;
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
        c->last_rx = nx_now();
        int rv = nx_frame_parser_feed(&c->parser, (const uint8_t *)buf->base, (size_t)n,
                                      on_frame, c);
        /* A frame begun must be finished soon: half a frame held forever is a place
         * held without a word (and a buffer of up to NX_FRAME_MAX). */
        bool partial = c->parser.hdr_have != 0; /* 0 again once a frame is whole */
        if (!partial)
            c->partial_since = 0;
        else if (!c->partial_since)
            c->partial_since = c->last_rx;
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

/* One uid cannot take every place: beyond max_conns_per_uid its connections are refused,
 * and root keeps NX_CONN_SLACK places beyond everyone's cap. */
static bool refuse_over_limits(struct nx_conn *c)
{
    char msg[200];
    unsigned mine = 0;
    struct nx_conn *o;
    LIST_FOREACH(o, &conns, link)
        if (!o->closing && o->uid == c->uid)
            mine++;
    uint64_t cap = (uint64_t)nxd.cfg.max_clients + NX_CONN_SLACK;
    if (c->uid == 0)
        cap += NX_CONN_SLACK;
    if ((uint64_t)nconns > cap) {
        snprintf(msg, sizeof(msg), "too many connections to nexard (%u; max_clients = %u)",
                 nconns - 1, nxd.cfg.max_clients);
    } else if (c->uid != 0 && mine > nxd.cfg.max_conns_per_uid) {
        snprintf(msg, sizeof(msg), "uid %u already has %u connections to nexard "
                 "(max_conns_per_uid = %u)", (unsigned)c->uid, mine - 1,
                 nxd.cfg.max_conns_per_uid);
    } else {
        return false;
    }
    /* A flood of refusals must not become a flood of log lines: one a second, with a
     * count of the ones it stands for. */
    static double last_log;
    static unsigned unlogged;
    double now = nx_now();
    if (now - last_log >= 1.0) {
        if (unlogged)
            NX_WARN("ctl", "%u more connection(s) refused in the %.0f s before, not logged "
                    "one by one", unlogged, now - last_log);
        NX_WARN("ctl", "refusing a connection of pid %d (uid %u): %s", (int)c->pid,
                (unsigned)c->uid, msg);
        last_log = now;
        unlogged = 0;
    } else {
        unlogged++;
    }
    send_error_close(c, NEXAR_ERR_UNAVAILABLE, msg);
    return true;
}

static void on_connection(int fd)
{
    struct nx_conn *c = nx_xcalloc(1, sizeof(*c));
    uv_pipe_init(nxd.loop, &c->pipe, 0);
    c->pipe.data = c;
    c->accepted = nx_now();
    LIST_INSERT_HEAD(&conns, c, link);
    nconns++;
    int rv = uv_pipe_open(&c->pipe, fd);
    if (rv < 0) {
        NX_WARN("ctl", "cannot take a new connection: %s", uv_strerror(rv));
        close(fd);
        c->closing = 1;
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
        return;
    }
    nx_frame_parser_init(&c->parser);
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
    c->last_rx = c->accepted;
    if (refuse_over_limits(c))
        return;
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

static void on_acceptable(uv_poll_t *h, int status, int events);

static void on_accept_refill(uv_timer_t *t)
{
    uv_poll_start(&server, UV_READABLE, on_acceptable);
}

/* No descriptor for a new connection.  The socket stays readable while it waits in the
 * backlog, so looking again at once would spin (and log) until a descriptor came free:
 * look again in NX_ACCEPT_PAUSE_MS, logging at most once a second.  The waiting rank is
 * taken then, or gives up at its own deadline; the ranks that failed to join meanwhile
 * were told why (job.c). */
static void out_of_files(int err)
{
    static double last_log;
    double now = nx_now();
    if (now - last_log >= 1.0) {
        char why[160];
        NX_WARN("ctl", "cannot accept a connection: %s; trying again every %d ms",
                nx_fd_why(err, "nexard", "raise LimitNOFILE", why, sizeof(why)), NX_ACCEPT_PAUSE_MS);
        last_log = now;
    }
    uv_poll_stop(&server);
    uv_timer_start(&accept_timer, on_accept_refill, NX_ACCEPT_PAUSE_MS, 0);
}

static void on_acceptable(uv_poll_t *h, int status, int events)
{
    double now = nx_now();
    accept_tokens += (now - accept_refilled) * NX_ACCEPT_RATE;
    accept_refilled = now;
    if (accept_tokens > NX_ACCEPT_BURST)
        accept_tokens = NX_ACCEPT_BURST;
    if (accept_tokens < 1.0) {
        /* Out of tokens: look again once a batch's worth has come back. */
        uv_poll_stop(&server);
        uint64_t ms = (uint64_t)((NX_ACCEPT_BATCH - accept_tokens) / NX_ACCEPT_RATE * 1000) + 1;
        uv_timer_start(&accept_timer, on_accept_refill, ms, 0);
        return;
    }
    for (int i = 0; i < NX_ACCEPT_BATCH && accept_tokens >= 1.0; i++) {
        accept_tokens -= 1.0;
        int fd = accept4(server_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            on_connection(fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE) {
            out_of_files(errno);
            return;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            NX_WARN("ctl", "accept failed: %s", strerror(errno));
        break;
    }
}

/* Why c should go now, or NULL.  A rank in a job stays however quiet it is (its ring
 * carries its work); everyone else holds a place only while it uses it. */
static const char *idle_reason(const struct nx_conn *c, double now, char *buf, size_t len)
{
    const double t = nxd.cfg.conn_timeout_s;
    if (c->partial_since && now - c->partial_since > t)
        snprintf(buf, len, "a frame begun %.0f s ago was not finished (conn_timeout_s = %u)",
                 now - c->partial_since, nxd.cfg.conn_timeout_s);
    else if (c->kind == 0 && now - c->accepted > t)
        snprintf(buf, len, "no HELLO within %u s (conn_timeout_s)", nxd.cfg.conn_timeout_s);
    else if (c->kind == NEXAR__CLIENT_KIND__CLIENT_RANK && !c->client && now - c->hello_at > t)
        snprintf(buf, len, "a rank's connection without JOIN for %u s (conn_timeout_s)",
                 nxd.cfg.conn_timeout_s);
    else if (c->kind == NEXAR__CLIENT_KIND__CLIENT_CTL && !c->on_close &&
             now - c->last_rx > nxd.cfg.ctl_idle_s)
        snprintf(buf, len, "a control connection idle for %u s (ctl_idle_s)",
                 nxd.cfg.ctl_idle_s);
    else
        return NULL;
    return buf;
}

void nx_ctlsrv_tick(double now)
{
    struct nx_conn *c, *tmp;
    char why[160];
    for (c = LIST_FIRST(&conns); c; c = tmp) {
        tmp = LIST_NEXT(c, link);
        if (c->closing || !idle_reason(c, now, why, sizeof(why)))
            continue;
        NX_INFO("ctl", "closing the connection of pid %d (uid %u): %s", (int)c->pid,
                (unsigned)c->uid, why);
        nx_conn_fail(c, NEXAR_ERR_TIMEOUT, why);
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
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        NX_ERROR("ctl", "socket path %s is longer than %zu bytes", path,
                 sizeof(sa.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    server_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (server_fd < 0)
        return -errno;
    mode_t old = umask(0);
    rv = bind(server_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
    umask(old);
    if (rv < 0) {
        NX_ERROR("ctl", "cannot bind %s: %s", path, strerror(-rv));
        close(server_fd);
        server_fd = -1;
        return rv;
    }
    server_open = true;
    /* Any local user may connect; which jobs they may join is decided per job by uid. */
    chmod(path, 0666);
    if (listen(server_fd, 128) < 0) {
        rv = -errno;
        NX_ERROR("ctl", "cannot listen on %s: %s", path, strerror(errno));
        return rv;
    }
    if ((rv = uv_poll_init(nxd.loop, &server, server_fd)) < 0)
        return rv;
    uv_timer_init(nxd.loop, &accept_timer);
    accept_refilled = nx_now();
    server_polled = true;
    if ((rv = uv_poll_start(&server, UV_READABLE, on_acceptable)) < 0)
        return rv;
    NX_INFO("ctl", "listening on %s", path);
    return 0;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (h->type == UV_NAMED_PIPE && !uv_is_closing(h) &&
        h->data)
        nx_conn_close(h->data);
}

void nx_ctlsrv_stop_listening(void)
{
    if (server_open) {
        if (server_polled) {
            uv_close((uv_handle_t *)&server, NULL);
            uv_close((uv_handle_t *)&accept_timer, NULL);
        }
        server_polled = false;
        close(server_fd);
        server_fd = -1;
        unlink(nxd.cfg.socket_path);
        server_open = false;
    }
}

void nx_ctlsrv_fini(void)
{
    nx_ctlsrv_stop_listening();
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
