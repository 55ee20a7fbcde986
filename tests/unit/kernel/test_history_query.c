/*
 * test_history_query.c -- cmocka tests for history_query.c: history_request (tail, range, search, the
 * shapes of its entries, bad requests) and the bound of its reply.
 *
 * Replies are compared whole with json_equal against the JSON text the test expects, so a wrong shape
 * ([session, line, source] against [session, line, [source, output]]) or order fails as surely as a wrong
 * value.  Files go into a fresh mkdtemp directory per test, removed by the teardown even when the test fails.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "history.h"
#include "history_util.h"
#include "unit_util.h"

/* ---- tests -------------------------------------------------------------------------------------------- */

static void
test_tail(void **state)
{
    char path[PATH_MAX];
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *h = open_ok(path);
    for (int i = 1; i <= 3; i++) {
        char src[32];
        snprintf(src, sizeof src, "s1_%d", i);
        add_ok(h, i, src, NULL);
    }
    pyc_history_close(&h);
    h = open_ok(path);
    add_ok(h, 1, "s2_1", NULL);
    add_ok(h, 2, "s2_2", NULL);

    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 3}",
                   "[[1, 3, \"s1_3\"], [2, 1, \"s2_1\"], [2, 2, \"s2_2\"]]");
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 1}", "[[2, 2, \"s2_2\"]]");
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 0}", "[]");
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 100}",
                   "[[1, 1, \"s1_1\"], [1, 2, \"s1_2\"], [1, 3, \"s1_3\"], [2, 1, \"s2_1\"], [2, 2, \"s2_2\"]]");

    /* A second kernel on the same file gets session 3, sees session 2's cells at once (they are committed),
     * and each kernel's tail counts its own session as the latest, as IPython's get_tail does. */
    pyc_history_t *other = open_ok(path);
    assert_int_equal(pyc_history_session(other), 3);
    add_ok(other, 1, "s3_1", NULL);
    expect_history(other, "{\"hist_access_type\": \"tail\", \"n\": 3}",
                   "[[2, 1, \"s2_1\"], [2, 2, \"s2_2\"], [3, 1, \"s3_1\"]]");
    add_ok(h, 3, "s2_3", NULL);
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 4}",
                   "[[3, 1, \"s3_1\"], [2, 1, \"s2_1\"], [2, 2, \"s2_2\"], [2, 3, \"s2_3\"]]");
    pyc_history_close(&other);
    pyc_history_close(&h);
}

/* A reply holds at most PYC_HISTORY_REPLY_MAX entries (10000 by default) and about 16 MiB of text: the newest
 * for tail and search, the first of a range, with "pyc": {"truncated": true, ...}; a reply within them has no
 * "pyc". */
static void
expect_truncated(pyc_history_t *h, const char *request, const char *history, json_int_t max_entries)
{
    json_t *req = parse(request);
    json_t *reply = pyc_history_request(h, req);
    json_t *want = json_pack("{s:s, s:o, s:{s:b, s:I, s:I}}", "status", "ok", "history", parse(history), "pyc",
                             "truncated", 1, "max_entries", max_entries, "max_bytes",
                             (json_int_t)PYC_HISTORY_REPLY_BYTES);
    if (!json_equal(reply, want)) {
        char *got = json_dumps(reply, JSON_COMPACT);
        fail_msg("request %s: got %s", request, got);
    }
    json_decref(req);
    json_decref(reply);
    json_decref(want);
}

static void
test_reply_bound(void **state)
{
    (void)state;
    pyc_history_t *h = open_ok(":memory:");
    for (int i = 1; i <= 5; i++) {
        char src[32];
        snprintf(src, sizeof src, "s%d", i);
        add_ok(h, i, src, NULL);
    }
    setenv("PYC_HISTORY_REPLY_MAX", "2", 1);
    expect_truncated(h, "{\"hist_access_type\": \"tail\", \"n\": 1000000000}", "[[1, 4, \"s4\"], [1, 5, \"s5\"]]", 2);
    expect_truncated(h, "{\"hist_access_type\": \"search\", \"pattern\": \"s*\"}", "[[1, 4, \"s4\"], [1, 5, \"s5\"]]",
                     2);
    expect_truncated(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 1}",
                     "[[1, 1, \"s1\"], [1, 2, \"s2\"]]", 2);
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 2}", "[[1, 4, \"s4\"], [1, 5, \"s5\"]]");
    /* About 16 MiB of text: two cells of 9 MiB, the second one past the bound. */
    unsetenv("PYC_HISTORY_REPLY_MAX");
    size_t big = (size_t)9 << 20;
    char *src = malloc(big + 1);
    assert_non_null(src);
    memset(src, 'x', big);
    src[big] = '\0';
    add_ok(h, 6, src, NULL);
    add_ok(h, 7, src, NULL);
    free(src);
    json_t *req = parse("{\"hist_access_type\": \"tail\", \"n\": 7}");
    json_t *reply = pyc_history_request(h, req);
    json_t *hist = json_object_get(reply, "history");
    assert_int_equal(json_array_size(hist), 1);
    assert_int_equal(json_integer_value(json_array_get(json_array_get(hist, 0), 1)), 7);
    assert_true(json_is_true(json_object_get(json_object_get(reply, "pyc"), "truncated")));
    json_decref(req);
    json_decref(reply);
    pyc_history_close(&h);
}

static void
test_range(void **state)
{
    char path[PATH_MAX];
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *h = open_ok(path);
    add_ok(h, 1, "p1", NULL);
    add_ok(h, 2, "p2", NULL);
    pyc_history_close(&h);
    h = open_ok(path);
    for (int i = 1; i <= 5; i++) {
        char src[32];
        snprintf(src, sizeof src, "c%d", i);
        add_ok(h, i, src, NULL);
    }
    const char *all = "[[2, 1, \"c1\"], [2, 2, \"c2\"], [2, 3, \"c3\"], [2, 4, \"c4\"], [2, 5, \"c5\"]]";
    /* The current session: session 0 or absent, with its real number in the entries. */
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 1, \"stop\": null}", all);
    expect_history(h, "{\"hist_access_type\": \"range\"}", all);
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 0, \"stop\": 0}", all);
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 2, \"start\": 1}", all);
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 2, \"stop\": 4}",
                   "[[2, 2, \"c2\"], [2, 3, \"c3\"]]");
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 4, \"stop\": 100}",
                   "[[2, 4, \"c4\"], [2, 5, \"c5\"]]");
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 3, \"stop\": 3}", "[]");
    /* Negative start and stop count back from the end, like Python slices (IPython's current session). */
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": -2}",
                   "[[2, 4, \"c4\"], [2, 5, \"c5\"]]");
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 1, \"stop\": -3}",
                   "[[2, 1, \"c1\"], [2, 2, \"c2\"]]");
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 1, \"stop\": -6}", "[]");
    /* The previous session, relative and absolute. */
    const char *prev = "[[1, 1, \"p1\"], [1, 2, \"p2\"]]";
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": -1, \"start\": 1}", prev);
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 1, \"start\": 0, \"stop\": null}", prev);
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": -1, \"start\": 2, \"stop\": 3}",
                   "[[1, 2, \"p2\"]]");
    /* Sessions that do not exist are empty, not errors. */
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": -5}", "[]");
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 99}", "[]");
    pyc_history_close(&h);
}

static void
test_search(void **state)
{
    char path[PATH_MAX];
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *h = open_ok(path);
    add_ok(h, 1, "import os", NULL);
    add_ok(h, 2, "print(1)", NULL);
    add_ok(h, 3, "import sys", NULL);
    pyc_history_close(&h);
    h = open_ok(path);
    add_ok(h, 1, "print(1)", NULL);
    add_ok(h, 2, "Import x", NULL);
    add_ok(h, 3, "import os", NULL);
    add_ok(h, 4, "x = [1]", NULL);

    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"import*\"}",
                   "[[1, 1, \"import os\"], [1, 3, \"import sys\"], [2, 3, \"import os\"]]");
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"print(?)\", \"n\": null}",
                   "[[1, 2, \"print(1)\"], [2, 1, \"print(1)\"]]");
    /* GLOB matches the whole text, is case-sensitive and knows character classes. */
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"import\"}", "[]");
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"[Ii]mport x\"}", "[[2, 2, \"Import x\"]]");
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"*[[]1]\"}", "[[2, 4, \"x = [1]\"]]");
    /* n: the last n matches, in ascending order. */
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"import*\", \"n\": 2}",
                   "[[1, 3, \"import sys\"], [2, 3, \"import os\"]]");
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"*\", \"n\": 0}", "[]");
    /* unique keeps the latest of equal sources; n applies after it. */
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"*\", \"unique\": true}",
                   "[[1, 3, \"import sys\"], [2, 1, \"print(1)\"], [2, 2, \"Import x\"], [2, 3, \"import os\"],"
                   " [2, 4, \"x = [1]\"]]");
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"i*\", \"unique\": true, \"n\": 1}",
                   "[[2, 3, \"import os\"]]");
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"i*\", \"unique\": false, \"n\": 1}",
                   "[[2, 3, \"import os\"]]");
    expect_history(h, "{\"hist_access_type\": \"search\", \"pattern\": \"*o*\", \"unique\": true, \"n\": 3,"
                      " \"output\": true}",
                   "[[1, 3, [\"import sys\", null]], [2, 2, [\"Import x\", null]], [2, 3, [\"import os\", null]]]");
    pyc_history_close(&h);
}

static void
test_output_shapes(void **state)
{
    (void)state;
    pyc_history_t *h = open_ok(":memory:");
    add_ok(h, 1, "1 + 1", "2");
    add_ok(h, 2, "print('hi')", NULL);
    add_ok(h, 3, "'\xc3\xa9t\xc3\xa9'\n", "'\xc3\xa9t\xc3\xa9'");
    expect_history(h, "{\"hist_access_type\": \"range\", \"output\": false, \"raw\": true}",
                   "[[1, 1, \"1 + 1\"], [1, 2, \"print('hi')\"], [1, 3, \"'\xc3\xa9t\xc3\xa9'\"]]");
    expect_history(h, "{\"hist_access_type\": \"range\", \"output\": true, \"raw\": false}",
                   "[[1, 1, [\"1 + 1\", \"2\"]], [1, 2, [\"print('hi')\", null]],"
                   " [1, 3, [\"'\xc3\xa9t\xc3\xa9'\", \"'\xc3\xa9t\xc3\xa9'\"]]]");
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 1, \"output\": true, \"raw\": null}",
                   "[[1, 3, [\"'\xc3\xa9t\xc3\xa9'\", \"'\xc3\xa9t\xc3\xa9'\"]]]");
    /* The whole reply, members included. */
    json_t *req = parse("{\"hist_access_type\": \"tail\", \"n\": 1, \"output\": true}");
    json_t *reply = pyc_history_request(h, req);
    char *text = json_dumps(reply, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text,
                        "{\"history\":[[1,3,[\"'\xc3\xa9t\xc3\xa9'\",\"'\xc3\xa9t\xc3\xa9'\"]]],\"status\":\"ok\"}");
    free(text);
    json_decref(reply);
    json_decref(req);
    pyc_history_close(&h);
}

static void
test_bad_requests(void **state)
{
    (void)state;
    pyc_history_t *h = open_ok(":memory:");
    static const struct {
        const char *request, *ename, *contains;
    } cases[] = {
        { "[]", "TypeError", "not an object" },
        { "{}", "TypeError", "\"hist_access_type\" is required" },
        { "{\"hist_access_type\": 3}", "TypeError", "\"hist_access_type\" is required" },
        { "{\"hist_access_type\": \"head\", \"n\": 3}", "ValueError", "unknown hist_access_type \"head\"" },
        { "{\"hist_access_type\": \"\"}", "ValueError", "unknown hist_access_type" },
        { "{\"hist_access_type\": \"tail\"}", "TypeError", "\"n\" is required" },
        { "{\"hist_access_type\": \"tail\", \"n\": null}", "TypeError", "\"n\" is required" },
        { "{\"hist_access_type\": \"tail\", \"n\": -1}", "ValueError", "\"n\" must be at least 0" },
        { "{\"hist_access_type\": \"tail\", \"n\": 2.5}", "TypeError", "\"n\" must be an integer" },
        { "{\"hist_access_type\": \"tail\", \"n\": \"10\"}", "TypeError", "\"n\" must be an integer" },
        { "{\"hist_access_type\": \"tail\", \"n\": true}", "TypeError", "\"n\" must be an integer" },
        { "{\"hist_access_type\": \"tail\", \"n\": 1, \"output\": \"yes\"}", "TypeError",
          "\"output\" must be a boolean" },
        { "{\"hist_access_type\": \"tail\", \"n\": 1, \"raw\": 1}", "TypeError", "\"raw\" must be a boolean" },
        { "{\"hist_access_type\": \"range\", \"session\": \"0\"}", "TypeError", "\"session\" must be an integer" },
        { "{\"hist_access_type\": \"range\", \"start\": 1.0}", "TypeError", "\"start\" must be an integer" },
        { "{\"hist_access_type\": \"range\", \"stop\": []}", "TypeError", "\"stop\" must be an integer" },
        { "{\"hist_access_type\": \"search\"}", "TypeError", "needs a string \"pattern\"" },
        { "{\"hist_access_type\": \"search\", \"pattern\": null}", "TypeError", "needs a string \"pattern\"" },
        { "{\"hist_access_type\": \"search\", \"pattern\": 7}", "TypeError", "needs a string \"pattern\"" },
        { "{\"hist_access_type\": \"search\", \"pattern\": \"*\", \"n\": -3}", "ValueError", "at least 0" },
        { "{\"hist_access_type\": \"search\", \"pattern\": \"*\", \"n\": \"all\"}", "TypeError", "integer" },
        { "{\"hist_access_type\": \"search\", \"pattern\": \"*\", \"unique\": 1}", "TypeError",
          "\"unique\" must be a boolean" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(h, cases[i].request, cases[i].ename, cases[i].contains);

    /* A long or odd access type is not echoed in full. */
    char longreq[256];
    snprintf(longreq, sizeof longreq, "{\"hist_access_type\": \"%0100d\"}", 0);
    expect_error(h, longreq, "ValueError", "unknown hist_access_type (expected");
    expect_error(h, "{\"hist_access_type\": \"a\\u0000b\"}", "ValueError", "unknown hist_access_type (expected");

    /* Without a history (the kernel could not open it), requests are checked and answered empty. */
    expect_history(NULL, "{\"hist_access_type\": \"tail\", \"n\": 10}", "[]");
    expect_error(NULL, "{\"hist_access_type\": \"tail\"}", "TypeError", "\"n\" is required");
    pyc_history_close(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tail, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_range, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_reply_bound),
        cmocka_unit_test_setup_teardown(test_search, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_output_shapes),
        cmocka_unit_test(test_bad_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
