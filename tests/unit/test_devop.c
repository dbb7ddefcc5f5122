/*
 * test_devop.c - nexard's handling of a device descriptor's record (daemon/node/devop.c),
 * against a stand-in device backend: what nx_dev_part_load accepts and what it calls a
 * violation (registrations, extents, element alignment, the buffers the shape uses,
 * events, bucketed iov tables), that it copies what it keeps out of shared memory, and
 * that nx_dev_part_complete sets the rank's done word before it posts the completion.
 * A real segment (memfd) and a real client record; no GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "client.h"
#include "devop.h"
#include "frame.h"
#include "nexar.h"
#include "segment.h"


/* ---- a backend with two allocations and one event ----------------------------------- */

static const struct {
    uint32_t id;
    uint64_t size;
} mems[] = {{1, 4096}, {2, 1 << 20}};

static bool fake_mem_ok(struct nx_dev_client *dc, uint32_t id, uint64_t off, uint64_t bytes)
{
    for (size_t i = 0; i < sizeof(mems) / sizeof(mems[0]); i++)
        if (mems[i].id == id)
            return off <= mems[i].size && bytes <= mems[i].size - off;
    return false;
}

static bool fake_event_ok(struct nx_dev_client *dc, uint32_t id)
{
    return id == 9;
}

static const struct nx_device_ops fake = {
    .name = "fake", .mem_ok = fake_mem_ok, .event_ok = fake_event_ok};

/* ---- helpers ------------------------------------------------------------------------- */

static struct nx_client cl;
static uint64_t rec_off; /* arena offset where records go */

static struct nx_sqe desc(uint8_t kind, uint8_t dtype, uint64_t count, uint32_t peer)
{
    return (struct nx_sqe){.user_data = 0xabc, .kind = kind, .dtype = dtype,
                           .redop = nx_kind_has_redop(kind) ? NEXAR_SUM : 0, .count = count,
                           .peer = peer, .flags = NX_SQE_DIRECT | NX_SQE_DEVICE,
                           .in_off = rec_off};
}

static void put(const struct nx_dev_op *r, const struct nx_dev_iov *iov, uint32_t niov)
{
    memcpy(cl.seg.arena + rec_off, r, sizeof(*r));
    if (niov)
        memcpy(cl.seg.arena + rec_off + sizeof(*r), iov, niov * sizeof(*iov));
}

static struct nx_dev_op rec(uint32_t in_mem, uint64_t in_off, uint32_t out_mem, uint64_t out_off)
{
    return (struct nx_dev_op){.magic = NX_DEV_OP_MAGIC, .in = {in_mem, 0, in_off},
                              .out = {out_mem, 0, out_off}, .done_off = NX_DEV_NO_DONE};
}

/* Loads e for rank `rank` of 4; expects success (word NULL) or a reason with word. */
static void load(const struct nx_sqe *e, uint32_t rank, const char *word, int line)
{
    struct nx_dev_part p;
    char why[200] = "";
    int rv = nx_dev_part_load(&cl, e, 4, rank, &p, why, sizeof(why));
    if (word ? rv == 0 || !strstr(why, word) : rv != 0) {
        fprintf(stderr, "%s:%d: got %d (%s), expected %s%s\n", __FILE__, line, rv, why,
                word ? "a reason with " : "success", word ? word : "");
        failures++;
    }
    nx_dev_part_release(&p);
}
#define OK(e, rank) load(&(e), (rank), NULL, __LINE__)
#define BAD(e, rank, word) load(&(e), (rank), (word), __LINE__)

static void test_buffers(void)
{
    struct nx_sqe e = desc(NX_K_ALL_REDUCE, NEXAR_F32, 256, 0); /* 1 KiB */
    struct nx_dev_op r = rec(1, 0, 1, 0);
    put(&r, NULL, 0);
    OK(e, 0);
    r = rec(1, 3072, 1, 3072); /* ends exactly at the allocation's end */
    put(&r, NULL, 0);
    OK(e, 0);
    r = rec(1, 3076, 1, 3076);
    put(&r, NULL, 0);
    BAD(e, 0, "not inside a registered allocation");
    r = rec(1, 2, 1, 2);
    put(&r, NULL, 0);
    BAD(e, 0, "aligned");
    r = rec(7, 0, 7, 0);
    put(&r, NULL, 0);
    BAD(e, 0, "registration 7");
    r = rec(0, 0, 1, 0);
    put(&r, NULL, 0);
    BAD(e, 0, "no input");
    r = rec(1, 0, 1, 0);
    r.ready_event = 9;
    put(&r, NULL, 0);
    OK(e, 0);
    r.ready_event = 8;
    put(&r, NULL, 0);
    BAD(e, 0, "event 8");
    r = rec(1, 0, 1, 0);
    r.magic = 1;
    put(&r, NULL, 0);
    BAD(e, 0, "magic");

    /* The shape decides which buffers must be there: all_gather's output holds 4
     * blocks; a non-root of reduce has none; a non-root of broadcast no input. */
    e = desc(NX_K_ALL_GATHER, NEXAR_F32, 256, 0);
    r = rec(1, 0, 2, 0);
    put(&r, NULL, 0);
    OK(e, 1);
    r = rec(1, 0, 1, 0); /* 4 KiB of output do not fit the 4 KiB allocation past... */
    r.out.off = 1024;
    put(&r, NULL, 0);
    BAD(e, 1, "not inside");
    e = desc(NX_K_REDUCE, NEXAR_F32, 256, 0);
    r = rec(1, 0, 1, 0);
    put(&r, NULL, 0);
    OK(e, 0);
    BAD(e, 2, "does not use");
    r = rec(1, 0, 0, 0);
    put(&r, NULL, 0);
    OK(e, 2);
    e = desc(NX_K_BROADCAST, NEXAR_F32, 256, 3);
    r = rec(0, 0, 1, 0);
    put(&r, NULL, 0);
    OK(e, 1);
    BAD(e, 3, "no input"); /* the root sends */
    e = desc(NX_K_RECV, NEXAR_F32, 256, 0);
    OK(e, 1);
    e = desc(NX_K_SEND, NEXAR_F32, 256, 2);
    BAD(e, 1, "no input");
}

static void test_bucketed(void)
{
    struct nx_sqe e = desc(NX_K_ALL_REDUCE_BUCKETED, NEXAR_F64, 300, 0);
    struct nx_dev_op r = rec(0, 0, 0, 0);
    struct nx_dev_iov v[3] = {{{1, 0, 0}, 100}, {{0, 0, 0}, 0}, {{2, 0, 8000}, 200}};
    r.niov = 3;
    put(&r, v, 3);
    struct nx_dev_part p;
    char why[200] = "";
    EXPECT(nx_dev_part_load(&cl, &e, 4, 0, &p, why, sizeof(why)) == 0);
    /* What the daemon keeps is its own copy: the rank may scribble on the table now. */
    memset(cl.seg.arena + rec_off + sizeof(r), 0xff, 3 * sizeof(v[0]));
    EXPECT(p.iov && p.iov[2].buf.mem == 2 && p.iov[2].count == 200 && p.rec.niov == 3);
    nx_dev_part_release(&p);
    EXPECT(p.iov == NULL);

    v[2].count = 199;
    put(&r, v, 3);
    BAD(e, 0, "hold 299");
    v[2].count = 200;
    v[0].count = 513; /* 8 * 513 > 4096 */
    v[2].count = 300 - 513; /* and the sum wraps back to 300 */
    put(&r, v, 3);
    BAD(e, 0, "iov");
    v[0].count = 100;
    v[2].count = 200;
    v[1].buf.reserved = 1;
    put(&r, v, 3);
    BAD(e, 0, "reserved");
    v[1].buf.reserved = 0;
    v[1] = (struct nx_dev_iov){{5, 0, 0}, 0}; /* count 0 but a buffer that does not exist */
    put(&r, v, 3);
    BAD(e, 0, "registration 5");
}

static void test_complete(void)
{
    struct nx_sqe e = desc(NX_K_ALL_REDUCE, NEXAR_I32, 16, 0);
    struct nx_dev_op r = rec(1, 0, 1, 0);
    uint64_t *word = (uint64_t *)(void *)(cl.seg.arena + 4096);
    r.done_off = 4096;
    r.done_value = 77;
    *word = 5;
    put(&r, NULL, 0);
    struct nx_dev_part p;
    char why[200];
    EXPECT(nx_dev_part_load(&cl, &e, 4, 0, &p, why, sizeof(why)) == 0);
    uint32_t tail = cl.cq_tail;
    EXPECT(nx_dev_part_complete(&p, NEXAR_ERR_PEER_LOST, "gone") == &cl);
    EXPECT(*word == 77); /* set even though the op failed: the stream must go on */
    EXPECT(cl.cq_tail == tail + 1);
    const struct nx_cqe *c = &cl.seg.cq[tail & (cl.seg.hdr.cq_entries - 1)];
    EXPECT(c->user_data == 0xabc && c->status == NEXAR_ERR_PEER_LOST);
    /* A client that went away gets nothing written. */
    *word = 5;
    cl.dead = true;
    EXPECT(nx_dev_part_complete(&p, NEXAR_OK, NULL) == NULL);
    EXPECT(*word == 5);
    cl.dead = false;
    nx_dev_part_release(&p);
}

int main(void)
{
    struct nx_shm_geom g = {.sq_entries = 64, .cq_entries = 64, .err_entries = 8,
                            .slot_count = 2, .slot_bytes = 65536, .heap_bytes = 1 << 20,
                            .max_pending = 4096};
    if (nx_segment_create(&cl.seg, &g, "test-devop") < 0) {
        fprintf(stderr, "test_devop: cannot create a segment\n");
        return 1;
    }
    cl.id = 42;
    cl.sq_efd = cl.cq_efd = -1;
    LIST_INSERT_HEAD(&nx_clients, &cl, link);
    rec_off = cl.seg.hdr.heap_off + 64;

    /* Without a backend every device descriptor is a violation. */
    struct nx_sqe e = desc(NX_K_ALL_REDUCE, NEXAR_F32, 4, 0);
    struct nx_dev_op r = rec(1, 0, 1, 0);
    put(&r, NULL, 0);
    BAD(e, 0, "no device support");
    EXPECT(nx_device_features() == 0);

    nx_device = &fake;
    EXPECT(nx_device_features() == NX_FEATURE_DEVICE);
    test_buffers();
    test_bucketed();
    test_complete();
    nx_device = NULL;

    LIST_REMOVE(&cl, link);
    nx_segment_destroy(&cl.seg);
    if (failures) {
        fprintf(stderr, "test_devop: %d failures\n", failures);
        return 1;
    }
    printf("test_devop: ok\n");
    return 0;
}
