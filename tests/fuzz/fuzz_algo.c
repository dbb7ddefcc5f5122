/*
 * fuzz_algo.c - libFuzzer target for the algorithm-choice parser, nx_algo_pref_parse()
 * (daemon/algo/algo_choose.c): NEXAR_ALGO from a rank's environment, the `algo` setting of
 * the config file, and the job's choice a coordinator sends to the other daemons.
 *
 * Input: one control byte (the size of the error buffer, 1 to 256), then the text; it
 * ends at its first NUL, as an environment variable or a C string does.  The verdict
 * and the choices must be those of a reference reading of the grammar below, which
 * takes kind and algorithm names and nx_algo_supported() as given; an accepted text
 * must format to a canonical form that parses to the same choices and formats to
 * itself.  The error text must fit its buffer (ASan sees the buffer's exact end).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "fuzz.h"


static int kind_of(const char *p, size_t n)
{
    for (int k = 1; k <= NX_K_BARRIER; k++) {
        const char *name = nx_kind_name((uint8_t)k);
        if (strlen(name) == n && !memcmp(name, p, n))
            return k;
    }
    return 0;
}

static int algo_of(const char *p, size_t n)
{
    for (int a = 0; a < NX_ALGO_COUNT; a++) {
        const char *name = nx_algo_name((enum nx_algo)a);
        if (strlen(name) == n && !memcmp(name, p, n))
            return a;
    }
    return -1;
}

/*
 * The grammar: items "kind=algo" separated by ','; the first '=' of an item splits it.
 * A kind of all_reduce .. barrier, an algorithm it has ("auto" always), each kind at
 * most once.  An empty text, or an empty last item (a trailing comma), is no choice.
 */
static int reference(const char *s, uint8_t pref[NX_K_MAX + 1])
{
    memset(pref, NX_ALGO_AUTO, NX_K_MAX + 1);
    int named[NX_K_MAX + 1] = {0};
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && s[end] != ',')
            end++;
        const char *eq = memchr(s + i, '=', end - i);
        if (!eq)
            return -EINVAL;
        int k = kind_of(s + i, (size_t)(eq - (s + i)));
        int a = algo_of(eq + 1, (size_t)(s + end - eq - 1));
        if (!k || a < 0 || !nx_algo_supported((uint8_t)k, (enum nx_algo)a) || named[k])
            return -EINVAL;
        named[k] = 1;
        pref[k] = (uint8_t)a;
        i = end + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t errlen = (size_t)data[0] + 1;
    char *s = malloc(size);
    char *err = malloc(errlen);
    CHECK(s && err);
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';

    uint8_t pref[NX_K_MAX + 1], want[NX_K_MAX + 1];
    memset(err, 0, errlen);
    int rv = nx_algo_pref_parse(s, pref, err, errlen);
    int ref = reference(s, want);
    CHECK(rv == ref);
    if (rv < 0) {
        CHECK(memchr(err, '\0', errlen) != NULL);
        CHECK(errlen == 1 || err[0] != '\0');
    } else {
        CHECK(memcmp(pref, want, sizeof(pref)) == 0);
        for (int k = 0; k <= NX_K_MAX; k++)
            CHECK(pref[k] == NX_ALGO_AUTO ||
                  (k >= 1 && k <= NX_K_BARRIER &&
                   nx_algo_supported((uint8_t)k, (enum nx_algo)pref[k])));
        /* The canonical form: what daemons send each other and nexarctl shows. */
        char canon[1024], again[1024];
        uint8_t pref2[NX_K_MAX + 1];
        nx_algo_pref_format(pref, canon, sizeof(canon));
        CHECK(nx_algo_pref_parse(canon, pref2, err, errlen) == 0);
        CHECK(memcmp(pref, pref2, sizeof(pref)) == 0);
        nx_algo_pref_format(pref2, again, sizeof(again));
        CHECK(strcmp(canon, again) == 0);
    }
    /* NULL is "all automatic". */
    CHECK(nx_algo_pref_parse(NULL, pref, err, errlen) == 0);
    free(s);
    free(err);
    return 0;
}
