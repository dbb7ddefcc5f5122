/*
 * algo_run.c - the pipeline engine behind every xop (see algo_int.h for the schedule
 * model and docs/algorithms.md for the flow control).
 *
 * Pieces [lo, lo + window) are live; each walks its steps: SEND (every send of the step,
 * each waiting for the destination's credit and for room under max_inflight), then RECV
 * (every receive of the step, consumed straight from the message when the piece is
 * there, or from the early store when the message came first).  A piece that is done
 * frees its slot once every lower piece is done, and the node then tells the nodes that
 * send to it how far it got (a credit), which lets them start the pieces that follow.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo_int.h"
#include "mem.h"
#include "nexar.h"

struct nx_xslot *nx_xrun_slot(struct nx_xop *x, uint64_t p)
{
    return &x->slots[p % x->window];
}

static void geometry(const struct nx_xop *x, uint64_t p, struct nx_xpiece *pc)
{
    pc->idx = p;
    pc->e0 = p * x->piece_elems;
    pc->n = x->d.count > pc->e0 ? x->d.count - pc->e0 : 0;
    if (pc->n > x->piece_elems)
        pc->n = x->piece_elems;
}

struct nx_xfer *nx_xrun_recv_of(struct nx_xplan *pl, uint32_t src)
{
    for (uint32_t i = 0; i < pl->nrecv; i++)
        if (pl->recv[i].peer == src)
            return &pl->recv[i];
    return NULL;
}

/* Gathers a send's regions into dst (host memory of f->bytes). */
static int stage(struct nx_xop *x, struct nx_xslot *sl, const struct nx_xfer *f, uint8_t *dst)
{
    for (uint32_t i = f->reg0; i < f->reg0 + f->nreg; i++) {
        const struct nx_xreg *r = &sl->plan.reg[i];
        size_t bytes = r->n * x->es;
        int rv = x->d.ad->stage_for_send(dst, nx_xbuf_at(x, &sl->pc, r->buf, r->off), bytes);
        if (rv < 0)
            return rv;
        dst += bytes;
    }
    return 0;
}

/* Applies a received payload to the receive's regions. */
static void consume(struct nx_xop *x, struct nx_xslot *sl, struct nx_xfer *f,
                    const uint8_t *data)
{
    const struct nx_adapter *ad = x->d.ad;
    /* A payload lies where its packet put it.  The kernels read sources at any address
     * but for the half types' reductions (reduce.h), which want two bytes. */
    if (nx_xop_half_reduce(x) && ((uintptr_t)data % x->es) != 0 && f->bytes > 0) {
        if (x->stage_cap < f->bytes) {
            free(x->stage);
            x->stage = nx_xmalloc(f->bytes);
            x->stage_cap = f->bytes;
        }
        memcpy(x->stage, data, f->bytes);
        data = x->stage;
    }
    for (uint32_t i = f->reg0; i < f->reg0 + f->nreg; i++) {
        const struct nx_xreg *r = &sl->plan.reg[i];
        uint8_t *dst = nx_xbuf_at(x, &sl->pc, r->buf, r->off);
        int rv;
        switch (r->act) {
        case XA_COPY:
            rv = ad->receive_to_device(dst, data, r->n * x->es);
            break;
        case XA_REDUCE:
            rv = ad->reduce_inplace(dst, data, r->n, x->d.dtype, x->d.redop);
            break;
        default:
            rv = nx_xreduce_first(x, dst, data, r->n);
            break;
        }
        if (rv < 0)
            return nx_xop_fail_adapter(x, r->act == XA_COPY ? "receive" : "reduce", rv);
        if (!r->keep)
            data += r->n * x->es;
    }
    f->done = true;
    x->st.msgs_recv++;
    x->st.bytes_recv += f->bytes;
}

static bool can_send(const struct nx_xop *x, uint32_t peer, uint64_t piece, uint64_t bytes)
{
    if (piece >= x->credit[peer] + x->window || (x->d.gate && !x->started[peer]))
        return false;
    return x->inflight == 0 || x->inflight + bytes <= x->max_inflight;
}

/* A failed net.send's status and reason: -ENOTCONN the peer node is lost, -ESHUTDOWN
 * this node's daemon is stopping. */
static uint32_t send_status(int rv)
{
    return rv == -ENOTCONN    ? NEXAR_ERR_PEER_LOST
           : rv == -ESHUTDOWN ? NEXAR_ERR_UNAVAILABLE
                              : NEXAR_ERR_INTERNAL;
}

static const char *send_why(const struct nx_xop *x, int rv, char *buf, size_t len)
{
    if (rv == -ENOTCONN)
        return "node lost";
    if (rv != -ESHUTDOWN)
        return strerror(-rv);
    snprintf(buf, len, "the nexard of node %u is shutting down", x->d.me);
    return buf;
}

static int send_one(struct nx_xop *x, struct nx_xslot *sl, const struct nx_xfer *f)
{
    int rv;
    struct nx_xmsg m = {.dst = f->peer, .step = sl->step, .sig = x->sig,
                        .offset = sl->pc.e0 * x->es, .len = f->bytes};
    struct iovec iov_stack[8], *iov = iov_stack;
    if (x->d.iov_send) {
        /* The net copies as it sends: the regions go as they lie, no staging copy. */
        if (f->nreg > 8)
            iov = nx_xcalloc(f->nreg, sizeof(*iov));
        for (uint32_t i = 0; i < f->nreg; i++) {
            const struct nx_xreg *r = &sl->plan.reg[f->reg0 + i];
            iov[i] = (struct iovec){nx_xbuf_at(x, &sl->pc, r->buf, r->off), r->n * x->es};
        }
        m.iov = iov;
        m.iovcnt = (int)f->nreg;
        m.lend = x->net.lend_min && f->bytes >= x->net.lend_min;
    } else {
        if (x->stage_cap < f->bytes) {
            free(x->stage);
            x->stage = nx_xmalloc(f->bytes);
            x->stage_cap = f->bytes;
        }
        if ((rv = stage(x, sl, f, x->stage)) < 0) {
            nx_xop_fail_adapter(x, "stage", rv);
            return rv;
        }
        m.data = x->stage;
    }
    if (f->bytes > 0) {
        m.token = x->next_token++;
        if (x->next_token == 0)
            x->next_token = 1;
    }
    rv = x->net.send(x->net.arg, x, &m);
    if (iov != iov_stack)
        free(iov);
    if (rv < 0) {
        char why[64];
        nx_xop_fail(x, send_status(rv), "node %u could not send step %u to node %u: %s",
                    x->d.me, sl->step, f->peer, send_why(x, rv, why, sizeof(why)));
        return rv;
    }
    bool lent = m.lend && rv == 1;
    if (m.token) {
        nx_grow((void **)&x->infl, &x->cap_infl, x->ninfl + 1, sizeof(*x->infl));
        x->infl[x->ninfl++] = (struct nx_xinflight){.token = m.token, .lent = lent,
                                                    .piece = sl->pc.idx, .bytes = f->bytes};
        x->inflight += f->bytes;
    }
    if (lent) {
        sl->lent++;
        x->st.msgs_lent++;
    }
    x->st.msgs_sent++;
    x->st.bytes_sent += f->bytes;
    return 0;
}

static void early_free(struct nx_xearly *e)
{
    free(e->buf);
    free(e);
}

static void keep_early(struct nx_xop *x, uint64_t piece, uint32_t step, uint32_t src,
                       struct nx_xearly *e)
{
    e->piece = piece;
    e->step = step;
    e->src = src;
    e->next = x->early;
    x->early = e;
    x->early_bytes += e->len;
    if (x->early_bytes > x->st.early_peak_bytes)
        x->st.early_peak_bytes = x->early_bytes;
}

/* A step's message from this node to itself (a schedule with two roles on one node):
 * captured now, before the step's receives change the regions, and consumed as if it
 * had come over the network. */
static int send_self(struct nx_xop *x, struct nx_xslot *sl, const struct nx_xfer *f)
{
    struct nx_xearly *e = nx_xmalloc(sizeof(*e) + f->bytes);
    *e = (struct nx_xearly){.len = f->bytes, .data = e->inl};
    int rv = stage(x, sl, f, e->inl);
    if (rv < 0) {
        free(e);
        nx_xop_fail_adapter(x, "stage", rv);
        return rv;
    }
    keep_early(x, sl->pc.idx, sl->step, x->d.me, e);
    return 0;
}

static void enter_step(struct nx_xop *x, struct nx_xslot *sl, uint32_t s)
{
    sl->step = s;
    if (s == x->nsteps) {
        int rv = x->alg->end ? x->alg->end(x, &sl->pc) : 0;
        if (rv < 0)
            return nx_xop_fail_adapter(x, "finish", rv);
        sl->phase = XP_DONE;
        return;
    }
    nx_xplan_clear(&sl->plan);
    x->alg->plan(x, &sl->pc, s, &sl->plan);
    sl->phase = XP_SEND;
    sl->send_i = 0;
}

/* Consumes the kept messages of the step the slot has reached. */
static void pull_early(struct nx_xop *x, struct nx_xslot *sl)
{
    struct nx_xearly **pp = &x->early;
    while (*pp && x->state == XS_RUNNING) {
        struct nx_xearly *e = *pp;
        if (e->piece != sl->pc.idx || e->step != sl->step) {
            pp = &e->next;
            continue;
        }
        struct nx_xfer *f = nx_xrun_recv_of(&sl->plan, e->src);
        *pp = e->next;
        x->early_bytes -= e->len;
        if (f && !f->done) { /* validated when kept */
            consume(x, sl, f, e->data);
            sl->recv_left--;
        }
        early_free(e);
    }
}

static void start_piece(struct nx_xop *x, uint64_t p)
{
    struct nx_xslot *sl = nx_xrun_slot(x, p);
    geometry(x, p, &sl->pc);
    if (x->scratch_elems && !sl->scr)
        sl->scr = nx_xmalloc(x->scratch_elems * x->es);
    sl->pc.scr = sl->scr;
    int rv = x->alg->begin ? x->alg->begin(x, &sl->pc) : 0;
    if (rv < 0)
        return nx_xop_fail_adapter(x, "start", rv);
    enter_step(x, sl, 0);
}

/* Moves one piece as far as it can go; true when anything happened. */
static bool advance(struct nx_xop *x, struct nx_xslot *sl)
{
    bool moved = false;
    while (x->state == XS_RUNNING) {
        if (sl->phase == XP_SEND) {
            while (sl->send_i < sl->plan.nsend) {
                const struct nx_xfer *f = &sl->plan.send[sl->send_i];
                if (f->peer == x->d.me) {
                    if (send_self(x, sl, f) < 0)
                        return true;
                } else {
                    if (!can_send(x, f->peer, sl->pc.idx, f->bytes))
                        return moved;
                    if (send_one(x, sl, f) < 0)
                        return true;
                }
                sl->send_i++;
                moved = true;
            }
            sl->phase = XP_RECV;
            sl->recv_left = sl->plan.nrecv;
            for (uint32_t i = 0; i < sl->plan.nrecv; i++)
                sl->plan.recv[i].done = sl->plan.recv[i].streamed =
                    sl->plan.recv[i].torn = false;
            if (!sl->lent)
                pull_early(x, sl); /* else once copied (nx_xrun_copied) */
            moved = true;
        } else if (sl->phase == XP_RECV) {
            if (sl->recv_left > 0 || sl->lent)
                return moved;
            enter_step(x, sl, sl->step + 1);
            moved = true;
        } else {
            return moved;
        }
    }
    return true;
}

static void send_credit(struct nx_xop *x, uint64_t piece)
{
    for (uint32_t i = 0; i < x->n_in && x->state == XS_RUNNING; i++) {
        struct nx_xmsg m = {.dst = x->in_peers[i], .step = NX_XSTEP_CREDIT, .sig = x->sig,
                            .offset = piece * x->piece_elems * x->es};
        int rv = x->net.send(x->net.arg, x, &m);
        char why[64];
        if (rv < 0)
            return nx_xop_fail(x, send_status(rv), "node %u could not send a credit to node "
                               "%u: %s", x->d.me, m.dst, send_why(x, rv, why, sizeof(why)));
        x->st.credits_sent++;
    }
}

void nx_xrun_say_started(struct nx_xop *x)
{
    send_credit(x, 0);
}

static void send_credits(struct nx_xop *x)
{
    /* Senders may run pieces below credit + window: once that covers every piece a credit
     * would tell nobody anything.  Credits go out every half window (as delayed ACKs do):
     * the piece this node waits for, lo < credit_sent + (window + 1) / 2, is then always
     * one the senders may send.  A node that has done every piece has received everything
     * and owes nobody a credit. */
    if (x->lo < x->credit_sent + (x->window + 1) / 2 || x->lo >= x->npieces ||
        x->credit_sent + x->window >= x->npieces)
        return;
    x->credit_sent = x->lo;
    send_credit(x, x->lo);
}

void nx_xrun_progress(struct nx_xop *x)
{
    bool moved = true;
    while (moved && x->state == XS_RUNNING) {
        moved = false;
        uint64_t hi = x->lo + x->window < x->npieces ? x->lo + x->window : x->npieces;
        for (uint64_t p = x->lo; p < hi && x->state == XS_RUNNING; p++) {
            struct nx_xslot *sl = nx_xrun_slot(x, p);
            if (sl->phase == XP_IDLE) {
                start_piece(x, p);
                moved = true;
            }
            if (x->state == XS_RUNNING && advance(x, sl))
                moved = true;
        }
        if (x->state != XS_RUNNING)
            return;
        uint64_t lo0 = x->lo;
        while (x->lo < x->npieces && nx_xrun_slot(x, x->lo)->phase == XP_DONE) {
            nx_xrun_slot(x, x->lo)->phase = XP_IDLE;
            x->lo++;
        }
        if (x->lo != lo0) {
            moved = true;
            send_credits(x);
        }
        if (x->lo == x->npieces && x->state == XS_RUNNING) {
            x->state = XS_DONE;
            x->net.done(x->net.arg, x, NEXAR_OK, NULL);
            return;
        }
    }
}

void nx_xrun_data(struct nx_xop *x, uint32_t src, uint32_t step, uint64_t offset,
                  const void *data, size_t len)
{
    uint64_t pbytes = x->piece_elems * x->es;
    uint64_t p = offset / pbytes;
    if (offset % pbytes != 0 || p >= x->npieces)
        return nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                           "node %u sent step %u at offset %llu, which starts no piece "
                           "(%llu pieces of %llu bytes)", src, step,
                           (unsigned long long)offset, (unsigned long long)x->npieces,
                           (unsigned long long)pbytes);
    if (step >= x->nsteps)
        return nx_xop_fail(x, NEXAR_ERR_INTERNAL, "node %u sent step %u of %u (%s)", src,
                           step, x->nsteps, x->alg->name);
    if (p < x->lo || p >= x->lo + x->window)
        return nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                           "node %u sent step %u of piece %llu, outside this node's window "
                           "[%llu, %llu): %s", src, step, (unsigned long long)p,
                           (unsigned long long)x->lo, (unsigned long long)(x->lo + x->window),
                           p < x->lo ? "a duplicate" : "it ignored the flow control");
    struct nx_xslot *sl = nx_xrun_slot(x, p);
    bool live = x->state == XS_RUNNING && sl->phase != XP_IDLE;
    if (live && (step < sl->step || sl->phase == XP_DONE))
        return nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                           "node %u sent step %u of piece %llu again (this node is past it)",
                           src, step, (unsigned long long)p);
    struct nx_xplan *pl = &x->vplan;
    if (live && step == sl->step) {
        pl = &sl->plan;
    } else {
        struct nx_xpiece pc;
        geometry(x, p, &pc);
        pc.scr = NULL;
        nx_xplan_clear(pl);
        x->alg->plan(x, &pc, step, pl);
    }
    struct nx_xfer *f = nx_xrun_recv_of(pl, src);
    if (!f || f->bytes != len)
        return nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                           "node %u sent %zu bytes for step %u of piece %llu, where %s", src,
                           len, step, (unsigned long long)p,
                           f ? "the step's geometry says otherwise" : "it sends nothing here");
    /* While the net still reads this step's lent messages, what comes waits, kept. */
    if (live && step == sl->step && sl->phase == XP_RECV && !sl->lent) {
        if (f->done)
            return nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                               "node %u sent step %u of piece %llu twice", src, step,
                               (unsigned long long)p);
        if (f->streamed) /* part of it went in: a second copy cannot */
            return nx_xop_fail(x, NEXAR_ERR_INTERNAL,
                               "node %u sent step %u of piece %llu again %s", src, step,
                               (unsigned long long)p,
                               f->torn ? "after its first copy broke off midway (the "
                                         "connection that carried it closed)"
                                       : "while it was arriving");
        consume(x, sl, f, data);
        sl->recv_left--;
        return nx_xrun_progress(x);
    }
    for (struct nx_xearly *e = x->early; e; e = e->next)
        if (e->piece == p && e->step == step && e->src == src)
            return nx_xop_fail(x, NEXAR_ERR_INTERNAL, "node %u sent step %u of piece %llu "
                               "twice", src, step, (unsigned long long)p);
    /* Kept in the net's buffer where it gives it, else copied. */
    void *buf = len && x->net.take ? x->net.take(x->net.arg, data, len) : NULL;
    struct nx_xearly *e = nx_xmalloc(sizeof(*e) + (buf ? 0 : len));
    *e = (struct nx_xearly){.len = len, .data = buf ? data : e->inl, .buf = buf};
    if (len && !buf)
        memcpy(e->inl, data, len);
    keep_early(x, p, step, src, e);
    x->st.early_msgs++;
}

void nx_xrun_credit(struct nx_xop *x, uint32_t src, uint64_t done)
{
    /* Any credit says the node started; where gate is off nobody waits for that. */
    bool news = x->d.gate && !x->started[src];
    x->started[src] = true;
    if (done > x->credit[src]) {
        x->credit[src] = done;
        news = true;
    }
    if (news && x->state == XS_RUNNING)
        nx_xrun_progress(x);
}

/* A lent message is copied: its slot may write its regions again once all are. */
static void unlend(struct nx_xop *x, struct nx_xinflight *in)
{
    in->lent = false;
    struct nx_xslot *sl = nx_xrun_slot(x, in->piece);
    sl->lent--;
    if (!sl->lent && x->state == XS_RUNNING && sl->phase == XP_RECV)
        pull_early(x, sl);
}

void nx_xrun_sent(struct nx_xop *x, uint32_t token)
{
    for (size_t i = 0; i < x->ninfl; i++) {
        if (x->infl[i].token != token)
            continue;
        if (x->infl[i].lent) /* acknowledged, so copied long since */
            unlend(x, &x->infl[i]);
        x->inflight -= x->infl[i].bytes;
        x->infl[i] = x->infl[--x->ninfl];
        if (x->state == XS_RUNNING)
            nx_xrun_progress(x);
        return;
    }
}

void nx_xrun_copied(struct nx_xop *x, uint32_t token)
{
    for (size_t i = 0; i < x->ninfl; i++) {
        if (x->infl[i].token != token || !x->infl[i].lent)
            continue;
        unlend(x, &x->infl[i]);
        if (x->state == XS_RUNNING)
            nx_xrun_progress(x);
        return;
    }
}

void nx_xrun_settle(struct nx_xop *x)
{
    /* Every lent message has its record until acknowledged (send_one). */
    size_t i = 0;
    while (i < x->ninfl && !x->infl[i].lent)
        i++;
    if (i == x->ninfl)
        return;
    if (x->net.settle)
        x->net.settle(x->net.arg);
    for (; i < x->ninfl; i++)
        x->infl[i].lent = false;
    for (uint32_t s = 0; s < x->window; s++)
        x->slots[s].lent = 0;
}

void nx_xrun_free(struct nx_xop *x)
{
    nx_xrun_settle(x); /* before the scratch goes, and the buffers with the xop */
    while (x->early) {
        struct nx_xearly *e = x->early;
        x->early = e->next;
        early_free(e);
    }
    if (x->slots)
        for (uint32_t i = 0; i < x->window; i++) {
            nx_xplan_free(&x->slots[i].plan);
            free(x->slots[i].scr);
        }
    nx_xplan_free(&x->vplan);
    free(x->infl);
    free(x->stage);
    free(x->tmp);
    free(x->priv);
    free(x->geo);
    free(x->what);
    free(x->text);
    free(x);
}
