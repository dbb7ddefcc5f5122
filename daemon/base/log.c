/* log.c - see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

static enum nx_log_level min_level = NX_LOG_INFO;
static int to_syslog;
static int journal;
static int also_stderr;

void nx_log_also_stderr(int on)
{
    also_stderr = on;
}

void nx_log_init(enum nx_log_level level, int use_syslog)
{
    min_level = level;
    to_syslog = use_syslog;
    journal = getenv("JOURNAL_STREAM") != NULL;
    if (to_syslog)
        openlog("nexard", LOG_PID, LOG_DAEMON);
}

void nx_log_fini(void)
{
    if (to_syslog)
        closelog();
    to_syslog = 0;
}

int nx_log_level_parse(const char *s)
{
    if (!strcmp(s, "debug"))
        return NX_LOG_DEBUG;
    if (!strcmp(s, "info"))
        return NX_LOG_INFO;
    if (!strcmp(s, "warn") || !strcmp(s, "warning"))
        return NX_LOG_WARN;
    if (!strcmp(s, "error"))
        return NX_LOG_ERROR;
    return -1;
}

int nx_log_enabled(enum nx_log_level level)
{
    return level >= min_level;
}

/* The length of the well-formed UTF-8 sequence at s (2..4 bytes), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t n;
    uint32_t cp;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0; /* overlong, a surrogate, beyond Unicode */
    return n;
}

size_t nx_log_escape(const char *in, char *out, size_t len)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t o = 0;
    if (len == 0)
        return 0;
    while (*s) {
        size_t n = *s >= 0x80 ? utf8_len(s) : 0;
        char tmp[5];
        const char *put = (const char *)s;
        size_t take = 1;
        if (n) {
            take = n;
        } else if (*s < 0x20 || *s >= 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\x%02x", *s);
            put = tmp;
            take = 4;
        }
        if (o + take >= len)
            break;
        memcpy(out + o, put, take);
        o += take;
        s += put == tmp ? 1 : take;
    }
    out[o] = '\0';
    return o;
}

void nx_log(enum nx_log_level level, const char *subsys, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    static const int prio[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR};
    char raw[1024], msg[4096];
    va_list ap;

    if (level < min_level)
        return;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    /* Texts in log lines often come from clients and peers (job names, addresses, a
     * rank's NEXAR_COORD): one line stays one line, whatever bytes they hold. */
    nx_log_escape(raw, msg, sizeof(msg));

    if (to_syslog) {
        syslog(prio[level], "%s: %s", subsys, msg);
        if (also_stderr && level >= NX_LOG_WARN)
            fprintf(stderr, "nexard: %s: %s\n", subsys, msg);
    } else if (journal) {
        fprintf(stderr, "<%d>%s: %s\n", prio[level], subsys, msg);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        fprintf(stderr, "%02d:%02d:%02d.%03ld nexard %s %s: %s\n", tm.tm_hour, tm.tm_min,
                tm.tm_sec, ts.tv_nsec / 1000000, names[level], subsys, msg);
    }
}
