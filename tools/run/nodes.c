/*
 * nodes.c - nexar-run --nodes K: K simulated nodes on this machine.
 *
 * Each simulated node is a private nexard with its own directory and socket, a QUIC
 * endpoint on 127.0.0.1 at a port the kernel picks (listen 127.0.0.1:0; nexar-run asks
 * the daemon which one it got, so no port is ever guessed), and its own certificate
 * from one CA made for this run.  The CA's private key never leaves the run's
 * certificate directory, which goes away with the run.
 *
 * Certificates come from certtool (gnutls-bin): ECDSA P-256, valid for a day, for
 * 127.0.0.1, ::1 and localhost, usable as TLS client and server.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"
#include "frame.h"
#include "nexar.h"
#include "nexar.pb-c.h"
#include "run.h"
#include "util.h"

/* Runs certtool with args (NULL-terminated), its output to log.  0 or -1. */
static int certtool(const char *log, const char *const *args)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        const char *argv[16] = {"certtool"};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        execvp("certtool", (char *const *)argv);
        fprintf(stderr, "cannot run certtool: %s (install gnutls-bin)\n", strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rv = fputs(text, f) < 0 ? -1 : 0;
    if (fclose(f) != 0)
        rv = -1;
    return rv;
}

static int gen_key(const char *dir, const char *log, const char *name)
{
    char *key = nxt_xasprintf("%s/%s.key", dir, name);
    const char *args[] = {"--generate-privkey", "--key-type=ecdsa", "--curve=secp256r1",
                          "--outfile", key, NULL};
    int rv = certtool(log, args);
    free(key);
    return rv;
}

static int gen_ca(const char *dir, const char *log)
{
    char *tmpl = nxt_xasprintf("%s/ca.tmpl", dir);
    char *key = nxt_xasprintf("%s/ca.key", dir);
    char *pem = nxt_xasprintf("%s/ca.pem", dir);
    int rv = gen_key(dir, log, "ca");
    if (!rv)
        rv = write_file(tmpl, "cn = \"nexar-run cluster CA\"\nca\ncert_signing_key\n"
                              "expiration_days = 1\n");
    const char *args[] = {"--generate-self-signed", "--load-privkey", key, "--template", tmpl,
                          "--outfile", pem, NULL};
    if (!rv)
        rv = certtool(log, args);
    free(tmpl);
    free(key);
    free(pem);
    return rv;
}

static int gen_node(const char *dir, const char *log, int i)
{
    char *name = nxt_xasprintf("node%d", i);
    char *tmpl = nxt_xasprintf("%s/%s.tmpl", dir, name);
    char *key = nxt_xasprintf("%s/%s.key", dir, name);
    char *pem = nxt_xasprintf("%s/%s.pem", dir, name);
    char *ca = nxt_xasprintf("%s/ca.pem", dir);
    char *cakey = nxt_xasprintf("%s/ca.key", dir);
    char *text = nxt_xasprintf("cn = \"%s\"\ndns_name = \"localhost\"\n"
                               "ip_address = \"127.0.0.1\"\nip_address = \"::1\"\n"
                               "tls_www_server\ntls_www_client\nsigning_key\n"
                               "expiration_days = 1\n", name);
    int rv = gen_key(dir, log, name);
    if (!rv)
        rv = write_file(tmpl, text);
    const char *args[] = {"--generate-certificate", "--load-privkey", key,
                          "--load-ca-certificate", ca, "--load-ca-privkey", cakey,
                          "--template", tmpl, "--outfile", pem, NULL};
    if (!rv)
        rv = certtool(log, args);
    free(name);
    free(tmpl);
    free(key);
    free(pem);
    free(ca);
    free(cakey);
    free(text);
    return rv;
}

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
    char *log = nxt_xasprintf("%s/certtool.log", dir);
    int rv = gen_ca(dir, log);
    for (int i = 0; i < o->nodes && !rv; i++) {
        rv = gen_node(dir, log, i);
        d[i].tls_ca = nxt_xasprintf("%s/ca.pem", dir);
        d[i].tls_cert = nxt_xasprintf("%s/node%d.pem", dir, i);
        d[i].tls_key = nxt_xasprintf("%s/node%d.key", dir, i);
    }
    if (rv) {
        nxt_warn("cannot make the certificates of %d simulated nodes in %s (certtool; see %s)",
                 o->nodes, dir, log);
        free(log);
        return NXR_EXIT_OSERR;
    }
    if (o->verbose)
        nxt_warn("made a CA and %d node certificates in %s", o->nodes, dir);
    free(log);
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

static int rm_file(const char *dir, const char *name)
{
    char *p = nxt_xasprintf("%s/%s", dir, name);
    int rv = unlink(p);
    free(p);
    return rv;
}

void run_nodes_cleanup(const struct run_opts *o, char *certdir)
{
    if (!certdir)
        return;
    if (o->keep_daemon) {
        if (!o->quiet)
            nxt_warn("the simulated nodes' certificates stay in %s", certdir);
    } else {
        rm_file(certdir, "ca.pem");
        rm_file(certdir, "ca.key");
        rm_file(certdir, "ca.tmpl");
        rm_file(certdir, "certtool.log");
        for (int i = 0; i < o->nodes; i++) {
            static const char *const ext[] = {"pem", "key", "tmpl"};
            for (int k = 0; k < 3; k++) {
                char name[32];
                snprintf(name, sizeof(name), "node%d.%s", i, ext[k]);
                rm_file(certdir, name);
            }
        }
        if (rmdir(certdir) < 0 && errno != ENOENT)
            nxt_warn("cannot remove %s: %s", certdir, strerror(errno));
    }
    free(certdir);
}
