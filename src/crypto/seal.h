/*
 * seal.h -- the cryptography of the gateway launcher protocol (version 1, Enterprise Gateway 2.6+ and every
 * gateway_provisioners release): base64, AES-128-ECB with PKCS#7 padding, RSA PKCS#1 v1.5 encryption with a
 * public key given as base64 DER SubjectPublicKeyInfo, and the whole sealed payload.
 *
 * The scheme is weak by design (RSA-1024, PKCS#1 v1.5, ECB) and fixed by the gateways that decode it; it is
 * matched exactly, not improved.  Only `pyc-kernel gateway-launch` uses it: OpenSSL's EVP machinery is loaded
 * in the launcher process, never in a kernel (see hmac_openssl.c for why the kernel avoids EVP).
 */
#ifndef PYC_SEAL_H
#define PYC_SEAL_H

#include <stddef.h>

#include "error.h"

/* Standard base64 (RFC 4648, alphabet "+/", '=' padding) of n bytes: a NUL-terminated string the caller
 * frees, or NULL when out of memory. */
char *pyc_seal_b64_encode(const void *data, size_t n);

/* Decodes base64 text, skipping ASCII whitespace (PEM bodies have newlines); padding is optional.  *out (the
 * caller frees it) holds *n bytes.  Returns 0, or -1 with err for a character outside the alphabet, padding
 * in the middle, or a length no encoding has. */
int pyc_seal_b64_decode(const char *text, unsigned char **out, size_t *n, pyc_error_t *err);

/* AES-128 in ECB mode over n bytes padded with PKCS#7 (always 1 to 16 bytes of padding).  *out (the caller
 * frees it) holds *outn = n - n % 16 + 16 bytes.  Returns 0, or -1 with err. */
int pyc_seal_aes128_ecb(const unsigned char key[16], const void *in, size_t n, unsigned char **out, size_t *outn,
                        pyc_error_t *err);

/* An RSA public key: from base64 DER SubjectPublicKeyInfo (the body of a PEM "PUBLIC KEY", as the gateways
 * pass it on the command line), or from a whole PEM text.  NULL with err when it is neither, or not RSA. */
typedef struct pyc_seal_key pyc_seal_key_t;
pyc_seal_key_t *pyc_seal_key_new(const char *text, pyc_error_t *err);
void pyc_seal_key_destroy(pyc_seal_key_t **key_p);

/* The key's modulus in bits (1024 for the gateways' keys). */
int pyc_seal_key_bits(const pyc_seal_key_t *key);

/* RSA PKCS#1 v1.5 encryption of n bytes (at most the modulus size - 11).  *out (the caller frees it) holds
 * *outn bytes, the modulus size.  Returns 0, or -1 with err. */
int pyc_seal_rsa_encrypt(const pyc_seal_key_t *key, const void *in, size_t n, unsigned char **out, size_t *outn,
                         pyc_error_t *err);

/* The version-1 payload for the connection info conn_json:
 *   base64(json({"version": 1, "key": b64(RSA(aes_key)), "conn_info": b64(AES-ECB(aes_key, conn_json))}))
 * with a fresh random 16-byte AES key.  Returns the text (the caller frees it), or NULL with err. */
char *pyc_seal_gateway_payload(const pyc_seal_key_t *key, const char *conn_json, pyc_error_t *err);

#endif
