/*
 * wire.h -- Jupyter wire frames <-> message, with no sockets in sight.
 *
 * A message on the wire is the multipart
 *     [identity..., "<IDS|MSG>", signature, header, parent_header, metadata, content, buffer...]
 * pyc_wire_decode checks the frame layout, then the signature (length, constant-time compare, replay), and
 * only then parses the four JSON dicts, so nothing unauthenticated reaches the JSON parser.  A message whose
 * layout, signature, JSON or header fields are wrong is refused with one sentence in err; the caller logs it
 * and drops the message.
 *
 * Decoded identities and buffers are views into the caller's frames, not copies: a 1 GB pickle buffer is
 * never copied here.  The caller hands the frames' storage to the message with pyc_msg_set_owner so that
 * both are released together.
 *
 * This module is the fuzz target for the decoder (tests/fuzz/fuzz_wire.c).
 */
#ifndef PYC_WIRE_H
#define PYC_WIRE_H

#include <jansson.h>
#include <stddef.h>

#include "auth.h"
#include "error.h"

#define PYC_WIRE_DELIM "<IDS|MSG>"
#define PYC_WIRE_DELIM_LEN 9

/* A message may have at most this many frames (identities, the six fixed frames and buffers together). */
#define PYC_WIRE_MAX_FRAMES 4096

typedef struct pyc_msg {
    const pyc_frame_t *idents;   /* routing identities: views into the received frames */
    size_t n_idents;
    json_t *header;              /* owned references; all four are JSON objects */
    json_t *parent_header;
    json_t *metadata;
    json_t *content;
    const pyc_frame_t *buffers;  /* extra frames after content: views */
    size_t n_buffers;
    const char *msg_id;          /* borrowed from header; never NULL after a successful decode */
    const char *msg_type;
    const char *session;
    void *owner;                 /* storage behind idents and buffers; freed with owner_free */
    void (*owner_free)(void *owner);
    pyc_frame_t *frames_copy;    /* the frame array itself, copied by decode */
} pyc_msg_t;

/* Decodes n frames.  On success returns 0 and sets *out to a new message whose idents and buffers point
 * into the bytes of `frames` (the array itself is copied, the bytes are not).  On failure returns -1, sets
 * *out to NULL and fills err.  auth may be NULL only in tests that want no signature check. */
int pyc_wire_decode(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, pyc_msg_t **out, pyc_error_t *err);

/* Makes the message responsible for the storage behind its frames: owner_free(owner) runs when the message
 * is destroyed. */
void pyc_msg_set_owner(pyc_msg_t *msg, void *owner, void (*owner_free)(void *owner));

/* Releases the JSON, the frame array and the owner (unless holds remain, see below); sets *msg_p to NULL.
 * NULL-safe. */
void pyc_msg_destroy(pyc_msg_t **msg_p);

/* A counted reference to the storage behind a message's idents and buffers: the views into it stay valid
 * while a hold exists, after the message itself is destroyed.  The storage is freed (owner_free) by the last
 * of the message and its holds to go.  This is how a received 1 GB buffer becomes a Python object without a
 * copy. */
typedef struct pyc_msg_hold pyc_msg_hold_t;

/* Takes a hold on msg's storage.  Call it on the thread that owns msg, while msg lives.  Returns NULL when msg
 * has no owner (its frames belong to the caller) or memory runs out: the views then live only as long as msg.
 * msg shows the same frames as before; only who frees their storage changes. */
pyc_msg_hold_t *pyc_msg_hold(const pyc_msg_t *msg);

/* Drops a hold.  Any thread; NULL-safe. */
void pyc_msg_hold_release(pyc_msg_hold_t *hold);

/* Signs the four serialized dicts (header, parent_header, metadata, content) into sig_out, which holds
 * PYC_AUTH_MAX_HEX + 1 bytes.  Returns 0, or -1 when OpenSSL fails. */
int pyc_wire_sign(const pyc_auth_t *auth, const pyc_frame_t dicts[4], char *sig_out);

#endif
