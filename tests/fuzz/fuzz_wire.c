/*
 * fuzz_wire.c - libFuzzer target for the daemon-to-daemon message decoder (proto/wire.c).
 *
 * Input: one transport message as a peer daemon could send it.  A message that decodes
 * must satisfy everything a receiver relies on (body inside the input, the exact payload
 * length, offset + length not wrapping), and encoding its header again must give back
 * the input's first bytes: the codec has one representation per header.  A message that
 * is refused must leave the output zeroed with a reason.  Its head alone (as a streamed
 * receive offers it) must be judged the same, without a read past the head.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "fuzz.h"

/* nx_wire_decode_head on the first have bytes, in a buffer of exactly that many, gives
 * what nx_wire_decode gave on all of them, or "cut short" when too few are there. */
static void check_head(const uint8_t *data, size_t size, size_t have, int rv,
                       const struct nx_wire_msg *m, const char *why)
{
    uint8_t *head = malloc(have ? have : 1);
    if (!head)
        return;
    memcpy(head, data, have);
    struct nx_wire_msg h;
    const char *hwhy = NULL;
    int hrv = nx_wire_decode_head(head, have, size, &h, &hwhy);
    if (have < size && have < NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES) {
        CHECK(hrv == -EBADMSG && !strcmp(hwhy, "message head cut short"));
    } else {
        CHECK(hrv == rv);
        CHECK(rv != 0 ? !strcmp(hwhy, why)
                      : hwhy == NULL && h.type == m->type && h.flags == m->flags &&
                            h.body_len == m->body_len && !memcmp(&h.hdr, &m->hdr, sizeof(h.hdr)) &&
                            !memcmp(&h.p2p, &m->p2p, sizeof(h.p2p)));
    }
    free(head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, so that ASan catches a read one byte past the message. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);

    struct nx_wire_msg m;
    const char *why = NULL;
    int rv = nx_wire_decode(buf, size, &m, &why);
    for (size_t have = 0; have <= size && have <= NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES + 2;
         have++)
        check_head(data, size, have, rv, &m, why);
    if (rv != 0) {
        CHECK(rv == -EBADMSG);
        CHECK(why != NULL && why[0] != '\0');
        CHECK(m.body == NULL && m.body_len == 0 && m.type == 0 && m.flags == 0);
        free(buf);
        return 0;
    }
    CHECK(why == NULL);
    CHECK(m.body >= buf && m.body_len <= size && m.body + m.body_len == buf + size);

    uint8_t again[NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES];
    size_t n;
    switch (m.type) {
    case NX_WIRE_CTL:
        CHECK(m.flags == 0);
        CHECK(m.body_len > 0);
        n = nx_wire_put_ctl(again);
        CHECK(n == NX_WIRE_ENV_BYTES);
        break;
    case NX_WIRE_DATA:
    case NX_WIRE_TEST:
        CHECK((m.flags & ~NX_WIRE_FLAGS_KNOWN) == 0);
        CHECK(m.type == NX_WIRE_DATA || m.flags == 0);
        CHECK(m.body_len == m.hdr.length);
        CHECK(m.hdr.offset + m.hdr.length >= m.hdr.offset);
        n = nx_wire_put_data(again, m.type, m.flags, &m.hdr);
        CHECK(n == NX_WIRE_ENV_BYTES + NX_DATA_HDR_BYTES);
        break;
    case NX_WIRE_P2P: {
        static const uint8_t es[] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};
        const struct nx_p2p_hdr *h = &m.p2p;
        CHECK((m.flags & ~NX_WIRE_P2P_FLAGS_KNOWN) == 0);
        CHECK(m.body_len == h->length);
        CHECK(h->dtype < sizeof(es) && h->count <= UINT64_MAX / es[h->dtype]);
        CHECK(h->offset <= h->count * es[h->dtype]);
        CHECK(h->length <= h->count * es[h->dtype] - h->offset);
        CHECK(!(m.flags & NX_WIRE_F_ACK) || h->length == 0);
        CHECK(h->src != h->dst);
        n = nx_wire_put_p2p(again, m.flags, h);
        CHECK(n == NX_WIRE_ENV_BYTES + NX_P2P_HDR_BYTES);
        break;
    }
    default:
        CHECK(!"decoded an unknown type");
        return 0;
    }
    CHECK(m.body == buf + n);
    CHECK(memcmp(again, buf, n) == 0);
    /* Touch every payload byte: the whole body must lie inside the input. */
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < m.body_len; i++)
        sum = (uint8_t)(sum + m.body[i]);
    (void)sum;
    free(buf);
    return 0;
}
