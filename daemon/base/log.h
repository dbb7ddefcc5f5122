/* log.h - the daemon's one log module: severity + subsystem, to stderr (journal) or syslog. */
#ifndef NX_LOG_H
#define NX_LOG_H

#include <stddef.h>

enum nx_log_level { NX_LOG_DEBUG = 0, NX_LOG_INFO = 1, NX_LOG_WARN = 2, NX_LOG_ERROR = 3 };

/* Lines go to stderr; under systemd (JOURNAL_STREAM set) they carry "<N>" priority
 * prefixes instead of timestamps, and with use_syslog they go to syslog. */
void nx_log_init(enum nx_log_level level, int use_syslog);
/* With syslog: warnings and errors also go to stderr while on (a daemon starting in the
 * background still has its starter's terminal, which must learn why it failed). */
void nx_log_also_stderr(int on);
void nx_log_fini(void);

/* "debug", "info", "warn"/"warning", "error"; -1 when unknown. */
int nx_log_level_parse(const char *s);

void nx_log(enum nx_log_level level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

int nx_log_enabled(enum nx_log_level level);


#define NX_DEBUG(sub, ...)                                                                 \
    do {                                                                                   \
        if (nx_log_enabled(NX_LOG_DEBUG))                                                  \
            nx_log(NX_LOG_DEBUG, sub, __VA_ARGS__);                                        \
    } while (0)
#define NX_INFO(sub, ...) nx_log(NX_LOG_INFO, sub, __VA_ARGS__)
#define NX_WARN(sub, ...) nx_log(NX_LOG_WARN, sub, __VA_ARGS__)
#define NX_ERROR(sub, ...) nx_log(NX_LOG_ERROR, sub, __VA_ARGS__)

#endif
