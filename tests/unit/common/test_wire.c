/*
 * test_wire.c -- cmocka tests for wire.c: decoding Jupyter wire frames into messages.
 *
 * Each test builds a multipart message as a kernel would receive it, signs its four dicts with the module's
 * own pyc_wire_sign (whose output is pinned to Python's hmac in test_wire_sign_matches_python), and checks
 * the decoded message or the refusal sentence.  Invalid JSON is always correctly signed, so the test reaches
 * the parser; one test signs nothing and sends invalid JSON to show that the signature is checked first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define KEY "c0ffee00-1234-4abc-8def-0123456789ab"
#define MAX_TEST_FRAMES 16

static const char good_header[] =
    "{\"msg_id\":\"a1\",\"msg_type\":\"execute_request\",\"session\":\"s1\",\"username\":\"u\","
    "\"date\":\"2024-01-01T00:00:00.000000Z\",\"version\":\"5.3\"}";
static const char good_content[] = "{\"code\":\"1+1\",\"silent\":false}";

/* hmac.new(KEY, good_header + b"{}" + b"{}" + good_content, hashlib.sha256).hexdigest(), from Python. */
static const char good_sha256[] = "939280cae52f72107cb93c082725fde7759006a1b2700a1983555796c5b289fd";

/* A message under construction: the frames point at string literals or at sig. */
typedef struct wmsg {
    pyc_frame_t f[MAX_TEST_FRAMES];
    size_t n;
    char sig[PYC_AUTH_MAX_HEX + 1];
} wmsg_t;

static pyc_frame_t
frame(const char *s)
{
    pyc_frame_t f = { s, strlen(s) };
    return f;
}

/* Lays out [idents..., <IDS|MSG>, sig, h, p, m, c, bufs...] and signs the dicts with auth; with auth NULL the
 * signature frame holds text that is no signature. */
static void
build(wmsg_t *m, pyc_auth_t *auth, const char *const *idents, size_t ni, const char *const dicts[4],
      const char *const *bufs, size_t nb)
{
    assert_true(ni + 6 + nb <= MAX_TEST_FRAMES);
    m->n = 0;
    for (size_t i = 0; i < ni; i++)
        m->f[m->n++] = frame(idents[i]);
    m->f[m->n++] = frame(PYC_WIRE_DELIM);
    size_t sig_at = m->n++;
    for (int i = 0; i < 4; i++)
        m->f[m->n++] = frame(dicts[i]);
    for (size_t i = 0; i < nb; i++)
        m->f[m->n++] = frame(bufs[i]);
    if (auth != NULL)
        assert_int_equal(pyc_wire_sign(auth, &m->f[sig_at + 1], m->sig), 0);
    else
        snprintf(m->sig, sizeof m->sig, "%s", "no signature here");
    m->f[sig_at] = frame(m->sig);
}

/* The usual dicts with one of them replaced (which = 0..3), or none when which is -1. */
static void
dicts_with(const char *dicts[4], int which, const char *replacement)
{
    dicts[0] = good_header;
    dicts[1] = "{}";
    dicts[2] = "{}";
    dicts[3] = good_content;
    if (which >= 0)
        dicts[which] = replacement;
}

static pyc_auth_t *
new_auth(const char *key)
{
    pyc_error_t err = {0, ""};
    pyc_auth_t *a = pyc_auth_new("hmac-sha256", key, strlen(key), 0, &err);
    if (a == NULL)
        fail_msg("pyc_auth_new: %s", err.text);
    return a;
}

/* Decodes m and expects a refusal whose sentence contains `want`. */
static void
expect_refused(const pyc_frame_t *f, size_t n, pyc_auth_t *auth, const char *want)
{
    pyc_msg_t *msg = (pyc_msg_t *)(uintptr_t)1;  /* must be overwritten with NULL */
    pyc_error_t err = {0, ""};
    assert_int_equal(pyc_wire_decode(f, n, auth, &msg, &err), -1);
    assert_null(msg);
    if (strstr(err.text, want) == NULL)
        fail_msg("refusal [%s] does not mention [%s]", err.text, want);
    /* The error record is optional. */
    msg = (pyc_msg_t *)(uintptr_t)1;
    assert_int_equal(pyc_wire_decode(f, n, auth, &msg, NULL), -1);
    assert_null(msg);
}

/* Decodes m and expects success; the caller destroys the message. */
static pyc_msg_t *
expect_decoded(const pyc_frame_t *f, size_t n, pyc_auth_t *auth)
{
    pyc_msg_t *msg = NULL;
    pyc_error_t err = {0, ""};
    if (pyc_wire_decode(f, n, auth, &msg, &err) != 0)
        fail_msg("decode refused a good message: %s", err.text);
    assert_non_null(msg);
    return msg;
}

static void
test_good_message(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    static const char *const idents[] = { "router-id-1", "id2" };
    static const char bin[] = { 0, 1, 2, (char)0xFF, 0 };
    static const char *const bufs[] = { "buffer zero", "x" };
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, 1, "{\"msg_id\":\"parent\"}");
    build(&m, auth, idents, 2, dicts, bufs, 2);
    m.f[9] = (pyc_frame_t){ bin, sizeof bin };   /* a binary buffer, NULs included */
    pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);

    assert_int_equal(msg->n_idents, 2);
    assert_int_equal(msg->n_buffers, 2);
    /* The frame array is copied; the bytes are not. */
    assert_ptr_not_equal(msg->idents, m.f);
    for (size_t i = 0; i < 2; i++) {
        assert_ptr_equal(msg->idents[i].data, m.f[i].data);
        assert_int_equal(msg->idents[i].size, m.f[i].size);
        assert_ptr_equal(msg->buffers[i].data, m.f[8 + i].data);
        assert_int_equal(msg->buffers[i].size, m.f[8 + i].size);
    }
    assert_int_equal(msg->buffers[1].size, sizeof bin);
    m.f[0] = frame("overwritten");   /* the message does not see later changes to the caller's array */
    assert_ptr_equal(msg->idents[0].data, idents[0]);

    assert_string_equal(msg->msg_id, "a1");
    assert_string_equal(msg->msg_type, "execute_request");
    assert_string_equal(msg->session, "s1");
    assert_true(json_is_object(msg->header));
    assert_string_equal(json_string_value(json_object_get(msg->header, "version")), "5.3");
    assert_string_equal(json_string_value(json_object_get(msg->parent_header, "msg_id")), "parent");
    assert_int_equal(json_object_size(msg->metadata), 0);
    assert_string_equal(json_string_value(json_object_get(msg->content, "code")), "1+1");
    assert_true(json_is_false(json_object_get(msg->content, "silent")));
    assert_null(msg->owner);
    pyc_msg_destroy(&msg);
    assert_null(msg);
    pyc_auth_destroy(&auth);
}

static void
test_minimal_message(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    assert_string_equal(m.sig, good_sha256);
    pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);
    assert_int_equal(msg->n_idents, 0);
    assert_int_equal(msg->n_buffers, 0);
    assert_string_equal(msg->msg_type, "execute_request");
    pyc_msg_destroy(&msg);
    pyc_auth_destroy(&auth);
}

static void
test_wire_sign_matches_python(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    pyc_frame_t dicts[4] = { frame(good_header), frame("{}"), frame("{}"), frame(good_content) };
    char sig[PYC_AUTH_MAX_HEX + 1];
    assert_int_equal(pyc_wire_sign(auth, dicts, sig), 0);
    assert_string_equal(sig, good_sha256);
    pyc_auth_destroy(&auth);
}

static void
test_delimiter_text_in_buffers(void **state)
{
    (void)state;
    /* The first delimiter ends the identities; the same bytes later on are just a buffer. */
    pyc_auth_t *auth = new_auth(KEY);
    static const char *const bufs[] = { PYC_WIRE_DELIM, "<IDS|MSG" };
    static const char *const idents[] = { "<IDS|MSG>x", "<IDS|MSG" };   /* near misses are identities */
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, auth, idents, 2, dicts, bufs, 2);
    pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);
    assert_int_equal(msg->n_idents, 2);
    assert_int_equal(msg->n_buffers, 2);
    assert_int_equal(msg->buffers[0].size, PYC_WIRE_DELIM_LEN);
    pyc_msg_destroy(&msg);
    pyc_auth_destroy(&auth);
}

static void
test_no_delimiter(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    m.f[0] = frame("<IDS|MSG");
    expect_refused(m.f, m.n, auth, "no <IDS|MSG> delimiter among 6 frames");
    m.f[0] = frame("<ids|msg>");
    expect_refused(m.f, m.n, auth, "no <IDS|MSG> delimiter");
    m.f[0] = (pyc_frame_t){ "", 0 };
    expect_refused(m.f, m.n, auth, "no <IDS|MSG> delimiter");
    expect_refused(NULL, 0, auth, "no <IDS|MSG> delimiter among 0 frames");
    expect_refused(m.f, 1, auth, "no <IDS|MSG> delimiter among 1 frames");
    pyc_auth_destroy(&auth);
}

static void
test_too_few_frames(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    static const char *const idents[] = { "id" };
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, auth, idents, 1, dicts, NULL, 0);
    /* Drop the content, then more, down to the delimiter alone. */
    for (size_t n = m.n - 1; n >= 2; n--) {
        char want[128];
        snprintf(want, sizeof want, "message has %zu frames after the delimiter, expected at least 6", n - 1);
        expect_refused(m.f, n, auth, want);
    }
    pyc_auth_destroy(&auth);
}

static void
test_too_many_frames(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    const char *dicts[4];
    wmsg_t m;
    pyc_frame_t *f = calloc(PYC_WIRE_MAX_FRAMES + 1, sizeof *f);
    assert_non_null(f);

    dicts_with(dicts, -1, NULL);
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    memcpy(f, m.f, 6 * sizeof *f);
    for (size_t i = 6; i <= PYC_WIRE_MAX_FRAMES; i++)
        f[i] = frame("b");
    expect_refused(f, PYC_WIRE_MAX_FRAMES + 1, auth, "4097 frames, more than the limit of 4096");

    /* Exactly at the limit is a message with PYC_WIRE_MAX_FRAMES - 6 buffers. */
    pyc_msg_t *msg = expect_decoded(f, PYC_WIRE_MAX_FRAMES, auth);
    assert_int_equal(msg->n_buffers, PYC_WIRE_MAX_FRAMES - 6);
    assert_ptr_equal(msg->buffers[msg->n_buffers - 1].data, f[PYC_WIRE_MAX_FRAMES - 1].data);
    pyc_msg_destroy(&msg);
    free(f);
    pyc_auth_destroy(&auth);
}

static void
test_bad_signature(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    pyc_auth_t *other = new_auth("some other key");
    static const char *const idents[] = { "id" };
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, other, idents, 1, dicts, NULL, 0);       /* signed with the wrong key */
    expect_refused(m.f, m.n, auth, "invalid signature");
    pyc_error_t err = {0, ""};      /* ... with the code that tells a client the two sides hold different keys */
    pyc_msg_t *msg = NULL;
    assert_int_equal(pyc_wire_decode(m.f, m.n, auth, &msg, &err), -1);
    assert_int_equal(err.code, PYC_EAUTH);

    build(&m, auth, idents, 1, dicts, NULL, 0);
    m.sig[10] = m.sig[10] == 'a' ? 'b' : 'a';           /* one digit off */
    expect_refused(m.f, m.n, auth, "invalid signature");

    build(&m, auth, idents, 1, dicts, NULL, 0);
    m.f[2].size = 63;                                   /* cut short */
    expect_refused(m.f, m.n, auth, "signature has 63 characters, expected 64");
    m.f[2] = (pyc_frame_t){ "", 0 };                    /* missing */
    expect_refused(m.f, m.n, auth, "signature has 0 characters");
    m.sig[5] = 'z';
    m.f[2] = frame(m.sig);
    expect_refused(m.f, m.n, auth, "not hexadecimal");

    /* Content changed after signing. */
    build(&m, auth, idents, 1, dicts, NULL, 0);
    m.f[6] = frame("{\"code\":\"import os; os.system('x')\",\"silent\":false}");
    expect_refused(m.f, m.n, auth, "invalid signature");
    pyc_auth_destroy(&other);
    pyc_auth_destroy(&auth);
}

static void
test_signature_checked_before_json(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, 0, "{not json");
    build(&m, NULL, NULL, 0, dicts, NULL, 0);
    expect_refused(m.f, m.n, auth, "signature has 17 characters");
    pyc_auth_destroy(&auth);
}

static void
test_replayed(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    static const char *const idents[] = { "id" };
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, auth, idents, 1, dicts, NULL, 0);
    pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);
    pyc_msg_destroy(&msg);
    expect_refused(m.f, m.n, auth, "replayed signature");
    /* Other routing identities do not make it a new message. */
    static const char *const other_idents[] = { "someone-else" };
    build(&m, auth, other_idents, 1, dicts, NULL, 0);
    expect_refused(m.f, m.n, auth, "replayed signature");
    pyc_auth_destroy(&auth);
}

static void
test_invalid_json_each_dict(void **state)
{
    (void)state;
    static const char *const names[4] = { "header", "parent_header", "metadata", "content" };
    static const char *const bad[] = { "{", "{\"a\":}", "", "{}}", "{\"a\":1,}", "\xFF", "{\"a\":\"\\u0000\"}" };
    pyc_auth_t *auth = new_auth(KEY);
    const char *dicts[4];
    wmsg_t m;

    for (int which = 0; which < 4; which++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char want[64];
            dicts_with(dicts, which, bad[i]);
            /* A fresh window for each case: the signature covers the concatenation of the dicts, so an
             * empty parent_header and an empty metadata make the same signature, and the second would be
             * refused as a replay before its JSON is looked at. */
            pyc_auth_destroy(&auth);
            auth = new_auth(KEY);
            build(&m, auth, NULL, 0, dicts, NULL, 0);
            snprintf(want, sizeof want, "%s is not valid JSON", names[which]);
            pyc_msg_t *msg = NULL;
            pyc_error_t err = {0, ""};
            assert_int_equal(pyc_wire_decode(m.f, m.n, auth, &msg, &err), -1);
            assert_null(msg);
            if (strstr(err.text, want) != err.text)
                fail_msg("dict %d, input %zu: [%s] does not start with [%s]", which, i, err.text, want);
        }
    }
    pyc_auth_destroy(&auth);
}

/* For a request to the kernel, a signed message with a good header but an unreadable parent_header, metadata
 * or content is kept, marked invalid (the kernel answers it with an error); a bad header is still refused. */
static void
test_request_that_cannot_be_read_is_kept_and_marked(void **state)
{
    (void)state;
    static const char *const bad[] = { "{", "\"text\"", "{\"code\":\"\xff\xfe\"}", "{\"code\":\"\\ud800\"}",
                                       "{\"n\":9223372036854775808}" };
    const char *dicts[4];
    wmsg_t m;
    for (int which = 1; which < 4; which++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            pyc_auth_t *auth = new_auth(KEY);
            dicts_with(dicts, which, bad[i]);
            build(&m, auth, NULL, 0, dicts, NULL, 0);
            pyc_msg_t *msg = NULL;
            pyc_error_t err = {0, ""};
            if (pyc_wire_decode_request(m.f, m.n, auth, &msg, &err) != 0)
                fail_msg("dict %d, input %zu refused: %s", which, i, err.text);
            assert_non_null(msg->invalid);
            assert_string_equal(msg->msg_type, "execute_request");
            assert_true(json_is_object(msg->content) && json_is_object(msg->metadata) &&
                        json_is_object(msg->parent_header));
            pyc_msg_destroy(&msg);
            pyc_auth_destroy(&auth);
        }
    }
    /* Signature and header are checked as strictly as ever. */
    pyc_auth_t *auth = new_auth(KEY);
    dicts_with(dicts, 0, "{");
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    pyc_msg_t *msg = NULL;
    pyc_error_t err = {0, ""};
    assert_int_equal(pyc_wire_decode_request(m.f, m.n, auth, &msg, &err), -1);
    assert_null(msg);
    dicts_with(dicts, 3, "{");
    build(&m, NULL, NULL, 0, dicts, NULL, 0);
    assert_int_equal(pyc_wire_decode_request(m.f, m.n, auth, &msg, &err), -1);
    assert_non_null(strstr(err.text, "signature"));
    /* A good request is not invalid. */
    pyc_auth_destroy(&auth);
    auth = new_auth(KEY);
    dicts_with(dicts, -1, NULL);
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    assert_int_equal(pyc_wire_decode_request(m.f, m.n, auth, &msg, &err), 0);
    assert_null(msg->invalid);
    pyc_msg_destroy(&msg);
    pyc_auth_destroy(&auth);
}

static void
test_dict_not_object(void **state)
{
    (void)state;
    static const char *const names[4] = { "header", "parent_header", "metadata", "content" };
    static const char *const bad[] = { "[]", "[{\"msg_id\":\"a\"}]", "\"text\"", "42", "null", "true" };

    for (int which = 0; which < 4; which++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char want[64];
            const char *dicts[4];
            wmsg_t m;
            dicts_with(dicts, which, bad[i]);
            build(&m, NULL, NULL, 0, dicts, NULL, 0);
            snprintf(want, sizeof want, "%s is not a JSON object", names[which]);
            /* Without auth: only the JSON is under test here. */
            pyc_msg_t *msg = NULL;
            pyc_error_t err = {0, ""};
            int rc = pyc_wire_decode(m.f, m.n, NULL, &msg, &err);
            /* jansson refuses a bare scalar at the top level as invalid JSON; an array parses and is then
             * refused as not an object.  Either way the sentence names the dict. */
            assert_int_equal(rc, -1);
            assert_null(msg);
            if (strstr(err.text, names[which]) != err.text || (bad[i][0] == '[' && strcmp(err.text, want) != 0))
                fail_msg("dict %d, input %zu: [%s]", which, i, err.text);
        }
    }
}

static void
test_header_fields(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        const char *want;
    } cases[] = {
        { "{\"msg_type\":\"t\",\"session\":\"s\"}", "header lacks a string 'msg_id'" },
        { "{\"msg_id\":\"i\",\"session\":\"s\"}", "header lacks a string 'msg_type'" },
        { "{\"msg_id\":\"i\",\"msg_type\":\"t\"}", "header lacks a string 'session'" },
        { "{}", "header lacks a string 'msg_id'" },
        { "{\"msg_id\":1,\"msg_type\":\"t\",\"session\":\"s\"}", "header lacks a string 'msg_id'" },
        { "{\"msg_id\":\"i\",\"msg_type\":null,\"session\":\"s\"}", "header lacks a string 'msg_type'" },
        { "{\"msg_id\":\"i\",\"msg_type\":\"t\",\"session\":[]}", "header lacks a string 'session'" },
        { "{\"msg_id\":\"i\",\"msg_type\":\"\",\"session\":\"s\"}", "header has an empty msg_type" },
    };
    pyc_auth_t *auth = new_auth(KEY);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *dicts[4];
        wmsg_t m;
        dicts_with(dicts, 0, cases[i].header);
        build(&m, auth, NULL, 0, dicts, NULL, 0);
        pyc_msg_t *msg = NULL;
        pyc_error_t err = {0, ""};
        assert_int_equal(pyc_wire_decode(m.f, m.n, auth, &msg, &err), -1);
        assert_null(msg);
        assert_string_equal(err.text, cases[i].want);
    }
    /* Empty msg_id and session are allowed; only msg_type selects a handler. */
    const char *dicts[4];
    wmsg_t m;
    dicts_with(dicts, 0, "{\"msg_id\":\"\",\"msg_type\":\"kernel_info_request\",\"session\":\"\"}");
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);
    assert_string_equal(msg->msg_id, "");
    assert_string_equal(msg->session, "");
    pyc_msg_destroy(&msg);
    pyc_auth_destroy(&auth);
}

/* The storage a receiver would hand over: the frames' bytes in one block, and a count of releases. */
typedef struct owner {
    char *block;
    int *released;
} owner_t;

static void
owner_free(void *p)
{
    owner_t *o = p;
    (*o->released)++;
    free(o->block);
    free(o);
}

/* A message with one buffer decoded from frames copied into one heap block, as a receiver does; the block
 * is the message's owner (owner_free counts into *released).  *o_out is the owner. */
static pyc_msg_t *
owned_message(pyc_auth_t *auth, int *released, owner_t **o_out)
{
    const char *dicts[4];
    wmsg_t m;
    static const char *const bufs[] = {"the bytes of a buffer"};

    dicts_with(dicts, -1, NULL);
    build(&m, auth, NULL, 0, dicts, bufs, 1);
    size_t total = 0;
    for (size_t i = 0; i < m.n; i++)
        total += m.f[i].size;
    owner_t *o = malloc(sizeof *o);
    assert_non_null(o);
    o->block = malloc(total);
    o->released = released;
    assert_non_null(o->block);
    pyc_frame_t f[MAX_TEST_FRAMES];
    size_t off = 0;
    for (size_t i = 0; i < m.n; i++) {
        memcpy(o->block + off, m.f[i].data, m.f[i].size);
        f[i] = (pyc_frame_t){ o->block + off, m.f[i].size };
        off += m.f[i].size;
    }
    pyc_msg_t *msg = expect_decoded(f, m.n, auth);
    pyc_msg_set_owner(msg, o, owner_free);
    *o_out = o;
    return msg;
}

static void
test_owner_freed_on_destroy(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    int released = 0;
    owner_t *o;
    pyc_msg_t *msg = owned_message(auth, &released, &o);
    assert_ptr_equal(msg->owner, o);
    assert_int_equal(released, 0);
    pyc_msg_destroy(&msg);
    assert_null(msg);
    assert_int_equal(released, 1);
    pyc_msg_destroy(&msg);       /* NULL-safe, and does not release again */
    pyc_msg_destroy(NULL);
    assert_int_equal(released, 1);
    pyc_auth_destroy(&auth);
}

/* Holds keep the storage alive after the message; the last of them and the message frees it, once. */
static void
test_hold_outlives_message(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    int released = 0;
    owner_t *o;
    pyc_msg_t *msg = owned_message(auth, &released, &o);
    assert_int_equal(msg->n_buffers, 1);
    const pyc_frame_t view = msg->buffers[0];
    pyc_msg_hold_t *h1 = pyc_msg_hold(msg);
    pyc_msg_hold_t *h2 = pyc_msg_hold(msg);
    assert_non_null(h1);
    assert_ptr_equal(h1, h2);               /* one count for the storage, whoever holds it */
    assert_ptr_equal(msg->buffers[0].data, view.data);
    pyc_msg_destroy(&msg);
    assert_int_equal(released, 0);
    assert_int_equal(view.size, strlen("the bytes of a buffer"));
    assert_memory_equal(view.data, "the bytes of a buffer", view.size);   /* still valid */
    pyc_msg_hold_release(h1);
    assert_int_equal(released, 0);
    pyc_msg_hold_release(h2);
    assert_int_equal(released, 1);
    pyc_msg_hold_release(NULL);

    /* released before the message: the message frees the storage (a new auth: the same message again
     * would be a replay) */
    pyc_auth_destroy(&auth);
    auth = new_auth(KEY);
    msg = owned_message(auth, &released, &o);
    pyc_msg_hold_release(pyc_msg_hold(msg));
    assert_int_equal(released, 1);
    pyc_msg_destroy(&msg);
    assert_int_equal(released, 2);
    pyc_auth_destroy(&auth);
}

/* Frames the caller owns (no owner): no hold, the views live as long as the message. */
static void
test_hold_without_owner(void **state)
{
    (void)state;
    pyc_auth_t *auth = new_auth(KEY);
    const char *dicts[4];
    wmsg_t m;
    dicts_with(dicts, -1, NULL);
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);
    assert_null(pyc_msg_hold(msg));
    pyc_msg_destroy(&msg);
    pyc_auth_destroy(&auth);
}

static void
test_auth_null_accepted(void **state)
{
    (void)state;
    static const char *const idents[] = { "id" };
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, NULL, idents, 1, dicts, NULL, 0);
    /* No signature check, and so no replay check either. */
    for (int i = 0; i < 2; i++) {
        pyc_msg_t *msg = expect_decoded(m.f, m.n, NULL);
        assert_string_equal(msg->msg_type, "execute_request");
        assert_int_equal(msg->n_idents, 1);
        pyc_msg_destroy(&msg);
    }
    /* The layout and JSON checks still apply. */
    expect_refused(m.f, m.n - 1, NULL, "expected at least 6");
    dicts_with(dicts, 3, "[]");
    build(&m, NULL, idents, 1, dicts, NULL, 0);
    expect_refused(m.f, m.n, NULL, "content is not a JSON object");
}

static void
test_unsigned_session(void **state)
{
    (void)state;
    /* An empty key: the signature frame is ignored, whatever it holds. */
    pyc_auth_t *auth = new_auth("");
    const char *dicts[4];
    wmsg_t m;

    dicts_with(dicts, -1, NULL);
    build(&m, auth, NULL, 0, dicts, NULL, 0);
    assert_string_equal(m.sig, "");
    for (int i = 0; i < 2; i++) {
        pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);
        pyc_msg_destroy(&msg);
    }
    m.f[1] = frame("anything");
    pyc_msg_t *msg = expect_decoded(m.f, m.n, auth);
    pyc_msg_destroy(&msg);
    pyc_auth_destroy(&auth);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_message),
        cmocka_unit_test(test_minimal_message),
        cmocka_unit_test(test_wire_sign_matches_python),
        cmocka_unit_test(test_delimiter_text_in_buffers),
        cmocka_unit_test(test_no_delimiter),
        cmocka_unit_test(test_too_few_frames),
        cmocka_unit_test(test_too_many_frames),
        cmocka_unit_test(test_bad_signature),
        cmocka_unit_test(test_signature_checked_before_json),
        cmocka_unit_test(test_replayed),
        cmocka_unit_test(test_invalid_json_each_dict),
        cmocka_unit_test(test_request_that_cannot_be_read_is_kept_and_marked),
        cmocka_unit_test(test_dict_not_object),
        cmocka_unit_test(test_header_fields),
        cmocka_unit_test(test_owner_freed_on_destroy),
        cmocka_unit_test(test_hold_outlives_message),
        cmocka_unit_test(test_hold_without_owner),
        cmocka_unit_test(test_auth_null_accepted),
        cmocka_unit_test(test_unsigned_session),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
