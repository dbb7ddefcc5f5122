/*
 * h3_routes.c - what the remote inspection endpoint answers: for each route of
 * proto/inspect.h, the CtlReply that nx_ctl_report() builds for the Unix-socket control
 * server, packed into the response body.  Same builder, same bytes; nothing here looks at
 * the daemon's state itself.
 */
#include "h3_routes.h"

#include <stdlib.h>

#include "ctl_info.h"
#include "mem.h"
#include "nexar.pb-c.h"

struct packed {
    uint8_t *data;
    size_t len;
};

static void pack(void *arg, const Nexar__CtlReply *rep)
{
    struct packed *b = arg;
    b->len = nexar__ctl_reply__get_packed_size(rep);
    b->data = nx_xmalloc(b->len ? b->len : 1);
    nexar__ctl_reply__pack(rep, b->data);
}

static int get(void *arg, int command, uint8_t **body, size_t *len)
{
    struct packed b = {NULL, 0};
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
