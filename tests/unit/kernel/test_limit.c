/*
 * test_limit.c -- cmocka tests for the session limits (limit.c), the checkpoint format (checkpoint.c), Jupyter's
 * directories (paths.c) and the /proc readers behind usage_request (usage.c).
 *
 * Parsers are checked on every unit, on the refusals (negative, NaN, trailing junk, unknown units, overflow),
 * and on the rule that a request's metadata can tighten the kernel's limits but never loosen them.  The
 * checkpoint writer and parser are checked together on cells that hold the marker text themselves.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "limit.h"
#include "paths.h"
#include "usage.h"

static void
test_seconds(void **state)
{
    (void)state;
    const struct {
        const char *text;
        double want;
    } ok[] = {{"90", 90}, {"1.5", 1.5}, {"250ms", 0.25}, {"30s", 30}, {"5m", 300}, {"2h", 7200},
              {" 7 s ", 7}, {"0", 0}, {"3min", 180}, {"1e2", 100}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double v = -1;
        pyc_error_t err;
        if (pyc_limits_parse_seconds(ok[i].text, &v, &err) != 0)
            fail_msg("'%s' refused: %s", ok[i].text, err.text);
        assert_true(v > ok[i].want - 1e-9 && v < ok[i].want + 1e-9);
    }
    const char *bad[] = {"", "-1", "nan", "inf", "1x", "5 days", "s", "1s2", "1e300h", "--1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = 42;
        pyc_error_t err = {0, ""};
        if (pyc_limits_parse_seconds(bad[i], &v, &err) == 0)
            fail_msg("'%s' accepted as %g", bad[i], v);
        assert_true(err.text[0] != '\0');
        assert_true(v == 42);
    }
}

static void
test_bytes(void **state)
{
    (void)state;
    const struct {
        const char *text;
        size_t want;
    } ok[] = {{"4096", 4096}, {"512K", 512 << 10}, {"100M", (size_t)100 << 20}, {"2G", (size_t)2 << 30},
              {"1T", (size_t)1 << 40}, {"1.5k", 1536}, {"3MB", (size_t)3 << 20}, {"3MiB", (size_t)3 << 20},
              {"10b", 10}, {" 1 G ", (size_t)1 << 30}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t v = 0;
        pyc_error_t err;
        if (pyc_limits_parse_bytes(ok[i].text, &v, &err) != 0)
            fail_msg("'%s' refused: %s", ok[i].text, err.text);
        assert_int_equal(v, ok[i].want);
    }
    const char *bad[] = {"", "-5", "1Q", "1KK", "1Mx", "nan", "1e30T", "G", "5 M B", "0.5", "0.0001K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 7;
        if (pyc_limits_parse_bytes(bad[i], &v, NULL) == 0)
            fail_msg("'%s' accepted as %zu", bad[i], v);
        assert_int_equal(v, 7);
    }
}

static void
test_set_and_env(void **state)
{
    (void)state;
    pyc_limits_t l;
    pyc_error_t err;
    pyc_limits_init(&l);
    assert_true(l.cell_grace == PYC_LIMITS_DEFAULT_GRACE && l.cell_timeout == 0 && l.memory == 0);
    assert_int_equal(pyc_limits_set(&l, "cell-timeout", "2m", &err), 0);
    assert_true(l.cell_timeout == 120);
    assert_int_equal(pyc_limits_set(&l, "memory-limit", "1G", &err), 0);
    assert_int_equal(l.memory, (size_t)1 << 30);
    assert_int_equal(pyc_limits_set(&l, "no-such-limit", "1", &err), -1);
    assert_non_null(strstr(err.text, "no-such-limit"));
    assert_int_equal(pyc_limits_set(&l, "lifetime", "forever", &err), -1);
    assert_non_null(strstr(err.text, "lifetime"));
    /* a count is a whole number; a grace is more than nothing */
    assert_int_equal(pyc_limits_set(&l, "output-messages", "250", &err), 0);
    assert_int_equal(l.output_messages, 250);
    assert_int_equal(pyc_limits_set(&l, "output-messages", "10K", &err), -1);
    assert_int_equal(pyc_limits_set(&l, "output-messages", "-1", &err), -1);
    assert_int_equal(pyc_limits_set(&l, "cell-grace", "0", &err), -1);
    assert_true(l.cell_grace == PYC_LIMITS_DEFAULT_GRACE);
    assert_int_equal(pyc_limits_set(&l, "cell-grace", "500ms", &err), 0);
    assert_true(l.cell_grace == 0.5);

    setenv("PYC_IDLE_TIMEOUT", "30", 1);
    setenv("PYC_OUTPUT_LIMIT", "1M", 1);
    setenv("PYC_LIFETIME", "", 1);          /* empty counts as unset */
    pyc_limits_init(&l);
    assert_int_equal(pyc_limits_from_env(&l, &err), 0);
    assert_true(l.idle_timeout == 30 && l.lifetime == 0);
    assert_int_equal(l.output_bytes, (size_t)1 << 20);
    setenv("PYC_OUTPUT_MESSAGES", "many", 1);
    assert_int_equal(pyc_limits_from_env(&l, &err), -1);
    assert_non_null(strstr(err.text, "PYC_OUTPUT_MESSAGES"));
    unsetenv("PYC_IDLE_TIMEOUT");
    unsetenv("PYC_OUTPUT_LIMIT");
    unsetenv("PYC_LIFETIME");
    unsetenv("PYC_OUTPUT_MESSAGES");

    json_t *j = pyc_limits_to_json(&l);
    assert_true(json_real_value(json_object_get(j, "idle_timeout")) == 30);
    assert_null(json_object_get(j, "lifetime"));
    assert_int_equal(json_integer_value(json_object_get(j, "output_limit")), 1 << 20);
    json_decref(j);
}

static void
test_cell_limits_only_tighten(void **state)
{
    (void)state;
    pyc_limits_t l;
    pyc_cell_limits_t c;
    pyc_error_t err;
    pyc_limits_init(&l);
    json_t *md = json_pack("{s:f, s:i}", "timeout", 5.0, "output_limit", 100);
    assert_int_equal(pyc_limits_for_cell(&l, md, &c, &err), 0);
    assert_true(c.timeout == 5 && c.output_bytes == 100 && c.output_messages == 0);
    l.cell_timeout = 2;
    l.output_bytes = 1000;
    assert_int_equal(pyc_limits_for_cell(&l, md, &c, &err), 0);
    assert_true(c.timeout == 2);             /* the kernel's 2 s wins over the cell's 5 s */
    assert_int_equal(c.output_bytes, 100);   /* the cell's 100 bytes win over the kernel's 1000 */
    json_decref(md);
    md = json_pack("{s:i}", "timeout", 0);   /* 0 asks for no deadline: the kernel's stays */
    assert_int_equal(pyc_limits_for_cell(&l, md, &c, &err), 0);
    assert_true(c.timeout == 2);
    json_decref(md);
    assert_int_equal(pyc_limits_for_cell(&l, NULL, &c, &err), 0);
    assert_true(c.timeout == 2 && c.output_bytes == 1000);
    const char *bad[] = {"{\"timeout\": \"5\"}", "{\"timeout\": -1}", "{\"output_limit\": true}", "[1]",
                         "{\"output_messages\": 1e30}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        md = json_loads(bad[i], 0, NULL);
        assert_non_null(md);
        err.text[0] = '\0';
        if (pyc_limits_for_cell(&l, md, &c, &err) == 0)
            fail_msg("metadata %s accepted", bad[i]);
        assert_true(err.text[0] != '\0');
        json_decref(md);
    }
}

static char tmpdir[] = "/tmp/pyc-test-limit-XXXXXX";

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
    (void)state;
    char dir[256];
    pyc_error_t err;
    assert_non_null(mkdtemp(tmpdir));
    snprintf(dir, sizeof dir, "%s/a/b", tmpdir);
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

static void
test_paths(void **state)
{
    (void)state;
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
    snprintf(dir, sizeof dir, "%s/a/b/kernel-1_.._x.py/sub", tmpdir);
    assert_int_equal(pyc_mkdirs(dir, 0700), -1);         /* a file in the way */
}

static void
test_usage(void **state)
{
    (void)state;
    pyc_usage_state_t st = {0};
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    json_t *r = pyc_usage_report(getpid(), &st);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "pid")), getpid());
    assert_true(json_integer_value(json_object_get(r, "kernel_memory")) > 0);
    assert_true(json_integer_value(json_object_get(json_object_get(r, "pyc"), "processes")) >= 2);
    json_t *hv = json_object_get(r, "host_virtual_memory");
    assert_true(json_integer_value(json_object_get(hv, "total")) > json_integer_value(json_object_get(hv, "free")));
    assert_true(json_real_value(json_object_get(r, "kernel_cpu")) >= 0);
    json_decref(r);
    assert_true(st.when > 0);
    r = pyc_usage_report(getpid(), &st);      /* the second: a percentage since the first */
    assert_non_null(r);
    json_decref(r);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seconds),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_set_and_env),
        cmocka_unit_test(test_cell_limits_only_tighten),
        cmocka_unit_test(test_checkpoint_round_trip),
        cmocka_unit_test(test_checkpoint_refusals),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_usage),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (tmpdir[strlen(tmpdir) - 1] != 'X') {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            rc = rc != 0 ? rc : 1;
    }
    return rc;
}
