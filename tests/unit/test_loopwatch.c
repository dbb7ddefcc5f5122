/*
 * test_loopwatch.c - daemon/base/loopwatch.h: a turn of the loop that works a second or
 * more counts as a stall; time spent waiting in poll does not, however long.
 *
 * A real libuv loop runs four timers: one works 0.3 s (under the bar), one waits 1.2 s
 * before it fires (idle, not work), one works 1.1 s (a stall), and one works nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "context.h"
#include "expect.h"
#include "log.h"
#include "loopwatch.h"

static void work_ms(long ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do /* busy, as a long copy would be */
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

static uint64_t stalls_after[4];

static void on_timer(uv_timer_t *h)
{
    long i = (long)(intptr_t)h->data;
    static const long work[4] = {300, 0, 1100, 0};
    work_ms(work[i]);
    stalls_after[i] = nxd.stats.loop_stalls;
}

static void close_one(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int main(void)
{
    nx_log_init(NX_LOG_INFO, 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    nxd.loop = &loop;
    nx_loopwatch_start(&loop);
    uv_timer_t t[4];
    static const uint64_t at[4] = {10, 1500, 1600, 2900};
    for (long i = 0; i < 4; i++) {
        uv_timer_init(&loop, &t[i]);
        t[i].data = (void *)(intptr_t)i;
        uv_timer_start(&t[i], on_timer, at[i], 0);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    /* Each count is read in the timer's own turn: a turn's work is counted at the next. */
    EXPECT_EQ(stalls_after[1], 0u); /* 0.3 s of work, then 1.2 s of waiting */
    EXPECT_EQ(stalls_after[3], 1u); /* the 1.1 s turn */
    EXPECT_EQ(nxd.stats.loop_stalls, 1u);
    uv_walk(&loop, close_one, NULL); /* the timers, and the watch's own handle */
    uv_run(&loop, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop), 0);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
