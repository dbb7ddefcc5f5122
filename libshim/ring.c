/*
 * ring.c - the rank's side of the submission and completion rings and doorbells.
 *
 * Submission: entries are written at the private tail and published in one
 * release store of sq_ctl.tail, followed by one write to the submission eventfd
 * unless the daemon is polling the ring (sq_ctl.wake, see shm_abi.h).
 * Completion: cq_ctl.tail is loaded with acquire order, each entry is copied out
 * and handled, then cq_ctl.head is stored with release order.  When the ring was
 * found full, the submission doorbell is rung after consuming, so that the daemon
 * flushes the completions it holds back.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

void nx_ring_attach(uint8_t *base, uint64_t bytes)
{
    const struct nx_shm_hdr *h = &nx_S.hdr;
    nx_S.seg = base;
    nx_S.seg_bytes = bytes;
    nx_S.sq_head = (uint32_t *)(void *)(base + h->sq_ctl_off + offsetof(struct nx_ring_ctl, head));
    nx_S.sq_tail = (uint32_t *)(void *)(base + h->sq_ctl_off + offsetof(struct nx_ring_ctl, tail));
    nx_S.cq_head = (uint32_t *)(void *)(base + h->cq_ctl_off + offsetof(struct nx_ring_ctl, head));
    nx_S.cq_tail = (uint32_t *)(void *)(base + h->cq_ctl_off + offsetof(struct nx_ring_ctl, tail));
    nx_S.sq_wake = (uint32_t *)(void *)(base + h->sq_ctl_off + offsetof(struct nx_ring_ctl, wake));
    nx_S.cq_wake = (uint32_t *)(void *)(base + h->cq_ctl_off + offsetof(struct nx_ring_ctl, wake));
    nx_S.sq = (struct nx_sqe *)(void *)(base + h->sq_off);
    nx_S.cq = (struct nx_cqe *)(void *)(base + h->cq_off);
    nx_S.err = (struct nx_err_entry *)(void *)(base + h->err_off);
    nx_S.arena = base + h->arena_off;
    /* The rings may already hold state (a daemon never reuses a segment, but be exact). */
    nx_S.sq_local_tail = nx_S.sq_published = __atomic_load_n(nx_S.sq_tail, __ATOMIC_ACQUIRE);
    nx_S.cq_local_head = __atomic_load_n(nx_S.cq_head, __ATOMIC_ACQUIRE);
}

uint32_t nx_ring_sq_space(void)
{
    uint32_t head = nx_load_acquire(nx_S.sq_head);
    uint32_t used = nx_S.sq_local_tail - head;
    if (used > nx_S.hdr.sq_entries) {
        /* nexard never takes what we did not put there: someone else moved our ring (a
         * forked child without the fork handler, say).  Waiting for space would be
         * forever. */
        char text[160];
        snprintf(text, sizeof(text),
                 "the submission ring is corrupt (nexard's head %u is past our tail %u, %u "
                 "entries)", head, nx_S.sq_local_tail, nx_S.hdr.sq_entries);
        nx_shim_die(NEXAR_ERR_INTERNAL, text);
        return 0;
    }
    if (used == nx_S.hdr.sq_entries)
        return 0;
    return nx_S.hdr.sq_entries - used;
}

void nx_ring_put(const struct nx_sqe *e)
{
    uint32_t pos = nx_S.sq_local_tail & (nx_S.hdr.sq_entries - 1);
    memcpy(&nx_S.sq[pos], e, sizeof(*e));
    nx_S.sq_local_tail++;
}

void nx_ring_doorbell(void)
{
    uint64_t one = 1;
    ssize_t n;
    do
        n = write(nx_S.sq_efd, &one, sizeof(one));
    while (n < 0 && errno == EINTR);
    /* EAGAIN means the counter is saturated: the daemon has a wakeup pending anyway. */
}

void nx_ring_publish(void)
{
    if (nx_S.sq_published == nx_S.sq_local_tail)
        return;
    nx_store_release(nx_S.sq_tail, nx_S.sq_local_tail);
    nx_S.sq_published = nx_S.sq_local_tail;
    if (nx_wake_needed(nx_S.sq_wake))
        nx_ring_doorbell();
}

bool nx_ring_cq_pending(uint32_t head)
{
    return nx_load_acquire(nx_S.cq_tail) != head;
}

uint32_t nx_ring_reap(void)
{
    uint32_t total = 0;
    bool was_full = false;
    for (;;) {
        uint32_t tail = nx_load_acquire(nx_S.cq_tail);
        uint32_t head = nx_S.cq_local_head;
        uint32_t n = tail - head;
        if (n == 0)
            break;
        if (n > nx_S.hdr.cq_entries) {
            /* The daemon never does this; refuse to read garbage. */
            char text[128];
            snprintf(text, sizeof(text),
                     "nexard's completion ring is corrupt (head %u, tail %u, %u entries)", head,
                     tail, nx_S.hdr.cq_entries);
            nx_shim_die(NEXAR_ERR_INTERNAL, text);
            return total;
        }
        if (n == nx_S.hdr.cq_entries)
            was_full = true;
        for (uint32_t i = 0; i < n; i++) {
            struct nx_cqe e;
            memcpy(&e, &nx_S.cq[(head + i) & (nx_S.hdr.cq_entries - 1)], sizeof(e));
            nx_req_on_cqe(&e);
            if (nx_S.dead)
                return total + i + 1;
        }
        nx_S.cq_local_head = tail;
        nx_store_release(nx_S.cq_head, tail);
        total += n;
    }
    if (was_full)
        nx_ring_doorbell();
    return total;
}

void nx_ring_err_text(const struct nx_cqe *e, char *buf, size_t len)
{
    buf[0] = '\0';
    if (e->err_seq == NX_NO_ERR_TEXT || nx_S.hdr.err_entries == 0 || len == 0)
        return;
    struct nx_err_entry *ent = &nx_S.err[e->err_seq % nx_S.hdr.err_entries];
    if (nx_load_acquire(&ent->seq) != e->err_seq)
        return;
    size_t max = sizeof(ent->text) < len ? sizeof(ent->text) : len;
    memcpy(buf, ent->text, max);
    buf[max - 1] = '\0';
    /* Overwritten while copying: the text may be torn, drop it. */
    if (__atomic_load_n(&ent->seq, __ATOMIC_ACQUIRE) != e->err_seq)
        buf[0] = '\0';
}
