/*
 * test_cert_check.c - proto/cert_check.c on certificates made by certtool (gen-certs.sh):
 * which side and role each may take, and the sentence for what it lacks.  This is the
 * check a peer meets whatever its TLS stack does: GnuTLS will not sign with a key whose
 * certificate lacks digitalSignature, so "nodigsig" and "ca" never reach it over the wire
 * in test_quic_pair purpose, but an attacker's stack would send them.
 *   NX_GEN_CERTS=tests/lib/gen-certs.sh test_cert_check
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cert_check.h"

static int fails;
static char dir[64];

static gnutls_x509_crt_t load(const char *name)
{
    char path[128];
    gnutls_datum_t d;
    gnutls_x509_crt_t crt;
    snprintf(path, sizeof(path), "%s/%s.pem", dir, name);
    if (gnutls_load_file(path, &d) < 0 || gnutls_x509_crt_init(&crt) < 0 ||
        gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM) < 0) {
        fprintf(stderr, "cannot load %s\n", path);
        exit(1);
    }
    gnutls_free(d.data);
    return crt;
}

/* side: 1 server, 0 client, -1 both; want: the roles allowed; expect: NULL for accepted,
 * else the sentence (exact). */
static void expect(const char *name, int side, unsigned want, const char *sentence)
{
    gnutls_x509_crt_t crt = load(name);
    char why[160] = "";
    int rv = nx_cert_check(crt, side, want, why, sizeof(why));
    gnutls_x509_crt_deinit(crt);
    const char *sd = side > 0 ? "server" : side == 0 ? "client" : "both";
    int ok = sentence ? rv == -1 && !strcmp(why, sentence) : rv == 0;
    printf("%s %-9s as %-6s wanting %-16s: %s%s%s\n", ok ? "ok  " : "FAIL", name, sd,
           nx_cert_roles_text(want), rv ? "refused: " : "accepted", why,
           ok || !sentence ? "" : " (expected a different sentence)");
    if (!ok) {
        if (sentence)
            printf("      expected: %s\n", sentence);
        fails++;
    }
}

int main(void)
{
    const char *script = getenv("NX_GEN_CERTS");
    char cmd[256];
    snprintf(dir, sizeof(dir), "/tmp/nexar-certcheck-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    snprintf(cmd, sizeof(cmd), "sh %s %s 1 >/dev/null 2>&1",
             script ? script : "tests/lib/gen-certs.sh", dir);
    if (system(cmd) != 0) {
        printf("SKIP: gen-certs.sh failed (certtool from gnutls-bin missing?)\n");
        return 77;
    }
    const unsigned node = NX_CERT_NODE, any = NX_CERT_NODE | NX_CERT_OPERATOR;
    const char *srv = "certificate is not for a TLS server (its extended key usage lacks "
                      "serverAuth)";
    const char *cli = "certificate is not for a TLS client (its extended key usage lacks "
                      "clientAuth)";
    const char *ca = "certificate is a CA certificate (CA:TRUE); a CA signs, it does not "
                     "connect";
    const char *digsig = "certificate key usage lacks digitalSignature";
    const char *norole = "certificate has no nexar role (subject OU \"nexar node\" or \"nexar "
                         "operator\"); make it with nexarctl certs";

    expect("node0", -1, node, NULL);
    expect("node0", 1, node, NULL);
    expect("node0", 0, any, NULL); /* a node may inspect */
    expect("srvonly", 1, node, NULL);
    expect("srvonly", 0, node, cli);
    expect("srvonly", -1, node, cli);
    expect("clionly", 0, node, NULL);
    expect("clionly", 1, node, srv);
    expect("codesign", 1, node, srv);
    expect("codesign", 0, node, cli);
    expect("noeku", 1, node, "certificate has no extended key usage (needs TLS server)");
    expect("noeku", 0, node, "certificate has no extended key usage (needs TLS client)");
    expect("nodigsig", 1, node, digsig);
    expect("nodigsig", 0, node, digsig);
    expect("norole", 0, node, norole);
    expect("norole", 0, any, norole);
    expect("ca", 1, node, ca);
    expect("ca", 0, any, ca);
    expect("operator", 0, any, NULL); /* an operator inspects */
    expect("operator", 0, node,
           "certificate is of role operator; this connection needs a node certificate");
    expect("operator", 1, node, srv);
    expect("foreign", -1, node, NULL); /* purpose only: the chain is GnuTLS's to refuse */

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%s\n", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
