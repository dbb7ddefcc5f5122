/* cluster.c - see cluster.h. */
#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cert_check.h"
#include "certwatch.h"
#include "client.h"
#include "context.h"
#include "log.h"
#include "mem.h"
#include "node_ops.h"
#include "peer_msg.h"
#include "peertest.h"
#include "rendezvous.h"
#include "transport_lanes.h"
#include "transport_quic.h"
#include "wire.h"
#include "xcoll.h"
#include "xcomm.h"
#include "xp2p.h"
#include "xgrow.h"
#include "xshrink.h"
#include "xsplit.h"

static struct {
    struct nx_transport *t;
    struct nx_transport *q; /* the QUIC endpoint of t (with lanes: lane 0's) */
    char addr[NX_ADDR_MAX];  /* advertised, canonical */
    char bound[NX_ADDR_MAX]; /* the listen address with the port the kernel gave */
} cl;

bool nx_cluster_enabled(void)
{
    return cl.t != NULL;
}

struct nx_transport *nx_cluster_transport(void)
{
    return cl.t;
}

void nx_cluster_progress(void)
{
    if (cl.t)
        cl.t->ops->progress(cl.t);
}

const char *nx_cluster_addr(void)
{
    return cl.addr;
}

bool nx_cluster_is_self(const char *canon)
{
    if (!cl.t || !canon || !*canon)
        return false;
    if (!strcmp(canon, cl.addr) || !strcmp(canon, cl.bound))
        return true;
    /* Bound to 0.0.0.0:P, we are every local address at port P. */
    return nx_addr_is_wildcard(cl.bound) && nx_addr_port(canon) == nx_addr_port(cl.bound) &&
           nx_addr_is_local_host(canon);
}

struct nx_node *nx_cluster_node(struct nx_tpeer *p)
{
    if (!p->user) {
        struct nx_node *n = nx_xcalloc(1, sizeof(*n));
        n->tp = p;
        n->state = NX_TPEER_CONNECTING;
        n->since = nx_now();
        p->user = n;
    }
    return p->user;
}

static void node_free(struct nx_tpeer *p)
{
    free(p->user);
    p->user = NULL;
}

struct nx_tpeer *nx_cluster_peer(const char *addr, char *err, size_t errlen)
{
    if (!cl.t) {
        snprintf(err, errlen, "this nexard has no network (set listen=...)");
        return NULL;
    }
    struct nx_tpeer *p = cl.t->ops->peer(cl.t, addr, err, errlen);
    if (!p)
        return NULL;
    struct nx_tpeer_stats st;
    cl.t->ops->stats(p, &st);
    if (st.state == NX_TPEER_LOST) {
        /* A new conversation with a peer we lost: it may be back. */
        node_free(p);
        cl.t->ops->peer_forget(p);
        p = cl.t->ops->peer(cl.t, addr, err, errlen);
        if (!p)
            return NULL;
    }
    nx_cluster_node(p);
    return p;
}

int nx_cluster_send(struct nx_tpeer *p, uint64_t channel, Nexar__PeerMsg *m)
{
    size_t len;
    uint8_t *buf = nx_peer_msg_pack(m, &len);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    int rv = cl.t->ops->send(p, channel, &iov, 1, 0);
    free(buf);
    return rv;
}

int nx_cluster_send_addr(const char *addr, Nexar__PeerMsg *m)
{
    char err[160];
    struct nx_tpeer *p = nx_cluster_peer(addr, err, sizeof(err));
    if (!p) {
        NX_WARN("cluster", "cannot reach %s: %s", addr, err);
        return -EINVAL;
    }
    int rv = nx_cluster_send(p, NX_CHAN_CTL, m);
    if (rv < 0)
        NX_WARN("cluster", "cannot send to %s: %s", addr, strerror(-rv));
    return rv;
}

/* Both the transport's LOST and our own drop end here, once per loss. */
static void peer_lost(struct nx_tpeer *p, const char *reason)
{
    struct nx_node *n = nx_cluster_node(p);
    if (n->state == NX_TPEER_LOST)
        return;
    n->state = NX_TPEER_LOST;
    n->since = nx_now();
    snprintf(n->reason, sizeof(n->reason), "%s", reason ? reason : "lost");
    NX_WARN("cluster", "peer %s lost: %s", p->addr, n->reason);
    nx_peertest_peer_lost(p, n->reason);
    nx_rdv_peer_lost(p->addr, n->reason, n->was_up);
}

void nx_cluster_drop(struct nx_tpeer *p, const char *why)
{
    NX_WARN("cluster", "dropping peer %s: %s", p->addr, why);
    nxd.stats.protocol_violations++;
    cl.t->ops->close_peer(p, why);
    peer_lost(p, why);
}

/* Which module handles a PeerMsg body, and on which channels it may arrive. */
static const char *dispatch(struct nx_tpeer *p, uint64_t channel, const Nexar__PeerMsg *m)
{
    switch (m->body_case) {
    case NEXAR__PEER_MSG__BODY_TEST_BEGIN:
    case NEXAR__PEER_MSG__BODY_TEST_END:
        if (!NX_CHAN_IS_TEST(channel))
            return "peer test begin/end outside a test channel";
        return nx_peertest_on_ctl(p, channel, m);
    case NEXAR__PEER_MSG__BODY_TEST_RESULT:
        if (channel != NX_CHAN_CTL)
            return "peer test result outside the control channel";
        return nx_peertest_on_ctl(p, channel, m);
    default:
        if (channel != NX_CHAN_CTL)
            return "control message outside the control channel";
        return nx_rdv_on_msg(p, m);
    }
}

/* NULL, or why the peer must be dropped. */
static const char *handle(struct nx_tpeer *p, uint64_t channel, const void *data, size_t len,
                          char *buf, size_t buflen)
{
    struct nx_wire_msg w;
    const char *why = NULL;
    if (channel == NX_LANES_HELLO) { /* lanes take theirs: we run one */
        snprintf(buf, buflen, "quic_lanes differ: 1 on %s, more on %s; set quic_lanes alike "
                 "on every node", cl.addr, p->addr);
        return buf;
    }
    if (nx_wire_decode(data, len, &w, &why) < 0) {
        snprintf(buf, buflen, "bad message envelope: %s", why ? why : "?");
        return buf;
    }
    switch (w.type) {
    case NX_WIRE_CTL: {
        Nexar__PeerMsg *m = nx_peer_msg_decode(w.body, w.body_len, &why);
        if (!m)
            return why;
        nx_cluster_node(p)->version = m->version;
        why = dispatch(p, channel, m);
        nx_peer_msg_free(m);
        return why;
    }
    case NX_WIRE_TEST:
        return nx_peertest_on_data(p, channel, &w);
    case NX_WIRE_DATA:
        return nx_xcoll_on_data(p, channel, &w, data, len);
    case NX_WIRE_P2P:
        return nx_xp2p_on_msg(p, channel, &w, data, len);
    default:
        return "unknown message type";
    }
}

static void on_message(void *arg, struct nx_tpeer *p, uint64_t channel, const void *data,
                       size_t len)
{
    char buf[256];
    if (nx_cluster_node(p)->state == NX_TPEER_LOST)
        return; /* dropped by us; the transport may still deliver what it had */
    const char *why = handle(p, channel, data, len, buf, sizeof(buf));
    if (why)
        nx_cluster_drop(p, why);
    /* Jobs may have failed: ranks dropped and completions posted wait for the flush. */
    nx_clients_flush();
}

/* A long message arriving in packets: collective data may go straight into its step. */
static void *on_stream(void *arg, struct nx_tpeer *p, uint64_t channel, const void *head,
                       size_t headlen, size_t len)
{
    struct nx_wire_msg w;
    (void)arg;
    if (nx_cluster_node(p)->state == NX_TPEER_LOST ||
        nx_wire_decode_head(head, headlen, len, &w, NULL) < 0 || w.type != NX_WIRE_DATA)
        return NULL; /* it comes whole, and is judged then */
    return nx_xcoll_stream_begin(p, channel, &w);
}

static void on_stream_data(void *arg, void *sink, const void *data, size_t n)
{
    (void)arg;
    nx_xcoll_stream_data(sink, data, n);
    nx_clients_flush(); /* as on_message: the piece may have ended a part, or failed it */
}

static void on_stream_end(void *arg, void *sink, int whole)
{
    (void)arg;
    nx_xcoll_stream_end(sink, whole);
}

static void on_peer(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *reason)
{
    struct nx_node *n = nx_cluster_node(p);
    if (st == NX_TPEER_LOST) {
        peer_lost(p, reason);
        nx_clients_flush();
        return;
    }
    if (n->state == NX_TPEER_LOST)
        return;
    n->state = st;
    n->since = nx_now();
    if (st == NX_TPEER_UP) {
        n->was_up = true;
        struct nx_tpeer_stats s;
        cl.t->ops->stats(p, &s);
        NX_INFO("cluster", "peer %s up (%s, %s)", p->addr, s.inbound ? "it dialed" : "we dialed",
                s.cipher[0] ? s.cipher : "?");
        nx_peertest_peer_up(p);
    }
}

static void on_sent(void *arg, struct nx_tpeer *p, uint64_t token)
{
    if (token & NX_TOKEN_TEST)
        nx_peertest_on_sent(p, token);
    else if (token & NX_TOKEN_XCOLL)
        nx_xcoll_on_sent(token);
}

static void on_copied(void *arg, uint64_t token)
{
    (void)arg;
    if (token & NX_TOKEN_XCOLL)
        nx_xcoll_on_copied(token);
}

/* The TLS files must all be there before we bind: say which one is missing. */
static int check_tls(const struct nx_config *c)
{
    const struct {
        const char *key, *val, *what;
    } need[] = {
        {"tls_ca", c->tls_ca, "the cluster CA certificate"},
        {"tls_cert", c->tls_cert, "this node's certificate"},
        {"tls_key", c->tls_key, "this node's private key"},
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        if (!need[i].val) {
            NX_ERROR("cluster", "listen = %s needs %s = FILE (%s, PEM); it is not set",
                     c->listen, need[i].key, need[i].what);
            return -EINVAL;
        }
        if (access(need[i].val, R_OK) < 0) {
            int e = errno;
            NX_ERROR("cluster", "%s = %s: %s", need[i].key, need[i].val, strerror(e));
            return -e;
        }
    }
    return 0;
}

static void set_addresses(const struct nx_config *c)
{
    char err[160];
    char host_port[NX_ADDR_MAX];
    snprintf(cl.bound, sizeof(cl.bound), "%s", cl.t->local_addr);
    if (nx_addr_canon(c->listen, host_port, sizeof(host_port), err, sizeof(err)) == 0) {
        char host[NX_ADDR_MAX];
        nx_addr_split(host_port, true, host, sizeof(host), NULL);
        bool v6 = host_port[0] == '[';
        snprintf(cl.bound, sizeof(cl.bound), v6 ? "[%s]:%d" : "%s:%d", host,
                 nx_quic_port(cl.q));
    }
    if (c->advertise && nx_addr_canon(c->advertise, cl.addr, sizeof(cl.addr), err,
                                      sizeof(err)) < 0) {
        NX_WARN("cluster", "advertise = %s: %s; advertising %s", c->advertise, err,
                cl.t->local_addr);
        snprintf(cl.addr, sizeof(cl.addr), "%s", cl.t->local_addr);
    } else if (!c->advertise) {
        snprintf(cl.addr, sizeof(cl.addr), "%s", cl.bound);
    }
    if (nx_addr_is_wildcard(cl.addr))
        NX_WARN("cluster", "listening on %s without advertise: other daemons learn our "
                "address from our packets; set advertise = HOST:PORT to name it", cl.addr);
}

int nx_cluster_init(const struct nx_quic_inspect *inspect)
{
    const struct nx_config *c = &nxd.cfg;
    /* With or without a network: the rendezvous refuses a coordinator without one. */
    nx_cluster_node_ops_install();
    if (!c->listen) {
        NX_INFO("cluster", "no listen address: serving this node only");
        return 0;
    }
    int rv = check_tls(c);
    if (rv < 0)
        return rv;
    if (c->keepalive_ms >= c->peer_idle_timeout_ms)
        NX_WARN("cluster", "keepalive_ms %u is not below peer_idle_timeout_ms %u: an idle "
                "peer may be declared lost", c->keepalive_ms, c->peer_idle_timeout_ms);

    struct nx_quic_conf qc;
    nx_quic_conf_defaults(&qc);
    qc.listen = c->listen;
    qc.advertise = c->advertise;
    qc.tls_ca = c->tls_ca;
    qc.tls_cert = c->tls_cert;
    qc.tls_key = c->tls_key;
    qc.idle_timeout_ms = c->peer_idle_timeout_ms;
    qc.keepalive_ms = c->keepalive_ms;
    qc.window_bytes = c->quic_window_bytes;
    qc.stream_window_bytes = c->quic_stream_window_bytes;
    qc.max_udp_payload = c->quic_max_udp_payload;
    qc.cc = c->quic_cc && !strcmp(c->quic_cc, "cubic") ? NX_QUIC_CC_CUBIC : NX_QUIC_CC_BBR;
    qc.inspect = inspect;
    struct nx_transport_cb cb = {
        .arg = NULL, .on_message = on_message, .on_peer = on_peer, .on_sent = on_sent,
        .on_copied = on_copied, .on_stream = on_stream, .on_stream_data = on_stream_data,
        .on_stream_end = on_stream_end};
    char err[256];
    if (c->quic_lanes > 1) {
        cl.t = nx_lanes_new(nxd.loop, &qc, c->quic_lanes, &cb, err, sizeof(err));
        cl.q = cl.t ? nx_lanes_first(cl.t) : NULL;
    } else {
        cl.t = cl.q = nx_quic_new(nxd.loop, &qc, &cb, err, sizeof(err));
    }
    if (!cl.t) {
        NX_ERROR("cluster", "cannot start the QUIC endpoint at %s: %s", c->listen, err);
        return -EINVAL;
    }
    set_addresses(c);
    NX_INFO("cluster", "QUIC endpoint at %s (peers reach us at %s); peer idle timeout %u ms, "
            "keep-alive %u ms; remote inspection (HTTP/3) %s", cl.bound, cl.addr,
            c->peer_idle_timeout_ms, c->keepalive_ms, c->inspect ? "on" : "off");
    nx_certwatch_start(cl.q);
    return 0;
}

int nx_cluster_reload_tls(char *msg, size_t len)
{
    char err[256], subject[160], when[40];
    int rolled;
    if (!cl.t) {
        snprintf(msg, len, "no network (listen is not set), no credentials to read");
        NX_INFO("cluster", "reload: %s", msg);
        return 0;
    }
    if ((cl.q != cl.t ? nx_lanes_reload(cl.t, &rolled, err, sizeof(err))
                      : nx_quic_reload(cl.t, &rolled, err, sizeof(err))) != 0) {
        snprintf(msg, len, "keeping the credentials in use: %s", err);
        NX_ERROR("cluster", "reload: %s", msg);
        return -EINVAL;
    }
    time_t end = nx_quic_own_cert(cl.q, subject, sizeof(subject));
    snprintf(msg, len, "new credentials (%s, until %s); %d peer connection(s) to hand over "
             "to successors", subject[0] ? subject : "no certificate",
             end == (time_t)-1 ? "-" : nx_cert_time(end, when, sizeof(when)), rolled);
    NX_INFO("cluster", "reload: %s", msg);
    nx_certwatch_start(cl.q);
    return 0;
}

time_t nx_cluster_cert(char *subject, size_t len)
{
    if (!cl.t) {
        if (len)
            subject[0] = 0;
        return (time_t)-1;
    }
    return nx_quic_own_cert(cl.q, subject, len);
}

void nx_cluster_tick(double now)
{
    if (!cl.t)
        return;
    nx_rdv_tick(now);
    nx_xsplit_tick(now);
    nx_xshrink_tick(now);
    nx_xgrow_tick(now);
    nx_xcomm_tick(now);
    nx_peertest_tick(now);
    nx_certwatch_tick(now);
}

static void free_node(struct nx_tpeer *p, void *arg)
{
    node_free(p);
}

void nx_cluster_fini(void)
{
    if (!cl.t)
        return;
    nx_certwatch_stop();
    nx_peertest_fini();
    nx_xsplit_fini();
    nx_xshrink_fini();
    nx_xgrow_fini();
    nx_xcomm_fini();
    nx_rdv_fini();
    cl.t->ops->each_peer(cl.t, free_node, NULL);
    cl.t->ops->destroy(cl.t);
    cl.t = NULL;
    cl.addr[0] = cl.bound[0] = '\0';
}
