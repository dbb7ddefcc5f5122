/*
 * test_qaddr.c - the transport's addresses (daemon/transport/quic/quic_addr.c) on strings
 * and socket addresses alone: what nx_qaddr_resolve takes and refuses, with its reasons;
 * the canonical form that names a peer; the v4 / v4-mapped rewriting of a dual-stack
 * endpoint; and the order the simultaneous-open rule compares with.
 *
 * The syntax is addr.h's (nx_addr_split), which NEXAR_COORD, rank tables and nexarctl
 * use: an address that one of them takes and the transport refuses, or the other way
 * round, would name a daemon that can be configured and never reached.  So every string
 * here is also checked against nx_addr_split.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "addr.h"
#include "qh.h"
#include "quic_int.h"

static void expect_ok(const char *s, const char *canon)
{
    union nx_qsa a;
    socklen_t len = 0;
    char err[160] = "", out[NX_TADDR_MAX];
    int rv = nx_qaddr_resolve(s, false, &a, &len, err, sizeof(err));
    QH_CHECK(rv == 0);
    if (rv != 0) {
        fprintf(stderr, "  \"%s\": %s\n", s, err);
        return;
    }
    QH_CHECK(len == (a.sa.sa_family == AF_INET ? sizeof(a.in) : sizeof(a.in6)));
    nx_qaddr_format(&a.sa, out, sizeof(out));
    if (strcmp(out, canon)) {
        fprintf(stderr, "  \"%s\" reads as \"%s\", want \"%s\"\n", s, out, canon);
        qh_failures++;
    }
    QH_CHECK(nx_addr_split(s, true, NULL, 0, NULL) == 0);
}

/* Refused with a reason that contains want, and refused by nx_addr_split too when
 * syntax is true (a host name is good syntax, and refused only for being one). */
static void expect_bad(const char *s, const char *want, int syntax)
{
    union nx_qsa a;
    socklen_t len = 0;
    char err[160] = "";
    int rv = nx_qaddr_resolve(s, false, &a, &len, err, sizeof(err));
    QH_CHECK(rv == -EINVAL);
    if (!strstr(err, want)) {
        fprintf(stderr, "  \"%s\": reason \"%s\", want it to say \"%s\"\n", s ? s : "(null)",
                err, want);
        qh_failures++;
    }
    QH_CHECK((nx_addr_split(s, true, NULL, 0, NULL) < 0) == syntax);
}

static void test_resolve(void)
{
    expect_ok("127.0.0.1:7000", "127.0.0.1:7000");
    expect_ok("10.0.0.7:0", "10.0.0.7:0"); /* port 0: a listen address */
    expect_ok("0.0.0.0:65535", "0.0.0.0:65535");
    expect_ok("[::1]:7000", "[::1]:7000");
    expect_ok("[fe80::1:2]:9", "[fe80::1:2]:9");
    expect_ok("[::ffff:10.0.0.7]:7000", "10.0.0.7:7000"); /* v4-mapped names v4 */

    const char *syntax = "want host:port or [v6]:port";
    expect_bad(NULL, syntax, 1);
    expect_bad("", syntax, 1);
    expect_bad("127.0.0.1", syntax, 1);
    expect_bad(":7000", syntax, 1);                   /* no host: was 0.0.0.0 once */
    expect_bad("127.0.0.1:", syntax, 1);
    expect_bad("127.0.0.1:65536", syntax, 1);
    expect_bad("127.0.0.1:70000", syntax, 1);
    expect_bad("127.0.0.1:-1", syntax, 1);
    expect_bad("127.0.0.1:7000x", syntax, 1);
    expect_bad("::1:7000", syntax, 1);                /* an ambiguous v6 literal */
    expect_bad("[127.0.0.1]:7000", syntax, 1);        /* brackets are for v6 */
    expect_bad("[::1]7000", syntax, 1);
    expect_bad("[::1:7000", syntax, 1);
    expect_bad("a b:7000", syntax, 1);
    expect_bad("user@host:7000", syntax, 1);
    char longest[NX_ADDR_MAX + 8];
    memset(longest, '1', sizeof(longest));
    snprintf(longest + sizeof(longest) - 6, 6, ":7000");
    expect_bad(longest, syntax, 1);

    /* Good syntax, but a name: the loop never waits on a name server. */
    expect_bad("localhost:7000", "'localhost' is a host name, not an address", 0);
    expect_bad("[::zz]:7000", "'::zz' is a host name, not an address", 0);

    /* With may_resolve (the endpoint's own listen and advertise, at its start) a name
     * is looked up; localhost is in every /etc/hosts. */
    union nx_qsa a;
    socklen_t len;
    char err[160] = "", out[NX_TADDR_MAX];
    QH_CHECK(nx_qaddr_resolve("localhost:7001", true, &a, &len, err, sizeof(err)) == 0);
    nx_qaddr_format(&a.sa, out, sizeof(out));
    QH_CHECK(!strcmp(out, "127.0.0.1:7001") || !strcmp(out, "[::1]:7001"));
    QH_CHECK(nx_qaddr_is_loopback(&a.sa));
}

static void v4(union nx_qsa *a, socklen_t *len, const char *ip, uint16_t port)
{
    memset(a, 0, sizeof(*a));
    a->in.sin_family = AF_INET;
    a->in.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a->in.sin_addr);
    *len = sizeof(a->in);
}

static void v6(union nx_qsa *a, socklen_t *len, const char *ip, uint16_t port)
{
    memset(a, 0, sizeof(*a));
    a->in6.sin6_family = AF_INET6;
    a->in6.sin6_port = htons(port);
    inet_pton(AF_INET6, ip, &a->in6.sin6_addr);
    *len = sizeof(a->in6);
}

static void test_family(void)
{
    union nx_qsa a, b;
    socklen_t len, lb;
    char err[160] = "", out[NX_TADDR_MAX];

    /* A v4 peer on a dual-stack endpoint: v4-mapped, and still the same daemon. */
    v4(&a, &len, "10.1.2.3", 7000);
    v4(&b, &lb, "10.1.2.3", 7000);
    QH_CHECK(nx_qaddr_to_family(AF_INET6, &a, &len, err, sizeof(err)) == 0);
    QH_CHECK(a.sa.sa_family == AF_INET6 && len == sizeof(a.in6));
    QH_CHECK(IN6_IS_ADDR_V4MAPPED(&a.in6.sin6_addr) && ntohs(a.in6.sin6_port) == 7000);
    nx_qaddr_format(&a.sa, out, sizeof(out));
    QH_CHECK(!strcmp(out, "10.1.2.3:7000"));
    QH_CHECK(nx_qaddr_cmp(&a.sa, &b.sa) == 0);
    uint8_t ka[20], kb[20];
    size_t na = nx_qaddr_key(&a.sa, ka), nb = nx_qaddr_key(&b.sa, kb);
    QH_CHECK(na == nb && !memcmp(ka, kb, na));

    /* And back. */
    QH_CHECK(nx_qaddr_to_family(AF_INET, &a, &len, err, sizeof(err)) == 0);
    QH_CHECK(a.sa.sa_family == AF_INET && len == sizeof(a.in));
    QH_CHECK(a.in.sin_addr.s_addr == b.in.sin_addr.s_addr && ntohs(a.in.sin_port) == 7000);

    /* A real v6 peer cannot be reached from a v4 socket, and the reason says how. */
    v6(&a, &len, "2001:db8::5", 7000);
    QH_CHECK(nx_qaddr_to_family(AF_INET, &a, &len, err, sizeof(err)) == -EAFNOSUPPORT);
    QH_CHECK(strstr(err, "listen on [::]:port") != NULL);
    QH_CHECK(nx_qaddr_to_family(AF_INET6, &a, &len, err, sizeof(err)) == 0); /* as it is */

    /* The order: antisymmetric, and port after address. */
    v4(&a, &len, "10.0.0.1", 9000);
    v4(&b, &lb, "10.0.0.2", 8000);
    QH_CHECK(nx_qaddr_cmp(&a.sa, &b.sa) < 0 && nx_qaddr_cmp(&b.sa, &a.sa) > 0);
    v4(&b, &lb, "10.0.0.1", 9001);
    QH_CHECK(nx_qaddr_cmp(&a.sa, &b.sa) < 0 && nx_qaddr_cmp(&b.sa, &a.sa) > 0);
    QH_CHECK(!nx_qaddr_is_loopback(&a.sa));
    v6(&a, &len, "::ffff:127.0.0.9", 1);
    QH_CHECK(nx_qaddr_is_loopback(&a.sa));
}

int main(void)
{
    test_resolve();
    test_family();
    if (qh_failures) {
        fprintf(stderr, "test_qaddr: %d failures\n", qh_failures);
        return 1;
    }
    printf("test_qaddr: ok\n");
    return 0;
}
