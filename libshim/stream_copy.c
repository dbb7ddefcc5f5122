/*
 * stream_copy.c - copies into a staging slot that bypass this CPU's caches.
 *
 * On one node the ranks of an op write their slots at once and then read each other's
 * (or nexard reads them).  An ordinary store first reads the line it writes, and a slot's
 * lines were last read by another process, on another CPU: each store of a large copy
 * costs a read and an invalidation elsewhere before its write.  Streaming stores write
 * whole lines without reading them.  Measured on a 2-core VM (docs/performance.md), a
 * copy-in this way made the one-node ops that move data, and reduce_scatter, 1.1-1.9 times
 * faster at 2-32 MiB; request.c says which ops use it, and NEXAR_STREAM_COPY=0 turns it off.
 */
#include "stream_copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>

void nx_copy_stream(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16u - ((uintptr_t)d & 15u)) & 15u;
    if (n < head + 64u) {
        memcpy(d, s, n);
        return;
    }
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64u; n -= 64u, d += 64u, s += 64u) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
        _mm_stream_si128((__m128i *)(void *)d, a);
        _mm_stream_si128((__m128i *)(void *)(d + 16), b);
        _mm_stream_si128((__m128i *)(void *)(d + 32), c);
        _mm_stream_si128((__m128i *)(void *)(d + 48), e);
    }
    memcpy(d, s, n);
    /* Streaming stores are not ordered by the release that publishes the descriptor:
     * nexard and the peers must see the whole chunk once they see it submitted. */
    _mm_sfence();
}

#else

void nx_copy_stream(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

#endif
