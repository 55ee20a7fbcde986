/*
 * connfile.h -- the Jupyter connection file: where to bind and how to sign.
 *
 * The file is the JSON object jupyter_client writes:
 *   {"transport": "tcp"|"ipc", "ip": "127.0.0.1", "shell_port": N, "iopub_port": N, "stdin_port": N,
 *    "control_port": N, "hb_port": N, "key": "...", "signature_scheme": "hmac-sha256", "kernel_name": "..."}
 * Ports are 0..65535 (0 asks the kernel to pick one; the chosen port is written back by the caller).  The key
 * may be empty.  Unknown members are ignored, as jupyter_client adds some of its own.
 */
#ifndef PYC_CONNFILE_H
#define PYC_CONNFILE_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"

enum { PYC_CHAN_SHELL, PYC_CHAN_IOPUB, PYC_CHAN_STDIN, PYC_CHAN_CONTROL, PYC_CHAN_HB, PYC_CHAN_COUNT };

typedef struct pyc_connfile {
    char transport[8];           /* "tcp" or "ipc" */
    char ip[256];                /* an address for tcp, a path prefix for ipc */
    int ports[PYC_CHAN_COUNT];   /* indexed by PYC_CHAN_* */
    char signature_scheme[64];
    char *key;                   /* owned, NUL-terminated, may be ""; NULL in a copy that carries no key */
    size_t keylen;
    char kernel_name[128];       /* may be "" */
} pyc_connfile_t;

/* The member name of each channel's port in the file, indexed by PYC_CHAN_*. */
extern const char *const pyc_connfile_port_names[PYC_CHAN_COUNT];

/* Parses len bytes of JSON into out.  Returns 0, or -1 with err naming the first problem.  On failure out
 * holds nothing that needs freeing. */
int pyc_connfile_parse(const char *text, size_t len, pyc_connfile_t *out, pyc_error_t *err);

/* Reads and parses the file at path (at most 1 MiB). */
int pyc_connfile_load(const char *path, pyc_connfile_t *out, pyc_error_t *err);

/* The connection as the JSON object of a connection file (a new reference), or NULL when a string in it
 * is not valid UTF-8 or memory runs out. */
json_t *pyc_connfile_to_json(const pyc_connfile_t *cf);

/* Writes a JSON object (borrowed; NULL is an error) to path with mode 0600, atomically (a temporary file
 * next to it, of a random name and created exclusively (pyc_open_tmp), then rename): a connection file, or
 * one with members of the caller's own.  Returns 0 or -1 with err. */
int pyc_connfile_write_json(const char *path, json_t *root, pyc_error_t *err);

/* Writes cf as JSON to path with mode 0600, atomically (temporary file, then rename).  Returns 0 or -1. */
int pyc_connfile_write(const char *path, const pyc_connfile_t *cf, pyc_error_t *err);

/* Writes the ZeroMQ endpoint of a channel into out: "tcp://IP:PORT" or "ipc://IP-PORT".  A port of 0 gives
 * "tcp://IP:*" so that ZeroMQ picks one.  Returns 0, or -1 when out is too small. */
int pyc_connfile_endpoint(const pyc_connfile_t *cf, int chan, char *out, size_t cap);

/* Replaces cf's key with a copy of key[0..len).  Returns 0, or -1 with err (out of memory; cf unchanged). */
int pyc_connfile_set_key(pyc_connfile_t *cf, const char *key, size_t len, pyc_error_t *err);

/* Makes dst a copy of src, with a key of its own.  Returns 0, or -1 with err (dst then holds no key). */
int pyc_connfile_copy(pyc_connfile_t *dst, const pyc_connfile_t *src, pyc_error_t *err);

/* Frees the key.  Safe to call twice. */
void pyc_connfile_clear(pyc_connfile_t *cf);

#endif
