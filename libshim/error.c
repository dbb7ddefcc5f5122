/* error.c - status texts and the thread-local last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

/* One buffer per thread; nexar_last_error() hands out a pointer into it. */
static _Thread_local char last_error[NX_ERR_TEXT_BYTES + 256];

const char *nexar_strerror(nexar_status_t s)
{
    switch (s) {
    case NEXAR_OK:
        return "success";
    case NEXAR_ERR_INVALID:
        return "invalid argument";
    case NEXAR_ERR_UNAVAILABLE:
        return "nexard is not available";
    case NEXAR_ERR_MISMATCH:
        return "ranks called mismatching operations";
    case NEXAR_ERR_TIMEOUT:
        return "operation timed out";
    case NEXAR_ERR_PEER_LOST:
        return "a rank of the communicator was lost";
    case NEXAR_ERR_ABORTED:
        return "communicator aborted";
    case NEXAR_ERR_NOMEM:
        return "out of memory";
    case NEXAR_ERR_UNSUPPORTED:
        return "operation not supported";
    case NEXAR_ERR_PERMISSION:
        return "permission denied";
    case NEXAR_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

const char *nexar_last_error(void)
{
    return last_error;
}

size_t nexar_dtype_size(nexar_dtype_t dtype)
{
    return nx_dtype_size((uint8_t)((unsigned)dtype < NEXAR_DTYPE_COUNT ? dtype : 0xff));
}

nexar_status_t nx_fail(nexar_status_t s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return s;
}

nexar_status_t nx_fail_text(nexar_status_t s, const char *text)
{
    const char *t = text && *text ? text : nexar_strerror(s);
    if (t != last_error)
        snprintf(last_error, sizeof(last_error), "%s", t);
    return s;
}

nexar_status_t nx_status_from_wire(uint32_t s)
{
    if (s == 0)
        return NEXAR_OK;
    if (s > NEXAR_ERR_INTERNAL)
        return NEXAR_ERR_INTERNAL;
    return (nexar_status_t)s;
}
