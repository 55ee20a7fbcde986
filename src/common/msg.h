/*
 * msg.h -- the parts of a message that the kernel makes itself: ids, dates and headers.
 *
 * Headers are written as JSON text directly (no jansson tree) because one is made for every message the
 * kernel sends, including every stream chunk.  The strings that go into a header are either constants of
 * ours (msg_type), ids we generated (msg_id, session) or the username, which is JSON-encoded once.
 */
#ifndef PYC_MSG_H
#define PYC_MSG_H

#include <stddef.h>

#include "buf.h"

#define PYC_MSG_ID_LEN 36        /* a UUID4 as 8-4-4-4-12 hex digits */
#define PYC_MSG_DATE_LEN 27      /* 2026-12-02T12:06:54.123456Z */
#define PYC_PROTOCOL_VERSION "5.3"

/* Writes a new random UUID4 and a NUL into out (PYC_MSG_ID_LEN + 1 bytes).  Thread-safe; uses a per-thread
 * generator seeded from getrandom(2), so ids are unique without a system call per id. */
void pyc_msg_new_id(char *out);

/* Reseeds the calling thread's generator; a forked child calls it so that it never repeats the parent's
 * ids. */
void pyc_msg_reseed(void);

/* Writes the current UTC time in ISO 8601 with microseconds and a NUL into out (PYC_MSG_DATE_LEN + 1). */
void pyc_msg_now(char *out);

/* Appends a header object to out:
 *   {"msg_id":..,"msg_type":..,"session":..,"username":..,"date":..,"version":"5.3"}
 * session and msg_type must not need JSON escaping; username_json is an already-encoded JSON string
 * (with its quotes).  Writes the new msg_id into msg_id_out when that is not NULL. */
int pyc_msg_header(pyc_buf_t *out, const char *msg_type, const char *session, const char *username_json,
                   char *msg_id_out);

#endif
