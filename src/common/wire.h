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
#include "msg.h"

#define PYC_WIRE_DELIM "<IDS|MSG>"
#define PYC_WIRE_DELIM_LEN 9

/* A message may have at most this many frames (identities, the six fixed frames and buffers together). */
#define PYC_WIRE_MAX_FRAMES 4096

/* Decodes n frames.  On success returns 0 and sets *out to a new message whose idents and buffers point
 * into the bytes of `frames` (the array itself is copied, the bytes are not).  On failure returns -1, sets
 * *out to NULL and fills err.  auth may be NULL only in tests that want no signature check. */
int pyc_wire_decode(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, pyc_msg_t **out, pyc_error_t *err);

/* The same for a request to the kernel: a signed message whose header is good but whose parent_header,
 * metadata or content cannot be read (invalid JSON or UTF-8, a lone surrogate, an integer of 2^63 or more) is
 * decoded all the same, with empty objects in their place and msg->invalid saying why, so that the kernel
 * answers it with an error instead of dropping it and leaving its client waiting.  Unsigned or unreadable
 * headers are refused as by pyc_wire_decode. */
int pyc_wire_decode_request(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, pyc_msg_t **out,
                            pyc_error_t *err);

/* Signs the four serialized dicts (header, parent_header, metadata, content) into sig_out, which holds
 * PYC_AUTH_MAX_HEX + 1 bytes.  Returns 0, or -1 when OpenSSL fails. */
int pyc_wire_sign(const pyc_auth_t *auth, const pyc_frame_t dicts[4], char *sig_out);

#endif
