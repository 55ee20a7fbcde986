/*
 * auth.c -- HMAC signing and verification of Jupyter messages, with replay detection.
 *
 * The signature of a message is HMAC(key, header || parent_header || metadata || content) in lowercase hex.
 *
 * hmac-sha256, the scheme every Jupyter client uses, is computed with OpenSSL's SHA256_* functions on two
 * SHA-256 states prepared once from the key (key^ipad and key^opad), so a signature costs one pass over the
 * message and two block copies.  These functions are deprecated in OpenSSL 3 but present and fast (the same
 * assembly as EVP); we use them because the EVP_MAC path loads the provider machinery, which costs a kernel
 * 2.2 MB of resident memory measured on Debian 12, for nothing a fixed HMAC-SHA256 needs.  Every other
 * "hmac-<digest>" OpenSSL offers goes through EVP_MAC: a template context holds the key, and every signature
 * is made in a duplicate of it, so threads never share a context.
 *
 * Replay detection keeps the first 16 bytes of the digests of the last `window` verified messages in a
 * ring, indexed by a chained hash table over the ring slots.  A digest is a keyed hash, so its first bytes
 * are already a good table hash, and 128 bits make an accidental collision impossible in practice.  The
 * window bounds memory: 4096 entries are 96 KB.
 *
 * Built with PYC_AUTH_BUILTIN (the copy in libpyccli.a, for the `pyc` command), the module uses sha256.c
 * instead of OpenSSL and knows hmac-sha256 only, the scheme of every session `pyc new` makes: loading
 * libcrypto cost each `pyc` process about 0.7 ms of start-up.  The kernel's copy keeps OpenSSL.
 */
#include "auth.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef PYC_AUTH_BUILTIN
#include "sha256.h"
typedef pyc_sha256_t sha256_ctx_t;
#define SHA256_CBLOCK PYC_SHA256_BLOCK
#define SHA256_DIGEST_LENGTH PYC_SHA256_DIGEST
#define sha256_init pyc_sha256_init
#define sha256_update pyc_sha256_update
#define sha256_final(out, c) pyc_sha256_final(c, out)
#define sha256_oneshot pyc_sha256

/* Clears secrets in a way the compiler may not drop as a dead store. */
static void
cleanse(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n-- > 0)
        *v++ = 0;
}

/* Compares in time that depends on n only, not on where the bytes differ. */
static int
memcmp_const(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return d;
}
#else
#define OPENSSL_API_COMPAT 0x10100000L
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
typedef SHA256_CTX sha256_ctx_t;
#define sha256_init SHA256_Init
#define sha256_update SHA256_Update
#define sha256_final SHA256_Final
#define sha256_oneshot SHA256
#define cleanse OPENSSL_cleanse
#define memcmp_const CRYPTO_memcmp
#endif

#define MAX_DIGEST 64
#define REPLAY_BYTES 16          /* of each digest, remembered for replay detection */

typedef struct replay_slot {
    unsigned char digest[REPLAY_BYTES];
    int used;
    uint32_t next;               /* next slot in the same bucket, or NIL */
} replay_slot_t;

#define NIL UINT32_MAX

struct pyc_auth {
    int fast_sha256;             /* hmac-sha256 through the SHA-256 states below */
    sha256_ctx_t inner, outer;   /* SHA-256 after absorbing key^ipad and key^opad */
#ifndef PYC_AUTH_BUILTIN
    EVP_MAC *mac;                /* any other digest: */
    EVP_MAC_CTX *tmpl;           /* keyed template; duplicated for every signature */
#endif
    size_t digest_len;           /* bytes; 0 for an unsigned session */
    pthread_mutex_t lock;        /* guards the replay window */
    replay_slot_t *ring;
    uint32_t *buckets;
    uint32_t window, nbuckets, head;
};

pyc_auth_t *
pyc_auth_new(const char *scheme, const void *key, size_t keylen, size_t replay_window, pyc_error_t *err)
{
    pyc_auth_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_set(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    if (scheme == NULL || strncasecmp(scheme, "hmac-", 5) != 0) {
        pyc_error_set(err, "unsupported signature scheme '%s' (expected hmac-<digest>)",
                      scheme != NULL ? scheme : "(none)");
        goto fail;
    }

    /* The digest is checked even for an unsigned session, as jupyter_client's Session checks it. */
    char digest_name[32];
    snprintf(digest_name, sizeof digest_name, "%s", scheme + 5);
    bool sha256 = strcasecmp(digest_name, "sha256") == 0;
    size_t digest_len = SHA256_DIGEST_LENGTH;
    if (!sha256) {
#ifdef PYC_AUTH_BUILTIN
        pyc_error_set(err, "unsupported signature scheme '%s': the pyc command knows only hmac-sha256", scheme);
        goto fail;
#else
        EVP_MD *md = EVP_MD_fetch(NULL, digest_name, NULL);
        if (md == NULL || EVP_MD_get_size(md) <= 0 || EVP_MD_get_size(md) > MAX_DIGEST) {
            EVP_MD_free(md);
            pyc_error_set(err, "unsupported signature scheme '%s': OpenSSL has no digest '%s'", scheme,
                          digest_name);
            goto fail;
        }
        digest_len = (size_t)EVP_MD_get_size(md);
        EVP_MD_free(md);
#endif
    }
    if (keylen == 0)
        return self;             /* unsigned session: digest_len stays 0, nothing else to set up */
    self->digest_len = digest_len;

    if (sha256) {
        unsigned char k0[SHA256_CBLOCK], ipad[SHA256_CBLOCK], opad[SHA256_CBLOCK];
        memset(k0, 0, sizeof k0);
        if (keylen > SHA256_CBLOCK)
            sha256_oneshot(key, keylen, k0);
        else
            memcpy(k0, key, keylen);
        for (size_t i = 0; i < SHA256_CBLOCK; i++) {
            ipad[i] = k0[i] ^ 0x36;
            opad[i] = k0[i] ^ 0x5c;
        }
        sha256_init(&self->inner);
        sha256_update(&self->inner, ipad, sizeof ipad);
        sha256_init(&self->outer);
        sha256_update(&self->outer, opad, sizeof opad);
        cleanse(k0, sizeof k0);
        cleanse(ipad, sizeof ipad);
        cleanse(opad, sizeof opad);
        self->fast_sha256 = 1;
        goto window;
    }
#ifndef PYC_AUTH_BUILTIN
    self->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    self->tmpl = self->mac != NULL ? EVP_MAC_CTX_new(self->mac) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
        OSSL_PARAM_construct_end(),
    };
    if (self->tmpl == NULL || !EVP_MAC_init(self->tmpl, key, keylen, params)) {
        pyc_error_set(err, "OpenSSL could not set up HMAC with digest '%s'", digest_name);
        goto fail;
    }
#endif

window:
    self->window = (uint32_t)(replay_window > 0 ? replay_window : PYC_AUTH_REPLAY_WINDOW);
    self->nbuckets = 1;
    while (self->nbuckets < self->window * 2)
        self->nbuckets <<= 1;
    self->ring = calloc(self->window, sizeof *self->ring);
    self->buckets = malloc(self->nbuckets * sizeof *self->buckets);
    if (self->ring == NULL || self->buckets == NULL) {
        pyc_error_set(err, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < self->nbuckets; i++)
        self->buckets[i] = NIL;
    return self;

fail:
    pyc_auth_destroy(&self);
    return NULL;
}

void
pyc_auth_destroy(pyc_auth_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_auth_t *self = *self_p;
#ifndef PYC_AUTH_BUILTIN
    EVP_MAC_CTX_free(self->tmpl);
    EVP_MAC_free(self->mac);
#endif
    cleanse(&self->inner, sizeof self->inner);
    cleanse(&self->outer, sizeof self->outer);
    free(self->ring);
    free(self->buckets);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

bool
pyc_auth_enabled(const pyc_auth_t *self)
{
    return self->digest_len > 0;
}

size_t
pyc_auth_hexlen(const pyc_auth_t *self)
{
    return self->digest_len * 2;
}

/* Computes the raw digest of the parts into out (digest_len bytes). */
static int
digest(const pyc_auth_t *self, const pyc_frame_t *parts, size_t n, unsigned char *out)
{
    if (self->fast_sha256) {
        sha256_ctx_t c = self->inner;
        unsigned char h[SHA256_DIGEST_LENGTH];
        for (size_t i = 0; i < n; i++)
            sha256_update(&c, parts[i].data, parts[i].size);
        sha256_final(h, &c);
        c = self->outer;
        sha256_update(&c, h, sizeof h);
        sha256_final(out, &c);
        return 0;
    }
#ifdef PYC_AUTH_BUILTIN
    return -1;                   /* unreachable: pyc_auth_new accepts sha256 only */
#else
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(self->tmpl);
    size_t outlen = 0;
    int rc = -1;
    if (ctx == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].size > 0 && !EVP_MAC_update(ctx, parts[i].data, parts[i].size))
            goto out;
    }
    if (EVP_MAC_final(ctx, out, &outlen, MAX_DIGEST) && outlen == self->digest_len)
        rc = 0;
out:
    EVP_MAC_CTX_free(ctx);
    return rc;
#endif
}

int
pyc_auth_sign(const pyc_auth_t *self, const pyc_frame_t *parts, size_t n, char *hex_out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[MAX_DIGEST];

    hex_out[0] = '\0';
    if (self->digest_len == 0)
        return 0;
    if (digest(self, parts, n, raw) < 0)
        return -1;
    for (size_t i = 0; i < self->digest_len; i++) {
        hex_out[2 * i] = hex[raw[i] >> 4];
        hex_out[2 * i + 1] = hex[raw[i] & 15];
    }
    hex_out[2 * self->digest_len] = '\0';
    return 0;
}

void
pyc_auth_sha256_hex(const void *p, size_t n, char *hex_out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[SHA256_DIGEST_LENGTH];
    sha256_ctx_t c;
    sha256_init(&c);
    sha256_update(&c, p, n);
    sha256_final(raw, &c);
    for (size_t i = 0; i < sizeof raw; i++) {
        hex_out[2 * i] = hex[raw[i] >> 4];
        hex_out[2 * i + 1] = hex[raw[i] & 15];
    }
    hex_out[2 * sizeof raw] = '\0';
}

/* Decodes 2*len hex digits (either case) into out.  Returns -1 on a character that is not a hex digit. */
static int
unhex(const unsigned char *in, size_t len, unsigned char *out)
{
    for (size_t i = 0; i < len; i++) {
        int v = 0;
        for (int j = 0; j < 2; j++) {
            unsigned char c = in[2 * i + j];
            int d;
            if (c >= '0' && c <= '9')
                d = c - '0';
            else if (c >= 'a' && c <= 'f')
                d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F')
                d = c - 'A' + 10;
            else
                return -1;
            v = v * 16 + d;
        }
        out[i] = (unsigned char)v;
    }
    return 0;
}

static uint32_t
bucket_of(const pyc_auth_t *self, const unsigned char *d)
{
    uint32_t h;
    memcpy(&h, d, sizeof h);
    return h & (self->nbuckets - 1);
}

/* Returns 1 when d was seen within the window; otherwise records it (evicting the oldest) and returns 0.
 * Caller holds the lock. */
static int
replay_check_and_record(pyc_auth_t *self, const unsigned char *d)
{
    uint32_t b = bucket_of(self, d);
    for (uint32_t i = self->buckets[b]; i != NIL; i = self->ring[i].next) {
        if (memcmp(self->ring[i].digest, d, REPLAY_BYTES) == 0)
            return 1;
    }
    replay_slot_t *slot = &self->ring[self->head];
    if (slot->used) {            /* unlink the oldest digest from its bucket */
        uint32_t ob = bucket_of(self, slot->digest);
        uint32_t *link = &self->buckets[ob];
        while (*link != self->head)
            link = &self->ring[*link].next;
        *link = slot->next;
    }
    memcpy(slot->digest, d, REPLAY_BYTES);
    slot->used = 1;
    slot->next = self->buckets[b];
    self->buckets[b] = self->head;
    self->head = (self->head + 1) % self->window;
    return 0;
}

int
pyc_auth_verify(pyc_auth_t *self, const pyc_frame_t *parts, size_t n, const void *sig, size_t siglen,
                pyc_error_t *err)
{
    unsigned char want[MAX_DIGEST], got[MAX_DIGEST];

    if (self->digest_len == 0)
        return 0;
    if (siglen != self->digest_len * 2)
        return pyc_error_set(err, "signature has %zu characters, expected %zu", siglen, self->digest_len * 2);
    if (unhex(sig, self->digest_len, got) < 0)
        return pyc_error_set(err, "signature is not hexadecimal");
    if (digest(self, parts, n, want) < 0)
        return pyc_error_set(err, "could not compute HMAC");
    if (memcmp_const(want, got, self->digest_len) != 0)
        return pyc_error_set(err, "invalid signature");
    pthread_mutex_lock(&self->lock);
    int seen = replay_check_and_record(self, want);
    pthread_mutex_unlock(&self->lock);
    if (seen)
        return pyc_error_set(err, "replayed signature");
    return 0;
}
