/*
 * ctlsrv.h - the control server: the Unix socket (runtime directory, lock file, stale
 * socket removal, SO_PEERCRED) and one nx_conn per accepted connection, which parses
 * frames, enforces the HELLO handshake and dispatches JOIN and CTL.
 */
#ifndef NX_CTLSRV_H
#define NX_CTLSRV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <uv.h>

#include "frame.h"

struct nx_client;
struct Nexar__CtlRequest;

struct nx_conn {
    uv_pipe_t pipe;
    int fd;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    /* HELLO's pid equals SO_PEERCRED's: the client sees pids as nexard does (one pid
     * namespace), so the pids nexard hands out for single copy are its peers'. */
    bool same_pidns;
    int kind; /* Nexar__ClientKind after HELLO, 0 before */
    struct nx_frame_parser parser;
    struct nx_client *client; /* set once JOIN created a client */
    int closing;
    double accepted;
    double hello_at;      /* when HELLO was answered (a rank must JOIN soon after) */
    double last_rx;       /* the last bytes read (a nexarctl that asks nothing goes) */
    double partial_since; /* a frame begun and not finished since then; 0: none */
    /* Called once when the connection closes, for a module whose reply is still due
     * (a peer test); it must not send on c. */
    void (*on_close)(struct nx_conn *c);
    void *close_arg;
    LIST_ENTRY(nx_conn) link;
};

/* Answers a CTL request of a nexarctl connection (the reports live above this layer:
 * main.c passes ctl/ctl_info.c's nx_ctl_info_reply). */
typedef void (*nx_ctl_handler)(struct nx_conn *c, const struct Nexar__CtlRequest *req);

/* Binds the socket: 0, or -errno after logging why. */
int nx_ctlsrv_init(nx_ctl_handler on_ctl);
/* Shutdown, first step: no new connection (the socket goes); the open ones stay. */
void nx_ctlsrv_stop_listening(void);
/* Closes every connection too. */
void nx_ctlsrv_fini(void);
/* Closes connections that hold a place without using it: no HELLO, a rank's HELLO without
 * JOIN, a frame begun and never finished, a nexarctl that asks nothing. */
void nx_ctlsrv_tick(double now);

/* Bytes a connection may leave unread before it is closed (its client dropped): one
 * frame of the largest size beyond what its socket holds.  A client asks, then reads. */
#define NX_CONN_QUEUE_MAX (NX_FRAME_MAX + (64u << 10))

/* Sends one frame without waiting: what the socket does not take is queued on the
 * connection (at most NX_CONN_QUEUE_MAX; one with fds must go out at once).  A client
 * that does not keep up is closed.  0 or -errno. */
int nx_conn_send(struct nx_conn *c, uint16_t type, const void *msg_pb, const int *fds,
                 int nfds);
/* Sends ERROR{status, text}. */
void nx_conn_error(struct nx_conn *c, uint32_t status, const char *text);
/* Sends ERROR{status, text} and closes the connection. */
void nx_conn_fail(struct nx_conn *c, uint32_t status, const char *text);
/* Closes the connection (its client, if any, is dropped by the close callback). */
void nx_conn_close(struct nx_conn *c);

#endif
