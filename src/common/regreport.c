/*
 * regreport.c -- see regreport.h.
 */
#include "regreport.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int
pyc_regreport_content(const pyc_connfile_t *cf, char *buf, size_t cap)
{
    json_t *c = json_pack("{s:s}", "kernel_id", cf->kernel_id);
    for (int i = 0; c != NULL && i < PYC_CHAN_COUNT; i++) {
        char port[16];
        snprintf(port, sizeof port, "%d", cf->ports[i]);
        json_object_set_new(c, pyc_connfile_port_names[i], json_string(port));
    }
    int n = c != NULL ? (int)json_dumpb(c, buf, cap, JSON_COMPACT) : -1;
    json_decref(c);
    return n <= 0 || (size_t)n >= cap ? -1 : n;
}

int
pyc_regreport_take(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, const char *kernel_id,
                   pyc_connfile_t *cf, pyc_error_t *err)
{
    if (n != 3 || frames[0].size != PYC_WIRE_DELIM_LEN ||
        memcmp(frames[0].data, PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN) != 0)
        return pyc_error_set(err, "the kernel's report is not [<IDS|MSG>, signature, content]");
    if (pyc_auth_verify(auth, &frames[2], 1, frames[1].data, frames[1].size, err) < 0)
        return -1;
    json_error_t jerr;
    json_t *c = json_loadb(frames[2].data, frames[2].size, 0, &jerr);
    int rc = 0, ports[PYC_CHAN_COUNT];
    if (!json_is_object(c) || !json_is_string(json_object_get(c, "kernel_id")) ||
        strcmp(json_string_value(json_object_get(c, "kernel_id")), kernel_id) != 0)
        rc = pyc_error_set(err, "the report is not this kernel's");
    for (int i = 0; rc == 0 && i < PYC_CHAN_COUNT; i++) {
        const char *p = json_string_value(json_object_get(c, pyc_connfile_port_names[i]));
        char *end;
        long v = p != NULL ? strtol(p, &end, 10) : -1;
        if (p == NULL || *end != '\0' || v < 1 || v > 65535)
            rc = pyc_error_set(err, "the report's %s is not a port", pyc_connfile_port_names[i]);
        else
            ports[i] = (int)v;
    }
    json_decref(c);
    if (rc == 0)
        memcpy(cf->ports, ports, sizeof ports);
    return rc;
}

int
pyc_regreport_ack(pyc_auth_t *auth, char sig[PYC_AUTH_MAX_HEX + 1])
{
    pyc_frame_t content = {PYC_REGREPORT_ACK, sizeof PYC_REGREPORT_ACK - 1};
    return pyc_auth_sign(auth, &content, 1, sig);
}
