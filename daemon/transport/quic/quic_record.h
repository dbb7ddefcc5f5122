/*
 * quic_record.h - the byte format of our QUIC streams, and its incremental parser.
 *
 * Every unidirectional stream between two daemons carries, in order:
 *
 *     preamble  "nxq1" | channel (u64, big endian)                     12 bytes, once
 *     record    length (u32, big endian, <= NX_TMSG_MAX) | payload     repeated
 *     switch    NX_QSWITCH (u32) | channel (u64, big endian)           from here the stream
 *                                                                      carries that channel
 *
 * The parser is a state machine over the bytes of one stream and nothing else: no
 * connection, no ngtcp2, no allocation of its own (the caller's ops hand out buffers), so
 * that it is fuzzed and unit-tested on bytes alone (tests/fuzz/fuzz_qrecord.c,
 * tests/transport/test_qrecord.c).  The bytes come from a peer that passed mTLS, but every
 * length is still checked before it is believed: a record may make the caller allocate
 * at most NX_TMSG_MAX bytes.
 */
#ifndef NX_QUIC_RECORD_H
#define NX_QUIC_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h" /* NX_TMSG_MAX */

#define NX_QPRE_LEN 12           /* stream preamble: magic "nxq1" + channel (BE64) */
#define NX_QREC_HDR 4            /* record header: payload length (BE32) */
#define NX_QSWITCH 0xffffffffu   /* a "length" that says: the stream now carries channel ... */
#define NX_QMAGIC "nxq1"
/* A record at least this long that does not lie whole in the bytes at hand is offered to
 * ops->begin, with at least its first NX_QREC_HEAD bytes. */
#define NX_QREC_STREAM_MIN NX_TSTREAM_MIN
#define NX_QREC_HEAD NX_TSTREAM_HEAD
_Static_assert(NX_QREC_HEAD < NX_QREC_STREAM_MIN, "an offered record holds its head");

/* What the parser needs from its owner.  arg is the caller's, passed through. */
struct nx_qrec_ops {
    /* A buffer of at least len (<= NX_TMSG_MAX) bytes for a record that arrives in pieces;
     * *cap is handed back to put().  Must not return NULL (the daemon aborts on OOM). */
    void *(*get)(void *arg, size_t len, size_t *cap);
    /* Takes back a buffer from get(); buf may be NULL. */
    void (*put)(void *arg, void *buf, size_t cap);
    /* One whole record of channel (len 0 included: data may then be NULL).  data is only
     * valid during the call: straight from the caller's bytes when the record arrived in
     * one piece, else the get() buffer.  Nonzero stops the parse (the consumer is going
     * away): the bytes after this record are left unread. */
    int (*deliver)(void *arg, uint64_t channel, const uint8_t *data, size_t len);
    /* Optional (NULL: every record is delivered whole).  A record of len >=
     * NX_QREC_STREAM_MIN bytes that arrives in pieces, offered once its first headlen >=
     * NX_QREC_HEAD bytes are here: NULL leaves it to be gathered and
     * delivered whole; anything else is a sink that then gets every byte of the record
     * from the first, in order and in pieces as they come (data), and then end(sink, 1)
     * after the last, or end(sink, 0) if the stream stops inside it (nx_qrec_fini).  The
     * record then never reaches deliver.  data's nonzero stops the parse, as deliver's. */
    void *(*begin)(void *arg, uint64_t channel, const uint8_t *head, size_t headlen,
                   size_t len);
    int (*data)(void *arg, void *sink, const uint8_t *d, size_t n);
    void (*end)(void *arg, void *sink, int whole);
};

enum nx_qrec_state {
    NX_QREC_PRE,    /* in the preamble */
    NX_QREC_LEN,    /* in a record header (or between records, hdr_have == 0) */
    NX_QREC_BODY,   /* in a record's payload */
    NX_QREC_SWITCH, /* in a switch record's channel */
    NX_QREC_FAILED, /* the bytes broke the format; why says how */
};

struct nx_qrec {
    uint64_t channel;         /* the channel the stream carries now */
    enum nx_qrec_state state;
    uint8_t hdr[NX_QPRE_LEN]; /* a preamble, header or switch channel arriving in pieces */
    size_t hdr_have;
    uint32_t msglen;
    uint8_t *buf;             /* from ops->get, while a record arrives in pieces */
    size_t have, cap;
    void *sink;               /* from ops->begin, while a record streams */
    const char *why;          /* static text, once failed */
};

void nx_qrec_init(struct nx_qrec *r);

/*
 * Parses the next len bytes of the stream, calling ops->deliver for every record they
 * complete (or ops->data for a streamed one's bytes), in order.  Returns
 *   0        every byte was parsed (a partial record waits for the next call);
 *   1        deliver asked to stop: the parser is between records, the rest is unread;
 *            or data did: the parser is inside that streamed record, which fini ends;
 *   -EPROTO  the bytes break the format; *why (static text, the reason the transport
 *            closes the connection with) is "bad stream preamble" or "record longer than
 *            NX_TMSG_MAX".  The parser stays failed: later calls return the same.
 * Records delivered before an error stay delivered.
 */
int nx_qrec_feed(struct nx_qrec *r, const uint8_t *d, size_t len,
                 const struct nx_qrec_ops *ops, void *arg, const char **why);

/* The stream ended (FIN): 0 between records, else -EPROTO with *why "stream ended inside
 * a record" (or the failure that came first).  A stream without its preamble is inside. */
int nx_qrec_end(const struct nx_qrec *r, const char **why);

/* Hands a partial record's buffer back (ops->put), or ends its stream (ops->end with
 * whole 0); the parser may be dropped after. */
void nx_qrec_fini(struct nx_qrec *r, const struct nx_qrec_ops *ops, void *arg);

#endif
