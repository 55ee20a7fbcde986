/*
 * connfile.h -- the Jupyter connection file: where to bind and how to sign.
 *
 * The file is the JSON object jupyter_client writes:
 *   {"transport": "tcp"|"ipc", "ip": "127.0.0.1", "shell_port": N, "iopub_port": N, "stdin_port": N,
 *    "control_port": N, "hb_port": N, "key": "...", "signature_scheme": "hmac-sha256", "kernel_name": "..."}
 * Ports are 0..65535 (0 asks the kernel to pick one; the chosen port is written back by the caller).  The key
 * may be empty.  Unknown members are ignored, as jupyter_client adds some of its own.
 *
 * CURVE transport encryption (README, "Encryption") adds, both or neither:
 *   "curve_publickey": "<40 Z85 characters>", "curve_secretkey": "<40 Z85 characters>"
 * the kernel's key pair, written by the launcher (jupyter_client >= 8.9 and ipykernel >= 7.3 use these names);
 * clients that read the file use the same pair as their own and the public key as the server's.  pyc adds
 *   "curve_allowed_clients": ["<40 Z85 characters>", ...]
 * the public keys of the clients allowed to connect besides the file's own (the kernel refuses the others
 * through ZAP); without it, any client that knows curve_publickey connects, as with ipykernel.
 *
 * A registration file (protocol 5.6, the kernel startup handshake) is told apart by registration_port:
 *   {"kernel_id": "...", "transport": "tcp", "registration_ip": "127.0.0.1", "registration_port": N or "N",
 *    "signature_scheme": "hmac-sha256", "key": "..."}
 * It gives no ports: the kernel binds ports of its own choosing (on "ip" when the file has one, else on
 * registration_ip) and reports them to the registration service (kernel/register.c).  Either kind of file
 * may carry pyc's "port_range": [low, high], the ports that ports chosen by the kernel come from (for
 * firewalls and gateways).
 */
#ifndef PYC_CONNFILE_H
#define PYC_CONNFILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "z85.h"

enum { PYC_CHAN_SHELL, PYC_CHAN_IOPUB, PYC_CHAN_STDIN, PYC_CHAN_CONTROL, PYC_CHAN_HB, PYC_CHAN_COUNT };

typedef struct pyc_connfile {
    char transport[8];           /* "tcp" or "ipc" */
    char ip[256];                /* an address for tcp, a path prefix for ipc */
    int ports[PYC_CHAN_COUNT];   /* indexed by PYC_CHAN_* */
    char signature_scheme[64];
    char *key;                   /* owned, NUL-terminated, may be ""; NULL in a copy that carries no key */
    size_t keylen;
    char kernel_name[128];       /* may be "" */
    /* CURVE: the kernel's key pair as Z85 text, both "" when the file asks for no encryption. */
    char curve_publickey[PYC_CURVE_KEY_TEXT + 1];
    char curve_secretkey[PYC_CURVE_KEY_TEXT + 1];
    /* The allow-list: when curve_restricted, only curve_allowed[0..curve_nallowed) (client public keys, owned)
     * and curve_publickey itself may connect; the list may be empty. */
    bool curve_restricted;
    unsigned char (*curve_allowed)[PYC_CURVE_KEY_BYTES];
    size_t curve_nallowed;
    /* A registration file: registration is true and the ports are 0. */
    bool registration;
    char kernel_id[256];
    char registration_ip[256];
    int registration_port;
    /* Ports the kernel chooses come from [port_min, port_max]; both 0: any the system gives. */
    int port_min, port_max;
} pyc_connfile_t;

/* True when the connection is CURVE-encrypted. */
static inline bool
pyc_connfile_curve(const pyc_connfile_t *cf)
{
    return cf->curve_publickey[0] != '\0';
}

/* The member name of each channel's port in the file, indexed by PYC_CHAN_*. */
extern const char *const pyc_connfile_port_names[PYC_CHAN_COUNT];

/* Sets the range ports chosen by the kernel come from, from text "LOW-HIGH" (PYC_PORT_RANGE).  Returns 0, or -1
 * with err when the text is not two ports with LOW <= HIGH. */
int pyc_connfile_set_port_range(pyc_connfile_t *cf, const char *text, pyc_error_t *err);

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

/* Makes dst a copy of src, with a key and an allow-list of its own.  Returns 0, or -1 with err (dst then holds
 * no key and no allow-list). */
int pyc_connfile_copy(pyc_connfile_t *dst, const pyc_connfile_t *src, pyc_error_t *err);

/* Adds a client public key to the allow-list (and makes the list apply); a key already there is not added
 * twice.  Returns 0, or -1 with err (out of memory). */
int pyc_connfile_allow(pyc_connfile_t *cf, const unsigned char key[PYC_CURVE_KEY_BYTES], pyc_error_t *err);

/* Adds the keys of an allow-list file to cf's (PYC_CURVE_ALLOWED_CLIENTS names one): one Z85 key per line,
 * as the line's first word (words after it are a note, such as whose key it is); blank lines and lines that
 * start with '#' are comments (no key starts with '#').  A file that group or others may write is refused, as is
 * any line that is not a key (err names its number).  Returns the number of keys read, or -1 with err. */
int pyc_connfile_load_allowed(pyc_connfile_t *cf, const char *path, pyc_error_t *err);

/* Frees the key and the allow-list.  Safe to call twice. */
void pyc_connfile_clear(pyc_connfile_t *cf);

#endif
