/*
 * fuzz_config.c - libFuzzer target for nexard's config file parser,
 * nx_config_load_file() (daemon/base/config.c): `key = value` lines, # comments.
 *
 * Input: the file.  It goes through a memfd (the parser takes a path) onto the
 * defaults, as nexard -c FILE does.  A file that loads must leave every setting inside
 * the range config.h and docs/configuration.md promise (the daemon sizes its shm
 * segments and rings from them without checking again); loading it a second time must
 * change nothing.  A refused file must say where and why, "PATH:LINE: reason", with LINE
 * a line of the file, and the file cut before that line must load.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "fuzz.h"

static int memfd = -1;
static char path[64];

static void put_file(const uint8_t *d, size_t n)
{
    if (memfd < 0) {
        memfd = memfd_create("fuzz_config", 0);
        CHECK(memfd >= 0);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    }
    CHECK(ftruncate(memfd, 0) == 0);
    CHECK(n == 0 || pwrite(memfd, d, n, 0) == (ssize_t)n);
}

static int pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static void check_text(const char *s, int may_be_null)
{
    if (!s) {
        CHECK(may_be_null);
        return;
    }
    CHECK(s[0] != '\0'); /* an empty value unsets, it never leaves "" */
}

/* The promises of config.h for a configuration that loaded. */
static void promises(const struct nx_config *c)
{
    check_text(c->socket_path, 0);
    CHECK(strlen(c->socket_path) < 108); /* sun_path */
    check_text(c->runtime_dir, 0);
    CHECK(c->log_level >= NX_LOG_DEBUG && c->log_level <= NX_LOG_ERROR);
    CHECK(c->slot_bytes >= 4096 && c->slot_bytes <= (1u << 30) && c->slot_bytes % 64 == 0);
    CHECK(c->slots >= 1 && c->slots <= 64);
    CHECK(c->heap_bytes <= (64ull << 30) && c->heap_bytes % 64 == 0);
    CHECK(pow2(c->sq_entries) && c->sq_entries >= 8 && c->sq_entries <= 65536);
    CHECK(pow2(c->cq_entries) && c->cq_entries >= 8 && c->cq_entries <= 65536);
    CHECK(c->op_timeout_s >= 1 && c->op_timeout_s <= 7 * 86400);
    CHECK(c->p2p_eager_bytes <= 1ull << 40);
    CHECK(c->max_clients >= 1 && c->max_clients <= 1u << 20);
    CHECK(c->max_pending >= 16 && c->max_pending <= 1u << 24);
    CHECK(c->max_world_size >= 1 && c->max_world_size <= 1u << 20);
    CHECK(c->max_timeout_s >= 1 && c->max_timeout_s <= 86400 * 7);
    CHECK(c->workers >= 1 && c->workers <= 64);
    CHECK(c->peer_idle_timeout_ms >= 200 && c->peer_idle_timeout_ms <= 3600000);
    CHECK(c->keepalive_ms >= 50 && c->keepalive_ms <= 600000);
    CHECK(c->formation_timeout_s >= 1 && c->formation_timeout_s <= 86400);
    CHECK(c->quic_window_bytes >= 64u << 10 && c->quic_window_bytes <= 1ull << 32);
    CHECK(c->quic_stream_window_bytes >= 64u << 10 && c->quic_stream_window_bytes <= 1ull << 32);
    CHECK(c->quic_max_udp_payload >= 1200 && c->quic_max_udp_payload <= 65527);
    CHECK(c->inspect_max_conns >= 1 && c->inspect_max_conns <= 64);
    check_text(c->listen, 1);
    check_text(c->advertise, 1);
    check_text(c->tls_ca, 1);
    check_text(c->tls_cert, 1);
    check_text(c->tls_key, 1);
    check_text(c->algo, 1);
    CHECK(!strcmp(c->quic_cc, "bbr") || !strcmp(c->quic_cc, "cubic"));
    CHECK(c->n_allow_uids <= NX_CONFIG_MAX_UIDS);
    for (size_t i = 0; i < c->n_allow_uids; i++)
        CHECK(c->allow_uids[i] != (uid_t)-1);
}

static int same_text(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static int same(const struct nx_config *a, const struct nx_config *b)
{
    /* Every field but the strings compares as bytes: copy them and null the pointers.
     * memcpy, not assignment, so that padding is copied too. */
    struct nx_config x, y;
    memcpy(&x, a, sizeof(x));
    memcpy(&y, b, sizeof(y));
    const size_t offs[] = {
        offsetof(struct nx_config, config_path), offsetof(struct nx_config, socket_path),
        offsetof(struct nx_config, runtime_dir), offsetof(struct nx_config, listen),
        offsetof(struct nx_config, advertise), offsetof(struct nx_config, tls_ca),
        offsetof(struct nx_config, tls_cert), offsetof(struct nx_config, tls_key),
        offsetof(struct nx_config, algo), offsetof(struct nx_config, quic_cc),
    };
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        char **px = (char **)((char *)&x + offs[i]), **py = (char **)((char *)&y + offs[i]);
        if (!same_text(*px, *py))
            return 0;
        *px = *py = NULL;
    }
    memset(x.allow_uids + x.n_allow_uids, 0, sizeof(x.allow_uids) -
           x.n_allow_uids * sizeof(x.allow_uids[0]));
    memset(y.allow_uids + y.n_allow_uids, 0, sizeof(y.allow_uids) -
           y.n_allow_uids * sizeof(y.allow_uids[0]));
    return memcmp(&x, &y, sizeof(x)) == 0;
}

/* Where line `line` (1-based) starts: lines end at '\n', whatever their length; n when
 * the file has fewer lines. */
static size_t line_start(const uint8_t *d, size_t n, unsigned long line)
{
    size_t i = 0;
    for (unsigned long l = 1; l < line && i < n; i++)
        if (d[i] == '\n')
            l++;
    return i;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    struct nx_config c, c2;

    put_file(data, size);
    nx_config_defaults(&c);
    err[0] = '\0';
    int rv = nx_config_load_file(&c, path, err, sizeof(err));
    if (rv == 0) {
        promises(&c);
        /* Settings are assignments: the same file again changes nothing. */
        memcpy(&c2, &c, sizeof(c2));
        c2.socket_path = strdup(c.socket_path);
        c2.runtime_dir = strdup(c.runtime_dir);
        c2.config_path = NULL;
        c2.listen = c.listen ? strdup(c.listen) : NULL;
        c2.advertise = c.advertise ? strdup(c.advertise) : NULL;
        c2.tls_ca = c.tls_ca ? strdup(c.tls_ca) : NULL;
        c2.tls_cert = c.tls_cert ? strdup(c.tls_cert) : NULL;
        c2.tls_key = c.tls_key ? strdup(c.tls_key) : NULL;
        c2.algo = c.algo ? strdup(c.algo) : NULL;
        c2.quic_cc = strdup(c.quic_cc);
        CHECK(nx_config_load_file(&c2, path, err, sizeof(err)) == 0);
        CHECK(same(&c, &c2));
        nx_config_free(&c2);
    } else {
        CHECK(rv == -EINVAL);
        size_t plen = strlen(path);
        CHECK(!strncmp(err, path, plen) && err[plen] == ':');
        unsigned long line = strtoul(err + plen + 1, NULL, 10);
        size_t at = line_start(data, size, line);
        CHECK(line >= 1 && at < size);
        const char *why = strchr(err + plen + 1, ':');
        CHECK(why && why[1] == ' ' && why[2] != '\0');
        /* Every line before the refused one was accepted. */
        put_file(data, at);
        nx_config_free(&c);
        nx_config_defaults(&c);
        CHECK(nx_config_load_file(&c, path, err, sizeof(err)) == 0);
        promises(&c);
    }
    nx_config_free(&c);
    return 0;
}
