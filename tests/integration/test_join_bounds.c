/*
 * test_join_bounds.c - what a JOIN may cost the daemon (issue 11, local denial of service).
 *
 * A JOIN named any world size up to 2^20 and any formation deadline, and a pending one
 * held a rank table of that size: 100 JOINs of 1,048,576 ranks took the daemon to 585 MB.
 * Against a daemon with max_timeout_s=2:
 *  - 100 connections each JOIN a world of 1,048,576: every one is refused
 *    (NEXAR_ERR_INVALID naming max_world_size) and the daemon grows by less than 64 MB;
 *  - a JOIN of a world of max_world_size (65536 by default) is accepted and waits;
 *  - 100 such JOINs, each of its own job, all waiting at once, grow what the daemon
 *    allocated (nexarctl status's heap_bytes: malloc in use, touched or not) by less than
 *    4 MB: a pending job holds the ranks that joined, not a table of its world (that was
 *    512 KiB each, 51 MB for the 100).  VmData counted this before; it also counts the
 *    16 MiB by which nexard grows its heap at a time (M_TOP_PAD, main.c), and where that
 *    happened to fall inside the 100 JOINs (a CUDA build's heap layout) it failed;
 *  - a JOIN asking for a deadline of 0xffffffff ms is answered NEXAR_ERR_TIMEOUT within
 *    max_timeout_s plus 2 s.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctlrun.h"
#include "itest.h"
#include "nexar.pb-c.h"
#include "outfile.h"
#include "rawclient.h"

static int fails;

/* What the daemon allocated, touched or not (a table calloc'd and never written counts),
 * in KiB: nexarctl status's heap_bytes.  -1 when it cannot be read. */
static long heap_kb(const char *sock)
{
    char scratch[] = "/tmp/nxjb-XXXXXX";
    if (!mkdtemp(scratch))
        return -1;
    uint64_t v = 0;
    struct tj *j = tl_ctl_json(scratch, sock, "status", NULL);
    int bad = !j || tj_u64(j, "heap_bytes", &v);
    tj_free(j);
    hx_rmtree(scratch);
    return bad ? -1 : (long)(v >> 10);
}

/* A field of /proc/PID/status in kB: VmRSS (what is touched). */
static long status_kb(pid_t pid, const char *field)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *s = tl_read_file(path);
    const char *v = s ? strstr(s, field) : NULL;
    long kb = v ? atol(v + strlen(field)) : -1;
    free(s);
    return kb;
}

static long rss_kb(pid_t pid)
{
    return status_kb(pid, "VmRSS:");
}

/* HELLO, then JOIN; the connection (or -1). */
static int join(const char *sock, const char *job, uint32_t rank, uint32_t world,
                uint32_t timeout_ms)
{
    int fd = rc_connect(sock);
    const char *why = NULL;
    if (fd < 0 || rc_hello(fd, NEXAR__CLIENT_KIND__CLIENT_RANK, 5000, &why) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    uint8_t *p = NULL;
    size_t n = rc_pack_join(job, rank, world, timeout_ms, &p);
    int rv = rc_send_frame(fd, 3 /* JOIN */, p, (uint32_t)n);
    free(p);
    if (rv < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int main(void)
{
    hx_require_nexard();
    struct hx_daemon d;
    const char *args[] = {"--set", "max_timeout_s=2", NULL};
    if (hx_daemon_start(&d, args))
        return 1;
    char text[512];

    long before = rss_kb(d.pid);
    int refused = 0;
    for (int i = 0; i < 100; i++) {
        char job[32];
        snprintf(job, sizeof(job), "huge-%d", i);
        int fd = join(d.sock, job, 0, 1u << 20, 60000);
        int st = fd >= 0 ? rc_join_reply(fd, 5000, text, sizeof(text)) : -1;
        refused += st == NEXAR_ERR_INVALID && strstr(text, "max_world_size") != NULL;
        if (fd >= 0)
            close(fd);
    }
    long after = rss_kb(d.pid);
    if (refused != 100 || after - before > 64 * 1024) {
        tl_log("FAIL 100 JOINs of 1048576 ranks: %d refused naming max_world_size, the daemon "
               "grew by %ld KiB (%s)", refused, after - before, text);
        fails++;
    } else {
        tl_log("ok: 100 JOINs of 1048576 ranks refused (\"%s\"); the daemon grew by %ld KiB",
               text, after - before);
    }

    /* The default maximum is accepted and waits for its other ranks. */
    int big = join(d.sock, "max-world", 0, 65536, 60000);
    int st = big >= 0 ? rc_join_reply(big, 300, text, sizeof(text)) : -2;
    if (big < 0 || st != -1) {
        tl_log("FAIL a JOIN of 65536 ranks: %s (status %d: %s)",
               big < 0 ? "no connection" : "answered instead of waiting", st, text);
        fails++;
    } else {
        tl_log("ok: a JOIN of 65536 ranks (max_world_size) waits for its ranks");
    }

    /* Pending jobs cost what joined, not their world size. */
    int pend[100], held = 0;
    before = heap_kb(d.sock);
    for (int i = 0; i < 100; i++) {
        char job[32];
        snprintf(job, sizeof(job), "wide-%d", i);
        pend[i] = join(d.sock, job, 65535, 65536, 60000);
        held += pend[i] >= 0;
    }
    usleep(300 * 1000); /* the daemon has read every JOIN */
    after = heap_kb(d.sock);
    if (held != 100 || before < 0 || after < 0 || after - before > 4 * 1024) {
        tl_log("FAIL 100 pending JOINs of 65536-rank jobs: %d held, the daemon's heap grew "
               "by %ld KiB (%ld -> %ld)", held, after - before, before, after);
        fails++;
    } else {
        tl_log("ok: 100 pending JOINs of 65536-rank jobs (rank 65535 each): the daemon's heap "
               "grew by %ld KiB (%ld -> %ld)", after - before, before, after);
    }
    for (int i = 0; i < 100; i++)
        if (pend[i] >= 0)
            close(pend[i]);

    /* A deadline of 0xffffffff ms is cut to max_timeout_s. */
    double t0 = tl_now();
    int fd = join(d.sock, "forever", 0, 2, 0xffffffffu);
    st = fd >= 0 ? rc_join_reply(fd, 10000, text, sizeof(text)) : -2;
    double dt = tl_now() - t0;
    if (st != NEXAR_ERR_TIMEOUT || dt > 4.0) {
        tl_log("FAIL a JOIN asking for 0xffffffff ms: status %d after %.2f s: %s", st, dt,
               text);
        fails++;
    } else {
        tl_log("ok: a JOIN asking for 0xffffffff ms timed out after %.2f s (max_timeout_s=2): "
               "%s", dt, text);
    }
    if (fd >= 0)
        close(fd);
    if (big >= 0)
        close(big);
    if (hx_daemon_stop(&d))
        fails++;
    return fails ? 1 : 0;
}
