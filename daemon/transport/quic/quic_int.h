/*
 * quic_int.h - the QUIC transport's internals, shared by its files and by nobody else.
 *
 * Objects and who owns them:
 *   nx_quic   the endpoint: one UDP socket, the TLS credentials, the CID routing table,
 *             every peer record.  Freed when its last libuv handle has closed.
 *   nx_qpeer  another daemon, keyed by its address.  Owns the send side of every channel
 *             (queued messages live here, not on a connection, so that a simultaneous open
 *             can swap the connection under them).  Lives until peer_forget or destroy.
 *   nx_qconn  one ngtcp2 connection plus its GnuTLS session and expiry timer.  A peer has
 *             at most one.  Freed in the timer's close callback.
 *   nx_qchan  one channel of one peer: its message queue and, once the connection is up,
 *             its unidirectional stream.
 *   nx_qrstream  the receive side of one remote stream: record parser state.
 *   nx_h3s    the HTTP/3 server session of an inspector (ALPN "h3", h3_server.c): owned
 *             by its peer record, which is an inspector's own (out of the address map,
 *             never visible) and freed with it.
 *
 * Re-entrancy: user callbacks (on_message, on_sent, on_peer UP) run inside ngtcp2 callbacks.
 * Whatever the user does from there that would touch ngtcp2 (close_peer, peer_forget) is
 * recorded on the objects and carried out by nx_qconn_leave() once ngtcp2 has returned.
 * LOST notifications are always posted and delivered from the endpoint's idle handle.
 */
#ifndef NX_QUIC_INT_H
#define NX_QUIC_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <uv.h>

#include "bufpool.h"
#include "quic_record.h" /* the stream format: NX_QPRE_LEN, NX_QSWITCH, the parser */
#include "transport.h"
#include "transport_quic.h"

#define NX_QSCID_LEN 16          /* our connection IDs: routing needs one fixed length */
#define NX_QTX_SLOTS 32          /* sendmmsg entries per flush */
#define NX_QTX_SLOT_CAP 65000    /* bytes per GSO super-datagram (kernel caps at 64 KiB) */
#define NX_QTX_FLUSH_BYTES (256u << 10) /* sendmmsg once this much waits */
#define NX_QRX_SLOTS 16          /* recvmmsg entries per call */
#define NX_QRX_SLOT_CAP 65536    /* GRO hands us up to 64 KiB per entry */

/* An ACK of data that came while we had nothing to send waits this long for a message of
 * ours to ride on (arm_timer in quic_drive.c).  On libuv's millisecond clock such a timer
 * fires within twice that, which is the max_ack_delay we announce: the peer's probe
 * timeout adds it, and ngtcp2's default of 25 ms made every lost last packet of a message
 * cost 26 ms (docs/transport.md). */
#define NX_QACK_WAIT_MS 1
#define NX_QMAX_ACK_DELAY_MS (2 * NX_QACK_WAIT_MS)
#define NX_QBIG_DGRAM 1200 /* every QUIC path carries this: a bulk sender's datagrams do */

/* Application error codes in CONNECTION_CLOSE. */
#define NX_QERR_CLOSED 0x1u      /* close_peer() or shutdown */
#define NX_QERR_PROTO 0x2u       /* the peer broke the record format */
#define NX_QERR_REFUSED 0x3u     /* superseded or refused */
#define NX_QERR_ROLLED 0x4u      /* both sides moved to the successor (quic_roll.c) */

/* Rollover (quic_roll.c): a successor connection is dialed with an initial destination
 * ID of this length that starts with NX_QROLL_TAG, and the end of one side's traffic on
 * the old connection is an empty record on channel NX_QCHAN_ROLL. */
#define NX_QROLL_DCID_LEN 20
#define NX_QROLL_TAG "nxroll"
#define NX_QCHAN_ROLL UINT64_MAX

/* What a TLS session negotiated (quic_tls.c). */
enum nx_qalpn { NX_QALPN_NONE, NX_QALPN_PEER, NX_QALPN_H3 };

union nx_qsa {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
    struct sockaddr_storage ss;
};

/* ---- quic_map.c: byte-keyed hash map (keys up to 20 bytes) ---- */
struct nx_qmap_ent;
struct nx_qmap {
    struct nx_qmap_ent **b;
    size_t nb, n;
    uint64_t seed;
};
void nx_qmap_init(struct nx_qmap *m);
void nx_qmap_fini(struct nx_qmap *m);
void *nx_qmap_get(const struct nx_qmap *m, const void *key, size_t klen);
void nx_qmap_put(struct nx_qmap *m, const void *key, size_t klen, void *val);
int nx_qmap_del(struct nx_qmap *m, const void *key, size_t klen);
/* Calls fn on every value; fn must not change the map. */
void nx_qmap_each(const struct nx_qmap *m, void (*fn)(void *val, void *arg), void *arg);

/* An endpoint's own pool of large message buffers (base/bufpool.h), when conf.bufs
 * gives none: this many buffers, this many bytes. */
#define NX_QBUF_KEEP 8
#define NX_QBUF_BYTES (256u << 20)

/* ---- quic_addr.c ---- */
/* Canonical "1.2.3.4:5" / "[::1]:5"; v4-mapped v6 prints as v4. */
void nx_qaddr_format(const struct sockaddr *sa, char *out, size_t outlen);
/* Parses "host:port" / "[v6]:port" (addr.h's syntax, nx_addr_split); a host name is looked
 * up only with may_resolve (at the endpoint's start: a peer's address, taken while the loop
 * serves every job, must be numeric, netaddr.h).  0 or -EINVAL with err. */
int nx_qaddr_resolve(const char *s, bool may_resolve, union nx_qsa *out, socklen_t *len,
                     char *err, size_t errlen);
/* A total order both ends of a 4-tuple agree on (v4-mapped compares as v4). */
int nx_qaddr_cmp(const struct sockaddr *a, const struct sockaddr *b);
/* The map key of an address: family, bytes, port; returns its length. */
size_t nx_qaddr_key(const struct sockaddr *sa, uint8_t key[20]);
int nx_qaddr_is_loopback(const struct sockaddr *sa);
/* Rewrites a into family (v4 <-> v4-mapped); -EAFNOSUPPORT with err when it cannot. */
int nx_qaddr_to_family(int family, union nx_qsa *a, socklen_t *len, char *err, size_t errlen);

/* ---- quic_udp.c: the socket ---- */
struct nx_qtx_slot {
    union nx_qsa to;
    socklen_t tolen;
    union nx_qsa from; /* source address for IP_PKTINFO; only on a wildcard socket */
    size_t len, seg, nseg;
    int closed;        /* no more segments may be appended */
};

struct nx_qudp {
    int fd;
    int family;         /* AF_INET or AF_INET6 */
    int wildcard;       /* bound to any-address: use PKTINFO both ways */
    int gso, gro;       /* kernel support found at open */
    union nx_qsa local; /* as bound (port resolved) */
    socklen_t local_len;
    uv_poll_t poll;
    int poll_events;
    /* rx */
    uint8_t *rxbuf;
    /* tx: slots [tx_sent, tx_n) hold datagrams not yet handed to the kernel */
    uint8_t *txbuf;
    struct nx_qtx_slot tx[NX_QTX_SLOTS];
    int tx_n, tx_sent;
    size_t tx_bytes;    /* queued in the slots */
    int tx_blocked;     /* EAGAIN: wait for POLLOUT */
    int rx_paused;      /* nx_quic_rx_pause: the owner cannot take more now */
    uint64_t send_errors;
};

struct nx_quic;
int nx_qudp_open(struct nx_quic *q, const union nx_qsa *bind, socklen_t bindlen, char *err,
                 size_t errlen);
void nx_qudp_close(struct nx_quic *q);
/* Space for the next packet to `to`, at most maxlen bytes; NULL when the batch is full and
 * the socket would block.  nx_qudp_tx_commit() keeps `len` bytes of it. */
uint8_t *nx_qudp_tx_reserve(struct nx_quic *q, const struct sockaddr *to, socklen_t tolen,
                            const struct sockaddr *from, size_t maxlen, size_t *avail);
void nx_qudp_tx_commit(struct nx_quic *q, size_t len, size_t maxlen);
/* Ends the current GSO run so the next packet starts a new datagram. */
void nx_qudp_tx_break(struct nx_quic *q);
/* Hands queued datagrams to the kernel; 0, or -EAGAIN when some stay queued. */
int nx_qudp_tx_flush(struct nx_quic *q);
/* One datagram right now (Retry, reset, version negotiation); errors dropped. */
void nx_qudp_send_one(struct nx_quic *q, const struct sockaddr *to, socklen_t tolen,
                      const struct sockaddr *from, const uint8_t *data, size_t len);
/* Local address for a dial to `to` (routing lookup on a wildcard socket). */
int nx_qudp_local_for(struct nx_quic *q, const struct sockaddr *to, socklen_t tolen,
                      union nx_qsa *out, socklen_t *outlen);

/* ---- quic_cid.c ---- */
/* Derives q->cid_secret from q->reset_secret.  0 or -1. */
int nx_qcid_init(struct nx_quic *q);
/* A new connection ID of ours: NX_QSCID_LEN bytes, random but for a keyed tag.  0 or -1
 * (no randomness). */
int nx_qcid_new(const struct nx_quic *q, ngtcp2_cid *cid);
/* The Stateless Reset token of our ID cid (NGTCP2_STATELESS_RESET_TOKENLEN bytes): an HMAC
 * under the reset secret, so a restarted daemon with the same node key computes the same
 * one.  0 or -1. */
int nx_qcid_reset_token(const struct nx_quic *q, const ngtcp2_cid *cid, uint8_t *token);
/* Nonzero when id (a packet's destination ID) was issued by a daemon with our node key:
 * ours, perhaps forgotten since; zero for noise and for other endpoints' resets. */
int nx_qcid_ours(const struct nx_quic *q, const uint8_t *id, size_t len);

/* ---- quic_tls.c ---- */
struct nx_qtls {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    int have_cert;
    time_t own_end;        /* when our proof ends (nx_cert_own_end); -1: no certificate */
    char own_subject[160]; /* our leaf's distinguished name */
    gnutls_certificate_credentials_t *retired; /* replaced by a reload; NULL once freed */
    size_t nretired;       /* also the reloads so far: which credentials a session has */
    size_t *sessions;      /* nretired + 1: live sessions made with retired[i], then cred */
};
int nx_qtls_init(struct nx_qtls *x, const struct nx_quic_conf *conf, uint8_t reset_secret[32],
                 char *err, size_t errlen);
void nx_qtls_fini(struct nx_qtls *x);
/* Reads the files of conf again into new credentials for the handshakes to come; the old
 * ones stay with the sessions made with them.  reset_secret gets the one derived from the
 * key read.  0, or -errno with err (nothing changed). */
int nx_qtls_reload(struct nx_qtls *x, const struct nx_quic_conf *conf,
                   uint8_t reset_secret[32], char *err, size_t errlen);
struct nx_qconn;
int nx_qtls_session_new(struct nx_qtls *x, struct nx_qconn *c, int server);
/* c's session is gone: credentials replaced by a reload are freed with their last one. */
void nx_qtls_session_done(struct nx_qtls *x, struct nx_qconn *c);
/* Credentials in memory: the current ones, and replaced ones that sessions still use. */
size_t nx_qtls_creds_held(const struct nx_qtls *x);
/* ngtcp2 recv_crypto_data: feeds GnuTLS and records why a handshake failed. */
int nx_qtls_recv_crypto(ngtcp2_conn *conn, ngtcp2_crypto_level level, uint64_t offset,
                        const uint8_t *data, size_t datalen, void *user_data);
/* 0 when the handshake settled on the ALPN the connection is for: nexar/1, or h3 on an
 * inspector's connection. */
int nx_qtls_check_alpn(struct nx_qconn *c);
enum nx_qalpn nx_qtls_alpn(struct nx_qconn *c);
/* The subject of the peer's certificate, for logs ("" when there is none). */
void nx_qtls_peer_name(struct nx_qconn *c, char *out, size_t outlen);
void nx_qtls_cipher(struct nx_qconn *c, char *out, size_t outlen);
const char *nx_qtls_alert_text(uint8_t alert);

/* ---- quic_stream.c (channels, queues, lanes, writer) and quic_recv.c (records in) ---- */
struct nx_qmsg {
    struct nx_qmsg *next;
    uint64_t token;
    size_t len; /* record bytes: header + payload */
    size_t cap; /* of the allocation (from the endpoint's bufs) */
    uint8_t data[];
};

struct nx_qchan {
    struct nx_qpeer *peer;
    uint64_t channel;
    int64_t stream_id;        /* -1: none on the current connection */
    uint64_t pre_off;         /* stream offset of pre: 0, or where we took the stream over */
    uint8_t pre[NX_QPRE_LEN]; /* preamble, or the switch record (NX_QSWITCH, channel) */
    struct nx_qmsg *head, *tail;
    struct nx_qmsg *wmsg;     /* first message not wholly given to ngtcp2 */
    size_t woff;              /* bytes of wmsg given */
    uint64_t wstream;         /* stream offset given to ngtcp2 */
    uint64_t head_off;        /* stream offset where head starts */
    uint64_t roll_end;        /* rolling over: the stream may be written up to here */
    int in_ready, in_open, in_idle, blocked;
    struct nx_qchan *rnext, *rprev; /* ready ring / open queue links */
    struct nx_qchan *inext, *iprev; /* idle list: a stream, nothing unacknowledged */
};

struct nx_qrstream {
    struct nx_qrstream *next, *prev;
    int64_t id;
    struct nx_qrec rec;       /* its buffers come from the endpoint's bufs */
};

int nx_qstream_send(struct nx_qpeer *p, uint64_t channel, const struct iovec *iov, int iovcnt,
                    uint64_t token);
/* Queues a message made by nx_quic_msg_new(); owns it from here, even on failure. */
int nx_qstream_send_built(struct nx_qpeer *p, uint64_t channel, void *msg, uint64_t token);
/* Opens streams for channels waiting for one, as far as the peer's stream limit allows. */
void nx_qstream_open_pending(struct nx_qconn *c);
/* The connection came up: every channel with queued messages goes to the writer. */
void nx_qstream_kick_all(struct nx_qpeer *p);
/* Writes one packet (coalescing channels); like ngtcp2_conn_writev_stream's return. */
ngtcp2_ssize nx_qstream_write_pkt(struct nx_qconn *c, uint8_t *dest, size_t destlen,
                                  ngtcp2_tstamp ts);
int nx_qstream_on_acked(struct nx_qconn *c, struct nx_qchan *ch, uint64_t offset,
                        uint64_t datalen);
int nx_qstream_on_recv(struct nx_qconn *c, uint32_t flags, int64_t id, const uint8_t *data,
                       size_t datalen, void *stream_user_data);
void nx_qstream_on_extend(struct nx_qchan *ch);
void nx_qstream_rclose(struct nx_qconn *c, struct nx_qrstream *rs);
/* Drops every stream binding of the peer's channels (the connection is going away). */
void nx_qstream_unbind(struct nx_qpeer *p);
/* Drops every queued message (peer lost or forgotten). */
void nx_qstream_free_all(struct nx_qpeer *p);
/* Rollover: each channel may finish the message it is in the middle of on the old
 * connection, and nothing after it; a channel without a stream waits. */
void nx_qstream_roll_begin(struct nx_qpeer *p);
/* Whether everything the old connection was given is acknowledged. */
int nx_qstream_roll_drained(struct nx_qpeer *p);
/* Detaches every channel from its stream on old (all acknowledged), for new streams on
 * the successor from the first message not yet sent. */
void nx_qstream_roll_rebase(struct nx_qpeer *p, struct nx_qconn *old);
uint32_t nx_qstream_count(struct nx_qconn *c);
uint64_t nx_qstream_lost_pkts(struct nx_qconn *c);

/* ---- quic_conn.c (creation, callbacks) and quic_drive.c (read, write, timer, end) ---- */
struct nx_qconn {
    struct nx_quic *q;
    struct nx_qpeer *peer;
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    ngtcp2_path_storage ps;
    uv_timer_t timer;
    int server;
    int busy;          /* inside ngtcp2: defer teardown */
    int confirmed;     /* handshake confirmed: UP */
    int dead;          /* ngtcp2_conn deleted; waiting for the timer to close */
    int fail;          /* an error was recorded: tear down on leave */
    int close_app;     /* close with an application error code (else transport) */
    int stateless_reset;
    int timed_out;     /* ended by the handshake or idle timer: worth a new try */
    size_t cred_gen;   /* made with our credentials of that reload (nx_qtls.nretired) */
    int in_flush_list, in_touched;
    int inspector;     /* ALPN h3: its stream events go to the peer's nx_h3s */
    int roll_mark;     /* an old connection: 1 our end marker is due, 2 it is written */
    int64_t roll_sid;  /* the marker's stream, once opened (roll_off bytes written) */
    size_t roll_off;
    int peer_rolled;   /* the peer's end marker came on this connection */
    struct nx_qconn *flush_next, *touched_next;
    ngtcp2_cid cids[16];     /* every CID routed to us */
    size_t ncids;
    struct nx_qrstream *rstreams;
    uint64_t pkts_sent, pkts_recv;
    unsigned rx_since_tx;    /* packets with stream data read since we last wrote one */
    uint64_t rx_bytes_since_tx; /* and the stream bytes they carried */
    int rx_gap;              /* since then, a big datagram with no data in order: a gap */
    int rx_data;             /* the packet being read carried stream data */
    ngtcp2_tstamp started, last_rx;
    int gnutls_err;      /* the fatal GnuTLS error of the handshake */
    time_t cert_end;     /* when the peer's certificate proof expires (0: not known yet) */
    ngtcp2_tstamp cert_deadline; /* the same on our clock, set once the handshake is done */
    char why[160];       /* why it failed: shown in LOST */
};

/* A dial of p; successor: a rollover's, with the tagged initial destination ID. */
struct nx_qconn *nx_qconn_client_new(struct nx_qpeer *p, int successor, char *err,
                                     size_t errlen);
struct nx_qconn *nx_qconn_server_new(struct nx_qpeer *p, const ngtcp2_pkt_hd *hd,
                                     const ngtcp2_path *path, const ngtcp2_cid *odcid,
                                     int retried);
void nx_qconn_read(struct nx_qconn *c, const ngtcp2_path *path, const uint8_t *pkt,
                   size_t len, ngtcp2_tstamp ts);
/* Writes what can be written now and re-arms the timer. */
void nx_qconn_flush(struct nx_qconn *c);
/* After a receive batch: flushes when something is owed at once, else only re-arms. */
void nx_qconn_after_rx(struct nx_qconn *c);
/* Closes with CONNECTION_CLOSE carrying reason; the connection is gone afterwards. */
void nx_qconn_close(struct nx_qconn *c, uint64_t app_err, const char *reason);
/* Forgets the connection without a word to the peer. */
void nx_qconn_drop(struct nx_qconn *c);
/* Called after every ngtcp2 entry: carries out deferred teardown; the peer may be gone. */
void nx_qconn_leave(struct nx_qconn *c);
/* Records a failure reason (first one wins) and marks the connection for teardown. */
void nx_qconn_fail(struct nx_qconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- quic_server.c ---- */
void nx_qserver_on_datagram(struct nx_quic *q, uint8_t *data, size_t len,
                            const union nx_qsa *local, socklen_t local_len,
                            const union nx_qsa *remote, socklen_t remote_len);
void nx_qroute_add(struct nx_qconn *c, const ngtcp2_cid *cid);
void nx_qroute_del(struct nx_qconn *c, const ngtcp2_cid *cid);
void nx_qroute_del_all(struct nx_qconn *c);

/* ---- transport_quic.c (endpoint) and quic_peer.c (records) ---- */
struct nx_qpeer {
    struct nx_tpeer base;
    struct nx_quic *q;
    struct nx_qpeer *next, *prev; /* every record, live or zombie */
    union nx_qsa addr;            /* as the socket speaks it (v4-mapped on a v6 socket) */
    socklen_t addrlen;
    uint8_t key[20];
    size_t keylen;
    int in_map;                   /* the live record for its address */
    int visible;                  /* the layer above knows it (peer() or on_peer UP) */
    char alias[NX_TADDR_MAX];     /* the last other spelling peer() knew it by */
    enum nx_tpeer_state state;
    int inbound;
    int up_notified, lost_posted, forget_req, close_req;
    char reason[128];
    struct nx_qconn *conn;
    struct nx_qconn *succ;        /* rolling over: the connection that takes over */
    struct nx_qconn *old;         /* rolled over: the old one, until both ends are done */
    int rolling;                  /* succ is up: the channels drain off conn */
    int roll_again;               /* credentials changed during a handover or a dial */
    ngtcp2_tstamp roll_retry_at;  /* roll_again after a dial that timed out: not before */
    ngtcp2_duration roll_backoff; /* the wait after the next such dial */
    struct nx_qmap chans;         /* channel -> nx_qchan */
    struct nx_qchan *ready;       /* ring of channels with unsent, unblocked data */
    struct nx_qchan *open_head, *open_tail; /* channels waiting for a stream */
    struct nx_qchan *idle_head, *idle_tail; /* least recently idle first */
    struct nx_qpeer *notify_next;
    int in_notify;
    int dial_pending;             /* send() asked for a dial; the idle handle makes it */
    struct nx_qpeer *dial_next;
    uint64_t bytes_sent, bytes_recv, msgs_sent, msgs_recv, queued_bytes;
    uint64_t old_pkts_sent, old_pkts_recv; /* of connections already gone */
    uint32_t handovers;           /* moves to a successor (quic_roll.c) */
    int inspector;                /* an inspection client (ALPN h3), never a peer */
    int inspect_counted;          /* counted in q->inspectors */
    struct nx_h3s *h3;            /* its HTTP/3 session, once up */
};

struct nx_quic {
    struct nx_transport base;
    uv_loop_t *loop;
    struct nx_quic_conf conf;     /* strings owned */
    struct nx_qtls tls;
    struct nx_qudp udp;
    struct nx_qmap routes;        /* CID -> nx_qconn */
    struct nx_qmap peers;         /* address key -> live nx_qpeer */
    struct nx_qpeer *all;         /* list of every record */
    union nx_qsa adv;             /* where we dial from on a wildcard socket (if numeric) */
    socklen_t advlen;
    uv_idle_t idle;
    int idle_on;
    struct nx_qconn *flush_list;
    struct nx_qconn *touched;
    struct nx_qpeer *notify;      /* LOST notifications waiting for the idle handle */
    struct nx_qpeer *dials;       /* peers to dial from the idle handle */
    int handles_open;
    int destroying;
    uint8_t reset_secret[32];     /* derived from the node key: survives restarts */
    uint8_t cid_secret[32];       /* from reset_secret: tags the IDs we issue (quic_cid.c) */
    uint8_t token_secret[32];     /* random: Retry tokens live for seconds */
    uint64_t resets_sent, retries_sent, refused;
    uint64_t reset_window, reset_count;
    struct nx_bufpool own_bufs;
    struct nx_bufpool *bufs;      /* conf.bufs, or own_bufs */
    struct nx_qrec *feeding;      /* the parser delivering now (nx_quic_take_delivered) */
    ngtcp2_tstamp rx_ts;          /* when the current receive batch arrived */
    struct nx_qconn *route_hit;   /* the last routed connection (bulk: the same one) */
    uint8_t route_cid[NX_QSCID_LEN];
    uint32_t inspectors;          /* inspection sessions up */
};

ngtcp2_tstamp nx_qnow(void);
/* Socket events: a receive batch is done (flush what it touched); the socket drained. */
void nx_quic_rx_done(struct nx_quic *q);
void nx_quic_tx_ready(struct nx_quic *q);
/* A libuv handle of the endpoint (socket, idle, a connection timer) finished closing. */
void nx_quic_handle_closed(struct nx_quic *q);
/* The peer's current connection failed with why: LOST, or a quiet end for an unannounced
 * inbound record.  May free p. */
void nx_qpeer_conn_failed(struct nx_qpeer *p, const char *why);
/* Carries out a peer_forget() made while the connection was busy.  May free p. */
void nx_qpeer_settle(struct nx_qpeer *p);
void nx_quic_schedule_flush(struct nx_qconn *c);
/* Wakes the idle handle (dials, flushes, LOST notifications). */
void nx_quic_idle_start(struct nx_quic *q);
/* Marks the peer LOST (dropping its queue and connection) and posts on_peer(LOST). */
void nx_qpeer_lost(struct nx_qpeer *p, const char *reason);
/* A record for an inbound connection from addr (a new one when the old one is dead). */
struct nx_qpeer *nx_qpeer_find(struct nx_quic *q, const struct sockaddr *addr);
/* A new live record for addr (an older one for the address is retired first). */
struct nx_qpeer *nx_qpeer_new(struct nx_quic *q, const union nx_qsa *addr, socklen_t len);
/* Detaches a dead record from the address map, so a new connection gets a new record. */
void nx_qpeer_retire(struct nx_qpeer *p);
/* Frees the record now (it is in no callback's hands). */
void nx_qpeer_free(struct nx_qpeer *p);
/* The peer's connection came up: notify, open streams. */
void nx_qpeer_up(struct nx_qpeer *p);
void nx_qpeer_notify_unlink(struct nx_qpeer *p);
/* Closes every connection of p: the current one, and a successor and an old one during a
 * handover (the peer is going). */
void nx_qpeer_close_conns(struct nx_qpeer *p, uint64_t app_err, const char *why);
/* ---- quic_roll.c: a connection handed over to a successor without losing a message ---- */
/* Dials a successor of p's connection (after our credentials changed).  0; -EBUSY when a
 * handover or a dial is under way (it is dialed again once that is over); -1. */
int nx_qroll_start(struct nx_qpeer *p);
/* Whether an initial destination ID is a successor's. */
int nx_qroll_is_tagged(const ngtcp2_cid *dcid);
/* c, p's successor, finished its handshake: the channels start draining off p->conn. */
void nx_qroll_confirmed(struct nx_qconn *c);
/* Outside ngtcp2: moves p over once the old connection is drained; closes the old one
 * once both ends are done. */
void nx_qroll_progress(struct nx_qpeer *p);
/* The peer's end marker came on c. */
void nx_qroll_marker(struct nx_qconn *c);
/* What an old connection writes: the end marker once, then nothing but ACKs. */
ngtcp2_ssize nx_qroll_write_pkt(struct nx_qconn *c, uint8_t *dest, size_t destlen,
                                ngtcp2_tstamp ts);
/* c is being destroyed: forget it as successor or old connection. */
void nx_qroll_conn_gone(struct nx_qconn *c);
/* The handshake of c is done (both sides): UP for the peer, or the successor's step. */
void nx_qconn_confirmed(struct nx_qconn *c);

/* ---- quic_inspect.c: inspectors (ALPN h3) beside the peers ---- */
/* The ClientHello named h3 (server side, from GnuTLS): the connection becomes an
 * inspector's, with an inspector's transport parameters.  0, or -1 (refuse it). */
int nx_qinspect_classify(struct nx_qconn *c);
/* Its handshake completed: start the HTTP/3 session, or close it when too many are up. */
void nx_qinspect_up(struct nx_qpeer *p);
/* Its connection ended (why); the record is freed. */
void nx_qinspect_gone(struct nx_qpeer *p, const char *why);
/* Frees the HTTP/3 session of a record being freed. */
void nx_qinspect_free(struct nx_qpeer *p);
/* ngtcp2 events of an inspector's connection, handed to its HTTP/3 session. */
int nx_qinspect_recv(struct nx_qconn *c, uint32_t flags, int64_t id, const uint8_t *data,
                     size_t datalen);
int nx_qinspect_acked(struct nx_qconn *c, int64_t id, uint64_t datalen);
int nx_qinspect_stream_close(struct nx_qconn *c, uint32_t flags, int64_t id,
                             uint64_t app_err);
int nx_qinspect_stream_reset(struct nx_qconn *c, int64_t id);
int nx_qinspect_extend_stream(struct nx_qconn *c, int64_t id);
int nx_qinspect_extend_bidi(struct nx_qconn *c, uint64_t max_streams);
ngtcp2_ssize nx_qinspect_write_pkt(struct nx_qconn *c, uint8_t *dest, size_t destlen,
                                   ngtcp2_tstamp ts);

/* Inside ngtcp2 for one of this peer's connections: teardown must wait. */
static inline int nx_qpeer_busy(const struct nx_qpeer *p)
{
    return (p->conn && p->conn->busy) || (p->succ && p->succ->busy) ||
           (p->old && p->old->busy);
}

#endif
