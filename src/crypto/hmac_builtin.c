/*
 * hmac_builtin.c -- the hmac.h backend of the `pyc` command, over sha256.c: hmac-sha256 only, the scheme of
 * every session `pyc new` makes and of every Jupyter client's connection file.
 *
 * The key is absorbed once into two SHA-256 states (key^ipad and key^opad), so that a signature costs one
 * pass over the message and two state copies, as in the OpenSSL backend.
 */
#include "hmac.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "sha256.h"

const char pyc_hmac_backend[] = "builtin";

struct pyc_hmac {
    pyc_sha256_t inner, outer;   /* SHA-256 after absorbing key^ipad and key^opad */
};

int
pyc_hmac_digest_size(const char *digest, pyc_error_t *err)
{
    if (strcasecmp(digest, "sha256") == 0)
        return PYC_SHA256_DIGEST;
    return pyc_error_set(err, "the pyc command knows only hmac-sha256, not hmac-%s", digest);
}

pyc_hmac_t *
pyc_hmac_new(const char *digest, const void *key, size_t keylen, pyc_error_t *err)
{
    if (pyc_hmac_digest_size(digest, err) < 0)
        return NULL;
    pyc_hmac_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    unsigned char ipad[PYC_SHA256_BLOCK], opad[PYC_SHA256_BLOCK];
    pyc_hmac_sha256_pads(key, keylen, pyc_sha256, ipad, opad);
    pyc_sha256_init(&self->inner);
    pyc_sha256_update(&self->inner, ipad, sizeof ipad);
    pyc_sha256_init(&self->outer);
    pyc_sha256_update(&self->outer, opad, sizeof opad);
    pyc_cleanse(ipad, sizeof ipad);
    pyc_cleanse(opad, sizeof opad);
    return self;
}

void
pyc_hmac_destroy(pyc_hmac_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_cleanse(*self_p, sizeof **self_p);
    free(*self_p);
    *self_p = NULL;
}

size_t
pyc_hmac_size(const pyc_hmac_t *self)
{
    (void)self;
    return PYC_SHA256_DIGEST;
}

int
pyc_hmac_compute(const pyc_hmac_t *self, const pyc_frame_t *parts, size_t n, unsigned char *out)
{
    pyc_sha256_t c = self->inner;
    unsigned char h[PYC_SHA256_DIGEST];
    for (size_t i = 0; i < n; i++)
        pyc_sha256_update(&c, parts[i].data, parts[i].size);
    pyc_sha256_final(&c, h);
    c = self->outer;
    pyc_sha256_update(&c, h, sizeof h);
    pyc_sha256_final(&c, out);
    return 0;
}

void
pyc_sha256_hex(const void *p, size_t n, char *hex_out)
{
    unsigned char raw[PYC_SHA256_DIGEST];
    pyc_sha256(p, n, raw);
    pyc_hex_encode(raw, sizeof raw, hex_out);
}

int
pyc_memcmp_const(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d;
}

void
pyc_cleanse(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n-- > 0)
        *v++ = 0;
}
