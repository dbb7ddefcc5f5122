/*
 * test_spin_pause.c - proto/spin_pause.h: when the busy polls of nexard and the ranks stop.
 *
 * The policy against a scripted clock (exact pause lengths), then the assumption it rests
 * on against this kernel: beside a busy loop on the same CPU, sched_yield() now and then
 * comes back only after that loop's slice, at least NX_YIELD_LONG_NS later.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "expect.h"
#include "spin_pause.h"

#define MS 1000000ull

static void policy(void)
{
    struct nx_spin_pause p = {0};
    uint64_t t = 1000 * MS;
    /* Short yields never pause. */
    EXPECT_EQ(nx_spin_pause_after_yield(&p, t, 0), 0);
    EXPECT_EQ(nx_spin_pause_after_yield(&p, t, NX_YIELD_LONG_NS - 1), 0);
    EXPECT_EQ(nx_spin_paused(&p, t), 0);
    /* The first long one: the shortest pause. */
    EXPECT_EQ(nx_spin_pause_after_yield(&p, t, NX_YIELD_LONG_NS), 1);
    EXPECT_EQ(p.len_ns, NX_PAUSE_MIN_NS);
    EXPECT_EQ(nx_spin_paused(&p, t + NX_PAUSE_MIN_NS - 1), 1);
    EXPECT_EQ(nx_spin_paused(&p, t + NX_PAUSE_MIN_NS), 0);
    /* Found again right after each pause: twice the last, up to the longest. */
    uint64_t want = NX_PAUSE_MIN_NS;
    for (int i = 0; i < 12; i++) {
        t = p.until_ns + 1;
        EXPECT_EQ(nx_spin_pause_after_yield(&p, t, 4 * MS), 1);
        want = 2 * want > NX_PAUSE_MAX_NS ? NX_PAUSE_MAX_NS : 2 * want;
        EXPECT_EQ(p.len_ns, want);
        EXPECT_EQ(p.until_ns, t + want);
    }
    EXPECT_EQ(p.len_ns, NX_PAUSE_MAX_NS);
    /* Spinning a whole pause's length without a long yield: the next one starts short. */
    t = p.until_ns + p.len_ns;
    EXPECT_EQ(nx_spin_pause_after_yield(&p, t, 4 * MS), 1);
    EXPECT_EQ(p.len_ns, NX_PAUSE_MIN_NS);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One CPU shared with a busy loop: some yield must take the loop's slice. */
static void kernel(void)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
        perror("sched_setaffinity");
        failures++;
        return;
    }
    pid_t hog = fork(); /* inherits the CPU */
    if (hog == 0)
        for (;;)
            ;
    uint64_t longest = 0, t0 = now_ns();
    while (now_ns() - t0 < 2000 * MS && longest < NX_YIELD_LONG_NS) {
        uint64_t y = now_ns();
        sched_yield();
        uint64_t d = now_ns() - y;
        longest = d > longest ? d : longest;
    }
    kill(hog, SIGKILL);
    waitpid(hog, NULL, 0);
    printf("beside a busy loop the longest yield took %.2f ms\n", longest / 1e6);
    if (longest < NX_YIELD_LONG_NS) {
        fprintf(stderr, "no yield took %.1f ms in 2 s beside a busy loop: this kernel "
                "hands the core back sooner, and spin_pause.h would never pause\n",
                NX_YIELD_LONG_NS / 1e6);
        failures++;
    }
}

int main(void)
{
    policy();
    kernel();
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
