/*
 * test_limit.c -- cmocka tests for limit.c, the session limits: parsers checked on every unit, on the
 * refusals (negative, NaN, trailing junk, unknown units, overflow), the environment and options, and the rule
 * that a request's metadata can tighten the kernel's limits but never loosen them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limit.h"

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
    /* the head of a cell's output in its event: a size, at most PYC_LIMITS_EVENT_OUTPUT_MAX */
    assert_int_equal(pyc_limits_set(&l, "event-output", "4K", &err), 0);
    assert_int_equal(l.event_output, PYC_LIMITS_EVENT_OUTPUT_MAX);
    assert_int_equal(pyc_limits_set(&l, "event-output", "4097", &err), -1);
    assert_non_null(strstr(err.text, "event-output"));
    assert_int_equal(l.event_output, PYC_LIMITS_EVENT_OUTPUT_MAX);

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
    assert_null(json_object_get(j, "cell_cpu"));
    assert_null(json_object_get(j, "open_files"));
    json_decref(j);
    /* The CPU time and open-file limits: a duration and a count; a count is whole, and at most 2^30. */
    assert_int_equal(pyc_limits_set(&l, "cell-cpu", "1.5", &err), 0);
    assert_int_equal(pyc_limits_set(&l, "open-files", "256", &err), 0);
    assert_true(l.cell_cpu == 1.5);
    assert_int_equal(l.open_files, 256);
    assert_int_equal(pyc_limits_set(&l, "cell-cpu", "-1", &err), -1);
    assert_non_null(strstr(err.text, "cell-cpu"));
    assert_int_equal(pyc_limits_set(&l, "open-files", "1.5", &err), -1);
    assert_int_equal(pyc_limits_set(&l, "open-files", "1K", &err), -1);
    assert_int_equal(pyc_limits_set(&l, "open-files", "-3", &err), -1);
    assert_int_equal(pyc_limits_set(&l, "open-files", "1073741825", &err), -1);
    assert_non_null(strstr(err.text, "open-files"));
    assert_int_equal(pyc_limits_set(&l, "open-files", "1073741824", &err), 0);
    setenv("PYC_CELL_CPU", "250ms", 1);
    setenv("PYC_OPEN_FILES", "64", 1);
    assert_int_equal(pyc_limits_from_env(&l, &err), 0);
    assert_true(l.cell_cpu == 0.25);
    assert_int_equal(l.open_files, 64);
    j = pyc_limits_to_json(&l);
    assert_true(json_real_value(json_object_get(j, "cell_cpu")) == 0.25);
    assert_int_equal(json_integer_value(json_object_get(j, "open_files")), 64);
    assert_non_null(json_object_get(j, "cell_grace"));     /* a CPU limit has the grace of any cell limit */
    json_decref(j);
    setenv("PYC_OPEN_FILES", "lots", 1);
    assert_int_equal(pyc_limits_from_env(&l, &err), -1);
    assert_non_null(strstr(err.text, "PYC_OPEN_FILES"));
    unsetenv("PYC_CELL_CPU");
    unsetenv("PYC_OPEN_FILES");
    l.cell_cpu = 0;
    l.open_files = 0;

    j = pyc_limits_to_json(&l);
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
    /* The CPU time limit tightens the same way. */
    l.cell_cpu = 3;
    md = json_pack("{s:f}", "cpu", 10.0);
    assert_int_equal(pyc_limits_for_cell(&l, md, &c, &err), 0);
    assert_true(c.cpu == 3);
    json_decref(md);
    md = json_pack("{s:f}", "cpu", 0.5);
    assert_int_equal(pyc_limits_for_cell(&l, md, &c, &err), 0);
    assert_true(c.cpu == 0.5);
    json_decref(md);
    md = json_pack("{s:s}", "cpu", "1s");
    assert_int_equal(pyc_limits_for_cell(&l, md, &c, &err), -1);
    assert_non_null(strstr(err.text, "metadata.pyc.cpu"));
    json_decref(md);
    l.cell_cpu = 0;
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seconds),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_set_and_env),
        cmocka_unit_test(test_cell_limits_only_tighten),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
