/*
 * nodes.c - nexar-run --nodes K: K simulated nodes on this machine.
 *
 * Each simulated node is a private nexard with its own directory and socket, a QUIC
 * endpoint on 127.0.0.1 at a port the kernel picks (listen 127.0.0.1:0; nexar-run asks
 * the daemon which one it got, so no port is ever guessed), and its own certificate
 * from one CA made for this run.  The CA's private key never leaves the run's
 * certificate directory, which goes away with the run.
 *
 * Certificates come from tools/common/certs.h (GnuTLS): a CA valid for a day, and per
 * node a certificate for 127.0.0.1, ::1 and localhost, usable as TLS client and server:
 *   CERTDIR/ca/{ca.pem,ca-key.pem}   CERTDIR/node<i>/{node.pem,node-key.pem,ca.pem}
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "certs.h"
#include "conn.h"
#include "frame.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "run.h"
#include "util.h"

#define NXR_CERT_DAYS 365

int run_nodes_certs(const struct run_opts *o, struct run_daemon *d, char **certdir)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = nxt_xasprintf("%s/nexar-run-certs.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        nxt_warn("mkdtemp %s: %s", dir, strerror(errno));
        free(dir);
        return NXR_EXIT_OSERR;
    }
    *certdir = dir;
    char err[512];
    struct nxt_certs_result res;
    char *cadir = nxt_xasprintf("%s/ca", dir);
    /* Throwaway, removed when the run ends: a proof that outlasts any run.  (A day's ended
     * runs longer than that, and made every daemon warn of its end at start.) */
    struct nxt_ca_req ca = {.out_dir = cadir, .name = "nexar-run cluster CA",
                            .days = NXR_CERT_DAYS};
    int rv = nxt_certs_make_ca(&ca, &res, err, sizeof(err));
    static const char *const dns[] = {"localhost"};
    static const char *const ips[] = {"127.0.0.1", "::1"};
    for (int i = 0; i < o->nodes && rv == 0; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node%d", i);
        char *ndir = nxt_xasprintf("%s/%s", dir, name);
        struct nxt_node_req nr = {.ca_dir = cadir, .out_dir = ndir, .name = name,
                                  .dns = dns, .ndns = 1, .ips = ips, .nips = 2,
                                  .days = NXR_CERT_DAYS};
        rv = nxt_certs_make_node(&nr, &res, err, sizeof(err));
        d[i].tls_ca = nxt_xasprintf("%s/%s", ndir, NXT_CERTS_CA_CERT);
        d[i].tls_cert = nxt_xasprintf("%s/%s", ndir, NXT_CERTS_NODE_CERT);
        d[i].tls_key = nxt_xasprintf("%s/%s", ndir, NXT_CERTS_NODE_KEY);
        free(ndir);
    }
    free(cadir);
    if (rv) {
        nxt_warn("cannot make the certificates of %d simulated nodes in %s: %s", o->nodes, dir,
                 err);
        return NXR_EXIT_OSERR;
    }
    if (o->verbose)
        nxt_warn("made a CA and %d node certificates in %s", o->nodes, dir);
    return 0;
}

int run_nodes_address(struct run_daemon *d)
{
    char err[256];
    int fd = nxt_connect(d->socket, NEXAR__CLIENT_KIND__CLIENT_CTL, 2000, NULL, err, sizeof(err));
    if (fd < 0) {
        nxt_warn("%s", err);
        return NXR_EXIT_NO_DAEMON;
    }
    Nexar__CtlRequest req = NEXAR__CTL_REQUEST__INIT;
    req.command = NEXAR__CTL_COMMAND__CTL_PEERS;
    uint8_t buf[16];
    size_t n = nexar__ctl_request__pack(&req, buf);
    uint16_t type;
    uint8_t *payload = NULL;
    uint32_t len;
    int rv = nxt_request(fd, NX_MSG_CTL, buf, (uint32_t)n, 5000, &type, &payload, &len, err,
                         sizeof(err));
    close(fd);
    Nexar__CtlReply *rep = NULL;
    if (rv == 0 && type == NX_MSG_CTL_REPLY)
        rep = nexar__ctl_reply__unpack(NULL, len, payload);
    free(payload);
    if (!rep || rep->status || !rep->listen || !*rep->listen) {
        nxt_warn("the private nexard at %s does not say its network address%s%s", d->socket,
                 rv ? ": " : "", rv ? err : "");
        if (rep)
            nexar__ctl_reply__free_unpacked(rep, NULL);
        return NXR_EXIT_NO_DAEMON;
    }
    d->addr = nxt_xstrdup(rep->listen);
    nexar__ctl_reply__free_unpacked(rep, NULL);
    return 0;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
        nxt_warn("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

void run_nodes_cleanup(const struct run_opts *o, char *certdir)
{
    if (!certdir)
        return;
    if (o->keep_daemon) {
        if (!o->quiet)
            nxt_warn("the simulated nodes' certificates stay in %s", certdir);
    } else {
        /* FTW_PHYS: never follow a link out of our own directory. */
        nftw(certdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    }
    free(certdir);
}
