/* mem.h - allocation for the daemon and tools: out of memory ends the process with a
 * log line, through this one place (the shim never uses it: it returns NEXAR_ERR_NOMEM). */
#ifndef NX_MEM_H
#define NX_MEM_H

#include <stddef.h>
#include <stdint.h>

void *nx_xmalloc(size_t n);
void *nx_xcalloc(size_t n, size_t size);
void *nx_xrealloc(void *p, size_t n);
char *nx_xstrdup(const char *s);
char *nx_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Adds x to the ascending set (*v)[0..*n) unless it is there: ranks known failed. */
void nx_u32_set_add(uint32_t **v, uint32_t *n, uint32_t x);

/* Grows *arr (of *cap elements of size elem) to hold at least need elements. */
void nx_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* nx_grow for an array whose first inl_n elements live in its owner (`inl`): a NULL *arr
 * starts there, and moves to the heap only when it outgrows them.  The owner frees *arr
 * only when it is not inl.  Small per-op arrays then cost no allocation. */
void nx_grow_inline(void **arr, size_t *cap, void *inl, size_t inl_n, size_t need,
                    size_t elem);

#endif
