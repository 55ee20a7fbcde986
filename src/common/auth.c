/*
 * auth.c -- HMAC signing and verification of Jupyter messages, with replay detection.
 *
 * The signature of a message is HMAC(key, header || parent_header || metadata || content) in lowercase hex.
 * The HMAC itself comes from the hmac.h backend the program links (OpenSSL in the kernel, sha256.c in the
 * `pyc` command); this file holds what both share: the scheme, hex, the constant-time check and the replay
 * window.
 *
 * Replay detection keeps the first 16 bytes of the digests of the last `window` verified messages in a
 * ring, indexed by a chained hash table over the ring slots.  A digest is a keyed hash, so its first bytes
 * are already a good table hash, and 128 bits make an accidental collision impossible in practice.  The
 * window bounds memory: 65536 entries are 1.5 MB, mapped on the first verified message.  The window is
 * mapped anonymous memory, not calloc'ed: zero pages that become resident only as messages fill them (the
 * ring in order, the buckets a page at a time), so that a session that has answered a few requests holds a
 * few pages of it.  calloc gave that only when malloc took the block from mmap; the kernel raises malloc's mmap
 * threshold to 4 MiB (main.c), so calloc took it from the heap and zeroed all 2 MB at once, in every session
 * forked from a template too (measured: a tenth of an idle forked session's private memory).
 */
#include "auth.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <strings.h>

#include "buf.h"
#include "hmac.h"

#define MAX_DIGEST PYC_HMAC_MAX_DIGEST
#define REPLAY_BYTES 16          /* of each digest, remembered for replay detection */

typedef struct replay_slot {
    unsigned char digest[REPLAY_BYTES];
    int used;
    uint32_t next;               /* 1 + the next slot in the same bucket, or NIL */
} replay_slot_t;

/* Links are slot indexes plus one, so that zeroed memory is an empty table: a fresh mapping is one, and a
 * kernel that verifies few messages never makes the whole window resident. */
#define NIL 0u

struct pyc_auth {
    pyc_hmac_t *hmac;            /* NULL for an unsigned session */
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
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->lock, NULL);
    if (scheme == NULL || strncasecmp(scheme, "hmac-", 5) != 0 || strlen(scheme) > 5 + 31) {
        pyc_error_set(err, "unsupported signature scheme '%s' (expected hmac-<digest>)",
                      scheme != NULL ? scheme : "(none)");
        goto fail;
    }
    /* The digest is checked even for an unsigned session, as jupyter_client's Session checks it. */
    pyc_error_t herr;
    if (pyc_hmac_digest_size(scheme + 5, &herr) < 0) {
        pyc_error_set(err, "unsupported signature scheme '%s': %s", scheme, herr.text);
        goto fail;
    }
    if (keylen == 0)
        return self;             /* unsigned session: digest_len stays 0, nothing else to set up */
    self->hmac = pyc_hmac_new(scheme + 5, key, keylen, err);
    if (self->hmac == NULL)
        goto fail;
    self->digest_len = pyc_hmac_size(self->hmac);
    self->window = (uint32_t)(replay_window > 0 ? replay_window : PYC_AUTH_REPLAY_WINDOW);
    self->nbuckets = 1;
    while (self->nbuckets < self->window * 2)
        self->nbuckets <<= 1;
    return self;

fail:
    pyc_auth_destroy(&self);
    return NULL;
}

/* Allocates the replay window on first use (a `pyc` command verifies a handful of replies; a kernel, every
 * request).  Caller holds the lock.  Returns 0 or -1. */
static void *
zero_pages(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void
window_free(pyc_auth_t *self)
{
    if (self->ring != NULL)
        munmap(self->ring, (size_t)self->window * sizeof *self->ring);
    if (self->buckets != NULL)
        munmap(self->buckets, (size_t)self->nbuckets * sizeof *self->buckets);
    self->ring = NULL;
    self->buckets = NULL;
}

static int
window_ready(pyc_auth_t *self)
{
    if (self->ring != NULL)
        return 0;
    self->ring = zero_pages((size_t)self->window * sizeof *self->ring);
    self->buckets = zero_pages((size_t)self->nbuckets * sizeof *self->buckets);
    if (self->ring == NULL || self->buckets == NULL) {
        window_free(self);
        return -1;
    }
    return 0;
}

void
pyc_auth_destroy(pyc_auth_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_auth_t *self = *self_p;
    pyc_hmac_destroy(&self->hmac);
    window_free(self);
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

int
pyc_auth_sign(const pyc_auth_t *self, const pyc_frame_t *parts, size_t n, char *hex_out)
{
    unsigned char raw[MAX_DIGEST];

    hex_out[0] = '\0';
    if (self->digest_len == 0)
        return 0;
    if (pyc_hmac_compute(self->hmac, parts, n, raw) < 0)
        return -1;
    pyc_hex_encode(raw, self->digest_len, hex_out);
    return 0;
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
    for (uint32_t i = self->buckets[b]; i != NIL; i = self->ring[i - 1].next) {
        if (memcmp(self->ring[i - 1].digest, d, REPLAY_BYTES) == 0)
            return 1;
    }
    replay_slot_t *slot = &self->ring[self->head];
    if (slot->used) {            /* unlink the oldest digest from its bucket */
        uint32_t ob = bucket_of(self, slot->digest);
        uint32_t *link = &self->buckets[ob];
        while (*link != self->head + 1)
            link = &self->ring[*link - 1].next;
        *link = slot->next;
    }
    memcpy(slot->digest, d, REPLAY_BYTES);
    slot->used = 1;
    slot->next = self->buckets[b];
    self->buckets[b] = self->head + 1;
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
        return pyc_error_code(err, PYC_EAUTH, "signature has %zu characters, expected %zu", siglen,
                              self->digest_len * 2);
    if (unhex(sig, self->digest_len, got) < 0)
        return pyc_error_set(err, "signature is not hexadecimal");
    if (pyc_hmac_compute(self->hmac, parts, n, want) < 0)
        return pyc_error_set(err, "could not compute HMAC");
    if (pyc_memcmp_const(want, got, self->digest_len) != 0)
        return pyc_error_code(err, PYC_EAUTH, "invalid signature");
    pthread_mutex_lock(&self->lock);
    int seen = window_ready(self) < 0 ? -1 : replay_check_and_record(self, want);
    pthread_mutex_unlock(&self->lock);
    if (seen < 0)
        return pyc_error_set(err, "out of memory for the replay window");
    if (seen)
        return pyc_error_set(err, "replayed signature");
    return 0;
}
