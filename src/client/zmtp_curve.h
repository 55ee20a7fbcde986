/*
 * zmtp_curve.h -- CurveZMQ (ZeroMQ RFC 26) for the client side of zmtp.h: the handshake commands and the
 * sealing and opening of MESSAGE commands, over libsodium's crypto_box.  No sockets: zmtp_codec.c calls it
 * for what the peer sends, zmtp.c for what we send.
 *
 * The handshake, after greetings that both name the mechanism "CURVE" (we are the client; C is our long-term
 * key, C' the transient one made per connection, S the server's long-term key, S' its transient one):
 *   HELLO     (200 bytes) "\5HELLO", version 1.0, 72 bytes of padding, C', short nonce, Box[64 zeros](C'->S)
 *   WELCOME   (168 bytes) "\7WELCOME", long nonce, Box[S' + cookie](S->C')
 *   INITIATE  "\10INITIATE", cookie, short nonce, Box[C + vouch nonce + vouch + metadata](C'->S'), where the
 *             vouch is Box[C' + S](C->S'): it proves we hold C's secret key
 *   READY     "\5READY", short nonce, Box[metadata](S'->C')
 * then every frame either way is a MESSAGE: "\7MESSAGE", short nonce, Box[flags + frame](C'<->S'), flags bit 0
 * MORE and bit 1 COMMAND (a PING, say, travels inside).  Short nonces count up from 1 on each side, big-endian,
 * and a peer's must only grow: a replayed or reordered MESSAGE is refused.  As libzmq 4.3 does, a MESSAGE
 * travels as a ZMTP frame without flags (its own flags are inside the box).
 */
#ifndef PYC_ZMTP_CURVE_H
#define PYC_ZMTP_CURVE_H

#include <stddef.h>

#include "error.h"

#define PYC_CURVE_HELLO_LEN 200
#define PYC_CURVE_MESSAGE_OVERHEAD 33   /* "\7MESSAGE", short nonce, MAC, flags */
#define PYC_CURVE_INITIATE_MAX (257 + 512) /* with metadata of at most 512 bytes */

/* Flags inside a MESSAGE. */
enum { PYC_CURVE_MORE = 1, PYC_CURVE_COMMAND = 2 };

typedef struct pyc_zmtp_curve pyc_zmtp_curve_t;

/* Makes a new key pair as Z85 text (40 characters and a NUL each), for a connection file.  Returns 0 or -1
 * with err. */
int pyc_zmtp_curve_keypair(char pub[41], char sec[41], pyc_error_t *err);

/* The client of a server whose long-term public key is server_key, with the long-term key pair
 * public_key/secret_key (32 bytes each; copied).  Returns NULL with err when libsodium cannot start or memory
 * runs out. */
pyc_zmtp_curve_t *pyc_zmtp_curve_new(const unsigned char *server_key, const unsigned char *public_key,
                                     const unsigned char *secret_key, pyc_error_t *err);

/* Wipes the keys and frees; sets *self_p to NULL.  NULL-safe. */
void pyc_zmtp_curve_destroy(pyc_zmtp_curve_t **self_p);

/* Starts a new connection: a new transient key pair, nonces from 1, and writes our HELLO command's body
 * (PYC_CURVE_HELLO_LEN bytes) into out.  Returns 0, or -1 when the server key cannot be used (a point of
 * small order). */
int pyc_zmtp_curve_hello(pyc_zmtp_curve_t *self, unsigned char out[PYC_CURVE_HELLO_LEN]);

/* The server's WELCOME command (its whole body, name included).  Returns 0, or -1 with err (wrong size, a box
 * that does not open with our keys: not the server we expect). */
int pyc_zmtp_curve_welcome(pyc_zmtp_curve_t *self, const unsigned char *body, size_t len, pyc_error_t *err);

/* Writes our INITIATE command's body, with props[0..plen) (at most 512 bytes: our READY properties) as its
 * metadata, into out (PYC_CURVE_INITIATE_MAX bytes).  Returns its length, or -1 before WELCOME or when props
 * is too long. */
int pyc_zmtp_curve_initiate(pyc_zmtp_curve_t *self, const unsigned char *props, size_t plen, unsigned char *out);

/* Opens the server's READY command (its whole body, name included) in place; *props and *plen are then its
 * metadata, inside body.  Returns 0 or -1 with err. */
int pyc_zmtp_curve_ready(pyc_zmtp_curve_t *self, unsigned char *body, size_t len, const unsigned char **props,
                         size_t *plen, pyc_error_t *err);

/* Seals one frame, data[0..n), with flags (PYC_CURVE_*) as a MESSAGE command body of
 * n + PYC_CURVE_MESSAGE_OVERHEAD bytes at out (which may not overlap data). */
void pyc_zmtp_curve_seal(pyc_zmtp_curve_t *self, int flags, const void *data, size_t n, unsigned char *out);

/* Opens a MESSAGE command body in place: on success the frame is body[0..*n) and *flags its flags.  Returns 0,
 * or -1 with err (not a MESSAGE, too short, a nonce that does not grow, a box that does not open). */
int pyc_zmtp_curve_open(pyc_zmtp_curve_t *self, unsigned char *body, size_t len, int *flags, size_t *n,
                        pyc_error_t *err);

#endif
