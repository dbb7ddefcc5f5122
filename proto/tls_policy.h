/*
 * tls_policy.h - the TLS a nexar QUIC connection speaks, for nexard and for nexarctl's
 * inspection client alike: TLS 1.3 only, AES-128-GCM first (the fastest AEAD with
 * AES-NI), no middlebox compatibility mode (QUIC has no middleboxes to fool).
 */
#ifndef NX_TLS_POLICY_H
#define NX_TLS_POLICY_H

/* A GnuTLS priority string. */
#define NX_TLS_PRIORITY                                                                    \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"                 \
    "+CHACHA20-POLY1305:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:"       \
    "%DISABLE_TLS13_COMPAT_MODE"

#endif
