/*
 * remote.c - nexarctl --remote HOST:PORT: the reports of a daemon on another node, over
 * its HTTP/3 inspection endpoint (tools/common/h3c.h) instead of its Unix socket.
 *
 * The answer is the same CtlReply the socket gives, so main.c prints it with the same
 * code.  Only the way there differs, and so do the failures, mapped onto nexarctl's exit
 * statuses: 2 nothing answers (or the daemon is busy), 4 timeout, 8 the daemon does not
 * serve this report or HTTP/3 at all, 9 TLS refused either way, 10 anything malformed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "h3c.h"
#include "inspect.h"
#include "nexar.h"

#define DEFAULT_DIR "/etc/nexar/tls"

/* flag, else $env, else the default (def_if_exists: only when that file exists). */
static const char *pick(const char *flag, const char *env, const char *def, int def_if_exists)
{
    if (flag)
        return flag;
    const char *e = getenv(env);
    if (e)
        return e;
    if (def_if_exists && access(def, F_OK) != 0)
        return NULL;
    return def;
}

static void printable(char *out, size_t outlen, const uint8_t *in, size_t inlen)
{
    size_t j = 0;
    for (size_t i = 0; i < inlen && j + 1 < outlen; i++)
        out[j++] = in[i] >= 0x20 && in[i] < 0x7f ? (char)in[i] : ' ';
    while (j > 0 && out[j - 1] == ' ')
        j--;
    out[j] = '\0';
}

int nxc_remote_query(const struct nxc_remote *r, Nexar__CtlCommand command, int timeout_ms,
                     Nexar__CtlReply **out, char *err, size_t errlen)
{
    const struct nx_inspect_route *rt = nx_inspect_by_command(command);
    struct nxt_h3c_opts o = {
        .addr = r->addr,
        .ca = pick(r->ca, "NEXAR_TLS_CA", DEFAULT_DIR "/ca.pem", 0),
        .cert = pick(r->cert, "NEXAR_TLS_CERT", DEFAULT_DIR "/node.pem", 1),
        .timeout_ms = timeout_ms,
    };
    if (!rt) {
        snprintf(err, errlen, "this command has no remote form");
        return NEXAR_ERR_INVALID;
    }
    if (o.cert && *o.cert) {
        o.key = pick(r->key, "NEXAR_TLS_KEY", DEFAULT_DIR "/node-key.pem", 0);
        if (!o.key || !*o.key) {
            snprintf(err, errlen, "--tls-cert %s needs --tls-key", o.cert);
            return NEXAR_ERR_INVALID;
        }
    }
    struct nxt_h3c_resp resp;
    int rv = nxt_h3c_get(&o, rt->path, &resp, err, errlen);
    if (rv < 0) {
        if (rv == -NEXAR_ERR_PERMISSION && (!o.cert || !*o.cert))
            snprintf(err + strlen(err), errlen - strlen(err),
                     " (we presented no certificate: give --tls-cert and --tls-key)");
        nxt_h3c_resp_free(&resp);
        return -rv;
    }
    char text[200];
    static const uint8_t empty[1];
    const uint8_t *body = resp.body ? resp.body : empty; /* an empty CtlReply is 0 bytes */
    printable(text, sizeof(text), body, resp.len);
    if (resp.status == 200 && !strncmp(resp.ctype, "application/x-protobuf", 22)) {
        *out = nexar__ctl_reply__unpack(NULL, resp.len, body);
        rv = *out ? 0 : NEXAR_ERR_INTERNAL;
        if (!*out)
            snprintf(err, errlen, "the answer of %s to GET %s does not decode as a CtlReply",
                     r->addr, rt->path);
    } else if (resp.status == 404 || resp.status == 405) {
        snprintf(err, errlen, "%s does not serve GET %s (HTTP %d: %s)", r->addr, rt->path,
                 resp.status, text);
        rv = NEXAR_ERR_UNSUPPORTED;
    } else if (resp.status == 0) {
        snprintf(err, errlen, "%s reset the request GET %s (HTTP/3 error 0x%llx)", r->addr,
                 rt->path, (unsigned long long)resp.reset_code);
        rv = NEXAR_ERR_INTERNAL;
    } else {
        snprintf(err, errlen, "%s answered GET %s with HTTP %d (%s)%s%s", r->addr, rt->path,
                 resp.status, resp.ctype[0] ? resp.ctype : "no content-type",
                 text[0] ? ": " : "", text);
        rv = NEXAR_ERR_INTERNAL;
    }
    nxt_h3c_resp_free(&resp);
    return rv;
}
