/* notify.h - systemd readiness: Type=notify without libsystemd. */
#ifndef NX_NOTIFY_H
#define NX_NOTIFY_H

/* Sends state (e.g. "READY=1") to $NOTIFY_SOCKET; a no-op without it.  0 or -errno. */
int nx_notify(const char *state);

#endif
