/*
 * install_check.c - a rank program built the way a user builds one against an
 * installed nexar: `cc install_check.c $(pkg-config --cflags --libs nexarshim)
 * -Wl,-rpath,LIBDIR` (install_prefix.sh).  It joins the job, all-reduces rank + 1,
 * checks the sum and leaves.  Exit 0, the nexar_status_t of a failed call, or 65
 * for a wrong sum.
 */
#include <nexar.h>
#include <stdio.h>

static int fail(const char *call, nexar_status_t s)
{
    fprintf(stderr, "install_check: %s: %s: %s\n", call, nexar_strerror(s),
            nexar_last_error());
    nexar_finalize();
    return (int)s;
}

int main(void)
{
    nexar_comm_t *world;
    nexar_status_t s = nexar_init(&world);
    if (s != NEXAR_OK)
        return fail("nexar_init", s);
    int rank = nexar_comm_rank(world), size = nexar_comm_size(world);
    double v = rank + 1;
    s = nexar_all_reduce(world, &v, 1, NEXAR_F64, NEXAR_SUM);
    if (s != NEXAR_OK)
        return fail("nexar_all_reduce", s);
    double want = size * (size + 1) / 2.0;
    if (v != want) {
        fprintf(stderr, "install_check: rank %d: sum %g, expected %g\n", rank, v, want);
        nexar_finalize();
        return 65;
    }
    printf("install_check: rank %d of %d: sum %g\n", rank, size, v);
    s = nexar_finalize();
    return s == NEXAR_OK ? 0 : fail("nexar_finalize", s);
}
