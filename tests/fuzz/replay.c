/*
 * replay.c - a fuzz target's seed corpus as a regression test of the normal build: every
 * file of the directory goes through LLVMFuzzerTestOneInput once, with the build's own
 * compiler and sanitizers (the asan phase runs it under ASan and UBSan).  A CHECK that
 * fails aborts, which fails the test; the fuzz phase explores beyond the seeds.
 *   fuzz_frame_replay tests/fuzz/corpus/fuzz_frame
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) {
            perror(path);
            return 1;
        }
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0, got;
        do {
            if (len == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 4096)))
                return 1;
            got = fread(buf + len, 1, cap - len, f);
            len += got;
        } while (got > 0);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        n++;
    }
    closedir(d);
    printf("%d seed(s) of %s replayed\n", n, argv[1]);
    return n > 0 ? 0 : 1;
}
