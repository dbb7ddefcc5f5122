/* fdlimit.h - the open-files limit: taken whole at start, named when it is reached.
 *
 * Each rank costs nexard four descriptors (its socket, two doorbells, a pidfd).  systemd
 * and most shells give a soft limit of 1024 and a far higher hard one, the soft one only
 * for programs that still use select(); libuv does not. */
#ifndef NX_FDLIMIT_H
#define NX_FDLIMIT_H

#include <stddef.h>

/* Raises the soft limit to the hard one (at most 2^20), with a log line when it moved. */
void nx_fdlimit_raise(void);

/* What a failed call's errno means, for a text a user reads: for EMFILE the limit and how
 * to raise it, for ENFILE the system's table; strerror otherwise.  Returns buf. */
const char *nx_fdlimit_why(int err, char *buf, size_t len);

#endif
