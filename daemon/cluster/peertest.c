/* peertest.c - see peertest.h: the pattern, the sending half and the dispatch. */
#include "peertest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/uio.h>

#include "cluster.h"
#include "ctlsrv.h"
#include "context.h"
#include "log.h"
#include "mem.h"
#include "nexar.h"
#include "peer_msg.h"
#include "peertest_int.h"
#include "rdv_int.h"
#include "wire.h"

/* ---- the pattern ----------------------------------------------------------------- */

#define GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t seed(uint32_t id, uint32_t ch)
{
    return mix(((uint64_t)id << 32 | ch) + GOLDEN);
}

static inline uint64_t word(uint64_t s, uint64_t w)
{
    return mix(s + (w + 1) * GOLDEN);
}

/* The pattern's bytes are little-endian words: stored as they are on a little-endian host. */
static inline void put_le(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
#endif
}

static inline uint64_t get_le(const uint8_t *p)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
#endif
}

void nx_peertest_fill(uint32_t id, uint32_t ch, uint64_t offset, uint8_t *buf, size_t len)
{
    uint64_t s = seed(id, ch);
    size_t i = 0;
    uint8_t tmp[8];
    while (i < len && (offset + i) % 8) {
        put_le(tmp, word(s, (offset + i) / 8));
        buf[i] = tmp[(offset + i) % 8];
        i++;
    }
    for (uint64_t w = (offset + i) / 8; i + 8 <= len; i += 8, w++)
        put_le(buf + i, word(s, w));
    if (i < len) {
        put_le(tmp, word(s, (offset + i) / 8));
        memcpy(buf + i, tmp, len - i);
    }
}

int64_t nx_peertest_check(uint32_t id, uint32_t ch, uint64_t offset, const uint8_t *buf,
                          size_t len)
{
    uint64_t s = seed(id, ch);
    size_t i = 0;
    uint8_t want[8];
    /* Head and tail byte by byte, the aligned middle a word at a time. */
    while (i < len && (offset + i) % 8) {
        put_le(want, word(s, (offset + i) / 8));
        if (buf[i] != want[(offset + i) % 8])
            return (int64_t)i;
        i++;
    }
    for (uint64_t w = (offset + i) / 8; i + 8 <= len; i += 8, w++) {
        if (get_le(buf + i) == word(s, w))
            continue;
        put_le(want, word(s, w));
        for (int k = 0; k < 8; k++)
            if (buf[i + k] != want[k])
                return (int64_t)(i + k);
    }
    if (i < len) {
        put_le(want, word(s, (offset + i) / 8));
        for (size_t k = 0; i + k < len; k++)
            if (buf[i + k] != want[k])
                return (int64_t)(i + k);
    }
    return -1;
}

/* ---- the sending half ------------------------------------------------------------ */

struct stest {
    uint32_t id;
    struct nx_conn *conn; /* the nexarctl waiting for the report */
    struct nx_tpeer *p;
    char addr[NX_ADDR_MAX];
    uint64_t bytes, msg_bytes;
    uint32_t streams;
    uint64_t ch_bytes[NX_PEERTEST_MAX_STREAMS], ch_sent[NX_PEERTEST_MAX_STREAMS];
    uint64_t ch_msgs[NX_PEERTEST_MAX_STREAMS];
    uint32_t next_ch;
    uint64_t inflight, acked;
    bool pumping, all_sent;
    double t_start, deadline;
    uint32_t timeout_ms;
    uint8_t *scratch;
    LIST_ENTRY(stest) link;
};

static LIST_HEAD(, stest) sends = LIST_HEAD_INITIALIZER(sends);
static unsigned nsends;

static struct stest *find_send(uint32_t id)
{
    struct stest *t;
    LIST_FOREACH(t, &sends, link)
        if (t->id == id)
            return t;
    return NULL;
}

static void on_conn_close(struct nx_conn *c)
{
    struct stest *t = c->close_arg;
    c->on_close = NULL;
    c->close_arg = NULL;
    if (t)
        t->conn = NULL;
}

static void stest_free(struct stest *t)
{
    if (t->conn) {
        t->conn->on_close = NULL;
        t->conn->close_arg = NULL;
    }
    LIST_REMOVE(t, link);
    nsends--;
    free(t->scratch);
    free(t);
}

static void fill_report(const struct stest *t, Nexar__PeerTestReport *rp)
{
    rp->addr = (char *)t->addr;
    rp->bytes = t->bytes;
    rp->streams = t->streams;
    rp->msg_bytes = t->msg_bytes;
    rp->test_id = t->id;
    if (t->pumping)
        rp->seconds = nx_now() - t->t_start;
    rp->gbps = rp->seconds > 0 ? (double)t->bytes / rp->seconds / 1e9 : 0;
}

/* Ends the request: one reply to the waiting nexarctl, the test forgotten. */
static void finish(struct stest *t, uint32_t status, const Nexar__PeerTestResult *res,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void finish(struct stest *t, uint32_t status, const Nexar__PeerTestResult *res,
                   const char *fmt, ...)
{
    char msg[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    }
    Nexar__PeerTestReport rp = NEXAR__PEER_TEST_REPORT__INIT;
    fill_report(t, &rp);
    if (res) {
        rp.verified = status == NEXAR_OK;
        rp.bytes_verified = rp.verified ? res->bytes : 0;
        rp.bad = res->bad;
        rp.bad_stream = res->bad_channel;
        rp.bad_offset = res->bad_offset;
    }
    if (status == NEXAR_OK)
        NX_INFO("peertest", "test %u to %s: %" PRIu64 " bytes on %u stream(s) in %.3f s "
                "(%.2f GB/s), verified", t->id, t->addr, t->bytes, t->streams, rp.seconds,
                rp.gbps);
    else
        NX_WARN("peertest", "test %u to %s: %s", t->id, t->addr, msg);
    if (t->conn) {
        Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
        rep.status = status;
        rep.error = msg;
        rep.peer_test = &rp;
        if (nx_conn_send(t->conn, NX_MSG_CTL_REPLY, &rep, NULL, 0) < 0)
            nx_conn_close(t->conn);
    }
    stest_free(t);
}

static int send_ctl(struct stest *t, uint32_t ch, Nexar__PeerMsg *m)
{
    return nx_cluster_send(t->p, NX_CHAN_TEST(ch), m);
}

static int send_end(struct stest *t, uint32_t ch)
{
    Nexar__PeerTestEnd e = NEXAR__PEER_TEST_END__INIT;
    e.test_id = t->id;
    e.channel = ch;
    e.bytes = t->ch_sent[ch];
    e.msgs = t->ch_msgs[ch];
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_TEST_END;
    m.test_end = &e;
    return send_ctl(t, ch, &m);
}

/* Queues data while the window has room; each channel ends right after its last byte.
 * Returns false when the test ended (and was freed). */
static bool pump(struct stest *t)
{
    struct nx_transport *tr = nx_cluster_transport();
    while (!t->all_sent && t->inflight < NX_PEERTEST_WINDOW) {
        uint32_t c = t->next_ch, k;
        for (k = 0; k < t->streams; k++, c = (c + 1) % t->streams)
            if (t->ch_sent[c] < t->ch_bytes[c])
                break;
        if (k == t->streams) {
            t->all_sent = true;
            break;
        }
        t->next_ch = (c + 1) % t->streams;
        uint64_t left = t->ch_bytes[c] - t->ch_sent[c];
        uint32_t len = (uint32_t)(left < t->msg_bytes ? left : t->msg_bytes);
        uint8_t hdrbuf[NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES];
        struct nx_data_hdr h = {.job = t->id, .comm = c, .seq = t->ch_msgs[c],
                                .offset = t->ch_sent[c], .length = len};
        size_t hl = nx_wire_put_data(hdrbuf, NX_WIRE_TEST, 0, &h);
        nx_peertest_fill(t->id, c, t->ch_sent[c], t->scratch, len);
        struct iovec iov[2] = {{.iov_base = hdrbuf, .iov_len = hl},
                               {.iov_base = t->scratch, .iov_len = len}};
        uint64_t token = NX_TOKEN_TEST | (uint64_t)t->id << 32 | len;
        int rv = tr->ops->send(t->p, NX_CHAN_TEST(c), iov, 2, token);
        if (rv < 0) {
            finish(t, rv == -ENOTCONN ? NEXAR_ERR_PEER_LOST : NEXAR_ERR_INTERNAL, NULL,
                   "peer-test to %s: send failed: %s", t->addr, strerror(-rv));
            return false;
        }
        t->inflight += len;
        t->ch_sent[c] += len;
        t->ch_msgs[c]++;
        if (t->ch_sent[c] == t->ch_bytes[c] && send_end(t, c) < 0) {
            finish(t, NEXAR_ERR_PEER_LOST, NULL, "peer-test to %s: the peer is lost", t->addr);
            return false;
        }
    }
    return true;
}

static void start_pumping(struct stest *t)
{
    t->pumping = true;
    t->t_start = nx_now();
    /* Channels without bytes end at once. */
    for (uint32_t c = 0; c < t->streams; c++)
        if (t->ch_bytes[c] == 0 && send_end(t, c) < 0)
            return finish(t, NEXAR_ERR_PEER_LOST, NULL, "peer-test to %s: the peer is lost",
                          t->addr);
    pump(t);
}

static void refuse(struct nx_conn *conn, uint32_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct nx_conn *conn, uint32_t status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    Nexar__CtlReply rep = NEXAR__CTL_REPLY__INIT;
    rep.status = status;
    rep.error = msg;
    if (nx_conn_send(conn, NX_MSG_CTL_REPLY, &rep, NULL, 0) < 0)
        nx_conn_close(conn);
}

static uint32_t new_id(void)
{
    for (;;) {
        uint32_t id = (uint32_t)(nx_rdv_new_key() & 0x7fffffffu);
        if (id && !find_send(id))
            return id;
    }
}

void nx_peertest_start(struct nx_conn *conn, const Nexar__PeerTestRequest *req)
{
    char canon[NX_ADDR_MAX], err[256];
    if (!req || !req->addr || !*req->addr)
        return refuse(conn, NEXAR_ERR_INVALID, "peer-test needs the address of a daemon");
    if (!nx_cluster_enabled())
        return refuse(conn, NEXAR_ERR_UNAVAILABLE, "nexard at %s has no network (set listen=...)",
                      nxd.cfg.socket_path);
    if (nx_addr_numeric(req->addr, canon, sizeof(canon), err, sizeof(err)) < 0 ||
        nx_addr_port(canon) == 0)
        return refuse(conn, NEXAR_ERR_INVALID, "peer-test: %s",
                      nx_addr_port(canon) == 0 ? "the address needs a port" : err);
    if (nx_cluster_is_self(canon))
        return refuse(conn, NEXAR_ERR_INVALID, "peer-test: %s is this daemon", canon);
    uint32_t streams = req->streams ? req->streams : 1;
    uint64_t msg_bytes = req->msg_bytes ? req->msg_bytes : NX_PEERTEST_DEFAULT_MSG;
    if (streams > NX_PEERTEST_MAX_STREAMS)
        return refuse(conn, NEXAR_ERR_INVALID, "peer-test: at most %u streams",
                      NX_PEERTEST_MAX_STREAMS);
    if (req->bytes > NX_PEERTEST_MAX_BYTES)
        return refuse(conn, NEXAR_ERR_INVALID, "peer-test: at most %llu bytes",
                      (unsigned long long)NX_PEERTEST_MAX_BYTES);
    if (msg_bytes > NX_TMSG_MAX - NX_WIRE_ENV_BYTES - NX_DATA_HDR_BYTES)
        return refuse(conn, NEXAR_ERR_INVALID, "peer-test: messages of at most %u bytes",
                      NX_TMSG_MAX - NX_WIRE_ENV_BYTES - NX_DATA_HDR_BYTES);
    if (nsends >= NX_PEERTEST_MAX_TESTS)
        return refuse(conn, NEXAR_ERR_UNAVAILABLE, "nexard runs its maximum of %u peer tests",
                      NX_PEERTEST_MAX_TESTS);
    if (conn->on_close)
        return refuse(conn, NEXAR_ERR_INVALID, "a peer test already runs on this connection");
    struct nx_tpeer *p = nx_cluster_peer(canon, err, sizeof(err));
    if (!p)
        return refuse(conn, NEXAR_ERR_INVALID, "peer-test: %s", err);

    struct stest *t = nx_xcalloc(1, sizeof(*t));
    t->id = new_id();
    t->conn = conn;
    t->p = p;
    snprintf(t->addr, sizeof(t->addr), "%s", canon);
    t->bytes = req->bytes;
    t->streams = streams;
    t->msg_bytes = msg_bytes;
    t->scratch = nx_xmalloc(msg_bytes);
    /* Default: a minute, plus ten seconds per GiB for slow links. */
    t->timeout_ms = req->timeout_ms ? req->timeout_ms
                                    : 60000u + (uint32_t)(req->bytes / (1u << 30) * 10000u);
    t->deadline = nx_now() + t->timeout_ms / 1000.0;
    for (uint32_t c = 0; c < streams; c++)
        t->ch_bytes[c] = req->bytes / streams + (c < req->bytes % streams ? 1 : 0);
    LIST_INSERT_HEAD(&sends, t, link);
    nsends++;
    conn->on_close = on_conn_close;
    conn->close_arg = t;
    NX_INFO("peertest", "test %u to %s: %" PRIu64 " bytes on %u stream(s), %" PRIu64
            "-byte messages", t->id, canon, t->bytes, streams, msg_bytes);

    for (uint32_t c = 0; c < streams; c++) {
        Nexar__PeerTestBegin b = NEXAR__PEER_TEST_BEGIN__INIT;
        b.test_id = t->id;
        b.channel = c;
        b.channels = streams;
        b.bytes = t->ch_bytes[c];
        Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
        m.body_case = NEXAR__PEER_MSG__BODY_TEST_BEGIN;
        m.test_begin = &b;
        if (send_ctl(t, c, &m) < 0)
            return finish(t, NEXAR_ERR_PEER_LOST, NULL, "peer-test to %s: the peer is lost",
                          canon);
    }
    /* The clock starts with the handshake done: connection setup is not throughput. */
    struct nx_tpeer_stats st;
    nx_cluster_transport()->ops->stats(p, &st);
    if (st.state == NX_TPEER_UP)
        start_pumping(t);
}

static void on_result(struct nx_tpeer *p, const Nexar__PeerTestResult *r)
{
    struct stest *t = find_send(r->test_id);
    if (!t || t->p != p)
        return; /* a test we gave up on */
    if (r->status)
        finish(t, r->status, r, "peer-test to %s failed at the receiver: %s", t->addr,
               r->error[0] ? r->error : "no reason given");
    else if (!t->all_sent || r->bytes != t->bytes)
        finish(t, NEXAR_ERR_MISMATCH, r, "peer-test to %s: the receiver verified %" PRIu64
               " of %" PRIu64 " bytes", t->addr, r->bytes, t->bytes);
    else
        finish(t, NEXAR_OK, r, NULL);
}

const char *nx_peertest_on_ctl(struct nx_tpeer *p, uint64_t channel, const Nexar__PeerMsg *m)
{
    uint32_t ch = (uint32_t)(channel & 0xffffffffu);
    switch (m->body_case) {
    case NEXAR__PEER_MSG__BODY_TEST_BEGIN: return nx_ptrecv_begin(p, ch, m->test_begin);
    case NEXAR__PEER_MSG__BODY_TEST_END: return nx_ptrecv_end(p, ch, m->test_end);
    case NEXAR__PEER_MSG__BODY_TEST_RESULT: on_result(p, m->test_result); return NULL;
    default: return "unexpected peer test message";
    }
}

const char *nx_peertest_on_data(struct nx_tpeer *p, uint64_t channel,
                                const struct nx_wire_msg *w)
{
    if (!NX_CHAN_IS_TEST(channel))
        return "TEST message outside a test channel";
    return nx_ptrecv_data(p, (uint32_t)(channel & 0xffffffffu), w);
}

void nx_peertest_on_sent(struct nx_tpeer *p, uint64_t token)
{
    struct stest *t = find_send((uint32_t)(token >> 32) & 0x7fffffffu);
    if (!t || t->p != p)
        return;
    uint64_t len = token & 0xffffffffu;
    t->inflight -= len < t->inflight ? len : t->inflight;
    t->acked += len;
    pump(t);
}

void nx_peertest_peer_up(struct nx_tpeer *p)
{
    struct stest *t, *tmp;
    for (t = LIST_FIRST(&sends); t; t = tmp) {
        tmp = LIST_NEXT(t, link);
        if (t->p == p && !t->pumping)
            start_pumping(t);
    }
}

void nx_peertest_peer_lost(struct nx_tpeer *p, const char *reason)
{
    struct stest *t, *tmp;
    for (t = LIST_FIRST(&sends); t; t = tmp) {
        tmp = LIST_NEXT(t, link);
        if (t->p == p)
            finish(t, NEXAR_ERR_PEER_LOST, NULL, "peer-test to %s failed: connection lost: %s",
                   t->addr, reason);
    }
    nx_ptrecv_peer_lost(p);
}

void nx_peertest_tick(double now)
{
    struct stest *t, *tmp;
    for (t = LIST_FIRST(&sends); t; t = tmp) {
        tmp = LIST_NEXT(t, link);
        if (!t->conn) {
            NX_INFO("peertest", "test %u to %s: nexarctl went away; stopped", t->id, t->addr);
            stest_free(t);
        } else if (now >= t->deadline) {
            finish(t, NEXAR_ERR_TIMEOUT, NULL, "peer-test to %s: no result within %.0f s (%"
                   PRIu64 " of %" PRIu64 " bytes acknowledged%s)", t->addr,
                   t->timeout_ms / 1000.0, t->acked, t->bytes,
                   t->pumping ? "" : "; the connection never came up");
        }
    }
    nx_ptrecv_tick(now);
}

void nx_peertest_fini(void)
{
    while (!LIST_EMPTY(&sends)) {
        struct stest *t = LIST_FIRST(&sends);
        finish(t, NEXAR_ERR_UNAVAILABLE, NULL, "peer-test to %s: nexard is shutting down",
               t->addr);
    }
    nx_ptrecv_fini();
}
