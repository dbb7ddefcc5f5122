/*
 * status.c - `nexarctl status` (the daemon itself), `nexarctl stats` (counters) and
 * `nexarctl reload` (what the daemon did with the TLS files).
 */
#include <string.h>
#include <time.h>

#include "cert_check.h"
#include "ctl.h"
#include "util.h"


void nxc_status_human(FILE *f, const Nexar__CtlReply *r)
{
    const Nexar__StatusInfo *s = nx_ctl_status_of(r);
    char age[32], shm[32], rss[32];
    fprintf(f, "nexard %s, pid %llu, up %s\n", s->version && *s->version ? s->version : "?",
            (unsigned long long)s->pid, nxc_fmt_age(s->uptime_s, age, sizeof(age)));
    struct nxc_table t;
    nxc_table_init(&t, 2, "socket", s->socket && *s->socket ? s->socket : "?");
    nxc_table_add(&t, nxt_xstrdup("clients"));
    nxc_table_add(&t, nxc_fmt("%u", s->clients));
    nxc_table_add(&t, nxt_xstrdup("jobs"));
    nxc_table_add(&t, nxc_fmt("%u", s->jobs));
    nxc_table_add(&t, nxt_xstrdup("communicators"));
    nxc_table_add(&t, nxc_fmt("%u", s->comms));
    nxc_table_add(&t, nxt_xstrdup("shared memory"));
    nxc_table_add(&t, nxc_fmt("%s mapped", nxt_fmt_bytes(s->shm_bytes, shm, sizeof(shm))));
    nxc_table_add(&t, nxt_xstrdup("resident"));
    nxc_table_add(&t, nxt_xstrdup(nxt_fmt_bytes(s->rss_bytes, rss, sizeof(rss))));
    nxc_table_add(&t, nxt_xstrdup("heap"));
    nxc_table_add(&t, nxc_fmt("%s allocated", nxt_fmt_bytes(s->heap_bytes, rss, sizeof(rss))));
    if (s->cert_not_after) {
        char when[40], in[40];
        time_t end = (time_t)s->cert_not_after, now = time(NULL);
        nxc_table_add(&t, nxt_xstrdup("certificate"));
        nxc_table_add(&t, nxc_fmt("%s, proves this node until %s (%s)%s",
                                  s->cert_subject && *s->cert_subject ? s->cert_subject : "?",
                                  nx_cert_time(end, when, sizeof(when)),
                                  nx_cert_left(end, now, in, sizeof(in)),
                                  nx_cert_ends_soon(end, now) ? ": ROTATE IT SOON" : ""));
    }
    nxc_table_print(&t, f, "  ");
    nxc_table_free(&t);
}

void nxc_reload_human(FILE *f, const Nexar__CtlReply *r)
{
    fprintf(f, "reloaded: %s\n", r->result && *r->result ? r->result : "done");
}

void nxc_stats_human(FILE *f, const Nexar__CtlReply *r)
{
    const Nexar__Stats *s = nx_ctl_stats_of(r);
    struct nxc_table t;
    char b[32];
    nxc_table_init(&t, 2, "COUNTER", "VALUE");
#define ROW(field, label, bytes)                                                        \
    nxc_table_add(&t, nxt_xstrdup(label));                                               \
    nxc_table_add(&t, (bytes) && s->field >= 1024                                        \
                          ? nxc_fmt("%llu (%s)", (unsigned long long)s->field,           \
                                    nxt_fmt_bytes(s->field, b, sizeof(b)))               \
                          : nxc_fmt("%llu", (unsigned long long)s->field));
    NX_CTL_STATS_FIELDS(ROW)
#undef ROW
    nxc_table_print(&t, f, "");
    nxc_table_free(&t);
}

