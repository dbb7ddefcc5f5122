/* outfile.c - see outfile.h. */
#include "outfile.h"

#include <stdio.h>

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
