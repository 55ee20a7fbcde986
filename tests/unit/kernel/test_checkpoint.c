/*
 * test_checkpoint.c -- cmocka tests for checkpoint.c: the writer and the parser together on cells that hold
 * the marker text themselves, file names and modes, a restarted and a forked session's files, and the
 * refusals of files that are not checkpoints.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "unit_util.h"

static char *
read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void
test_checkpoint_round_trip(void **state)
{
    char dir[PATH_MAX];
    pyc_error_t err;
    snprintf(dir, sizeof dir, "%s/a/b", (const char *)*state);
    pyc_checkpoint_t *c = pyc_checkpoint_new(dir, "kernel-1/../x", "3.11.2", &err);
    assert_non_null(c);
    const char *path = pyc_checkpoint_path(c);
    assert_non_null(strstr(path, "/a/b/kernel-1_.._x.py"));   /* no path separator survives */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);                   /* made at once, with its header */
    char **got;
    size_t n;
    assert_int_equal(pyc_checkpoint_load(path, &got, &n, &err), 0);
    assert_int_equal(n, 0);
    pyc_checkpoint_free_cells(got, n);
    /* A second session of the same name (a restarted kernel) gets a file of its own. */
    pyc_checkpoint_t *again = pyc_checkpoint_new(dir, "kernel-1/../x", "3.11.2", &err);
    assert_non_null(again);
    assert_non_null(strstr(pyc_checkpoint_path(again), "/a/b/kernel-1_.._x-2.py"));
    pyc_checkpoint_destroy(&again);
    const char *cells[] = {"x = 1", "# %% pyc looks like a marker\ny = 2\n", "def f():\n    return 3\n\n\n",
                           "!echo hi"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pyc_checkpoint_add(c, i + 1, cells[i], &err), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *text = read_file(path);
    assert_non_null(strstr(text, "secrets"));
    assert_int_equal(pyc_checkpoint_load(path, &got, &n, &err), 0);
    assert_int_equal(n, 4);
    assert_string_equal(got[0], "x = 1");
    assert_string_equal(got[1], "# %% pyc looks like a marker\ny = 2");
    assert_string_equal(got[2], "def f():\n    return 3");
    assert_string_equal(got[3], "!echo hi");
    pyc_checkpoint_free_cells(got, n);

    /* A forked session's checkpoint starts with the parent's cells and goes on by itself. */
    assert_int_equal(pyc_checkpoint_fork(c, dir, "child", &err), 0);
    assert_int_equal(pyc_checkpoint_add(c, 5, "z = 3", &err), 0);
    assert_int_equal(pyc_checkpoint_load(pyc_checkpoint_path(c), &got, &n, &err), 0);
    assert_int_equal(n, 5);
    assert_string_equal(got[4], "z = 3");
    pyc_checkpoint_free_cells(got, n);
    pyc_checkpoint_destroy(&c);
    assert_null(c);
    pyc_checkpoint_destroy(&c);
}

static void
test_checkpoint_refusals(void **state)
{
    (void)state;
    char **cells;
    size_t n;
    pyc_error_t err;
    const char *bad[] = {"", "print(1)\n", "# pyc checkpoint 1 XYZ\n", "# pyc checkpoint 1 0123456789abcdeg\n",
                         "# pyc checkpoint 2 0123456789abcdef\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.text[0] = '\0';
        assert_int_equal(pyc_checkpoint_parse(bad[i], strlen(bad[i]), &cells, &n, &err), -1);
        assert_null(cells);
        assert_true(err.text[0] != '\0');
    }
    const char nul[] = "# pyc checkpoint 1 0123456789abcdef\n\0x";
    assert_int_equal(pyc_checkpoint_parse(nul, sizeof nul - 1, &cells, &n, &err), -1);
    const char empty[] = "# pyc checkpoint 1 0123456789abcdef\n# nothing yet\n";
    assert_int_equal(pyc_checkpoint_parse(empty, strlen(empty), &cells, &n, &err), 0);
    assert_int_equal(n, 0);
    pyc_checkpoint_free_cells(cells, n);
    assert_int_equal(pyc_checkpoint_load("/nonexistent/file.py", &cells, &n, &err), -1);
    assert_non_null(strstr(err.text, "/nonexistent/file.py"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_checkpoint_round_trip, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_checkpoint_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
