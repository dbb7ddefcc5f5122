/*
 * netaddr.h - daemon addresses as text: "host:port" or "[v6]:port".
 *
 * Addresses name daemons in NEXAR_COORD, in rank tables and in nexarctl; two spellings
 * of one daemon ("localhost:7000", "127.0.0.1:7000") must compare equal, so everything
 * that compares addresses first brings them to the canonical numeric form the
 * transport uses for peers: "1.2.3.4:5", "[::1]:5" (v4-mapped v6 prints as v4).
 */
#ifndef NX_NETADDR_H
#define NX_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NX_ADDR_MAX 64 /* with the NUL; the same bound as transport.h NX_TADDR_MAX */

/*
 * Syntax only, no resolution: host (printable, no blanks, '/' or '@'; brackets around
 * a v6 literal) and a decimal port.  port_zero_ok allows port 0 (a listen address).
 * Splits into host (without brackets) and port when they are not NULL.  Safe on
 * untrusted input.  0 or -EINVAL.
 */
int nx_addr_split(const char *s, bool port_zero_ok, char *host, size_t hostlen,
                  uint16_t *port);

static inline bool nx_addr_valid(const char *s)
{
    return s && nx_addr_split(s, false, NULL, 0, NULL) == 0;
}

/*
 * The canonical numeric form of s.  Numeric hosts never block; a name is resolved with
 * getaddrinfo() (blocking: /etc/hosts or DNS), and its first IPv4 address wins (else its
 * first address).  0, or -EINVAL with a one-line reason in err.
 */
int nx_addr_canon(const char *s, char *out, size_t outlen, char *err, size_t errlen);

/* Whether the host part of a canonical address is 0.0.0.0 or ::. */
bool nx_addr_is_wildcard(const char *canon);

/* Whether the host part of a canonical address is one of this machine's (loopback, or
 * an address of one of its interfaces). */
bool nx_addr_is_local_host(const char *canon);

/* The port of a canonical address, 0 when it has none. */
uint16_t nx_addr_port(const char *canon);

#endif
