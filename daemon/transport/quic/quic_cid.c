/*
 * quic_cid.c - the connection IDs we hand out, their reset tokens, and telling them from
 * noise.
 *
 * A packet for a connection we do not have earns a Stateless Reset (quic_server.c), so
 * that a peer whose connection we dropped or forgot in a restart learns it at once.  But
 * a Stateless Reset is itself a short-header packet with random bytes where the
 * connection ID would be: when two daemons had both dropped a connection, each answered
 * the other's reset with a reset, a byte shorter each time, until 22 bytes, and the
 * answers used up the rate limit (200 a second) that real resets share.
 *
 * So every ID we issue carries a tag: its last NX_QCID_TAG bytes are an HMAC, under a key
 * derived from the node key, of the bytes before them.  A packet whose ID has no valid
 * tag was never meant for us (a peer's reset, noise) and gets no answer.  The key
 * survives restarts as the reset secret does, so a peer still holding a connection we
 * forgot in a restart is still answered.
 */
#include <string.h>

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "quic_int.h"

#define NX_QCID_TAG 6 /* a random ID passes with odds of 2^-48 */

int nx_qcid_init(struct nx_quic *q)
{
    static const char label[] = "nexar connection id tag";
    return gnutls_hmac_fast(GNUTLS_MAC_SHA256, q->reset_secret, sizeof(q->reset_secret), label,
                            sizeof(label) - 1, q->cid_secret) == 0
               ? 0
               : -1;
}

static int tag(const struct nx_quic *q, const uint8_t *id, uint8_t out[NX_QCID_TAG])
{
    uint8_t mac[32];
    if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, q->cid_secret, sizeof(q->cid_secret), id,
                         NX_QSCID_LEN - NX_QCID_TAG, mac) != 0)
        return -1;
    memcpy(out, mac, NX_QCID_TAG);
    return 0;
}

int nx_qcid_new(const struct nx_quic *q, ngtcp2_cid *cid)
{
    cid->datalen = NX_QSCID_LEN;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, NX_QSCID_LEN - NX_QCID_TAG) != 0)
        return -1;
    return tag(q, cid->data, cid->data + NX_QSCID_LEN - NX_QCID_TAG);
}

int nx_qcid_ours(const struct nx_quic *q, const uint8_t *id, size_t len)
{
    uint8_t want[NX_QCID_TAG];
    if (len != NX_QSCID_LEN || tag(q, id, want) != 0)
        return 0;
    return gnutls_memcmp(want, id + NX_QSCID_LEN - NX_QCID_TAG, NX_QCID_TAG) == 0;
}

int nx_qcid_reset_token(const struct nx_quic *q, const ngtcp2_cid *cid, uint8_t *token)
{
    return ngtcp2_crypto_generate_stateless_reset_token(token, q->reset_secret,
                                                        sizeof(q->reset_secret), cid) == 0
               ? 0
               : -1;
}
