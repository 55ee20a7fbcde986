/*
 * test_jsontext.c -- cmocka tests for jsontext.c: the text is jansson's json_dumps(JSON_COMPACT), byte for
 * byte, for fixed trees and for thousands of random ones (strings with every kind of character, reals,
 * integers, nesting, insertion order of members); control characters other than \b \f \n \r \t come out as
 * the same JSON value (hex digits in lower case); a tree too deep or a buffer too small is refused with the
 * buffer left as it was; a 10 MB string round-trips.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jsontext.h"

/* Ours and jansson's texts of j; when same is true they must be equal byte for byte, else only as values. */
static void
check_tree(json_t *j, bool same)
{
    size_t len = 0;
    char *ours = pyc_json_text_dup(j, &len);
    char *theirs = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(ours);
    assert_non_null(theirs);
    assert_int_equal(len, strlen(ours));
    if (same)
        assert_string_equal(ours, theirs);
    json_error_t e;
    json_t *back = json_loads(ours, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    assert_non_null(back);
    assert_true(json_equal(back, j));
    json_decref(back);
    free(ours);
    free(theirs);
}

static void
test_fixed_trees(void **state)
{
    (void)state;
    json_t *j = json_pack("{s:i, s:s, s:{s:b, s:n, s:[i, f, f, f, s]}, s:f, s:I}", "execution_count", 7,
                          "text/plain", "b'xx\"\\\\'\n\ttab/é€😀", "data", "t", 1, "nothing", "list", -3, 0.1,
                          3.0, 1e300, "", "real", -0.0, "big", (json_int_t)INT64_MIN);
    check_tree(j, true);
    json_decref(j);
    /* members stay in the order they were set, not sorted */
    j = json_object();
    json_object_set_new(j, "zeta", json_integer(1));
    json_object_set_new(j, "alpha", json_integer(2));
    json_object_set_new(j, "m", json_array());
    json_object_set_new(j, "e", json_object());
    check_tree(j, true);
    char *ours = pyc_json_text_dup(j, NULL);
    assert_string_equal(ours, "{\"zeta\":1,\"alpha\":2,\"m\":[],\"e\":{}}");
    free(ours);
    json_decref(j);
    for (const char *const *s = (const char *const[]){"true", "false", "null", "12", "1.5", "\"\"", NULL}; *s; s++) {
        json_t *v = json_loads(*s, JSON_DECODE_ANY, NULL);
        check_tree(v, true);
        json_decref(v);
    }
}

static void
test_control_characters(void **state)
{
    (void)state;
    char raw[40];
    for (int i = 0; i < 32; i++)
        raw[i] = (char)(i + 1 < 32 ? i + 1 : 0x7f);
    json_t *s = json_stringn(raw, 32);
    check_tree(s, false);
    char *ours = pyc_json_text_dup(s, NULL);
    assert_non_null(strstr(ours, "\\u001b"));     /* an ANSI escape, as tracebacks have */
    assert_non_null(strstr(ours, "\\b\\t\\n"));
    free(ours);
    json_decref(s);
    /* a NUL inside a string */
    s = json_stringn("a\0b", 3);
    check_tree(s, false);
    json_decref(s);
}

static uint64_t rng = 88172645463325252ULL;

static uint32_t
next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* A random valid UTF-8 string of up to 40 characters from every range (no control characters below 0x20
 * other than \b \f \n \r \t when plain is true, so that the bytes must match jansson's). */
static json_t *
random_string(bool plain)
{
    static const char *const pieces[] = {"a", "Z", " ", "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", "é", "€",
                                         "😀", "\x7f", "<>", "&", "'", "\x01", "\x1f"};
    size_t npieces = sizeof pieces / sizeof pieces[0] - (plain ? 2 : 0);
    char buf[256];
    size_t len = 0, n = next() % 40;
    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[next() % npieces];
        size_t l = strlen(p);
        memcpy(buf + len, p, l);
        len += l;
    }
    return json_stringn(buf, len);
}

static json_t *
random_tree(int depth, bool plain)
{
    switch (next() % (depth > 5 ? 6 : 8)) {
    case 0: return json_integer((json_int_t)next() - (json_int_t)(next() % 3) * 2000000000);
    case 1: {
        double v = (double)(int32_t)next() / (double)((next() % 1000) + 1) * ((next() % 2) ? 1e-9 : 1e12);
        return json_real(v);
    }
    case 2: return random_string(plain);
    case 3: return json_true();
    case 4: return json_false();
    case 5: return json_null();
    case 6: {
        json_t *a = json_array();
        for (uint32_t i = next() % 5; i > 0; i--)
            json_array_append_new(a, random_tree(depth + 1, plain));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (uint32_t i = next() % 5; i > 0; i--) {
            json_t *key = random_string(plain);
            json_object_set_new(o, json_string_value(key), random_tree(depth + 1, plain));
            json_decref(key);
        }
        return o;
    }
    }
}

static void
test_random_trees(void **state)
{
    (void)state;
    for (int i = 0; i < 3000; i++) {
        bool plain = i % 3 != 0;
        json_t *j = random_tree(0, plain);
        check_tree(j, plain);
        json_decref(j);
    }
}

static void
test_refusals_leave_the_buffer_as_it_was(void **state)
{
    (void)state;
    json_t *deep = json_array(), *inner = deep;
    for (int i = 0; i < PYC_JSON_TEXT_MAX_DEPTH + 5; i++) {
        json_t *a = json_array();
        json_array_append_new(inner, a);
        inner = a;
    }
    pyc_buf_t b;
    pyc_buf_init(&b, SIZE_MAX / 2);
    assert_int_equal(pyc_buf_add(&b, "head", 4), 0);
    assert_int_equal(pyc_json_text(&b, deep), -1);
    assert_int_equal(b.len, 4);
    assert_string_equal(b.data, "head");
    assert_null(pyc_json_text_dup(deep, NULL));
    json_decref(deep);
    pyc_buf_free(&b);

    pyc_buf_init(&b, 16);
    assert_int_equal(pyc_buf_add(&b, "[", 1), 0);
    json_t *s = json_string("a string longer than the sixteen bytes the buffer may hold");
    assert_int_equal(pyc_json_text(&b, s), -1);
    assert_int_equal(b.len, 1);
    assert_string_equal(b.data, "[");
    assert_int_equal(pyc_json_text(&b, NULL), -1);
    json_decref(s);
    pyc_buf_free(&b);
}

static void
test_ten_megabytes(void **state)
{
    (void)state;
    size_t n = 10u << 20;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'x', n);
    big[n / 2] = '\n';
    json_t *j = json_pack("{s:{s:s%}}", "data", "text/plain", big, n);
    check_tree(j, true);
    json_decref(j);
    free(big);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_trees),
        cmocka_unit_test(test_control_characters),
        cmocka_unit_test(test_random_trees),
        cmocka_unit_test(test_refusals_leave_the_buffer_as_it_was),
        cmocka_unit_test(test_ten_megabytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
