/* udp_jitter.c - see udp_jitter.h. */
#include "udp_jitter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define UJ_MAX 65536 /* datagrams held at once */
#define UJ_DGRAM 65536

struct held {
    uint64_t due_us, seq; /* seq: arrival order in its direction */
    int dir;              /* to node dir */
    size_t len;
    uint8_t *data;
};

static struct {
    int fd[2];
    uint16_t real[2];
    uint32_t jitter_ms, small_ms;
    uint64_t rng;
    pthread_t th;
    atomic_int stop;
    struct held *heap; /* by due time */
    size_t n;
    uint64_t next_seq[2], sent_seq[2];
    struct uj_stats st;
} uj = {.fd = {-1, -1}};

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t draw(uint64_t bound)
{
    uj.rng ^= uj.rng << 13; /* xorshift64 */
    uj.rng ^= uj.rng >> 7;
    uj.rng ^= uj.rng << 17;
    return bound ? uj.rng % bound : 0;
}

static void heap_swap(size_t a, size_t b)
{
    struct held t = uj.heap[a];
    uj.heap[a] = uj.heap[b];
    uj.heap[b] = t;
}

static void heap_push(struct held h)
{
    size_t i = uj.n++;
    uj.heap[i] = h;
    while (i && uj.heap[(i - 1) / 2].due_us > uj.heap[i].due_us) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static struct held heap_pop(void)
{
    struct held top = uj.heap[0];
    uj.heap[0] = uj.heap[--uj.n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < uj.n && uj.heap[l].due_us < uj.heap[m].due_us)
            m = l;
        if (r < uj.n && uj.heap[r].due_us < uj.heap[m].due_us)
            m = r;
        if (m == i)
            break;
        heap_swap(i, m);
        i = m;
    }
    return top;
}

static struct sockaddr_in lo(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

int uj_open(uint16_t relay[2])
{
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in a = lo(0);
        socklen_t al = sizeof(a);
        uj.fd[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (uj.fd[i] < 0 || bind(uj.fd[i], (struct sockaddr *)&a, sizeof(a)) < 0 ||
            getsockname(uj.fd[i], (struct sockaddr *)&a, &al) < 0) {
            tl_log("FAIL: udp_jitter: a relay socket: %s", strerror(errno));
            return -1;
        }
        int big = 8 << 20;
        setsockopt(uj.fd[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        setsockopt(uj.fd[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
        relay[i] = ntohs(a.sin_port);
    }
    return 0;
}

/* What came in on relay socket d (for node d): queued with its delay. */
static void take(int d, uint8_t *buf)
{
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(uj.fd[d], buf, UJ_DGRAM, 0, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return;
        int s = ntohs(from.sin_port) == uj.real[0] ? 0 : ntohs(from.sin_port) == uj.real[1] ? 1 : -1;
        if (s < 0 || s == d || uj.n == UJ_MAX) {
            uj.st.dropped++;
            continue;
        }
        uint64_t wait = draw((uint64_t)uj.jitter_ms * 1000 + 1);
        if (n <= 256)
            wait += (uint64_t)uj.small_ms * 1000;
        struct held h = {.due_us = now_us() + wait, .seq = ++uj.next_seq[d], .dir = d,
                         .len = (size_t)n, .data = malloc((size_t)n)};
        if (!h.data)
            abort();
        memcpy(h.data, buf, (size_t)n);
        heap_push(h);
    }
}

/* Datagrams due by now leave from the sender's relay socket for node dir's real port. */
static void send_due(void)
{
    uint64_t t = now_us();
    while (uj.n && uj.heap[0].due_us <= t) {
        struct held h = heap_pop();
        struct sockaddr_in to = lo(uj.real[h.dir]);
        sendto(uj.fd[1 - h.dir], h.data, h.len, 0, (struct sockaddr *)&to, sizeof(to));
        if (h.seq < uj.sent_seq[h.dir])
            uj.st.overtaken++;
        else
            uj.sent_seq[h.dir] = h.seq;
        uj.st.relayed++;
        free(h.data);
    }
}

static void *run(void *arg)
{
    uint8_t *buf = malloc(UJ_DGRAM);
    struct pollfd pf[2] = {{.fd = uj.fd[0], .events = POLLIN}, {.fd = uj.fd[1], .events = POLLIN}};
    while (!atomic_load(&uj.stop)) {
        int ms = 50;
        if (uj.n) {
            uint64_t t = now_us(), due = uj.heap[0].due_us;
            ms = due <= t ? 0 : (int)((due - t + 999) / 1000);
            if (ms > 50)
                ms = 50;
        }
        poll(pf, 2, ms);
        for (int d = 0; d < 2; d++)
            take(d, buf);
        send_due();
    }
    free(buf);
    return arg;
}

int uj_start(const uint16_t real[2], uint32_t jitter_ms, uint32_t small_ms, uint64_t seed)
{
    uj.real[0] = real[0];
    uj.real[1] = real[1];
    uj.jitter_ms = jitter_ms;
    uj.small_ms = small_ms;
    uj.rng = seed | 1;
    uj.heap = calloc(UJ_MAX, sizeof(*uj.heap));
    if (!uj.heap || pthread_create(&uj.th, NULL, run, NULL)) {
        tl_log("FAIL: udp_jitter: no relay thread");
        return -1;
    }
    return 0;
}

void uj_stop(struct uj_stats *st)
{
    atomic_store(&uj.stop, 1);
    pthread_join(uj.th, NULL);
    while (uj.n)
        free(heap_pop().data);
    free(uj.heap);
    for (int i = 0; i < 2; i++)
        close(uj.fd[i]);
    *st = uj.st;
}
