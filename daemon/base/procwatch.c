/* procwatch.c - see procwatch.h. */
#include "procwatch.h"

#include <stdlib.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "mem.h"

struct nx_procwatch {
    uv_poll_t poll;
    int fd;
    void (*fn)(void *arg);
    void *arg;
};

static void on_closed(uv_handle_t *h)
{
    struct nx_procwatch *w = h->data;
    close(w->fd);
    free(w);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    struct nx_procwatch *w = h->data;
    void (*fn)(void *) = w->fn;
    uv_poll_stop(&w->poll); /* readable for good: once is enough */
    w->fn = NULL;
    if (fn)
        fn(w->arg);
}

struct nx_procwatch *nx_procwatch_start(uv_loop_t *loop, pid_t pid, void (*fn)(void *arg),
                                        void *arg)
{
    if (pid <= 0) /* SO_PEERCRED gives 0 for a process outside our pid namespace */
        return NULL;
    int fd = pidfd_open(pid, 0);
    if (fd < 0)
        return NULL;
    struct nx_procwatch *w = nx_xcalloc(1, sizeof(*w));
    w->fd = fd;
    w->fn = fn;
    w->arg = arg;
    w->poll.data = w;
    if (uv_poll_init(loop, &w->poll, fd) < 0) {
        close(fd);
        free(w);
        return NULL;
    }
    uv_unref((uv_handle_t *)&w->poll); /* a watch never keeps the loop alive */
    uv_poll_start(&w->poll, UV_READABLE, on_readable);
    return w;
}

void nx_procwatch_stop(struct nx_procwatch *w)
{
    if (!w)
        return;
    w->fn = NULL;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, on_closed);
}
