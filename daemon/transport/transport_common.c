/* transport_common.c - what every transport implementation shares. */
#include "transport.h"

const char *nx_tpeer_state_name(enum nx_tpeer_state st)
{
    switch (st) {
    case NX_TPEER_CONNECTING:
        return "connecting";
    case NX_TPEER_UP:
        return "up";
    case NX_TPEER_LOST:
        return "lost";
    }
    return "?";
}
