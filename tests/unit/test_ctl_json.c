/*
 * test_ctl_json.c - the JSON of nexard's reports (proto/ctl_json.c), which nexarctl --json
 * prints and the inspection endpoint sends to a client that asks for JSON: exact text for
 * each report, and strings that a rank or a peer chose (quotes, backslashes, control
 * bytes, an escape sequence, invalid UTF-8) escaped so that the object stays valid JSON
 * and says what they held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_json.h"

static int failures;

/* The report as nx_ctl_json_report writes it, into a malloc'd string (NULL: refused). */
static char *report(const char *name, int command, const Nexar__CtlReply *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    bool ok = nx_ctl_json_report(f, name, command, r);
    fclose(f);
    if (!ok) {
        if (len)
            fprintf(stderr, "%s: refused but wrote \"%s\"\n", name, buf);
        failures += len != 0;
        free(buf);
        return NULL;
    }
    return buf;
}

static void expect(const char *what, const char *name, int command, const Nexar__CtlReply *r,
                   const char *want)
{
    char *got = report(name, command, r);
    if (!got || strcmp(got, want)) {
        fprintf(stderr, "%s:\n  got  %s  want %s", what, got ? got : "(refused)\n", want);
        failures++;
    } else {
        printf("ok: %s: %s", what, got);
    }
    free(got);
}

int main(void)
{
    Nexar__CtlReply r = NEXAR__CTL_REPLY__INIT;
    expect("jobs, none", "jobs", NEXAR__CTL_COMMAND__CTL_JOBS, &r,
           "{\"command\":\"jobs\",\"status\":0,\"jobs\":[]}\n");
    expect("peers without a network", "peers", NEXAR__CTL_COMMAND__CTL_PEERS, &r,
           "{\"command\":\"peers\",\"status\":0,\"listen\":null,\"peers\":[]}\n");
    expect("status without its message", "status", NEXAR__CTL_COMMAND__CTL_STATUS, &r,
           "{\"command\":\"status\",\"status\":0,\"version\":\"\",\"pid\":0,\"uptime_s\":0,"
           "\"socket\":\"\",\"clients\":0,\"jobs\":0,\"comms\":0,\"shm_bytes\":0,"
           "\"rss_bytes\":0,\"heap_bytes\":0,\"cert_not_after\":null,\"cert_subject\":null}\n");

    /* A job whose name and a remote node's address were chosen to break things. */
    Nexar__JobInfo j = NEXAR__JOB_INFO__INIT, *jobs[] = {&j};
    Nexar__RankInfo r0 = NEXAR__RANK_INFO__INIT, r1 = NEXAR__RANK_INFO__INIT;
    Nexar__RankInfo *ranks[] = {&r0, &r1};
    char *nodes[] = {"10.0.0.1:7000", "evil\"}\x1b]0;x\x07:1"};
    uint32_t rank_node[] = {0, 1};
    j.job = "a\"b\\c\nd\x1b[2J\xff\xc3\xa9";
    j.state = "running";
    j.world_size = 2;
    j.joined = 2;
    j.uid = 1000;
    j.coord = "10.0.0.1:7000";
    j.algo = "";
    j.nodes = nodes;
    j.n_nodes = 2;
    j.rank_node = rank_node;
    j.n_rank_node = 2;
    r0.state = "idle";
    r0.pid = 4242;
    r0.uid = 1000;
    r1.rank = r1.world_rank = 1;
    r1.state = "remote";
    r1.pid = 777;
    r1.uid = 1000;
    j.ranks = ranks;
    j.n_ranks = 2;
    r.jobs = jobs;
    r.n_jobs = 1;
    expect("jobs, hostile strings", "jobs", NEXAR__CTL_COMMAND__CTL_JOBS, &r,
           "{\"command\":\"jobs\",\"status\":0,\"jobs\":[{\"job\":\"a\\\"b\\\\c\\nd\\u001b[2J"
           "\\ufffd\xc3\xa9\",\"state\":\"running\",\"world_size\":2,\"joined\":2,\"uid\":1000,"
           "\"joiners_waiting\":0,\"coord\":\"10.0.0.1:7000\",\"nodes\":[\"10.0.0.1:7000\","
           "\"evil\\\"}\\u001b]0;x\\u0007:1\"],\"rank_node\":[0,1],\"node\":0,\"algo\":\"\","
           "\"ranks\":[{\"rank\":0,\"world_rank\":0,\"pid\":4242,\"uid\":1000,\"state\":"
           "\"idle\",\"ops_submitted\":0,\"ops_completed\":0,\"bytes_in\":0},{\"rank\":1,"
           "\"world_rank\":1,\"pid\":777,\"uid\":1000,\"state\":\"remote\",\"ops_submitted\":0,"
           "\"ops_completed\":0,\"bytes_in\":0}]}]}\n");

    Nexar__CtlReply c = NEXAR__CTL_REPLY__INIT;
    Nexar__ConfigEntry e0 = NEXAR__CONFIG_ENTRY__INIT, e1 = NEXAR__CONFIG_ENTRY__INIT;
    Nexar__ConfigEntry *entries[] = {&e0, &e1};
    e0.key = "slots";
    e0.value = "16";
    e0.source = "command line";
    e1.key = "tls_key";
    e1.value = "/etc/nexar/tls/node-key.pem";
    e1.source = "config file";
    c.config = entries;
    c.n_config = 2;
    c.config_file = "/etc/nexar/nexard.conf";
    expect("config", "config", NEXAR__CTL_COMMAND__CTL_CONFIG, &c,
           "{\"command\":\"config\",\"status\":0,\"config_file\":\"/etc/nexar/nexard.conf\","
           "\"config_note\":null,\"config\":[{\"key\":\"slots\",\"value\":\"16\",\"source\":"
           "\"command line\"},{\"key\":\"tls_key\",\"value\":\"/etc/nexar/tls/node-key.pem\","
           "\"source\":\"config file\"}]}\n");

    char *none = report("peer-test", NEXAR__CTL_COMMAND__CTL_PEER_TEST, &r);
    if (none) {
        fprintf(stderr, "peer-test has no report, but JSON came: %s", none);
        failures++;
        free(none);
    } else {
        printf("ok: peer-test: no report, nothing written\n");
    }
    return failures ? 1 : 0;
}
