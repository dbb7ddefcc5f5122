/* segment.c - see segment.h. */
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int nx_segment_create(struct nx_segment *s, const struct nx_shm_geom *g, const char *name)
{
    int rv;
    memset(s, 0, sizeof(*s));
    s->memfd = -1;
    uint64_t bytes = nx_shm_layout(g, &s->hdr);
    if (bytes == 0)
        return -EINVAL;

    s->memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s->memfd < 0)
        return -errno;
    if (ftruncate(s->memfd, (off_t)bytes) < 0)
        goto fail_errno;
    /* Sealed before the client ever sees the fd: it can neither shrink the file under
     * our mapping (SIGBUS) nor grow it, and cannot lift the seals. */
    if (fcntl(s->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto fail_errno;
    s->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
    if (s->base == MAP_FAILED) {
        s->base = NULL;
        goto fail_errno;
    }
    s->bytes = bytes;
    memcpy(s->base, &s->hdr, sizeof(s->hdr));
    s->sq_ctl = (struct nx_ring_ctl *)(s->base + s->hdr.sq_ctl_off);
    s->cq_ctl = (struct nx_ring_ctl *)(s->base + s->hdr.cq_ctl_off);
    s->sq = (struct nx_sqe *)(s->base + s->hdr.sq_off);
    s->cq = (struct nx_cqe *)(s->base + s->hdr.cq_off);
    s->err = (struct nx_err_entry *)(s->base + s->hdr.err_off);
    s->arena = s->base + s->hdr.arena_off;
    for (uint32_t i = 0; i < s->hdr.err_entries; i++)
        s->err[i].seq = NX_NO_ERR_TEXT;
    /* Both consumers count as asleep until they say otherwise. */
    s->sq_ctl->wake = 1;
    s->cq_ctl->wake = 1;
    return 0;

fail_errno:
    rv = -errno;
    close(s->memfd);
    s->memfd = -1;
    return rv;
}

void nx_segment_destroy(struct nx_segment *s)
{
    if (s->base)
        munmap(s->base, s->bytes);
    if (s->memfd >= 0)
        close(s->memfd);
    memset(s, 0, sizeof(*s));
    s->memfd = -1;
}
