/* inspect_util.c - see inspect_test.h. */
#include "inspect_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int it_fails;

static char g_certdir[256];

const char *it_cert(const char *rel)
{
    static char buf[64][320];
    static int k;
    char *p = buf[k++ % 64];
    snprintf(p, sizeof(buf[0]), "%s/%s", g_certdir, rel);
    return p;
}

/* nexarctl certs ARGS... quietly; 0 when it exited 0. */
static int certs(const char *const *args)
{
    static struct tl_ctl r;
    const char *argv[24] = {"certs"};
    int n = 1;
    for (int i = 0; args[i] && n < 23; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (tl_ctl_run(&r, cu_out(), argv, 30) != 0) {
        tl_log("FAIL: nexarctl certs %s: exit %d: %s", args[0], r.rc, r.err);
        return -1;
    }
    return 0;
}

int it_certs_make(const char *dir)
{
    snprintf(g_certdir, sizeof(g_certdir), "%s/tls", dir);
    char ca[300], fca[300];
    snprintf(ca, sizeof(ca), "%s/ca", g_certdir);
    snprintf(fca, sizeof(fca), "%s/fca", g_certdir);
    const char *mkca[] = {"ca", "--out", ca, NULL};
    const char *mkfca[] = {"ca", "--out", fca, NULL};
    if (certs(mkca) || certs(mkfca))
        return -1;
    static const char *const nodes[] = {"a", "b", "c", "d"};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        char out[300], name[32];
        snprintf(out, sizeof(out), "%s/%s", g_certdir, nodes[i]);
        snprintf(name, sizeof(name), "node-%s", nodes[i]);
        const char *mk[] = {"node", "--ca", ca, "--name", name, "--ip", "127.0.0.1",
                            "--out", out, NULL};
        if (certs(mk))
            return -1;
    }
    /* An operator: a certificate of the cluster CA that may inspect and never be a peer. */
    char ops[300], evil[300];
    snprintf(ops, sizeof(ops), "%s/ops", g_certdir);
    snprintf(evil, sizeof(evil), "%s/evil", g_certdir);
    const char *mkops[] = {"operator", "--ca", ca, "--name", "ops-alice", "--out", ops, NULL};
    const char *mkevil[] = {"node", "--ca", fca, "--name", "intruder", "--ip", "127.0.0.1",
                            "--out", evil, NULL};
    return certs(mkops) || certs(mkevil) ? -1 : 0;
}

int it_node_start(struct it_node *n, const char *name, const char *const *extra)
{
    char ca[320], cert[320], key[320];
    snprintf(ca, sizeof(ca), "%s/%s/ca.pem", g_certdir, name);
    snprintf(cert, sizeof(cert), "%s/%s/node.pem", g_certdir, name);
    snprintf(key, sizeof(key), "%s/%s/node-key.pem", g_certdir, name);
    const char *args[40] = {"--listen", "127.0.0.1:0", "--tls-ca", ca, "--tls-cert", cert,
                            "--tls-key", key, "--log-level", "debug"};
    int k = 10;
    for (int i = 0; extra && extra[i] && k < 39; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    memset(n, 0, sizeof(*n));
    snprintf(n->name, sizeof(n->name), "%s", name);
    if (hx_daemon_start(&n->d, args) < 0)
        return -1;
    int rc;
    struct tj *v = it_local_json(n, "peers", &rc);
    const char *l = v ? tj_str(v, "listen") : NULL;
    if (!l || rc != 0 || strlen(l) >= sizeof(n->addr)) {
        tl_log("FAIL: node %s: no listen address (exit %d)", name, rc);
        tj_free(v);
        return -1;
    }
    snprintf(n->addr, sizeof(n->addr), "%s", l);
    tj_free(v);
    return 0;
}

int it_remote(struct tl_ctl *r, const struct it_node *n, const char *const *tls,
              const char *const *args)
{
    const char *argv[40] = {"--remote", n->addr};
    int k = 2;
    const char *ops[] = {"--tls-ca", it_cert("ca/ca.pem"), "--tls-cert",
                         it_cert("ops/operator.pem"), "--tls-key",
                         it_cert("ops/operator-key.pem"), NULL};
    if (!tls)
        tls = ops;
    for (int i = 0; tls[i] && k < 30; i++)
        argv[k++] = tls[i];
    for (int i = 0; args[i] && k < 39; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    return tl_ctl_run(r, cu_out(), argv, 20);
}

static struct tj *parse(const struct tl_ctl *r, const char *what, const char *cmd)
{
    char why[200];
    struct tj *v = tj_parse(r->out, why, sizeof(why));
    if (!v || r->rc != 0)
        tl_log("%s --json %s: exit %d (%s): %s | stderr: %s", what, cmd, r->rc,
               v ? "parsed" : why, r->out, r->err);
    return v;
}

struct tj *it_remote_json(const struct it_node *n, const char *cmd, int *rc)
{
    static struct tl_ctl r;
    const char *args[] = {"--json", cmd, NULL};
    it_remote(&r, n, NULL, args);
    *rc = r.rc;
    return parse(&r, "nexarctl --remote", cmd);
}

struct tj *it_local_json(const struct it_node *n, const char *cmd, int *rc)
{
    static struct tl_ctl r;
    const char *args[] = {"-s", n->d.sock, "--json", cmd, NULL};
    tl_ctl_run(&r, cu_out(), args, 20);
    *rc = r.rc;
    return parse(&r, "nexarctl", cmd);
}

void it_h3_opts(struct nxt_h3c_opts *o, const struct it_node *n)
{
    memset(o, 0, sizeof(*o));
    o->addr = n->addr;
    o->ca = it_cert("ca/ca.pem");
    o->cert = it_cert("ops/operator.pem");
    o->key = it_cert("ops/operator-key.pem");
    o->timeout_ms = 10000;
}

static int skipped(const char *key, const char *const *skip)
{
    for (int i = 0; key && skip && skip[i]; i++)
        if (!strcmp(key, skip[i]))
            return 1;
    return 0;
}

static int same(const struct tj *a, const struct tj *b, const char *const *skip, char *path,
                size_t pl, char *where, size_t wl)
{
    size_t len = strlen(path);
    if (a->type != b->type)
        goto differ;
    switch (a->type) {
    case TJ_NULL: return 1;
    case TJ_BOOL: if (a->boolean != b->boolean) goto differ; return 1;
    case TJ_NUM:
    case TJ_STR: if (strcmp(a->str, b->str)) goto differ; return 1;
    default: break;
    }
    if (a->nkids != b->nkids)
        goto differ;
    for (size_t i = 0; i < a->nkids; i++) {
        const struct tj *x = a->kids[i], *y = b->kids[i];
        if (a->type == TJ_OBJ) {
            if (strcmp(x->key, y->key))
                goto differ;
            if (skipped(x->key, skip))
                continue;
            snprintf(path + len, pl - len, "%s%s", len ? "." : "", x->key);
        } else {
            snprintf(path + len, pl - len, "[%zu]", i);
        }
        if (!same(x, y, skip, path, pl, where, wl))
            return 0;
        path[len] = '\0';
    }
    return 1;
differ:
    snprintf(where, wl, "%s (%s vs %s)", len ? path : "(root)",
             a->type == TJ_STR || a->type == TJ_NUM ? a->str : "...",
             b->type == TJ_STR || b->type == TJ_NUM ? b->str : "...");
    return 0;
}

int it_same(const struct tj *a, const struct tj *b, const char *const *skip, char *where,
            size_t wl)
{
    char path[512] = "";
    where[0] = '\0';
    return same(a, b, skip, path, sizeof(path), where, wl);
}

int it_log_count(const struct it_node *n, const char *needle)
{
    FILE *f = fopen(n->d.log, "r");
    if (!f)
        return -1;
    static char buf[1 << 20];
    size_t got = fread(buf, 1, sizeof(buf) - 1, f);
    buf[got] = '\0';
    fclose(f);
    return cu_count(buf, needle);
}
