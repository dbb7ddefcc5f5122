/* fdlimit.h - the open-files limit, taken whole at start (frame.h's nx_fd_why names it when
 * it is reached).
 *
 * Each rank costs nexard four descriptors (its socket, two doorbells, a pidfd).  systemd
 * and most shells give a soft limit of 1024 and a far higher hard one, the soft one only
 * for programs that still use select(); libuv does not. */
#ifndef NX_FDLIMIT_H
#define NX_FDLIMIT_H

/* Raises the soft limit to the hard one (at most 2^20), with a log line when it moved. */
void nx_fdlimit_raise(void);

#endif
