/*
 * hmac.h -- the cryptography pyc needs (HMAC over a list of parts, SHA-256 of a buffer, constant-time
 * comparison, wiping secrets), as one interface with two backends chosen by the build, the way redis picks
 * its ae_*.c event backend:
 *
 *   src/crypto/hmac_openssl.c   linked into pyc-kernel: OpenSSL, every "hmac-<digest>" it knows; the only file
 *                               of the kernel that includes OpenSSL.
 *   src/crypto/hmac_builtin.c   linked into pyc: src/crypto/sha256.c, hmac-sha256 only.  Loading libcrypto cost
 *                               every `pyc` process about 0.7 ms of start-up (of a 2.5 ms `pyc run`).
 *
 * Each program links exactly one of them (libpyccrypto.a or libpycsha256.a); auth.c, which uses this
 * interface, is built once and shared.
 *
 * Thread safety: a pyc_hmac_t is immutable after pyc_hmac_new, and pyc_hmac_compute may run on any number of
 * threads at once.
 */
#ifndef PYC_HMAC_H
#define PYC_HMAC_H

#include <stddef.h>

#include "error.h"
#include "frame.h"

/* The largest digest of any backend (SHA-512: 64 bytes). */
#define PYC_HMAC_MAX_DIGEST 64

typedef struct pyc_hmac pyc_hmac_t;

/* The name of the backend this program was linked with: "openssl" or "builtin". */
extern const char pyc_hmac_backend[];

/* The size in bytes of the named digest ("sha256", case-insensitive), or -1 with err when this backend does
 * not provide it. */
int pyc_hmac_digest_size(const char *digest, pyc_error_t *err);

/* A keyed HMAC with the named digest; key (keylen > 0 bytes) is copied into the backend's state and wiped
 * from our own copies.  Returns NULL with err for an unknown digest, or when out of memory. */
pyc_hmac_t *pyc_hmac_new(const char *digest, const void *key, size_t keylen, pyc_error_t *err);

/* Wipes the key state and frees; sets *self_p to NULL.  NULL-safe. */
void pyc_hmac_destroy(pyc_hmac_t **self_p);

/* The digest's size in bytes. */
size_t pyc_hmac_size(const pyc_hmac_t *self);

/* Writes HMAC(key, parts[0] || ... || parts[n-1]) into out (pyc_hmac_size bytes).  Returns 0, or -1 when
 * the backend fails (OpenSSL: out of memory). */
int pyc_hmac_compute(const pyc_hmac_t *self, const pyc_frame_t *parts, size_t n, unsigned char *out);

/* Writes the lowercase hex SHA-256 of p[0..n) and a NUL into hex_out (65 bytes).  The pickle transfer sends
 * its buffers outside the signed frames, so their digests travel in the signed content. */
void pyc_sha256_hex(const void *p, size_t n, char *hex_out);

/* Compares n bytes in time that depends on n only, not on where they differ.  Returns 0 when equal. */
int pyc_memcmp_const(const void *a, const void *b, size_t n);

/* Overwrites n bytes with zeros in a way the compiler may not drop as a dead store. */
void pyc_cleanse(void *p, size_t n);

/* For the backends: the two padded keys of HMAC-SHA-256 (RFC 2104): the key, hashed first with sha256 when it
 * is longer than a block, zero-filled to the 64-byte block, and XORed with 0x36 (ipad) and 0x5c (opad).  The
 * caller wipes them after use. */
static inline void
pyc_hmac_sha256_pads(const void *key, size_t keylen, void (*sha256)(const void *, size_t, unsigned char *),
                     unsigned char ipad[64], unsigned char opad[64])
{
    unsigned char k0[64] = {0};
    if (keylen > sizeof k0)
        sha256(key, keylen, k0);
    else if (keylen > 0)
        __builtin_memcpy(k0, key, keylen);
    for (size_t i = 0; i < sizeof k0; i++) {
        ipad[i] = k0[i] ^ 0x36;
        opad[i] = k0[i] ^ 0x5c;
    }
    pyc_cleanse(k0, sizeof k0);
}

#endif
