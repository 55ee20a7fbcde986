/*
 * test_auth.c -- cmocka tests for auth.c: HMAC signatures of Jupyter messages and the replay window.
 *
 * The expected digests are fixed data: RFC 4231 test case 2 for the primitive, and for a Jupyter-style
 * message of four JSON parts the value Python gives for
 *     hmac.new(key, b''.join(parts), hashlib.sha256).hexdigest()
 * which is what jupyter_client computes.  Every refusal is checked by its status and by the sentence it
 * leaves in the error record, so a check that passes for the wrong reason shows up.  The replay window is
 * tested at size 4, where eviction order is easy to follow, and at the default size with more messages than
 * it holds, which walks every path of the ring's hash chains.
 *
 * The program is built twice from the one auth.c: test_auth linked with the kernel's hmac.h backend (OpenSSL), and
 * test_auth_builtin (TEST_HMAC_BUILTIN) with the `pyc` command's backend over sha256.c.  The builtin one refuses
 * hmac-sha512 (checked instead of the sha512 vectors), runs the SHA-256 vectors through both its code paths (the SHA
 * instructions when the CPU has them, and the portable code), and compares both with OpenSSL on lengths around every
 * block boundary, in one piece and in random splits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "hmac.h"
#ifdef TEST_HMAC_BUILTIN
#include <openssl/evp.h>

#include "sha256.h"
#endif

/* RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?". */
static const char rfc_key[] = "Jefe";
static const char rfc_data[] = "what do ya want for nothing?";
static const char rfc_sha256[] = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
static const char rfc_sha512[] = "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
                                 "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737";

/* A message as jupyter_client would sign it; the digests come from /usr/bin/python3. */
static const char jup_key[] = "c0ffee00-1234-4abc-8def-0123456789ab";
static const char jup_header[] =
    "{\"msg_id\":\"a1\",\"msg_type\":\"execute_request\",\"session\":\"s1\",\"username\":\"u\","
    "\"date\":\"2024-01-01T00:00:00.000000Z\",\"version\":\"5.3\"}";
static const char *const jup_parts[4] = {
    jup_header,
    "{}",
    "{}",
    "{\"code\":\"1+1\",\"silent\":false}",
};
static const char jup_sha256[] = "939280cae52f72107cb93c082725fde7759006a1b2700a1983555796c5b289fd";
static const char jup_sha512[] = "c8a11b8c1646880dac62763d6a7fe498e48db955d72e9572838c707c1beaf5a4"
                                 "9e98afc7f7e5ec0b5b03987daf7d5ee8ee3aa66e2a208e92d2fd6d13b06ecbc8";

/* hmac.new(b"key", b"", hashlib.sha256): the signature of a message whose parts are all empty. */
static const char empty_sha256[] = "5d5d139563c95b5967b9bd9a8c9b233a9dedb45072794cd232dc1b74832607d0";

/* A key with a NUL and a byte above 0x7F, over "header" "parent" "meta" "content". */
static const char bin_key[] = "\x00\x01" "binary\xff" "key";
static const char bin_sha256[] = "09854b5d152876e7f1fd7e37bf39626daf5851918f22f52ce213c04b446e06b4";

static pyc_frame_t
frame(const char *s)
{
    pyc_frame_t f = { s, strlen(s) };
    return f;
}

/* Fills parts[4] with the Jupyter test message. */
static void
jup_frames(pyc_frame_t parts[4])
{
    for (int i = 0; i < 4; i++)
        parts[i] = frame(jup_parts[i]);
}

static pyc_auth_t *
new_auth(const char *scheme, const char *key, size_t window)
{
    pyc_error_t err = {0, ""};
    pyc_auth_t *a = pyc_auth_new(scheme, key, strlen(key), window, &err);
    if (a == NULL)
        fail_msg("pyc_auth_new(%s): %s", scheme, err.text);
    return a;
}

/* Verifies sig (a C string) over parts and returns the status; err receives the refusal. */
static int
verify_str(pyc_auth_t *a, const pyc_frame_t *parts, size_t n, const char *sig, pyc_error_t *err)
{
    return pyc_auth_verify(a, parts, n, sig, strlen(sig), err);
}

static void
test_rfc4231_sha256(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", rfc_key, 0);
    pyc_frame_t whole = frame(rfc_data);
    char hex[PYC_AUTH_MAX_HEX + 1];

    assert_true(pyc_auth_enabled(a));
    assert_int_equal(pyc_auth_hexlen(a), 64);
    assert_int_equal(pyc_auth_sign(a, &whole, 1, hex), 0);
    assert_string_equal(hex, rfc_sha256);

    /* The digest is over the concatenation, so any split of the bytes into parts signs the same. */
    pyc_frame_t split[3] = { { rfc_data, 4 }, { rfc_data + 4, 0 }, { rfc_data + 4, strlen(rfc_data) - 4 } };
    assert_int_equal(pyc_auth_sign(a, split, 3, hex), 0);
    assert_string_equal(hex, rfc_sha256);
    assert_int_equal(verify_str(a, split, 3, rfc_sha256, NULL), 0);
    pyc_auth_destroy(&a);
    assert_null(a);
}

/* RFC 4231 test cases 6 and 7: a 131-byte key, longer than a block, is hashed first. */
static void
test_rfc4231_long_key(void **state)
{
    (void)state;
    unsigned char key[131];
    pyc_error_t err;
    char hex[PYC_AUTH_MAX_HEX + 1];
    static const char data6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
    static const char data7[] = "This is a test using a larger than block-size key and a larger than block-size "
                                "data. The key "
                                "needs to be hashed before being used by the HMAC algorithm.";
    memset(key, 0xaa, sizeof key);
    pyc_auth_t *a = pyc_auth_new("hmac-sha256", key, sizeof key, 0, &err);
    assert_non_null(a);
    pyc_frame_t f = frame(data6);
    assert_int_equal(pyc_auth_sign(a, &f, 1, hex), 0);
    assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    f = frame(data7);
    assert_int_equal(pyc_auth_sign(a, &f, 1, hex), 0);
    assert_string_equal(hex, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
    pyc_auth_destroy(&a);
}

#ifdef TEST_HMAC_BUILTIN
/* The CLI's copy knows hmac-sha256 only, and says so. */
static void
test_rfc4231_sha512(void **state)
{
    (void)state;
    pyc_error_t err = {0, ""};
    assert_null(pyc_auth_new("hmac-sha512", rfc_key, strlen(rfc_key), 0, &err));
    assert_non_null(strstr(err.text, "unsupported signature scheme 'hmac-sha512': the pyc command knows only "
                                     "hmac-sha256"));
    assert_null(pyc_auth_new("hmac-sha512", "", 0, 0, &err));
    (void)rfc_sha512;
    (void)jup_sha512;
}
#else
static void
test_rfc4231_sha512(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha512", rfc_key, 0);
    pyc_frame_t whole = frame(rfc_data);
    char hex[PYC_AUTH_MAX_HEX + 1];

    assert_int_equal(pyc_auth_hexlen(a), 128);
    assert_int_equal(pyc_auth_sign(a, &whole, 1, hex), 0);
    assert_string_equal(hex, rfc_sha512);
    assert_int_equal(strlen(hex), PYC_AUTH_MAX_HEX);
    pyc_auth_destroy(&a);
}
#endif

static void
test_jupyter_message_sha256(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 0);
    pyc_frame_t parts[4];
    char hex[PYC_AUTH_MAX_HEX + 1];
    pyc_error_t err = {0, ""};

    jup_frames(parts);
    assert_int_equal(pyc_auth_sign(a, parts, 4, hex), 0);
    assert_string_equal(hex, jup_sha256);
    if (verify_str(a, parts, 4, jup_sha256, &err) != 0)
        fail_msg("verify refused a good signature: %s", err.text);
    pyc_auth_destroy(&a);
}

#ifndef TEST_HMAC_BUILTIN
static void
test_jupyter_message_sha512(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha512", jup_key, 0);
    pyc_frame_t parts[4];
    char hex[PYC_AUTH_MAX_HEX + 1];

    jup_frames(parts);
    assert_int_equal(pyc_auth_sign(a, parts, 4, hex), 0);
    assert_string_equal(hex, jup_sha512);
    assert_int_equal(verify_str(a, parts, 4, jup_sha512, NULL), 0);
    pyc_auth_destroy(&a);
}
#endif

static void
test_binary_key_and_empty_parts(void **state)
{
    (void)state;
    pyc_error_t err = {0, ""};
    pyc_auth_t *a = pyc_auth_new("hmac-sha256", bin_key, sizeof bin_key - 1, 0, &err);
    pyc_frame_t parts[4] = { frame("header"), frame("parent"), frame("meta"), frame("content") };
    char hex[PYC_AUTH_MAX_HEX + 1];

    assert_non_null(a);
    assert_int_equal(pyc_auth_sign(a, parts, 4, hex), 0);
    assert_string_equal(hex, bin_sha256);
    pyc_auth_destroy(&a);

    /* Empty parts, with or without a data pointer, and no parts at all, sign the empty string. */
    a = new_auth("hmac-sha256", "key", 0);
    pyc_frame_t empty[4] = { { NULL, 0 }, { "", 0 }, { NULL, 0 }, { "x", 0 } };
    assert_int_equal(pyc_auth_sign(a, empty, 4, hex), 0);
    assert_string_equal(hex, empty_sha256);
    assert_int_equal(pyc_auth_sign(a, NULL, 0, hex), 0);
    assert_string_equal(hex, empty_sha256);
    pyc_auth_destroy(&a);
}

static void
test_scheme_case_insensitive(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("HMAC-SHA256", jup_key, 0);
    pyc_frame_t parts[4];
    char hex[PYC_AUTH_MAX_HEX + 1];

    jup_frames(parts);
    assert_int_equal(pyc_auth_sign(a, parts, 4, hex), 0);
    assert_string_equal(hex, jup_sha256);
    pyc_auth_destroy(&a);
}

static void
test_unknown_scheme_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = { "hmac-nosuchdigest", "hmac-", "sha256", "md5", "", "hmac_sha256",
                                       "hmac-sha256-but-longer-than-the-digest-name-buffer-holds" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pyc_error_t err = {0, ""};
        pyc_auth_t *a = pyc_auth_new(bad[i], "k", 1, 0, &err);
        if (a != NULL)
            fail_msg("scheme '%s' was accepted", bad[i]);
        assert_non_null(strstr(err.text, "unsupported signature scheme"));
    }
    pyc_error_t err = {0, ""};
    assert_null(pyc_auth_new(NULL, "k", 1, 0, &err));
    assert_non_null(strstr(err.text, "(none)"));
    /* The error record is optional. */
    assert_null(pyc_auth_new("hmac-nosuchdigest", "k", 1, 0, NULL));
}

static void
test_unknown_scheme_rejected_without_key(void **state)
{
    (void)state;
    /* The scheme is checked even when the key is empty, as jupyter_client's Session does: a connection file
     * naming a digest nobody has is wrong whether or not it is used. */
    pyc_error_t err = {0, ""};
    assert_null(pyc_auth_new("hmac-nosuchdigest", "", 0, 0, &err));
    assert_non_null(strstr(err.text, "unsupported signature scheme"));
    assert_null(pyc_auth_new("plain", "", 0, 0, &err));
}

static void
test_empty_key_is_unsigned(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", "", 0);
    pyc_frame_t parts[4];
    char hex[PYC_AUTH_MAX_HEX + 1];

    jup_frames(parts);
    assert_false(pyc_auth_enabled(a));
    assert_int_equal(pyc_auth_hexlen(a), 0);
    memset(hex, 'x', sizeof hex);
    assert_int_equal(pyc_auth_sign(a, parts, 4, hex), 0);
    assert_string_equal(hex, "");
    /* Anything verifies, any number of times: there is nothing to replay. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(verify_str(a, parts, 4, "", NULL), 0);
        assert_int_equal(verify_str(a, parts, 4, "not a signature at all", NULL), 0);
        assert_int_equal(verify_str(a, parts, 4, jup_sha256, NULL), 0);
    }
    pyc_auth_destroy(&a);
}

static void
test_wrong_length(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 0);
    pyc_frame_t parts[4];
    pyc_error_t err = {0, ""};

    jup_frames(parts);
    assert_int_equal(pyc_auth_verify(a, parts, 4, jup_sha256, 63, &err), -1);
    assert_non_null(strstr(err.text, "63 characters, expected 64"));
    assert_int_equal(pyc_auth_verify(a, parts, 4, "", 0, &err), -1);
    assert_non_null(strstr(err.text, "0 characters"));
    char longer[66];
    snprintf(longer, sizeof longer, "%s0", jup_sha256);
    assert_int_equal(verify_str(a, parts, 4, longer, &err), -1);
    assert_non_null(strstr(err.text, "65 characters"));
    /* A SHA-512 signature offered to a SHA-256 session is refused on length. */
    assert_int_equal(verify_str(a, parts, 4, jup_sha512, &err), -1);
    assert_non_null(strstr(err.text, "128 characters"));
    /* None of the refusals was remembered: the right signature still verifies. */
    assert_int_equal(verify_str(a, parts, 4, jup_sha256, NULL), 0);
    pyc_auth_destroy(&a);
}

static void
test_non_hex(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 0);
    pyc_frame_t parts[4];
    pyc_error_t err = {0, ""};
    char sig[65];

    jup_frames(parts);
    static const char bad_chars[] = { 'g', 'G', ' ', '-', 'x', '\0', (char)0xC3 };
    for (size_t i = 0; i < sizeof bad_chars; i++) {
        for (size_t pos = 0; pos < 64; pos += 63) {
            memcpy(sig, jup_sha256, 65);
            sig[pos] = bad_chars[i];
            err.text[0] = '\0';
            assert_int_equal(pyc_auth_verify(a, parts, 4, sig, 64, &err), -1);
            assert_non_null(strstr(err.text, "not hexadecimal"));
        }
    }
    assert_int_equal(verify_str(a, parts, 4, jup_sha256, NULL), 0);
    pyc_auth_destroy(&a);
}

static void
test_wrong_signature(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 0);
    pyc_frame_t parts[4];
    pyc_error_t err = {0, ""};
    char sig[65];

    jup_frames(parts);
    /* One digit off, at the start and at the end. */
    memcpy(sig, jup_sha256, 65);
    sig[0] = sig[0] == '0' ? '1' : '0';
    assert_int_equal(verify_str(a, parts, 4, sig, &err), -1);
    assert_string_equal(err.text, "invalid signature");
    memcpy(sig, jup_sha256, 65);
    sig[63] = sig[63] == 'f' ? 'e' : 'f';
    assert_int_equal(verify_str(a, parts, 4, sig, &err), -1);
    assert_string_equal(err.text, "invalid signature");

    /* The right signature for other content: one byte of the content changed. */
    pyc_frame_t changed[4];
    jup_frames(changed);
    changed[3] = frame("{\"code\":\"1+2\",\"silent\":false}");
    assert_int_equal(verify_str(a, changed, 4, jup_sha256, &err), -1);
    assert_string_equal(err.text, "invalid signature");

    /* The same bytes split differently between the parts sign the same: the scheme does not bind the
     * boundaries, which is the protocol's choice, not ours. */
    pyc_frame_t moved[4] = { parts[0], { "{}{}", 4 }, { "", 0 }, parts[3] };
    assert_int_equal(verify_str(a, moved, 4, jup_sha256, NULL), 0);

    /* A signature made with another key. */
    pyc_auth_t *other = new_auth("hmac-sha256", "another key", 0);
    char hex[PYC_AUTH_MAX_HEX + 1];
    assert_int_equal(pyc_auth_sign(other, parts, 4, hex), 0);
    assert_int_equal(verify_str(a, parts, 4, hex, &err), -1);
    assert_string_equal(err.text, "invalid signature");
    pyc_auth_destroy(&other);
    pyc_auth_destroy(&a);
}

static void
test_uppercase_hex_accepted(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 0);
    pyc_frame_t parts[4];
    char sig[65];

    jup_frames(parts);
    for (size_t i = 0; i < 65; i++)
        sig[i] = (char)(jup_sha256[i] >= 'a' && jup_sha256[i] <= 'f' ? jup_sha256[i] - 'a' + 'A' : jup_sha256[i]);
    assert_string_not_equal(sig, jup_sha256);
    assert_int_equal(verify_str(a, parts, 4, sig, NULL), 0);
    /* The case of the digits does not make a new signature: the lowercase form is now a replay. */
    pyc_error_t err = {0, ""};
    assert_int_equal(verify_str(a, parts, 4, jup_sha256, &err), -1);
    assert_string_equal(err.text, "replayed signature");
    pyc_auth_destroy(&a);
}

static void
test_replay_rejected(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 0);
    pyc_frame_t parts[4];
    pyc_error_t err = {0, ""};

    jup_frames(parts);
    assert_int_equal(verify_str(a, parts, 4, jup_sha256, &err), 0);
    for (int i = 0; i < 3; i++) {
        err.text[0] = '\0';
        assert_int_equal(verify_str(a, parts, 4, jup_sha256, &err), -1);
        assert_string_equal(err.text, "replayed signature");
    }
    /* A failed verification does not enter the window, so it cannot shadow a later good message. */
    pyc_frame_t other[4];
    jup_frames(other);
    other[1] = frame("{\"msg_id\":\"p\"}");
    char hex[PYC_AUTH_MAX_HEX + 1];
    assert_int_equal(pyc_auth_sign(a, other, 4, hex), 0);
    assert_int_equal(verify_str(a, parts, 4, hex, &err), -1);
    assert_string_equal(err.text, "invalid signature");
    assert_int_equal(verify_str(a, other, 4, hex, NULL), 0);
    pyc_auth_destroy(&a);
}

/* Makes the i-th distinct message (its content says i) and its signature. */
static void
numbered(const pyc_auth_t *a, unsigned i, char content[64], pyc_frame_t parts[4], char sig[PYC_AUTH_MAX_HEX + 1])
{
    snprintf(content, 64, "{\"n\":%u}", i);
    jup_frames(parts);
    parts[3] = frame(content);
    assert_int_equal(pyc_auth_sign(a, parts, 4, sig), 0);
}

/* Verifies message i and returns the status. */
static int
verify_numbered(pyc_auth_t *a, unsigned i)
{
    char content[64], sig[PYC_AUTH_MAX_HEX + 1];
    pyc_frame_t parts[4];
    numbered(a, i, content, parts, sig);
    return verify_str(a, parts, 4, sig, NULL);
}

static void
test_replay_window_eviction(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 4);

    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(verify_numbered(a, i), 0);
    /* The window is full: 0..3 are all replays. */
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(verify_numbered(a, i), -1);
    /* A fifth message evicts the oldest, 0, which is then accepted again (and evicts 1). */
    assert_int_equal(verify_numbered(a, 4), 0);
    assert_int_equal(verify_numbered(a, 0), 0);
    assert_int_equal(verify_numbered(a, 0), -1);
    assert_int_equal(verify_numbered(a, 2), -1);
    assert_int_equal(verify_numbered(a, 3), -1);
    assert_int_equal(verify_numbered(a, 4), -1);
    assert_int_equal(verify_numbered(a, 1), 0);
    /* The window now holds 4, 0, 1, 3 (2 was evicted by 1). */
    assert_int_equal(verify_numbered(a, 2), 0);
    pyc_auth_destroy(&a);

    /* A window of one remembers only the last message. */
    a = new_auth("hmac-sha256", jup_key, 1);
    assert_int_equal(verify_numbered(a, 0), 0);
    assert_int_equal(verify_numbered(a, 0), -1);
    assert_int_equal(verify_numbered(a, 1), 0);
    assert_int_equal(verify_numbered(a, 0), 0);
    assert_int_equal(verify_numbered(a, 1), 0);
    pyc_auth_destroy(&a);
}

static void
test_replay_default_window_many(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, 0);
    const unsigned total = PYC_AUTH_REPLAY_WINDOW * 3 + 17;

    /* Every message is new; after each one, a message still inside the window is a replay. */
    for (unsigned i = 0; i < total; i++) {
        if (verify_numbered(a, i) != 0)
            fail_msg("message %u refused", i);
        if (i >= 100 && verify_numbered(a, i - 100) != -1)
            fail_msg("message %u accepted twice within the window", i - 100);
    }
    /* The last PYC_AUTH_REPLAY_WINDOW messages are remembered, anything older is not. */
    for (unsigned i = total - PYC_AUTH_REPLAY_WINDOW; i < total; i++)
        if (verify_numbered(a, i) != -1)
            fail_msg("message %u accepted twice within the window", i);
    assert_int_equal(verify_numbered(a, 0), 0);
    pyc_auth_destroy(&a);
}

#define THREADS 4
#define PER_THREAD 2000

typedef struct worker {
    pyc_auth_t *auth;
    unsigned base;
    int failures;
} worker_t;

static void *
worker_main(void *arg)
{
    worker_t *w = arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        char content[64], sig[PYC_AUTH_MAX_HEX + 1];
        pyc_frame_t parts[4];
        snprintf(content, sizeof content, "{\"n\":%u}", w->base + i);
        for (int k = 0; k < 4; k++)
            parts[k] = frame(jup_parts[k]);
        parts[3] = frame(content);
        if (pyc_auth_sign(w->auth, parts, 4, sig) != 0 ||
            pyc_auth_verify(w->auth, parts, 4, sig, strlen(sig), NULL) != 0 ||
            pyc_auth_verify(w->auth, parts, 4, sig, strlen(sig), NULL) != -1)
            w->failures++;
    }
    return NULL;
}

static void
test_threads(void **state)
{
    (void)state;
    pyc_auth_t *a = new_auth("hmac-sha256", jup_key, THREADS * PER_THREAD);
    pthread_t tid[THREADS];
    worker_t w[THREADS];

    for (unsigned t = 0; t < THREADS; t++) {
        w[t] = (worker_t){ a, t * PER_THREAD, 0 };
        assert_int_equal(pthread_create(&tid[t], NULL, worker_main, &w[t]), 0);
    }
    for (unsigned t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_join(tid[t], NULL), 0);
        assert_int_equal(w[t].failures, 0);
    }
    /* The window is big enough for all of them: every message is now a replay. */
    for (unsigned i = 0; i < THREADS * PER_THREAD; i += 97)
        assert_int_equal(verify_numbered(a, i), -1);
    pyc_auth_destroy(&a);
}

static void
test_destroy_null_safe(void **state)
{
    (void)state;
    pyc_auth_t *a = NULL;
    pyc_auth_destroy(NULL);
    pyc_auth_destroy(&a);
    assert_null(a);
    a = new_auth("hmac-sha256", "", 0);
    pyc_auth_destroy(&a);
    assert_null(a);
    pyc_auth_destroy(&a);
}

/* FIPS 180-2 examples: the empty input, "abc", the 448- and 896-bit messages and a million 'a'; plus a 1 MiB
 * input of one byte repeated, whose digest comes from hashlib.sha256(b"\\x5a" * (1 << 20)).hexdigest(). */
static void
sha256_vectors(void)
{
    char hex[65];
    pyc_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    pyc_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    static unsigned char big[1 << 20];
    memset(big, 0x5a, sizeof big);
    pyc_sha256_hex(big, sizeof big, hex);
    assert_string_equal(hex, "bf63d8a95fcc2e64619813aae35fdcbe871fdd9264caa3f365eb3aed0f679129");
    static const char m448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    pyc_sha256_hex(m448, strlen(m448), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    static const char m896[] = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                               "klmnopqr"
                               "lmnopqrsmnopqrstnopqrstu";
    pyc_sha256_hex(m896, strlen(m896), hex);
    assert_string_equal(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    memset(big, 'a', 1000000);
    pyc_sha256_hex(big, 1000000, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void
test_sha256_hex(void **state)
{
    (void)state;
    sha256_vectors();
#ifdef TEST_HMAC_BUILTIN
    int accelerated = pyc_sha256_accelerated(-1);
    print_message("SHA-256 through the CPU's SHA instructions: %s\n", accelerated ? "yes" : "no");
    pyc_sha256_accelerated(0);
    assert_int_equal(pyc_sha256_accelerated(-1), 0);
    sha256_vectors();
    pyc_sha256_accelerated(1);
    assert_int_equal(pyc_sha256_accelerated(-1), accelerated);
#endif
}

#ifdef TEST_HMAC_BUILTIN
/* Both code paths against OpenSSL: every length from 0 to 300 and some around larger block multiples, in one
 * piece and in random splits (so that the buffered tail meets every offset). */
static void
test_sha256_against_openssl(void **state)
{
    (void)state;
    size_t cap = 70000;
    unsigned char *p = malloc(cap), want[32], got[32];
    unsigned seed = 12345;
    assert_non_null(p);
    for (size_t i = 0; i < cap; i++)
        p[i] = (unsigned char)(i * 2654435761u >> 13);
    for (int path = 1; path >= 0; path--) {
        pyc_sha256_accelerated(path);
        for (size_t n = 0; n < cap; n = n < 300 ? n + 1 : n * 3 + 1) {
            assert_int_equal(EVP_Digest(p, n, want, NULL, EVP_sha256(), NULL), 1);
            pyc_sha256(p, n, got);
            assert_memory_equal(got, want, 32);
            pyc_sha256_t s;
            pyc_sha256_init(&s);
            for (size_t off = 0; off < n;) {
                seed = seed * 1103515245u + 12345u;
                size_t k = (seed >> 16) % 150;
                k = k < n - off ? k : n - off;
                pyc_sha256_update(&s, p + off, k);
                off += k;
            }
            pyc_sha256_final(&s, got);
            assert_memory_equal(got, want, 32);
        }
    }
    pyc_sha256_accelerated(1);
    free(p);
}
#endif

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4231_sha256),
        cmocka_unit_test(test_rfc4231_long_key),
        cmocka_unit_test(test_rfc4231_sha512),
        cmocka_unit_test(test_jupyter_message_sha256),
#ifndef TEST_HMAC_BUILTIN
        cmocka_unit_test(test_jupyter_message_sha512),
#endif
        cmocka_unit_test(test_binary_key_and_empty_parts),
        cmocka_unit_test(test_scheme_case_insensitive),
        cmocka_unit_test(test_unknown_scheme_rejected),
        cmocka_unit_test(test_unknown_scheme_rejected_without_key),
        cmocka_unit_test(test_empty_key_is_unsigned),
        cmocka_unit_test(test_wrong_length),
        cmocka_unit_test(test_non_hex),
        cmocka_unit_test(test_wrong_signature),
        cmocka_unit_test(test_uppercase_hex_accepted),
        cmocka_unit_test(test_replay_rejected),
        cmocka_unit_test(test_replay_window_eviction),
        cmocka_unit_test(test_replay_default_window_many),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_destroy_null_safe),
        cmocka_unit_test(test_sha256_hex),
#ifdef TEST_HMAC_BUILTIN
        cmocka_unit_test(test_sha256_against_openssl),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
