/*
 * sha256.h -- SHA-256 (FIPS 180-4, section 6.2) in portable C, for the `pyc` command only.
 *
 * Why: `pyc` signs a few hundred bytes per message and checks the digests of `pyc cp` buffers, and loading libcrypto
 * cost every `pyc` process about 0.7 ms of start-up (of a 4 ms `pyc run`).  hmac_builtin.c, the hmac.h backend that
 * `pyc` links, is built on it.  The kernel links the OpenSSL backend instead, whose assembly for every CPU generation
 * serves its heavy traffic; this file has the portable compression of the standard and, on x86, the SHA instructions
 * (sha256.c gives the numbers).
 *
 * Usage: init, update any number of times (any lengths, including 0), final.  A state may be copied by
 * assignment to continue from a shared prefix (HMAC's key^ipad block).
 */
#ifndef PYC_SHA256_H
#define PYC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define PYC_SHA256_BLOCK 64
#define PYC_SHA256_DIGEST 32

typedef struct pyc_sha256 {
    uint32_t h[8];
    uint64_t bytes;              /* total length so far */
    unsigned char buf[PYC_SHA256_BLOCK];
    size_t used;                 /* bytes waiting in buf, < 64 */
} pyc_sha256_t;

void pyc_sha256_init(pyc_sha256_t *s);
void pyc_sha256_update(pyc_sha256_t *s, const void *p, size_t n);

/* Writes the digest into out and leaves s in an undefined state (init it again to reuse). */
void pyc_sha256_final(pyc_sha256_t *s, unsigned char out[PYC_SHA256_DIGEST]);

/* One-shot: the digest of p[0..n). */
void pyc_sha256(const void *p, size_t n, unsigned char out[PYC_SHA256_DIGEST]);

/* Whether blocks go through the CPU's SHA instructions: returns 1 when they do, 0 when the portable code runs.
 * use 0 forces the portable code, 1 goes back to what the CPU offers, -1 only asks.  For tests, which check
 * both paths; not thread-safe. */
int pyc_sha256_accelerated(int use);

#endif
