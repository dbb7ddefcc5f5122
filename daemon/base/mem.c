/* mem.c - see mem.h. */
#include "mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static void oom(size_t n)
{
    nx_log(NX_LOG_ERROR, "mem", "out of memory allocating %zu bytes", n);
    abort();
}

void *nx_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *nx_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *nx_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

char *nx_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        oom(strlen(s));
    return p;
}

char *nx_xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        oom(0);
    return s;
}

void nx_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    *arr = nx_xrealloc(*arr, ncap * elem);
    *cap = ncap;
}

void nx_grow_inline(void **arr, size_t *cap, void *inl, size_t inl_n, size_t need,
                    size_t elem)
{
    if (!*arr) {
        *arr = inl;
        *cap = inl_n;
    }
    if (need <= *cap)
        return;
    if (*arr != inl) {
        nx_grow(arr, cap, need, elem);
        return;
    }
    void *heap = NULL;
    size_t ncap = 0;
    nx_grow(&heap, &ncap, need > 2 * inl_n ? need : 2 * inl_n, elem);
    memcpy(heap, inl, *cap * elem);
    *arr = heap;
    *cap = ncap;
}

void nx_u32_set_add(uint32_t **v, uint32_t *n, uint32_t x)
{
    uint32_t i = 0;
    while (i < *n && (*v)[i] < x)
        i++;
    if (i < *n && (*v)[i] == x)
        return;
    *v = nx_xrealloc(*v, (*n + 1) * sizeof(**v));
    memmove(*v + i + 1, *v + i, (*n - i) * sizeof(**v));
    (*v)[i] = x;
    (*n)++;
}
