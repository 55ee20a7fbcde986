/*
 * random.h -- the one source of randomness for keys, tokens and unique names: getrandom(2), never rand().
 *
 * Connection keys (a forked session, `pyc new`), checkpoint tokens and temporary file names all come from
 * here.  getrandom on Linux does not fail for requests of up to 256 bytes once the entropy pool is ready
 * (it blocks until then, at boot only); a failure is reported, never papered over with a weak source.
 * Message ids, of which a kernel makes hundreds of thousands a second, come from msg.c's per-thread
 * generator, seeded here.
 */
#ifndef PYC_RANDOM_H
#define PYC_RANDOM_H

#include <stddef.h>

#include "error.h"

/* Fills buf with n random bytes.  Returns 0, or -1 with err (getrandom failed: errno says why). */
int pyc_random_bytes(void *buf, size_t n, pyc_error_t *err);

/* Writes 2 * nbytes random lowercase hex digits and a NUL into out (2 * nbytes + 1 bytes; nbytes <= 128).
 * Returns 0, or -1 with err. */
int pyc_random_hex(char *out, size_t nbytes, pyc_error_t *err);

#endif
