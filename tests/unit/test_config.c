/* test_config.c - nexard settings: defaults, file parsing, flags over file, errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "expect.h"
#include "log.h"


static char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/nexar-test-config-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        perror("mkstemp/write");
        exit(1);
    }
    close(fd);
    return path;
}

static void test_defaults(void)
{
    struct nx_config c;
    nx_config_defaults(&c);
    EXPECT(!strcmp(c.socket_path, "/run/nexar/nexard.sock"));
    EXPECT(!strcmp(c.runtime_dir, "/run/nexar"));
    EXPECT(c.log_level == NX_LOG_INFO);
    EXPECT(c.slot_bytes == 4u << 20);
    EXPECT(c.slots == 4);
    EXPECT(c.heap_bytes == 256u << 20);
    EXPECT(c.op_timeout_s == 300);
    EXPECT(!c.foreground);
    EXPECT(c.peer_reads);
    EXPECT(nx_config_uid_allowed(&c, 1000, 1000));
    EXPECT(!nx_config_uid_allowed(&c, 1000, 1001));
    /* Root joins no other uid's job, and no uid joins root's. */
    EXPECT(!nx_config_uid_allowed(&c, 1000, 0));
    EXPECT(!nx_config_uid_allowed(&c, 0, 1000));
    EXPECT(nx_config_uid_allowed(&c, 0, 0));
    nx_config_free(&c);
}

static void test_file(void)
{
    struct nx_config c;
    char err[256] = "";
    nx_config_defaults(&c);
    char *p = write_tmp("# comment\n\n socket = /tmp/x.sock  # trailing\n"
                        "slot_bytes = 64K\nslots=2\nheap_bytes = 1M\nlog_level = debug\n"
                        "allow_uids = 1001, 1002\nop_timeout_s = 7\npeer_reads = off\n");
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == 0);
    EXPECT(!strcmp(c.socket_path, "/tmp/x.sock"));
    EXPECT(c.slot_bytes == 65536);
    EXPECT(c.slots == 2);
    EXPECT(c.heap_bytes == 1u << 20);
    EXPECT(c.log_level == NX_LOG_DEBUG);
    EXPECT(c.op_timeout_s == 7);
    EXPECT(!c.peer_reads);
    EXPECT(c.n_allow_uids == 2);
    /* allow_uids is a group: its members share jobs among themselves only. */
    EXPECT(nx_config_uid_allowed(&c, 1001, 1002));
    EXPECT(nx_config_uid_allowed(&c, 1002, 1001));
    EXPECT(!nx_config_uid_allowed(&c, 1000, 1002));
    EXPECT(!nx_config_uid_allowed(&c, 1002, 1000));
    EXPECT(!nx_config_uid_allowed(&c, 1001, 0));
    EXPECT(!nx_config_uid_allowed(&c, 1000, 1003));
    unlink(p);

    p = write_tmp("slots = 2\nbogus_key = 1\n");
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == -EINVAL);
    EXPECT(strstr(err, ":2:") && strstr(err, "unknown key 'bogus_key'"));
    unlink(p);

    /* One slot would hold a receive with nothing left for the send it waits on. */
    p = write_tmp("slots = 1\n");
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == -EINVAL);
    EXPECT(strstr(err, "slots: bad value '1'") && strstr(err, "2 to 64"));
    unlink(p);

    p = write_tmp("slot_bytes = 100\n"); /* below 4096 and not a multiple of 64 */
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == -EINVAL);
    EXPECT(strstr(err, "slot_bytes") != NULL);
    unlink(p);

    p = write_tmp("sq_entries = 100\n"); /* not a power of two */
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == -EINVAL);
    unlink(p);

    p = write_tmp("just words\n");
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == -EINVAL);
    EXPECT(strstr(err, "expected 'key = value'") != NULL);
    unlink(p);

    /* A comment longer than any buffer stays a comment: its tail must not become a
     * line of its own and set slots. */
    char *text = malloc(5000);
    memcpy(text, "slots = 3\n# ", 12);
    memset(text + 12, 'x', 4000);
    strcpy(text + 4012, "slots = 7\nlog_level = warn\n");
    p = write_tmp(text);
    free(text);
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == 0);
    EXPECT(c.slots == 3 && c.log_level == NX_LOG_WARN);
    unlink(p);

    /* A NUL byte hid the rest of its line; now the line is refused, by number. */
    p = write_tmp("slots = 2\nslots = 5 X slots = 9\n");
    FILE *f = fopen(p, "r+");
    EXPECT(f && fseek(f, 20, SEEK_SET) == 0 && fputc('\0', f) == 0 && fclose(f) == 0);
    EXPECT(nx_config_load_file(&c, p, err, sizeof(err)) == -EINVAL);
    EXPECT(strstr(err, ":2: a NUL byte in the line") != NULL);
    unlink(p);

    EXPECT(nx_config_load_file(&c, "/nonexistent/nexard.conf", err, sizeof(err)) == -ENOENT);
    EXPECT(nx_config_set(&c, "allow_uids", "*", err, sizeof(err)) == 0);
    EXPECT(nx_config_uid_allowed(&c, 1000, 4242));
    EXPECT(nx_config_set(&c, "allow_uids", "12x", err, sizeof(err)) == -EINVAL);
    EXPECT(nx_config_set(&c, "slot_bytes", "2G", err, sizeof(err)) == -EINVAL);
    EXPECT(nx_config_set(&c, "heap_bytes", "-1", err, sizeof(err)) == -EINVAL);
    EXPECT(nx_config_set(&c, "algo", "all_reduce=ring,barrier=dissemination", err,
                         sizeof(err)) == 0);
    EXPECT(c.algo && !strcmp(c.algo, "all_reduce=ring,barrier=dissemination"));
    /* The text is kept as given: nexard checks it against the algorithms (test_daemon_cli). */
    EXPECT(nx_config_set(&c, "algo", "broadcast=hd", err, sizeof(err)) == 0);
    EXPECT(c.algo && !strcmp(c.algo, "broadcast=hd"));
    EXPECT(nx_config_set(&c, "algo", "", err, sizeof(err)) == 0 && c.algo == NULL);
    nx_config_free(&c);
}

static void test_args(void)
{
    struct nx_config c;
    char err[256] = "";
    nx_config_defaults(&c);
    char *p = write_tmp("socket = /tmp/from-file.sock\nslots = 8\n");
    char path[64];
    snprintf(path, sizeof(path), "%s", p);
    /* The flag comes before -c, and still wins over the file. */
    char *argv[] = {"nexard", "--socket", "/tmp/from-flag.sock", "-c", path, "-f",
                    "--set", "slot_bytes=128K", NULL};
    EXPECT(nx_config_parse_args(&c, 8, argv, err, sizeof(err)) == 0);
    EXPECT(!strcmp(c.socket_path, "/tmp/from-flag.sock"));
    EXPECT(c.slots == 8);
    EXPECT(c.foreground);
    EXPECT(c.slot_bytes == 128u << 10);
    unlink(path);
    nx_config_free(&c);

    nx_config_defaults(&c);
    char *bad[] = {"nexard", "--slots", "0", NULL};
    EXPECT(nx_config_parse_args(&c, 3, bad, err, sizeof(err)) == -EINVAL);
    EXPECT(strstr(err, "slots") != NULL);
    char *unknown[] = {"nexard", "--frobnicate", NULL};
    EXPECT(nx_config_parse_args(&c, 2, unknown, err, sizeof(err)) == -EINVAL);
    char *extra[] = {"nexard", "stray", NULL};
    EXPECT(nx_config_parse_args(&c, 2, extra, err, sizeof(err)) == -EINVAL);
    nx_config_free(&c);
}

int main(void)
{
    nx_log_init(NX_LOG_ERROR, 0);
    test_defaults();
    test_file();
    test_args();
    if (failures) {
        fprintf(stderr, "test_config: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_config: all checks passed\n");
    return 0;
}
