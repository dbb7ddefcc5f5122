/*
 * test_inspect.c - nexard's remote inspection endpoint (HTTP/3, ALPN h3, on the QUIC port)
 * and nexarctl --remote, against real daemons listening on loopback with certificates
 * made by `nexarctl certs` (a cluster CA, node certificates, an operator's certificate,
 * and a foreign CA with a certificate of its own):
 *
 *  - same: nexarctl --remote status/jobs/comms/ops/stats/peers --json equals the local
 *    nexarctl --json field by field (all but uptime and resident memory), the tables
 *    too, and each body is byte for byte the CtlReply of the Unix socket;
 *  - json: every report as JSON to a client that asks, protobuf otherwise
 *    (inspect_json.c);
 *  - refusals: no client certificate, a foreign CA's certificate, a daemon certificate
 *    our --tls-ca does not sign: exit 9 with the reason, before any request (the daemon
 *    answered none), and the daemon has no peer and lost none for it;
 *  - HTTP: 404 for an unknown path, 405 for POST, 431 for oversized fields, 400 for a
 *    body or a bad :scheme, a reset (or 400) for what nghttp3 finds malformed, a query
 *    string ignored, 10 requests at once on one connection (4 streams at a time); a
 *    request longer than a stream's 16 KiB stalls unanswered (the client times out);
 *  - the job: two daemons forming a job and running collectives while one of them is
 *    inspected over and over (inspect_job.c): exact results, exactly one peer each;
 *  - the cap: with inspect_max_conns = 1, a second inspector is turned away (exit 2,
 *    "busy") while the first holds its connection, and welcome once it left;
 *  - inspect = off: exit 8, "does not serve remote inspection"; a closed port: exit 2;
 *  - roles: every nexarctl --remote above uses an operator's certificate (`nexarctl certs
 *    operator`); nexard refuses to start with one, naming what it lacks.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "inspect.h"
#include "inspect_test.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "rawclient.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *const cmds[] = {"status", "jobs", "comms", "ops", "stats", "peers"};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* Remote and local --json of every report, field by field. */
static void section_same(const struct it_node *a)
{
    static const char *const skip[] = {"uptime_s", "rss_bytes", "heap_bytes", NULL};
    for (size_t i = 0; i < NCMDS; i++) {
        int rr, lr;
        struct tj *r = it_remote_json(a, cmds[i], &rr);
        struct tj *l = it_local_json(a, cmds[i], &lr);
        char where[256];
        IT_CHECK(rr == 0 && lr == 0 && r && l, "%s: remote exit %d, local exit %d", cmds[i],
                 rr, lr);
        if (r && l)
            IT_CHECK(it_same(r, l, skip, where, sizeof(where)),
                     "%s: remote and local differ at %s", cmds[i], where);
        tj_free(r);
        tj_free(l);
    }
    /* The tables come from the same printers (status has the uptime in it). */
    for (size_t i = 1; i < NCMDS; i++) {
        static struct tl_ctl r, l;
        const char *ra[] = {cmds[i], NULL};
        const char *la[] = {"-s", a->d.sock, cmds[i], NULL};
        it_remote(&r, a, NULL, ra);
        tl_ctl_run(&l, cu_out(), la, 20);
        IT_CHECK(r.rc == 0 && l.rc == 0 && !strcmp(r.out, l.out),
                 "%s table: remote (exit %d)\n%s\nlocal (exit %d)\n%s", cmds[i], r.rc, r.out,
                 l.rc, l.out);
    }
    tl_log("same: every report equal remote and local, JSON and tables");
}

/* The CtlReply of the Unix socket for command, packed: the reference bytes. */
static int socket_reply(const struct it_node *a, int command, uint8_t **out, size_t *len)
{
    const char *why = "";
    int fd = rc_connect(a->d.sock);
    if (fd < 0 || rc_hello(fd, NEXAR__CLIENT_KIND__CLIENT_CTL, 5000, &why) != 0) {
        tl_log("socket %s: %s", a->d.sock, why);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    Nexar__CtlRequest req = NEXAR__CTL_REQUEST__INIT;
    req.command = (Nexar__CtlCommand)command;
    uint8_t buf[32];
    size_t n = nexar__ctl_request__pack(&req, buf);
    struct rc_frame f = {0};
    int rv = rc_send_frame(fd, NX_MSG_CTL, buf, (uint32_t)n);
    if (rv == 0)
        rv = rc_recv_frame(fd, &f, 5000);
    close(fd);
    if (rv != 0 || f.type != NX_MSG_CTL_REPLY) {
        free(f.payload);
        return -1;
    }
    *out = f.payload;
    *len = f.length;
    return 0;
}

/* Every body is the socket's CtlReply, byte for byte (an idle daemon: nothing moves
 * but the uptime and the resident memory of status, so status is decoded instead). */
static void section_bytes(const struct it_node *a)
{
    struct nxt_h3c_opts o;
    it_h3_opts(&o, a);
    for (size_t i = 0; i < NCMDS; i++) {
        char path[64], err[512];
        snprintf(path, sizeof(path), "/v1/%s", cmds[i]);
        const struct nx_inspect_route *rt = nx_inspect_by_path(path, strlen(path));
        struct nxt_h3c_resp resp;
        uint8_t *ref = NULL;
        size_t reflen = 0;
        int rv = nxt_h3c_get(&o, path, &resp, err, sizeof(err));
        IT_CHECK(rv == 0 && resp.status == 200 && !strcmp(resp.ctype, NX_INSPECT_CTYPE),
                 "GET %s: %d, HTTP %d, %s: %s", path, rv, resp.status, resp.ctype, err);
        IT_CHECK(rt && socket_reply(a, rt->command, &ref, &reflen) == 0,
                 "CTL %s on the socket", cmds[i]);
        if (rv == 0 && ref && strcmp(cmds[i], "status"))
            IT_CHECK(resp.len == reflen && (!reflen || !memcmp(resp.body, ref, reflen)),
                     "GET %s: %zu bytes, the socket's reply %zu bytes, not the same", path,
                     resp.len, reflen);
        const uint8_t *body = resp.body ? resp.body : (const uint8_t *)""; /* 0 bytes */
        Nexar__CtlReply *rep = rv == 0 ? nexar__ctl_reply__unpack(NULL, resp.len, body) : NULL;
        IT_CHECK(rep && rep->status == 0, "GET %s: the body is no CtlReply", path);
        if (rep && !strcmp(cmds[i], "status"))
            IT_CHECK(rep->status_info && rep->status_info->pid == (uint64_t)a->d.pid,
                     "GET /v1/status: pid is not nexard's %d", (int)a->d.pid);
        if (rep)
            nexar__ctl_reply__free_unpacked(rep, NULL);
        free(ref);
        nxt_h3c_resp_free(&resp);
    }
    tl_log("bytes: every body is the control socket's CtlReply");
}

static void section_refusals(const struct it_node *a)
{
    static struct tl_ctl r;
    const char *args[] = {"status", NULL};
    int answered = it_log_count(a, "GET /v1/");
    const char *nocert[] = {"--tls-ca", it_cert("ca/ca.pem"), "--tls-cert", "", NULL};
    it_remote(&r, a, nocert, args);
    IT_CHECK(r.rc == NEXAR_ERR_PERMISSION && strstr(r.err, "presented no certificate"),
             "no client certificate: exit %d, %s", r.rc, r.err);
    tl_log("no certificate: exit %d: %s", r.rc, r.err);
    const char *evil[] = {"--tls-ca", it_cert("ca/ca.pem"), "--tls-cert",
                          it_cert("evil/node.pem"), "--tls-key", it_cert("evil/node-key.pem"),
                          NULL};
    it_remote(&r, a, evil, args);
    IT_CHECK(r.rc == NEXAR_ERR_PERMISSION && strstr(r.err, "not signed by the cluster CA"),
             "a foreign CA's certificate: exit %d, %s", r.rc, r.err);
    tl_log("foreign CA: exit %d: %s", r.rc, r.err);
    const char *theirs[] = {"--tls-ca", it_cert("fca/ca.pem"), "--tls-cert",
                            it_cert("ops/operator.pem"), "--tls-key",
                            it_cert("ops/operator-key.pem"),
                            NULL};
    it_remote(&r, a, theirs, args);
    IT_CHECK(r.rc == NEXAR_ERR_PERMISSION && strstr(r.err, "not signed by our CA"),
             "a daemon our CA does not sign: exit %d, %s", r.rc, r.err);
    const char *json[] = {"--json", "status", NULL};
    it_remote(&r, a, evil, json);
    IT_CHECK(r.rc == NEXAR_ERR_PERMISSION &&
                 strstr(r.out, "\"status_name\":\"NEXAR_ERR_PERMISSION\""),
             "--json refusal: exit %d, %s", r.rc, r.out);
    /* The library says the same, and no answer came. */
    struct nxt_h3c_opts o;
    struct nxt_h3c_resp resp;
    char err[512];
    it_h3_opts(&o, a);
    o.cert = NULL;
    int rv = nxt_h3c_get(&o, "/v1/status", &resp, err, sizeof(err));
    IT_CHECK(rv == -NEXAR_ERR_PERMISSION && resp.status == 0 && !resp.len,
             "h3c without a certificate: %d, HTTP %d: %s", rv, resp.status, err);
    nxt_h3c_resp_free(&resp);
    usleep(200 * 1000);
    IT_CHECK(it_log_count(a, "GET /v1/") == answered,
             "the daemon answered a request of a refused client");
    IT_CHECK(it_log_count(a, "ended before it came up") >= 4,
             "the daemon did not log the refused inspectors");
    int rc;
    struct tj *p = it_local_json(a, "peers", &rc);
    IT_CHECK(p && tj_len(p, "peers") == 0, "refused inspectors show as peers: %ld",
             p ? tj_len(p, "peers") : -1);
    tj_free(p);
    struct tj *s = it_local_json(a, "stats", &rc);
    uint64_t lost = 1;
    IT_CHECK(s && tj_u64(s, "peers_lost", &lost) == 0 && lost == 0,
             "refused inspectors counted as lost peers: %llu", (unsigned long long)lost);
    tj_free(s);
    tl_log("refusals: exit 9 with the reason, nothing answered, no peer");
}

static int h3_timeout(const struct it_node *a, const struct nxt_h3c_req *rq,
                      struct nxt_h3c_resp *resp, const char *what, int timeout_ms)
{
    struct nxt_h3c_opts o;
    char err[512];
    it_h3_opts(&o, a);
    if (timeout_ms)
        o.timeout_ms = timeout_ms;
    int rv = nxt_h3c_request(&o, rq, resp, err, sizeof(err));
    if (rv)
        tl_log("%s: %d: %s", what, rv, err);
    return rv;
}

static int h3(const struct it_node *a, const struct nxt_h3c_req *rq, struct nxt_h3c_resp *resp,
              const char *what)
{
    return h3_timeout(a, rq, resp, what, 0);
}

static void section_http(const struct it_node *a)
{
    struct nxt_h3c_resp r[10];
    struct nxt_h3c_req nope = {.method = "GET", .path = "/v1/nope"};
    int rv = h3(a, &nope, r, "GET /v1/nope");
    IT_CHECK(rv == 0 && r[0].status == 404 && r[0].body && strstr((char *)r[0].body, "no such"),
             "GET /v1/nope: %d, HTTP %d, %s", rv, r[0].status, r[0].body ? (char *)r[0].body : "");
    nxt_h3c_resp_free(&r[0]);

    struct nxt_h3c_req post = {.method = "POST", .path = "/v1/status"};
    rv = h3(a, &post, r, "POST /v1/status");
    IT_CHECK(rv == 0 && r[0].status == 405, "POST /v1/status: %d, HTTP %d", rv, r[0].status);
    nxt_h3c_resp_free(&r[0]);

    struct nxt_h3c_req query = {.method = "GET", .path = "/v1/stats?full=1"};
    rv = h3(a, &query, r, "GET /v1/stats?full=1");
    IT_CHECK(rv == 0 && r[0].status == 200 && !strcmp(r[0].ctype, NX_INSPECT_CTYPE),
             "GET /v1/stats?full=1: %d, HTTP %d", rv, r[0].status);
    nxt_h3c_resp_free(&r[0]);

    static char pad[5000];
    memset(pad, 'p', sizeof(pad) - 1);
    const char *big[] = {"x-pad", pad, NULL};
    struct nxt_h3c_req large = {.method = "GET", .path = "/v1/status", .fields = big};
    rv = h3(a, &large, r, "5000-byte field");
    IT_CHECK(rv == 0 && (r[0].status == 431 || (r[0].status == 0 && r[0].reset_code)),
             "a 5000-byte field: %d, HTTP %d", rv, r[0].status);
    tl_log("a 5000-byte field: HTTP %d, reset 0x%llx", r[0].status,
           (unsigned long long)r[0].reset_code);
    nxt_h3c_resp_free(&r[0]);

    /* One field longer than a request stream may carry: it never completes, the stream
     * stalls at its 16 KiB of credit, nothing is answered (the client's timeout). */
    static char huge[20000];
    memset(huge, '~', sizeof(huge) - 1); /* no shorter in Huffman code */
    const char *hf[] = {"x-huge", huge, NULL};
    struct nxt_h3c_req stall = {.method = "GET", .path = "/v1/status", .fields = hf};
    rv = h3_timeout(a, &stall, r, "a 20000-byte field", 1500);
    IT_CHECK(rv == -NEXAR_ERR_TIMEOUT, "a 20000-byte field: %d, HTTP %d (want a stall: "
             "NEXAR_ERR_TIMEOUT)", rv, r[0].status);
    nxt_h3c_resp_free(&r[0]);

    const char *many[81];
    static char names[40][8];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "x-%d", i);
        many[2 * i] = names[i];
        many[2 * i + 1] = "v";
    }
    many[80] = NULL;
    struct nxt_h3c_req lots = {.method = "GET", .path = "/v1/status", .fields = many};
    rv = h3(a, &lots, r, "40 fields");
    IT_CHECK(rv == 0 && r[0].status == 431, "too many fields: %d, HTTP %d", rv, r[0].status);
    nxt_h3c_resp_free(&r[0]);

    struct nxt_h3c_req http = {.method = "GET", .path = "/v1/status", .scheme = "http"};
    rv = h3(a, &http, r, ":scheme http");
    IT_CHECK(rv == 0 && r[0].status == 400, ":scheme http: %d, HTTP %d", rv, r[0].status);
    nxt_h3c_resp_free(&r[0]);

    struct nxt_h3c_req body = {.method = "GET", .path = "/v1/jobs", .body = 100};
    rv = h3(a, &body, r, "GET with a body");
    IT_CHECK(rv == 0 && r[0].status == 400, "GET with a body: %d, HTTP %d", rv, r[0].status);
    nxt_h3c_resp_free(&r[0]);

    const char *upper[] = {"X-Upper", "1", NULL};
    struct nxt_h3c_req bad = {.method = "GET", .path = "/v1/status", .fields = upper};
    rv = h3(a, &bad, r, "an upper-case field name");
    IT_CHECK(rv == 0 && (r[0].status == 400 || (r[0].status == 0 && r[0].reset_code)),
             "an upper-case field name: %d, HTTP %d, reset 0x%llx", rv, r[0].status,
             (unsigned long long)r[0].reset_code);
    tl_log("an upper-case field name: HTTP %d, reset 0x%llx", r[0].status,
           (unsigned long long)r[0].reset_code);
    nxt_h3c_resp_free(&r[0]);

    struct nxt_h3c_req ten = {.method = "GET", .path = "/v1/comms", .repeat = 10};
    rv = h3(a, &ten, r, "10 requests at once");
    int ok = 0;
    for (int i = 0; i < 10; i++) {
        ok += rv == 0 && r[i].status == 200;
        nxt_h3c_resp_free(&r[i]);
    }
    IT_CHECK(ok == 10, "10 requests on one connection: %d answered 200", ok);

    int rc;
    struct tj *s = it_remote_json(a, "status", &rc);
    IT_CHECK(s && rc == 0, "nexarctl --remote status after the bad requests: exit %d", rc);
    tj_free(s);
    tl_log("http: 404, 405, 431, 400, resets, a query, 10 at once; the daemon serves on");
}

/* inspect_max_conns = 1: one inspector holds its connection, a second is turned away. */
static void section_cap(void)
{
    struct it_node c;
    const char *extra[] = {"--set", "inspect_max_conns=1", NULL};
    if (it_node_start(&c, "c", extra) != 0) {
        it_fails++;
        return;
    }
    fflush(NULL);
    pid_t holder = fork();
    if (holder == 0) {
        struct nxt_h3c_opts o;
        struct nxt_h3c_resp r;
        char err[512];
        struct nxt_h3c_req rq = {.method = "GET", .path = "/v1/status", .hold_ms = 3000};
        it_h3_opts(&o, &c);
        int rv = nxt_h3c_request(&o, &rq, &r, err, sizeof(err));
        _exit(rv == 0 && r.status == 200 ? 0 : 1);
    }
    for (int i = 0; i < 100 && it_log_count(&c, "inspector 127.0.0.1") < 1; i++)
        usleep(20 * 1000);
    static struct tl_ctl r;
    const char *args[] = {"status", NULL};
    it_remote(&r, &c, NULL, args);
    IT_CHECK(r.rc == NEXAR_ERR_UNAVAILABLE && strstr(r.err, "busy"),
             "a second inspector past inspect_max_conns=1: exit %d, %s", r.rc, r.err);
    tl_log("cap: %s", r.err);
    int e = cu_wait_exit(holder, 10);
    IT_CHECK(e == 0, "the first inspector: exit %d", e);
    it_remote(&r, &c, NULL, args);
    IT_CHECK(r.rc == 0, "once the first left: exit %d, %s", r.rc, r.err);
    IT_CHECK(hx_daemon_stop(&c.d) == 0, "node c did not stop cleanly");
}

static void section_off(void)
{
    struct it_node d;
    const char *extra[] = {"--set", "inspect=off", NULL};
    if (it_node_start(&d, "d", extra) != 0) {
        it_fails++;
        return;
    }
    static struct tl_ctl r;
    const char *args[] = {"status", NULL};
    it_remote(&r, &d, NULL, args);
    IT_CHECK(r.rc == NEXAR_ERR_UNSUPPORTED && strstr(r.err, "does not serve remote inspection"),
             "inspect = off: exit %d, %s", r.rc, r.err);
    IT_CHECK(hx_daemon_stop(&d.d) == 0, "node d did not stop cleanly");
    /* Its port is closed now: nothing answers there. */
    it_remote(&r, &d, NULL, args);
    IT_CHECK(r.rc == NEXAR_ERR_UNAVAILABLE, "a closed port: exit %d, %s", r.rc, r.err);
    tl_log("off: exit 8; closed port: exit %d: %s", r.rc, r.err);
}

/* An operator's certificate inspects (every section above used it) but makes no daemon:
 * nexard refuses to start with it, and says what to use instead. */
static void section_roles(void)
{
    char out[300], sock[300], text[2048] = "";
    snprintf(out, sizeof(out), "%s/nexard-operator.log", cu_out());
    snprintf(sock, sizeof(sock), "%s/operator.sock", cu_out());
    const char *argv[] = {hx_nexard_path(), "--foreground", "--socket", sock,
                          "--listen", "127.0.0.1:0", "--tls-ca", it_cert("ca/ca.pem"),
                          "--tls-cert", it_cert("ops/operator.pem"), "--tls-key",
                          it_cert("ops/operator-key.pem"), NULL};
    pid_t p = hx_spawn(argv, NULL, out);
    int st = -1;
    int w = hx_wait_pid(p, 20, &st);
    FILE *f = fopen(out, "r");
    size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    text[got] = '\0';
    if (f)
        fclose(f);
    IT_CHECK(w == 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
                 strstr(text, "tls_cert: certificate is not for a TLS server") &&
                 strstr(text, "a node needs a node certificate ('nexarctl certs node'"),
             "nexard with an operator's certificate: wait %d, status 0x%x: %s", w, st, text);
    tl_log("nexard with an operator's certificate: %s", text);
}

int main(void)
{
    const char *dir = cu_init("inspect");
    if (!getenv("INSPECT_RANK")) {
        fprintf(stderr, "SKIP: $INSPECT_RANK is not set (run through meson test)\n");
        cu_fini();
        return HX_SKIP;
    }
    struct it_node a, b;
    double t0 = now_s();
    if (it_certs_make(dir) != 0 || it_node_start(&a, "a", NULL) != 0 ||
        it_node_start(&b, "b", NULL) != 0) {
        cu_fini();
        return 1;
    }
    tl_log("certificates and daemons in %.1f s: a at %s, b at %s", now_s() - t0, a.addr,
           b.addr);
    section_same(&a);
    section_bytes(&a);
    it_json_section(&a);
    section_refusals(&a);
    section_roles();
    section_http(&a);
    it_job_section(&a, &b);
    section_cap();
    section_off();
    IT_CHECK(hx_daemon_stop(&a.d) == 0, "node a did not stop cleanly");
    IT_CHECK(hx_daemon_stop(&b.d) == 0, "node b did not stop cleanly");
    tl_log("%s in %.1f s (%d failure(s))", it_fails ? "FAIL" : "PASS", now_s() - t0,
           it_fails);
    cu_fini();
    return it_fails ? 1 : 0;
}
