/* stream_copy.h - copies into a staging slot that bypass this CPU's caches. */
#ifndef NX_STREAM_COPY_H
#define NX_STREAM_COPY_H

#include <stddef.h>

/* memcpy with streaming stores (x86-64; elsewhere memcpy itself), fenced: what it wrote
 * is visible to other CPUs before anything this thread stores after it returns.  No
 * overlap; any alignment and length. */
void nx_copy_stream(void *dst, const void *src, size_t n);

#endif /* NX_STREAM_COPY_H */
