/*
 * seal.c -- see seal.h.  OpenSSL's EVP interface for AES and RSA, a base64 codec of our own (EVP's block
 * decoder neither skips newlines nor reports the true length of padded input), jansson for the envelope.
 */
#include "seal.h"

#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pyc_seal_key {
    EVP_PKEY *pkey;
};

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* OpenSSL's reason for the last failure, or a fallback, for an error sentence. */
static const char *
ssl_reason(void)
{
    unsigned long e = ERR_get_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r != NULL ? r : "no reason given";
}

char *
pyc_seal_b64_encode(const void *data, size_t n)
{
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = b64_alphabet[(v >> 18) & 63];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? b64_alphabet[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static int
b64_value(char c)
{
    const char *at = c != '\0' ? strchr(b64_alphabet, c) : NULL;
    return at != NULL ? (int)(at - b64_alphabet) : -1;
}

int
pyc_seal_b64_decode(const char *text, unsigned char **out, size_t *n, pyc_error_t *err)
{
    size_t len = strlen(text);
    unsigned char *buf = malloc(len / 4 * 3 + 3);
    if (buf == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    uint32_t acc = 0;
    size_t got = 0, used = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0) {
            free(buf);
            return pyc_error_code(err, PYC_EINVAL, "base64: '%c' (byte %zu) is not in the alphabet", c, i);
        }
        if (pad > 0) {
            free(buf);
            return pyc_error_code(err, PYC_EINVAL, "base64: data after the padding (byte %zu)", i);
        }
        acc = acc << 6 | (uint32_t)v;
        if (++got % 4 == 0) {
            buf[used++] = (unsigned char)(acc >> 16);
            buf[used++] = (unsigned char)(acc >> 8);
            buf[used++] = (unsigned char)acc;
            acc = 0;
        }
    }
    /* A last group of 2 or 3 characters carries 1 or 2 bytes; one of 1 character is no encoding at all. */
    size_t rest = got % 4;
    if (rest == 1 || pad > 2 || (pad > 0 && (got + pad) % 4 != 0)) {
        free(buf);
        return pyc_error_code(err, PYC_EINVAL, "base64: %zu characters and %zu of padding is no encoding", got,
                              pad);
    }
    if (rest == 2) {
        buf[used++] = (unsigned char)(acc >> 4);
    } else if (rest == 3) {
        buf[used++] = (unsigned char)(acc >> 10);
        buf[used++] = (unsigned char)(acc >> 2);
    }
    *out = buf;
    *n = used;
    return 0;
}

int
pyc_seal_aes128_ecb(const unsigned char key[16], const void *in, size_t n, unsigned char **out, size_t *outn,
                    pyc_error_t *err)
{
    if (n > (size_t)INT32_MAX - 32)
        return pyc_error_code(err, PYC_EINVAL, "AES: %zu bytes is too much to seal", n);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    unsigned char *buf = malloc(n - n % 16 + 16);
    int l1 = 0, l2 = 0;
    if (ctx == NULL || buf == NULL) {
        EVP_CIPHER_CTX_free(ctx);
        free(buf);
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    }
    /* EVP pads with PKCS#7 unless told not to: exactly the padding the gateways remove (Cryptodome's unpad). */
    if (EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), NULL, key, NULL) != 1 ||
        EVP_EncryptUpdate(ctx, buf, &l1, in, (int)n) != 1 || EVP_EncryptFinal_ex(ctx, buf + l1, &l2) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        free(buf);
        return pyc_error_set(err, "AES-128-ECB: %s", ssl_reason());
    }
    EVP_CIPHER_CTX_free(ctx);
    *out = buf;
    *outn = (size_t)l1 + (size_t)l2;
    return 0;
}

/* The base64 body of a PEM text: the lines between "-----BEGIN ...-----" and "-----END ...-----".  Text
 * without a BEGIN line is taken whole.  The caller frees the result. */
static char *
pem_body(const char *text)
{
    const char *begin = strstr(text, "-----BEGIN");
    if (begin == NULL)
        return strdup(text);
    const char *start = strchr(begin + 10, '\n');
    const char *end = start != NULL ? strstr(start, "-----END") : NULL;
    if (end == NULL)
        return strdup("");
    return strndup(start + 1, (size_t)(end - start - 1));
}

pyc_seal_key_t *
pyc_seal_key_new(const char *text, pyc_error_t *err)
{
    char *body = pem_body(text);
    unsigned char *der = NULL;
    size_t n = 0;
    if (body == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    int rc = pyc_seal_b64_decode(body, &der, &n, err);
    free(body);
    if (rc < 0)
        return NULL;
    const unsigned char *p = der;
    EVP_PKEY *pkey = n > 0 && n < (size_t)INT32_MAX ? d2i_PUBKEY(NULL, &p, (long)n) : NULL;
    bool whole = pkey != NULL && p == der + n;
    free(der);
    if (pkey == NULL || !whole || EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
        if (pkey == NULL)
            pyc_error_code(err, PYC_EINVAL, "not a DER SubjectPublicKeyInfo (%s)", ssl_reason());
        else
            pyc_error_code(err, PYC_EINVAL, !whole ? "bytes follow the DER SubjectPublicKeyInfo" : "not an RSA key");
        EVP_PKEY_free(pkey);
        ERR_clear_error();
        return NULL;
    }
    pyc_seal_key_t *key = malloc(sizeof *key);
    if (key == NULL) {
        EVP_PKEY_free(pkey);
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    key->pkey = pkey;
    return key;
}

void
pyc_seal_key_destroy(pyc_seal_key_t **key_p)
{
    if (key_p == NULL || *key_p == NULL)
        return;
    EVP_PKEY_free((*key_p)->pkey);
    free(*key_p);
    *key_p = NULL;
}

int
pyc_seal_key_bits(const pyc_seal_key_t *key)
{
    return EVP_PKEY_get_bits(key->pkey);
}

int
pyc_seal_rsa_encrypt(const pyc_seal_key_t *key, const void *in, size_t n, unsigned char **out, size_t *outn,
                     pyc_error_t *err)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(key->pkey, NULL);
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = -1;
    if (ctx == NULL || EVP_PKEY_encrypt_init(ctx) != 1 ||
        EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) != 1 || EVP_PKEY_encrypt(ctx, NULL, &len, in, n) != 1) {
        pyc_error_set(err, "RSA: %s", ssl_reason());
        goto out;
    }
    buf = malloc(len);
    if (buf == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto out;
    }
    if (EVP_PKEY_encrypt(ctx, buf, &len, in, n) != 1) {
        pyc_error_set(err, "RSA PKCS#1 v1.5 encryption of %zu bytes: %s", n, ssl_reason());
        free(buf);
        buf = NULL;
        goto out;
    }
    *out = buf;
    *outn = len;
    rc = 0;
out:
    EVP_PKEY_CTX_free(ctx);
    return rc;
}

char *
pyc_seal_gateway_payload(const pyc_seal_key_t *key, const char *conn_json, pyc_error_t *err)
{
    unsigned char aes[16], *ct = NULL, *wrapped = NULL;
    size_t ctn = 0, wrappedn = 0;
    char *ct64 = NULL, *key64 = NULL, *inner = NULL, *payload = NULL;
    json_t *env = NULL;
    if (RAND_bytes(aes, sizeof aes) != 1) {
        pyc_error_set(err, "no random bytes for the AES key: %s", ssl_reason());
        return NULL;
    }
    if (pyc_seal_aes128_ecb(aes, conn_json, strlen(conn_json), &ct, &ctn, err) < 0 ||
        pyc_seal_rsa_encrypt(key, aes, sizeof aes, &wrapped, &wrappedn, err) < 0)
        goto out;
    ct64 = pyc_seal_b64_encode(ct, ctn);
    key64 = pyc_seal_b64_encode(wrapped, wrappedn);
    env = ct64 != NULL && key64 != NULL
            ? json_pack("{s:i, s:s, s:s}", "version", 1, "key", key64, "conn_info", ct64)
            : NULL;
    inner = env != NULL ? json_dumps(env, JSON_COMPACT) : NULL;
    payload = inner != NULL ? pyc_seal_b64_encode(inner, strlen(inner)) : NULL;
    if (payload == NULL)
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
out:
    OPENSSL_cleanse(aes, sizeof aes);
    json_decref(env);
    free(inner);
    free(ct64);
    free(key64);
    free(ct);
    free(wrapped);
    return payload;
}
