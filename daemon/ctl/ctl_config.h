/* ctl_config.h - answers `nexarctl config` (and GET /v1/config): every key of the config
 * file (docs/configuration.md) with the value in effect and where it came from.
 *
 * The source of a value is judged when asked, from the built-in defaults, the config
 * file read again (when nexard was given one) and the settings in effect:
 *   default        the value is the built-in default
 *   config file    the file sets it, and nothing overrode it
 *   command line   it differs from what the defaults and the file make (--set, --listen...)
 * When the file cannot be read now, or changed after nexard started, values that are not
 * defaults read "config file or command line" and CtlReply.config_note says why.  A key
 * file is named, never read. */
#ifndef NX_CTL_CONFIG_H
#define NX_CTL_CONFIG_H

#include "ctl_info.h"

/* Builds the CTL_CONFIG reply from nxd.cfg and hands it to emit (see nx_ctl_report). */
void nx_ctl_config_report(nx_ctl_emit emit, void *arg);

#endif
