/*
 * cluster_rawpeer.c - a peer that should not get in: it dials a daemon over QUIC with
 * the cluster CA (so it accepts the daemon) but without a certificate of its own, or with
 * one from another CA, and tries to register ranks of a job there.  The daemon must
 * refuse the handshake (mutual TLS), so nothing is registered.
 *
 *   itest_cluster_rawpeer ADDR CA_PEM [CERT_PEM KEY_PEM]
 *
 * Prints the transport's verdict; exits 0 when the peer was lost with a reason that
 * names TLS or the certificate, 3 when the connection came up (the daemon let us in),
 * 4 when nothing happened within 10 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#include "peer_msg.h"
#include "transport_quic.h"

static int verdict = 4;
static char why[256];
static uv_loop_t *loop;

static void on_message(void *arg, struct nx_tpeer *p, uint64_t ch, const void *d, size_t n)
{
}

static void on_peer(void *arg, struct nx_tpeer *p, enum nx_tpeer_state st, const char *reason)
{
    if (st == NX_TPEER_UP) {
        verdict = 3;
        snprintf(why, sizeof(why), "the daemon accepted a peer without a certificate");
    } else if (st == NX_TPEER_LOST) {
        snprintf(why, sizeof(why), "%s", reason ? reason : "");
        verdict = strcasestr(why, "TLS") || strcasestr(why, "certificate") ? 0 : 5;
    }
    uv_stop(loop);
}

static void on_timer(uv_timer_t *t)
{
    uv_stop(loop);
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: itest_cluster_rawpeer ADDR CA_PEM [CERT_PEM KEY_PEM]\n");
        return 1;
    }
    loop = uv_default_loop();
    struct nx_quic_conf qc;
    nx_quic_conf_defaults(&qc);
    qc.listen = "127.0.0.1:0";
    qc.tls_ca = argv[2];
    qc.test_lax_cert = 1;
    if (argc == 5) {
        qc.tls_cert = argv[3];
        qc.tls_key = argv[4];
    }
    qc.idle_timeout_ms = 3000;
    struct nx_transport_cb cb = {.on_message = on_message, .on_peer = on_peer};
    char err[256];
    struct nx_transport *t = nx_quic_new(loop, &qc, &cb, err, sizeof(err));
    if (!t) {
        fprintf(stderr, "rawpeer: %s\n", err);
        return 1;
    }
    struct nx_tpeer *p = t->ops->peer(t, argv[1], err, sizeof(err));
    if (!p) {
        fprintf(stderr, "rawpeer: %s\n", err);
        return 1;
    }
    uint32_t ranks[] = {0, 1};
    Nexar__PeerRegister g = NEXAR__PEER_REGISTER__INIT;
    g.job = "intruder";
    g.key = 42;
    g.world_size = 2;
    g.ranks = ranks;
    g.n_ranks = 2;
    g.addr = t->local_addr;
    g.version = NX_PEER_VERSION;
    Nexar__PeerMsg m = NEXAR__PEER_MSG__INIT;
    m.body_case = NEXAR__PEER_MSG__BODY_REGISTER;
    m.register_ = &g;
    size_t len;
    uint8_t *buf = nx_peer_msg_pack(&m, &len);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    t->ops->send(p, 0, &iov, 1, 0);
    free(buf);
    uv_timer_t timer;
    uv_timer_init(loop, &timer);
    uv_timer_start(&timer, on_timer, 10000, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&timer, NULL);
    t->ops->destroy(t);
    uv_run(loop, UV_RUN_NOWAIT);
    printf("%s\n", verdict == 4 ? "nothing happened within 10 s" : why);
    return verdict;
}
