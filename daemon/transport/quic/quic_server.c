/*
 * quic_server.c - where an incoming datagram goes.
 *
 * Every connection ID we hand out (our SCIDs, plus the client-chosen DCIDs of an accepted
 * Initial) maps to its connection in q->routes, so one socket serves any number of peers.
 * A packet for no known CID is either a new connection's Initial (accepted, after a Retry
 * that proves the source address, and after the simultaneous-open rule), or a packet for
 * a connection we no longer have, which gets a Stateless Reset: the reset secret comes
 * from the node key, so even after a restart the peer learns at once that we forgot it.
 */
#include <errno.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "log.h"
#include "mem.h"
#include "quic_int.h"

#define NX_QRETRY_TTL (10 * NGTCP2_SECONDS)
#define NX_QRESETS_PER_SEC 200 /* answers to unknown packets; the rest are dropped */

/* ---- routing table ---- */

void nx_qroute_add(struct nx_qconn *c, const ngtcp2_cid *cid)
{
    if (c->ncids >= sizeof(c->cids) / sizeof(c->cids[0]) || cid->datalen == 0)
        return;
    c->cids[c->ncids++] = *cid;
    c->q->route_hit = NULL;
    nx_qmap_put(&c->q->routes, cid->data, cid->datalen, c);
}

void nx_qroute_del(struct nx_qconn *c, const ngtcp2_cid *cid)
{
    c->q->route_hit = NULL;
    for (size_t i = 0; i < c->ncids; i++) {
        if (ngtcp2_cid_eq(&c->cids[i], cid)) {
            if (nx_qmap_get(&c->q->routes, cid->data, cid->datalen) == c)
                nx_qmap_del(&c->q->routes, cid->data, cid->datalen);
            c->cids[i] = c->cids[--c->ncids];
            return;
        }
    }
}

void nx_qroute_del_all(struct nx_qconn *c)
{
    c->q->route_hit = NULL;
    for (size_t i = 0; i < c->ncids; i++)
        if (nx_qmap_get(&c->q->routes, c->cids[i].data, c->cids[i].datalen) == c)
            nx_qmap_del(&c->q->routes, c->cids[i].data, c->cids[i].datalen);
    c->ncids = 0;
}

/* ---- stateless answers ---- */

static const struct sockaddr *reply_from(struct nx_quic *q, const union nx_qsa *local)
{
    return q->udp.wildcard ? &local->sa : NULL;
}

static void send_version_negotiation(struct nx_quic *q, const ngtcp2_version_cid *vc,
                                     size_t len, const union nx_qsa *local,
                                     const union nx_qsa *remote, socklen_t remote_len)
{
    uint8_t buf[256], r;
    uint32_t sv[] = {NGTCP2_PROTO_VER_V1};
    /* Only a full-size Initial earns an answer: no amplification for spoofed sources. */
    if (len < NGTCP2_MAX_UDP_PAYLOAD_SIZE || vc->dcidlen > 255 || vc->scidlen > 255)
        return;
    (void)gnutls_rnd(GNUTLS_RND_NONCE, &r, 1);
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(buf, sizeof(buf), r, vc->scid,
                                                          vc->scidlen, vc->dcid, vc->dcidlen,
                                                          sv, 1);
    if (n > 0)
        nx_qudp_send_one(q, &remote->sa, remote_len, reply_from(q, local), buf, (size_t)n);
}

static int reset_allowed(struct nx_quic *q)
{
    uint64_t now = uv_now(q->loop);
    if (now - q->reset_window >= 1000) {
        q->reset_window = now;
        q->reset_count = 0;
    }
    return q->reset_count++ < NX_QRESETS_PER_SEC;
}

static void send_stateless_reset(struct nx_quic *q, const ngtcp2_version_cid *vc, size_t len,
                                 const union nx_qsa *local, const union nx_qsa *remote,
                                 socklen_t remote_len)
{
    uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN], rnd[96], buf[96];
    ngtcp2_cid cid;
    /* Only for an ID we issued (quic_cid.c): not for noise, nor for another endpoint's
     * reset.  One byte shorter than what triggered it (RFC 9000 10.3); below 22 bytes
     * there is no room for one. */
    if (len < 22 || !nx_qcid_ours(q, vc->dcid, vc->dcidlen) || !reset_allowed(q))
        return;
    size_t rlen = len - 1 < sizeof(buf) ? len - 1 : sizeof(buf);
    size_t randlen = rlen - NGTCP2_STATELESS_RESET_TOKENLEN;
    ngtcp2_cid_init(&cid, vc->dcid, vc->dcidlen);
    if (nx_qcid_reset_token(q, &cid, token) != 0 ||
        gnutls_rnd(GNUTLS_RND_NONCE, rnd, randlen) != 0)
        return;
    ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(buf, sizeof(buf), token, rnd, randlen);
    if (n > 0) {
        NX_DEBUG("quic", "stateless reset (%zd bytes) for an unknown connection", n);
        q->resets_sent++;
        nx_qudp_send_one(q, &remote->sa, remote_len, reply_from(q, local), buf, (size_t)n);
    }
}

static void send_retry(struct nx_quic *q, const ngtcp2_pkt_hd *hd, const union nx_qsa *local,
                       const union nx_qsa *remote, socklen_t remote_len)
{
    uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN], buf[1280];
    ngtcp2_cid scid;
    if (nx_qcid_new(q, &scid) != 0)
        return;
    ngtcp2_ssize tl = ngtcp2_crypto_generate_retry_token(
        token, q->token_secret, sizeof(q->token_secret), hd->version, &remote->sa, remote_len,
        &scid, &hd->dcid, nx_qnow());
    if (tl < 0)
        return;
    ngtcp2_ssize n = ngtcp2_crypto_write_retry(buf, sizeof(buf), hd->version, &hd->scid, &scid,
                                               &hd->dcid, token, (size_t)tl);
    if (n > 0) {
        q->retries_sent++;
        nx_qudp_send_one(q, &remote->sa, remote_len, reply_from(q, local), buf, (size_t)n);
    }
}

/* ---- new connections ---- */

enum verdict { ACCEPT, IGNORE };

/*
 * The simultaneous-open rule.  Both daemons use one socket for everything, so the remote
 * address names the peer even now.  If we are still dialing it, the side with the smaller
 * local address ignores the other's Initial; the other accepts it and drops its own dial,
 * which wrote nothing yet (stream data waits for confirmation).  A second Initial from a
 * peer whose connection is up means it lost that connection (restart, or it gave up on
 * us): the old one is lost and the new one gets a fresh record -- unless our dial is the
 * up one and our address is the smaller, when the Initial is a leftover of the peer's own
 * abandoned dial.
 */
static enum verdict open_rule(struct nx_qpeer *p, const union nx_qsa *local,
                              const union nx_qsa *remote, struct nx_qconn **abandon,
                              int *supersede)
{
    struct nx_qconn *c = p ? p->conn : NULL;
    *abandon = NULL;
    *supersede = 0;
    if (!c)
        return ACCEPT;
    int we_win = nx_qaddr_cmp(&local->sa, &remote->sa) < 0;
    if (!c->server) {
        if (we_win)
            return IGNORE;
        if (c->confirmed)
            *supersede = 1;
        else
            *abandon = c;
        return ACCEPT;
    }
    if (c->confirmed)
        *supersede = 1;
    else
        *abandon = c;
    return ACCEPT;
}

static int check_token(struct nx_quic *q, const ngtcp2_pkt_hd *hd, const union nx_qsa *remote,
                       socklen_t remote_len, ngtcp2_cid *odcid)
{
    if (hd->token.len == 0 || hd->token.base[0] != NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY)
        return -1;
    return ngtcp2_crypto_verify_retry_token(odcid, hd->token.base, hd->token.len,
                                            q->token_secret, sizeof(q->token_secret),
                                            hd->version, &remote->sa, remote_len, &hd->dcid,
                                            NX_QRETRY_TTL, nx_qnow());
}

static void touch(struct nx_quic *q, struct nx_qconn *c)
{
    if (c->in_touched || c->dead)
        return;
    c->in_touched = 1;
    c->touched_next = q->touched;
    q->touched = c;
}

/* Does the datagram end with the reset token of one of the peer's CIDs we send to? */
static int maybe_reset(struct nx_qconn *c, const uint8_t *data, size_t len)
{
    ngtcp2_cid_token toks[16];
    size_t n = ngtcp2_conn_get_num_active_dcid(c->conn);
    if (n > 16)
        return 1; /* more than our limit allows: let ngtcp2 judge */
    n = n ? ngtcp2_conn_get_active_dcid(c->conn, toks) : 0;
    for (size_t i = 0; i < n; i++)
        if (toks[i].token_present &&
            memcmp(toks[i].token, data + len - NGTCP2_STATELESS_RESET_TOKENLEN,
                   NGTCP2_STATELESS_RESET_TOKENLEN) == 0)
            return 1;
    return 0;
}

/* With Retry on, an Initial without a token gets one (0: stop here), and one whose token
 * does not hold (forged, stale, another address's) is dropped.  1: go on; *retried says
 * whether the token was the way in. */
static int retry_gate(struct nx_quic *q, const ngtcp2_pkt_hd *hd, int token_ok,
                      const union nx_qsa *local, const union nx_qsa *remote,
                      socklen_t remote_len, int *retried)
{
    *retried = 0;
    if (!q->conf.retry)
        return 1;
    if (hd->token.len == 0) {
        send_retry(q, hd, local, remote, remote_len);
        return 0;
    }
    *retried = token_ok;
    return token_ok;
}

/*
 * A successor of a live connection (quic_roll.c): it goes beside the connection, which
 * stays until both ends have moved.  For a peer we have no live connection with (we
 * restarted, or it is gone), the dial is dropped: the dialer's old connection fails on
 * its own.  When both ends dial a successor at once, the dial of the smaller address is
 * kept, as in a simultaneous open; ours is given up only for an Initial past the Retry
 * gate, so that a Retry lost on the way cannot leave both ends without a dial.
 *
 * A connection we already moved off may still be here: the peer's close of it can be
 * lost, and then it lingers until a stateless reset or the idle timeout ends it.  The
 * peer dials a successor only once its own side of that connection is gone, so such a
 * dial is taken; the lingering one is closed once the successor is up.
 */
static void accept_successor(struct nx_quic *q, struct nx_qpeer *p, const ngtcp2_pkt_hd *hd,
                             int token_ok, const ngtcp2_cid *odcid, uint8_t *data, size_t len,
                             const union nx_qsa *local, socklen_t local_len,
                             const union nx_qsa *remote, socklen_t remote_len)
{
    int retried;
    if (!p || p->inspector || p->state != NX_TPEER_UP || !p->conn || !p->conn->confirmed ||
        p->rolling) {
        q->refused++;
        NX_DEBUG("quic", "%s: successor dial with no live connection to succeed: dropped",
                 p ? p->base.addr : "?");
        return;
    }
    int ours = p->succ && !p->succ->server; /* we dialed one too */
    if (ours && nx_qaddr_cmp(&local->sa, &remote->sa) < 0) {
        q->refused++;
        return; /* ours is kept */
    }
    if (!retry_gate(q, hd, token_ok, local, remote, remote_len, &retried))
        return;
    if (ours)
        snprintf(p->succ->why, sizeof(p->succ->why), "both ends dialed one: theirs is kept");
    if (p->succ) /* ours given up, or an earlier successor of theirs that never came up */
        nx_qconn_drop(p->succ);
    ngtcp2_path path = {{(struct sockaddr *)&local->sa, local_len},
                        {(struct sockaddr *)&remote->sa, remote_len},
                        NULL};
    struct nx_qconn *c = nx_qconn_server_new(p, hd, &path, odcid, retried);
    if (!c)
        return;
    p->succ = c;
    touch(q, c);
    nx_qconn_read(c, &c->ps.path, data, len, nx_qnow());
}

static void accept_initial(struct nx_quic *q, uint8_t *data, size_t len,
                           const union nx_qsa *local, socklen_t local_len,
                           const union nx_qsa *remote, socklen_t remote_len)
{
    ngtcp2_pkt_hd hd;
    ngtcp2_cid odcid = {0};
    struct nx_qconn *abandon;
    int supersede, retried;
    int rv = ngtcp2_accept(&hd, data, len);
    if ((rv != 0 && rv != NGTCP2_ERR_RETRY) || hd.type != NGTCP2_PKT_INITIAL ||
        !q->tls.have_cert || q->destroying)
        return;
    struct nx_qpeer *p = nx_qpeer_find(q, &remote->sa);
    /* Opened once, here: a successor's Initial carries its tag in the destination ID, or
     * after a Retry in the original one that the token holds. */
    int token_ok = hd.token.len && check_token(q, &hd, remote, remote_len, &odcid) == 0;
    if (nx_qroll_is_tagged(&hd.dcid) || (token_ok && nx_qroll_is_tagged(&odcid))) {
        accept_successor(q, p, &hd, token_ok, &odcid, data, len, local, local_len, remote,
                         remote_len);
        return;
    }
    if (open_rule(p, local, remote, &abandon, &supersede) == IGNORE) {
        q->refused++;
        NX_DEBUG("quic", "%s: simultaneous open: keeping our dial", p->base.addr);
        return;
    }
    if (!retry_gate(q, &hd, token_ok, local, remote, remote_len, &retried))
        return;
    if (abandon) {
        NX_DEBUG("quic", "%s: simultaneous open: accepting theirs, dropping our dial",
                 p->base.addr);
        nx_qconn_drop(abandon);
    }
    if (supersede) {
        nx_qpeer_lost(p, "peer opened a new connection (it restarted or lost ours)");
        p = NULL; /* lost records stay lost: the new connection gets a new one */
    }
    if (p && p->state == NX_TPEER_LOST)
        p = NULL;
    if (!p)
        p = nx_qpeer_new(q, remote, remote_len);
    ngtcp2_path path = {{(struct sockaddr *)&local->sa, local_len},
                        {(struct sockaddr *)&remote->sa, remote_len},
                        NULL};
    struct nx_qconn *c = nx_qconn_server_new(p, &hd, &path, &odcid, retried);
    if (!c) {
        if (!p->visible)
            nx_qpeer_free(p);
        return;
    }
    p->conn = c;
    p->inbound = 1;
    touch(q, c);
    nx_qconn_read(c, &c->ps.path, data, len, nx_qnow());
}

static struct nx_qconn *route(struct nx_quic *q, const ngtcp2_version_cid *vc)
{
    if (vc->dcidlen == NX_QSCID_LEN && q->route_hit &&
        memcmp(q->route_cid, vc->dcid, NX_QSCID_LEN) == 0)
        return q->route_hit;
    if (vc->dcidlen > NGTCP2_MAX_CIDLEN)
        return NULL;
    struct nx_qconn *c = nx_qmap_get(&q->routes, vc->dcid, vc->dcidlen);
    if (c && vc->dcidlen == NX_QSCID_LEN) {
        q->route_hit = c;
        memcpy(q->route_cid, vc->dcid, NX_QSCID_LEN);
    }
    return c;
}

void nx_qserver_on_datagram(struct nx_quic *q, uint8_t *data, size_t len,
                            const union nx_qsa *local, socklen_t local_len,
                            const union nx_qsa *remote, socklen_t remote_len)
{
    ngtcp2_version_cid vc;
    int rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, NX_QSCID_LEN);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        send_version_negotiation(q, &vc, len, local, remote, remote_len);
        return;
    }
    if (rv != 0)
        return;
    struct nx_qconn *c = route(q, &vc);
    if (c) {
        /* The local side of the path stays what the connection began with, so a PKTINFO
         * quirk never looks like a migration. */
        ngtcp2_path path = {c->ps.path.local,
                            {(struct sockaddr *)&remote->sa, remote_len},
                            NULL};
        touch(q, c);
        nx_qconn_read(c, &path, data, len, q->rx_ts);
        return;
    }
    if (data[0] & 0x80) {
        accept_initial(q, data, len, local, local_len, remote, remote_len);
        return;
    }
    /* A Stateless Reset starts with random bytes where a CID would be, so it cannot be
     * routed: let the connections we have with that address look at it.  The one we
     * moved off counts too: a peer whose close of it was lost answers it with a reset. */
    struct nx_qpeer *p = nx_qpeer_find(q, &remote->sa);
    struct nx_qconn *cand[3] = {p ? p->conn : NULL, p ? p->old : NULL, p ? p->succ : NULL};
    for (size_t i = 0; i < 3 && len >= 21; i++) {
        struct nx_qconn *pc = cand[i];
        if (pc && pc->confirmed && !pc->dead && maybe_reset(pc, data, len)) {
            touch(q, pc);
            nx_qconn_read(pc, &pc->ps.path, data, len, nx_qnow());
            return;
        }
    }
    send_stateless_reset(q, &vc, len, local, remote, remote_len);
}
