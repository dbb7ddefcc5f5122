/* netaddr.c - see netaddr.h. */
#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The host of a canonical address as a socket address. */
static int parse_host(const char *canon, struct sockaddr_storage *ss)
{
    char host[NX_ADDR_MAX];
    memset(ss, 0, sizeof(*ss));
    if (nx_addr_split(canon, true, host, sizeof(host), NULL) < 0)
        return -EINVAL;
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        return 0;
    }
    return -EINVAL;
}

bool nx_addr_is_wildcard(const char *canon)
{
    struct sockaddr_storage ss;
    if (parse_host(canon, &ss) < 0)
        return false;
    if (ss.ss_family == AF_INET)
        return ((struct sockaddr_in *)&ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr);
}

static bool same_host(const struct sockaddr *a, const struct sockaddr_storage *b)
{
    if (a->sa_family != b->ss_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return IN6_ARE_ADDR_EQUAL(&((const struct sockaddr_in6 *)a)->sin6_addr,
                              &((const struct sockaddr_in6 *)b)->sin6_addr);
}

bool nx_addr_is_local_host(const char *canon)
{
    struct sockaddr_storage ss;
    if (parse_host(canon, &ss) < 0)
        return false;
    if (ss.ss_family == AF_INET &&
        (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127)
        return true;
    if (ss.ss_family == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr))
        return true;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return false;
    bool found = false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
        if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
                            i->ifa_addr->sa_family == AF_INET6))
            found = same_host(i->ifa_addr, &ss);
    freeifaddrs(ifs);
    return found;
}

uint16_t nx_addr_port(const char *canon)
{
    uint16_t port = 0;
    if (nx_addr_split(canon, true, NULL, 0, &port) < 0)
        return 0;
    return port;
}
