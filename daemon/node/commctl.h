/* commctl.h - a rank's questions about its communicators on its control connection. */
#ifndef NX_COMMCTL_H
#define NX_COMMCTL_H

#include <stdint.h>

#include "ctlsrv.h"

/* Answers one COMM_QUERY with a COMM_REPLY: 0, or -1 when the connection was closed. */
int nx_commctl_frame(struct nx_conn *c, const uint8_t *payload, uint32_t len);

#endif
