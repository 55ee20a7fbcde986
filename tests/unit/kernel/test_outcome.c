/*
 * test_outcome.c -- cmocka tests for outcome.c: metadata.pyc for every kind of end (README's table of
 * outcomes and states, row by row), and the error of a cell stopped by a limit (in the kernel, isolated,
 * stuck), with its traceback.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guard.h"
#include "outcome.h"

static const char *
str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static void
test_metadata_of_an_ok_cell(void **state)
{
    (void)state;
    pyc_outcome_t o = {.outcome = "ok", .output = {.bytes = 12, .msgs = 2}, .wall = 0.5, .cpu = 0.25};
    json_t *m = pyc_outcome_metadata(&o);
    assert_string_equal(str(m, "outcome"), "ok");
    assert_false(json_is_true(json_object_get(m, "interrupted")));
    assert_false(json_is_true(json_object_get(m, "timed_out")));
    assert_true(json_is_null(json_object_get(m, "limit")));
    assert_false(json_is_true(json_object_get(m, "output_dropped")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "output"), "bytes")), 12);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "output"), "messages")), 2);
    assert_false(json_is_true(json_object_get(m, "memory_cap_hit")));
    assert_string_equal(str(m, "state"), "intact");
    assert_false(json_is_true(json_object_get(m, "kernel_ending")));
    assert_true(json_real_value(json_object_get(m, "wall_time")) == 0.5);
    assert_true(json_real_value(json_object_get(m, "cpu_time")) == 0.25);
    assert_int_equal(json_object_size(m), 11);
    json_decref(m);
}

static void
test_metadata_of_limits_and_losses(void **state)
{
    (void)state;
    pyc_outcome_t o = {.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_DEADLINE,
                       .output = {.dropped_bytes = 1}};
    json_t *m = pyc_outcome_metadata(&o);
    assert_true(json_is_true(json_object_get(m, "timed_out")));
    assert_string_equal(str(m, "limit"), "deadline");
    assert_true(json_is_true(json_object_get(m, "output_dropped")));
    json_decref(m);
    o = (pyc_outcome_t){.outcome = "lifetime", .why = PYC_GUARD_LIFETIME, .lost = true};
    m = pyc_outcome_metadata(&o);
    assert_string_equal(str(m, "limit"), "lifetime");
    assert_string_equal(str(m, "state"), "lost");
    assert_true(json_is_true(json_object_get(m, "kernel_ending")));   /* lost implies ending */
    json_decref(m);
    /* A cell that ended well just before a shutdown: the kernel ends after the reply, its state with it. */
    o = (pyc_outcome_t){.outcome = "ok", .kernel_ending = true, .memory_hit = true};
    m = pyc_outcome_metadata(&o);
    assert_string_equal(str(m, "state"), "lost");
    assert_true(json_is_true(json_object_get(m, "kernel_ending")));
    assert_true(json_is_true(json_object_get(m, "memory_cap_hit")));
    json_decref(m);
}

static void
test_limit_error_in_the_kernel(void **state)
{
    (void)state;
    json_t *tb = json_pack("[s, s, s]", "Traceback (most recent call last):", "  File \"<cell>\", line 1",
                           "KeyboardInterrupt");
    pyc_limit_stop_t s = {.why = PYC_GUARD_DEADLINE, .cell_timeout = 1.5, .grace = 5};
    json_t *e = pyc_outcome_limit_error(&s, tb);
    assert_string_equal(str(e, "ename"), "CellTimeout");
    assert_non_null(strstr(str(e, "evalue"), "ran past its deadline of 1.5 s"));
    assert_non_null(strstr(str(e, "evalue"), "the kernel goes on"));
    json_t *t = json_object_get(e, "traceback");
    /* where the cell was, without the KeyboardInterrupt line, then the limit's own line */
    assert_int_equal(json_array_size(t), 3);
    assert_string_equal(json_string_value(json_array_get(t, 1)), "  File \"<cell>\", line 1");
    assert_int_equal(strncmp(json_string_value(json_array_get(t, 2)), "CellTimeout: the cell ran past", 30), 0);
    json_decref(e);
    json_decref(tb);
}

static void
test_limit_error_isolated_and_stuck(void **state)
{
    (void)state;
    json_t *tb = json_pack("[s]", "KeyboardInterrupt");
    pyc_limit_stop_t s = {.why = PYC_GUARD_DEADLINE, .isolated = true, .cell_timeout = 2, .grace = 5};
    json_t *e = pyc_outcome_limit_error(&s, tb);
    assert_non_null(strstr(str(e, "evalue"), "the isolated cell ran past its deadline of 2 s"));
    assert_non_null(strstr(str(e, "evalue"), "its process was killed"));
    assert_int_equal(json_array_size(json_object_get(e, "traceback")), 1);   /* the child's is not shown */
    json_decref(e);
    s = (pyc_limit_stop_t){.why = PYC_GUARD_LIFETIME, .stuck = true, .lifetime = 60, .grace = 3};
    e = pyc_outcome_limit_error(&s, NULL);
    assert_string_equal(str(e, "ename"), "KernelLifetimeEnded");
    assert_non_null(strstr(str(e, "evalue"), "lifetime of 60 s ended"));
    assert_non_null(strstr(str(e, "evalue"), "did not stop within 3 s"));
    assert_non_null(strstr(str(e, "evalue"), "state is lost"));
    json_decref(e);
    json_decref(tb);
}

/* The CPU limit's error: its own name, the limit in the value, the process it counted; stuck: the state is
 * lost; and its outcome is "timeout", as a deadline's. */
static void
test_limit_error_cpu(void **state)
{
    (void)state;
    json_t *tb = json_pack("[s, s]", "  File \"<cell>\", line 1", "KeyboardInterrupt");
    pyc_limit_stop_t s = {.why = PYC_GUARD_CPU, .cell_cpu = 2.5, .cell_timeout = 60, .grace = 5};
    json_t *e = pyc_outcome_limit_error(&s, tb);
    assert_string_equal(str(e, "ename"), "CellCPUTimeout");
    assert_non_null(strstr(str(e, "evalue"), "the cell ran past its CPU time limit of 2.5 s"));
    assert_non_null(strstr(str(e, "evalue"),
                           "(spent by the kernel's process, every thread of it, the cell's and any other)"));
    assert_non_null(strstr(str(e, "evalue"), "the kernel goes on"));
    json_t *t = json_object_get(e, "traceback");
    assert_int_equal(json_array_size(t), 2);
    assert_int_equal(strncmp(json_string_value(json_array_get(t, 1)), "CellCPUTimeout: the cell ran past", 33), 0);
    json_decref(e);
    s.isolated = true;
    e = pyc_outcome_limit_error(&s, tb);
    assert_non_null(strstr(str(e, "evalue"), "the isolated cell ran past its CPU time limit of 2.5 s"));
    assert_non_null(strstr(str(e, "evalue"), "(spent by its process and the kernel's, every thread of it"));
    assert_non_null(strstr(str(e, "evalue"), "its process was killed"));
    json_decref(e);
    s = (pyc_limit_stop_t){.why = PYC_GUARD_CPU, .stuck = true, .cell_cpu = 1, .grace = 3};
    e = pyc_outcome_limit_error(&s, NULL);
    assert_string_equal(str(e, "ename"), "CellCPUTimeout");
    assert_non_null(strstr(str(e, "evalue"), "did not stop within 3 s"));
    assert_non_null(strstr(str(e, "evalue"), "state is lost"));
    json_decref(e);
    json_decref(tb);
    assert_string_equal(pyc_outcome_of_limit(PYC_GUARD_CPU), "timeout");
    assert_string_equal(pyc_outcome_of_limit(PYC_GUARD_DEADLINE), "timeout");
    assert_string_equal(pyc_outcome_of_limit(PYC_GUARD_LIFETIME), "lifetime");
    assert_string_equal(pyc_outcome_of_limit(PYC_GUARD_MEMORY), "error");
}

static void
test_memory_error_and_clock(void **state)
{
    (void)state;
    json_t *e = json_pack("{s:s}", "ename", "MemoryError");
    assert_true(pyc_outcome_is_memory_error(e));
    json_decref(e);
    e = json_pack("{s:s}", "ename", "ValueError");
    assert_false(pyc_outcome_is_memory_error(e));
    json_decref(e);
    assert_false(pyc_outcome_is_memory_error(NULL));
    pyc_cellclock_t c;
    pyc_cellclock_start(&c);
    usleep(2000);
    double wall, cpu;
    pyc_cellclock_read(&c, &wall, &cpu);
    assert_true(wall >= 0.002 && wall < 5);
    assert_true(cpu >= 0 && cpu <= wall + 0.1);
}

static void
test_fit_error(void **state)
{
    (void)state;
    json_t *tb = json_array();
    for (int i = 0; i < 1000; i++)
        json_array_append_new(tb, json_sprintf("  File \"<cell>\", line %d, in f%d", i, i));
    json_array_append_new(tb, json_string("RecursionError: too deep"));
    json_t *e = json_pack("{s:s, s:s, s:o}", "ename", "RecursionError", "evalue", "too deep", "traceback", tb);
    json_t *same = pyc_outcome_fit_error(e, SIZE_MAX);
    assert_ptr_equal(same, e);                  /* it fits: untouched */
    json_decref(same);
    json_t *cut = pyc_outcome_fit_error(e, 1024);
    char *text = json_dumps(cut, JSON_COMPACT);
    assert_true(strlen(text) <= 1024 + 200);    /* about the budget, with the line that says so */
    free(text);
    json_t *t = json_object_get(cut, "traceback");
    assert_non_null(strstr(json_string_value(json_array_get(t, 0)), "the output limit cut this error"));
    assert_string_equal(json_string_value(json_array_get(t, json_array_size(t) - 1)), "RecursionError: too deep");
    assert_string_equal(str(cut, "ename"), "RecursionError");
    json_decref(cut);
    /* No room at all: still ename, evalue and the note. */
    cut = pyc_outcome_fit_error(e, 0);
    assert_string_equal(str(cut, "ename"), "RecursionError");
    assert_int_equal(json_array_size(json_object_get(cut, "traceback")), 1);
    json_decref(cut);
    json_decref(e);
    /* A huge evalue is cut to 1000 characters. */
    char *big = malloc(100001);
    memset(big, 'v', 100000);
    big[100000] = '\0';
    e = json_pack("{s:s, s:s, s:[s]}", "ename", "ValueError", "evalue", big, "traceback", big);
    cut = pyc_outcome_fit_error(e, 2048);
    assert_true(strlen(str(cut, "evalue")) < 1100);
    text = json_dumps(cut, JSON_COMPACT);
    assert_true(strlen(text) < 4096);
    free(text);
    json_decref(cut);
    json_decref(e);
    free(big);
}

/* The error as published under a cap: never larger than its budget, whatever the error; NULL when not even
 * its name fits. */
static void
test_error_within(void **state)
{
    (void)state;
    char *big = malloc(100001);
    memset(big, '"', 100000);                   /* each one escaped: the JSON is twice as long */
    big[100000] = '\0';
    json_t *e = json_pack("{s:s, s:s, s:[s,s]}", "ename", "ValueError", "evalue", big, "traceback", big, "last");
    for (size_t budget = 0; budget < 3000; budget += 37) {
        json_t *shown = pyc_outcome_error_within(e, budget);
        if (shown == NULL) {
            assert_true(budget < 60);           /* {"ename":"ValueError","evalue":"","traceback":[]} is 50 */
            continue;
        }
        char *text = json_dumps(shown, JSON_COMPACT);
        assert_true(strlen(text) <= budget);
        assert_string_equal(str(shown, "ename"), "ValueError");
        free(text);
        json_decref(shown);
    }
    json_t *same = pyc_outcome_error_within(e, SIZE_MAX);
    assert_string_equal(str(same, "evalue"), big);
    json_decref(same);
    assert_string_equal(str(e, "evalue"), big); /* the error itself is not changed */
    /* UTF-8 is cut on a whole character. */
    json_t *u = json_pack("{s:s, s:s, s:[]}", "ename", "E", "evalue", "\xc3\xa9\xc3\xa9\xc3\xa9", "traceback");
    json_t *shown = pyc_outcome_error_within(u, 43);    /* {"ename":"E","evalue":"","traceback":[]} is 40 */
    assert_non_null(shown);
    assert_string_equal(str(shown, "evalue"), "\xc3\xa9");
    json_decref(shown);
    /* Escapes count: as many quotes as fit, each two bytes of JSON (49 bytes without the value). */
    shown = pyc_outcome_error_within(e, 49 + 20);
    assert_non_null(shown);
    assert_int_equal(strlen(str(shown, "evalue")), 10);
    json_decref(shown);
    json_decref(u);
    json_decref(e);
    free(big);
}

/* README's table of outcomes, row by row: for every way a cell can end, the state and kernel_ending the reply
 * carries.  "intact" means the kernel and its namespace go on after the reply; "lost", that the kernel is
 * ending (cleanly or not), and kernel_ending is true exactly then. */
static void
test_state_of_every_outcome(void **state)
{
    (void)state;
    static const struct {
        pyc_outcome_t o;
        const char *state;
        const char *limit;
        bool timed_out;
    } rows[] = {
        {{.outcome = "ok"}, "intact", NULL, false},
        {{.outcome = "error"}, "intact", NULL, false},
        {{.outcome = "error", .memory_hit = true}, "intact", NULL, false},               /* MemoryError */
        {{.outcome = "error", .why = PYC_GUARD_MEMORY, .memory_hit = true}, "intact", "memory", false},
        {{.outcome = "interrupted", .interrupted = true}, "intact", NULL, false},
        {{.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_DEADLINE}, "intact", "deadline", true},
        {{.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_CPU}, "intact", "cpu", true},
        {{.outcome = "aborted"}, "intact", NULL, false},
        {{.outcome = "bad_request"}, "intact", NULL, false},
        {{.outcome = "died"}, "intact", NULL, false},            /* an isolated cell's process died */
        /* the lifetime ends during a cell: it is stopped, then the kernel shuts down cleanly */
        {{.outcome = "lifetime", .interrupted = true, .why = PYC_GUARD_LIFETIME, .kernel_ending = true}, "lost",
         "lifetime", true},
        /* a cell that did not stop at its deadline or lifetime: the kernel ends at once (exit 3) */
        {{.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_DEADLINE, .lost = true}, "lost", "deadline",
         true},
        {{.outcome = "lifetime", .interrupted = true, .why = PYC_GUARD_LIFETIME, .lost = true}, "lost", "lifetime",
         true},
        {{.outcome = "error", .interrupted = true, .why = PYC_GUARD_MEMORY, .memory_hit = true, .lost = true},
         "lost", "memory", false},
        /* a cell stuck past its CPU time limit: the same */
        {{.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_CPU, .lost = true}, "lost", "cpu", true},
        /* a cell that ended as the kernel was asked to shut down */
        {{.outcome = "ok", .kernel_ending = true}, "lost", NULL, false},
        {{.outcome = "error", .kernel_ending = true}, "lost", NULL, false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *m = pyc_outcome_metadata(&rows[i].o);
        print_message("row %zu: %s\n", i, rows[i].o.outcome);
        assert_string_equal(str(m, "outcome"), rows[i].o.outcome);
        assert_string_equal(str(m, "state"), rows[i].state);
        assert_int_equal(json_is_true(json_object_get(m, "kernel_ending")), strcmp(rows[i].state, "lost") == 0);
        if (rows[i].limit != NULL)
            assert_string_equal(str(m, "limit"), rows[i].limit);
        else
            assert_true(json_is_null(json_object_get(m, "limit")));
        assert_int_equal(json_is_true(json_object_get(m, "timed_out")), rows[i].timed_out);
        assert_int_equal(json_is_true(json_object_get(m, "interrupted")), rows[i].o.interrupted);
        json_decref(m);
    }
}

/* The text form of metadata.pyc next to the object of pyc_outcome_metadata (with extra merged as execute.c
 * merges an isolated cell's): the same members in the same order with the same values and types, times
 * equal to the nanosecond. */
static void
assert_text_matches(const pyc_outcome_t *o, json_t *extra)
{
    json_t *want = pyc_outcome_metadata(o);
    assert_non_null(want);
    if (extra != NULL)
        assert_int_equal(json_object_update(want, extra), 0);
    pyc_buf_t b;
    pyc_buf_init(&b, 4096);
    assert_int_equal(pyc_buf_adds(&b, "x"), 0);   /* it appends */
    assert_int_equal(pyc_outcome_metadata_text(&b, o, extra), 0);
    assert_int_equal(b.data[0], 'x');
    json_error_t jerr;
    json_t *got = json_loads(b.data + 1, 0, &jerr);
    if (got == NULL)
        fail_msg("%s does not parse: %s", b.data + 1, jerr.text);
    static const char *const times[] = {"wall_time", "cpu_time"};
    for (size_t i = 0; i < 2; i++) {
        json_t *g = json_object_get(got, times[i]), *w = json_object_get(want, times[i]);
        assert_true(json_is_real(g));
        double d = json_real_value(g) - json_real_value(w);
        if (!(d <= 0.5e-9 + 1e-15 * json_real_value(w) && -d <= 0.5e-9 + 1e-15 * json_real_value(w)))
            fail_msg("%s: %.17g in the text, %.17g in the object", times[i], json_real_value(g), json_real_value(w));
        json_object_set(got, times[i], w);
    }
    assert_true(json_equal(got, want));
    /* Dumped in the order parsed: equal text means the same order, and the same types (true is no 1). */
    char *gt = json_dumps(got, JSON_COMPACT), *wt = json_dumps(want, JSON_COMPACT);
    assert_string_equal(gt, wt);
    free(gt);
    free(wt);
    json_decref(got);
    json_decref(want);
    pyc_buf_free(&b);
}

static void
test_metadata_text(void **state)
{
    (void)state;
    const pyc_outcome_t rows[] = {
        {.outcome = "ok", .output = {.bytes = 12, .msgs = 2}, .wall = 0.000034567, .cpu = 0.000031},
        {.outcome = "ok", .wall = 0, .cpu = 0},
        {.outcome = "error", .wall = 1.011688964, .cpu = 0.017191282},
        {.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_DEADLINE, .wall = 1.5, .cpu = 1.25,
         .output = {.bytes = 10240, .msgs = 1, .dropped_bytes = 44826, .dropped_msgs = 1}},
        {.outcome = "lifetime", .interrupted = true, .why = PYC_GUARD_LIFETIME, .kernel_ending = true,
         .wall = 3600.000000001, .cpu = 12345.678901234},
        {.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_DEADLINE, .lost = true, .wall = 999999999.5,
         .cpu = 3e-7},
        {.outcome = "interrupted", .interrupted = true, .wall = 0.502985267, .cpu = 0.00137526},
        {.outcome = "error", .interrupted = true, .why = PYC_GUARD_MEMORY, .memory_hit = true, .wall = 2.25,
         .cpu = 1.0 / 3},
        {.outcome = "error", .memory_hit = true, .wall = 0.1, .cpu = 0.2},
        {.outcome = "timeout", .interrupted = true, .why = PYC_GUARD_CPU, .wall = 0.75, .cpu = 0.5},
        {.outcome = "bad_request", .wall = 1e-9, .cpu = 4.9e-10},
        {.outcome = "ok", .output = {.bytes = (size_t)1 << 40, .msgs = 1000000, .dropped_msgs = 7},
         .wall = 0.9999999996, .cpu = 86400},
        {.outcome = "odd \"outcome\"\n\xc3\xa9", .wall = 1, .cpu = 2},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        print_message("row %zu: %s\n", i, rows[i].outcome);
        assert_text_matches(&rows[i], NULL);
    }
    /* An isolated cell's members, merged after the fixed ones as execute.c merges them. */
    json_t *iso = json_pack("{s:s, s:[s, s], s:{s:s}}", "isolated", "fork", "merged", "a", "b", "skipped", "f",
                            "cannot pickle a \"lock\"");
    pyc_outcome_t o = {.outcome = "ok", .output = {.bytes = 3, .msgs = 1}, .wall = 0.0123, .cpu = 0.004};
    assert_text_matches(&o, iso);
    json_t *empty = json_object();
    assert_text_matches(&o, empty);
    json_decref(empty);
    json_decref(iso);
}

/* What the text form cannot say exactly it refuses, leaving the buffer as it was. */
static void
test_metadata_text_refuses(void **state)
{
    (void)state;
    pyc_buf_t b;
    pyc_buf_init(&b, 4096);
    assert_int_equal(pyc_buf_adds(&b, "kept"), 0);
    pyc_outcome_t ok = {.outcome = "ok", .wall = 0.5, .cpu = 0.25};
    json_t *clash = json_pack("{s:s, s:s}", "isolated", "fork", "state", "lost");
    json_t *arr = json_array();
    const struct {
        pyc_outcome_t o;
        json_t *extra;
    } rows[] = {
        {ok, clash},                               /* json_object_update would replace "state" in place */
        {ok, arr},                                 /* not an object */
        {{.outcome = NULL}, NULL},
        {{.outcome = "ok", .wall = -1e-9}, NULL},
        {{.outcome = "ok", .cpu = NAN}, NULL},
        {{.outcome = "ok", .wall = 1e9}, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        print_message("row %zu\n", i);
        assert_int_equal(pyc_outcome_metadata_text(&b, &rows[i].o, rows[i].extra), -1);
        assert_string_equal(b.data, "kept");
        assert_int_equal(b.len, 4);
    }
    /* Past the cap: nothing of it stays. */
    pyc_buf_t small;
    pyc_buf_init(&small, 100);
    assert_int_equal(pyc_buf_adds(&small, "kept"), 0);
    assert_int_equal(pyc_outcome_metadata_text(&small, &ok, NULL), -1);
    assert_string_equal(small.data, "kept");
    pyc_buf_free(&small);
    json_decref(clash);
    json_decref(arr);
    pyc_buf_free(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_of_an_ok_cell),
        cmocka_unit_test(test_metadata_of_limits_and_losses),
        cmocka_unit_test(test_limit_error_in_the_kernel),
        cmocka_unit_test(test_limit_error_isolated_and_stuck),
        cmocka_unit_test(test_limit_error_cpu),
        cmocka_unit_test(test_memory_error_and_clock),
        cmocka_unit_test(test_fit_error),
        cmocka_unit_test(test_error_within),
        cmocka_unit_test(test_state_of_every_outcome),
        cmocka_unit_test(test_metadata_text),
        cmocka_unit_test(test_metadata_text_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
