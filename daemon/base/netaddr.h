/*
 * netaddr.h - what nexard asks of a canonical address (addr.h) beyond its syntax: a
 * wildcard, one of this machine's, its port.
 */
#ifndef NX_NETADDR_H
#define NX_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"

/* Whether the host part of a canonical address is 0.0.0.0 or ::. */
bool nx_addr_is_wildcard(const char *canon);

/* Whether the host part of a canonical address is one of this machine's (loopback, or
 * an address of one of its interfaces). */
bool nx_addr_is_local_host(const char *canon);

/* The port of a canonical address, 0 when it has none. */
uint16_t nx_addr_port(const char *canon);

#endif
