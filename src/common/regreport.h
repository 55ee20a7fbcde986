/*
 * regreport.h -- the report of the startup handshake (messaging protocol 5.6, JEP 66), both ends: the kernel
 * writes it (src/server/register.c), and the two registration services pyc has read it and answer with the
 * ACK: `pyc new` (cli/handshake.c, over its own ZMTP) and the gateway launcher (src/gateway/, over libzmq).
 *
 * The report is [<IDS|MSG>, HMAC of the content, content] with content
 *   {"kernel_id": ..., "shell_port": "N", "iopub_port": "N", "stdin_port": "N", "control_port": "N",
 *    "hb_port": "N"}
 * (ports as strings, as the spec writes them); the ACK is [<IDS|MSG>, HMAC, {"status":"ok"}].
 */
#ifndef PYC_REGREPORT_H
#define PYC_REGREPORT_H

#include <stddef.h>

#include "auth.h"
#include "connfile.h"
#include "error.h"
#include "frame.h"

/* The content of the ACK, signed by pyc_regreport_ack. */
#define PYC_REGREPORT_ACK "{\"status\":\"ok\"}"

/* The report's content for cf->kernel_id and cf's ports, as JSON text in buf.  Returns its length, or -1
 * when it does not fit. */
int pyc_regreport_content(const pyc_connfile_t *cf, char *buf, size_t cap);

/* The report in frames[0..n) (after any routing identities), if it is one for kernel_id signed with auth:
 * its ports into cf->ports.  Returns 0, or -1 with err (not three frames with the delimiter first, a bad
 * signature, another kernel's report, a member that is not a port). */
int pyc_regreport_take(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, const char *kernel_id,
                       pyc_connfile_t *cf, pyc_error_t *err);

/* The ACK's signature, for the frames [<IDS|MSG>, sig, PYC_REGREPORT_ACK].  Returns 0, or -1. */
int pyc_regreport_ack(pyc_auth_t *auth, char sig[PYC_AUTH_MAX_HEX + 1]);

#endif
