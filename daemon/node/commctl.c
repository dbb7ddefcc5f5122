/*
 * commctl.c - COMM_QUERY on a joined rank's control connection: what nexard knows about one
 * of the rank's communicators (nexar_comm_failed_ranks).  A rank may ask only about a
 * communicator it is a member of; any other id is answered INVALID, never another job's.
 */
#include <stdio.h>

#include "client.h"
#include "comm.h"
#include "commctl.h"
#include "nexar.h"
#include "nexar.pb-c.h"

int nx_commctl_frame(struct nx_conn *c, const uint8_t *payload, uint32_t len)
{
    Nexar__CommQuery *q = nexar__comm_query__unpack(NULL, len, payload);
    if (!q) {
        nx_conn_fail(c, NEXAR_ERR_INVALID, "COMM_QUERY does not decode");
        return -1;
    }
    uint32_t id = q->comm;
    nexar__comm_query__free_unpacked(q, NULL);
    Nexar__CommReply r = NEXAR__COMM_REPLY__INIT;
    char err[96];
    struct nx_member *m = nx_client_member(c->client, id);
    if (!m) {
        snprintf(err, sizeof(err), "communicator %u is not one of this rank's", id);
        r.status = NEXAR_ERR_INVALID;
        r.error = err;
    } else {
        r.failed_ranks = m->comm->failed;
        r.n_failed_ranks = m->comm->nfailed;
        r.failed_status = m->comm->failed_status;
        r.failed_text = m->comm->failed_text ? m->comm->failed_text : "";
    }
    if (nx_conn_send(c, NX_MSG_COMM_REPLY, &r, NULL, 0) < 0) {
        nx_conn_close(c);
        return -1;
    }
    return 0;
}
