/*
 * h3_routes.h - nexard's side of the remote inspection endpoint (HTTP/3 on the QUIC
 * port): the answers to GET /v1/status, /v1/jobs, /v1/comms, /v1/ops, /v1/stats,
 * /v1/peers and /v1/config, built by ctl_info.c exactly as for nexarctl on the Unix
 * socket, as protobuf or, when asked, as nexarctl's JSON.
 */
#ifndef NX_H3_ROUTES_H
#define NX_H3_ROUTES_H

#include "config.h"
#include "transport_quic.h"

#define NX_H3_IDLE_MS 10000 /* an inspector silent this long is closed */

/* The endpoint for the QUIC transport's conf.inspect, or NULL when cfg->inspect is off.
 * The pointer stays valid for the life of the process. */
const struct nx_quic_inspect *nx_h3_routes(const struct nx_config *cfg);

#endif
