/*
 * quic_addr.c - addresses: "host:port" / "[v6]:port" in, canonical strings out, and the
 * one order both ends of a 4-tuple agree on (the simultaneous-open rule compares with it).
 * A v4-mapped IPv6 address is IPv4 everywhere here, so a dual-stack socket and an IPv4
 * socket name the same daemon the same way.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "quic_int.h"

struct norm {
    int fam;
    uint8_t b[16];
    size_t n;
    uint16_t port;
};

static void normalize(const struct sockaddr *sa, struct norm *o)
{
    memset(o, 0, sizeof(*o));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        o->fam = 4;
        memcpy(o->b, &in->sin_addr, 4);
        o->n = 4;
        o->port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        o->port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            o->fam = 4;
            memcpy(o->b, in6->sin6_addr.s6_addr + 12, 4);
            o->n = 4;
        } else {
            o->fam = 6;
            memcpy(o->b, &in6->sin6_addr, 16);
            o->n = 16;
        }
    }
}

void nx_qaddr_format(const struct sockaddr *sa, char *out, size_t outlen)
{
    struct norm n;
    char host[INET6_ADDRSTRLEN];
    normalize(sa, &n);
    if (!n.fam) {
        snprintf(out, outlen, "?");
        return;
    }
    inet_ntop(n.fam == 4 ? AF_INET : AF_INET6, n.b, host, sizeof(host));
    snprintf(out, outlen, n.fam == 4 ? "%s:%u" : "[%s]:%u", host, n.port);
}

int nx_qaddr_cmp(const struct sockaddr *a, const struct sockaddr *b)
{
    struct norm x, y;
    normalize(a, &x);
    normalize(b, &y);
    if (x.fam != y.fam)
        return x.fam < y.fam ? -1 : 1;
    int r = memcmp(x.b, y.b, x.n);
    if (r)
        return r < 0 ? -1 : 1;
    return x.port < y.port ? -1 : x.port > y.port;
}

size_t nx_qaddr_key(const struct sockaddr *sa, uint8_t key[20])
{
    struct norm n;
    normalize(sa, &n);
    key[0] = (uint8_t)n.fam;
    memcpy(key + 1, n.b, n.n);
    key[1 + n.n] = (uint8_t)(n.port >> 8);
    key[2 + n.n] = (uint8_t)n.port;
    return 3 + n.n;
}

int nx_qaddr_is_loopback(const struct sockaddr *sa)
{
    struct norm n;
    normalize(sa, &n);
    if (n.fam == 4)
        return n.b[0] == 127;
    return n.fam == 6 && IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)n.b);
}

int nx_qaddr_resolve(const char *s, bool may_resolve, union nx_qsa *out, socklen_t *len,
                     char *err, size_t errlen)
{
    /* The syntax is addr.h's, which every other address of nexar's passes: one grammar,
     * one set of refusals. */
    char host[NX_ADDR_MAX], port[8];
    uint16_t pn;
    if (nx_addr_split(s, true, host, sizeof(host), &pn) < 0) {
        snprintf(err, errlen, "bad address \"%s\": want host:port or [v6]:port",
                 s ? s : "");
        return -EINVAL;
    }
    snprintf(port, sizeof(port), "%u", pn);
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV},
                    *res = NULL;
    int rv = getaddrinfo(host, port, &hints, &res);
    if (rv == EAI_NONAME && !may_resolve) {
        snprintf(err, errlen, "bad address \"%s\": '%s' is a host name, not an address", s,
                 host);
        return -EINVAL;
    }
    if (rv == EAI_NONAME) {
        hints.ai_flags = AI_NUMERICSERV; /* a name: one blocking lookup, at the start */
        rv = getaddrinfo(host, port, &hints, &res);
    }
    if (rv != 0 || !res) {
        snprintf(err, errlen, "cannot resolve \"%s\": %s", s, gai_strerror(rv));
        return -EINVAL;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int nx_qaddr_to_family(int family, union nx_qsa *a, socklen_t *len, char *err, size_t errlen)
{
    if (a->sa.sa_family == family)
        return 0;
    if (family == AF_INET6 && a->sa.sa_family == AF_INET) {
        struct sockaddr_in in = a->in;
        memset(a, 0, sizeof(*a));
        a->in6.sin6_family = AF_INET6;
        a->in6.sin6_port = in.sin_port;
        a->in6.sin6_addr.s6_addr[10] = a->in6.sin6_addr.s6_addr[11] = 0xff;
        memcpy(a->in6.sin6_addr.s6_addr + 12, &in.sin_addr, 4);
        *len = sizeof(a->in6);
        return 0;
    }
    if (family == AF_INET && IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr)) {
        struct sockaddr_in6 in6 = a->in6;
        memset(a, 0, sizeof(*a));
        a->in.sin_family = AF_INET;
        a->in.sin_port = in6.sin6_port;
        memcpy(&a->in.sin_addr, in6.sin6_addr.s6_addr + 12, 4);
        *len = sizeof(a->in);
        return 0;
    }
    snprintf(err, errlen, "an IPv4 endpoint cannot reach an IPv6 peer (listen on [::]:port)");
    return -EAFNOSUPPORT;
}
