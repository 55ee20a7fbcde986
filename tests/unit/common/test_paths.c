/*
 * test_paths.c -- cmocka tests for paths.c: where Jupyter's data and runtime directories are (every variable
 * in jupyter_core's order, empty ones counting as unset, a result that does not fit), and pyc_mkdirs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"
#include "unit_util.h"

static void
test_paths(void **state)
{
    const char *tmpdir = *state;
    char out[4096], small[8];
    setenv("JUPYTER_DATA_DIR", "/d/data", 1);
    setenv("JUPYTER_RUNTIME_DIR", "", 1);
    assert_int_equal(pyc_jupyter_data_dir(out, sizeof out), 0);
    assert_string_equal(out, "/d/data");
    assert_int_equal(pyc_jupyter_runtime_dir(out, sizeof out), 0);
    assert_string_equal(out, "/d/data/runtime");
    setenv("JUPYTER_RUNTIME_DIR", "/r", 1);
    assert_int_equal(pyc_jupyter_runtime_dir(out, sizeof out), 0);
    assert_string_equal(out, "/r");
    unsetenv("JUPYTER_DATA_DIR");
    setenv("XDG_DATA_HOME", "/x", 1);
    assert_int_equal(pyc_jupyter_data_dir(out, sizeof out), 0);
    assert_string_equal(out, "/x/jupyter");
    unsetenv("XDG_DATA_HOME");
    setenv("HOME", "/home/someone", 1);
    assert_int_equal(pyc_jupyter_data_dir(out, sizeof out), 0);
    assert_string_equal(out, "/home/someone/.local/share/jupyter");
    assert_int_equal(pyc_jupyter_data_dir(small, sizeof small), -1);
    assert_string_equal(small, "");
    unsetenv("JUPYTER_RUNTIME_DIR");

    char dir[512];
    snprintf(dir, sizeof dir, "%s/m/n/o", tmpdir);
    assert_int_equal(pyc_mkdirs(dir, 0700), 0);
    assert_int_equal(pyc_mkdirs(dir, 0700), 0);          /* existing: fine */
    snprintf(dir, sizeof dir, "%s/file", tmpdir);
    FILE *f = fopen(dir, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/file/sub", tmpdir);
    assert_int_equal(pyc_mkdirs(dir, 0700), -1);         /* a file in the way */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_paths, unit_tmpdir_setup, unit_tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
