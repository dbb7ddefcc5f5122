/*
 * rawclient.h - a control-socket client written from the frame layout in
 * proto/frame.h, independent of proto/chan.c: the harness uses it to see that a
 * daemon answers, the hostile tests to send what no real client would.
 */
#ifndef TL_RAWCLIENT_H
#define TL_RAWCLIENT_H

#include <stddef.h>
#include <stdint.h>

struct rc_frame {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t length;
    uint32_t flags;
    uint8_t *payload; /* malloc'd, length bytes (free it) */
};

/* Connects to the Unix socket at path.  Returns the fd or -errno. */
int rc_connect(const char *path);

/* Writes all len bytes (MSG_NOSIGNAL).  0 or -errno. */
int rc_send_raw(int fd, const void *buf, size_t len);

/* Encodes a 16-byte header with the given fields (little-endian) into out. */
void rc_hdr(uint8_t out[16], uint32_t magic, uint16_t version, uint16_t type,
            uint32_t length, uint32_t flags);

/* Sends a well-formed frame (magic "NXF1", version 1, flags 0). */
int rc_send_frame(int fd, uint16_t type, const void *payload, uint32_t len);

/* Receives one frame within timeout_ms.  0, -ETIMEDOUT, -ECONNRESET (closed),
 * -EPROTO (bad header) or -errno. */
int rc_recv_frame(int fd, struct rc_frame *f, int timeout_ms);

/* Waits until the peer closes: 0 when it did within timeout_ms (data before the
 * close is discarded), -ETIMEDOUT otherwise. */
int rc_wait_closed(int fd, int timeout_ms);

/* Sends HELLO (kind ctl or rank) and expects HELLO_REPLY with proto_version 1.
 * 0, or a negative code with a reason in why. */
int rc_hello(int fd, int kind, int timeout_ms, const char **why);

/* Connects, says HELLO, closes: 0 when the daemon at path answered. */
int rc_ping(const char *path, int timeout_ms);

/* Packs a Hello / JoinRequest into a malloc'd buffer; returns its length. */
size_t rc_pack_hello(int kind, uint8_t **out);
size_t rc_pack_hello_v(int kind, uint32_t proto_version, uint8_t **out);
size_t rc_pack_join(const char *job, uint32_t rank, uint32_t world, uint32_t timeout_ms,
                    uint8_t **out);

/* The JOIN_REPLY on fd within limit_ms: its status, with its text in text; -1 (text
 * empty) without one. */
int rc_join_reply(int fd, int limit_ms, char *text, size_t len);

#endif /* TL_RAWCLIENT_H */
