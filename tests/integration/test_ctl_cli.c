/*
 * test_ctl_cli.c - nexarctl's command line and `nexarctl config`, exact text:
 *
 *  - help: `nexarctl help` and `--help` print the usage on stdout (exit 0), naming every
 *    command; a bare `nexarctl` prints the same and exits 1 (usage); `--json help` lists
 *    the commands as data;
 *  - --json usage errors: an unknown command, no command, a bad option value: one JSON
 *    object on stdout (command, status 1, status_name, error), the message on stderr,
 *    exit 1;
 *  - a missing --tls-ca file: its errno text ("No such file or directory") naming the
 *    path, not GnuTLS's "Error while reading file.", exit 1;
 *  - config: a daemon started with a config file and flags over it: every key of
 *    daemon/base/config.c is listed (read from the source), each with its value and
 *    source (default, config file, command line), in the table and in JSON; a config
 *    file touched after the start, then removed, makes the sources "config file or
 *    command line" with a note saying why.
 *
 * Environment (meson): NEXARD, NEXARCTL, SRCDIR (the source tree, for config.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "ctlrun.h"
#include "itest.h"

static int fails;
static char g_scratch[256];

static struct tl_ctl *ctl(const char *const *args)
{
    static struct tl_ctl r;
    tl_ctl_run(&r, g_scratch, args, 20);
    return &r;
}

#define EXPECT_EQ(got, want, what)                                                       \
    EXPECT_TRUE(fails, !strcmp((got), (want)), "%s:\n--- got\n%s--- want\n%s", (what),     \
                (got), (want))

static const char *const commands[] = {"status", "jobs", "comms", "ops", "stats", "peers",
                                       "config", "reload", "peer-test", "certs", "help"};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void section_help(void)
{
    static char help[sizeof(((struct tl_ctl *)0)->out)];
    const char *a_help[] = {"help", NULL}, *a_dash[] = {"--help", NULL}, *a_bare[] = {NULL};
    struct tl_ctl *r = ctl(a_help);
    memcpy(help, r->out, sizeof(help)); /* NUL-terminated by tl_ctl_run */
    EXPECT_TRUE(fails, r->rc == 0 && !r->err[0], "help: exit %d, stderr %s", r->rc, r->err);
    EXPECT_TRUE(fails, !strncmp(help, "Usage: nexarctl [--socket PATH] [--json] [--timeout S] "
                                      "COMMAND\n", 63),
                "help does not start with the usage line:\n%s", help);
    static const char *const lines[] = {
        "\n  status   the daemon: version, uptime, clients, memory\n",
        "\n  jobs     jobs and their ranks\n",
        "\n  comms    communicators and their ranks\n",
        "\n  ops      operations in flight and the ranks they wait for\n",
        "\n  stats    counters since the daemon started\n",
        "\n  peers    other daemons: state, RTT, window, traffic, losses, cipher\n",
        "\n  config   the settings in effect, and where each one came from\n",
        "\n  peer-test ADDR [--bytes N] [--streams K] [--msg-bytes M]\n",
        "\n  certs ca --out DIR [--days N] [--name CN] [--force]\n",
        "\n  certs node --ca DIR --name NAME [--ip A]... [--dns D]... --out DIR [--days N]\n",
        "\n  certs operator --ca DIR --name NAME --out DIR [--days N] [--force]\n",
        "\n  help     this text (also -h, --help)\n",
        "\nWithout a command, nexarctl prints this text and exits 1.\n",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_TRUE(fails, strstr(help, lines[i]), "help lacks the line%s", lines[i]);
    r = ctl(a_dash);
    EXPECT_TRUE(fails, r->rc == 0, "--help: exit %d", r->rc);
    EXPECT_EQ(r->out, help, "--help is not the text of help");
    r = ctl(a_bare);
    EXPECT_TRUE(fails, r->rc == NEXAR_ERR_INVALID && !r->err[0],
                "a bare nexarctl: exit %d (want 1), stderr %s", r->rc, r->err);
    EXPECT_EQ(r->out, help, "a bare nexarctl does not print the text of help");

    const char *a_jhelp[] = {"--json", "help", NULL};
    r = ctl(a_jhelp);
    char why[200];
    struct tj *v = tj_parse(r->out, why, sizeof(why));
    EXPECT_TRUE(fails, r->rc == 0 && v && tj_len(v, "commands") == (long)NCOMMANDS,
                "--json help: exit %d, %s: %s", r->rc, v ? "parsed" : why, r->out);
    for (size_t i = 0; v && i < NCOMMANDS; i++) {
        char p[64];
        snprintf(p, sizeof(p), "commands[%zu].name", i);
        const char *n = tj_str(v, p);
        EXPECT_TRUE(fails, n && !strcmp(n, commands[i]), "--json help: command %zu is %s, "
                    "want %s", i, n ? n : "-", commands[i]);
    }
    tj_free(v);
    tl_log("help: the usage names every command; help and --help exit 0, bare exits 1");
}

static void section_json_errors(void)
{
    const char *a1[] = {"--json", "bogus", NULL};
    struct tl_ctl *r = ctl(a1);
    EXPECT_TRUE(fails, r->rc == NEXAR_ERR_INVALID, "--json bogus: exit %d", r->rc);
    EXPECT_EQ(r->out, "{\"command\":\"bogus\",\"status\":1,\"status_name\":\"NEXAR_ERR_INVALID\","
                      "\"error\":\"unknown command: bogus\"}\n", "--json bogus: stdout");
    EXPECT_EQ(r->err, "nexarctl: unknown command: bogus\nTry 'nexarctl help'.\n",
              "--json bogus: stderr");
    const char *a2[] = {"bogus", "-j", NULL}; /* --json after the command counts too */
    r = ctl(a2);
    EXPECT_TRUE(fails, r->rc == NEXAR_ERR_INVALID && strstr(r->out, "\"unknown command: bogus\""),
                "bogus -j: exit %d, %s", r->rc, r->out);
    const char *a3[] = {"--json", NULL};
    r = ctl(a3);
    EXPECT_TRUE(fails, r->rc == NEXAR_ERR_INVALID, "--json alone: exit %d", r->rc);
    EXPECT_EQ(r->out, "{\"command\":null,\"status\":1,\"status_name\":\"NEXAR_ERR_INVALID\","
                      "\"error\":\"no command (try 'nexarctl help')\"}\n", "--json alone");
    const char *a4[] = {"--timeout", "soon", "--json", "status", NULL};
    r = ctl(a4);
    EXPECT_TRUE(fails, r->rc == NEXAR_ERR_INVALID, "--timeout soon: exit %d", r->rc);
    EXPECT_EQ(r->out, "{\"command\":null,\"status\":1,\"status_name\":\"NEXAR_ERR_INVALID\","
                      "\"error\":\"--timeout expects seconds, more than 0: soon\"}\n",
              "--timeout soon --json");
    tl_log("json errors: unknown command, none, a bad value: one object, exit 1");
}

static void section_missing_ca(void)
{
    const char *a[] = {"--remote", "127.0.0.1:9", "--tls-ca", "/nonexistent/ca.pem",
                       "--tls-cert", "", "status", NULL};
    struct tl_ctl *r = ctl(a);
    EXPECT_TRUE(fails, r->rc == NEXAR_ERR_INVALID, "missing CA: exit %d", r->rc);
    EXPECT_EQ(r->err, "nexarctl: --tls-ca /nonexistent/ca.pem: No such file or directory\n",
              "missing CA: stderr");
    const char *aj[] = {"--json", "--remote", "127.0.0.1:9", "--tls-ca", "/nonexistent/ca.pem",
                        "--tls-cert", "", "status", NULL};
    r = ctl(aj);
    EXPECT_EQ(r->out, "{\"command\":\"status\",\"status\":1,\"status_name\":"
                      "\"NEXAR_ERR_INVALID\",\"error\":\"--tls-ca /nonexistent/ca.pem: No such "
                      "file or directory\"}\n", "missing CA --json");
    tl_log("missing CA: %s", r->err);
}

/* --remote takes addr.h's grammar, as NEXAR_COORD, rank tables and peer-test do: it once
 * had its own, which took a v4 literal in brackets, '/' and '@' in a host, port 0 and
 * hosts no daemon could be named by. */
static void section_remote_addr(void)
{
    static const char *const bad[] = {"[127.0.0.1]:7000", "host/x:7000", "user@host:7000",
                                      "127.0.0.1:0", ":7000", "::1:7000", "127.0.0.1:",
                                      "127.0.0.1:65536",
                                      "a-host-name-of-sixty-four-bytes-is-one-more-than-"
                                      "addr-h-allows:7", NULL};
    for (size_t i = 0; bad[i]; i++) {
        const char *a[] = {"--remote", bad[i], "--tls-ca", "/nonexistent/ca.pem",
                           "--tls-cert", "", "status", NULL};
        struct tl_ctl *r = ctl(a);
        char want[256];
        snprintf(want, sizeof(want), "nexarctl: %s: not HOST:PORT or [V6]:PORT (a port from "
                 "1, at most 63 bytes)\n", bad[i]);
        EXPECT_TRUE(fails, r->rc == NEXAR_ERR_INVALID, "--remote %s: exit %d", bad[i], r->rc);
        EXPECT_EQ(r->err, want, "--remote refusal");
    }
    /* What it takes goes on to the CA (missing here). */
    static const char *const good[] = {"127.0.0.1:9", "[::1]:9", "localhost:9", NULL};
    for (size_t i = 0; good[i]; i++) {
        const char *a[] = {"--remote", good[i], "--tls-ca", "/nonexistent/ca.pem",
                           "--tls-cert", "", "status", NULL};
        struct tl_ctl *r = ctl(a);
        EXPECT_EQ(r->err, "nexarctl: --tls-ca /nonexistent/ca.pem: No such file or directory\n",
                  "--remote accepted");
    }
    tl_log("--remote: addr.h's grammar, every refusal named");
}

/* ---- config ------------------------------------------------------------------------- */

/* Every key nx_config_set takes, read from daemon/base/config.c; n keys in *n. */
static int source_keys(char keys[][64], int max)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/daemon/base/config.c", getenv("SRCDIR"));
    FILE *f = fopen(path, "r");
    if (!f) {
        tl_log("FAIL: %s: %s", path, strerror(errno));
        fails++;
        return 0;
    }
    static const char *const marks[] = {"SIZE_KEY(\"", "strcmp(key, \"", "{\"", NULL};
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        for (int m = 0; marks[m]; m++) {
            const char *p = strstr(line, marks[m]);
            /* {"listen", offsetof(struct nx_config, ...)}: the table of string keys */
            if (!p || (m == 2 && !strstr(line, "offsetof(struct nx_config")))
                continue;
            p += strlen(marks[m]);
            size_t len = strcspn(p, "\"");
            if (len && len < 64 && n < max) {
                memcpy(keys[n], p, len);
                keys[n++][len] = '\0';
            }
        }
    }
    fclose(f);
    return n;
}

/* key's value and source in the config JSON. */
static void entry(const struct tj *v, const char *key, const char **value, const char **src)
{
    *value = *src = NULL;
    for (long i = 0; i < tj_len(v, "config"); i++) {
        char p[64];
        snprintf(p, sizeof(p), "config[%ld].key", i);
        const char *k = tj_str(v, p);
        if (!k || strcmp(k, key))
            continue;
        snprintf(p, sizeof(p), "config[%ld].value", i);
        *value = tj_str(v, p);
        snprintf(p, sizeof(p), "config[%ld].source", i);
        *src = tj_str(v, p);
    }
}

static void expect_entry(const struct tj *v, const char *key, const char *value,
                         const char *src, const char *when)
{
    const char *gv, *gs;
    entry(v, key, &gv, &gs);
    EXPECT_TRUE(fails, gv && gs && !strcmp(gv, value) && !strcmp(gs, src),
                "config %s: %s = \"%s\" (%s), want \"%s\" (%s)", when, key, gv ? gv : "-",
                gs ? gs : "-", value, src);
}

static void section_config(void)
{
    char cfg[320];
    snprintf(cfg, sizeof(cfg), "%s/nexard.conf", g_scratch);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "# test_ctl_cli\nslots = 8\nallow_uids = 1000, 1001\nop_timeout_s = 300\n");
    fclose(f);
    /* Made an hour ago: written before the daemon started, as a real one is. */
    struct utimbuf old = {time(NULL) - 3600, time(NULL) - 3600};
    utime(cfg, &old);
    const char *args[] = {"-c", cfg, "--set", "slots=16", "--set", "heap_bytes=1M", NULL};
    struct hx_daemon d;
    if (hx_daemon_start(&d, args)) {
        fails++;
        return;
    }
    const char *a_json[] = {"-s", d.sock, "--json", "config", NULL};
    const char *a_table[] = {"-s", d.sock, "config", NULL};
    struct tl_ctl *r = ctl(a_json);
    char why[200];
    struct tj *v = tj_parse(r->out, why, sizeof(why));
    EXPECT_TRUE(fails, r->rc == 0 && v, "--json config: exit %d, %s", r->rc, v ? "" : why);
    if (!v)
        goto out;
    const char *file = tj_str(v, "config_file");
    const struct tj *note = tj_at(v, "config_note");
    EXPECT_TRUE(fails, file && !strcmp(file, cfg) && note && note->type == TJ_NULL,
                "config: config_file %s (want %s), a note", file ? file : "-", cfg);
    /* Every key of config.c, and nothing else. */
    static char keys[64][64];
    int n = source_keys(keys, 64);
    EXPECT_TRUE(fails, n >= 30 && tj_len(v, "config") == n,
                "config lists %ld keys, config.c has %d", tj_len(v, "config"), n);
    for (int i = 0; i < n; i++) {
        const char *gv, *gs;
        entry(v, keys[i], &gv, &gs);
        EXPECT_TRUE(fails, gv && gs, "config lacks the key %s of config.c", keys[i]);
    }
    expect_entry(v, "slots", "16", "command line", "(flag over the file)");
    expect_entry(v, "heap_bytes", "1048576", "command line", "(--set)");
    expect_entry(v, "allow_uids", "1000,1001", "config file", "(file)");
    expect_entry(v, "op_timeout_s", "300", "default", "(the file repeats the default)");
    expect_entry(v, "sq_entries", "256", "default", "(default)");
    expect_entry(v, "socket", d.sock, "command line", "(--socket)");
    expect_entry(v, "listen", "", "default", "(unset)");
    expect_entry(v, "inspect", "on", "default", "(default)");
    tj_free(v);

    r = ctl(a_table);
    char first[400];
    snprintf(first, sizeof(first), "config file %s\nKEY ", cfg);
    EXPECT_TRUE(fails, r->rc == 0 && !strncmp(r->out, first, strlen(first)),
                "config table starts\n%s", r->out);
    char sockrow[300];
    snprintf(sockrow, sizeof(sockrow), "socket %s command line", d.sock);
    const char *rows[] = {"KEY VALUE SOURCE", "slots 16 command line",
                          "allow_uids 1000,1001 config file", "heap_bytes 1048576 command line",
                          "listen - default", "inspect on default", sockrow};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        EXPECT_TRUE(fails, tl_has_row(r->out, rows[i]), "config table lacks \"%s\":\n%s", rows[i],
                    r->out);
    EXPECT_TRUE(fails, !strstr(r->out, "note:"), "config table with a note:\n%s", r->out);
    tl_log("config: every key, value and source, table and JSON");

    /* Touched after the start: the file may no longer say what it said then. */
    struct utimbuf later = {time(NULL) + 1, time(NULL) + 1};
    utime(cfg, &later);
    r = ctl(a_json);
    v = tj_parse(r->out, why, sizeof(why));
    char want[600];
    snprintf(want, sizeof(want), "%s changed after nexard started: values that are not "
             "defaults came from it or from the command line", cfg);
    const char *gnote = v ? tj_str(v, "config_note") : NULL;
    EXPECT_TRUE(fails, gnote && !strcmp(gnote, want), "config note after a touch: %s",
                gnote ? gnote : "-");
    if (v) {
        expect_entry(v, "slots", "16", "config file or command line", "(file touched)");
        expect_entry(v, "sq_entries", "256", "default", "(file touched)");
    }
    tj_free(v);
    unlink(cfg);
    r = ctl(a_json);
    v = tj_parse(r->out, why, sizeof(why));
    snprintf(want, sizeof(want), "the config file cannot be read again (%s: No such file or "
             "directory): values that are not defaults came from it or from the command line",
             cfg);
    gnote = v ? tj_str(v, "config_note") : NULL;
    EXPECT_TRUE(fails, gnote && !strcmp(gnote, want), "config note without the file: %s",
                gnote ? gnote : "-");
    if (v)
        expect_entry(v, "allow_uids", "1000,1001", "config file or command line", "(no file)");
    tj_free(v);
    r = ctl(a_table);
    snprintf(want, sizeof(want), "\nnote: the config file cannot be read again (%s: No such "
             "file or directory): values that are not defaults came from it or from the "
             "command line\n", cfg);
    EXPECT_TRUE(fails, strstr(r->out, want), "config table lacks the note:\n%s", r->out);
    tl_log("config: a touched, then removed config file: the sources say so");
out:
    EXPECT_TRUE(fails, hx_daemon_stop(&d) == 0, "nexard did not stop cleanly");
}

int main(void)
{
    hx_require_nexard();
    tl_ctl_path();
    if (!getenv("SRCDIR")) {
        fprintf(stderr, "SKIP: $SRCDIR is not set (run through meson test)\n");
        return HX_SKIP;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_scratch, sizeof(g_scratch), "%s/ctl_cli.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_scratch)) {
        perror("mkdtemp");
        return 1;
    }
    section_help();
    section_json_errors();
    section_missing_ca();
    section_remote_addr();
    section_config();
    hx_rmtree(g_scratch);
    tl_log("%s (%d failure(s))", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
