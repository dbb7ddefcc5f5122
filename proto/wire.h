/*
 * wire.h - what one daemon-to-daemon message looks like (inside one transport message).
 *
 *   [ 8-byte envelope ][ body ]
 *
 * envelope (little-endian): u16 magic 0x584E ("NX"), u8 version (1), u8 type, u32 flags.
 * type CTL:  body = one protobuf-c Nexar__PeerMsg (proto/peer.proto): rendezvous, rank
 *            table, abort, peer-test control.
 * type DATA: body = 64-byte nx_data_hdr, then exactly hdr.length payload bytes.
 * type TEST: body = 64-byte nx_data_hdr (job = test id, seq = message index), then the
 *            pattern payload of a peer test (nexarctl peer-test).
 * type P2P:  body = 64-byte nx_p2p_hdr, then exactly hdr.length payload bytes: one piece
 *            of a send to a rank on another node, or (flag ACK, no payload) the
 *            receiving node's acknowledgement of one.
 *
 * Everything here is decoded from untrusted bytes: the decoders check every length and
 * never read past len.  Unknown flags bits are rejected (they would change meaning); each
 * type owns its bits (only DATA has any so far), a CTL body is never empty, and a DATA/TEST
 * header whose offset + length would wrap 64 bits is refused.
 *
 * Version history of the DATA/TEST header: 48 bytes; then 64 (the op's full signature
 * after src: kind, dtype, redop, a zero byte, root, count).
 */
#ifndef NX_WIRE_H
#define NX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define NX_WIRE_MAGIC 0x584Eu
#define NX_WIRE_VERSION 1
#define NX_WIRE_ENV_BYTES 8
#define NX_DATA_HDR_BYTES 64

enum nx_wire_type { NX_WIRE_CTL = 1, NX_WIRE_DATA = 2, NX_WIRE_TEST = 3, NX_WIRE_P2P = 4 };

/* DATA flags (envelope). */
#define NX_WIRE_F_LAST 0x1u /* last message of this step from this sender */
#define NX_WIRE_FLAGS_KNOWN 0x1u
/* P2P flags (envelope). */
#define NX_WIRE_F_ACK 0x1u /* the receiver took the piece at offset; no payload */
#define NX_WIRE_P2P_FLAGS_KNOWN 0x1u

#define NX_P2P_HDR_BYTES 64

/*
 * The fixed header of a DATA/TEST body.  job and comm are keys every member node agrees
 * on (from the rendezvous), not local ids.  sig is the hash of the op's signature (kind,
 * dtype, count, root, reduce op): a receiver that computes another sig for the same seq
 * has found a cross-node mismatch before using the payload.
 */
struct nx_data_hdr {
    uint64_t job;
    uint64_t comm;
    uint64_t seq;    /* op sequence within comm */
    uint32_t step;   /* algorithm step (round) */
    uint32_t sig;
    uint64_t offset; /* byte offset of the payload within the step's buffer */
    uint32_t length; /* payload bytes that follow */
    uint32_t src;    /* sending node's index in the job's node table */
    /* DATA: the op's signature in full, so that a node that finds another one names it
     * (TEST: zero). */
    uint8_t kind, dtype, redop;
    uint32_t root;
    uint64_t count;
};

/*
 * The fixed header of a P2P body: one piece of message k from rank src to rank dst with
 * tag on comm (ranks as the communicator numbers them).  Every piece names the send's
 * dtype and count, so the receiving node compares them with the receive before it
 * places a byte; offset + length never passes count x element size (checked here).
 */
struct nx_p2p_hdr {
    uint64_t job;
    uint64_t comm;
    uint64_t k;      /* the message's number on (comm, src, dst, tag), from 0 */
    uint32_t tag;
    uint32_t src, dst;
    uint8_t dtype;   /* nexar_dtype_t of the send */
    uint64_t count;  /* elements of the send */
    uint64_t offset; /* byte offset of the payload within the message */
    uint32_t length; /* payload bytes that follow (0 for an ACK) */
};

struct nx_wire_msg {
    enum nx_wire_type type;
    uint32_t flags;
    struct nx_data_hdr hdr;  /* DATA, TEST */
    struct nx_p2p_hdr p2p;   /* P2P */
    const uint8_t *body;     /* CTL: the protobuf bytes; DATA/TEST: the payload */
    size_t body_len;
};

/* Writes the envelope (and for DATA/TEST the header) into out, which has room for
 * NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES; returns the bytes written.  The payload (or the
 * protobuf body) follows as a separate iovec. */
size_t nx_wire_put_ctl(uint8_t *out);
size_t nx_wire_put_data(uint8_t *out, enum nx_wire_type type, uint32_t flags,
                        const struct nx_data_hdr *h);
/* The same for P2P: out has room for NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES. */
size_t nx_wire_put_p2p(uint8_t *out, uint32_t flags, const struct nx_p2p_hdr *h);

/* Decodes one message of len bytes.  0, or -EBADMSG with a reason in why (static text; why
 * may be NULL) and *m zeroed.  m->body points into buf: valid as long as buf is. */
int nx_wire_decode(const void *buf, size_t len, struct nx_wire_msg *m, const char **why);

/* The same for a message of len bytes of which only the first have are at buf (a message
 * still arriving): every check nx_wire_decode makes, from the envelope and header alone,
 * which must be here (have >= min(len, NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES), else
 * -EBADMSG, "message head cut short").  m->body_len is the whole body's; only its first
 * have - (m->body - buf) bytes are at m->body. */
int nx_wire_decode_head(const void *buf, size_t have, size_t len, struct nx_wire_msg *m,
                        const char **why);

#endif
