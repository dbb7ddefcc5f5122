/*
 * frame.h - the frame around every control message on the Unix socket.
 *
 * A frame is a 16-byte header followed by `length` bytes of a protobuf-c message
 * whose type the header names.  All header fields are little-endian.
 *
 *   0  u32 magic    NX_FRAME_MAGIC ("NXF1")
 *   4  u16 version  NX_PROTO_VERSION of the sender
 *   6  u16 type     enum nx_msg_type
 *   8  u32 length   payload bytes, at most NX_FRAME_MAX
 *  12  u32 flags    0; reserved
 *
 * The first message on every connection is HELLO from the client, answered by
 * HELLO_REPLY.  A peer whose version the daemon does not speak gets an ERROR
 * frame and is closed.  The header is validated before a single payload byte is
 * decoded.
 *
 * Version history:
 *   1  HELLO, JOIN (memfd + 2 eventfds on JOIN_REPLY, then the peers' segments when
 *      JoinReply.pull_count says so: shm_abi.h, peer reads), CTL, ERROR.
 *      Later additions that keep version 1, announced in HelloReply.features so that a
 *      client never sends a type its daemon does not know:
 *        DEV_REGISTER, DEV_UNREGISTER, DEV_REPLY (NX_FEATURE_DEVICE: CUDA buffers).
 */
#ifndef NX_FRAME_H
#define NX_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NX_FRAME_MAGIC 0x3146584eu /* "NXF1" */
#define NX_PROTO_VERSION 1u
#define NX_FRAME_HDR_BYTES 16u
#define NX_FRAME_MAX (1u << 20)
/* A JoinReply's three, and up to NX_PULL_MAX_RANKS - 1 peers' segments (shm_abi.h). */
#define NX_FRAME_MAX_FDS 35

enum nx_msg_type {
    NX_MSG_HELLO = 1,       /* Hello */
    NX_MSG_HELLO_REPLY = 2, /* HelloReply */
    NX_MSG_JOIN = 3,        /* JoinRequest */
    NX_MSG_JOIN_REPLY = 4,  /* JoinReply (+ memfd, sq eventfd, cq eventfd when ok) */
    NX_MSG_CTL = 5,         /* CtlRequest */
    NX_MSG_CTL_REPLY = 6,   /* CtlReply */
    NX_MSG_ERROR = 7,       /* ErrorReply: the daemon closes after sending it */
    NX_MSG_DEV_REGISTER = 8,   /* DeviceRegister: rank -> daemon, after JOIN */
    NX_MSG_DEV_UNREGISTER = 9, /* DeviceUnregister: rank -> daemon, after JOIN */
    NX_MSG_DEV_REPLY = 10,     /* DeviceReply: the answer to either */
    NX_MSG_COMM_QUERY = 11,    /* CommQuery: rank -> daemon, after JOIN */
    NX_MSG_COMM_REPLY = 12,    /* CommReply: the answer */
    NX_MSG_TYPE_MAX = 12
};

/* HelloReply.features bits. */
#define NX_FEATURE_DEVICE 0x1u /* device (CUDA) buffers: DEV_* messages, NX_SQE_DEVICE */

struct nx_frame_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t length;
    uint32_t flags;
};

/* Writes the 16 header bytes for (type, length) into out. */
void nx_frame_hdr_encode(uint8_t out[NX_FRAME_HDR_BYTES], uint16_t type, uint32_t length);

/* Parses and validates 16 header bytes.  Returns 0, or -EPROTO (bad magic, flags,
 * type or length) or -EPROTONOSUPPORT (version) with a reason in *why. */
int nx_frame_hdr_decode(const uint8_t in[NX_FRAME_HDR_BYTES], struct nx_frame_hdr *h,
                        const char **why);

/*
 * Incremental parser for a byte stream (the daemon's libuv reads arrive in
 * arbitrary pieces).  Feed bytes; each complete frame is delivered through cb.
 * A frame over NX_FRAME_MAX or with a bad header fails the stream for good.
 */
typedef int (*nx_frame_cb)(void *arg, const struct nx_frame_hdr *h, const uint8_t *payload);

struct nx_frame_parser {
    uint8_t hdr[NX_FRAME_HDR_BYTES];
    size_t hdr_have;
    struct nx_frame_hdr cur;
    uint8_t *payload; /* malloc'd, cur.length bytes */
    size_t payload_have;
    int failed; /* the negative code that failed the stream */
    const char *why;
};

void nx_frame_parser_init(struct nx_frame_parser *p);
void nx_frame_parser_fini(struct nx_frame_parser *p);

/* Returns 0 when all bytes were consumed, the parser's negative error when the
 * stream is bad, or the first non-zero value cb returned (which stops parsing). */
int nx_frame_parser_feed(struct nx_frame_parser *p, const uint8_t *buf, size_t len,
                         nx_frame_cb cb, void *arg);

/* One sendmsg of buf[0..len) (a whole frame or the rest of one) on a nonblocking socket,
 * with fds (SCM_RIGHTS) on its first byte: for the daemon, whose loop never waits for a
 * client.  Returns the bytes written (0 when the socket is full), or -errno. */
ssize_t nx_chan_try_send(int sock, const uint8_t *buf, size_t len, const int *fds, int nfds);

/* ---- blocking channel helpers (shim, tools) ----------------------------------- */

/* Sends one frame, optionally with fds (SCM_RIGHTS).  0 or -errno. */
int nx_chan_send(int sock, uint16_t type, const uint8_t *payload, uint32_t length,
                 const int *fds, int nfds);

/*
 * Receives one frame within timeout_ms (-1: forever).  *payload is malloc'd (free
 * it), fds received with it go to fds[0..*nfds) (at most max_fds, the rest closed).
 * Returns 0, -ETIMEDOUT, -ECONNRESET (peer closed), -EPROTO, -ENOMEM, -EMFILE (the frame
 * carried descriptors that found no room in this process: it is consumed, and those
 * that came are closed) or -errno.
 */
/* For a text a user reads: what errno err means when descriptors run out (EMFILE: "who has
 * its maximum of N open files (raise)", ENFILE: the system's table), strerror otherwise.
 * Returns buf. */
const char *nx_fd_why(int err, const char *who, const char *raise, char *buf, size_t len);

int nx_chan_recv(int sock, struct nx_frame_hdr *h, uint8_t **payload, int timeout_ms,
                 int *fds, int max_fds, int *nfds);

#endif /* NX_FRAME_H */
