/*
 * rawclient.c - see rawclient.h.  The frame header is written by hand from the
 * documented layout; only the protobuf payloads use the generated nexar.pb-c code.
 */
#include "rawclient.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nexar.pb-c.h"

#define RC_MAGIC 0x3146584eu /* "NXF1" */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rc_connect(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return -ENAMETOOLONG;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int rc_send_raw(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

void rc_hdr(uint8_t out[16], uint32_t magic, uint16_t version, uint16_t type,
            uint32_t length, uint32_t flags)
{
    put32(out, magic);
    put16(out + 4, version);
    put16(out + 6, type);
    put32(out + 8, length);
    put32(out + 12, flags);
}

int rc_send_frame(int fd, uint16_t type, const void *payload, uint32_t len)
{
    uint8_t *buf = malloc(16 + (size_t)len);
    if (!buf)
        return -ENOMEM;
    rc_hdr(buf, RC_MAGIC, 1, type, len, 0);
    if (len)
        memcpy(buf + 16, payload, len);
    int rv = rc_send_raw(fd, buf, 16 + (size_t)len);
    free(buf);
    return rv;
}

/* Reads exactly len bytes before the deadline. */
static int read_full(int fd, uint8_t *p, size_t len, int64_t deadline)
{
    while (len > 0) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -errno;
        if (pr == 0)
            return -ETIMEDOUT;
        ssize_t n = recv(fd, p, len, 0);
        if (n == 0)
            return -ECONNRESET;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return errno == ECONNRESET ? -ECONNRESET : -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int rc_recv_frame(int fd, struct rc_frame *f, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    uint8_t h[16];
    memset(f, 0, sizeof(*f));
    int rv = read_full(fd, h, 16, deadline);
    if (rv)
        return rv;
    f->magic = get32(h);
    f->version = (uint16_t)(h[4] | h[5] << 8);
    f->type = (uint16_t)(h[6] | h[7] << 8);
    f->length = get32(h + 8);
    f->flags = get32(h + 12);
    if (f->magic != RC_MAGIC || f->length > (1u << 20))
        return -EPROTO;
    f->payload = malloc(f->length ? f->length : 1);
    if (!f->payload)
        return -ENOMEM;
    rv = read_full(fd, f->payload, f->length, deadline);
    if (rv) {
        free(f->payload);
        f->payload = NULL;
    }
    return rv;
}

int rc_wait_closed(int fd, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    uint8_t buf[4096];
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return -ETIMEDOUT;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 0;
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return 0;
    }
}

size_t rc_pack_hello(int kind, uint8_t **out)
{
    return rc_pack_hello_v(kind, 1, out);
}

size_t rc_pack_hello_v(int kind, uint32_t proto_version, uint8_t **out)
{
    Nexar__Hello m = NEXAR__HELLO__INIT;
    m.proto_version = proto_version;
    m.kind = (Nexar__ClientKind)kind;
    m.pid = (uint32_t)getpid();
    m.client_version = (char *)"itest";
    size_t n = nexar__hello__get_packed_size(&m);
    *out = malloc(n ? n : 1);
    if (!*out)
        return 0;
    return nexar__hello__pack(&m, *out);
}

size_t rc_pack_join(const char *job, uint32_t rank, uint32_t world, uint32_t timeout_ms,
                    uint8_t **out)
{
    Nexar__JoinRequest m = NEXAR__JOIN_REQUEST__INIT;
    m.job = (char *)job;
    m.rank = rank;
    m.world_size = world;
    m.local_rank = rank;
    m.timeout_ms = timeout_ms;
    m.coord = (char *)"";
    size_t n = nexar__join_request__get_packed_size(&m);
    *out = malloc(n ? n : 1);
    if (!*out)
        return 0;
    return nexar__join_request__pack(&m, *out);
}

int rc_join_reply(int fd, int limit_ms, char *text, size_t len)
{
    struct rc_frame fr;
    text[0] = '\0';
    if (rc_recv_frame(fd, &fr, limit_ms) != 0)
        return -1;
    int st = -1;
    if (fr.type == 4 /* JOIN_REPLY */) {
        Nexar__JoinReply *jr = nexar__join_reply__unpack(NULL, fr.length, fr.payload);
        if (jr) {
            st = (int)jr->status;
            snprintf(text, len, "%s", jr->error ? jr->error : "");
            nexar__join_reply__free_unpacked(jr, NULL);
        }
    }
    free(fr.payload);
    return st;
}

int rc_hello(int fd, int kind, int timeout_ms, const char **why)
{
    uint8_t *p = NULL;
    size_t n = rc_pack_hello(kind, &p);
    int rv = rc_send_frame(fd, 1, p, (uint32_t)n);
    free(p);
    if (rv) {
        *why = "send HELLO failed";
        return rv;
    }
    struct rc_frame f;
    rv = rc_recv_frame(fd, &f, timeout_ms);
    if (rv) {
        *why = rv == -ETIMEDOUT ? "no HELLO_REPLY in time"
             : rv == -ECONNRESET ? "daemon closed the connection after HELLO"
                                 : "bad reply frame";
        return rv;
    }
    rv = 0;
    if (f.type != 2) {
        *why = "reply to HELLO is not HELLO_REPLY";
        rv = -EPROTO;
    } else {
        Nexar__HelloReply *r = nexar__hello_reply__unpack(NULL, f.length, f.payload);
        if (!r) {
            *why = "HELLO_REPLY does not decode";
            rv = -EPROTO;
        } else {
            if (r->proto_version != 1) {
                *why = "HELLO_REPLY proto_version is not 1";
                rv = -EPROTO;
            }
            nexar__hello_reply__free_unpacked(r, NULL);
        }
    }
    free(f.payload);
    return rv;
}

int rc_ping(const char *path, int timeout_ms)
{
    int fd = rc_connect(path);
    if (fd < 0)
        return fd;
    const char *why = NULL;
    int rv = rc_hello(fd, 2, timeout_ms, &why);
    close(fd);
    return rv;
}
