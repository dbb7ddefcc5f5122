/*
 * addr.h - daemon addresses as text: "host:port" or "[v6]:port".
 *
 * Addresses name daemons in NEXAR_COORD, in rank tables and in nexarctl; two spellings
 * of one daemon ("localhost:7000", "127.0.0.1:7000") must compare equal, so everything
 * that compares addresses first brings them to the canonical numeric form the
 * transport uses for peers: "1.2.3.4:5", "[::1]:5" (v4-mapped v6 prints as v4).  Shared
 * by nexard, the library and the tools.
 */
#ifndef NX_ADDR_H
#define NX_ADDR_H

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
 * first address).  0, or -EINVAL with a one-line reason in err.  nexard calls it only
 * at its start (listen, advertise); the library resolves NEXAR_COORD with it, and
 * nexarctl the addresses it is given, each in its own process.
 */
int nx_addr_canon(const char *s, char *out, size_t outlen, char *err, size_t errlen);

/*
 * nx_addr_canon without a lookup: a host name is refused ("'h' is a host name, not an
 * address").  For addresses nexard takes from ranks, nexarctl and other daemons while
 * it runs: a lookup on its loop would hold up every job of the node for as long as a
 * name server takes to answer, or not to.
 */
int nx_addr_numeric(const char *s, char *out, size_t outlen, char *err, size_t errlen);

#endif
