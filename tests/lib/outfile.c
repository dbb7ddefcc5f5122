/* outfile.c - see outfile.h. */
#include "outfile.h"

#include <stdio.h>
#include <stdlib.h>

void tl_put_file(const char *dir, const char *name, int rank, const char *text)
{
    char p[700], tmp[720];
    snprintf(p, sizeof(p), "%s/%s%d", dir, name, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    rename(tmp, p);
}

char *tl_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t n = 0, cap = 4096;
    char *b = malloc(cap);
    if (!b)
        abort();
    while (f) {
        n += fread(b + n, 1, cap - 1 - n, f);
        if (n < cap - 1)
            break;
        cap *= 2;
        if (!(b = realloc(b, cap)))
            abort();
    }
    b[n] = '\0';
    if (f)
        fclose(f);
    return b;
}
