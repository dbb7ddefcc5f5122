/*
 * tcp_bench_io.h - the two ends of one tcp_bench transfer over a connected TCP
 * socket, plain or GnuTLS TLS 1.3, and the pattern they agree on.
 */
#ifndef TB_IO_H
#define TB_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tb_params {
    uint64_t bytes;      /* to move */
    size_t chunk;        /* bytes per write (and per check), a multiple of 8 */
    bool verify;         /* fill and check the pattern */
    bool tls;            /* TLS 1.3, AES-128-GCM, both ends authenticated */
    const char *certdir; /* ca.pem, node.pem, node-key.pem; with tls */
};

struct tb_result {
    double seconds;      /* first byte sent .. acknowledgement received */
    double handshake_ms; /* TLS handshake, on the sender */
    double cpu_send_s, cpu_recv_s;
    char cipher[64];     /* "TLS_AES_128_GCM_SHA256" */
};

/* The sender (TLS client): sends p->bytes and waits for the one-byte acknowledgement.
 * 0, or -1 with a message on stderr. */
int tb_send(int fd, const struct tb_params *p, struct tb_result *r);

/* The receiver (TLS server): reads and checks p->bytes, then acknowledges.  0 when
 * every byte arrived and matched, else -1 with a message on stderr. */
int tb_receive(int fd, const struct tb_params *p);

#endif /* TB_IO_H */
