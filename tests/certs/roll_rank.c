/*
 * roll_rank.c - a rank that keeps a job across nodes busy while its daemons change
 * credentials: all_reduces of i32, each checked exactly against the sum computed here,
 * until SECONDS have passed on some rank (the ranks agree to stop through the last element
 * of the same all_reduce, so that no rank leaves while another is in an op).
 *   roll_rank SECONDS [COUNT]    (NEXAR_* from the environment)
 * Exit status: 0 every op exact; 1 init failed; 2 an op failed (its text on stderr);
 * 3 a wrong element.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nexar.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    size_t n = argc > 2 ? strtoul(argv[2], NULL, 0) : 16384;
    nexar_comm_t *w;
    if (n < 2 || nexar_init(&w) != NEXAR_OK) {
        fprintf(stderr, "roll_rank: init: %s\n", nexar_last_error());
        return 1;
    }
    int r = nexar_comm_rank(w), size = nexar_comm_size(w);
    int32_t *b = malloc(n * sizeof(*b));
    double t0 = now();
    long ops = 0;
    for (int stop = 0; !stop; ops++) {
        for (size_t i = 0; i + 1 < n; i++)
            b[i] = (int32_t)(i * 7 + (size_t)r + (size_t)ops);
        b[n - 1] = now() - t0 >= seconds;
        if (nexar_all_reduce(w, b, n, NEXAR_I32, NEXAR_SUM) != NEXAR_OK) {
            fprintf(stderr, "rank %d: op %ld after %.1f s: %s\n", r, ops, now() - t0,
                    nexar_last_error());
            return 2;
        }
        for (size_t i = 0; i + 1 < n; i++) {
            int64_t want = 0;
            for (int k = 0; k < size; k++)
                want += (int64_t)(i * 7 + (size_t)k + (size_t)ops);
            if (b[i] != (int32_t)want) {
                fprintf(stderr, "rank %d: op %ld: element %zu is %d, not %d\n", r, ops, i,
                        b[i], (int32_t)want);
                return 3;
            }
        }
        stop = b[n - 1] > 0;
    }
    printf("rank %d: %ld all_reduces of %zu i32 in %.1f s, every one exact\n", r, ops, n,
           now() - t0);
    free(b);
    nexar_finalize();
    return 0;
}
