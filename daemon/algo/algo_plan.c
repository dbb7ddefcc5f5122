/* algo_plan.c - what the schedules build their plans with, and the local data movement
 * they do through the adapter (see algo_int.h). */
#include <stdlib.h>

#include "algo_int.h"
#include "mem.h"

/* ---- plans ------------------------------------------------------------------------ */

void nx_xplan_clear(struct nx_xplan *pl)
{
    pl->nsend = pl->nrecv = pl->nreg = 0;
    pl->cur = NULL;
}

void nx_xplan_free(struct nx_xplan *pl)
{
    if (pl->send && pl->send != pl->send_inl)
        free(pl->send);
    if (pl->recv && pl->recv != pl->recv_inl)
        free(pl->recv);
    if (pl->reg && pl->reg != pl->reg_inl)
        free(pl->reg);
}

static void add_xfer(struct nx_xfer **arr, struct nx_xfer *inl, uint32_t *n, size_t *cap,
                     struct nx_xplan *pl, uint32_t peer)
{
    nx_grow_inline((void **)arr, cap, inl, NX_XPLAN_INL_XFERS, (size_t)*n + 1,
                   sizeof(**arr));
    struct nx_xfer *f = &(*arr)[(*n)++];
    *f = (struct nx_xfer){.peer = peer, .reg0 = pl->nreg};
    pl->cur = f;
}

void nx_xplan_send(struct nx_xplan *pl, uint32_t peer)
{
    add_xfer(&pl->send, pl->send_inl, &pl->nsend, &pl->cap_send, pl, peer);
}

void nx_xplan_recv(struct nx_xplan *pl, uint32_t peer)
{
    add_xfer(&pl->recv, pl->recv_inl, &pl->nrecv, &pl->cap_recv, pl, peer);
}

static void add_reg(struct nx_xop *x, struct nx_xplan *pl, uint8_t buf, uint64_t off,
                    uint64_t n, uint8_t act, bool keep)
{
    if (n == 0)
        return;
    nx_grow_inline((void **)&pl->reg, &pl->cap_reg, pl->reg_inl, NX_XPLAN_INL_REGS,
                   (size_t)pl->nreg + 1, sizeof(*pl->reg));
    pl->reg[pl->nreg++] =
        (struct nx_xreg){.buf = buf, .act = act, .keep = keep, .off = off, .n = n};
    pl->cur->nreg++;
    if (!keep)
        pl->cur->bytes += n * x->es;
}

void nx_xplan_reg(struct nx_xop *x, struct nx_xplan *pl, uint8_t buf, uint64_t off,
                  uint64_t n, uint8_t act)
{
    add_reg(x, pl, buf, off, n, act, false);
}

void nx_xplan_reg_keep(struct nx_xop *x, struct nx_xplan *pl, uint8_t buf, uint64_t off,
                       uint64_t n, uint8_t act)
{
    add_reg(x, pl, buf, off, n, act, true);
}

void nx_xplan_group(struct nx_xop *x, struct nx_xplan *pl, uint8_t buf, uint32_t g,
                    uint64_t e0, uint64_t n, uint8_t act)
{
    for (uint32_t i = x->nr_off[g]; i < x->nr_off[g + 1]; i++)
        nx_xplan_reg(x, pl, buf, (uint64_t)x->nr_rank[i] * x->bs + e0, n, act);
}

/* ---- local data movement ------------------------------------------------------------ */

uint8_t *nx_xbuf_at(struct nx_xop *x, const struct nx_xpiece *pc, uint8_t buf, uint64_t off)
{
    uint8_t *base = buf == XB_IN ? x->d.in : buf == XB_OUT ? x->d.out : pc->scr;
    return base + off * x->es;
}

int nx_xbegin_copy(struct nx_xop *x, const struct nx_xpiece *pc)
{
    return nx_xcopy(x, nx_xbuf_at(x, pc, XB_OUT, pc->e0), nx_xbuf_at(x, pc, XB_IN, pc->e0),
                    pc->n);
}

int nx_xcopy(struct nx_xop *x, void *dst, const void *src, uint64_t n)
{
    if (n == 0 || dst == src)
        return 0;
    return x->d.ad->receive_to_device(dst, src, n * x->es);
}

int nx_xreduce_first(struct nx_xop *x, void *dst, const void *src, uint64_t n)
{
    const struct nx_adapter *ad = x->d.ad;
    size_t bytes = n * x->es;
    int rv;
    if (n == 0)
        return 0;
    /* Only the adapter's host-source forms: save dst, put src there, fold dst back in. */
    if (x->tmp_cap < bytes) {
        free(x->tmp);
        x->tmp = nx_xmalloc(bytes);
        x->tmp_cap = bytes;
    }
    if ((rv = ad->stage_for_send(x->tmp, dst, bytes)) < 0 ||
        (rv = ad->receive_to_device(dst, src, bytes)) < 0)
        return rv;
    return ad->reduce_inplace(dst, x->tmp, n, x->d.dtype, x->d.redop);
}
