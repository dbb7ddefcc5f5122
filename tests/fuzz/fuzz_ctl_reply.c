/*
 * fuzz_ctl_reply.c - what nexarctl does with a daemon's answer (CtlReply): with --remote
 * that answer comes from another node over the network, so nothing in it is trusted.
 * The first byte picks the report (status, jobs, comms, ops, stats, peers, config,
 * reload), the rest is the CtlReply.  Every reply protobuf-c accepts must print as a
 * table (tools/ctl/, after nxc_escape_message, as main.c does) and as JSON
 * (proto/ctl_json.c) without a crash or undefined behaviour, and the JSON must parse
 * (tests/lib/tjson.c, strict RFC 8259) whatever the strings and numbers hold.
 */
#include <string.h>

#include "ctl.h"
#include "ctl_json.h"
#include "fuzz.h"
#include "nexar.pb-c.h"
#include "tjson.h"

static const struct {
    const char *name;
    int command;
    void (*human)(FILE *f, const Nexar__CtlReply *r);
} reports[] = {
    {"status", NEXAR__CTL_COMMAND__CTL_STATUS, nxc_status_human},
    {"jobs", NEXAR__CTL_COMMAND__CTL_JOBS, nxc_jobs_human},
    {"comms", NEXAR__CTL_COMMAND__CTL_COMMS, nxc_comms_human},
    {"ops", NEXAR__CTL_COMMAND__CTL_OPS, nxc_ops_human},
    {"stats", NEXAR__CTL_COMMAND__CTL_STATS, nxc_stats_human},
    {"peers", NEXAR__CTL_COMMAND__CTL_PEERS, nxc_peers_human},
    {"config", NEXAR__CTL_COMMAND__CTL_CONFIG, nxc_config_human},
    {"reload", NEXAR__CTL_COMMAND__CTL_RELOAD, nxc_reload_human},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (size < 1)
        return 0;
    if (!sink)
        sink = fopen("/dev/null", "w");
    unsigned k = data[0] % (sizeof(reports) / sizeof(reports[0]));

    Nexar__CtlReply *r = nexar__ctl_reply__unpack(NULL, size - 1, data + 1);
    if (!r)
        return 0;
    if (reports[k].command != NEXAR__CTL_COMMAND__CTL_RELOAD) {
        char *json = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&json, &len);
        CHECK(mem && nx_ctl_json_report(mem, reports[k].name, reports[k].command, r));
        CHECK(fclose(mem) == 0);
        char err[256];
        struct tj *v = tj_parse(json, err, sizeof(err));
        if (!v)
            fprintf(stderr, "%s JSON does not parse (%s): %.400s\n", reports[k].name, err,
                    json);
        CHECK(v != NULL);
        tj_free(v);
        free(json);
    }
    nxc_escape_message(&r->base);
    reports[k].human(sink, r);
    nexar__ctl_reply__free_unpacked(r, NULL);
    return 0;
}
