/*
 * json.h - a small streaming JSON writer: nexarctl --json, and nexard's inspection
 * endpoint when an HTTP/3 client asks for JSON (ctl_json.h writes the reports with it).
 *
 * Hand-written rather than a dependency: both emit objects of known shape.  The writer tracks commas per nesting level; strings are escaped per
 * RFC 8259 and invalid UTF-8 (daemon strings are not validated by protobuf-c)
 * becomes U+FFFD, so the output is always valid JSON.  Non-finite doubles are
 * written as null.
 *
 * `key` is the member name inside an object and must be NULL inside an array
 * or at the top level.
 */
#ifndef NX_JSON_H
#define NX_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define NX_JSON_MAX_DEPTH 16

struct nx_json {
    FILE *f;
    int depth;
    bool need_comma[NX_JSON_MAX_DEPTH];
};

void nx_json_init(struct nx_json *j, FILE *f);
void nx_json_obj_begin(struct nx_json *j, const char *key);
void nx_json_obj_end(struct nx_json *j);
void nx_json_arr_begin(struct nx_json *j, const char *key);
void nx_json_arr_end(struct nx_json *j);
void nx_json_str(struct nx_json *j, const char *key, const char *v); /* NULL -> null */
void nx_json_u64(struct nx_json *j, const char *key, uint64_t v);
void nx_json_i64(struct nx_json *j, const char *key, int64_t v);
void nx_json_double(struct nx_json *j, const char *key, double v);
void nx_json_bool(struct nx_json *j, const char *key, bool v);
/* Ends the top-level value with a newline. */
void nx_json_finish(struct nx_json *j);

/* Writes s as a quoted, escaped JSON string. */
void nx_json_write_string(FILE *f, const char *s);

#endif /* NX_JSON_H */
