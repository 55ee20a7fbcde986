/*
 * test_cellfile.c -- cmocka tests for cellfile.c: MurmurHash2 equals the values JupyterLab's debugger (and
 * ipykernel's murmur2_x86) compute for the same text and seed, over every tail length and non-ASCII text;
 * file names have the announced prefix and suffix; a buffer too small is refused, not overrun.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cellfile.h"

static void
test_murmur2_reference_values(void **state)
{
    (void)state;
    /* Computed with ipykernel.compiler.murmur2_x86(text, 0xC70F6907). */
    static const struct {
        const char *text;
        uint32_t hash;
    } cases[] = {
        {"", 3990065800u},
        {"a", 2167009006u},
        {"ab", 2805137849u},
        {"abc", 3350977461u},
        {"abcd", 804720481u},
        {"def f(a, b):\n    c = a + b\n    return c\n\nf(2, 3)", 1440027060u},
        {"h\xc3\xa9llo \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac", 1331404781u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(pyc_murmur2(cases[i].text, strlen(cases[i].text), PYC_CELLFILE_SEED), cases[i].hash);
}

static void
test_name_has_prefix_hash_and_suffix(void **state)
{
    (void)state;
    char prefix[256], name[256], want[300];
    setenv("TMPDIR", "/var/tmp", 1);
    int n = pyc_cellfile_prefix(prefix, sizeof prefix);
    snprintf(want, sizeof want, "/var/tmp/pyc_%ld/", (long)getpid());
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(prefix, want);
    const char *code = "abcd";
    n = pyc_cellfile_name(code, strlen(code), name, sizeof name);
    snprintf(want, sizeof want, "/var/tmp/pyc_%ld/804720481.py", (long)getpid());
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(name, want);
    /* A relative or empty TMPDIR is not used: the prefix must be an absolute path. */
    setenv("TMPDIR", "relative", 1);
    assert_true(pyc_cellfile_prefix(prefix, sizeof prefix) > 0);
    assert_true(strncmp(prefix, "/tmp/pyc_", 9) == 0);
    unsetenv("TMPDIR");
}

/* The pid in the names is kept, and is the child's own in a child of fork(3). */
static void
test_prefix_in_a_forked_child(void **state)
{
    (void)state;
    char prefix[256], want[300];
    setenv("TMPDIR", "/var/tmp", 1);
    assert_true(pyc_cellfile_prefix(prefix, sizeof prefix) > 0);    /* the parent's pid is kept from here on */
    pid_t pid = fork();
    if (pid == 0) {
        snprintf(want, sizeof want, "/var/tmp/pyc_%ld/", (long)getpid());
        _exit(pyc_cellfile_prefix(prefix, sizeof prefix) > 0 && strcmp(prefix, want) == 0 ? 0 : 1);
    }
    assert_true(pid > 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    snprintf(want, sizeof want, "/var/tmp/pyc_%ld/", (long)getpid());
    assert_true(pyc_cellfile_prefix(prefix, sizeof prefix) > 0);
    assert_string_equal(prefix, want);
    unsetenv("TMPDIR");
}

static void
test_too_small(void **state)
{
    (void)state;
    char small[12];
    assert_int_equal(pyc_cellfile_prefix(small, sizeof small), -1);
    char mid[24];
    assert_int_equal(pyc_cellfile_name("x", 1, mid, sizeof mid), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_murmur2_reference_values),
        cmocka_unit_test(test_name_has_prefix_hash_and_suffix),
        cmocka_unit_test(test_prefix_in_a_forked_child),
        cmocka_unit_test(test_too_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
