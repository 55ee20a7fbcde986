/*
 * zmtp_curve.c -- CurveZMQ's client side over libsodium; see zmtp_curve.h for the commands.  Written from RFC 26
 * and checked against libzmq 4.3 (tests/unit/client/test_zmtp_curve.c talks to its CURVE servers).
 *
 * Costs: crypto_box_beforenm (one Curve25519 scalar multiplication, ~50 us) once per connection, then each
 * frame is XSalsa20-Poly1305 with the precomputed key, sealed and opened in place (a frame is copied once, into
 * the output buffer, on the way out; on the way in it is opened where it was read, then moved down 33 bytes).
 * A `pyc` command that never meets a CURVE kernel never calls into libsodium.
 */
#include "zmtp_curve.h"

#include <assert.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "z85.h"

#define PROPS_MAX 512

struct pyc_zmtp_curve {
    unsigned char server[crypto_box_PUBLICKEYBYTES];    /* S */
    unsigned char pub[crypto_box_PUBLICKEYBYTES];       /* C */
    unsigned char sec[crypto_box_SECRETKEYBYTES];       /* c */
    unsigned char tpub[crypto_box_PUBLICKEYBYTES];      /* C', per connection */
    unsigned char tsec[crypto_box_SECRETKEYBYTES];      /* c' */
    unsigned char spub[crypto_box_PUBLICKEYBYTES];      /* S', from WELCOME */
    unsigned char cookie[96];
    unsigned char precom[crypto_box_BEFORENMBYTES];     /* of S' and c' */
    uint64_t nonce;              /* our next short nonce */
    uint64_t peer_nonce;         /* the server's last one */
    bool welcomed;
};

static void
put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (56 - 8 * i));
}

static uint64_t
get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* A full nonce: a 16-byte prefix and an 8-byte short nonce. */
static void
make_nonce(unsigned char n[crypto_box_NONCEBYTES], const char *prefix, const unsigned char *tail8)
{
    memcpy(n, prefix, 16);
    memcpy(n + 16, tail8, 8);
}

int
pyc_zmtp_curve_keypair(char pub[41], char sec[41], pyc_error_t *err)
{
    unsigned char p[crypto_box_PUBLICKEYBYTES], k[crypto_box_SECRETKEYBYTES];
    if (sodium_init() < 0 || crypto_box_keypair(p, k) != 0)
        return pyc_error_set(err, "cannot make a CURVE key pair (libsodium)");
    pyc_z85_encode(p, sizeof p, pub);
    pyc_z85_encode(k, sizeof k, sec);
    sodium_memzero(k, sizeof k);
    return 0;
}

pyc_zmtp_curve_t *
pyc_zmtp_curve_new(const unsigned char *server_key, const unsigned char *public_key, const unsigned char *secret_key,
                   pyc_error_t *err)
{
    if (sodium_init() < 0) {
        pyc_error_set(err, "libsodium cannot start");
        return NULL;
    }
    pyc_zmtp_curve_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(self->server, server_key, sizeof self->server);
    memcpy(self->pub, public_key, sizeof self->pub);
    memcpy(self->sec, secret_key, sizeof self->sec);
    return self;
}

void
pyc_zmtp_curve_destroy(pyc_zmtp_curve_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    sodium_memzero(*self_p, sizeof **self_p);
    free(*self_p);
    *self_p = NULL;
}

int
pyc_zmtp_curve_hello(pyc_zmtp_curve_t *self, unsigned char out[PYC_CURVE_HELLO_LEN])
{
    static const unsigned char zeros[64];
    unsigned char n[crypto_box_NONCEBYTES];
    if (crypto_box_keypair(self->tpub, self->tsec) != 0)
        return -1;
    self->nonce = 1;
    self->peer_nonce = 0;
    self->welcomed = false;
    memset(out, 0, PYC_CURVE_HELLO_LEN);
    memcpy(out, "\5HELLO", 6);
    out[6] = 1;                  /* CurveZMQ 1.0 */
    memcpy(out + 80, self->tpub, 32);
    put_u64(out + 112, self->nonce++);
    make_nonce(n, "CurveZMQHELLO---", out + 112);
    /* Fails only for a server key that is a point of small order: no key zmq_curve_keypair makes. */
    return crypto_box_easy(out + 120, zeros, sizeof zeros, n, self->server, self->tsec) == 0 ? 0 : -1;
}

int
pyc_zmtp_curve_welcome(pyc_zmtp_curve_t *self, const unsigned char *body, size_t len, pyc_error_t *err)
{
    unsigned char n[crypto_box_NONCEBYTES], plain[128];
    if (len != 168 || memcmp(body, "\7WELCOME", 8) != 0)
        return pyc_error_code(err, PYC_EINVAL, "the peer's WELCOME is malformed");
    memcpy(n, "WELCOME-", 8);
    memcpy(n + 8, body + 8, 16);
    if (crypto_box_open_easy(plain, body + 24, 144, n, self->server, self->tsec) != 0)
        return pyc_error_code(err, PYC_EINVAL, "the peer's WELCOME does not open: it is not the server whose "
                              "public key the connection file names");
    memcpy(self->spub, plain, sizeof self->spub);
    memcpy(self->cookie, plain + 32, sizeof self->cookie);
    if (crypto_box_beforenm(self->precom, plain, self->tsec) != 0) {
        sodium_memzero(plain, sizeof plain);
        return pyc_error_code(err, PYC_EINVAL, "the peer's transient key is unusable");
    }
    sodium_memzero(plain, sizeof plain);
    self->welcomed = true;
    return 0;
}

int
pyc_zmtp_curve_initiate(pyc_zmtp_curve_t *self, const unsigned char *props, size_t plen, unsigned char *out)
{
    unsigned char n[crypto_box_NONCEBYTES], vouch_plain[64], plain[128 + PROPS_MAX];
    if (!self->welcomed || plen > PROPS_MAX)
        return -1;
    /* The vouch, Box[C' + S](C->S'): only the holder of c can make it. */
    memcpy(vouch_plain, self->tpub, 32);
    memcpy(vouch_plain + 32, self->server, 32);
    memcpy(n, "VOUCH---", 8);
    randombytes_buf(n + 8, 16);
    memcpy(plain, self->pub, 32);
    memcpy(plain + 32, n + 8, 16);
    if (crypto_box_easy(plain + 48, vouch_plain, sizeof vouch_plain, n, self->spub, self->sec) != 0)
        return -1;
    if (plen > 0)
        memcpy(plain + 128, props, plen);
    memcpy(out, "\10INITIATE", 9);
    memcpy(out + 9, self->cookie, sizeof self->cookie);
    put_u64(out + 105, self->nonce++);
    make_nonce(n, "CurveZMQINITIATE", out + 105);
    if (crypto_box_easy_afternm(out + 113, plain, 128 + plen, n, self->precom) != 0)
        return -1;
    sodium_memzero(plain, 48);
    return (int)(113 + crypto_box_MACBYTES + 128 + plen);
}

int
pyc_zmtp_curve_ready(pyc_zmtp_curve_t *self, unsigned char *body, size_t len, const unsigned char **props,
                     size_t *plen, pyc_error_t *err)
{
    unsigned char n[crypto_box_NONCEBYTES];
    if (len < 14 + crypto_box_MACBYTES || memcmp(body, "\5READY", 6) != 0)
        return pyc_error_code(err, PYC_EINVAL, "the peer's READY is malformed");
    make_nonce(n, "CurveZMQREADY---", body + 6);
    if (crypto_box_open_easy_afternm(body + 14, body + 14, len - 14, n, self->precom) != 0)
        return pyc_error_code(err, PYC_EINVAL, "the peer's READY does not open");
    self->peer_nonce = get_u64(body + 6);
    *props = body + 14;
    *plen = len - 14 - crypto_box_MACBYTES;
    return 0;
}

void
pyc_zmtp_curve_seal(pyc_zmtp_curve_t *self, int flags, const void *data, size_t n, unsigned char *out)
{
    unsigned char nonce[crypto_box_NONCEBYTES];
    memcpy(out, "\7MESSAGE", 8);
    put_u64(out + 8, self->nonce++);
    make_nonce(nonce, "CurveZMQMESSAGEC", out + 8);
    out[32] = (unsigned char)flags;
    if (n > 0)
        memcpy(out + 33, data, n);
    /* In place: the ciphertext over flags and frame, the MAC before it.  With a precomputed key it cannot
     * fail. */
    int rc = crypto_box_detached_afternm(out + 32, out + 16, out + 32, n + 1, nonce, self->precom);
    assert(rc == 0);
    (void)rc;
}

int
pyc_zmtp_curve_open(pyc_zmtp_curve_t *self, unsigned char *body, size_t len, int *flags, size_t *n,
                    pyc_error_t *err)
{
    unsigned char nonce[crypto_box_NONCEBYTES];
    if (len < PYC_CURVE_MESSAGE_OVERHEAD || memcmp(body, "\7MESSAGE", 8) != 0)
        return pyc_error_code(err, PYC_EINVAL, "the peer sent a frame that is not a CurveZMQ MESSAGE");
    uint64_t short_nonce = get_u64(body + 8);
    if (short_nonce <= self->peer_nonce)
        return pyc_error_code(err, PYC_EINVAL, "the peer's MESSAGE nonce %llu does not follow %llu (replayed or "
                              "reordered)", (unsigned long long)short_nonce, (unsigned long long)self->peer_nonce);
    make_nonce(nonce, "CurveZMQMESSAGES", body + 8);
    if (crypto_box_open_detached_afternm(body + 32, body + 32, body + 16, len - 32, nonce, self->precom) != 0)
        return pyc_error_code(err, PYC_EINVAL, "a MESSAGE from the peer does not open (altered, or not for us)");
    self->peer_nonce = short_nonce;
    *flags = body[32];
    *n = len - PYC_CURVE_MESSAGE_OVERHEAD;
    memmove(body, body + PYC_CURVE_MESSAGE_OVERHEAD, *n);
    return 0;
}
