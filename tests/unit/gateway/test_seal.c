/*
 * test_seal.c -- cmocka tests for seal.c, the gateway launcher's cryptography: base64 against RFC 4648's
 * vectors, AES-128 against FIPS-197 (appendix C.1) and NIST SP 800-38A (F.1.1, ECB), PKCS#7 padding at the
 * edge lengths, RSA PKCS#1 v1.5 and the whole version-1 payload decrypted the way the gateways do it (with
 * OpenSSL here: the private key's PKCS#1 v1.5 decryption, AES-ECB, unpadding), and the refusals of keys.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

#include "seal.h"

static void
unhex(const char *hex, unsigned char *out)
{
    for (size_t i = 0; hex[2 * i] != '\0'; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
}

/* AES-128-ECB decryption without padding removal, so a test sees the padding bytes themselves. */
static size_t
aes_decrypt_raw(const unsigned char key[16], const unsigned char *in, size_t n, unsigned char *out)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int l1 = 0, l2 = 0;
    assert_int_equal(EVP_DecryptInit_ex(ctx, EVP_aes_128_ecb(), NULL, key, NULL), 1);
    EVP_CIPHER_CTX_set_padding(ctx, 0);
    assert_int_equal(EVP_DecryptUpdate(ctx, out, &l1, in, (int)n), 1);
    assert_int_equal(EVP_DecryptFinal_ex(ctx, out + l1, &l2), 1);
    EVP_CIPHER_CTX_free(ctx);
    return (size_t)(l1 + l2);
}

static void
test_b64_rfc4648(void **state)
{
    (void)state;
    static const char *const vec[][2] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                         {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        char *enc = pyc_seal_b64_encode(vec[i][0], strlen(vec[i][0]));
        assert_string_equal(enc, vec[i][1]);
        free(enc);
        unsigned char *dec = NULL;
        size_t n = 99;
        assert_int_equal(pyc_seal_b64_decode(vec[i][1], &dec, &n, NULL), 0);
        assert_int_equal(n, strlen(vec[i][0]));
        assert_memory_equal(dec, vec[i][0], n);
        free(dec);
    }
}

static void
test_b64_whitespace_and_missing_padding(void **state)
{
    (void)state;
    unsigned char *dec = NULL;
    size_t n = 0;
    assert_int_equal(pyc_seal_b64_decode("Zm9v\nYmE=\r\n", &dec, &n, NULL), 0);
    assert_int_equal(n, 5);
    assert_memory_equal(dec, "fooba", 5);
    free(dec);
    assert_int_equal(pyc_seal_b64_decode("Zm9vYg", &dec, &n, NULL), 0);
    assert_int_equal(n, 4);
    assert_memory_equal(dec, "foob", 4);
    free(dec);
}

static void
test_b64_refusals(void **state)
{
    (void)state;
    unsigned char *dec = NULL;
    size_t n = 0;
    pyc_error_t err;
    assert_int_equal(pyc_seal_b64_decode("Zm9v!", &dec, &n, &err), -1);
    assert_string_equal(err.text, "base64: '!' (byte 4) is not in the alphabet");
    assert_int_equal(pyc_seal_b64_decode("Zg==Zg==", &dec, &n, &err), -1);
    assert_string_equal(err.text, "base64: data after the padding (byte 4)");
    assert_int_equal(pyc_seal_b64_decode("Zm9vY", &dec, &n, &err), -1);
    assert_string_equal(err.text, "base64: 5 characters and 0 of padding is no encoding");
    assert_int_equal(pyc_seal_b64_decode("Zg=", &dec, &n, &err), -1);
    assert_int_equal(pyc_seal_b64_decode("Zg===", &dec, &n, &err), -1);
}

static void
test_aes_published_vectors(void **state)
{
    (void)state;
    static const char *const vec[][3] = {
        /* FIPS-197, appendix C.1 */
        {"000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff", "69c4e0d86a7b0430d8cdb78070b4c55a"},
        /* NIST SP 800-38A, F.1.1 ECB-AES128.Encrypt, blocks 1 and 2 */
        {"2b7e151628aed2a6abf7158809cf4f3c", "6bc1bee22e409f96e93d7e117393172a", "3ad77bb40d7a3660a89ecaf32466ef97"},
        {"2b7e151628aed2a6abf7158809cf4f3c", "ae2d8a571e03ac9c9eb76fac45af8e51", "f5d3d58503b9699de785895a96fdbaaf"},
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        unsigned char key[16], pt[16], ct[16], *out = NULL;
        size_t n = 0;
        unhex(vec[i][0], key);
        unhex(vec[i][1], pt);
        unhex(vec[i][2], ct);
        assert_int_equal(pyc_seal_aes128_ecb(key, pt, 16, &out, &n, NULL), 0);
        /* A whole block of input gets a whole block of padding after it. */
        assert_int_equal(n, 32);
        assert_memory_equal(out, ct, 16);
        unsigned char plain[32];
        assert_int_equal(aes_decrypt_raw(key, out, n, plain), 32);
        for (int b = 16; b < 32; b++)
            assert_int_equal(plain[b], 16);
        free(out);
    }
}

static void
test_aes_pkcs7_edges(void **state)
{
    (void)state;
    unsigned char key[16], msg[40], *out = NULL, plain[48];
    for (int i = 0; i < 16; i++)
        key[i] = (unsigned char)(i * 7);
    for (int i = 0; i < 40; i++)
        msg[i] = (unsigned char)('a' + i % 26);
    static const size_t lens[] = {0, 1, 15, 16, 17, 31, 32, 33};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        size_t n = 0, len = lens[i];
        assert_int_equal(pyc_seal_aes128_ecb(key, msg, len, &out, &n, NULL), 0);
        assert_int_equal(n, len - len % 16 + 16);
        assert_int_equal(aes_decrypt_raw(key, out, n, plain), n);
        assert_memory_equal(plain, msg, len);
        size_t pad = n - len;
        for (size_t b = len; b < n; b++)
            assert_int_equal(plain[b], pad);
        free(out);
    }
}

/* A fresh RSA key of bits, and its public half as base64 DER (what a gateway passes) into *b64. */
static EVP_PKEY *
rsa_key(int bits, char **b64)
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)bits);
    assert_non_null(pkey);
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(pkey, &der);
    assert_true(n > 0);
    *b64 = pyc_seal_b64_encode(der, (size_t)n);
    OPENSSL_free(der);
    return pkey;
}

static size_t
rsa_decrypt(EVP_PKEY *pkey, const unsigned char *in, size_t n, unsigned char *out, size_t cap)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(pkey, NULL);
    size_t len = cap;
    assert_int_equal(EVP_PKEY_decrypt_init(ctx), 1);
    assert_int_equal(EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING), 1);
    assert_int_equal(EVP_PKEY_decrypt(ctx, out, &len, in, n), 1);
    EVP_PKEY_CTX_free(ctx);
    return len;
}

static void
test_rsa_round_trip(void **state)
{
    (void)state;
    char *b64 = NULL;
    EVP_PKEY *pkey = rsa_key(1024, &b64);
    assert_int_equal(strlen(b64), 216);      /* the length of the gateways' key strings */
    pyc_seal_key_t *key = pyc_seal_key_new(b64, NULL);
    assert_non_null(key);
    assert_int_equal(pyc_seal_key_bits(key), 1024);
    /* Sixteen bytes, no terminating NUL: a string literal of 16 characters would not fit (GCC 15 warns). */
    static const unsigned char secret[16] = {'0', '1', '2', '3', '4', '5', '6', '7',
                                             '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
    unsigned char *ct = NULL, plain[128];
    size_t n = 0;
    assert_int_equal(pyc_seal_rsa_encrypt(key, secret, sizeof secret, &ct, &n, NULL), 0);
    assert_int_equal(n, 128);
    assert_int_equal(rsa_decrypt(pkey, ct, n, plain, sizeof plain), 16);
    assert_memory_equal(plain, secret, 16);
    /* PKCS#1 v1.5 is randomized: the same secret seals differently each time. */
    unsigned char *ct2 = NULL;
    assert_int_equal(pyc_seal_rsa_encrypt(key, secret, sizeof secret, &ct2, &n, NULL), 0);
    assert_memory_not_equal(ct, ct2, 128);
    /* More than the modulus - 11 bytes does not fit. */
    unsigned char big[118] = {0};
    pyc_error_t err;
    unsigned char *ct3 = NULL;
    assert_int_equal(pyc_seal_rsa_encrypt(key, big, sizeof big, &ct3, &n, &err), -1);
    free(ct);
    free(ct2);
    pyc_seal_key_destroy(&key);
    assert_null(key);
    free(b64);
    EVP_PKEY_free(pkey);
}

static void
test_key_as_pem(void **state)
{
    (void)state;
    char *b64 = NULL;
    EVP_PKEY *pkey = rsa_key(1024, &b64);
    BIO *mem = BIO_new(BIO_s_mem());
    assert_int_equal(PEM_write_bio_PUBKEY(mem, pkey), 1);
    char *pem = NULL;
    long len = BIO_get_mem_data(mem, &pem);
    char *text = strndup(pem, (size_t)len);
    pyc_seal_key_t *key = pyc_seal_key_new(text, NULL);
    assert_non_null(key);
    pyc_seal_key_destroy(&key);
    free(text);
    BIO_free(mem);
    free(b64);
    EVP_PKEY_free(pkey);
}

static void
test_key_refusals(void **state)
{
    (void)state;
    pyc_error_t err;
    assert_null(pyc_seal_key_new("notakey", &err));
    assert_null(pyc_seal_key_new("/etc/pyc/public.key", &err));
    assert_string_equal(err.text, "base64: '.' (byte 15) is not in the alphabet");
    assert_null(pyc_seal_key_new("", &err));
    assert_null(pyc_seal_key_new("Zm9vYmFy", &err));
    /* An EC key is a SubjectPublicKeyInfo, but not RSA. */
    EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    assert_non_null(ec);
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(ec, &der);
    char *b64 = pyc_seal_b64_encode(der, (size_t)n);
    assert_null(pyc_seal_key_new(b64, &err));
    assert_string_equal(err.text, "not an RSA key");
    free(b64);
    /* Bytes after a valid key. */
    char *rsa64 = NULL;
    EVP_PKEY *rsa = rsa_key(1024, &rsa64);
    unsigned char *rder = NULL;
    int rn = i2d_PUBKEY(rsa, &rder);
    unsigned char *longer = malloc((size_t)rn + 2);
    assert_non_null(longer);
    memcpy(longer, rder, (size_t)rn);
    longer[rn] = longer[rn + 1] = 0;
    b64 = pyc_seal_b64_encode(longer, (size_t)rn + 2);
    assert_null(pyc_seal_key_new(b64, &err));
    assert_string_equal(err.text, "bytes follow the DER SubjectPublicKeyInfo");
    free(b64);
    free(longer);
    free(rsa64);
    OPENSSL_free(rder);
    OPENSSL_free(der);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
}

/* The receiver's steps of Enterprise Gateway's processproxy.py and gateway_provisioners' response_manager.py:
 * base64 -> JSON {"version", "key", "conn_info"} -> RSA-decrypt the AES key -> AES-ECB -> unpad -> JSON. */
static void
test_payload_decodes_as_the_gateways_do(void **state)
{
    (void)state;
    char *b64 = NULL;
    EVP_PKEY *pkey = rsa_key(1024, &b64);
    pyc_seal_key_t *key = pyc_seal_key_new(b64, NULL);
    static const char conn[] = "{\"shell_port\": 40001, \"kernel_id\": \"k-1\", \"key\": \"s3cret\"}";
    char *payload = pyc_seal_gateway_payload(key, conn, NULL);
    assert_non_null(payload);
    unsigned char *outer = NULL;
    size_t on = 0;
    assert_int_equal(pyc_seal_b64_decode(payload, &outer, &on, NULL), 0);
    json_t *env = json_loadb((const char *)outer, on, 0, NULL);
    assert_non_null(env);
    assert_int_equal(json_integer_value(json_object_get(env, "version")), 1);
    assert_int_equal(json_object_size(env), 3);
    unsigned char *wrapped = NULL, *ct = NULL, aes[128], plain[256];
    size_t wn = 0, cn = 0;
    assert_int_equal(pyc_seal_b64_decode(json_string_value(json_object_get(env, "key")), &wrapped, &wn, NULL), 0);
    assert_int_equal(rsa_decrypt(pkey, wrapped, wn, aes, sizeof aes), 16);
    assert_int_equal(pyc_seal_b64_decode(json_string_value(json_object_get(env, "conn_info")), &ct, &cn, NULL), 0);
    assert_true(cn <= sizeof plain);
    size_t pn = aes_decrypt_raw(aes, ct, cn, plain);
    size_t pad = plain[pn - 1];
    assert_true(pad >= 1 && pad <= 16);
    assert_int_equal(pn - pad, strlen(conn));
    assert_memory_equal(plain, conn, strlen(conn));
    /* Each payload has a key of its own. */
    char *again = pyc_seal_gateway_payload(key, conn, NULL);
    assert_string_not_equal(again, payload);
    free(again);
    free(wrapped);
    free(ct);
    json_decref(env);
    free(outer);
    free(payload);
    pyc_seal_key_destroy(&key);
    free(b64);
    EVP_PKEY_free(pkey);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_rfc4648),
        cmocka_unit_test(test_b64_whitespace_and_missing_padding),
        cmocka_unit_test(test_b64_refusals),
        cmocka_unit_test(test_aes_published_vectors),
        cmocka_unit_test(test_aes_pkcs7_edges),
        cmocka_unit_test(test_rsa_round_trip),
        cmocka_unit_test(test_key_as_pem),
        cmocka_unit_test(test_key_refusals),
        cmocka_unit_test(test_payload_decodes_as_the_gateways_do),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
