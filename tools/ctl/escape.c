/*
 * escape.c - a report's strings made safe for a terminal before nexarctl prints a table.
 *
 * Job names, error texts, addresses and certificate names in a reply were chosen by
 * whoever started a rank or a peer: printed raw, an escape sequence in a job name would
 * move an administrator's cursor or rewrite what the table shows.  Every string field of
 * the reply, at any depth, goes through nx_text_escape (the same rule as nexard's log).
 * JSON output is escaped by its own writer and keeps the exact strings.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "text_escape.h"
#include "util.h"

static void escape_string(char **s)
{
    if (!*s)
        return;
    size_t len = strlen(*s);
    size_t cap = 4 * len + 1; /* every byte as \xNN at worst */
    char *out = nxt_xmalloc(cap);
    nx_text_escape(*s, out, cap);
    if (!strcmp(out, *s)) {
        free(out);
        return;
    }
    /* Unpacked with the default allocator: the reply's strings are malloc'd. */
    free(*s);
    *s = out;
}

void nxc_escape_message(ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char *field = (char *)m + f->offset;
        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(size_t *)((char *)m + f->quantifier_offset);
            void **items = *(void ***)field;
            for (size_t k = 0; k < n; k++) {
                if (f->type == PROTOBUF_C_TYPE_STRING)
                    escape_string((char **)&items[k]);
                else if (items[k])
                    nxc_escape_message(items[k]);
            }
        } else if (f->type == PROTOBUF_C_TYPE_STRING) {
            escape_string((char **)field);
        } else if (*(ProtobufCMessage **)field) {
            nxc_escape_message(*(ProtobufCMessage **)field);
        }
    }
}
