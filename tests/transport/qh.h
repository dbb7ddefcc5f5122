/* qh.h - a small harness for the QUIC transport tests and benchmark: test certificates,
 * endpoints in one loop, deterministic message contents. */
#ifndef NX_QH_H
#define NX_QH_H

#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>
#include <uv.h>

#include "transport.h"
#include "transport_quic.h"

extern int qh_failures;

#define QH_CHECK(cond)                                                                     \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            qh_failures++;                                                                 \
        }                                                                                  \
    } while (0)

/* Makes a temporary directory with ca.pem, node0..n-1.{pem,key}, foreign*.  Exits with a
 * message when the script (NX_GEN_CERTS, or tests/lib/gen-certs.sh) fails. */
const char *qh_certs(int n);
/* The same, with short.pem/.key: a node certificate that expires short_s seconds from now. */
const char *qh_certs_short(int n, int short_s);
void qh_certs_cleanup(void);
/* Path of a file in the certificate directory. */
const char *qh_path(const char *file);

/* A conf for node i (no certificate with i < 0) on listen: 2 s idle, 0.5 s keep-alive. */
void qh_conf(struct nx_quic_conf *c, const char *listen, int node);
/* An intruder: a certificate from another CA; it trusts the cluster CA or its own. */
void qh_conf_foreign(struct nx_quic_conf *c, const char *listen, int trust_cluster);

/* Runs the loop until *flag becomes nonzero or timeout_ms passes; returns *flag. */
int qh_run_until(uv_loop_t *loop, int (*done)(void *), void *arg, int timeout_ms);
/* Runs the loop for ms. */
void qh_run_for(uv_loop_t *loop, int ms);
/* Destroys and lets the handles close. */
void qh_destroy(uv_loop_t *loop, struct nx_transport *t);

double qh_now(void);

/* A UDP relay on 127.0.0.1 (qh_relay.c): A dials a_side as B's address; B sees A at
 * b_side.  drop (may be NULL) is asked about every datagram, from_a saying which way it
 * goes; nonzero drops it. */
struct qh_relay {
    int (*drop)(void *arg, int from_a, const uint8_t *data, size_t len);
    void *arg;
    /* zeroed by qh_relay_start from here on */
    int have_a;
    uint64_t dropped;
    char a_side[32], b_side[32];
    struct sockaddr_in a_addr, b_addr;
    uv_udp_t ua, ub;
    uint8_t buf[65536];
};
int qh_relay_start(uv_loop_t *loop, struct qh_relay *r, const char *b_addr);
/* Closes the sockets; run the loop once more before closing it. */
void qh_relay_stop(struct qh_relay *r);

/* Message i of a stream (channel, seq): its length and its bytes. */
size_t qh_msg_len(uint64_t channel, uint64_t seq, size_t max);
void qh_msg_fill(uint8_t *buf, size_t len, uint64_t channel, uint64_t seq);

#endif
