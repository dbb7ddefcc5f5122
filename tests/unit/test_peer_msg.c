/*
 * test_peer_msg.c - daemon/cluster/peer_msg.c (the checks of daemon-to-daemon control messages)
 * and daemon/base/netaddr.c (address syntax and canonical form).
 *
 * Each message kind is built valid, packed, decoded (accepted), then spoiled one field
 * at a time (rejected with a reason).  Addresses: what parses, what does not, and that
 * spellings of one address compare equal after canonicalisation.  The peer test's
 * pattern: the same bytes whatever the message boundaries, and the first bad byte found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netaddr.h"
#include "peer_msg.h"
#include "peertest.h"
#include "wire.h"

#define NEXAR_UNDEFINED_COLOR 0xffffffffu

static int fails;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            fails++;                                                                       \
        }                                                                                  \
    } while (0)

/* Packs m, checks the envelope, decodes the body: 1 accepted, 0 rejected. */
static int roundtrip(Nexar__PeerMsg *m, const char **why)
{
    size_t len;
    uint8_t *buf = nx_peer_msg_pack(m, &len);
    struct nx_wire_msg w;
    int ok = 0;
    if (nx_wire_decode(buf, len, &w, why) == 0 && w.type == NX_WIRE_CTL) {
        Nexar__PeerMsg *d = nx_peer_msg_decode(w.body, w.body_len, why);
        ok = d != NULL;
        nx_peer_msg_free(d);
    }
    free(buf);
    return ok;
}

#define ACCEPT(m, what)                                                                    \
    do {                                                                                   \
        const char *why__ = NULL;                                                          \
        CHECK(roundtrip(m, &why__), "%s: rejected: %s", what, why__ ? why__ : "?");        \
    } while (0)
#define REJECT(m, what)                                                                    \
    do {                                                                                   \
        const char *why__ = NULL;                                                          \
        CHECK(!roundtrip(m, &why__) && why__, "%s: accepted", what);                       \
    } while (0)

static void test_register(void)
{
    uint32_t ranks[] = {0, 2};
    Nexar__PeerRegister g = NEXAR__PEER_REGISTER__INIT;
    g.job = "train";
    g.key = 7;
    g.uid = 1000;
    g.world_size = 4;
    g.ranks = ranks;
    g.n_ranks = 2;
    g.addr = "127.0.0.1:7000";
    g.version = NX_PEER_VERSION;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_REGISTER;
    m.register_ = &g;
    ACCEPT(&m, "register");
    g.addr = "[::1]:7000";
    ACCEPT(&m, "register from v6");

    g.key = 0;
    REJECT(&m, "register with key 0");
    g.key = 7;
    ranks[1] = 4;
    REJECT(&m, "rank beyond the world");
    ranks[1] = 0;
    REJECT(&m, "a rank twice");
    ranks[1] = 2;
    g.world_size = 0;
    REJECT(&m, "world size 0");
    g.world_size = NX_PEER_MAX_WORLD + 1;
    REJECT(&m, "world size too large");
    g.world_size = 4;
    g.addr = "somewhere";
    REJECT(&m, "address without a port");
    g.addr = "::1:7000";
    REJECT(&m, "unbracketed v6");
    g.addr = "127.0.0.1:0";
    REJECT(&m, "port 0");
    g.addr = "127.0.0.1:7000";
    g.job = "";
    REJECT(&m, "empty job name");
    g.job = "a\nb";
    REJECT(&m, "job name with a newline");
    char longname[300];
    memset(longname, 'j', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    g.job = longname;
    REJECT(&m, "job name of 299 bytes");
    g.job = "train";
    g.version = NX_PEER_VERSION + 1;
    REJECT(&m, "a future register version");
    g.version = NX_PEER_VERSION;
    uint32_t pids[] = {4242, 4243};
    g.pids = pids;
    g.n_pids = 2;
    ACCEPT(&m, "register with the ranks' pids");
    g.n_pids = 1;
    REJECT(&m, "fewer pids than ranks");
    g.n_pids = 0;
    g.n_ranks = 0;
    REJECT(&m, "no ranks");
}

static void test_rank_table(void)
{
    char *nodes[] = {"127.0.0.1:7000", "127.0.0.1:7001"};
    uint32_t rn[] = {0, 0, 1, 1};
    Nexar__PeerRankTable t = NEXAR__PEER_RANK_TABLE__INIT;
    t.job = "train";
    t.key = 7;
    t.job_key = 9;
    t.nodes = nodes;
    t.n_nodes = 2;
    t.rank_node = rn;
    t.n_rank_node = 4;
    t.node = 1;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_RANK_TABLE;
    m.rank_table = &t;
    ACCEPT(&m, "rank table");
    t.node = 2;
    REJECT(&m, "receiver's node out of range");
    t.node = 1;
    rn[3] = 2;
    REJECT(&m, "rank on a node not in the table");
    rn[2] = rn[3] = 0;
    REJECT(&m, "a node without ranks");
    rn[2] = rn[3] = 1;
    nodes[1] = "127.0.0.1:7000";
    REJECT(&m, "a node twice");
    nodes[1] = "127.0.0.1:7001";
    uint32_t pids[] = {11, 12, 0, 14}, uids[] = {1000, 1000, 1000, 1000, 1000};
    t.rank_pid = pids;
    t.n_rank_pid = 4;
    t.rank_uid = uids;
    t.n_rank_uid = 4;
    ACCEPT(&m, "rank table with pids and uids");
    t.n_rank_pid = 3;
    REJECT(&m, "rank table with a pid missing");
    t.n_rank_pid = 4;
    t.n_rank_uid = 5;
    REJECT(&m, "rank table with a uid too many");
    t.n_rank_uid = 0;
    t.job_key = 0;
    REJECT(&m, "job key 0");
}

static void test_others(void)
{
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    REJECT(&m, "no body");

    Nexar__PeerAbort a = NEXAR__PEER_ABORT__INIT;
    a.job = "train";
    a.key = 9;
    a.status = 5;
    a.reason = "node 127.0.0.1:7001 was lost";
    m.body_case = NEXAR__PEER_MSG__BODY_ABORT;
    m.abort = &a;
    ACCEPT(&m, "abort");
    a.status = 0;
    REJECT(&m, "abort with status 0");
    a.status = 5;
    a.reason = "two\tlines";
    REJECT(&m, "a reason with a control character");

    Nexar__PeerHello h = NEXAR__PEER_HELLO__INIT;
    h.version = NX_PEER_VERSION;
    h.addr = "10.1.2.3:7000";
    m.body_case = NEXAR__PEER_MSG__BODY_HELLO;
    m.hello = &h;
    ACCEPT(&m, "hello");

    Nexar__PeerTestBegin b = NEXAR__PEER_TEST_BEGIN__INIT;
    b.test_id = 1;
    b.channel = 3;
    b.channels = 4;
    b.bytes = 1 << 20;
    m.body_case = NEXAR__PEER_MSG__BODY_TEST_BEGIN;
    m.test_begin = &b;
    ACCEPT(&m, "test begin");
    b.channel = 4;
    REJECT(&m, "test begin on a channel beyond its count");
    b.channel = 0;
    b.channels = NX_PEERTEST_MAX_STREAMS + 1;
    REJECT(&m, "test begin with too many channels");

    Nexar__PeerTestResult r = NEXAR__PEER_TEST_RESULT__INIT;
    r.test_id = 1;
    r.bad_channel = NX_PEERTEST_MAX_STREAMS;
    m.body_case = NEXAR__PEER_MSG__BODY_TEST_RESULT;
    m.test_result = &r;
    REJECT(&m, "test result naming a channel beyond 64");

    uint32_t sr[] = {2, 3}, sc[] = {1, NEXAR_UNDEFINED_COLOR}, sk[] = {0, 5};
    Nexar__PeerSplit x = NEXAR__PEER_SPLIT__INIT;
    x.job = "train";
    x.key = 9;
    x.seq = 3;
    x.node = 1;
    x.ranks = sr;
    x.n_ranks = 2;
    x.colors = sc;
    x.n_colors = 2;
    x.keys = sk;
    x.n_keys = 2;
    x.comm = 1;
    m.body_case = NEXAR__PEER_MSG__BODY_SPLIT;
    m.split = &x;
    ACCEPT(&m, "split");
    x.n_keys = 1;
    REJECT(&m, "split with fewer keys than ranks");
    x.n_keys = 2;
    sr[1] = 2;
    REJECT(&m, "split naming a rank twice");
    sr[1] = 3;
    x.comm = 0x9e3779b97f4a7c15ull;
    ACCEPT(&m, "split of a communicator that a split made");
    x.comm = 0;
    REJECT(&m, "split of communicator key 0");

    const char *why = NULL;
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0x0f};
    CHECK(!nx_peer_msg_decode(junk, sizeof(junk), &why) && why, "junk decoded");
}

static void test_addr(void)
{
    char host[64], out[64], err[160];
    uint16_t port;
    CHECK(nx_addr_split("[::1]:7000", false, host, sizeof(host), &port) == 0 &&
          !strcmp(host, "::1") && port == 7000, "split [::1]:7000");
    CHECK(nx_addr_split("node-3.example:65535", false, host, sizeof(host), &port) == 0 &&
          port == 65535, "split a name");
    static const char *const bad[] = {"", ":7000", "host", "host:", "host:65536", "host:7x",
                                      "a b:1", "[::1]7000", "[]:1", "[1.2.3.4]:5", "h/x:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!nx_addr_valid(bad[i]), "accepted address \"%s\"", bad[i]);
    CHECK(nx_addr_split("0.0.0.0:0", true, NULL, 0, NULL) == 0, "listen port 0");

    CHECK(nx_addr_canon("localhost:7000", out, sizeof(out), err, sizeof(err)) == 0 &&
          (!strcmp(out, "127.0.0.1:7000") || !strcmp(out, "[::1]:7000")),
          "localhost canonical: %s", out);
    CHECK(nx_addr_canon("[0:0::1]:80", out, sizeof(out), err, sizeof(err)) == 0 &&
          !strcmp(out, "[::1]:80"), "v6 canonical: %s", out);
    CHECK(nx_addr_canon("[::ffff:10.0.0.1]:9", out, sizeof(out), err, sizeof(err)) == 0 &&
          !strcmp(out, "10.0.0.1:9"), "v4-mapped canonical: %s", out);
    CHECK(nx_addr_canon("no host", out, sizeof(out), err, sizeof(err)) < 0 && err[0],
          "canon of junk");
    CHECK(nx_addr_is_wildcard("0.0.0.0:7000") && nx_addr_is_wildcard("[::]:7000") &&
          !nx_addr_is_wildcard("127.0.0.1:7000"), "wildcards");
    CHECK(nx_addr_is_local_host("127.0.0.2:1") && nx_addr_is_local_host("[::1]:1"),
          "loopback is local");
    CHECK(nx_addr_port("[::1]:7000") == 7000 && nx_addr_port("junk") == 0, "ports");
}

static void test_pattern(void)
{
    enum { N = 4099 };
    uint8_t whole[N], parts[N];
    nx_peertest_fill(77, 3, 5, whole, N);
    /* Any cut gives the same stream. */
    static const size_t cuts[] = {0, 1, 3, 8, 11, 4000, N};
    for (size_t c = 0; c + 1 < sizeof(cuts) / sizeof(cuts[0]); c++)
        nx_peertest_fill(77, 3, 5 + cuts[c], parts + cuts[c], cuts[c + 1] - cuts[c]);
    CHECK(memcmp(whole, parts, N) == 0, "pattern depends on message boundaries");
    CHECK(nx_peertest_check(77, 3, 5, whole, N) == -1, "pattern does not check against itself");
    CHECK(nx_peertest_check(77, 3, 5 + 9, whole + 9, N - 9) == -1, "check at an odd offset");
    CHECK(nx_peertest_check(77, 4, 5, whole, N) == 0, "another channel checks");
    for (size_t bad = 0; bad < N; bad += 997) {
        whole[bad] ^= 0x40;
        CHECK(nx_peertest_check(77, 3, 5, whole, N) == (int64_t)bad, "bad byte %zu not found",
              bad);
        whole[bad] ^= 0x40;
    }
    uint8_t a[16], b[16];
    nx_peertest_fill(1, 0, 0, a, 16);
    nx_peertest_fill(2, 0, 0, b, 16);
    CHECK(memcmp(a, b, 16) != 0, "two tests share their pattern");
}

int main(void)
{
    test_pattern();
    test_register();
    test_rank_table();
    test_others();
    test_addr();
    if (fails)
        fprintf(stderr, "%d check(s) failed\n", fails);
    else
        printf("peer_msg + netaddr: all checks passed\n");
    return fails ? 1 : 0;
}
