/*
 * limits_bench.c - the physical limits compare-mpi sets nexar's figures against, measured
 * in the same run on the same machine: one thread's memcpy, and one core's AES-128-GCM
 * (GnuTLS, the cipher and library QUIC packet protection uses between daemons).
 *
 * memcpy: 64 MiB buffers, so that memory, not cache, answers.  AES-GCM: encryption of
 * 16 KiB records (QUIC packets are up to 64 KiB on loopback, 1452 B on a wire; GnuTLS's
 * rate is flat above a few KiB) with a 16-byte tag.  Each is the best of `runs` runs of
 * at least 0.2 s: other work on a shared machine only ever slows a run down.
 *
 * Usage: limits_bench [runs]   (default 5).  Prints
 *   limits memcpy_gbps=X aes128gcm_gbps=Y
 * with 10^9 bytes per GB (bytes copied, resp. plaintext bytes encrypted).
 */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double memcpy_gbps(int runs)
{
    size_t n = 64u << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        fprintf(stderr, "limits_bench: out of memory\n");
        exit(1);
    }
    memset(a, 1, n);
    memset(b, 2, n); /* faulted in before timing */
    double best = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = now(), t;
        size_t bytes = 0;
        do {
            memcpy(b, a, n);
            a[bytes % n] ^= b[(bytes + 1) % n]; /* keeps the copies live */
            bytes += n;
        } while ((t = now() - t0) < 0.2);
        if (bytes / t / 1e9 > best)
            best = bytes / t / 1e9;
    }
    free(a);
    free(b);
    return best;
}

static double aes_gbps(int runs)
{
    enum { REC = 16384, TAG = 16 };
    unsigned char key[16] = {1}, nonce[12] = {0};
    static unsigned char in[REC], out[REC + TAG];
    gnutls_datum_t k = {key, sizeof(key)};
    gnutls_aead_cipher_hd_t h;
    int rv = gnutls_aead_cipher_init(&h, GNUTLS_CIPHER_AES_128_GCM, &k);
    if (rv < 0) {
        fprintf(stderr, "limits_bench: AES-128-GCM: %s\n", gnutls_strerror(rv));
        exit(1);
    }
    memset(in, 7, sizeof(in));
    double best = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = now(), t;
        size_t bytes = 0;
        do {
            size_t olen = sizeof(out);
            nonce[0]++; /* a fresh nonce per record, as QUIC's packet numbers give */
            if (gnutls_aead_cipher_encrypt(h, nonce, sizeof(nonce), NULL, 0, TAG, in, REC, out,
                                           &olen) < 0) {
                fprintf(stderr, "limits_bench: AES-128-GCM encrypt failed\n");
                exit(1);
            }
            bytes += REC;
        } while ((bytes & ((1u << 24) - 1)) || (t = now() - t0) < 0.2);
        if (bytes / t / 1e9 > best)
            best = bytes / t / 1e9;
    }
    gnutls_aead_cipher_deinit(h);
    return best;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: limits_bench [runs]   (1 to 1000, default 5)\n");
        return 64;
    }
    double m = memcpy_gbps(runs);
    double a = aes_gbps(runs);
    printf("limits memcpy_gbps=%.3f aes128gcm_gbps=%.3f\n", m, a);
    return 0;
}
