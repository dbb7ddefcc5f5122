/*
 * test_ctl_escape.c - nexarctl's tables print no byte a remote daemon or a client chose
 * raw (tools/ctl/escape.c): every string of a CtlReply, at any depth (a repeated message's
 * repeated strings included), comes out escaped as nexard's log escapes it, and strings
 * without such bytes stay as they were.  A reply packed and unpacked, as nexarctl gets it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static int failures;

static void expect(const char *what, const char *got, const char *want)
{
    if (!got || strcmp(got, want)) {
        fprintf(stderr, "%s: \"%s\", expected \"%s\"\n", what, got ? got : "(null)", want);
        failures++;
    } else {
        printf("ok: %s: %s\n", what, got);
    }
}

int main(void)
{
    Nexar__CtlReply r = NEXAR__CTL_REPLY__INIT;
    Nexar__JobInfo j = NEXAR__JOB_INFO__INIT, *jobs[] = {&j};
    Nexar__PeerInfo p = NEXAR__PEER_INFO__INIT, *peers[] = {&p};
    char *nodes[] = {"10.0.0.1:7000", "evil\x1b]0;owned\x07:1"};
    r.error = "line one\nFORGED line";
    r.listen = "10.0.0.1:7000";
    j.job = "plain-job";
    j.coord = "x:1\r\x1b[2K";
    j.algo = "all_reduce=ring";
    j.nodes = nodes;
    j.n_nodes = 2;
    r.jobs = jobs;
    r.n_jobs = 1;
    p.addr = "10.0.0.2:7000";
    p.reason = "bad \xff\xfe bytes, good \xc3\xa9";
    r.peers = peers;
    r.n_peers = 1;

    size_t len = nexar__ctl_reply__get_packed_size(&r);
    uint8_t *buf = malloc(len);
    nexar__ctl_reply__pack(&r, buf);
    Nexar__CtlReply *u = nexar__ctl_reply__unpack(NULL, len, buf);
    free(buf);
    if (!u || u->n_jobs != 1 || u->jobs[0]->n_nodes != 2 || u->n_peers != 1) {
        fprintf(stderr, "the reply does not round-trip\n");
        return 1;
    }
    nxc_escape_message(&u->base);
    expect("error", u->error, "line one\\x0aFORGED line");
    expect("listen", u->listen, "10.0.0.1:7000");
    expect("job", u->jobs[0]->job, "plain-job");
    expect("coord", u->jobs[0]->coord, "x:1\\x0d\\x1b[2K");
    expect("nodes[0]", u->jobs[0]->nodes[0], "10.0.0.1:7000");
    expect("nodes[1]", u->jobs[0]->nodes[1], "evil\\x1b]0;owned\\x07:1");
    expect("peer reason", u->peers[0]->reason, "bad \\xff\\xfe bytes, good \xc3\xa9");
    expect("empty state", u->peers[0]->state, "");
    nexar__ctl_reply__free_unpacked(u, NULL);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
