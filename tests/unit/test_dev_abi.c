/*
 * test_dev_abi.c - the device half of the shm ABI (proto/shm_validate.c): which device
 * descriptors nx_sqe_validate() lets through, and the stateless checks of a device op
 * record (nx_dev_op_check).  The daemon-side checks that need registrations are in
 * daemon/node/devop.c and run against a live backend only.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"
#include "nexar.h"
#include "shm_abi.h"

/* The descriptor is rejected, with a reason that mentions word. */
static void bad_sqe(const struct nx_sqe *e, const struct nx_sqe_limits *lim, const char *word,
                    int line)
{
    const char *why = NULL;
    int rv = nx_sqe_validate(e, lim, &why);
    if (rv != -EINVAL || !why || !strstr(why, word)) {
        fprintf(stderr, "%s:%d: got %d (%s), expected -EINVAL mentioning \"%s\"\n", __FILE__,
                line, rv, why ? why : "-", word);
        failures++;
    }
}
#define BAD_SQE(e, lim, word) bad_sqe(&(e), (lim), (word), __LINE__)

static void bad_rec(const struct nx_sqe *e, const struct nx_dev_op *r, uint64_t arena,
                    const char *word, int line)
{
    const char *why = NULL;
    int rv = nx_dev_op_check(e, r, arena, &why);
    if (rv != -EINVAL || !why || !strstr(why, word)) {
        fprintf(stderr, "%s:%d: got %d (%s), expected -EINVAL mentioning \"%s\"\n", __FILE__,
                line, rv, why ? why : "-", word);
        failures++;
    }
}
#define BAD_REC(e, r, arena, word) bad_rec(&(e), &(r), (arena), (word), __LINE__)

#define ARENA (1ull << 20)

static const struct nx_sqe_limits lim = {
    .arena_bytes = ARENA, .slot_bytes = 64 << 10, .comm_size = 4, .comm_rank = 1};

static void test_descriptor(void)
{
    struct nx_sqe good = {
        .kind = NX_K_ALL_REDUCE, .dtype = NEXAR_F32, .redop = NEXAR_SUM,
        .flags = NX_SQE_DIRECT | NX_SQE_DEVICE, .count = 1u << 30, /* no slot limits */
        .in_off = 4096,
    }, e;
    EXPECT(nx_sqe_validate(&good, &lim, NULL) == 0);

    e = good, e.flags = NX_SQE_DEVICE;
    BAD_SQE(e, &lim, "NX_SQE_DIRECT");
    e = good, e.count = 0;
    BAD_SQE(e, &lim, "count 0");
    e = good, e.out_off = 64;
    BAD_SQE(e, &lim, "out_off");
    e = good, e.chunk = 1;
    BAD_SQE(e, &lim, "chunk");
    e = good, e.in_off = 4100;
    BAD_SQE(e, &lim, "aligned");
    e = good, e.in_off = ARENA - 32;
    BAD_SQE(e, &lim, "outside");
    e = good, e.in_off = UINT64_MAX - 7;
    BAD_SQE(e, &lim, "outside");
    e = good, e.kind = NX_K_BARRIER, e.count = 0, e.dtype = 0, e.redop = 0, e.in_off = 0;
    BAD_SQE(e, &lim, "without data");
    e = good, e.count = UINT64_MAX / 2;
    BAD_SQE(e, &lim, "overflows");
    /* The device flag does not relax anything else. */
    e = good, e.dtype = NEXAR_DTYPE_COUNT;
    BAD_SQE(e, &lim, "dtype");
    e = good, e.reserved = 1;
    BAD_SQE(e, &lim, "reserved");

    /* send / recv and rooted kinds are device kinds too. */
    e = good, e.kind = NX_K_SEND, e.redop = 0, e.peer = 2;
    EXPECT(nx_sqe_validate(&e, &lim, NULL) == 0);
    e = good, e.kind = NX_K_BROADCAST, e.redop = 0, e.peer = 3;
    EXPECT(nx_sqe_validate(&e, &lim, NULL) == 0);
    e = good, e.kind = NX_K_ALL_REDUCE_BUCKETED;
    EXPECT(nx_sqe_validate(&e, &lim, NULL) == 0);
}

static void test_record(void)
{
    struct nx_sqe e = {
        .kind = NX_K_ALL_REDUCE, .dtype = NEXAR_F32, .redop = NEXAR_SUM,
        .flags = NX_SQE_DIRECT | NX_SQE_DEVICE, .count = 1000, .in_off = 4096,
    };
    struct nx_dev_op good = {
        .magic = NX_DEV_OP_MAGIC, .in = {.mem = 1, .off = 0}, .out = {.mem = 1, .off = 0},
        .ready_event = 2, .done_off = 8192, .done_value = 7,
    }, r;
    uint64_t bytes = 0;

    EXPECT(nx_dev_op_check(&e, &good, ARENA, NULL) == 0);
    r = good, r.done_off = NX_DEV_NO_DONE;
    EXPECT(nx_dev_op_check(&e, &r, ARENA, NULL) == 0);

    r = good, r.magic = 0;
    BAD_REC(e, r, ARENA, "magic");
    r = good, r.reserved = 1;
    BAD_REC(e, r, ARENA, "reserved");
    r = good, r.in.reserved = 1;
    BAD_REC(e, r, ARENA, "reserved");
    r = good, r.out.reserved = 1;
    BAD_REC(e, r, ARENA, "reserved");
    r = good, r.niov = 1;
    BAD_REC(e, r, ARENA, "not bucketed");
    r = good, r.done_off = 8193;
    BAD_REC(e, r, ARENA, "done word");
    r = good, r.done_off = ARENA - 4;
    BAD_REC(e, r, ARENA, "done word");
    r = good, r.done_off = UINT64_MAX - 7;
    BAD_REC(e, r, ARENA, "done word");

    /* Bucketed: iovs instead of in/out, the table inside the arena. */
    struct nx_sqe b = e;
    b.kind = NX_K_ALL_REDUCE_BUCKETED;
    r = good, r.in.mem = r.out.mem = 0, r.niov = 3;
    EXPECT(nx_dev_op_check(&b, &r, ARENA, NULL) == 0);
    r.niov = 0;
    BAD_REC(b, r, ARENA, "iov count");
    r.niov = NX_DEV_MAX_IOV + 1;
    BAD_REC(b, r, ARENA, "iov count");
    r = good, r.niov = 2;
    BAD_REC(b, r, ARENA, "in the iovs");
    r = good, r.in.mem = r.out.mem = 0, r.niov = 2;
    b.in_off = ARENA - sizeof(struct nx_dev_op) - sizeof(struct nx_dev_iov);
    BAD_REC(b, r, ARENA, "outside the arena");
    r.niov = 1;
    EXPECT(nx_dev_op_check(&b, &r, ARENA, NULL) == 0);

    EXPECT(nx_dev_op_bytes(0, &bytes) && bytes == 64);
    EXPECT(nx_dev_op_bytes(2, &bytes) && bytes == 64 + 48);
    EXPECT(nx_dev_op_bytes(UINT32_MAX, &bytes));
}

int main(void)
{
    test_descriptor();
    test_record();
    if (failures) {
        fprintf(stderr, "test_dev_abi: %d failures\n", failures);
        return 1;
    }
    printf("test_dev_abi: ok\n");
    return 0;
}
