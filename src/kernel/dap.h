/*
 * dap.h -- a connection to a Debug Adapter Protocol peer (debugpy's adapter) over TCP on 127.0.0.1, and the
 * protocol's framing on the byte stream: each message is a header block of "Name: value\r\n" lines that
 * must include Content-Length, an empty line, and that many bytes of JSON.
 *
 * The kernel's debugger (debugger.c) reads the adapter through this parser, so it is fuzzed
 * (tests/fuzz/fuzz_dap.c) and unit-tested: a peer that sends garbage is cut off, never trusted with a length.
 * A connection belongs to one thread.
 */
#ifndef PYC_DAP_H
#define PYC_DAP_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"
#include "error.h"

#define PYC_DAP_MAX_HEADER 1024    /* the header block of one message at most */
#define PYC_DAP_MAX_BODY ((size_t)256 << 20)

/* Looks for one whole message at the start of buf[0..len).  Returns
 *   1  with *body and *body_len (a view into buf) and *used (header and body) set;
 *   0  when buf holds only the beginning of a message: read more;
 *  -1  when the header block is malformed: no Content-Length, a length that is not a decimal number or is over
 *      max_body, or no end of the header block within PYC_DAP_MAX_HEADER bytes. */
int pyc_dap_frame(const char *buf, size_t len, size_t max_body, const char **body, size_t *body_len, size_t *used);

typedef struct pyc_dap_conn {
    int fd;                      /* -1 while closed */
    pyc_buf_t rx;                /* bytes read, not yet a whole message */
} pyc_dap_conn_t;

/* A closed connection. */
void pyc_dap_init(pyc_dap_conn_t *c);

/* Connects to 127.0.0.1:port.  Returns 0, or -1 with err. */
int pyc_dap_connect(pyc_dap_conn_t *c, int port, pyc_error_t *err);

/* Closes the connection and forgets what was read; NULL-safe, idempotent. */
void pyc_dap_close(pyc_dap_conn_t *c);

/* Sends one message (borrowed).  Returns 0, or -1 after closing the connection (with a log line). */
int pyc_dap_send(pyc_dap_conn_t *c, json_t *msg);

/* Waits up to timeout_ms for bytes and reads what came.  Returns 1 when bytes came, 0 on timeout, -1 when the
 * connection is closed (by the peer, an error, or a message over PYC_DAP_MAX_BODY). */
int pyc_dap_read(pyc_dap_conn_t *c, int timeout_ms);

/* Takes the next whole message out of what was read: a JSON object (a new reference), or NULL when none is
 * whole yet.  Bodies that are not JSON objects are dropped with a log line; a malformed header closes the
 * connection. */
json_t *pyc_dap_next(pyc_dap_conn_t *c);

#endif
