/*
 * inspect_test.h - helpers of test_inspect.c (nexard's HTTP/3 inspection endpoint and
 * nexarctl --remote): certificates made by `nexarctl certs`, daemons listening with
 * them, nexarctl runs local and remote, JSON reports compared field by field.
 *
 * Environment (meson): NEXARD, NEXARCTL, CLUSTER_RANK, CERTS_SH (cluster_util.c's
 * needs), INSPECT_RANK (inspect_rank.c).
 */
#ifndef IT_INSPECT_TEST_H
#define IT_INSPECT_TEST_H

#include <stddef.h>
#include <sys/types.h>

#include "cluster_util.h"
#include "ctlrun.h"
#include "h3c.h"
#include "tjson.h"

extern int it_fails;

#define IT_CHECK(cond, ...)                                                             \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            tl_log("FAIL: " __VA_ARGS__);                                               \
            it_fails++;                                                                 \
        }                                                                               \
    } while (0)

struct it_node {
    struct hx_daemon d;
    char addr[64]; /* its QUIC endpoint, 127.0.0.1:PORT */
    char name[16];
};

/* With nexarctl certs, under dir: ca/ (the cluster CA), a/ b/ c/ d/ (nodes, 127.0.0.1),
 * ops/ (an operator's certificate from the same CA), fca/ and evil/ (another CA and a
 * certificate it signed).  0 or -1 (logged). */
int it_certs_make(const char *dir);
/* dir/rel of it_certs_make's directory. */
const char *it_cert(const char *rel);

/* Starts a daemon with node certificate <name>/ listening on 127.0.0.1:0, plus extra
 * args (NULL-terminated, may be NULL), log level debug; learns its address. */
int it_node_start(struct it_node *n, const char *name, const char *const *extra);

/* nexarctl --remote n->addr with tls (--tls-* args, NULL-terminated; NULL: the operator's
 * certificate) and then args.  r->rc is the exit status. */
int it_remote(struct tl_ctl *r, const struct it_node *n, const char *const *tls,
              const char *const *args);
/* --json cmd, remote (with the operator's certificate) or local: the parsed object or
 * NULL (logged).  *rc: the exit status. */
struct tj *it_remote_json(const struct it_node *n, const char *cmd, int *rc);
struct tj *it_local_json(const struct it_node *n, const char *cmd, int *rc);

/* h3c options for n with the operator's certificate, 10 s. */
void it_h3_opts(struct nxt_h3c_opts *o, const struct it_node *n);

/* 1 when a and b are equal field by field, except members named in skip (NULL-terminated,
 * may be NULL).  Otherwise 0 with the first difference's path in where. */
int it_same(const struct tj *a, const struct tj *b, const char *const *skip, char *where,
            size_t wl);

/* Occurrences of needle in n's log. */
int it_log_count(const struct it_node *n, const char *needle);

/* The job across two daemons while a is inspected remotely (inspect_job.c). */
void it_job_section(struct it_node *a, struct it_node *b);

/* The endpoint's JSON on an idle daemon a (inspect_json.c). */
void it_json_section(const struct it_node *a);
/* GET /v1/jobs?format=json on a while job runs with n ranks of these pids. */
void it_json_job(const struct it_node *a, const char *job, const pid_t *pids, int n);

#endif
