/*
 * quic_roll.c - a peer's connection handed over to a successor, with every message
 * delivered once and in order, so that the jobs on it never notice.
 *
 * Why: a connection ends when the certificate proof it was made with does (quic_drive.c),
 * and a node that installs new credentials (nx_quic_reload) must show them to its peers
 * without failing the jobs between them.  So the node that reloaded dials each peer
 * again, and the two connections are swapped under the channels:
 *
 *   1. The successor is dialed with an initial destination ID that starts with
 *      NX_QROLL_TAG; the peer accepts it beside the live connection instead of taking it
 *      for a restart (quic_server.c).  Its handshake checks the new credentials both ways.
 *      Should it fail, the old connection goes on as if nothing happened.
 *   2. Once the successor is up on a side, that side drains: each channel may finish the
 *      message it is in the middle of on the old connection, and nothing more goes there.
 *   3. When everything the old connection carried is acknowledged, that side moves:
 *      every channel starts a new stream on the successor with its first unsent message.
 *      An acknowledgement means the peer has delivered the bytes (they are parsed in the
 *      packet's callback), so no message on the successor can overtake one on the old
 *      connection.  Then it writes its end marker, an empty record on channel
 *      NX_QCHAN_ROLL, on the old connection.
 *   4. A side that has moved and has the peer's marker closes the old connection with
 *      NX_QERR_ROLLED; both directions are drained by then.  The other side takes that
 *      close as the marker.
 *
 * Both ends may reload at once and dial each other: the dial of the smaller address is
 * kept, as in a simultaneous open.  A successor dial that times out (the peer's old
 * connection lingered, a loss burst) is made again after 1 s, then 2, 4 ... up to
 * NX_QROLL_BACKOFF_MAX: until it is up, the peer sees credentials that are no longer
 * ours, and the connection ends with their proof.  One the peer refused (its CA does not
 * trust ours) is not: the reason is logged on both nodes, and a reload of either one
 * tries again.  If the old connection fails before a side moved,
 * that is the peer lost, as always; after, it is only logged: the side that still had
 * data on it loses the peer, and so does this one through the successor.
 */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "quic_int.h"

#define NX_QROLL_BACKOFF_FIRST (1 * NGTCP2_SECONDS)
#define NX_QROLL_BACKOFF_MAX (60 * NGTCP2_SECONDS)

/* preamble "nxq1" | NX_QCHAN_ROLL, then a record of length 0: static, since ngtcp2 keeps
 * pointers into what it is given until it is acknowledged. */
static const uint8_t end_marker[NX_QPRE_LEN + NX_QREC_HDR] = {
    'n', 'x', 'q', '1', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};

int nx_qroll_is_tagged(const ngtcp2_cid *dcid)
{
    return dcid->datalen == NX_QROLL_DCID_LEN &&
           memcmp(dcid->data, NX_QROLL_TAG, sizeof(NX_QROLL_TAG) - 1) == 0;
}

int nx_qroll_start(struct nx_qpeer *p)
{
    char err[160];
    if (p->inspector || p->state == NX_TPEER_LOST)
        return -1;
    if (p->state != NX_TPEER_UP || !p->conn || !p->conn->confirmed || p->succ || p->old) {
        /* A dial or a handover made with the credentials before: once it is over, the
         * connection moves again, to show the newest (nx_qroll_progress). */
        p->roll_again = 1;
        return -EBUSY;
    }
    p->roll_again = 0;
    struct nx_qconn *c = nx_qconn_client_new(p, 1, err, sizeof(err));
    if (!c) {
        NX_WARN("quic", "%s: cannot dial a successor connection: %s", p->base.addr, err);
        return -1;
    }
    p->succ = c;
    NX_INFO("quic", "%s: dialing a successor connection (new credentials)", p->base.addr);
    nx_qconn_flush(c);
    return 0;
}

void nx_qconn_confirmed(struct nx_qconn *c)
{
    if (c->confirmed)
        return;
    c->confirmed = 1;
    if (c->peer && c->peer->succ == c)
        nx_qroll_confirmed(c);
    else
        nx_qpeer_up(c->peer);
}

static void close_old(struct nx_qpeer *p)
{
    struct nx_qconn *old = p->old;
    NX_INFO("quic", "%s: old connection closed: both ends moved to the successor",
            p->base.addr);
    nx_qconn_close(old, NX_QERR_ROLLED, "moved to a successor connection");
}

void nx_qroll_confirmed(struct nx_qconn *c)
{
    struct nx_qpeer *p = c->peer;
    if (!p->conn || p->rolling)
        return;
    /* Our previous handover's old connection, whose close from the peer was lost: the
     * peer, authenticated now, dials only once its side of it is gone. */
    if (p->old && c->server)
        close_old(p);
    NX_INFO("quic", "%s: successor connection up (%s); moving the channels to it",
            p->base.addr, c->server ? "inbound" : "outbound");
    p->rolling = 1;
    nx_qstream_roll_begin(p);
    nx_quic_schedule_flush(c); /* where the progress is looked at */
}

void nx_qroll_progress(struct nx_qpeer *p)
{
    if (p->roll_again && !p->succ && !p->old && p->state == NX_TPEER_UP &&
        nx_qnow() >= p->roll_retry_at) {
        nx_qroll_start(p);
        return;
    }
    if (p->old && p->old->peer_rolled && !p->old->busy && !p->old->dead) {
        close_old(p);
        return;
    }
    struct nx_qconn *old = p->conn, *c = p->succ;
    /* p->old: the one before, closed at the successor's confirmation, may still be in
     * ngtcp2's hands; its slot is needed for the connection we leave now. */
    if (!p->rolling || !c || !old || p->old || nx_qpeer_busy(p) || old->busy ||
        !nx_qstream_roll_drained(p))
        return;
    nx_qstream_roll_rebase(p, old);
    p->old = old;
    p->conn = c;
    p->succ = NULL;
    p->rolling = 0;
    p->inbound = c->server;
    old->roll_mark = 1;
    p->handovers++;
    p->roll_backoff = 0;
    if (c->cred_gen == p->q->tls.nretired)
        p->roll_again = 0; /* it shows our newest credentials already (the peer dialed it) */
    NX_INFO("quic", "%s: moved to the successor connection", p->base.addr);
    if (old->peer_rolled) {
        close_old(p);
    } else {
        nx_quic_schedule_flush(old); /* writes our end marker */
    }
    nx_qstream_kick_all(p);
    nx_quic_schedule_flush(c);
}

void nx_qroll_marker(struct nx_qconn *c)
{
    struct nx_qpeer *p = c->peer;
    c->peer_rolled = 1;
    NX_DEBUG("quic", "%s: the peer moved off its old connection", p ? p->base.addr : "?");
    if (p && p->old == c)
        nx_quic_schedule_flush(c); /* closed at its flush, outside ngtcp2 */
}

ngtcp2_ssize nx_qroll_write_pkt(struct nx_qconn *c, uint8_t *dest, size_t destlen,
                                ngtcp2_tstamp ts)
{
    ngtcp2_ssize ndata = -1;
    if (c->roll_mark == 1 && c->roll_off == 0 && c->roll_sid == 0) {
        int64_t sid;
        int rv = ngtcp2_conn_open_uni_stream(c->conn, &sid, NULL);
        if (rv == 0) {
            c->roll_sid = sid + 1; /* 0: none yet */
        } else if (rv != NGTCP2_ERR_STREAM_ID_BLOCKED) {
            NX_WARN("quic", "%s: cannot write the end marker: %s",
                    c->peer ? c->peer->base.addr : "?", ngtcp2_strerror(rv));
            c->roll_mark = 2; /* the peer then ends at our close or its idle timeout */
        }
    }
    if (c->roll_mark == 1 && c->roll_sid) {
        ngtcp2_vec v = {(uint8_t *)end_marker + c->roll_off, sizeof(end_marker) - c->roll_off};
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->conn, NULL, NULL, dest, destlen, &ndata,
                                                   NGTCP2_WRITE_STREAM_FLAG_FIN,
                                                   c->roll_sid - 1, &v, 1, ts);
        if (n >= 0 && ndata > 0 && (c->roll_off += (size_t)ndata) == sizeof(end_marker))
            c->roll_mark = 2;
        if (n != 0 && n != NGTCP2_ERR_STREAM_DATA_BLOCKED)
            return n;
    }
    return ngtcp2_conn_writev_stream(c->conn, NULL, NULL, dest, destlen, &ndata,
                                     NGTCP2_WRITE_STREAM_FLAG_NONE, -1, NULL, 0, ts);
}

/* Our dial timed out: the peer still sees our previous credentials, and the connection
 * ends with their proof, so the handover is owed.  nx_qroll_progress makes it once the
 * wait is over: the current connection's timer is armed for then (due_at). */
static void retry_later(struct nx_qpeer *p, const struct nx_qconn *c)
{
    ngtcp2_duration wait = p->roll_backoff ? p->roll_backoff : NX_QROLL_BACKOFF_FIRST;
    p->roll_backoff = wait * 2 < NX_QROLL_BACKOFF_MAX ? wait * 2 : NX_QROLL_BACKOFF_MAX;
    p->roll_retry_at = nx_qnow() + wait;
    p->roll_again = 1; /* and nx_qroll_conn_gone's flush arms the timer for the try */
    NX_WARN("quic", "%s: successor connection failed (%s); the old one goes on, and the "
            "successor is dialed again in %.0f s",
            p->base.addr, c->why[0] ? c->why : "timed out", (double)wait / NGTCP2_SECONDS);
}

void nx_qroll_conn_gone(struct nx_qconn *c)
{
    struct nx_qpeer *p = c->peer;
    if (!p)
        return;
    if (p->succ == c) {
        p->succ = NULL;
        if (p->rolling) { /* back to the old connection, as if nothing had happened */
            p->rolling = 0;
            nx_qstream_kick_all(p);
            if (p->conn)
                nx_quic_schedule_flush(p->conn);
        }
        if (p->state == NX_TPEER_LOST)
            ; /* going with the peer: LOST said why */
        else if (c->fail && c->timed_out && !c->server)
            retry_later(p, c);
        else if (c->fail)
            NX_WARN("quic", "%s: successor connection failed (%s); the old one goes on",
                    p->base.addr, c->why[0] ? c->why : "closed");
        else
            NX_INFO("quic", "%s: successor connection dropped (%s)", p->base.addr,
                    c->why[0] ? c->why : "superseded");
    }
    if (p->old == c) {
        p->old = NULL;
        p->old_pkts_sent += c->pkts_sent; /* nexarctl peers counts the peer's packets */
        p->old_pkts_recv += c->pkts_recv;
        if (p->state == NX_TPEER_LOST || c->peer_rolled || c->close_app == NX_QERR_ROLLED)
            ;
        else if (c->stateless_reset) /* it had closed it: the close was what got lost */
            NX_INFO("quic", "%s: old connection closed: the peer had left it", p->base.addr);
        else
            NX_WARN("quic", "%s: old connection ended before the peer moved off it: %s",
                    p->base.addr, c->why[0] ? c->why : "closed");
    }
    /* The handover is over, or a move waited for the old slot: go on from here. */
    if ((p->roll_again || p->rolling) && p->conn)
        nx_quic_schedule_flush(p->conn);
}
