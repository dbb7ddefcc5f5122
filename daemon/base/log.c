/* log.c - see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "text_escape.h"

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
    nx_text_escape(raw, msg, sizeof(msg));

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
