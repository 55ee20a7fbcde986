/*
 * z85.h -- ZeroMQ's Z85 text encoding (RFC 32) of CURVE keys, and the checks a key read from a file gets.
 *
 * A CURVE key (a Curve25519 public or secret key) is 32 bytes; its Z85 text is 40 characters from an alphabet
 * of 85 printable ASCII characters, each 5 of them standing for 4 bytes, big-endian.  Connection files carry
 * keys as this text (curve_publickey, curve_secretkey: the convention of jupyter_client and ipykernel), and
 * libzmq's setsockopt takes it as it is; the `pyc` command, which speaks CurveZMQ itself, needs the bytes.
 * Both programs link this file (libpyccommon): it has no library of its own.
 */
#ifndef PYC_Z85_H
#define PYC_Z85_H

#include <stddef.h>

#include "error.h"

#define PYC_CURVE_KEY_BYTES 32   /* a Curve25519 key */
#define PYC_CURVE_KEY_TEXT 40    /* its Z85 text, without a NUL */

/* Decodes text[0..len) (len a multiple of 5) into len / 5 * 4 bytes at out.  Returns the number of bytes, or -1
 * with err naming the first character that is not in the alphabet, a length that is not a multiple of 5, or a
 * group of 5 characters whose value does not fit 32 bits. */
int pyc_z85_decode(const char *text, size_t len, unsigned char *out, pyc_error_t *err);

/* Encodes n bytes (n a multiple of 4) as n / 4 * 5 characters at out, NUL-terminated (out holds n/4*5 + 1).
 * Returns the number of characters, or -1 when n is not a multiple of 4. */
int pyc_z85_encode(const unsigned char *data, size_t n, char *out);

/* Decodes a CURVE key: exactly 40 Z85 characters into 32 bytes.  what names the key in the error sentence
 * ("curve_secretkey").  Returns 0 or -1 with err. */
int pyc_z85_key(const char *text, size_t len, unsigned char out[PYC_CURVE_KEY_BYTES], const char *what,
                pyc_error_t *err);

#endif
