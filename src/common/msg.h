/*
 * msg.h -- a decoded message (pyc_msg_t: its JSON dicts and views of its frames, and who frees their storage),
 * and the parts of a message that pyc makes itself: ids, dates and headers.
 *
 * Headers are written as JSON text directly (no jansson tree) because one is made for every message the
 * kernel sends, including every stream chunk.  The strings that go into a header are either constants of
 * ours (msg_type), ids we generated (msg_id, session) or the username, which is JSON-encoded once.
 */
#ifndef PYC_MSG_H
#define PYC_MSG_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"
#include "frame.h"

#define PYC_MSG_ID_LEN 36        /* a UUID4 as 8-4-4-4-12 hex digits */
#define PYC_MSG_DATE_LEN 27      /* 2026-12-02T12:06:54.123456Z */
#define PYC_PROTOCOL_VERSION "5.6"   /* 5.5: subshells, iopub_welcome; 5.6: the startup handshake */

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
    void (*frame_free)(void *owner, size_t i);   /* optional: frees frame i's storage early */
    pyc_frame_t *frames_copy;    /* the frame array itself, copied by decode */
    char *invalid;               /* owned: why a signed request could not be read (pyc_wire_decode_request),
                                  * or NULL */
} pyc_msg_t;

/* Makes the message responsible for the storage behind its frames: owner_free(owner) runs when the message
 * is destroyed. */
void pyc_msg_set_owner(pyc_msg_t *msg, void *owner, void (*owner_free)(void *owner));

/* Lets holds of single frames (pyc_msg_hold_frame) free each frame's storage as soon as neither the message nor
 * a hold of that frame needs it: frame_free(owner, i) frees frame i of the message as received (idents, the
 * delimiter, the signature, the four dicts, the buffers, counted from 0), once, from any thread, before
 * owner_free.  Call it after pyc_msg_set_owner, before any hold is taken. */
void pyc_msg_set_frame_free(pyc_msg_t *msg, void (*frame_free)(void *owner, size_t i));

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

/* A hold on one frame of msg (frame points into msg->idents or msg->buffers): as pyc_msg_hold, and when the
 * owner frees frames one by one (pyc_msg_set_frame_free), the other frames do not wait for this one: each is
 * freed once the message is destroyed and no hold of that frame is left (a whole-message hold keeps every
 * frame, as does a hold of a frame that is not the message's own).  *index gets what
 * pyc_msg_hold_release_frame needs.  NULL as for pyc_msg_hold. */
pyc_msg_hold_t *pyc_msg_hold_frame(const pyc_msg_t *msg, const pyc_frame_t *frame, size_t *index);

/* Drops a hold taken by pyc_msg_hold_frame.  Any thread; NULL-safe. */
void pyc_msg_hold_release_frame(pyc_msg_hold_t *hold, size_t index);

/* Writes a new random UUID4 and a NUL into out (PYC_MSG_ID_LEN + 1 bytes).  Thread-safe; uses a per-thread
 * generator seeded from getrandom(2), so ids are unique without a system call per id. */
void pyc_msg_new_id(char *out);

/* Reseeds the calling thread's generator; a forked child calls it so that it never repeats the parent's
 * ids. */
void pyc_msg_reseed(void);

/* Writes the current UTC time in ISO 8601 with microseconds and a NUL into out (PYC_MSG_DATE_LEN + 1). */
void pyc_msg_now(char *out);

/* Appends a header object to out:
 *   {"msg_id":..,"msg_type":..,"session":..,"username":..,"date":..,"version":"5.6"}
 * session and msg_type must not need JSON escaping; username_json is an already-encoded JSON string
 * (with its quotes).  Writes the new msg_id into msg_id_out when that is not NULL. */
int pyc_msg_header(pyc_buf_t *out, const char *msg_type, const char *session, const char *username_json,
                   char *msg_id_out);

#endif
