/* addr.c - see addr.h. */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int nx_addr_split(const char *s, bool port_zero_ok, char *host, size_t hostlen,
                  uint16_t *port)
{
    if (!s)
        return -EINVAL;
    size_t n = strnlen(s, NX_ADDR_MAX);
    if (n == 0 || n >= NX_ADDR_MAX)
        return -EINVAL;
    const char *h = s, *colon;
    size_t hl;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = s + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
        /* Only a v6 literal goes in brackets. */
        if (hl == 0 || memchr(h, ':', hl) == NULL)
            return -EINVAL;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return -EINVAL;
        hl = (size_t)(colon - s);
        /* An unbracketed host with a colon is an ambiguous v6 literal. */
        if (hl == 0 || memchr(s, ':', hl) != NULL)
            return -EINVAL;
    }
    for (size_t i = 0; i < hl; i++) {
        unsigned char c = (unsigned char)h[i];
        if (c <= 0x20 || c >= 0x7f || c == '/' || c == '@' || c == '[' || c == ']')
            return -EINVAL;
    }
    const char *p = colon + 1;
    if (*p == '\0' || strlen(p) > 5)
        return -EINVAL;
    unsigned long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v > 65535 || (v == 0 && !port_zero_ok))
        return -EINVAL;
    if (host) {
        if (hl >= hostlen)
            return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = '\0';
    }
    if (port)
        *port = (uint16_t)v;
    return 0;
}

static void format_sa(const struct sockaddr *sa, uint16_t port, char *out, size_t outlen)
{
    char buf[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], buf, sizeof(buf));
            snprintf(out, outlen, "%s:%u", buf, port);
        } else {
            inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
            snprintf(out, outlen, "[%s]:%u", buf, port);
        }
    } else {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, sizeof(buf));
        snprintf(out, outlen, "%s:%u", buf, port);
    }
}

static int canon(const char *s, bool may_resolve, char *out, size_t outlen, char *err,
                 size_t errlen)
{
    char host[NX_ADDR_MAX];
    uint16_t port;
    if (nx_addr_split(s, true, host, sizeof(host), &port) < 0) {
        snprintf(err, errlen, "'%s' is not host:port or [v6]:port", s ? s : "");
        return -EINVAL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICHOST}, *res = NULL;
    int rv = getaddrinfo(host, NULL, &hints, &res);
    if (rv != 0 && !may_resolve) {
        snprintf(err, errlen, "'%s' is a host name, not an address", host);
        return -EINVAL;
    }
    if (rv != 0) {
        hints.ai_flags = 0;
        rv = getaddrinfo(host, NULL, &hints, &res);
    }
    if (rv != 0 || !res) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rv));
        return -EINVAL;
    }
    /* A name with both families: v4 first, as daemons are usually bound to v4 ("localhost"
     * must not turn into [::1] for a daemon listening on 127.0.0.1). */
    const struct addrinfo *pick = res;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    format_sa(pick->ai_addr, port, out, outlen);
    freeaddrinfo(res);
    return 0;
}

int nx_addr_canon(const char *s, char *out, size_t outlen, char *err, size_t errlen)
{
    return canon(s, true, out, outlen, err, errlen);
}

int nx_addr_numeric(const char *s, char *out, size_t outlen, char *err, size_t errlen)
{
    return canon(s, false, out, outlen, err, errlen);
}
