/*
 * spin_pause.h - when the busy polls on both sides of the rings (nexard's loop, a rank's
 * wait) stop for a while: another program holds the core.
 *
 * Both spin with sched_yield(), which returns within microseconds while the cores are
 * nexar's: the ranks and nexard hand each other the core.  Behind a program that does not
 * yield it returns after that program's whole slice, 3-8 ms on a 6.18 kernel, and a spin
 * then only hands it the core slice after slice while the completion or packet it waits
 * for queues behind; it also keeps the other core busy, so the scheduler never moves the
 * spinner there.  Beside one busy loop an 8 B all_reduce across two daemons took
 * 1.0-2.3 ms so, 0.04-0.17 ms with these pauses (docs/performance.md).  So a yield that took
 * NX_YIELD_LONG_NS or more stops the spinning for a pause: the poller sleeps on its
 * doorbell, an event wakes it, and an idle core can take it.  Then it spins again and finds
 * out again.  A pause that finds the program still there is twice the last, up to
 * NX_PAUSE_MAX_NS (each look costs one of its slices); a short burst of our own (a rank
 * filling its buffers) costs one short pause.
 *
 * Only while waiting on other nodes: on one node a long yield is mostly a rank of the job
 * copying a large block, the spin between such ops is what makes the next ones fast, and
 * a busy program beside a one-node job cost small ops little (performance.md).
 */
#ifndef NX_SPIN_PAUSE_H
#define NX_SPIN_PAUSE_H

#include <stdbool.h>
#include <stdint.h>

#define NX_YIELD_LONG_NS 1000000ull   /* 1 ms: no hand-off between nexar's own takes it */
#define NX_PAUSE_MIN_NS 5000000ull    /* 5 ms */
#define NX_PAUSE_MAX_NS 320000000ull  /* 320 ms */

struct nx_spin_pause {
    uint64_t until_ns; /* no spinning before this */
    uint64_t len_ns;   /* the last pause */
};

static inline bool nx_yield_long(uint64_t took_ns)
{
    return took_ns >= NX_YIELD_LONG_NS;
}

static inline bool nx_spin_paused(const struct nx_spin_pause *p, uint64_t now_ns)
{
    return now_ns < p->until_ns;
}

/* After a yield that took took_ns, at now_ns: true when the spinning must stop now. */
static inline bool nx_spin_pause_after_yield(struct nx_spin_pause *p, uint64_t now_ns,
                                             uint64_t took_ns)
{
    if (!nx_yield_long(took_ns))
        return false;
    bool again = p->len_ns && now_ns < p->until_ns + p->len_ns;
    p->len_ns = !again ? NX_PAUSE_MIN_NS
                : p->len_ns >= NX_PAUSE_MAX_NS / 2 ? NX_PAUSE_MAX_NS
                                                   : 2 * p->len_ns;
    p->until_ns = now_ns + p->len_ns;
    return true;
}

#endif
