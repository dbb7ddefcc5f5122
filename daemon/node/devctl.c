/*
 * devctl.c - DEV_REGISTER and DEV_UNREGISTER on a joined rank's control connection.
 *
 * Every request gets one DEV_REPLY, in order.  A daemon without a backend answers
 * NEXAR_ERR_UNSUPPORTED with nx_device_note (a shim asks only when HelloReply said
 * yes, but a reply costs nothing and a refusal is clearer than a dropped connection).
 * What a rank claims about an allocation (base, size) is only used for messages: the
 * backend maps the handle and reports what it really mapped.
 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "ctlsrv.h"
#include "devop.h"
#include "log.h"
#include "nexar.h"
#include "nexar.pb-c.h"

/* Registrations one rank may hold: each pins a mapping in the daemon. */
#define NX_DEV_MAX_REGS 65536u
#define NX_PCI_ID_MAX 32

static int reply(struct nx_conn *c, uint32_t status, const char *err, uint32_t id,
                 uint64_t size)
{
    Nexar__DeviceReply r = NEXAR__DEVICE_REPLY__INIT;
    r.status = status;
    r.error = (char *)(err ? err : "");
    r.id = id;
    r.size = size;
    if (nx_conn_send(c, NX_MSG_DEV_REPLY, &r, NULL, 0) < 0) {
        nx_conn_close(c);
        return -1;
    }
    return 0;
}

static int on_register(struct nx_conn *c, const uint8_t *payload, uint32_t len)
{
    struct nx_client *cl = c->client;
    Nexar__DeviceRegister *m = nexar__device_register__unpack(NULL, len, payload);
    char err[320] = "";
    uint32_t status, id = 0;
    uint64_t mapped = 0;
    if (!m) {
        nx_conn_fail(c, NEXAR_ERR_INVALID, "DEV_REGISTER does not decode");
        return -1;
    }
    int kind = m->kind == NEXAR__DEVICE_KIND__DEVICE_MEMORY  ? NX_DEV_MEMORY
               : m->kind == NEXAR__DEVICE_KIND__DEVICE_EVENT ? NX_DEV_EVENT
                                                              : 0;
    const char *pci = m->pci_bus_id ? m->pci_bus_id : "";
    if (!nx_device) {
        status = NEXAR_ERR_UNSUPPORTED;
        snprintf(err, sizeof(err), "nexard has no device support: %s", nx_device_note);
    } else if (kind == 0 || m->ipc_handle.len != 64 || strlen(pci) >= NX_PCI_ID_MAX) {
        status = NEXAR_ERR_INVALID;
        snprintf(err, sizeof(err), "DEV_REGISTER: bad kind, handle size or device id");
    } else if (cl->dev_regs >= NX_DEV_MAX_REGS) {
        status = NEXAR_ERR_NOMEM;
        snprintf(err, sizeof(err), "more than %u device registrations from one rank",
                 NX_DEV_MAX_REGS);
    } else {
        status = nx_device->reg(&cl->dev, kind, m->ipc_handle.data, m->ipc_handle.len,
                                m->base_addr, m->size, pci, &id, &mapped, err, sizeof(err));
        if (status == NEXAR_OK)
            cl->dev_regs++;
    }
    if (status != NEXAR_OK) {
        char who[160];
        NX_INFO("device", "%s: registration refused: %s",
                nx_client_name(cl, who, sizeof(who)), err);
    }
    nexar__device_register__free_unpacked(m, NULL);
    return reply(c, status, err, id, mapped);
}

static int on_unregister(struct nx_conn *c, const uint8_t *payload, uint32_t len)
{
    struct nx_client *cl = c->client;
    Nexar__DeviceUnregister *m = nexar__device_unregister__unpack(NULL, len, payload);
    if (!m) {
        nx_conn_fail(c, NEXAR_ERR_INVALID, "DEV_UNREGISTER does not decode");
        return -1;
    }
    for (size_t i = 0; nx_device && i < m->n_ids; i++)
        if (nx_device->unreg(&cl->dev, m->ids[i]) && cl->dev_regs > 0)
            cl->dev_regs--;
    nexar__device_unregister__free_unpacked(m, NULL);
    return reply(c, NEXAR_OK, NULL, 0, 0);
}

int nx_devctl_frame(struct nx_conn *c, const struct nx_frame_hdr *h, const uint8_t *payload)
{
    if (h->type == NX_MSG_DEV_REGISTER)
        return on_register(c, payload, h->length);
    return on_unregister(c, payload, h->length);
}
