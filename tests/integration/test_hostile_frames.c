/*
 * test_hostile_frames.c - hostile bytes on the control socket.
 *
 * While a healthy job runs checked allreduces on the same daemon, raw clients send
 * garbage, a wrong magic, unsupported versions, non-zero flags, unknown types,
 * oversize lengths, truncated headers and payloads, payloads that do not decode,
 * JOIN before HELLO and absurd JOINs.  Each bad connection must be closed by the
 * daemon (an unsupported version first gets an ERROR frame with
 * NEXAR_ERR_UNSUPPORTED); the daemon must keep answering HELLO, the healthy job
 * must finish exact, a new job must work afterwards, and SIGTERM must give exit 0.
 * Positive controls: a HELLO fed one byte at a time, and two frames in one write.
 */
#include <stdlib.h>
#include <sys/socket.h>

#include "bgjob.h"
#include "itest.h"
#include "nexar.pb-c.h"
#include "rawclient.h"

#define MAGIC 0x3146584eu

static int fails;
static const char *g_sock;

static void alive(const char *after)
{
    if (rc_ping(g_sock, 5000) != 0) {
        tl_log("FAIL: the daemon no longer answers HELLO after: %s", after);
        fails++;
    }
}

/* Sends bytes on a fresh connection (optionally after a good HELLO), optionally
 * half-closes, and expects the daemon to close the connection within 5 s. */
static void expect_drop(const char *what, const void *bytes, size_t len, int hello_first,
                        int shut_wr)
{
    int fd = rc_connect(g_sock);
    if (fd < 0) {
        tl_log("FAIL %s: connect: %s", what, strerror(-fd));
        fails++;
        return;
    }
    const char *why = NULL;
    if (hello_first && rc_hello(fd, 2, 5000, &why)) {
        tl_log("FAIL %s: HELLO before the bad frame failed: %s", what, why);
        fails++;
        close(fd);
        return;
    }
    rc_send_raw(fd, bytes, len); /* the daemon may close before reading it all */
    if (shut_wr)
        shutdown(fd, SHUT_WR);
    if (rc_wait_closed(fd, 5000) != 0) {
        tl_log("FAIL %s: the daemon kept the connection open for 5 s", what);
        fails++;
    } else {
        tl_log("ok: %s -> connection closed", what);
    }
    close(fd);
    alive(what);
}

static void hdr_only(const char *what, uint32_t magic, uint16_t ver, uint16_t type, uint32_t len,
                     uint32_t flags, int hello_first)
{
    uint8_t h[16];
    rc_hdr(h, magic, ver, type, len, flags);
    expect_drop(what, h, 16, hello_first, 0);
}

/* An unsupported version (in the frame header, or in Hello.proto_version): an ERROR
 * frame with NEXAR_ERR_UNSUPPORTED, then close. */
static void bad_version(uint16_t ver, uint32_t hello_ver)
{
    char what[96];
    snprintf(what, sizeof(what), "HELLO with frame version %u, Hello.proto_version %u", ver,
             hello_ver);
    int fd = rc_connect(g_sock);
    if (fd < 0) {
        fails++;
        return;
    }
    uint8_t *p = NULL;
    size_t n = rc_pack_hello_v(2, hello_ver, &p);
    uint8_t *f = malloc(16 + n);
    rc_hdr(f, MAGIC, ver, 1, (uint32_t)n, 0);
    memcpy(f + 16, p, n);
    rc_send_raw(fd, f, 16 + n);
    free(f);
    free(p);
    struct rc_frame fr;
    int rv = rc_recv_frame(fd, &fr, 5000);
    if (rv == 0 && fr.type == 7) {
        Nexar__ErrorReply *e = nexar__error_reply__unpack(NULL, fr.length, fr.payload);
        if (!e || e->status != NEXAR_ERR_UNSUPPORTED) {
            tl_log("FAIL %s: ERROR frame with status %d, expected %d (UNSUPPORTED)", what,
                   e ? (int)e->status : -1, NEXAR_ERR_UNSUPPORTED);
            fails++;
        } else {
            tl_log("ok: %s -> ERROR NEXAR_ERR_UNSUPPORTED \"%s\"", what, e->error);
        }
        if (e)
            nexar__error_reply__free_unpacked(e, NULL);
        free(fr.payload);
    } else {
        tl_log("FAIL %s: expected an ERROR frame (UNSUPPORTED), got %s", what,
               rv == 0 ? "another frame type" : rv == -ECONNRESET ? "a plain close" : "nothing");
        fails++;
        if (rv == 0)
            free(fr.payload);
    }
    if (rc_wait_closed(fd, 5000)) {
        tl_log("FAIL %s: not closed after the ERROR frame", what);
        fails++;
    }
    close(fd);
    alive(what);
}

/* A JOIN that makes no sense: the daemon answers with an error (or closes); never OK. */
static void absurd_join(const char *what, const char *job, uint32_t rank, uint32_t world)
{
    int fd = rc_connect(g_sock);
    const char *why = NULL;
    if (fd < 0 || rc_hello(fd, 1, 5000, &why)) {
        tl_log("FAIL %s: could not say HELLO", what);
        fails++;
        if (fd >= 0)
            close(fd);
        return;
    }
    uint8_t *p = NULL;
    size_t n = rc_pack_join(job, rank, world, 1000, &p);
    rc_send_frame(fd, 3, p, (uint32_t)n);
    free(p);
    struct rc_frame fr;
    int rv = rc_recv_frame(fd, &fr, 5000);
    if (rv == 0 && fr.type == 4) {
        Nexar__JoinReply *jr = nexar__join_reply__unpack(NULL, fr.length, fr.payload);
        if (!jr || jr->status == 0) {
            tl_log("FAIL %s: JOIN_REPLY %s", what, jr ? "with status OK" : "does not decode");
            fails++;
        } else {
            tl_log("ok: %s -> JOIN_REPLY %s \"%s\"", what, tl_status_name((int)jr->status),
                   jr->error);
        }
        if (jr)
            nexar__join_reply__free_unpacked(jr, NULL);
    } else if (rv == 0 && fr.type == 7) {
        tl_log("ok: %s -> ERROR frame", what);
    } else if (rv == -ECONNRESET) {
        tl_log("ok: %s -> connection closed", what);
    } else {
        tl_log("FAIL %s: no answer within 5 s (rv %d, type %u)", what, rv, rv == 0 ? fr.type : 0);
        fails++;
    }
    if (rv == 0)
        free(fr.payload);
    close(fd);
    alive(what);
}

static void positive_controls(void)
{
    /* a HELLO one byte at a time */
    int fd = rc_connect(g_sock);
    uint8_t *p = NULL;
    size_t n = rc_pack_hello(2, &p);
    uint8_t *f = malloc(16 + n);
    rc_hdr(f, MAGIC, 1, 1, (uint32_t)n, 0);
    memcpy(f + 16, p, n);
    for (size_t i = 0; fd >= 0 && i < 16 + n; i++) {
        rc_send_raw(fd, f + i, 1);
        usleep(2000);
    }
    struct rc_frame fr;
    if (fd < 0 || rc_recv_frame(fd, &fr, 5000) || fr.type != 2) {
        tl_log("FAIL: a HELLO fed one byte at a time got no HELLO_REPLY");
        fails++;
    } else {
        tl_log("ok: HELLO fed one byte at a time -> HELLO_REPLY");
        free(fr.payload);
    }
    if (fd >= 0)
        close(fd);

    /* HELLO and CTL(status) in one write: both answered, in order */
    Nexar__CtlRequest cr = NEXAR__CTL_REQUEST__INIT;
    cr.command = NEXAR__CTL_COMMAND__CTL_STATUS;
    size_t cn = nexar__ctl_request__get_packed_size(&cr);
    uint8_t *two = malloc(32 + n + cn + 1);
    memcpy(two, f, 16 + n);
    rc_hdr(two + 16 + n, MAGIC, 1, 5, (uint32_t)cn, 0);
    nexar__ctl_request__pack(&cr, two + 32 + n);
    fd = rc_connect(g_sock);
    int ok = fd >= 0 && rc_send_raw(fd, two, 32 + n + cn) == 0;
    struct rc_frame a = {0}, b = {0};
    ok = ok && rc_recv_frame(fd, &a, 5000) == 0 && a.type == 2;
    ok = ok && rc_recv_frame(fd, &b, 5000) == 0 && b.type == 6;
    if (!ok) {
        tl_log("FAIL: HELLO + CTL(status) in one write: expected HELLO_REPLY then CTL_REPLY, "
               "got types %u, %u", a.type, b.type);
        fails++;
    } else {
        tl_log("ok: HELLO + CTL(status) in one write -> HELLO_REPLY, CTL_REPLY");
    }
    free(a.payload);
    free(b.payload);
    if (fd >= 0)
        close(fd);
    free(two);
    free(f);
    free(p);
}

int main(void)
{
    hx_require_nexard();
    struct hx_daemon d;
    if (hx_daemon_start(&d, (const char *const[]){"--slot-bytes", "65536", "--slots", "2", NULL}))
        return 1;
    g_sock = d.sock;
    struct bgjob bg;
    if (bgjob_start(&bg, &d, 2))
        return 1;

    /* connections held open (idle, or mid-frame) for the whole test */
    int held[64], nheld = 0;
    for (int i = 0; i < 48; i++)
        if ((held[nheld] = rc_connect(d.sock)) >= 0)
            nheld++;
    for (int i = 0; i < 8; i++) {
        int fd = rc_connect(d.sock);
        uint8_t h[16];
        rc_hdr(h, MAGIC, 1, 1, 100, 0);
        if (fd >= 0) {
            rc_send_raw(fd, h, i % 2 ? 16 : 9); /* a header, or part of one, then silence */
            held[nheld++] = fd;
        }
    }
    tl_log("%d idle or mid-frame connections held open during the test", nheld);

    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(tl_mix64(i) >> 13);
    expect_drop("4 KiB of garbage", junk, sizeof(junk), 0, 0);
    expect_drop("4 KiB of garbage after HELLO", junk, sizeof(junk), 1, 0);
    hdr_only("wrong magic", 0x12345678u, 1, 1, 0, 0, 0);
    hdr_only("non-zero flags", MAGIC, 1, 1, 0, 1, 0);
    hdr_only("unknown type 99", MAGIC, 1, 99, 0, 0, 0);
    hdr_only("type 0", MAGIC, 1, 0, 0, 0, 0);
    hdr_only("length NX_FRAME_MAX + 1", MAGIC, 1, 1, (1u << 20) + 1, 0, 0);
    hdr_only("length 0xffffffff", MAGIC, 1, 1, 0xffffffffu, 0, 0);
    hdr_only("length 0xffffffff after HELLO", MAGIC, 1, 5, 0xffffffffu, 0, 1);
    hdr_only("unknown type after HELLO", MAGIC, 1, 42, 0, 0, 1);
    hdr_only("daemon-only type (HELLO_REPLY) first", MAGIC, 1, 2, 0, 0, 0);
    expect_drop("7 header bytes then EOF", junk, 7, 0, 1);
    {
        uint8_t t[66];
        rc_hdr(t, MAGIC, 1, 1, 100, 0);
        memset(t + 16, 0x08, 50);
        expect_drop("truncated payload (50 of 100) then EOF", t, sizeof(t), 0, 1);
    }
    {
        uint8_t t[16 + 24];
        rc_hdr(t, MAGIC, 1, 1, 24, 0);
        memset(t + 16, 0xff, 24);
        expect_drop("HELLO whose payload does not decode", t, sizeof(t), 0, 0);
        rc_hdr(t, MAGIC, 1, 5, 24, 0);
        expect_drop("CTL whose payload does not decode", t, sizeof(t), 1, 0);
        rc_hdr(t, MAGIC, 1, 3, 24, 0);
        expect_drop("JOIN whose payload does not decode", t, sizeof(t), 1, 0);
    }
    {
        uint8_t *p = NULL;
        size_t n = rc_pack_join("itest-join-first", 0, 1, 1000, &p);
        uint8_t *t = malloc(16 + n);
        rc_hdr(t, MAGIC, 1, 3, (uint32_t)n, 0);
        memcpy(t + 16, p, n);
        expect_drop("JOIN before HELLO", t, 16 + n, 0, 0);
        free(t);
        free(p);
    }
    {
        size_t n = 1u << 20;
        uint8_t *t = malloc(16 + n);
        rc_hdr(t, MAGIC, 1, 5, (uint32_t)n, 0);
        memset(t + 16, 0xff, n);
        expect_drop("1 MiB CTL payload of 0xff", t, 16 + n, 1, 0);
        free(t);
    }
    bad_version(1, 2);
    bad_version(99, 1);
    bad_version(0, 1);
    for (int i = 0; i < 100; i++) {
        int fd = rc_connect(d.sock);
        if (fd >= 0)
            close(fd);
    }
    alive("100 connect-and-close");
    absurd_join("JOIN world_size 0", "itest-absurd-0", 0, 0);
    absurd_join("JOIN rank >= world_size", "itest-absurd-1", 5, 2);
    {
        char *big = malloc(200000);
        memset(big, 'j', 199999);
        big[199999] = 0;
        absurd_join("JOIN rank 3 of world 4 with a 200 KB job name (never completes)", big, 3, 4);
        free(big);
    }
    positive_controls();

    for (int i = 0; i < nheld; i++)
        close(held[i]);
    fails += bgjob_conclude(&bg, &d, 3);
    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
