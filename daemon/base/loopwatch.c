/* loopwatch.c - see loopwatch.h.
 *
 * A prepare handle runs once a turn, just before the loop waits in poll.  Between two of
 * them the loop waited (uv_metrics_idle_time counts that) or worked: the work is the
 * difference. */
#include "loopwatch.h"

#include "context.h"
#include "log.h"

#define NX_LOOP_WARN_EVERY_NS 10000000000ull

static uv_prepare_t prep;
static uint64_t last_turn, last_idle, last_warn, worst;

static void on_prepare(uv_prepare_t *h)
{
    uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(h->loop);
    if (last_turn) {
        uint64_t span = now - last_turn, waited = idle - last_idle;
        uint64_t busy = span > waited ? span - waited : 0;
        if (busy >= NX_LOOP_STALL_NS) {
            nxd.stats.loop_stalls++;
            if (busy > worst)
                worst = busy;
            if (!last_warn || now - last_warn >= NX_LOOP_WARN_EVERY_NS) {
                NX_WARN("main", "the event loop worked %.2f s in one turn without looking at "
                        "its sockets (the longest turn so far %.2f s; %llu such turns): "
                        "ranks' completions and peers' packets waited meanwhile",
                        (double)busy / 1e9, (double)worst / 1e9,
                        (unsigned long long)nxd.stats.loop_stalls);
                last_warn = now;
            }
        }
    }
    last_turn = now;
    last_idle = idle;
}

void nx_loopwatch_start(uv_loop_t *loop)
{
    if (uv_loop_configure(loop, UV_METRICS_IDLE_TIME) != 0) {
        NX_DEBUG("main", "libuv counts no idle time: the loop is not watched for stalls");
        return;
    }
    uv_prepare_init(loop, &prep);
    uv_prepare_start(&prep, on_prepare);
    uv_unref((uv_handle_t *)&prep);
}
