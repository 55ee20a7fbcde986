/*
 * hmac_openssl.c -- the hmac.h backend of pyc-kernel, over OpenSSL.
 *
 * hmac-sha256, the scheme every Jupyter client uses, is computed with OpenSSL's SHA256_* functions on two
 * SHA-256 states prepared once from the key (key^ipad and key^opad), so a signature costs one pass over the
 * message and two block copies.  These functions are deprecated in OpenSSL 3 but present and fast (the same
 * assembly as EVP); we use them because the EVP_MAC path loads the provider machinery, which costs a kernel
 * 2.2 MB of resident memory measured on Debian 12, for nothing a fixed HMAC-SHA256 needs.  Every other
 * "hmac-<digest>" OpenSSL offers goes through EVP_MAC: a template context holds the key, and every signature
 * is made in a duplicate of it, so threads never share a context.
 */
#define OPENSSL_API_COMPAT 0x10100000L
#include "hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"

const char pyc_hmac_backend[] = "openssl";

static void
sha256_oneshot(const void *p, size_t n, unsigned char *out)
{
    SHA256(p, n, out);
}

struct pyc_hmac {
    bool fast_sha256;            /* hmac-sha256 through the two SHA-256 states below */
    SHA256_CTX inner, outer;     /* SHA-256 after absorbing key^ipad and key^opad */
    EVP_MAC *mac;                /* any other digest: */
    EVP_MAC_CTX *tmpl;           /* keyed template; duplicated for every signature */
    size_t size;
};

int
pyc_hmac_digest_size(const char *digest, pyc_error_t *err)
{
    if (strcasecmp(digest, "sha256") == 0)
        return SHA256_DIGEST_LENGTH;
    EVP_MD *md = digest[0] != '\0' ? EVP_MD_fetch(NULL, digest, NULL) : NULL;
    int size = md != NULL ? EVP_MD_get_size(md) : -1;
    EVP_MD_free(md);
    if (size <= 0 || size > PYC_HMAC_MAX_DIGEST)
        return pyc_error_set(err, "OpenSSL has no digest '%s'", digest);
    return size;
}

pyc_hmac_t *
pyc_hmac_new(const char *digest, const void *key, size_t keylen, pyc_error_t *err)
{
    int size = pyc_hmac_digest_size(digest, err);
    if (size < 0)
        return NULL;
    pyc_hmac_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    self->size = (size_t)size;
    if (strcasecmp(digest, "sha256") == 0) {
        unsigned char ipad[SHA256_CBLOCK], opad[SHA256_CBLOCK];
        pyc_hmac_sha256_pads(key, keylen, sha256_oneshot, ipad, opad);
        SHA256_Init(&self->inner);
        SHA256_Update(&self->inner, ipad, sizeof ipad);
        SHA256_Init(&self->outer);
        SHA256_Update(&self->outer, opad, sizeof opad);
        OPENSSL_cleanse(ipad, sizeof ipad);
        OPENSSL_cleanse(opad, sizeof opad);
        self->fast_sha256 = true;
        return self;
    }
    char name[32];
    snprintf(name, sizeof name, "%s", digest);
    self->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    self->tmpl = self->mac != NULL ? EVP_MAC_CTX_new(self->mac) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, name, 0),
        OSSL_PARAM_construct_end(),
    };
    if (self->tmpl == NULL || !EVP_MAC_init(self->tmpl, key, keylen, params)) {
        pyc_error_set(err, "OpenSSL could not set up HMAC with digest '%s'", digest);
        pyc_hmac_destroy(&self);
        return NULL;
    }
    return self;
}

void
pyc_hmac_destroy(pyc_hmac_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_hmac_t *self = *self_p;
    EVP_MAC_CTX_free(self->tmpl);
    EVP_MAC_free(self->mac);
    OPENSSL_cleanse(self, sizeof *self);
    free(self);
    *self_p = NULL;
}

size_t
pyc_hmac_size(const pyc_hmac_t *self)
{
    return self->size;
}

int
pyc_hmac_compute(const pyc_hmac_t *self, const pyc_frame_t *parts, size_t n, unsigned char *out)
{
    if (self->fast_sha256) {
        SHA256_CTX c = self->inner;
        unsigned char h[SHA256_DIGEST_LENGTH];
        for (size_t i = 0; i < n; i++)
            SHA256_Update(&c, parts[i].data, parts[i].size);
        SHA256_Final(h, &c);
        c = self->outer;
        SHA256_Update(&c, h, sizeof h);
        SHA256_Final(out, &c);
        return 0;
    }
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(self->tmpl);
    size_t outlen = 0;
    int rc = -1;
    if (ctx == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].size > 0 && !EVP_MAC_update(ctx, parts[i].data, parts[i].size))
            goto out;
    }
    if (EVP_MAC_final(ctx, out, &outlen, PYC_HMAC_MAX_DIGEST) && outlen == self->size)
        rc = 0;
out:
    EVP_MAC_CTX_free(ctx);
    return rc;
}

void
pyc_sha256_hex(const void *p, size_t n, char *hex_out)
{
    unsigned char raw[SHA256_DIGEST_LENGTH];
    SHA256(p, n, raw);
    pyc_hex_encode(raw, sizeof raw, hex_out);
}

int
pyc_memcmp_const(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n);
}

void
pyc_cleanse(void *p, size_t n)
{
    OPENSSL_cleanse(p, n);
}
