/*
 * status.c - nexar_status_t names and texts for the tools.
 */
#include "status.h"

#include <stdio.h>

#include "nexar.h"

static const struct {
    const char *name;
    const char *text;
} table[] = {
    [NEXAR_OK] = {"NEXAR_OK", "success"},
    [NEXAR_ERR_INVALID] = {"NEXAR_ERR_INVALID", "invalid argument"},
    [NEXAR_ERR_UNAVAILABLE] = {"NEXAR_ERR_UNAVAILABLE", "no daemon answers"},
    [NEXAR_ERR_MISMATCH] = {"NEXAR_ERR_MISMATCH", "ranks called mismatching operations"},
    [NEXAR_ERR_TIMEOUT] = {"NEXAR_ERR_TIMEOUT", "timed out"},
    [NEXAR_ERR_PEER_LOST] = {"NEXAR_ERR_PEER_LOST", "a peer rank was lost"},
    [NEXAR_ERR_ABORTED] = {"NEXAR_ERR_ABORTED", "communicator aborted"},
    [NEXAR_ERR_NOMEM] = {"NEXAR_ERR_NOMEM", "out of memory"},
    [NEXAR_ERR_UNSUPPORTED] = {"NEXAR_ERR_UNSUPPORTED", "unsupported"},
    [NEXAR_ERR_PERMISSION] = {"NEXAR_ERR_PERMISSION", "permission denied"},
    [NEXAR_ERR_INTERNAL] = {"NEXAR_ERR_INTERNAL", "internal error"},
};

#define NSTATUS ((int)(sizeof(table) / sizeof(table[0])))

const char *nxt_status_name(int status)
{
    static char buf[32];
    if (status >= 0 && status < NSTATUS)
        return table[status].name;
    snprintf(buf, sizeof(buf), "status %d", status);
    return buf;
}

const char *nxt_status_text(int status)
{
    return status >= 0 && status < NSTATUS ? table[status].text : "unknown status";
}
