/*
 * test_pipeline.c - the schedule of the D2H / host step / H2D staging pipeline
 * (cuda/pipeline.c), against simulated copy engines in virtual time: one engine per
 * direction, each copy taking a fixed time, the host step advancing the clock.  Checks
 * every ordering rule of pipeline.h on every action, that the stages really overlap (the
 * makespan of n balanced chunks is about n stage-times, not 3n), and that an error stops
 * the pipeline only after everything started has finished.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

static int failures;

#define EXPECT(c)                                                                  \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c);       \
            failures++;                                                            \
        }                                                                          \
    } while (0)

#define MAXC 256

struct sim {
    uint32_t nbuf;
    double t_in, t_host, t_out; /* stage times */
    double now;
    double engine_free[3];
    double fin[3][MAXC];    /* completion time of each started stage */
    bool started[3][MAXC], seen[3][MAXC];
    uint64_t next[3];       /* the chunk each stage must start next */
    int fail_host_at;       /* -1: never */
    int violations;
};

static void violation(struct sim *s, const char *what, uint64_t c)
{
    fprintf(stderr, "pipeline rule broken: %s (chunk %llu, t=%.1f)\n", what,
            (unsigned long long)c, s->now);
    s->violations++;
}

static int sim_start(void *arg, int st, uint64_t c, uint32_t buf)
{
    struct sim *s = arg;
    if (c >= MAXC || s->started[st][c])
        violation(s, "a stage started twice", c);
    if (c != s->next[st])
        violation(s, "a stage out of chunk order", c);
    if (buf != c % s->nbuf)
        violation(s, "chunk on the wrong buffer", c);
    s->next[st] = c + 1;
    s->started[st][c] = true;
    if (st == NX_PIPE_IN) {
        /* buffer free: OUT (or HOST, without OUT) of chunk c - nbuf has finished */
        if (c >= s->nbuf && !s->seen[NX_PIPE_OUT][c - s->nbuf])
            violation(s, "IN into a buffer still in use", c);
    } else if (st == NX_PIPE_HOST) {
        if (!s->seen[NX_PIPE_IN][c])
            violation(s, "HOST before its IN finished", c);
        if ((int)c == s->fail_host_at)
            return -EPIPE;
        s->now += s->t_host;
        s->fin[st][c] = s->now;
        s->seen[st][c] = true;
        return 0;
    } else if (!s->seen[NX_PIPE_HOST][c]) {
        violation(s, "OUT before its HOST", c);
    }
    double t = st == NX_PIPE_IN ? s->t_in : s->t_out;
    double b = s->engine_free[st] > s->now ? s->engine_free[st] : s->now;
    s->fin[st][c] = s->engine_free[st] = b + t;
    return 0;
}

static int sim_done(void *arg, int st, uint64_t c, uint32_t buf, bool wait)
{
    struct sim *s = arg;
    (void)buf;
    if (!s->started[st][c])
        violation(s, "asked about a stage never started", c);
    if (s->fin[st][c] > s->now) {
        if (!wait)
            return 0;
        s->now = s->fin[st][c];
    }
    s->seen[st][c] = true;
    return 1;
}

static struct sim *sim_new(uint32_t nbuf, double ti, double th, double to)
{
    struct sim *s = calloc(1, sizeof(*s));
    s->nbuf = nbuf;
    s->t_in = ti;
    s->t_host = th;
    s->t_out = to;
    s->fail_host_at = -1;
    return s;
}

static double run(struct sim *s, uint64_t n, bool in, bool out, int *rv)
{
    struct nx_pipe_ops ops = {.arg = s, .has_in = in, .has_out = out,
                              .start = sim_start, .done = sim_done};
    /* A missing stage is free: mark it so that the rule checks see it done. */
    for (uint64_t c = 0; c < n; c++) {
        if (!in)
            s->seen[NX_PIPE_IN][c] = s->started[NX_PIPE_IN][c] = true;
        if (!out)
            s->seen[NX_PIPE_OUT][c] = true;
    }
    if (!in)
        s->next[NX_PIPE_IN] = n;
    *rv = nx_pipe_run(&ops, n, s->nbuf);
    return s->now;
}

static void all_done(struct sim *s, uint64_t n, bool out)
{
    for (uint64_t c = 0; c < n; c++) {
        EXPECT(s->seen[NX_PIPE_IN][c] && s->seen[NX_PIPE_HOST][c]);
        if (out)
            EXPECT(s->started[NX_PIPE_OUT][c] && s->seen[NX_PIPE_OUT][c]);
    }
    EXPECT(s->violations == 0);
}

static void test_overlap(void)
{
    int rv;
    /* Balanced stages, three buffers: IN(i+1) | HOST(i) | OUT(i-1) -> about n + 2. */
    struct sim *s = sim_new(3, 1, 1, 1);
    double t = run(s, 100, true, true, &rv);
    EXPECT(rv == 0);
    all_done(s, 100, true);
    if (t > 103.0) fprintf(stderr, "makespan %.1f\n", t);
    EXPECT(t <= 103.0);
    free(s);

    /* One buffer serializes everything: 3n. */
    s = sim_new(1, 1, 1, 1);
    t = run(s, 50, true, true, &rv);
    EXPECT(rv == 0);
    all_done(s, 50, true);
    EXPECT(t >= 150.0);
    free(s);

    /* The slowest stage bounds the pipeline: copies at 2, host at 1 -> about 2n. */
    s = sim_new(4, 2, 1, 2);
    t = run(s, 64, true, true, &rv);
    EXPECT(rv == 0);
    all_done(s, 64, true);
    EXPECT(t <= 2 * 64 + 4.0);
    free(s);

    /* A slow host step hides both copies. */
    s = sim_new(4, 1, 3, 1);
    t = run(s, 32, true, true, &rv);
    EXPECT(rv == 0);
    all_done(s, 32, true);
    EXPECT(t <= 3 * 32 + 2.0);
    free(s);
}

static void test_partial_stages(void)
{
    int rv;
    struct sim *s = sim_new(4, 1, 1, 1); /* D2H + copy out (stage_for_send) */
    double t = run(s, 40, true, false, &rv);
    EXPECT(rv == 0);
    all_done(s, 40, false);
    EXPECT(t <= 42.0);
    free(s);

    s = sim_new(4, 1, 1, 1); /* copy in + H2D (receive_to_device) */
    t = run(s, 40, false, true, &rv);
    EXPECT(rv == 0);
    all_done(s, 40, true);
    EXPECT(t <= 42.0);
    free(s);

    s = sim_new(2, 1, 1, 1);
    run(s, 0, true, true, &rv); /* nothing to do */
    EXPECT(rv == 0 && s->now == 0.0);
    free(s);
    s = sim_new(3, 1, 1, 1);
    run(s, 1, true, true, &rv);
    EXPECT(rv == 0);
    all_done(s, 1, true);
    free(s);
}

static void test_error(void)
{
    int rv;
    struct sim *s = sim_new(3, 1, 1, 1);
    s->fail_host_at = 10;
    run(s, 50, true, true, &rv);
    EXPECT(rv == -EPIPE);
    EXPECT(s->violations == 0);
    /* Everything started was waited for; nothing after the failure was started. */
    for (uint64_t c = 0; c < MAXC; c++) {
        for (int st = 0; st < 3; st += 2)
            EXPECT(!s->started[st][c] || s->seen[st][c]);
        EXPECT(!s->started[NX_PIPE_OUT][c] || c < 10);
    }
    EXPECT(!s->started[NX_PIPE_IN][14]);
    free(s);

    struct nx_pipe_ops none = {0};
    EXPECT(nx_pipe_run(&none, 4, 3) == -EINVAL);
    EXPECT(nx_pipe_run(NULL, 4, 3) == -EINVAL);
}

int main(void)
{
    test_overlap();
    test_partial_stages();
    test_error();
    if (failures) {
        fprintf(stderr, "test_pipeline: %d failures\n", failures);
        return 1;
    }
    printf("test_pipeline: ok\n");
    return 0;
}
