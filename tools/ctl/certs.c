/*
 * certs.c - `nexarctl certs ca` and `nexarctl certs node`.
 */
#include "certs_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cert_check.h"
#include "certs.h"
#include "nexar.h"
#include "util.h"

#define MAX_SANS 64

bool nxc_is_certs(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            return i + 1 < argc && !strcmp(argv[i + 1], "certs");
        if (a[0] != '-')
            return !strcmp(a, "certs");
        /* main()'s options that take a separate argument. */
        if (!strcmp(a, "-s") || !strcmp(a, "--socket") || !strcmp(a, "-t") ||
            !strcmp(a, "--timeout"))
            i++;
    }
    return false;
}

void nxc_certs_usage(FILE *f)
{
    fprintf(f,
"  certs ca --out DIR [--days N] [--name CN] [--force]\n"
"           create a cluster CA: DIR/" NXT_CERTS_CA_CERT ", DIR/" NXT_CERTS_CA_KEY " (0600)\n"
"  certs node --ca DIR --name NAME [--ip A]... [--dns D]... --out DIR [--days N]\n"
"           [--force]\n"
"           create a node certificate signed by that CA: DIR/" NXT_CERTS_NODE_CERT ",\n"
"           DIR/" NXT_CERTS_NODE_KEY " (0600) and a copy of " NXT_CERTS_CA_CERT "\n"
"  certs operator --ca DIR --name NAME --out DIR [--days N] [--force]\n"
"           create an operator's certificate (nexarctl --remote; never a peer):\n"
"           DIR/" NXT_CERTS_OPERATOR_CERT ", DIR/" NXT_CERTS_OPERATOR_KEY " (0600), " NXT_CERTS_CA_CERT "\n");
}

static void __attribute__((noreturn)) bad(const char *msg, const char *arg)
{
    nxt_warn("certs: %s%s%s", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "Usage:\n");
    nxc_certs_usage(stderr);
    exit(NEXAR_ERR_INVALID);
}

static int exit_status(int rv)
{
    switch (rv) {
    case -EACCES: return NEXAR_ERR_PERMISSION;
    case -EIO: return NEXAR_ERR_INTERNAL;
    default: return NEXAR_ERR_INVALID;
    }
}

static void report(const char *what, const struct nxt_certs_result *r)
{
    char when[64];
    nx_cert_time((time_t)r->not_after, when, sizeof(when));
    printf("%-8s certificate: %s\n", what, r->cert_path);
    printf("%-8s key:         %s (mode 0600)\n", what, r->key_path);
    printf("valid until:           %s%s\n", when, r->clamped ? " (cut to the CA's expiry)" : "");
    printf("SHA-256:               %s\n", r->fingerprint);
}

struct certs_opts {
    const char *out, *ca, *name;
    const char *dns[MAX_SANS], *ips[MAX_SANS];
    size_t ndns, nips;
    long days; /* 0: the default of the subcommand */
    bool force;
};

/* node: 'certs node' or 'certs operator' (both signed by --ca); op: the latter. */
static void parse(struct certs_opts *o, int argc, char **argv, bool node, bool op)
{
    static const struct option longopts[] = {
        {"out", required_argument, NULL, 'o'},
        {"days", required_argument, NULL, 'd'},
        {"name", required_argument, NULL, 'n'},
        {"ca", required_argument, NULL, 'c'},
        {"ip", required_argument, NULL, 'i'},
        {"dns", required_argument, NULL, 'D'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":o:d:n:c:i:D:fh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'o': o->out = optarg; break;
        case 'n': o->name = optarg; break;
        case 'f': o->force = true; break;
        case 'd':
            if (nxt_parse_long(optarg, 1, NXT_CERTS_MAX_DAYS, &o->days) < 0)
                bad("--days expects a whole number of days, 1..36500", optarg);
            break;
        case 'c':
            if (!node)
                bad("--ca belongs to 'certs node' and 'certs operator'", NULL);
            o->ca = optarg;
            break;
        case 'i':
        case 'D':
            if (!node || op)
                bad("--ip and --dns belong to 'certs node'", NULL);
            if ((ch == 'i' ? o->nips : o->ndns) >= MAX_SANS)
                bad("too many --ip or --dns (64 each at most)", NULL);
            if (ch == 'i')
                o->ips[o->nips++] = optarg;
            else
                o->dns[o->ndns++] = optarg;
            break;
        case 'h':
            printf("Usage:\n");
            nxc_certs_usage(stdout);
            exit(0);
        case ':': bad("option needs an argument", argv[optind - 1]);
        default: bad("unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bad("unexpected argument", argv[optind]);
    if (!o->out)
        bad("--out DIR is required", NULL);
    if (node && !o->ca)
        bad("--ca DIR (the directory of 'certs ca --out') is required", NULL);
    if (node && !o->name)
        bad(op ? "--name NAME (who the operator is) is required"
               : "--name NAME (the node's name) is required", NULL);
}

int nxc_certs_main(int argc, char **argv)
{
    /* Skip to "certs", then to the subcommand; main's options before it have no
     * meaning here. */
    int i = 1;
    while (i < argc && strcmp(argv[i], "certs"))
        i++;
    if (++i >= argc)
        bad("which one: 'certs ca', 'certs node' or 'certs operator'", NULL);
    const char *sub = argv[i];
    bool op = !strcmp(sub, "operator");
    bool node = op || !strcmp(sub, "node");
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
        printf("Usage:\n");
        nxc_certs_usage(stdout);
        return 0;
    }
    if (!node && strcmp(sub, "ca"))
        bad("unknown subcommand (ca, node, operator)", sub);

    struct certs_opts o = {0};
    parse(&o, argc - i, argv + i, node, op);
    struct nxt_certs_result res;
    char err[1024];
    int rv;
    if (!node) {
        struct nxt_ca_req req = {
            .out_dir = o.out,
            .name = o.name,
            .days = (unsigned)(o.days ? o.days : NXT_CERTS_CA_DAYS),
            .force = o.force,
        };
        rv = nxt_certs_make_ca(&req, &res, err, sizeof(err));
    } else {
        struct nxt_node_req req = {
            .ca_dir = o.ca,
            .out_dir = o.out,
            .name = o.name,
            .dns = o.dns,
            .ndns = o.ndns,
            .ips = o.ips,
            .nips = o.nips,
            .days = (unsigned)(o.days ? o.days : NXT_CERTS_NODE_DAYS),
            .force = o.force,
            .operator_role = op,
        };
        rv = nxt_certs_make_node(&req, &res, err, sizeof(err));
    }
    if (rv < 0) {
        nxt_warn("certs %s: %s", sub, err);
        return exit_status(rv);
    }
    report(op ? "operator" : node ? "node" : "CA", &res);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        nxt_warn("writing the output failed");
        return NEXAR_ERR_INTERNAL;
    }
    return 0;
}
