/*
 * transport_quic.h - the QUIC implementation of transport.h (ngtcp2 0.12 + GnuTLS).
 *
 * Building one from the daemon config (what nexard does):
 *
 *     struct nx_quic_conf qc;
 *     nx_quic_conf_defaults(&qc);
 *     qc.listen = cfg->listen;               // "0.0.0.0:7000", "[::1]:7000"; port 0: any
 *     qc.advertise = cfg->advertise;         // NULL: the bound address
 *     qc.tls_ca = cfg->tls_ca;  qc.tls_cert = cfg->tls_cert;  qc.tls_key = cfg->tls_key;
 *     qc.idle_timeout_ms = cfg->peer_idle_timeout_ms;
 *     qc.keepalive_ms = cfg->keepalive_ms;
 *     qc.window_bytes = cfg->quic_window_bytes;
 *     qc.stream_window_bytes = cfg->quic_stream_window_bytes;
 *     qc.max_udp_payload = cfg->quic_max_udp_payload;
 *     struct nx_transport *t = nx_quic_new(loop, &qc, &callbacks, err, sizeof(err));
 *     ...
 *     t->ops->destroy(t);  uv_run(loop, UV_RUN_NOWAIT);   // let the handles close
 *
 * The constructor copies every string of conf; it reads no global state, so tests can run
 * several endpoints in one process.  t->local_addr is the advertised address (or the bound
 * one, with the port the kernel picked when listen asked for port 0).
 *
 * Behaviour beyond transport.h:
 * - One UDP socket per endpoint, for dialing and accepting alike, so that the remote address
 *   of a 4-tuple names the peer daemon before the handshake.  Simultaneous open: when an
 *   Initial arrives from A while our own dial to A has not come up, the side whose local
 *   address is smaller ignores it and the other accepts it and drops its dial; no message
 *   was written on the dropped dial (stream data waits for the handshake to be confirmed),
 *   so the queue simply carries over.
 * - Mutual TLS 1.3 against tls_ca, ALPN "nexar/1".  A peer without a certificate or with
 *   one from another CA is refused during the handshake; a dialing side reports LOST with
 *   the reason ("TLS: certificate not signed by the cluster CA", "peer closed: TLS alert
 *   certificate required: ...").  A refused inbound attempt is only logged: such a peer
 *   never reached the layer above.
 * - Remote inspection (conf.inspect set): a client that offers ALPN "h3" instead of
 *   "nexar/1" is an inspector, never a peer.  It passes the same mutual TLS, then speaks
 *   HTTP/3 to h3_server.c, which answers GETs through conf.inspect->get().  The
 *   layer above never hears of it (no on_peer, no record in peer() or each_peer); its
 *   record leaves the address map at its ClientHello, so it can neither supersede nor be
 *   superseded by a daemon's connection; at most inspect->max_conns of them are up at
 *   once (one more is closed with H3_EXCESSIVE_LOAD).
 * - close_peer() does not call on_peer for the local side: the caller knows.  destroy()
 *   calls no callback.
 * - close_peer() and peer_forget() may be called from inside on_message/on_sent/on_peer;
 *   destroy() may not.
 */
#ifndef NX_TRANSPORT_QUIC_H
#define NX_TRANSPORT_QUIC_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "transport.h"

/* What the inspection endpoint needs from its owner (nexard: daemon/ctl/h3_routes.c). */
struct nx_quic_inspect {
    /* Builds the body of GET route (a Nexar__CtlCommand of proto/inspect.h) in format (enum
     * nx_inspect_format: the packed CtlReply, or its JSON): *body is malloc'd (the
     * transport frees it), *len its length.  0, or -1 for a 500. */
    int (*get)(void *arg, int command, int format, uint8_t **body, size_t *len);
    void *arg;
    uint32_t max_conns;          /* inspectors up at once (>= 1) */
    uint32_t idle_timeout_ms;    /* an inspector silent this long is closed */
};

struct nx_bufpool; /* base/bufpool.h */

struct nx_quic_conf {
    const char *listen;          /* required: "host:port" to bind */
    const char *advertise;       /* NULL: the bound address */
    const char *tls_ca;          /* PEM: the cluster CA (required) */
    const char *tls_cert;        /* PEM: this node's certificate chain */
    const char *tls_key;         /* PEM: its private key */
    int test_lax_cert;           /* tests only: tls_cert/tls_key may be missing (dial-only,
                                  * cannot accept) or signed by another CA */
    uint32_t idle_timeout_ms;    /* silence after which a peer is lost */
    uint32_t keepalive_ms;       /* PING after this much quiet; 0: off */
    uint32_t handshake_timeout_ms; /* 0: max(idle timeout, 3 s) */
    uint64_t window_bytes;       /* connection flow-control window */
    uint64_t stream_window_bytes;/* per-stream window */
    uint32_t max_udp_payload;    /* <= 1452: PMTUD up to it; more: fixed, for loopback/jumbo */
    uint32_t loopback_udp_payload; /* towards a loopback peer, if larger (default 65527) */
    enum nx_quic_cc { NX_QUIC_CC_BBR, NX_QUIC_CC_CUBIC } cc; /* congestion control (BBR) */
    int retry;                   /* validate new peers' addresses with a Retry (default 1) */
    uint32_t max_streams;        /* concurrent channels a peer may open towards us */
    const struct nx_quic_inspect *inspect; /* NULL: ALPN "h3" is refused; else it must
                                            * outlive the transport */
    struct nx_bufpool *bufs;     /* where large message buffers come from and go back
                                  * to.  NULL: the endpoint keeps a few of its own.  Lanes
                                  * (transport_lanes.h) share one locked pool between
                                  * their endpoints and the loop thread that builds their
                                  * sends; it must outlive the transport */
};

/* Defaults matching daemon/config.c: 5 s idle, 1 s keep-alive, 64 MiB / 16 MiB windows,
 * 1452-byte datagrams (64 KiB towards loopback peers), Retry on, 1024 streams, BBR. */
void nx_quic_conf_defaults(struct nx_quic_conf *c);

/*
 * Binds conf->listen, loads the credentials and starts reading.  Returns the endpoint, or
 * NULL with a message in err (bad address, bind failure, unreadable PEM, a certificate the
 * CA does not sign).  The callbacks are copied.  Free with t->ops->destroy(t).
 */
struct nx_transport *nx_quic_new(uv_loop_t *loop, const struct nx_quic_conf *conf,
                                 const struct nx_transport_cb *cb, char *err, size_t errlen);

/*
 * A message built away from the endpoint's thread, then queued on it without a second
 * copy (lanes).  nx_quic_msg_new() takes the buffer from bufs (the endpoint's conf.bufs)
 * and sets *payload to the len bytes the caller fills; nx_quic_send_built() queues it as
 * send() would and owns it from then on, even when it fails (-ENOTCONN for a lost peer).
 */
void *nx_quic_msg_new(struct nx_bufpool *bufs, size_t len, uint8_t **payload);
/* Gives back a built message that will not be sent. */
void nx_quic_msg_free(struct nx_bufpool *bufs, void *msg);
int nx_quic_send_built(struct nx_tpeer *p, uint64_t channel, void *msg, uint64_t token);

/* From inside on_message: takes the buffer the message was assembled in (it arrived in
 * several packets), so that it outlives the call; the caller gives it back with
 * nx_bufpool_put(conf.bufs, buf, *cap), or free()s it (ops->take).  NULL when data is not
 * such a buffer (it came whole in one packet): copy it then.  Lanes hand received
 * messages to another thread this way. */
void *nx_quic_take_delivered(struct nx_transport *t, const void *data, size_t *cap);

/* Stops (1) or resumes (0) reading the socket: what arrives meanwhile waits in the
 * kernel's buffer, and beyond it is lost and sent again.  For an owner that hands messages
 * to a slower consumer (lanes): keep the pause well under the idle timeout, since nothing
 * from the peers, keep-alives included, is read during it. */
void nx_quic_rx_pause(struct nx_transport *t, int paused);

/* The bound port (useful after listen ":0"). */
int nx_quic_port(struct nx_transport *t);

/* When the proof this endpoint shows its peers ends: the earliest expiry of its
 * certificate chain and the CA that signed it, or (time_t)-1 without a certificate;
 * subject gets the certificate's distinguished name. */
time_t nx_quic_own_cert(struct nx_transport *t, char *subject, size_t len);

/* Reads tls_ca, tls_cert and tls_key again (the same checks as at start).  On success the
 * handshakes to come use them, and every live peer connection is handed over to a
 * successor made with them, with no message lost (*rolled: how many).  0, or -errno with
 * err and nothing changed. */
int nx_quic_reload(struct nx_transport *t, int *rolled, char *err, size_t errlen);
/* How many sets of credentials are in memory: the current ones, and those a reload
 * replaced that live connections still use (freed with the last of them). */
size_t nx_quic_creds_held(struct nx_transport *t);

#endif
