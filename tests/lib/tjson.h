/*
 * tjson.h - a strict little JSON reader for tests that check what the tools print.
 *
 * The tests assert exact values of nested fields ("comms[0].ranks[1].ops_completed"),
 * so the output is parsed for real instead of searched with strstr(): a field in the
 * wrong object, a missing comma or a bad escape fails the test.  RFC 8259 strictly:
 * no trailing commas, no comments, one value and nothing after it but white space.
 *
 * Paths: object keys separated by '.', array elements as [N], e.g. "peers[0].cipher",
 * "ops[0].waiting_for[1]"; "" is the root.
 */
#ifndef TL_TJSON_H
#define TL_TJSON_H

#include <stddef.h>
#include <stdint.h>

enum tj_type { TJ_NULL, TJ_BOOL, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ };

struct tj {
    enum tj_type type;
    char *key;         /* member name inside an object, else NULL */
    char *str;         /* TJ_STR: decoded text (UTF-8); TJ_NUM: the number as written */
    double num;        /* TJ_NUM */
    int boolean;       /* TJ_BOOL */
    struct tj **kids;  /* TJ_ARR / TJ_OBJ, in document order */
    size_t nkids;
};

/* Parses text.  NULL on any syntax error, with where and why in err. */
struct tj *tj_parse(const char *text, char *err, size_t errlen);
void tj_free(struct tj *v);

/* The value at path, or NULL when it does not exist. */
const struct tj *tj_at(const struct tj *root, const char *path);

/* Typed lookups: 0 when path exists with that type (and, for u64, is a non-negative
 * integer that fits), -1 otherwise. */
int tj_u64(const struct tj *root, const char *path, uint64_t *out);
int tj_num(const struct tj *root, const char *path, double *out);
int tj_bool(const struct tj *root, const char *path, int *out);
/* The string at path, NULL when missing or not a string. */
const char *tj_str(const struct tj *root, const char *path);
/* Elements of the array (members of the object) at path, -1 when it is neither. */
long tj_len(const struct tj *root, const char *path);

#endif /* TL_TJSON_H */
