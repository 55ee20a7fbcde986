/*
 * auth.h -- message signatures: HMAC over the four JSON frames of a Jupyter message.
 *
 * The connection file names a scheme ("hmac-sha256", or any "hmac-<digest>" the program's hmac.h backend
 * knows: every OpenSSL digest in the kernel, sha256 in the `pyc` command) and a key.  An empty key means
 * messages are neither signed nor checked, as the messaging spec says.  Verification is, in order: length
 * check, constant-time comparison, replay check.  A signature that verifies is remembered in a bounded window
 * so the same signed message cannot be played twice.
 *
 * Thread safety: pyc_auth_sign may be called from any number of threads at once; pyc_auth_verify takes an
 * internal lock around the replay window.
 */
#ifndef PYC_AUTH_H
#define PYC_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "frame.h"

/* The longest hex signature any supported digest produces (SHA-512: 64 bytes, 128 hex digits). */
#define PYC_AUTH_MAX_HEX 128

/* Default number of recent signatures remembered for replay detection: as many as jupyter_client's Session
 * keeps (digest_history_size), so that nothing it would refuse is accepted here. */
#define PYC_AUTH_REPLAY_WINDOW 65536

typedef struct pyc_auth pyc_auth_t;

/* Creates a signer for `scheme` with `key` (copied).  keylen 0 gives an unsigned session.  replay_window is
 * how many signatures are remembered (0 chooses PYC_AUTH_REPLAY_WINDOW).  Returns NULL and fills err when
 * the scheme is not "hmac-<digest>" with a digest the hmac.h backend provides. */
pyc_auth_t *pyc_auth_new(const char *scheme, const void *key, size_t keylen, size_t replay_window,
                         pyc_error_t *err);

/* Frees the signer and sets *self_p to NULL.  NULL-safe. */
void pyc_auth_destroy(pyc_auth_t **self_p);

/* True when messages are signed (the key is not empty). */
bool pyc_auth_enabled(const pyc_auth_t *self);

/* Length in hex digits of a signature; 0 for an unsigned session. */
size_t pyc_auth_hexlen(const pyc_auth_t *self);

/* Signs the concatenation of the n parts and writes the lowercase hex digest plus a NUL into hex_out, which
 * must hold PYC_AUTH_MAX_HEX + 1 bytes.  An unsigned session writes "".  Returns 0, or -1 when OpenSSL
 * fails (which it does only when out of memory). */
int pyc_auth_sign(const pyc_auth_t *self, const pyc_frame_t *parts, size_t n, char *hex_out);

/* Checks that sig (siglen bytes, not NUL-terminated) is the signature of the parts and has not been seen
 * before, then remembers it.  Returns 0 when the message may be trusted; otherwise -1 with err saying which
 * check failed.  An unsigned session accepts everything. */
int pyc_auth_verify(pyc_auth_t *self, const pyc_frame_t *parts, size_t n, const void *sig, size_t siglen,
                    pyc_error_t *err);

#endif
