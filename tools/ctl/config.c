/*
 * config.c - `nexarctl config`: every setting of the daemon (docs/configuration.md) with
 * its value and where it came from, like `chronyc` or `ompi_info` tell theirs:
 *
 *   config file /etc/nexar/nexard.conf
 *   KEY          VALUE                   SOURCE
 *   socket       /run/nexar/nexard.sock  default
 *   listen       10.0.0.1:7000           config file
 *   slot_bytes   1048576                 command line
 *
 * An unset value prints as "-".  Key files are named, never read: values are paths.
 */
#include "ctl.h"
#include "util.h"

void nxc_config_human(FILE *f, const Nexar__CtlReply *r)
{
    if (r->config_file && *r->config_file)
        fprintf(f, "config file %s\n", r->config_file);
    else
        fprintf(f, "no config file: built-in defaults and the command line\n");
    struct nxc_table t;
    nxc_table_init(&t, 3, "KEY", "VALUE", "SOURCE");
    for (size_t i = 0; i < r->n_config; i++) {
        const Nexar__ConfigEntry *e = r->config[i];
        nxc_table_add(&t, nxt_xstrdup(e->key && *e->key ? e->key : "?"));
        nxc_table_add(&t, nxt_xstrdup(e->value && *e->value ? e->value : "-"));
        nxc_table_add(&t, nxt_xstrdup(e->source && *e->source ? e->source : "-"));
    }
    nxc_table_print(&t, f, "");
    nxc_table_free(&t);
    if (r->config_note && *r->config_note)
        fprintf(f, "note: %s\n", r->config_note);
}
