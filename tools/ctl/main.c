/*
 * main.c - nexarctl: one CTL request to nexard, one answer printed.
 *
 * The exit status is a nexar_status_t (0 on success), so scripts can tell "no
 * daemon" (2, NEXAR_ERR_UNAVAILABLE) from "permission denied" (9) or a hung
 * daemon (4, NEXAR_ERR_TIMEOUT).  Usage errors exit 1 (NEXAR_ERR_INVALID).
 *
 * `nexarctl help` prints the usage (every command) on stdout and exits 0; a bare
 * `nexarctl` prints the same and exits 1, since it did nothing.  With --json every
 * failure, usage errors included, is also one JSON object on stdout.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "certs_cmd.h"
#include "conn.h"
#include "ctl.h"
#include "frame.h"
#include "nexar.h"
#include "status.h"
#include "text_escape.h"
#include "util.h"

static const struct nxc_command commands[] = {
    {"status", NEXAR__CTL_COMMAND__CTL_STATUS, "the daemon: version, uptime, clients, memory",
     nxc_status_human},
    {"jobs", NEXAR__CTL_COMMAND__CTL_JOBS, "jobs and their ranks", nxc_jobs_human},
    {"comms", NEXAR__CTL_COMMAND__CTL_COMMS, "communicators and their ranks", nxc_comms_human},
    {"ops", NEXAR__CTL_COMMAND__CTL_OPS, "operations in flight and the ranks they wait for",
     nxc_ops_human},
    {"stats", NEXAR__CTL_COMMAND__CTL_STATS, "counters since the daemon started",
     nxc_stats_human},
    {"peers", NEXAR__CTL_COMMAND__CTL_PEERS,
     "other daemons: state, RTT, window, traffic, losses, cipher", nxc_peers_human},
    {"config", NEXAR__CTL_COMMAND__CTL_CONFIG,
     "the settings in effect, and where each one came from", nxc_config_human},
    {"reload", NEXAR__CTL_COMMAND__CTL_RELOAD,
     "reread the TLS files, hand peer connections over (root, nexard's uid)",
     nxc_reload_human},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "Usage: nexarctl [--socket PATH] [--json] [--timeout S] COMMAND\n"
               "       nexarctl --remote HOST:PORT [--tls-ca F --tls-cert F --tls-key F]\n"
               "                [--json] [--timeout S] COMMAND\n"
               "Inspects a running nexard.\n\nCommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  peer-test ADDR [--bytes N] [--streams K] [--msg-bytes M]\n"
               "           send N bytes (default 256M) to the daemon at ADDR over K streams\n"
               "           (default 1) and have it verify every byte\n");
    nxc_certs_usage(f);
    fprintf(f, "  help     this text (also -h, --help)\n");
    fprintf(f,
"\nOptions:\n"
"  -s, --socket PATH  the daemon's socket (default $NEXAR_SOCKET, else\n"
"                     " NXT_DEFAULT_SOCKET ")\n"
"  -r, --remote ADDR  ask the daemon at HOST:PORT (its QUIC port) over HTTP/3\n"
"                     instead of a local socket (status jobs comms ops stats peers\n"
"                     config)\n"
"      --tls-ca F     with --remote: the cluster CA (default $NEXAR_TLS_CA, else\n"
"                     /etc/nexar/tls/ca.pem)\n"
"      --tls-cert F   our certificate, signed by that CA (default $NEXAR_TLS_CERT,\n"
"                     else /etc/nexar/tls/node.pem when it exists; \"\": none)\n"
"      --tls-key F    its key (default $NEXAR_TLS_KEY, else /etc/nexar/tls/node-key.pem)\n"
"  -j, --json         print one JSON object instead of tables (errors too)\n"
"  -t, --timeout S    seconds to wait for the daemon (default 5)\n"
"  -h, --help         this text\n"
"      --version\n"
"\nWithout a command, nexarctl prints this text and exits 1.\n"
"\nExit status: the nexar_status_t: 0 success, 1 usage, 2 no daemon answers,\n"
"4 timeout, 8 not served by the daemon, 9 permission denied (or TLS refused),\n"
"10 protocol error, or the daemon's status.\n");
}

/* `nexarctl --json help`: the commands as data. */
static void usage_json(void)
{
    static const char *const more[][2] = {
        {"peer-test", "send bytes to the daemon at ADDR and have it verify every one"},
        {"certs", "make the cluster CA, node and operator certificates"},
        {"help", "the commands and options"},
    };
    struct nx_json j;
    nx_json_init(&j, stdout);
    nx_json_obj_begin(&j, NULL);
    nx_json_str(&j, "command", "help");
    nx_json_u64(&j, "status", 0);
    nx_json_arr_begin(&j, "commands");
    for (size_t i = 0; i < NCOMMANDS + sizeof(more) / sizeof(more[0]); i++) {
        nx_json_obj_begin(&j, NULL);
        nx_json_str(&j, "name", i < NCOMMANDS ? commands[i].name : more[i - NCOMMANDS][0]);
        nx_json_str(&j, "help", i < NCOMMANDS ? commands[i].help : more[i - NCOMMANDS][1]);
        nx_json_obj_end(&j);
    }
    nx_json_arr_end(&j);
    nx_json_obj_end(&j);
    nx_json_finish(&j);
}

/* A failure: text on stderr, and with --json also as an object on stdout, so a
 * script that parses stdout always gets one.  cmd NULL: no command was named. */
static int failed(bool json, const char *cmd, int status, const char *text)
{
    char safe[4 * 512 + 1]; /* the callers' texts are at most 512 bytes */
    nx_text_escape(text, safe, sizeof(safe));
    nxt_warn("%s", safe);
    if (json) {
        struct nx_json j;
        nx_json_init(&j, stdout);
        nx_json_obj_begin(&j, NULL);
        nx_json_str(&j, "command", cmd);
        nx_json_u64(&j, "status", (uint64_t)status);
        nx_json_str(&j, "status_name", nxt_status_name(status));
        nx_json_str(&j, "error", text);
        nx_json_obj_end(&j);
        nx_json_finish(&j);
    }
    return status;
}

/* For usage errors: whether --json was given anywhere, and the command named so far. */
static bool g_json;
static const char *g_cmd;

static void __attribute__((noreturn)) bad(const char *msg, const char *arg)
{
    char text[512];
    snprintf(text, sizeof(text), "%s%s%s", msg, arg ? ": " : "", arg ? arg : "");
    failed(g_json, g_cmd, NEXAR_ERR_INVALID, text);
    fprintf(stderr, "Try 'nexarctl help'.\n");
    exit(NEXAR_ERR_INVALID);
}

/* Sends the CtlRequest; on success *out is the decoded reply. */
static int query(int fd, Nexar__CtlCommand cmd, int timeout_ms, Nexar__CtlReply **out,
                 char *err, size_t errlen)
{
    Nexar__CtlRequest req = NEXAR__CTL_REQUEST__INIT;
    req.command = cmd;
    uint8_t buf[32];
    size_t n = nexar__ctl_request__pack(&req, buf);

    uint16_t type;
    uint8_t *payload = NULL;
    uint32_t len;
    int rv = nxt_request(fd, NX_MSG_CTL, buf, (uint32_t)n, timeout_ms, &type, &payload, &len,
                         err, errlen);
    if (rv < 0)
        return -rv;
    if (type == NX_MSG_ERROR) {
        rv = nxt_error_reply(payload, len, err, errlen);
    } else if (type != NX_MSG_CTL_REPLY) {
        snprintf(err, errlen, "the daemon answered CTL with frame type %u", type);
        rv = NEXAR_ERR_INTERNAL;
    } else if (!(*out = nexar__ctl_reply__unpack(NULL, len, payload))) {
        snprintf(err, errlen, "the daemon's CTL_REPLY does not decode");
        rv = NEXAR_ERR_INTERNAL;
    }
    free(payload);
    return rv;
}

static int print_reply(const struct nxc_command *cmd, bool json, Nexar__CtlReply *reply);

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},
        {"remote", required_argument, NULL, 'r'},
        {"tls-ca", required_argument, NULL, 'A'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    nxt_progname = "nexarctl";
    if (nxc_is_certs(argc, argv))
        return nxc_certs_main(argc, argv);
    if (nxc_is_peer_test(argc, argv))
        return nxc_peer_test_main(argc, argv);
    const char *socket_opt = NULL;
    struct nxc_remote remote = {NULL, NULL, NULL, NULL};
    double timeout_s = 5;
    int ch;
    /* A first pass for --json alone, so that a usage error before it (or an unknown
     * command) is a JSON object too.  optind = 0 restarts GNU getopt from scratch. */
    opterr = 0;
    optind = 0;
    while ((ch = getopt_long(argc, argv, ":s:r:jt:h", longopts, NULL)) != -1)
        g_json |= ch == 'j';
    optind = 0;
    while ((ch = getopt_long(argc, argv, ":s:r:jt:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': socket_opt = optarg; break;
        case 'r': remote.addr = optarg; break;
        case 'A': remote.ca = optarg; break;
        case 'C': remote.cert = optarg; break;
        case 'K': remote.key = optarg; break;
        case 'j': break;
        case 't':
            if (nxt_parse_seconds(optarg, &timeout_s) < 0 || timeout_s <= 0 ||
                timeout_s > 86400)
                bad("--timeout expects seconds, more than 0", optarg);
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("nexarctl %s\n", NEXAR_VERSION); return 0;
        case ':': bad("option needs an argument", argv[optind - 1]);
        default: bad("unknown option", argv[optind - 1]);
        }
    }
    bool json = g_json;
    if (optind >= argc) {
        /* A bare nexarctl: what it can do, and the usage status (it did nothing). */
        if (json)
            bad("no command (try 'nexarctl help')", NULL);
        usage(stdout);
        return NEXAR_ERR_INVALID;
    }
    g_cmd = argv[optind];
    if (!strcmp(argv[optind], "help")) {
        if (json)
            usage_json();
        else
            usage(stdout);
        return 0;
    }
    const struct nxc_command *cmd = NULL;
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[optind], commands[i].name))
            cmd = &commands[i];
    if (!cmd)
        bad("unknown command", argv[optind]);
    if (optind + 1 < argc)
        bad("one command at a time; unexpected", argv[optind + 1]);
    if (remote.addr && socket_opt)
        bad("--socket and --remote exclude each other", NULL);
    if (!remote.addr && (remote.ca || remote.cert || remote.key))
        bad("--tls-ca, --tls-cert and --tls-key go with --remote", NULL);
    if (remote.addr && cmd->command == NEXAR__CTL_COMMAND__CTL_RELOAD)
        bad("reload is asked of the daemon on this machine (its socket), not --remote",
            NULL);

    int timeout_ms = (int)(timeout_s * 1000);
    char err[512];
    Nexar__CtlReply *reply = NULL;
    int status;
    if (remote.addr) {
        status = nxc_remote_query(&remote, cmd->command, timeout_ms, &reply, err, sizeof(err));
    } else {
        const char *path = nxt_socket_path(socket_opt);
        int fd = nxt_connect(path, NEXAR__CLIENT_KIND__CLIENT_CTL, timeout_ms, NULL, err,
                             sizeof(err));
        if (fd < 0)
            return failed(json, cmd->name, -fd, err);
        status = query(fd, cmd->command, timeout_ms, &reply, err, sizeof(err));
        close(fd);
    }
    if (status)
        return failed(json, cmd->name, status, err);
    if (reply->status) {
        status = (int)reply->status;
        snprintf(err, sizeof(err), "%s: %s", cmd->name,
                 reply->error && *reply->error ? reply->error : nxt_status_text(status));
        nexar__ctl_reply__free_unpacked(reply, NULL);
        return failed(json, cmd->name, status, err);
    }
    return print_reply(cmd, json, reply);
}

/* Prints a reply (local or remote: the same CtlReply) as a table or JSON, frees it. */
static int print_reply(const struct nxc_command *cmd, bool json, Nexar__CtlReply *reply)
{
    if (json) {
        nx_ctl_json_report(stdout, cmd->name, cmd->command, reply);
    } else {
        nxc_escape_message(&reply->base);
        cmd->human(stdout, reply);
    }
    nexar__ctl_reply__free_unpacked(reply, NULL);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        nxt_warn("writing the output failed");
        return NEXAR_ERR_INTERNAL;
    }
    return 0;
}
