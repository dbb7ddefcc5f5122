/*
 * quic_udp.c - the endpoint's one UDP socket, batched both ways.
 *
 * libuv 1.44's uv_udp_t knows neither GSO nor GRO, so the socket is ours, watched by a
 * uv_poll_t.  Sending: packets of one connection are laid end to end in a 64 KiB slot and
 * leave as one GSO super-datagram (UDP_SEGMENT), up to NX_QTX_SLOTS slots per sendmmsg.
 * Receiving: recvmmsg into 64 KiB slots with UDP_GRO, split back by the segment size.
 * On a socket bound to the any-address, IP(V6)_PKTINFO tells which local address a packet
 * came to and pins the source address of what we send.
 */
#include <errno.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "quic_int.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define NX_QGSO_MAX_SEGS 64 /* UDP_MAX_SEGMENTS */
#define NX_QRX_BUDGET 8     /* recvmmsg calls per wake-up before we flush replies */
#define NX_QCTL_LEN (CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(struct in6_pktinfo)))

static void set_buf(int fd, int force_opt, int opt, int bytes)
{
    if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) != 0)
        (void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static int is_any(const union nx_qsa *a)
{
    if (a->sa.sa_family == AF_INET)
        return a->in.sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&a->in6.sin6_addr);
}

static void set_options(struct nx_quic *q)
{
    struct nx_qudp *u = &q->udp;
    int one = 1, zero = 0;
    set_buf(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, 32 << 20);
    set_buf(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, 16 << 20);
    /* Up to 1452 bytes ngtcp2 probes the path MTU, which needs DF; beyond that the operator
     * chose the size for a loopback or jumbo path, and fragments beat a black hole. */
    int pmtud = q->conf.max_udp_payload <= NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE;
    if (u->family == AF_INET6) {
        (void)setsockopt(u->fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        int v = pmtud ? IPV6_PMTUDISC_DO : IPV6_PMTUDISC_DONT;
        (void)setsockopt(u->fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v, sizeof(v));
    } else {
        int v = pmtud ? IP_PMTUDISC_DO : IP_PMTUDISC_DONT;
        (void)setsockopt(u->fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v));
    }
    u->gro = setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    int seg = 0;
    socklen_t sl = sizeof(seg);
    u->gso = getsockopt(u->fd, SOL_UDP, UDP_SEGMENT, &seg, &sl) == 0;
}

static int set_pktinfo(struct nx_qudp *u)
{
    int one = 1;
    if (u->family == AF_INET6)
        return setsockopt(u->fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
    return setsockopt(u->fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
}

static void poll_cb(uv_poll_t *h, int status, int events);

int nx_qudp_open(struct nx_quic *q, const union nx_qsa *bind_addr, socklen_t bindlen,
                 char *err, size_t errlen)
{
    struct nx_qudp *u = &q->udp;
    char name[NX_TADDR_MAX];
    nx_qaddr_format(&bind_addr->sa, name, sizeof(name));
    u->family = bind_addr->sa.sa_family;
    u->fd = socket(u->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (u->fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -errno;
    }
    set_options(q);
    if (bind(u->fd, &bind_addr->sa, bindlen) != 0) {
        int e = errno;
        snprintf(err, errlen, "bind %s: %s", name, strerror(e));
        goto fail_close;
    }
    u->local_len = sizeof(u->local);
    if (getsockname(u->fd, &u->local.sa, &u->local_len) != 0) {
        snprintf(err, errlen, "getsockname: %s", strerror(errno));
        goto fail_close;
    }
    u->wildcard = is_any(&u->local);
    if (u->wildcard && set_pktinfo(u) != 0) {
        snprintf(err, errlen, "PKTINFO: %s", strerror(errno));
        goto fail_close;
    }
    u->rxbuf = nx_xmalloc((size_t)NX_QRX_SLOTS * NX_QRX_SLOT_CAP);
    u->txbuf = nx_xmalloc((size_t)NX_QTX_SLOTS * NX_QTX_SLOT_CAP);
    if (uv_poll_init_socket(q->loop, &u->poll, u->fd) != 0) {
        snprintf(err, errlen, "uv_poll_init_socket failed");
        goto fail_bufs;
    }
    u->poll.data = q;
    q->handles_open++;
    u->poll_events = UV_READABLE;
    uv_poll_start(&u->poll, u->poll_events, poll_cb);
    NX_DEBUG("quic", "udp %s: gso %d gro %d pktinfo %d", name, u->gso, u->gro, u->wildcard);
    return 0;
fail_bufs:
    free(u->rxbuf);
    free(u->txbuf);
    u->rxbuf = u->txbuf = NULL;
fail_close:
    close(u->fd);
    u->fd = -1;
    return -EINVAL;
}

static void poll_close_cb(uv_handle_t *h)
{
    struct nx_quic *q = h->data;
    nx_quic_handle_closed(q);
}

void nx_qudp_close(struct nx_quic *q)
{
    struct nx_qudp *u = &q->udp;
    if (u->fd < 0)
        return;
    uv_poll_stop(&u->poll);
    uv_close((uv_handle_t *)&u->poll, poll_close_cb);
    close(u->fd);
    u->fd = -1;
    free(u->rxbuf);
    free(u->txbuf);
    u->rxbuf = u->txbuf = NULL;
}

/* Readable unless the owner paused reading; writable while a send would block. */
static void update_events(struct nx_qudp *u)
{
    int ev = (u->rx_paused ? 0 : UV_READABLE) | (u->tx_blocked ? UV_WRITABLE : 0);
    if (ev == u->poll_events || u->fd < 0)
        return;
    u->poll_events = ev;
    if (ev)
        uv_poll_start(&u->poll, ev, poll_cb);
    else
        uv_poll_stop(&u->poll);
}

void nx_quic_rx_pause(struct nx_transport *t, int paused)
{
    struct nx_quic *q = (struct nx_quic *)t;
    q->udp.rx_paused = paused != 0;
    update_events(&q->udp);
}

/* ---- receive ---- */

static void rx_local(struct nx_quic *q, struct msghdr *mh, union nx_qsa *local, socklen_t *len)
{
    struct nx_qudp *u = &q->udp;
    *local = u->local;
    *len = u->local_len;
    if (!u->wildcard)
        return;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO &&
            u->family == AF_INET) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
            local->in.sin_addr = pi.ipi_addr;
        } else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
            struct in6_pktinfo pi;
            memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
            local->in6.sin6_addr = pi.ipi6_addr;
        }
    }
}

static size_t rx_segsize(struct msghdr *mh, size_t len)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
            int seg;
            memcpy(&seg, CMSG_DATA(cm), sizeof(seg));
            if (seg > 0)
                return (size_t)seg;
        }
    }
    return len;
}

static int rx_batch(struct nx_quic *q)
{
    struct nx_qudp *u = &q->udp;
    struct mmsghdr mm[NX_QRX_SLOTS];
    struct iovec iov[NX_QRX_SLOTS];
    union nx_qsa from[NX_QRX_SLOTS];
    uint8_t ctl[NX_QRX_SLOTS][NX_QCTL_LEN] __attribute__((aligned(8)));
    memset(mm, 0, sizeof(mm));
    for (int i = 0; i < NX_QRX_SLOTS; i++) {
        iov[i].iov_base = u->rxbuf + (size_t)i * NX_QRX_SLOT_CAP;
        iov[i].iov_len = NX_QRX_SLOT_CAP;
        mm[i].msg_hdr.msg_name = &from[i];
        mm[i].msg_hdr.msg_namelen = sizeof(from[i]);
        mm[i].msg_hdr.msg_iov = &iov[i];
        mm[i].msg_hdr.msg_iovlen = 1;
        mm[i].msg_hdr.msg_control = ctl[i];
        mm[i].msg_hdr.msg_controllen = sizeof(ctl[i]);
    }
    int n = recvmmsg(u->fd, mm, NX_QRX_SLOTS, MSG_DONTWAIT, NULL);
    q->rx_ts = nx_qnow(); /* one clock read per batch: they arrived together */
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            NX_DEBUG("quic", "recvmmsg: %s", strerror(errno));
        return errno == EINTR ? 1 : 0;
    }
    for (int i = 0; i < n && u->fd >= 0; i++) {
        struct msghdr *mh = &mm[i].msg_hdr;
        if (mh->msg_flags & (MSG_TRUNC | MSG_CTRUNC))
            continue;
        union nx_qsa local;
        socklen_t local_len;
        rx_local(q, mh, &local, &local_len);
        size_t len = mm[i].msg_len, seg = rx_segsize(mh, len);
        uint8_t *p = iov[i].iov_base;
        for (size_t off = 0; off < len; off += seg) {
            size_t l = len - off < seg ? len - off : seg;
            nx_qserver_on_datagram(q, p + off, l, &local, local_len, &from[i],
                                   mh->msg_namelen);
            if (u->fd < 0)
                break;
        }
    }
    return n == NX_QRX_SLOTS;
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct nx_quic *q = h->data;
    if (status < 0) {
        NX_WARN("quic", "socket poll: %s", uv_strerror(status));
        return;
    }
    if (events & UV_WRITABLE) {
        q->udp.tx_blocked = 0;
        update_events(&q->udp);
        if (nx_qudp_tx_flush(q) == 0)
            nx_quic_tx_ready(q);
    }
    if ((events & UV_READABLE) && !q->udp.rx_paused) {
        for (int i = 0; i < NX_QRX_BUDGET && q->udp.fd >= 0 && !q->udp.rx_paused; i++)
            if (!rx_batch(q))
                break;
        nx_quic_rx_done(q);
    }
}

/* ---- send ---- */

static int same_addr(const union nx_qsa *a, socklen_t alen, const struct sockaddr *b,
                     socklen_t blen)
{
    return alen == blen && memcmp(a, b, blen) == 0;
}

static void slot_init(struct nx_qtx_slot *s, const struct sockaddr *to, socklen_t tolen,
                      const struct sockaddr *from)
{
    memcpy(&s->to, to, tolen);
    s->tolen = tolen;
    if (from)
        memcpy(&s->from, from, from->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                           : sizeof(struct sockaddr_in6));
    else
        s->from.sa.sa_family = AF_UNSPEC;
    s->len = s->seg = s->nseg = 0;
    s->closed = 0;
}

static int appendable(const struct nx_qudp *u, const struct nx_qtx_slot *s,
                      const struct sockaddr *to, socklen_t tolen, size_t maxlen)
{
    return u->gso && !s->closed && s->nseg < NX_QGSO_MAX_SEGS &&
           s->len + maxlen <= NX_QTX_SLOT_CAP && same_addr(&s->to, s->tolen, to, tolen);
}

uint8_t *nx_qudp_tx_reserve(struct nx_quic *q, const struct sockaddr *to, socklen_t tolen,
                            const struct sockaddr *from, size_t maxlen, size_t *avail)
{
    struct nx_qudp *u = &q->udp;
    if (u->fd < 0 || u->tx_blocked)
        return NULL;
    if (maxlen > NX_QTX_SLOT_CAP)
        maxlen = NX_QTX_SLOT_CAP;
    /* Keep one slot free: a packet that breaks the GSO run must move to a fresh one.  And
     * hand over every NX_QTX_FLUSH_BYTES, while the packets are still in the cache. */
    if ((u->tx_n >= NX_QTX_SLOTS - 1 || u->tx_bytes >= NX_QTX_FLUSH_BYTES) &&
        nx_qudp_tx_flush(q) != 0)
        return NULL;
    *avail = maxlen;
    if (u->tx_n > 0) {
        struct nx_qtx_slot *s = &u->tx[u->tx_n - 1];
        if (appendable(u, s, to, tolen, maxlen))
            return u->txbuf + (size_t)(u->tx_n - 1) * NX_QTX_SLOT_CAP + s->len;
        s->closed = 1;
    }
    slot_init(&u->tx[u->tx_n], to, tolen, from);
    return u->txbuf + (size_t)u->tx_n * NX_QTX_SLOT_CAP;
}

void nx_qudp_tx_commit(struct nx_quic *q, size_t len, size_t maxlen)
{
    struct nx_qudp *u = &q->udp;
    struct nx_qtx_slot *s = u->tx_n > 0 ? &u->tx[u->tx_n - 1] : NULL;
    if (s && !s->closed) {
        uint8_t *at = u->txbuf + (size_t)(u->tx_n - 1) * NX_QTX_SLOT_CAP + s->len;
        u->tx_bytes += len;
        if (len <= s->seg) {
            s->len += len;
            s->nseg++;
            if (len < s->seg)
                s->closed = 1; /* only the last segment may be short */
            return;
        }
        /* Larger than the run's segments (a PMTU probe): it starts its own datagram. */
        s->closed = 1;
        struct nx_qtx_slot *n = &u->tx[u->tx_n];
        slot_init(n, &s->to.sa, s->tolen, s->from.sa.sa_family ? &s->from.sa : NULL);
        memmove(u->txbuf + (size_t)u->tx_n * NX_QTX_SLOT_CAP, at, len);
        s = n;
    } else {
        s = &u->tx[u->tx_n];
        u->tx_bytes += len;
    }
    u->tx_n++;
    s->len = s->seg = len;
    s->nseg = 1;
    (void)maxlen;
}

void nx_qudp_tx_break(struct nx_quic *q)
{
    struct nx_qudp *u = &q->udp;
    if (u->tx_n > 0)
        u->tx[u->tx_n - 1].closed = 1;
}

static size_t put_cmsgs(const struct nx_qudp *u, const struct nx_qtx_slot *s, uint8_t *ctl)
{
    struct msghdr mh = {.msg_control = ctl, .msg_controllen = NX_QCTL_LEN};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    size_t used = 0;
    if (s->nseg > 1) {
        uint16_t seg = (uint16_t)s->seg;
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(seg));
        memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        used += CMSG_SPACE(sizeof(seg));
        cm = (struct cmsghdr *)(ctl + used);
    }
    if (u->wildcard && s->from.sa.sa_family != AF_UNSPEC) {
        if (u->family == AF_INET) {
            struct in_pktinfo pi = {.ipi_spec_dst = s->from.in.sin_addr};
            cm->cmsg_level = IPPROTO_IP;
            cm->cmsg_type = IP_PKTINFO;
            cm->cmsg_len = CMSG_LEN(sizeof(pi));
            memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
            used += CMSG_SPACE(sizeof(pi));
        } else {
            struct in6_pktinfo pi = {.ipi6_addr = s->from.in6.sin6_addr};
            cm->cmsg_level = IPPROTO_IPV6;
            cm->cmsg_type = IPV6_PKTINFO;
            cm->cmsg_len = CMSG_LEN(sizeof(pi));
            memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
            used += CMSG_SPACE(sizeof(pi));
        }
    }
    return used;
}

static void send_failed(struct nx_quic *q, const struct nx_qtx_slot *s, int e)
{
    struct nx_qudp *u = &q->udp;
    if (e == EIO && s->nseg > 1 && u->gso) {
        /* The route cannot segment (no checksum offload): batch without GSO from now. */
        NX_WARN("quic", "UDP GSO failed on this path; sending datagrams one by one");
        u->gso = 0;
    }
    if (u->send_errors++ % 1000 == 0) {
        char to[NX_TADDR_MAX];
        nx_qaddr_format(&s->to.sa, to, sizeof(to));
        NX_WARN("quic", "send %zu bytes to %s: %s", s->len, to, strerror(e));
    }
}

int nx_qudp_tx_flush(struct nx_quic *q)
{
    struct nx_qudp *u = &q->udp;
    struct mmsghdr mm[NX_QTX_SLOTS];
    struct iovec iov[NX_QTX_SLOTS];
    uint8_t ctl[NX_QTX_SLOTS][NX_QCTL_LEN] __attribute__((aligned(8)));
    while (u->tx_sent < u->tx_n && u->fd >= 0) {
        int cnt = 0;
        for (int i = u->tx_sent; i < u->tx_n; i++, cnt++) {
            struct nx_qtx_slot *s = &u->tx[i];
            memset(&mm[cnt], 0, sizeof(mm[cnt]));
            iov[cnt].iov_base = u->txbuf + (size_t)i * NX_QTX_SLOT_CAP;
            iov[cnt].iov_len = s->len;
            mm[cnt].msg_hdr.msg_name = &s->to;
            mm[cnt].msg_hdr.msg_namelen = s->tolen;
            mm[cnt].msg_hdr.msg_iov = &iov[cnt];
            mm[cnt].msg_hdr.msg_iovlen = 1;
            size_t cl = put_cmsgs(u, s, ctl[cnt]);
            mm[cnt].msg_hdr.msg_control = cl ? ctl[cnt] : NULL;
            mm[cnt].msg_hdr.msg_controllen = cl;
        }
        int r = sendmmsg(u->fd, mm, (unsigned)cnt, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
                u->tx_blocked = 1;
                update_events(u);
                return -EAGAIN;
            }
            /* This datagram cannot go; QUIC will see it lost and send again. */
            send_failed(q, &u->tx[u->tx_sent], errno);
            u->tx_sent++;
            continue;
        }
        u->tx_sent += r;
    }
    u->tx_n = u->tx_sent = 0;
    u->tx_bytes = 0;
    return 0;
}

void nx_qudp_send_one(struct nx_quic *q, const struct sockaddr *to, socklen_t tolen,
                      const struct sockaddr *from, const uint8_t *data, size_t len)
{
    struct nx_qudp *u = &q->udp;
    struct nx_qtx_slot s;
    uint8_t ctl[NX_QCTL_LEN] __attribute__((aligned(8)));
    slot_init(&s, to, tolen, from);
    s.len = len;
    s.nseg = 1;
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr mh = {.msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov,
                        .msg_iovlen = 1};
    size_t cl = put_cmsgs(u, &s, ctl);
    mh.msg_control = cl ? ctl : NULL;
    mh.msg_controllen = cl;
    if (u->fd >= 0 && sendmsg(u->fd, &mh, 0) < 0 && errno != EAGAIN)
        send_failed(q, &s, errno);
}

int nx_qudp_local_for(struct nx_quic *q, const struct sockaddr *to, socklen_t tolen,
                      union nx_qsa *out, socklen_t *outlen)
{
    struct nx_qudp *u = &q->udp;
    *out = u->local;
    *outlen = u->local_len;
    if (!u->wildcard)
        return 0;
    /* Ask the routing table which source address the kernel would pick. */
    int fd = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    union nx_qsa tmp;
    socklen_t tl = sizeof(tmp);
    int rv = 0;
    if (connect(fd, to, tolen) != 0 || getsockname(fd, &tmp.sa, &tl) != 0)
        rv = -errno;
    close(fd);
    if (rv)
        return rv;
    if (u->family == AF_INET)
        out->in.sin_addr = tmp.in.sin_addr;
    else
        out->in6.sin6_addr = tmp.in6.sin6_addr;
    return 0;
}
