/*
 * h3_routes.c - what the remote inspection endpoint answers: for each route of
 * proto/inspect.h, the CtlReply that nx_ctl_report() builds for the Unix-socket control
 * server, packed into the response body, or written as the JSON of nexarctl --json
 * (proto/ctl_json.h) when the client asked for JSON.  Same builder, same bytes; nothing
 * here looks at the daemon's state itself.
 */
#include "h3_routes.h"

#include <stdio.h>
#include <stdlib.h>

#include "ctl_info.h"
#include "ctl_json.h"
#include "inspect.h"
#include "mem.h"
#include "nexar.pb-c.h"

struct packed {
    uint8_t *data;
    size_t len;
    int command;
    int format; /* enum nx_inspect_format */
};

/* The JSON of nexarctl --json for the same reply; b->data stays NULL on failure. */
static void write_json(struct packed *b, const Nexar__CtlReply *rep)
{
    const struct nx_inspect_route *rt = nx_inspect_by_command(b->command);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    bool ok = rt && nx_ctl_json_report(f, rt->name, b->command, rep);
    if (fclose(f) != 0 || !ok || !buf) {
        free(buf);
        return;
    }
    b->data = (uint8_t *)buf;
    b->len = len;
}

static void pack(void *arg, const Nexar__CtlReply *rep)
{
    struct packed *b = arg;
    if (b->format == NX_INSPECT_JSON)
        return write_json(b, rep);
    b->len = nexar__ctl_reply__get_packed_size(rep);
    b->data = nx_xmalloc(b->len ? b->len : 1);
    nexar__ctl_reply__pack(rep, b->data);
}

static int get(void *arg, int command, int format, uint8_t **body, size_t *len)
{
    struct packed b = {NULL, 0, command, format};
    (void)arg;
    if (nx_ctl_report(command, pack, &b) != 0 || !b.data) {
        free(b.data);
        return -1;
    }
    *body = b.data;
    *len = b.len;
    return 0;
}

static struct nx_quic_inspect routes;

const struct nx_quic_inspect *nx_h3_routes(const struct nx_config *cfg)
{
    if (!cfg->inspect)
        return NULL;
    routes.get = get;
    routes.arg = NULL;
    routes.max_conns = cfg->inspect_max_conns;
    routes.idle_timeout_ms = NX_H3_IDLE_MS;
    return &routes;
}
