/* certwatch.c - see certwatch.h. */
#include "certwatch.h"

#include <time.h>

#include "cert_check.h"
#include "context.h"
#include "log.h"
#include "transport_quic.h"

#define CHECK_EVERY_S 60.0
#define WARN_EVERY_S 86400.0

static struct {
    struct nx_transport *t;
    double next_check, last_warn;
} cw;

static void check(double now, int at_start)
{
    char subject[160], when[40], in[40];
    time_t end = nx_quic_own_cert(cw.t, subject, sizeof(subject)), wall = time(NULL);
    if (end == (time_t)-1)
        return;
    nx_cert_time(end, when, sizeof(when));
    nx_cert_left(end, wall, in, sizeof(in));
    if (at_start)
        NX_INFO("cluster", "this node's certificate (%s, tls_cert %s) proves it until %s (%s)",
                subject, nxd.cfg.tls_cert ? nxd.cfg.tls_cert : "?", when, in);
    if (!nx_cert_ends_soon(end, wall) || (cw.last_warn && now - cw.last_warn < WARN_EVERY_S))
        return;
    cw.last_warn = now;
    if (end <= wall)
        NX_ERROR("cluster", "this node's certificate proof (tls_cert %s) ended at %s: every "
                 "peer refuses it; install a new certificate and reload nexard (systemctl "
                 "reload nexard; docs/operations.md, Rotation)", nxd.cfg.tls_cert ? nxd.cfg.tls_cert : "?",
                 when);
    else
        NX_WARN("cluster", "this node's certificate proof (tls_cert %s) ends at %s, %s: then "
                "every peer closes its connections with this node and the jobs across nodes "
                "fail; install a new one before and reload nexard (systemctl reload nexard; "
                "docs/operations.md, Rotation)",
                nxd.cfg.tls_cert ? nxd.cfg.tls_cert : "?", when, in);
}

void nx_certwatch_start(struct nx_transport *t)
{
    cw.t = t;
    cw.last_warn = 0;
    double now = nx_now();
    cw.next_check = now + CHECK_EVERY_S;
    check(now, 1);
}

void nx_certwatch_tick(double now)
{
    if (!cw.t || now < cw.next_check)
        return;
    cw.next_check = now + CHECK_EVERY_S;
    check(now, 0);
}

void nx_certwatch_stop(void)
{
    cw.t = NULL;
}
