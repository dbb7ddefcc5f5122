/*
 * control.c - the control socket: connect, HELLO, JOIN, receive the segment and its
 * doorbells (SCM_RIGHTS), map the segment and check its header.
 *
 * After the join the socket stays open and idle; the daemon learns that this rank
 * left when it closes, and the shim learns that the daemon went away when it becomes
 * readable (an ERROR frame, then EOF).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "nexar.pb-c.h"
#include "shim.h"

/* How long a HELLO reply may take: NEXAR_TIMEOUT when the rank set one (a job that asks
 * to fail within 2 s must not wait 10 s for a daemon that does not answer), else 10 s. */
#define NX_HELLO_TIMEOUT_MS 10000
static int hello_timeout_ms(const struct nx_env *env)
{
    return env->timeout_ms && env->timeout_ms < NX_HELLO_TIMEOUT_MS ? (int)env->timeout_ms
                                                                    : NX_HELLO_TIMEOUT_MS;
}

static nexar_status_t send_msg(int sock, uint16_t type, const ProtobufCMessage *m,
                               const char *sockpath)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return nx_fail(NEXAR_ERR_NOMEM, "nexar_init: out of memory");
    protobuf_c_message_pack(m, buf);
    int rv = nx_chan_send(sock, type, buf, (uint32_t)len, NULL, 0);
    free(buf);
    if (rv < 0)
        return nx_fail(NEXAR_ERR_UNAVAILABLE,
                       "nexar_init: cannot send to nexard at %s (%s); is nexard running?",
                       sockpath, strerror(-rv));
    return NEXAR_OK;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/*
 * Receives one frame of type want.  An ERROR frame becomes its status and text.  On
 * success the caller frees *payload; fds (up to max_fds) are the caller's.
 */
static nexar_status_t recv_msg(int sock, uint16_t want, int timeout_ms, const char *what,
                               const struct nx_env *env, uint8_t **payload,
                               struct nx_frame_hdr *h, int *fds, int max_fds, int *nfds)
{
    int rv = nx_chan_recv(sock, h, payload, timeout_ms, fds, max_fds, nfds);
    switch (rv) {
    case 0:
        break;
    case -ETIMEDOUT:
        return nx_fail(NEXAR_ERR_TIMEOUT,
                       "nexar_init: no %s from nexard at %s within %d s (job \"%s\", rank %u "
                       "of %u)",
                       what, env->socket, timeout_ms / 1000, env->job, env->rank, env->size);
    case -ECONNRESET:
        return nx_fail(NEXAR_ERR_UNAVAILABLE,
                       "nexar_init: nexard at %s closed the connection before its %s", env->socket,
                       what);
    case -ENOMEM:
        return nx_fail(NEXAR_ERR_NOMEM, "nexar_init: out of memory");
    case -EMFILE: {
        char why[128];
        return nx_fail(NEXAR_ERR_NOMEM,
                       "nexar_init: no room for the descriptors of nexard's %s: %s", what,
                       nx_fd_why(EMFILE, "this process", "ulimit -n", why, sizeof(why)));
    }
    case -EPROTO:
        return nx_fail(NEXAR_ERR_INTERNAL,
                       "nexar_init: nexard at %s sent a malformed frame instead of its %s",
                       env->socket, what);
    default:
        return nx_fail(NEXAR_ERR_UNAVAILABLE, "nexar_init: reading from nexard at %s: %s",
                       env->socket, strerror(-rv));
    }
    nexar_status_t s = NEXAR_OK;
    if (h->type == NX_MSG_ERROR) {
        Nexar__ErrorReply *er = nexar__error_reply__unpack(NULL, h->length, *payload);
        s = er ? nx_status_from_wire(er->status) : NEXAR_ERR_INTERNAL;
        if (s == NEXAR_OK)
            s = NEXAR_ERR_INTERNAL;
        nx_fail(s, "nexar_init: nexard refused the %s: %s",
                want == NX_MSG_HELLO_REPLY ? "connection" : "join",
                er && er->error && *er->error ? er->error : nexar_strerror(s));
        if (er)
            nexar__error_reply__free_unpacked(er, NULL);
    } else if (h->type != want) {
        s = nx_fail(NEXAR_ERR_INTERNAL,
                    "nexar_init: nexard sent message type %u instead of its %s", h->type,
                    what);
    }
    if (s != NEXAR_OK) {
        free(*payload);
        *payload = NULL;
        close_fds(fds, *nfds);
        *nfds = 0;
    }
    return s;
}

static nexar_status_t connect_daemon(const struct nx_env *env, int *out)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        int e = errno;
        char why[128];
        bool res = e == ENOMEM || e == ENOBUFS || e == EMFILE || e == ENFILE;
        return nx_fail(res ? NEXAR_ERR_NOMEM : NEXAR_ERR_INTERNAL,
                       "nexar_init: socket(AF_UNIX): %s",
                       nx_fd_why(e, "this process", "ulimit -n", why, sizeof(why)));
    }
    memcpy(a.sun_path, env->socket, strlen(env->socket) + 1);
    int rv;
    do
        rv = connect(sock, (const struct sockaddr *)&a, sizeof(a));
    while (rv < 0 && errno == EINTR);
    if (rv < 0) {
        int e = errno;
        close(sock);
        if (e == EACCES || e == EPERM)
            return nx_fail(NEXAR_ERR_PERMISSION,
                           "nexar_init: not allowed to connect to nexard at %s (connect: %s); "
                           "check the socket's permissions",
                           env->socket, strerror(e));
        return nx_fail(NEXAR_ERR_UNAVAILABLE,
                       "no nexard answers at %s (connect: %s); is nexard running? start it, "
                       "or run under nexar-run",
                       env->socket, strerror(e));
    }
    *out = sock;
    return NEXAR_OK;
}

static nexar_status_t hello(int sock, const struct nx_env *env, struct nx_join *j)
{
    Nexar__Hello m = NEXAR__HELLO__INIT;
    struct nx_frame_hdr h;
    uint8_t *p = NULL;
    int nfds = 0;
    m.proto_version = NX_PROTO_VERSION;
    m.kind = NEXAR__CLIENT_KIND__CLIENT_RANK;
    m.pid = (uint32_t)getpid();
    m.client_version = (char *)"libnexarshim " NEXAR_VERSION;
    nexar_status_t s = send_msg(sock, NX_MSG_HELLO, &m.base, env->socket);
    if (s != NEXAR_OK)
        return s;
    s = recv_msg(sock, NX_MSG_HELLO_REPLY, hello_timeout_ms(env), "HELLO reply", env, &p, &h,
                 NULL, 0, &nfds);
    if (s != NEXAR_OK || !p)
        return s != NEXAR_OK ? s : NEXAR_ERR_INTERNAL;
    Nexar__HelloReply *r = nexar__hello_reply__unpack(NULL, h.length, p);
    free(p);
    if (!r)
        return nx_fail(NEXAR_ERR_INTERNAL, "nexar_init: nexard's HELLO reply does not decode");
    j->features = r->features;
    snprintf(j->device_note, sizeof(j->device_note), "%s",
             r->device_note && *r->device_note ? r->device_note
                                                : "this nexard predates device buffers");
    nexar__hello_reply__free_unpacked(r, NULL);
    return NEXAR_OK;
}

static nexar_status_t join(const struct nx_env *env, struct nx_join *j)
{
    Nexar__JoinRequest m = NEXAR__JOIN_REQUEST__INIT;
    struct nx_frame_hdr h;
    uint8_t *p = NULL;
    int fds[NX_FRAME_MAX_FDS], nfds = 0;
    m.job = (char *)env->job;
    m.rank = env->rank;
    m.world_size = env->size;
    m.local_rank = env->local_rank;
    m.timeout_ms = env->timeout_ms;
    m.coord = (char *)env->coord;
    m.coord_guessed = env->coord_guessed;
    m.algo = (char *)env->algo;
    m.joiner = env->joiner;
    m.peer_reads = env->peer_reads && !env->joiner;
    m.single_copy = m.peer_reads && env->single_copy && nx_single_copy_probe();
    if (env->joiner)
        m.rank = m.world_size = m.local_rank = 0;
    nexar_status_t s = send_msg(j->sock, NX_MSG_JOIN, &m.base, env->socket);
    if (s != NEXAR_OK)
        return s;
    /* Without NEXAR_TIMEOUT the daemon's op_timeout_s (up to a week) bounds formation;
     * it always answers first, so wait as long as it might. */
    uint64_t wait_ms =
        (uint64_t)(env->timeout_ms ? env->timeout_ms : NX_MAX_TIMEOUT_MS) + NX_JOIN_GRACE_MS;
    s = recv_msg(j->sock, NX_MSG_JOIN_REPLY, wait_ms > INT_MAX ? INT_MAX : (int)wait_ms,
                 "JOIN reply", env, &p, &h, fds, NX_FRAME_MAX_FDS, &nfds);
    if (s != NEXAR_OK || !p)
        return s != NEXAR_OK ? s : NEXAR_ERR_INTERNAL;
    Nexar__JoinReply *r = nexar__join_reply__unpack(NULL, h.length, p);
    free(p);
    if (!r) {
        close_fds(fds, nfds);
        return nx_fail(NEXAR_ERR_INTERNAL, "nexar_init: nexard's JOIN reply does not decode");
    }
    if (r->status != 0) {
        s = nx_status_from_wire(r->status);
        nx_fail(s, "%s", r->error && *r->error ? r->error : nexar_strerror(s));
    } else if (r->pull_count == 1 || r->pull_count > NX_PULL_MAX_RANKS ||
               (r->pull_count && r->pull_index >= r->pull_count) ||
               nfds != 3 + (r->pull_count ? (int)r->pull_count - 1 : 0)) {
        s = nx_fail(NEXAR_ERR_INTERNAL,
                    "nexar_init: nexard's JOIN reply carried %d file descriptors for %u peer "
                    "segments (index %u)", nfds, r->pull_count, r->pull_index);
    } else if ((r->n_pull_pids && r->n_pull_pids != r->pull_count) ||
               (r->single_copy && !r->n_pull_pids)) {
        s = nx_fail(NEXAR_ERR_INTERNAL,
                    "nexar_init: nexard's JOIN reply named %zu pids for %u peer segments",
                    r->n_pull_pids, r->pull_count);
    } else if (r->size == 0 || r->rank >= r->size || r->segment_bytes == 0) {
        s = nx_fail(NEXAR_ERR_INTERNAL,
                    "nexar_init: nexard's JOIN reply is inconsistent (rank %u of %u, %llu "
                    "segment bytes)",
                    r->rank, r->size, (unsigned long long)r->segment_bytes);
    } else {
        j->memfd = fds[0];
        j->sq_efd = fds[1];
        j->cq_efd = fds[2];
        j->pull_count = r->pull_count;
        j->pull_index = r->pull_index;
        for (uint32_t i = 0, k = 3; i < r->pull_count; i++)
            j->pull_fds[i] = i == r->pull_index ? -1 : fds[k++];
        nfds = 0;
        j->client_id = r->client_id;
        j->world_comm = r->world_comm;
        j->plan = (r->local_plan ? NX_PLAN_LOCAL : 0u) |
                  (r->single_copy ? NX_PLAN_CMA : 0u); /* with pids: checked above */
        if (!r->n_pull_pids) /* the job here does not single-copy: no peer reads us */
            nx_single_copy_release();
        for (size_t i = 0; i < r->n_pull_pids; i++)
            j->pull_pids[i] = r->pull_pids[i];
        j->rank = r->rank;
        j->size = r->size;
        j->segment_bytes = r->segment_bytes;
        /* An older daemon does not say: it used what we asked, or its 300 s default. */
        j->timeout_ms = r->timeout_ms ? r->timeout_ms
                        : env->timeout_ms ? env->timeout_ms : NX_DEFAULT_TIMEOUT_MS;
    }
    close_fds(fds, nfds);
    nexar__join_reply__free_unpacked(r, NULL);
    return s;
}

nexar_status_t nx_control_join(const struct nx_env *env, struct nx_join *j)
{
    nexar_status_t s;
    *j = (struct nx_join){.sock = -1, .memfd = -1, .sq_efd = -1, .cq_efd = -1};
    for (size_t i = 0; i < NX_PULL_MAX_RANKS; i++)
        j->pull_fds[i] = -1;
    if ((s = connect_daemon(env, &j->sock)) != NEXAR_OK)
        return s;
    if ((s = hello(j->sock, env, j)) != NEXAR_OK)
        goto fail_sock;
    if ((s = join(env, j)) != NEXAR_OK)
        goto fail_sock;
    return NEXAR_OK;

fail_sock:
    nx_single_copy_release(); /* whatever join's probe let in */
    close(j->sock);
    j->sock = -1;
    return s;
}

nexar_status_t nx_control_map(const struct nx_join *j)
{
    struct stat st;
    if (fstat(j->memfd, &st) < 0)
        return nx_fail(NEXAR_ERR_INTERNAL, "nexar_init: fstat(segment memfd): %s",
                       strerror(errno));
    if (st.st_size < 0 || (uint64_t)st.st_size < j->segment_bytes ||
        j->segment_bytes < sizeof(struct nx_shm_hdr) || j->segment_bytes > SIZE_MAX)
        return nx_fail(NEXAR_ERR_INTERNAL,
                       "nexar_init: the segment memfd holds %lld bytes, the reply announced "
                       "%llu",
                       (long long)st.st_size, (unsigned long long)j->segment_bytes);
    void *m = mmap(NULL, (size_t)j->segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                   j->memfd, 0);
    if (m == MAP_FAILED)
        return nx_fail(errno == ENOMEM ? NEXAR_ERR_NOMEM : NEXAR_ERR_INTERNAL,
                       "nexar_init: mmap of the %llu-byte segment: %s",
                       (unsigned long long)j->segment_bytes, strerror(errno));
    memcpy(&nx_S.hdr, m, sizeof(nx_S.hdr));
    if (nx_shm_hdr_check(&nx_S.hdr, j->segment_bytes) < 0) {
        munmap(m, (size_t)j->segment_bytes);
        return nx_fail(NEXAR_ERR_INTERNAL,
                       "nexar_init: the segment header from nexard is not valid (magic "
                       "0x%08x, version %u; this library speaks version %u)",
                       nx_S.hdr.magic, nx_S.hdr.version, NX_SHM_VERSION);
    }
    nx_ring_attach(m, j->segment_bytes);
    nx_wake_set(nx_S.cq_wake, 0); /* awake: we poll until we sleep */
    return NEXAR_OK;
}

nexar_status_t nx_control_drain(char *text, size_t len)
{
    nexar_status_t s = NEXAR_OK;
    struct nx_frame_hdr h;
    uint8_t *p = NULL;
    snprintf(text, len, "the control connection closed");
    for (int i = 0; i < 4; i++) {
        int rv = nx_chan_recv(nx_S.sock, &h, &p, 100, NULL, 0, NULL);
        if (rv == -ECONNRESET)
            return s;
        if (rv < 0) {
            snprintf(text, len, "the control connection failed (%s)", strerror(-rv));
            return s;
        }
        if (h.type == NX_MSG_ERROR) {
            Nexar__ErrorReply *er = nexar__error_reply__unpack(NULL, h.length, p);
            if (er && er->error && *er->error)
                snprintf(text, len, "%s", er->error);
            s = er ? nx_status_from_wire(er->status) : NEXAR_OK;
            if (s == NEXAR_OK)
                s = NEXAR_ERR_INTERNAL;
            if (er)
                nexar__error_reply__free_unpacked(er, NULL);
            free(p);
            return s;
        }
        free(p);
        p = NULL;
    }
    return s;
}

/* ---- requests after the join: device registrations, communicator queries ----------- */

#define NX_CALL_REPLY_TIMEOUT_MS 30000

/* One request and its reply of type want (payload to *p, which the caller frees).  The
 * lock is held throughout, so nobody else reads the socket meanwhile (the poller re-checks
 * it under the lock before it believes a wakeup).  Anything but that reply means the
 * daemon dropped us or went away: the shim is dead then. */
static nexar_status_t call(uint16_t type, const ProtobufCMessage *m, uint16_t want,
                           const char *what, uint8_t **p, uint32_t *plen)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    struct nx_frame_hdr h;
    char text[NX_ERR_TEXT_BYTES];
    *p = NULL;
    if (!buf)
        return nx_fail(NEXAR_ERR_NOMEM, "%s: out of memory", what);
    protobuf_c_message_pack(m, buf);
    int rv = nx_chan_send(nx_S.sock, type, buf, (uint32_t)len, NULL, 0);
    free(buf);
    if (rv == 0)
        rv = nx_chan_recv(nx_S.sock, &h, p, NX_CALL_REPLY_TIMEOUT_MS, NULL, 0, NULL);
    if (rv == 0 && h.type == want) {
        *plen = h.length;
        return NEXAR_OK;
    }
    if (rv == 0 && h.type == NX_MSG_ERROR) {
        Nexar__ErrorReply *er = nexar__error_reply__unpack(NULL, h.length, *p);
        snprintf(text, sizeof(text), "nexard dropped this rank: %s",
                 er && er->error && *er->error ? er->error : "no reason given");
        if (er)
            nexar__error_reply__free_unpacked(er, NULL);
    } else if (rv == 0) {
        snprintf(text, sizeof(text), "nexard sent message type %u instead of the answer to %s",
                 h.type, what);
    } else {
        snprintf(text, sizeof(text), "the control connection to nexard failed (%s)",
                 strerror(-rv));
    }
    free(*p);
    *p = NULL;
    nx_shim_gone(text);
    return nx_fail(NEXAR_ERR_UNAVAILABLE, "%s", text);
}

static nexar_status_t dev_call(uint16_t type, const ProtobufCMessage *m, uint32_t *id)
{
    uint8_t *p;
    uint32_t len;
    nexar_status_t s = call(type, m, NX_MSG_DEV_REPLY, "a device registration", &p, &len);
    if (s != NEXAR_OK)
        return s;
    Nexar__DeviceReply *r = nexar__device_reply__unpack(NULL, len, p);
    free(p);
    if (!r)
        return nx_fail(NEXAR_ERR_INTERNAL, "nexard's device reply does not decode");
    s = nx_status_from_wire(r->status);
    if (s != NEXAR_OK)
        nx_fail(s, "%s", r->error && *r->error ? r->error : nexar_strerror(s));
    else if (id)
        *id = r->id;
    nexar__device_reply__free_unpacked(r, NULL);
    return s;
}

nexar_status_t nx_control_comm_failed(uint32_t id, uint32_t *ranks, size_t cap, size_t *n)
{
    Nexar__CommQuery q = NEXAR__COMM_QUERY__INIT;
    q.comm = id;
    uint8_t *p;
    uint32_t len;
    nexar_status_t s = call(NX_MSG_COMM_QUERY, &q.base, NX_MSG_COMM_REPLY,
                            "nexar_comm_failed_ranks", &p, &len);
    if (s != NEXAR_OK)
        return s;
    Nexar__CommReply *r = nexar__comm_reply__unpack(NULL, len, p);
    free(p);
    if (!r)
        return nx_fail(NEXAR_ERR_INTERNAL, "nexard's communicator reply does not decode");
    s = nx_status_from_wire(r->status);
    if (s != NEXAR_OK) {
        nx_fail(s, "nexar_comm_failed_ranks: %s",
                r->error && *r->error ? r->error : nexar_strerror(s));
    } else {
        *n = r->n_failed_ranks;
        for (size_t i = 0; i < r->n_failed_ranks && i < cap; i++)
            ranks[i] = r->failed_ranks[i];
    }
    nexar__comm_reply__free_unpacked(r, NULL);
    return s;
}

nexar_status_t nx_control_dev_register(int kind, const void *handle, uint64_t base,
                                       uint64_t size, const char *pci, uint32_t *id)
{
    Nexar__DeviceRegister m = NEXAR__DEVICE_REGISTER__INIT;
    m.kind = kind == 1 ? NEXAR__DEVICE_KIND__DEVICE_MEMORY : NEXAR__DEVICE_KIND__DEVICE_EVENT;
    m.ipc_handle.data = (uint8_t *)handle;
    m.ipc_handle.len = 64;
    m.base_addr = base;
    m.size = size;
    m.pci_bus_id = (char *)pci;
    return dev_call(NX_MSG_DEV_REGISTER, &m.base, id);
}

nexar_status_t nx_control_dev_unregister(const uint32_t *ids, size_t n)
{
    Nexar__DeviceUnregister m = NEXAR__DEVICE_UNREGISTER__INIT;
    m.ids = (uint32_t *)ids;
    m.n_ids = n;
    return dev_call(NX_MSG_DEV_UNREGISTER, &m.base, NULL);
}
