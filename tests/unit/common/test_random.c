/*
 * test_random.c -- cmocka tests for random.c: hex of the asked length, only hex digits, different every time,
 * and a refusal (not an overflow) for more than the limit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "random.h"

static void
test_hex(void **state)
{
    (void)state;
    char a[65], b[65];
    pyc_error_t err;
    assert_int_equal(pyc_random_hex(a, 32, &err), 0);
    assert_int_equal(pyc_random_hex(b, 32, &err), 0);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(strspn(a, "0123456789abcdef"), 64);
    assert_string_not_equal(a, b);
    char one[3];
    assert_int_equal(pyc_random_hex(one, 1, &err), 0);
    assert_int_equal(strlen(one), 2);
    char none[1];
    assert_int_equal(pyc_random_hex(none, 0, &err), 0);
    assert_string_equal(none, "");
}

static void
test_limit(void **state)
{
    (void)state;
    char big[600];
    pyc_error_t err;
    assert_int_equal(pyc_random_hex(big, 129, &err), -1);
    assert_non_null(strstr(err.text, "at most 128"));
}

static void
test_bytes_fill_everything(void **state)
{
    (void)state;
    /* 4096 bytes are all written: the chance that a given byte stays 0 in all of eight fills is 2^-64. */
    static unsigned char buf[4096], seen[4096];
    pyc_error_t err;
    for (int round = 0; round < 8; round++) {
        memset(buf, 0, sizeof buf);
        assert_int_equal(pyc_random_bytes(buf, sizeof buf, &err), 0);
        for (size_t i = 0; i < sizeof buf; i++)
            seen[i] |= buf[i];
    }
    for (size_t i = 0; i < sizeof seen; i++)
        assert_true(seen[i] != 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_bytes_fill_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
