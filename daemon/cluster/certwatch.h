/*
 * certwatch.h - this node's certificate proof, said ahead of its end.
 *
 * When the proof a node shows (the earliest expiry of tls_cert's chain and of the CA that
 * signed it) ends, every peer closes its connections with the node and refuses new ones
 * (transport.md), and the jobs across nodes that use them fail.  nexard says when that
 * will be: at start, and once a day in the last NX_CERT_WARN_S (14 days), as a warning
 * that names the file and the date.  nexarctl status shows the same date.
 */
#ifndef NX_CERTWATCH_H
#define NX_CERTWATCH_H

struct nx_transport;

/* The endpoint is up: logs the subject and when its proof ends, and warns if soon. */
void nx_certwatch_start(struct nx_transport *t);
/* From the cluster's tick: warns once a day while the end is near. */
void nx_certwatch_tick(double now);
void nx_certwatch_stop(void);

#endif
