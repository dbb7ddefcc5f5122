/*
 * test_cluster_tls.c - daemons that are not of the cluster stay out.
 *
 * A (node0, the cluster CA) and F (a certificate from a foreign CA, which F trusts):
 *  - nexarctl peer-test A -> F and F -> A fail with NEXAR_ERR_PEER_LOST and an error
 *    that names TLS;
 *  - a rank at F whose coordinator is A cannot join: its nexar_init fails (the
 *    coordinator is unreachable for F), and A has registered nothing;
 *  - a raw QUIC peer (cluster_rawpeer.c) without any certificate, one with the foreign
 *    certificate (trusting the cluster CA, so only A can refuse), one with an operator's
 *    certificate of the cluster CA and one with a cluster certificate of no role dial A
 *    and send a registration: the handshake is refused, saying why, and A has registered
 *    nothing;
 *  - A keeps serving: a peer-test between A and a proper node B still passes.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster_util.h"
#include "itest.h"
#include "nexar.h"

static int fails;

static void refused(struct cu_node *from, struct cu_node *to)
{
    char out[4096];
    const char *q[] = {"--json", "peer-test", to->addr, "--bytes", "1M", "--timeout", "20",
                       NULL};
    int rc = cu_ctl(from->d.sock, q, out, sizeof(out), 40);
    EXPECT_TRUE(fails, rc == NEXAR_ERR_PEER_LOST && strcasestr(out, "TLS") &&
                strstr(out, "\"verified\":false"),
                "peer-test %s -> %s: exit %d: %s", from->addr, to->addr, rc, out);
    tl_log("peer-test %s -> %s: exit %d: %.300s", from->addr, to->addr, rc, out);
}

static void nothing_registered(struct cu_node *n)
{
    char out[4096];
    const char *q[] = {"--json", "jobs", NULL};
    int rc = cu_ctl(n->d.sock, q, out, sizeof(out), 10);
    EXPECT_TRUE(fails, rc == 0 && strstr(out, "\"jobs\":[]"), "jobs at %s: %s", n->addr, out);
}

int main(void)
{
    cu_init("tls");
    struct cu_node A, B, F;
    const char *quick[] = {"--set", "peer_idle_timeout_ms=2000", NULL};
    if (cu_node_start(&A, "node0", "ca", quick) || cu_node_start(&B, "node1", "ca", quick) ||
        cu_node_start(&F, "foreign", "foreign-ca", quick)) {
        cu_fini();
        return 1;
    }
    tl_log("A %s, B %s, F (foreign CA) %s", A.addr, B.addr, F.addr);
    refused(&A, &F);
    refused(&F, &A);

    char job[64], text[1024];
    hx_job_name(job, sizeof(job), "foreign");
    pid_t p = cu_rank(F.d.sock, A.addr, job, 1, 2, "init", 20);
    int code = cu_wait_exit(p, 40);
    int st = -1;
    if (!cu_read("init", 1, text, sizeof(text)))
        st = atoi(text);
    EXPECT_TRUE(fails, code == 0 && (st == NEXAR_ERR_UNAVAILABLE || st == NEXAR_ERR_PEER_LOST) &&
                strcasestr(text, "TLS"),
                "rank at F with coordinator A: exit %d: %s", code, text);
    tl_log("rank at F: %s", text);
    nothing_registered(&A);

    /* Then certificates of the cluster CA that are unfit for a peer: an operator's (it may
     * inspect, never join) and one without any nexar role. */
    static const struct {
        const char *cert, *what, *says;
    } raws[] = {
        {NULL, "a peer without a certificate", "no certificate"},
        {"foreign", "a peer with a foreign certificate", "not signed by the cluster CA"},
        {"operator", "a peer with an operator's certificate", "of role operator"},
        {"norole", "a peer with a certificate of no role", "no nexar role"},
    };
    char ca[256], cert[256], key[256];
    snprintf(ca, sizeof(ca), "%s/ca.pem", cu_certs());
    for (int withcert = 0; withcert < 4; withcert++) {
        snprintf(cert, sizeof(cert), "%s/%s.pem", cu_certs(), raws[withcert].cert);
        snprintf(key, sizeof(key), "%s/%s.key", cu_certs(), raws[withcert].cert);
        const char *raw[] = {getenv("CLUSTER_RAWPEER"), A.addr, ca, withcert ? cert : NULL,
                             key, NULL};
        char log[300];
        snprintf(log, sizeof(log), "%s/rawpeer%d.log", cu_out(), withcert);
        pid_t rp = hx_spawn(raw, NULL, log);
        code = cu_wait_exit(rp, 30);
        FILE *f = fopen(log, "r");
        size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
        text[got] = '\0';
        if (f)
            fclose(f);
        const char *what = raws[withcert].what;
        EXPECT_TRUE(fails, code == 0 && strstr(text, raws[withcert].says), "%s: exit %d: %s",
                    what, code, text);
        char *last = text + strlen(text);
        while (last > text && last[-1] == '\n')
            *--last = '\0';
        while (last > text && last[-1] != '\n')
            last--;
        tl_log("%s: %s", what, last);
        nothing_registered(&A);
    }

    char out[4096];
    const char *ok[] = {"--json", "peer-test", B.addr, "--bytes", "8M", NULL};
    int rc = cu_ctl(A.d.sock, ok, out, sizeof(out), 40);
    EXPECT_TRUE(fails, rc == 0 && strstr(out, "\"verified\":true"), "A -> B afterwards: %d: %s",
                rc, out);

    if (hx_daemon_stop(&A.d) || hx_daemon_stop(&B.d) || hx_daemon_stop(&F.d))
        fails++;
    cu_fini();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
