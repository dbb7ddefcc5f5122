/* ctl_info.h - answers nexarctl: status, jobs, communicators, in-flight ops, counters,
 * peers (ctl_peers.h) and the settings (ctl_config.h).
 *
 * The reports are built in one place and handed to whoever carries them: the Unix-socket
 * control server (nx_ctl_info_reply) and the HTTP/3 inspection endpoint (h3_routes.c)
 * send the very same CtlReply. */
#ifndef NX_CTL_INFO_H
#define NX_CTL_INFO_H

struct nx_conn;
struct Nexar__CtlRequest;
struct Nexar__CtlReply;

/* Receives a built report; everything it points to is freed once emit returns. */
typedef void (*nx_ctl_emit)(void *arg, const struct Nexar__CtlReply *rep);

/*
 * Builds the reply to a report command (CTL_STATUS, CTL_JOBS, CTL_COMMS, CTL_OPS,
 * CTL_STATS, CTL_PEERS, CTL_CONFIG) from the live state, changing nothing, and calls emit(arg, rep)
 * once.  Returns 0, or -EINVAL (emit not called) for any other command.
 */
int nx_ctl_report(int command, nx_ctl_emit emit, void *arg);

/* Answers one CTL request on a control connection: a report, a peer test, or an error. */
void nx_ctl_info_reply(struct nx_conn *c, const struct Nexar__CtlRequest *req);

#endif
