/*
 * peers.c - `nexarctl peers` (the other daemons this one talks to) and
 * `nexarctl peer-test ADDR` (move bytes to one of them and verify every one).
 *
 * peer-test has options of its own, so it parses its whole command line here.
 * Its JSON (one object on stdout, success or not):
 *   {"command":"peer-test", "status":0, "status_name":"NEXAR_OK", "error":"",
 *    "peer":"127.0.0.1:7001", "test_id":N, "bytes":N, "streams":K, "msg_bytes":M,
 *    "seconds":S, "gbps":G, "verified":true, "bytes_verified":N,
 *    "bad":false, "bad_stream":0, "bad_offset":0}
 * gbps is bytes / seconds / 1e9, seconds the data phase (handshake done to result).
 * The exit status is the request's nexar_status_t: 0 verified, 3 (MISMATCH) a byte or
 * order error, 5 (PEER_LOST) the peer was lost or refused the connection (TLS), 4
 * (TIMEOUT), 2 (UNAVAILABLE) no daemon or no network, 1 usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "cert_check.h"

#include "conn.h"
#include "ctl.h"
#include "frame.h"
#include "nexar.h"
#include "status.h"
#include "util.h"

static const char *str(const char *s)
{
    return s && *s ? s : "-";
}

static const char *since(double s, char *buf, size_t len)
{
    return s > 0 ? nxc_fmt_age(s, buf, len) : "-";
}

/* The columns RTT, CWND, SENT, RECEIVED, PKTS OUT/IN and LOST, alike in both tables. */
static void traffic_cells(struct nxc_table *t, double rtt_ms, uint64_t cwnd, uint64_t sent,
                          uint64_t recv, uint64_t pkts_sent, uint64_t pkts_recv,
                          uint64_t pkts_lost)
{
    char b[32];
    nxc_table_add(t, nxc_fmt("%.2f ms", rtt_ms));
    nxc_table_add(t, nxt_xstrdup(nxt_fmt_bytes(cwnd, b, sizeof(b))));
    nxc_table_add(t, nxt_xstrdup(nxt_fmt_bytes(sent, b, sizeof(b))));
    nxc_table_add(t, nxt_xstrdup(nxt_fmt_bytes(recv, b, sizeof(b))));
    nxc_table_add(t, nxc_fmt("%" PRIu64 "/%" PRIu64, pkts_sent, pkts_recv));
    nxc_table_add(t, nxc_fmt("%" PRIu64, pkts_lost));
}

/* Peers carried by several connections (quic_lanes): a row per lane.  The table above
 * shows lane 0's RTT and window, and the sums of the rest. */
static void lanes_human(FILE *f, const Nexar__CtlReply *r)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_peers; i++)
        any += r->peers[i]->n_lanes;
    if (!any)
        return;
    struct nxc_table t;
    char b[32];
    nxc_table_init(&t, 11, "PEER", "LANE", "STATE", "RTT", "CWND", "SENT", "RECEIVED",
                   "PKTS OUT/IN", "LOST", "QUEUED", "STREAMS");
    for (size_t i = 0; i < r->n_peers; i++) {
        const Nexar__PeerInfo *p = r->peers[i];
        for (size_t k = 0; k < p->n_lanes; k++) {
            const Nexar__LaneInfo *l = p->lanes[k];
            nxc_table_add(&t, nxt_xstrdup(str(p->addr)));
            nxc_table_add(&t, nxc_fmt("%u", l->lane));
            nxc_table_add(&t, nxt_xstrdup(str(l->state)));
            traffic_cells(&t, l->rtt_ms, l->cwnd, l->bytes_sent, l->bytes_recv, l->pkts_sent,
                          l->pkts_recv, l->pkts_lost);
            nxc_table_add(&t, nxt_xstrdup(nxt_fmt_bytes(l->queued_bytes, b, sizeof(b))));
            nxc_table_add(&t, nxc_fmt("%u", l->streams_open));
        }
    }
    fputc('\n', f);
    nxc_table_print(&t, f, "");
    nxc_table_free(&t);
}

void nxc_peers_human(FILE *f, const Nexar__CtlReply *r)
{
    if (!r->listen || !*r->listen) {
        fprintf(f, "this nexard has no network (listen is not set): it serves one node\n");
        return;
    }
    fprintf(f, "this nexard: %s\n", r->listen);
    if (r->n_peers == 0) {
        fprintf(f, "no peers\n");
        return;
    }
    struct nxc_table t;
    char age[32];
    nxc_table_init(&t, 12, "PEER", "STATE", "SINCE", "DIR", "RTT", "CWND", "SENT", "RECEIVED",
                   "PKTS OUT/IN", "LOST", "STREAMS", "CIPHER");
    for (size_t i = 0; i < r->n_peers; i++) {
        const Nexar__PeerInfo *p = r->peers[i];
        nxc_table_add(&t, nxt_xstrdup(str(p->addr)));
        nxc_table_add(&t, nxt_xstrdup(str(p->state)));
        nxc_table_add(&t, nxt_xstrdup(since(p->since_s, age, sizeof(age))));
        nxc_table_add(&t, nxt_xstrdup(p->inbound ? "in" : "out"));
        traffic_cells(&t, p->rtt_ms, p->cwnd, p->bytes_sent, p->bytes_recv, p->pkts_sent,
                      p->pkts_recv, p->pkts_lost);
        nxc_table_add(&t, nxc_fmt("%u", p->streams_open));
        nxc_table_add(&t, nxt_xstrdup(str(p->cipher)));
    }
    nxc_table_print(&t, f, "");
    nxc_table_free(&t);
    lanes_human(f, r);
    for (size_t i = 0; i < r->n_peers; i++) {
        const Nexar__PeerInfo *p = r->peers[i];
        if (p->reason && *p->reason && !strcmp(str(p->state), "lost"))
            fprintf(f, "%s lost: %s\n", p->addr, p->reason);
        time_t end = (time_t)p->cert_not_after, now = time(NULL);
        if (end && nx_cert_ends_soon(end, now)) {
            char when[40], in[40];
            fprintf(f, "%s certificate proof ends at %s (%s)\n", p->addr,
                    nx_cert_time(end, when, sizeof(when)), nx_cert_left(end, now, in, sizeof(in)));
        }
        if (p->connections > 1)
            fprintf(f, "%s handing over to a successor connection (%u connections)\n", p->addr,
                    p->connections);
        if (p->n_jobs) {
            fprintf(f, "%s carries job%s", p->addr, p->n_jobs > 1 ? "s" : "");
            for (size_t k = 0; k < p->n_jobs; k++)
                fprintf(f, "%s%s", k ? ", " : " ", p->jobs[k]);
            fputc('\n', f);
        }
    }
}

/* ---- peer-test ---------------------------------------------------------------------- */

struct pt_opts {
    const char *socket, *addr;
    uint64_t bytes, msg_bytes;
    long streams;
    bool json;
    double timeout_s; /* 0: the daemon's default */
};

bool nxc_is_peer_test(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            return i + 1 < argc && !strcmp(argv[i + 1], "peer-test");
        if (a[0] != '-')
            return !strcmp(a, "peer-test");
        /* Options of main.c that take a separate argument. */
        if (!strcmp(a, "-s") || !strcmp(a, "--socket") || !strcmp(a, "-t") ||
            !strcmp(a, "--timeout"))
            i++;
    }
    return false;
}

static void __attribute__((noreturn)) pt_bad(const char *msg, const char *arg)
{
    nxt_warn("peer-test: %s%s%s", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "Usage: nexarctl [--socket PATH] peer-test ADDR [--bytes N] [--streams K] "
                    "[--msg-bytes M] [--timeout S] [--json]\n");
    exit(NEXAR_ERR_INVALID);
}

static void pt_parse(struct pt_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"bytes", required_argument, NULL, 'b'},
        {"streams", required_argument, NULL, 'k'},
        {"msg-bytes", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->bytes = 256ull << 20;
    o->msg_bytes = 1u << 20;
    o->streams = 1;
    int ch;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":s:jt:", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': o->socket = optarg; break;
        case 'j': o->json = true; break;
        case 't':
            if (nxt_parse_seconds(optarg, &o->timeout_s) < 0 || o->timeout_s <= 0 ||
                o->timeout_s > 86400)
                pt_bad("--timeout expects seconds, more than 0", optarg);
            break;
        case 'b':
            if (nxt_parse_size(optarg, &o->bytes) < 0 || o->bytes > (1ull << 40))
                pt_bad("--bytes expects a size up to 1T (K/M/G suffixes)", optarg);
            break;
        case 'm':
            if (nxt_parse_size(optarg, &o->msg_bytes) < 0 || o->msg_bytes == 0 ||
                o->msg_bytes > (64ull << 20) - 64)
                pt_bad("--msg-bytes expects a size from 1 to 64M - 64", optarg);
            break;
        case 'k':
            if (nxt_parse_long(optarg, 1, 64, &o->streams) < 0)
                pt_bad("--streams expects 1 to 64", optarg);
            break;
        case ':': pt_bad("option needs an argument", argv[optind - 1]);
        default: pt_bad("unknown option", argv[optind - 1]);
        }
    }
    /* argv[optind] is "peer-test"; getopt moved the operands to the end. */
    if (optind + 2 != argc)
        pt_bad(optind + 2 > argc ? "needs the address of a daemon (HOST:PORT)"
                                 : "one address at a time", NULL);
    o->addr = argv[optind + 1];
}

static void pt_json(const struct pt_opts *o, int status, const char *error,
                    const Nexar__PeerTestReport *r)
{
    struct nx_json j;
    nx_json_init(&j, stdout);
    nx_json_obj_begin(&j, NULL);
    nx_json_str(&j, "command", "peer-test");
    nx_json_u64(&j, "status", (uint64_t)status);
    nx_json_str(&j, "status_name", nxt_status_name(status));
    nx_json_str(&j, "error", error ? error : "");
    nx_json_str(&j, "peer", r && r->addr && *r->addr ? r->addr : o->addr);
    nx_json_u64(&j, "test_id", r ? r->test_id : 0);
    nx_json_u64(&j, "bytes", r ? r->bytes : o->bytes);
    nx_json_u64(&j, "streams", r ? r->streams : (uint64_t)o->streams);
    nx_json_u64(&j, "msg_bytes", r ? r->msg_bytes : o->msg_bytes);
    nx_json_double(&j, "seconds", r ? r->seconds : 0);
    nx_json_double(&j, "gbps", r ? r->gbps : 0);
    nx_json_bool(&j, "verified", r && r->verified && status == 0);
    nx_json_u64(&j, "bytes_verified", r ? r->bytes_verified : 0);
    nx_json_bool(&j, "bad", r && r->bad);
    nx_json_u64(&j, "bad_stream", r ? r->bad_stream : 0);
    nx_json_u64(&j, "bad_offset", r ? r->bad_offset : 0);
    nx_json_obj_end(&j);
    nx_json_finish(&j);
}

int nxc_peer_test_main(int argc, char **argv)
{
    struct pt_opts o;
    pt_parse(&o, argc, argv);
    char err[512];
    /* nexard takes numeric addresses only (addr.h): a host name is looked up here, before
     * the daemon is asked.  What is not an address at all goes as it is, for nexard to
     * refuse in its own words. */
    char canon[NX_ADDR_MAX];
    if (nx_addr_split(o.addr, true, NULL, 0, NULL) == 0) {
        if (nx_addr_canon(o.addr, canon, sizeof(canon), err, sizeof(err)) < 0) {
            nxt_warn("peer-test %s: %s", o.addr, err);
            if (o.json)
                pt_json(&o, NEXAR_ERR_INVALID, err, NULL);
            return NEXAR_ERR_INVALID;
        }
        o.addr = canon;
    }
    const char *path = nxt_socket_path(o.socket);
    int fd = nxt_connect(path, NEXAR__CLIENT_KIND__CLIENT_CTL, 5000, NULL, err, sizeof(err));
    if (fd < 0) {
        nxt_warn("%s", err);
        if (o.json)
            pt_json(&o, -fd, err, NULL);
        return -fd;
    }
    Nexar__PeerTestRequest ptr = NEXAR__PEER_TEST_REQUEST__INIT;
    ptr.addr = (char *)o.addr;
    ptr.bytes = o.bytes;
    ptr.streams = (uint32_t)o.streams;
    ptr.msg_bytes = o.msg_bytes;
    ptr.timeout_ms = (uint32_t)(o.timeout_s * 1000);
    Nexar__CtlRequest req = NEXAR__CTL_REQUEST__INIT;
    req.command = NEXAR__CTL_COMMAND__CTL_PEER_TEST;
    req.peer_test = &ptr;
    size_t n = nexar__ctl_request__get_packed_size(&req);
    uint8_t *buf = nxt_xmalloc(n + 1);
    nexar__ctl_request__pack(&req, buf);
    /* The daemon answers when the test ends: wait for its deadline and a margin. */
    double wait_s = o.timeout_s ? o.timeout_s : 60.0 + (double)(o.bytes >> 30) * 10.0;
    uint16_t type;
    uint8_t *payload = NULL;
    uint32_t len;
    int status = -nxt_request(fd, NX_MSG_CTL, buf, (uint32_t)n, (int)((wait_s + 10) * 1000),
                              &type, &payload, &len, err, sizeof(err));
    free(buf);
    close(fd);
    Nexar__CtlReply *rep = NULL;
    if (!status && type == NX_MSG_ERROR) {
        status = nxt_error_reply(payload, len, err, sizeof(err));
    } else if (!status && (type != NX_MSG_CTL_REPLY ||
                           !(rep = nexar__ctl_reply__unpack(NULL, len, payload)))) {
        snprintf(err, sizeof(err), "the daemon's answer to peer-test does not decode");
        status = NEXAR_ERR_INTERNAL;
    } else if (rep && rep->status) {
        status = (int)rep->status;
        snprintf(err, sizeof(err), "%s", rep->error && *rep->error ? rep->error
                                                                   : nxt_status_text(status));
    }
    free(payload);
    const Nexar__PeerTestReport *r = rep ? rep->peer_test : NULL;
    if (status)
        nxt_warn("%s", err);
    if (o.json) {
        pt_json(&o, status, status ? err : "", r);
    } else if (!status && r) {
        char b[32], m[32];
        printf("peer-test %s: %s on %u stream%s (%s messages) in %.3f s = %.3f GB/s, every "
               "byte verified\n", r->addr, nxt_fmt_bytes(r->bytes, b, sizeof(b)), r->streams,
               r->streams == 1 ? "" : "s", nxt_fmt_bytes(r->msg_bytes, m, sizeof(m)),
               r->seconds, r->gbps);
    } else if (r && r->bad) {
        fprintf(stderr, "nexarctl: first bad byte: stream %u, offset %" PRIu64 "\n",
                r->bad_stream, r->bad_offset);
    }
    if (rep)
        nexar__ctl_reply__free_unpacked(rep, NULL);
    return status;
}
