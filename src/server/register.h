/*
 * register.h -- the kernel's side of the startup handshake (messaging protocol 5.6, JEP 66): a kernel given a
 * registration file instead of a connection file binds ports of its own choosing and reports them to the
 * launcher's registration service, which answers with a signed ACK.
 *
 * The report is one signed single-frame content dict, sent from a DEALER connected to
 * tcp://registration_ip:registration_port as [<IDS|MSG>, HMAC of the content, content] with content
 *   {"kernel_id": ..., "shell_port": "N", "iopub_port": "N", "stdin_port": "N", "control_port": "N",
 *    "hb_port": "N"}
 * (ports as strings, as the spec writes them).  The ACK is [<IDS|MSG>, HMAC, content] with any content; its
 * signature is checked.  The report is sent again every PYC_REGISTER_RETRY_MS until an ACK comes (a service
 * that restarts, or lost the first one, still gets it), for PYC_REGISTER_TIMEOUT_S seconds in all (the
 * environment variable PYC_REGISTRATION_TIMEOUT sets it): then the kernel gives up, and ends.
 */
#ifndef PYC_REGISTER_H
#define PYC_REGISTER_H

#include "auth.h"
#include "connfile.h"
#include "error.h"

#define PYC_REGISTER_TIMEOUT_S 20.0
#define PYC_REGISTER_RETRY_MS 2000

/* Reports cf's ports (bound already) for cf->kernel_id and waits for the ACK, at most timeout_s seconds.
 * Returns 0, or -1 with err: no ACK in time (with how many ACKs were refused for a bad signature), or a
 * socket that could not be made. */
int pyc_register(const pyc_connfile_t *cf, pyc_auth_t *auth, double timeout_s, pyc_error_t *err);

#endif
