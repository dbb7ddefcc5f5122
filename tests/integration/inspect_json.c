/*
 * inspect_json.c - test_inspect.c's JSON sections: the inspection endpoint answers JSON
 * to a client that asks (Accept: application/json, or ?format=json), for curl-style and
 * third-party HTTP/3 clients, and protobuf to everyone else (proto/inspect.h):
 *
 *  - every route asked both ways: 200, content-type application/json, a body that parses
 *    as JSON and equals nexarctl --json of the same report on the socket, field by field
 *    (uptime and resident memory aside); exact values: status's pid and socket, peers'
 *    listen (the node's address), config's listen and inspect with their sources;
 *  - without the ask (no Accept, Accept: * / *, a type of neither kind), with
 *    ?format=protobuf, or with Accept weighing protobuf higher: the CtlReply, as before;
 *    Accept weighing application/ * above protobuf: JSON;
 *  - ?format=xml: 400 with its reason; an unknown path asked in JSON: 404 as
 *    {"http_status":404,"error":"no such report"};
 *  - nexarctl --remote config equals nexarctl config on the socket;
 *  - the job (it_json_job): GET /v1/jobs?format=json on the coordinator names the job,
 *    its 2 ranks joined, and the pid of each rank, the other node's included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "inspect_test.h"
#include "nexar.pb-c.h"

static const char *const names[] = {"status", "jobs", "comms", "ops", "stats", "peers",
                                    "config"};
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* GET path with the extra fields (NULL-terminated name, value pairs; may be NULL). */
static int get(const struct it_node *a, const char *path, const char *const *fields,
               struct nxt_h3c_resp *resp)
{
    struct nxt_h3c_opts o;
    char err[512];
    struct nxt_h3c_req rq = {.method = "GET", .path = path, .fields = fields};
    it_h3_opts(&o, a);
    int rv = nxt_h3c_request(&o, &rq, resp, err, sizeof(err));
    if (rv)
        tl_log("GET %s: %d: %s", path, rv, err);
    return rv;
}

/* The body of a JSON answer, parsed (NULL, logged, when it is not one). */
static struct tj *json_body(const struct nxt_h3c_resp *r, const char *what)
{
    char why[200];
    struct tj *v = NULL;
    if (r->status == 200 && !strcmp(r->ctype, NX_INSPECT_CTYPE_JSON) && r->body)
        v = tj_parse((const char *)r->body, why, sizeof(why));
    else
        snprintf(why, sizeof(why), "HTTP %d, content-type \"%s\"", r->status, r->ctype);
    IT_CHECK(v != NULL, "%s: no JSON answer: %s: %.200s", what, why,
             r->body ? (const char *)r->body : "");
    return v;
}

/* A protobuf answer: the content-type of inspect.h and a CtlReply that decodes. */
static void expect_protobuf(const struct it_node *a, const char *path,
                            const char *const *fields, const char *what)
{
    struct nxt_h3c_resp r;
    int rv = get(a, path, fields, &r);
    const uint8_t *body = r.body ? r.body : (const uint8_t *)"";
    Nexar__CtlReply *rep = rv == 0 && r.status == 200 && !strcmp(r.ctype, NX_INSPECT_CTYPE)
                               ? nexar__ctl_reply__unpack(NULL, r.len, body)
                               : NULL;
    IT_CHECK(rep && rep->status == 0, "%s: want the protobuf CtlReply, got %d, HTTP %d, "
             "content-type \"%s\"", what, rv, r.status, r.ctype);
    if (rep)
        nexar__ctl_reply__free_unpacked(rep, NULL);
    nxt_h3c_resp_free(&r);
}

static void expect_json_named(const struct it_node *a, const char *path,
                              const char *const *fields, const char *name, const char *what)
{
    struct nxt_h3c_resp r;
    get(a, path, fields, &r);
    struct tj *v = json_body(&r, what);
    const char *c = v ? tj_str(v, "command") : NULL;
    IT_CHECK(!v || (c && !strcmp(c, name)), "%s: command \"%s\", want \"%s\"", what,
             c ? c : "-", name);
    tj_free(v);
    nxt_h3c_resp_free(&r);
}

/* Every report both ways, each equal to nexarctl --json on the socket. */
static void both_ways(const struct it_node *a)
{
    static const char *const skip[] = {"uptime_s", "rss_bytes", "heap_bytes", NULL};
    static const char *const accept[] = {"accept", "application/json", NULL};
    for (size_t i = 0; i < NNAMES; i++) {
        for (int way = 0; way < 2; way++) {
            char path[64], what[96], where[256];
            snprintf(path, sizeof(path), "/v1/%s%s", names[i], way ? "?format=json" : "");
            snprintf(what, sizeof(what), "GET %s%s", path, way ? "" : " (Accept: JSON)");
            struct nxt_h3c_resp r;
            get(a, path, way ? NULL : accept, &r);
            struct tj *v = json_body(&r, what);
            int rc;
            struct tj *l = it_local_json(a, names[i], &rc);
            IT_CHECK(!v || (l && it_same(v, l, skip, where, sizeof(where))),
                     "%s: differs from nexarctl --json %s at %s", what, names[i],
                     l ? where : "(no local answer)");
            tj_free(l);
            tj_free(v);
            nxt_h3c_resp_free(&r);
        }
    }
}

/* Exact values a client reads without the source tree. */
static void exact_values(const struct it_node *a)
{
    struct nxt_h3c_resp r;
    uint64_t pid = 0, status = 99;
    get(a, "/v1/status?format=json", NULL, &r);
    struct tj *v = json_body(&r, "GET /v1/status?format=json");
    const char *sock = v ? tj_str(v, "socket") : NULL;
    if (v) {
        tj_u64(v, "pid", &pid);
        tj_u64(v, "status", &status);
    }
    IT_CHECK(v && status == 0 && pid == (uint64_t)a->d.pid && sock && !strcmp(sock, a->d.sock),
             "status JSON: status %llu, pid %llu (nexard %d), socket %s (want %s)",
             (unsigned long long)status, (unsigned long long)pid, (int)a->d.pid,
             sock ? sock : "-", a->d.sock);
    tj_free(v);
    nxt_h3c_resp_free(&r);

    get(a, "/v1/peers?format=json", NULL, &r);
    v = json_body(&r, "GET /v1/peers?format=json");
    const char *listen = v ? tj_str(v, "listen") : NULL;
    IT_CHECK(listen && !strcmp(listen, a->addr), "peers JSON: listen %s, want %s",
             listen ? listen : "-", a->addr);
    tj_free(v);
    nxt_h3c_resp_free(&r);

    /* it_node_start gave --listen 127.0.0.1:0 and --log-level debug. */
    static const char *const want[][3] = {{"listen", "127.0.0.1:0", "command line"},
                                          {"log_level", "debug", "command line"},
                                          {"inspect", "on", "default"},
                                          {"inspect_max_conns", "8", "default"}};
    get(a, "/v1/config?format=json", NULL, &r);
    v = json_body(&r, "GET /v1/config?format=json");
    const struct tj *file = v ? tj_at(v, "config_file") : NULL;
    IT_CHECK(!v || (file && file->type == TJ_NULL), "config JSON: config_file is not null");
    for (size_t k = 0; v && k < sizeof(want) / sizeof(want[0]); k++) {
        int found = 0;
        for (long i = 0; i < tj_len(v, "config"); i++) {
            char p[64];
            snprintf(p, sizeof(p), "config[%ld].key", i);
            const char *key = tj_str(v, p);
            if (!key || strcmp(key, want[k][0]))
                continue;
            snprintf(p, sizeof(p), "config[%ld].value", i);
            const char *val = tj_str(v, p);
            snprintf(p, sizeof(p), "config[%ld].source", i);
            const char *src = tj_str(v, p);
            found = val && src && !strcmp(val, want[k][1]) && !strcmp(src, want[k][2]);
            IT_CHECK(found, "config JSON: %s = %s (%s), want %s (%s)", want[k][0],
                     val ? val : "-", src ? src : "-", want[k][1], want[k][2]);
            found = 1;
        }
        IT_CHECK(found, "config JSON: no key %s", want[k][0]);
    }
    tj_free(v);
    nxt_h3c_resp_free(&r);
}

static void negotiation(const struct it_node *a)
{
    static const char *const any[] = {"accept", "*/*", NULL};
    static const char *const html[] = {"accept", "text/html", NULL};
    static const char *const json_lower[] = {"accept",
                                             "application/json;q=0.4, application/x-protobuf",
                                             NULL};
    static const char *const json_zero[] = {"accept", "application/json; q=0", NULL};
    static const char *const json[] = {"accept", "application/json", NULL};
    static const char *const app_any[] = {"accept",
                                          "application/x-protobuf;q=0.1, application/*;q=0.9",
                                          NULL};
    static const char *const two[] = {"accept", "text/html", "accept", "APPLICATION/JSON",
                                      NULL};
    expect_protobuf(a, "/v1/stats", NULL, "no Accept");
    expect_protobuf(a, "/v1/stats", any, "Accept: */*");
    expect_protobuf(a, "/v1/stats", html, "Accept: text/html");
    expect_protobuf(a, "/v1/stats", json_lower, "Accept: json;q=0.4, protobuf");
    expect_protobuf(a, "/v1/stats", json_zero, "Accept: json;q=0");
    expect_protobuf(a, "/v1/stats?format=protobuf", json, "?format=protobuf over Accept");
    expect_json_named(a, "/v1/stats", app_any, "stats", "Accept: protobuf;q=0.1, app/*;q=0.9");
    expect_json_named(a, "/v1/stats", two, "stats", "two Accept fields, JSON in capitals");
    expect_json_named(a, "/v1/ops?full=1&format=json", NULL, "ops", "?full=1&format=json");

    struct nxt_h3c_resp r;
    int rv = get(a, "/v1/jobs?format=xml", NULL, &r);
    IT_CHECK(rv == 0 && r.status == 400 && r.body &&
                 !strcmp((const char *)r.body, "?format= must be json or protobuf\n"),
             "?format=xml: %d, HTTP %d, \"%s\"", rv, r.status, r.body ? (char *)r.body : "");
    nxt_h3c_resp_free(&r);
    rv = get(a, "/v1/nope", json, &r);
    IT_CHECK(rv == 0 && r.status == 404 && !strcmp(r.ctype, NX_INSPECT_CTYPE_JSON) && r.body &&
                 !strcmp((const char *)r.body,
                         "{\"http_status\":404,\"error\":\"no such report\"}\n"),
             "GET /v1/nope asked in JSON: %d, HTTP %d, %s: \"%s\"", rv, r.status, r.ctype,
             r.body ? (char *)r.body : "");
    nxt_h3c_resp_free(&r);
}

/* nexarctl --remote config: the new report over the endpoint, as on the socket. */
static void remote_config(const struct it_node *a)
{
    int rr, lr;
    char where[256];
    struct tj *r = it_remote_json(a, "config", &rr);
    struct tj *l = it_local_json(a, "config", &lr);
    IT_CHECK(r && l && rr == 0 && lr == 0 && it_same(r, l, NULL, where, sizeof(where)),
             "nexarctl --remote config: exit %d, differs from the socket's at %s", rr,
             r && l ? where : "(no answer)");
    tj_free(r);
    tj_free(l);
}

void it_json_section(const struct it_node *a)
{
    int before = it_fails;
    remote_config(a);
    both_ways(a);
    exact_values(a);
    negotiation(a);
    tl_log("%s: json: every route as JSON both ways, equal to nexarctl --json; protobuf "
           "unless asked", it_fails == before ? "ok" : "FAIL");
}

void it_json_job(const struct it_node *a, const char *job, const pid_t *pids, int n)
{
    int before = it_fails;
    struct nxt_h3c_resp r;
    get(a, "/v1/jobs?format=json", NULL, &r);
    struct tj *v = json_body(&r, "GET /v1/jobs?format=json with the job");
    const char *name = v ? tj_str(v, "jobs[0].job") : NULL;
    uint64_t world = 0, joined = 0;
    if (v) {
        tj_u64(v, "jobs[0].world_size", &world);
        tj_u64(v, "jobs[0].joined", &joined);
    }
    IT_CHECK(v && tj_len(v, "jobs") == 1 && name && !strcmp(name, job) &&
                 world == (uint64_t)n && joined == (uint64_t)n &&
                 tj_len(v, "jobs[0].ranks") == n,
             "jobs JSON: %ld job(s), \"%s\", %llu/%llu joined, %ld ranks (want \"%s\", %d/%d)",
             v ? tj_len(v, "jobs") : -1, name ? name : "-", (unsigned long long)joined,
             (unsigned long long)world, v ? tj_len(v, "jobs[0].ranks") : -1, job, n, n);
    for (int k = 0; v && k < n; k++) {
        char p[64];
        uint64_t pid = 0;
        snprintf(p, sizeof(p), "jobs[0].ranks[%d].pid", k);
        tj_u64(v, p, &pid);
        IT_CHECK(pid == (uint64_t)pids[k], "jobs JSON: rank %d pid %llu, want %d", k,
                 (unsigned long long)pid, (int)pids[k]);
    }
    tj_free(v);
    nxt_h3c_resp_free(&r);
    if (it_fails == before)
        tl_log("ok: jobs JSON names job %s, %d/%d ranks joined, every rank's pid", job, n, n);
}
