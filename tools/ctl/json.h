/*
 * json.h - a small streaming JSON writer for nexarctl --json.
 *
 * Hand-written rather than a dependency: nexarctl emits one object of known
 * shape.  The writer tracks commas per nesting level; strings are escaped per
 * RFC 8259 and invalid UTF-8 (daemon strings are not validated by protobuf-c)
 * becomes U+FFFD, so the output is always valid JSON.  Non-finite doubles are
 * written as null.
 *
 * `key` is the member name inside an object and must be NULL inside an array
 * or at the top level.
 */
#ifndef NXC_JSON_H
#define NXC_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define NXC_JSON_MAX_DEPTH 16

struct nxc_json {
    FILE *f;
    int depth;
    bool need_comma[NXC_JSON_MAX_DEPTH];
};

void nxc_json_init(struct nxc_json *j, FILE *f);
void nxc_json_obj_begin(struct nxc_json *j, const char *key);
void nxc_json_obj_end(struct nxc_json *j);
void nxc_json_arr_begin(struct nxc_json *j, const char *key);
void nxc_json_arr_end(struct nxc_json *j);
void nxc_json_str(struct nxc_json *j, const char *key, const char *v); /* NULL -> null */
void nxc_json_u64(struct nxc_json *j, const char *key, uint64_t v);
void nxc_json_i64(struct nxc_json *j, const char *key, int64_t v);
void nxc_json_double(struct nxc_json *j, const char *key, double v);
void nxc_json_bool(struct nxc_json *j, const char *key, bool v);
/* Ends the top-level value with a newline. */
void nxc_json_finish(struct nxc_json *j);

/* Writes s as a quoted, escaped JSON string. */
void nxc_json_write_string(FILE *f, const char *s);

#endif /* NXC_JSON_H */
