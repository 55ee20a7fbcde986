/*
 * test_pyenv.c -- cmocka tests for pyenv.c: a virtual environment's pyvenv.cfg (version and version_info,
 * include-system-site-packages), an interpreter given instead of the folder, a conda-style prefix (its one
 * lib/pythonX.Y), folders that are no environment, the active environment from $VIRTUAL_ENV or from PATH,
 * the choice between --python, --no-env and the active one, and the sentence that refuses another version.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyenv.h"

static char root[256];

static void
touch_exe(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\n", f);
    fclose(f);
    chmod(path, 0755);
}

/* ROOT/NAME with bin/python3, and pyvenv.cfg holding cfg (NULL: none). */
static void
make_env(const char *name, const char *cfg, char *out, size_t cap)
{
    char p[512];
    snprintf(out, cap, "%s/%s", root, name);
    mkdir(out, 0755);
    snprintf(p, sizeof p, "%s/bin", out);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bin/python3", out);
    touch_exe(p);
    if (cfg != NULL) {
        snprintf(p, sizeof p, "%s/pyvenv.cfg", out);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(cfg, f);
        fclose(f);
    }
}

static int
setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/pyc-test-pyenv-XXXXXX");
    return mkdtemp(root) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void
test_venv(void **state)
{
    (void)state;
    char dir[512], exe[600];
    pyc_pyenv_t env;
    pyc_error_t err;
    make_env("venv", "home = /usr/bin\ninclude-system-site-packages = true\nversion = 3.11.2\n", dir, sizeof dir);
    assert_int_equal(pyc_pyenv_read(dir, &env, &err), 0);
    assert_string_equal(env.prefix, dir);
    assert_true(env.venv && env.system_site);
    assert_int_equal(env.major, 3);
    assert_int_equal(env.minor, 11);
    snprintf(exe, sizeof exe, "%s/bin/python3", dir);
    assert_string_equal(env.python, exe);
    assert_int_equal(pyc_pyenv_check(&env, "3.11", &err), 0);
    /* the interpreter instead of the folder, and a trailing slash */
    assert_int_equal(pyc_pyenv_read(exe, &env, &err), 0);
    assert_string_equal(env.prefix, dir);
    size_t dl = strlen(dir);
    snprintf(dir + dl, sizeof dir - dl, "/");
    assert_int_equal(pyc_pyenv_read(dir, &env, &err), 0);
    /* uv and virtualenv write version_info */
    make_env("uv", "version_info = 3.12.1.final.0\ninclude-system-site-packages = false\n", dir, sizeof dir);
    assert_int_equal(pyc_pyenv_read(dir, &env, &err), 0);
    assert_int_equal(env.minor, 12);
    assert_false(env.system_site);
    assert_int_equal(pyc_pyenv_check(&env, "3.11", &err), -1);
    assert_non_null(strstr(err.text, "is Python 3.12, and this pyc-kernel embeds Python 3.11"));
    assert_non_null(strstr(err.text, "./configure PYTHON="));
    assert_non_null(strstr(err.text, "python-3.12-embed"));
}

static void
test_conda_and_refusals(void **state)
{
    (void)state;
    char dir[512], p[600];
    pyc_pyenv_t env;
    pyc_error_t err;
    make_env("conda", NULL, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/lib", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/lib/python3.11", dir);
    mkdir(p, 0755);
    assert_int_equal(pyc_pyenv_read(dir, &env, &err), 0);
    assert_false(env.venv);
    assert_int_equal(env.minor, 11);
    /* two lib/pythonX.Y: which one is not known */
    snprintf(p, sizeof p, "%s/lib/python3.10", dir);
    mkdir(p, 0755);
    assert_int_equal(pyc_pyenv_read(dir, &env, &err), -1);
    /* a folder with no interpreter, a cfg with no version, nothing at all */
    assert_int_equal(pyc_pyenv_read(root, &env, &err), -1);
    assert_non_null(strstr(err.text, "not a Python environment"));
    make_env("noversion", "home = /usr/bin\n", dir, sizeof dir);
    assert_int_equal(pyc_pyenv_read(dir, &env, &err), -1);
    assert_non_null(strstr(err.text, "does not say which Python version"));
    assert_int_equal(pyc_pyenv_read("/nonexistent/x", &env, &err), -1);
}

static void
test_active(void **state)
{
    (void)state;
    char dir[512], path[700];
    pyc_pyenv_t env;
    pyc_error_t err;
    make_env("active", "version = 3.11.4\n", dir, sizeof dir);
    unsetenv("CONDA_PREFIX");
    setenv("VIRTUAL_ENV", dir, 1);
    assert_int_equal(pyc_pyenv_active(&env, &err), 1);
    assert_string_equal(env.prefix, dir);
    /* no VIRTUAL_ENV: the first python3 on PATH decides */
    unsetenv("VIRTUAL_ENV");
    snprintf(path, sizeof path, "%s/bin:/usr/bin", dir);
    setenv("PATH", path, 1);
    assert_int_equal(pyc_pyenv_active(&env, &err), 1);
    assert_string_equal(env.prefix, dir);
    setenv("PATH", "/usr/bin:/bin", 1);
    assert_int_equal(pyc_pyenv_active(&env, &err), 0);
}

/* --python wins over the active environment, --no-env gives none, and the two together are refused. */
static void
test_choose(void **state)
{
    (void)state;
    char active[512], given[512];
    pyc_pyenv_t env;
    pyc_error_t err;
    make_env("chosen-active", "version = 3.11.4\n", active, sizeof active);
    make_env("chosen-given", "version = 3.11.5\n", given, sizeof given);
    unsetenv("CONDA_PREFIX");
    setenv("VIRTUAL_ENV", active, 1);
    assert_int_equal(pyc_pyenv_choose(NULL, false, &env, &err), 1);
    assert_string_equal(env.prefix, active);
    assert_int_equal(pyc_pyenv_choose(given, false, &env, &err), 1);
    assert_string_equal(env.prefix, given);
    assert_int_equal(pyc_pyenv_choose(NULL, true, &env, &err), 0);
    assert_int_equal(pyc_pyenv_choose(given, true, &env, &err), -1);
    assert_non_null(strstr(err.text, "--python and --no-env"));
    assert_int_equal(pyc_pyenv_choose("/nonexistent/x", false, &env, &err), -1);
    unsetenv("VIRTUAL_ENV");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_venv),
        cmocka_unit_test(test_conda_and_refusals),
        cmocka_unit_test(test_active),
        cmocka_unit_test(test_choose),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
