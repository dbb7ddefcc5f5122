/*
 * test_registry.c - nexard's table of a client's CUDA IPC mappings (cuda/registry.c):
 * ids, lookups by kind, and above all when a mapping is closed - never while queued GPU
 * work still references it, and always once the last reference went, whether the rank
 * unregistered it or disappeared.  The close callback stands in for cudaIpcCloseMemHandle.
 */
#include <stdio.h>
#include <stdlib.h>

#include "expect.h"
#include "registry.h"

enum { MEM = 1, EV = 2 };

static int closed[64], nclosed;

static void fake_close(struct nx_reg *r)
{
    closed[nclosed++] = (int)(intptr_t)r->handle;
}

static bool was_closed(int h)
{
    for (int i = 0; i < nclosed; i++)
        if (closed[i] == h)
            return true;
    return false;
}

static void test_ids_and_lookup(void)
{
    struct nx_regtab *t = nx_regtab_new(fake_close);
    struct nx_reg *a = nx_regtab_add(t, MEM, 0, (void *)1, 4096);
    struct nx_reg *b = nx_regtab_add(t, EV, 1, (void *)2, 0);
    EXPECT(a && b && a->id != 0 && b->id != 0 && a->id != b->id);
    EXPECT(nx_regtab_get(t, a->id, MEM) == a);
    EXPECT(nx_regtab_get(t, a->id, EV) == NULL); /* the kind must match */
    EXPECT(nx_regtab_get(t, b->id, EV) == b);
    EXPECT(nx_regtab_get(t, 0, MEM) == NULL);
    EXPECT(nx_regtab_get(t, 12345, MEM) == NULL);
    uint32_t aid = a->id;
    EXPECT(nx_regtab_remove(t, aid));
    EXPECT(was_closed(1));
    EXPECT(!nx_regtab_remove(t, aid)); /* twice */
    EXPECT(nx_regtab_get(t, aid, MEM) == NULL);
    EXPECT(nx_regtab_count(t) == 1);
    nx_regtab_orphan(t); /* frees b and the table */
    EXPECT(was_closed(2));
}

static void test_refs_delay_close(void)
{
    nclosed = 0;
    struct nx_regtab *t = nx_regtab_new(fake_close);
    struct nx_reg *a = nx_regtab_add(t, MEM, 0, (void *)10, 4096);
    nx_reg_ref(a);
    nx_reg_ref(a);
    EXPECT(nx_regtab_remove(t, a->id));
    EXPECT(nclosed == 0);               /* two ops still queued on it */
    EXPECT(nx_regtab_get(t, a->id, MEM) == NULL); /* but no new op may name it */
    nx_reg_unref(a);
    EXPECT(nclosed == 0);
    nx_reg_unref(a);
    EXPECT(nclosed == 1 && closed[0] == 10);
    EXPECT(nx_regtab_count(t) == 0);
    nx_regtab_orphan(t);
}

static void test_orphan_with_work_in_flight(void)
{
    nclosed = 0;
    struct nx_regtab *t = nx_regtab_new(fake_close);
    struct nx_reg *r[6];
    for (int i = 0; i < 6; i++)
        r[i] = nx_regtab_add(t, i % 2 ? EV : MEM, 0, (void *)(intptr_t)(20 + i), 64);
    nx_reg_ref(r[1]);
    nx_reg_ref(r[4]);
    nx_regtab_orphan(t); /* the client went away */
    EXPECT(nclosed == 4);
    EXPECT(!was_closed(21) && !was_closed(24));
    nx_reg_unref(r[4]);
    EXPECT(was_closed(24) && nclosed == 5);
    nx_reg_unref(r[1]); /* the last one frees the table (valgrind/ASan would notice) */
    EXPECT(was_closed(21) && nclosed == 6);
}

static void test_empty_orphan(void)
{
    struct nx_regtab *t = nx_regtab_new(fake_close);
    nx_regtab_orphan(t); /* never held anything */
    t = nx_regtab_new(fake_close);
    struct nx_reg *a = nx_regtab_add(t, MEM, 0, (void *)30, 1);
    nx_regtab_remove(t, a->id);
    nx_regtab_orphan(t); /* held something once */
}

int main(void)
{
    test_ids_and_lookup();
    test_refs_delay_close();
    test_orphan_with_work_in_flight();
    test_empty_orphan();
    if (failures) {
        fprintf(stderr, "test_registry: %d failures\n", failures);
        return 1;
    }
    printf("test_registry: ok\n");
    return 0;
}
