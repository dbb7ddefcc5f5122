/* inspect.c - see inspect.h. */
#include "inspect.h"

#include <string.h>

#include "nexar.pb-c.h"

static const struct nx_inspect_route routes[] = {
    {"/v1/status", "status", NEXAR__CTL_COMMAND__CTL_STATUS},
    {"/v1/jobs", "jobs", NEXAR__CTL_COMMAND__CTL_JOBS},
    {"/v1/comms", "comms", NEXAR__CTL_COMMAND__CTL_COMMS},
    {"/v1/ops", "ops", NEXAR__CTL_COMMAND__CTL_OPS},
    {"/v1/stats", "stats", NEXAR__CTL_COMMAND__CTL_STATS},
    {"/v1/peers", "peers", NEXAR__CTL_COMMAND__CTL_PEERS},
    {"/v1/config", "config", NEXAR__CTL_COMMAND__CTL_CONFIG},
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

const struct nx_inspect_route *nx_inspect_by_command(int command)
{
    for (size_t i = 0; i < NROUTES; i++)
        if (routes[i].command == command)
            return &routes[i];
    return NULL;
}

const struct nx_inspect_route *nx_inspect_by_path(const char *path, size_t len)
{
    for (size_t i = 0; i < NROUTES; i++)
        if (strlen(routes[i].path) == len && !memcmp(routes[i].path, path, len))
            return &routes[i];
    return NULL;
}
