/* segment.h - one client's shared-memory segment, daemon side.  The header fields the
 * daemon relies on are kept in its private copy (hdr), never read back from shm. */
#ifndef NX_SEGMENT_H
#define NX_SEGMENT_H

#include <stdint.h>

#include "shm_abi.h"

struct nx_segment {
    int memfd; /* -1 once passed and closed */
    uint8_t *base;
    uint64_t bytes;
    struct nx_shm_hdr hdr;
    struct nx_ring_ctl *sq_ctl, *cq_ctl;
    struct nx_sqe *sq;
    struct nx_cqe *cq;
    struct nx_err_entry *err;
    uint8_t *arena;
};

/* Creates a sealed memfd of geometry g, maps it and writes the header.  0 or -errno. */
int nx_segment_create(struct nx_segment *s, const struct nx_shm_geom *g, const char *name);
void nx_segment_destroy(struct nx_segment *s);

#endif
