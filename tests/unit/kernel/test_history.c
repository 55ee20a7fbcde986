/*
 * test_history.c -- cmocka tests for history.c: sessions, recording, history_request and the default path.
 *
 * Replies are compared whole with json_equal against the JSON text the test expects, so a wrong shape
 * ([session, line, source] against [session, line, [source, output]]) or order fails as surely as a wrong
 * value.  Files go into a fresh mkdtemp directory per test, removed by the teardown even when the test fails.
 * The timing test records 10,000 cells in a real file and prints the cost of one; it checks the journal mode
 * rather than the time, which depends on the machine (and on valgrind).
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
#include "unit_util.h"

/* ---- helpers ------------------------------------------------------------------------------------------ */

/* Writes "a/b" into out (PATH_MAX bytes), failing the test when it does not fit. */
static void
join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", a, b);
    assert_true(n > 0 && n < PATH_MAX);
}

/* Opens path, failing the test with the error sentence when it cannot. */
static pyc_history_t *
open_ok(const char *path)
{
    pyc_error_t err = {0, ""};
    pyc_history_t *h = pyc_history_open(path, &err);
    if (h == NULL)
        fail_msg("cannot open %s: %s", path, err.text);
    return h;
}

static void
add_ok(pyc_history_t *h, int line, const char *source, const char *output)
{
    pyc_error_t err = {0, ""};
    if (pyc_history_add(h, line, source, output, &err) != 0)
        fail_msg("add %d failed: %s", line, err.text);
}

static json_t *
parse(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (j == NULL)
        fail_msg("test JSON does not parse: %s: %s", jerr.text, text);
    return j;
}

/* Sends request (JSON text) and checks that the reply is exactly {"status": "ok", "history": <history>}. */
static void
expect_history(pyc_history_t *h, const char *request, const char *history)
{
    json_t *req = parse(request);
    json_t *reply = pyc_history_request(h, req);
    assert_non_null(reply);
    json_t *want = json_pack("{s:s, s:o}", "status", "ok", "history", parse(history));
    if (!json_equal(reply, want)) {
        char *got = json_dumps(reply, JSON_COMPACT), *exp = json_dumps(want, JSON_COMPACT);
        print_error("request %s\n  got  %s\n  want %s\n", request, got, exp);
        free(got);
        free(exp);
        json_decref(req);
        json_decref(reply);
        json_decref(want);
        fail();
    }
    json_decref(req);
    json_decref(reply);
    json_decref(want);
}

/* Sends request and checks that the reply is an error with that ename whose evalue contains `contains`. */
static void
expect_error(pyc_history_t *h, const char *request, const char *ename, const char *contains)
{
    json_t *req = parse(request);
    json_t *reply = pyc_history_request(h, req);
    assert_non_null(reply);
    const char *status = NULL, *en = NULL, *ev = NULL;
    json_t *tb = NULL;
    if (json_unpack(reply, "{s:s, s:s, s:s, s:o}", "status", &status, "ename", &en, "evalue", &ev, "traceback",
                    &tb) != 0 ||
        strcmp(status, "error") != 0 || !json_is_array(tb) || json_array_size(tb) != 0 ||
        json_object_size(reply) != 4) {
        char *got = json_dumps(reply, JSON_COMPACT);
        print_error("request %s: not an error reply: %s\n", request, got);
        free(got);
        fail();
    }
    if (strcmp(en, ename) != 0 || strstr(ev, contains) == NULL)
        fail_msg("request %s: got %s [%s], want %s containing [%s]", request, en, ev, ename, contains);
    json_decref(req);
    json_decref(reply);
}

/* ---- tests -------------------------------------------------------------------------------------------- */

static void
test_memory(void **state)
{
    (void)state;
    pyc_history_t *h = open_ok(":memory:");
    assert_int_equal(pyc_history_session(h), 1);
    add_ok(h, 1, "x = 1\n\n", NULL);
    add_ok(h, 2, "x", "1");
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 10, \"raw\": true, \"output\": false}",
                   "[[1, 1, \"x = 1\"], [1, 2, \"x\"]]");
    pyc_history_close(&h);
    assert_null(h);
    pyc_history_close(&h);
    pyc_history_close(NULL);
    assert_int_equal(pyc_history_session(NULL), 0);
}

static void
test_sessions_across_reopen(void **state)
{
    char path[PATH_MAX], dir[PATH_MAX];
    struct stat st;
    join(dir, (char *)*state, "a/b");
    join(path, dir, "history.sqlite");

    pyc_history_t *h = open_ok(path);
    assert_int_equal(pyc_history_session(h), 1);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    add_ok(h, 1, "a = 1", NULL);
    add_ok(h, 2, "a + 1", "2");
    pyc_history_close(&h);

    h = open_ok(path);
    assert_int_equal(pyc_history_session(h), 2);
    add_ok(h, 1, "b = 2", NULL);
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 10, \"output\": true}",
                   "[[1, 1, [\"a = 1\", null]], [1, 2, [\"a + 1\", \"2\"]], [2, 1, [\"b = 2\", null]]]");
    pyc_history_close(&h);

    h = open_ok(path);
    assert_int_equal(pyc_history_session(h), 3);
    pyc_history_close(&h);

    /* The sessions table, as IPython reads it: the end mark and the number of cells written at close. */
    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT session, num_cmds, end IS NOT NULL, start IS NOT NULL"
                                            " FROM sessions ORDER BY session",
                                        -1, &q, NULL),
                     SQLITE_OK);
    int want[3][2] = { { 1, 2 }, { 2, 1 }, { 3, 0 } };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(q, 0), want[i][0]);
        assert_int_equal(sqlite3_column_int(q, 1), want[i][1]);
        assert_int_equal(sqlite3_column_int(q, 2), 1);
        assert_int_equal(sqlite3_column_int(q, 3), 1);
    }
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* A kernel restored from a snapshot writes on the session of the kernel it replaced (time travel): the
 * session it opened goes, and the lines go on. */
static void
test_continue_session(void **state)
{
    char path[PATH_MAX];
    pyc_error_t err;
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *a = open_ok(path);
    add_ok(a, 1, "x = 1", NULL);
    add_ok(a, 2, "x = 2", NULL);
    pyc_history_t *b = open_ok(path);
    assert_int_equal(pyc_history_session(b), 2);
    assert_int_equal(pyc_history_continue(b, 1, &err), 0);
    assert_int_equal(pyc_history_session(b), 1);
    pyc_history_close(&a);
    add_ok(b, 3, "y = 3", NULL);
    expect_history(b,
                   "{\"hist_access_type\": \"range\", \"session\": 0, \"start\": 1, \"stop\": 10, \"output\": false}",
                   "[[1, 1, \"x = 1\"], [1, 2, \"x = 2\"], [1, 3, \"y = 3\"]]");
    pyc_history_close(&b);
    /* the session that b opened is gone (AUTOINCREMENT does not give its number again) */
    pyc_history_t *c = open_ok(path);
    assert_true(pyc_history_session(c) >= 2);
    pyc_history_close(&c);
}

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
test_set_output(void **state)
{
    (void)state;
    pyc_error_t err = {0, ""};
    pyc_history_t *h = open_ok(":memory:");
    add_ok(h, 1, "x", NULL);
    add_ok(h, 2, "y", "first");
    assert_int_equal(pyc_history_set_output(h, 1, "42", &err), 0);
    assert_int_equal(pyc_history_set_output(h, 2, "second", &err), 0);
    const char *req = "{\"hist_access_type\": \"range\", \"output\": true}";
    expect_history(h, req, "[[1, 1, [\"x\", \"42\"]], [1, 2, [\"y\", \"second\"]]]");
    assert_int_equal(pyc_history_set_output(h, 1, NULL, &err), 0);
    assert_int_equal(pyc_history_set_output(h, 1, NULL, &err), 0);
    expect_history(h, req, "[[1, 1, [\"x\", null]], [1, 2, [\"y\", \"second\"]]]");

    /* A line that was never added, and a line added twice. */
    assert_int_equal(pyc_history_set_output(h, 7, "out", &err), -1);
    assert_non_null(strstr(err.text, "line 7 of session 1 was never recorded"));
    err.text[0] = '\0';
    assert_int_equal(pyc_history_set_output(h, 7, NULL, &err), -1);
    assert_non_null(strstr(err.text, "line 7 of session 1 was never recorded"));
    assert_int_equal(pyc_history_add(h, 2, "z", NULL, &err), -1);
    assert_non_null(strstr(err.text, "line 2 of session 1 is already recorded"));
    assert_int_equal(pyc_history_add(h, 2, "z", "out", &err), -1);
    assert_non_null(strstr(err.text, "line 2 of session 1 is already recorded"));
    assert_int_equal(pyc_history_add(h, 2, "z", NULL, NULL), -1);
    /* The failed adds changed nothing, and the history still takes writes. */
    expect_history(h, req, "[[1, 1, [\"x\", null]], [1, 2, [\"y\", \"second\"]]]");
    add_ok(h, 3, "", "");
    expect_history(h, "{\"hist_access_type\": \"range\", \"start\": 3, \"output\": true}", "[[1, 3, [\"\", \"\"]]]");
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

static void
test_open_failures(void **state)
{
    char path[PATH_MAX], file[PATH_MAX];
    pyc_error_t err = {0, ""};
    join(file, (char *)*state, "plain");
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("this is not a database, it is a text file of some length to fill the header. 0123456789abcdef\n", f);
    fclose(f);

    /* A parent that is a file, directly and further up. */
    join(path, file, "history.sqlite");
    assert_null(pyc_history_open(path, &err));
    assert_non_null(strstr(err.text, "cannot create directory"));
    assert_non_null(strstr(err.text, file));
    assert_non_null(strstr(err.text, "Not a directory"));
    join(path, file, "sub/dir/history.sqlite");
    assert_null(pyc_history_open(path, &err));
    assert_non_null(strstr(err.text, "cannot create directory"));
    assert_non_null(strstr(err.text, "Not a directory"));

    /* A file that is not a database is left alone. */
    assert_null(pyc_history_open(file, &err));
    assert_non_null(strstr(err.text, file));
    assert_non_null(strstr(err.text, "not a database"));

    assert_null(pyc_history_open("", &err));
    assert_non_null(strstr(err.text, "empty"));
    assert_null(pyc_history_open(NULL, NULL));
    assert_null(pyc_history_open("/proc/pyc-no-such-dir/history.sqlite", &err));
    assert_non_null(strstr(err.text, "/proc/pyc-no-such-dir"));

    /* A directory without write permission; root writes anywhere, so only other users can test it. */
    if (geteuid() != 0) {
        char ro[PATH_MAX];
        join(ro, (char *)*state, "ro");
        assert_int_equal(mkdir(ro, 0500), 0);
        join(path, ro, "history.sqlite");
        assert_null(pyc_history_open(path, &err));
        assert_non_null(strstr(err.text, "Permission denied"));
    } else {
        print_message("running as root: the read-only directory case is skipped\n");
    }
}

static void
test_bad_utf8_in_file(void **state)
{
    char path[PATH_MAX];
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *h = open_ok(path);
    /* Another program wrote bytes that are not UTF-8: they come back as U+FFFD, the rest intact. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 2000);
    static const char insert[] =
        "INSERT INTO history VALUES (1, 1, CAST(X'61FF62C3' AS TEXT), CAST(X'61FF62C3' AS TEXT));"
        "INSERT INTO history VALUES (1, 2, CAST(X'E282AC00F0' AS TEXT), 'ok');"
        "INSERT INTO history VALUES (1, 3, NULL, NULL);";
    assert_int_equal(sqlite3_exec(db, insert, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    expect_history(h, "{\"hist_access_type\": \"range\", \"raw\": false}",
                   "[[1, 1, \"a\xef\xbf\xbd" "b\xef\xbf\xbd\"], [1, 2, \"\xe2\x82\xac\\u0000\xef\xbf\xbd\"],"
                   " [1, 3, \"\"]]");
    /* "raw" chooses the column: source_raw of line 2 is plain text. */
    expect_history(h, "{\"hist_access_type\": \"range\", \"raw\": true, \"start\": 2}",
                   "[[1, 2, \"ok\"], [1, 3, \"\"]]");
    pyc_history_close(&h);
}

/* Sets or unsets an environment variable. */
static void
set_env(const char *name, const char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void
test_default_path(void **state)
{
    (void)state;
    static const char *const names[] = { "PYC_HISTORY_FILE", "JUPYTER_DATA_DIR", "XDG_DATA_HOME", "HOME" };
    char *saved[4];
    char out[PATH_MAX];
    for (int i = 0; i < 4; i++)
        saved[i] = getenv(names[i]) != NULL ? strdup(getenv(names[i])) : NULL;

    static const struct {
        const char *env[4]; /* in the order of names */
        const char *want;
    } cases[] = {
        { { "/x/h.db", "/jd", "/xdg", "/home/u" }, "/x/h.db" },
        { { NULL, "/jd", "/xdg", "/home/u" }, "/jd/pyc/history.sqlite" },
        { { "", "/jd", "/xdg", "/home/u" }, "/jd/pyc/history.sqlite" },
        { { NULL, NULL, "/xdg", "/home/u" }, "/xdg/jupyter/pyc/history.sqlite" },
        { { NULL, "", "/xdg", "/home/u" }, "/xdg/jupyter/pyc/history.sqlite" },
        { { NULL, NULL, NULL, "/home/u" }, "/home/u/.local/share/jupyter/pyc/history.sqlite" },
        { { NULL, NULL, "", "/home/u" }, "/home/u/.local/share/jupyter/pyc/history.sqlite" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int i = 0; i < 4; i++)
            set_env(names[i], cases[c].env[i]);
        assert_int_equal(pyc_history_default_path(out, sizeof out), 0);
        assert_string_equal(out, cases[c].want);
    }
    /* Without HOME the password database gives the home directory (it may have none, in a container). */
    for (int i = 0; i < 4; i++)
        set_env(names[i], NULL);
    if (pyc_history_default_path(out, sizeof out) == 0)
        assert_non_null(strstr(out, "/.local/share/jupyter/pyc/history.sqlite"));
    /* Too small a buffer. */
    set_env("JUPYTER_DATA_DIR", "/jd");
    assert_int_equal(pyc_history_default_path(out, 10), -1);
    assert_string_equal(out, "");
    assert_int_equal(pyc_history_default_path(out, strlen("/jd/pyc/history.sqlite")), -1);
    assert_int_equal(pyc_history_default_path(out, strlen("/jd/pyc/history.sqlite") + 1), 0);

    for (int i = 0; i < 4; i++) {
        set_env(names[i], saved[i]);
        free(saved[i]);
    }
}

static double
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Cells are queued without touching the file and written when flushed; a flush waits for another kernel's
 * lock only as long as it is told, keeps the cells queued when the file stays locked, and holds no lock
 * afterwards (a second kernel can write at once). */
static void
test_queue_and_flush_under_a_lock(void **state)
{
    char path[PATH_MAX];
    pyc_error_t err;
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *h = open_ok(path);
    sqlite3 *other = NULL;
    assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);

    /* Another kernel holds the write lock (a long transaction, the way pyc's batches once did). */
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(pyc_history_queue(h, 1, "a = 1\n\n", &err), 0);   /* no database work: no wait */
    assert_int_equal(pyc_history_queue(h, 2, "b = 2", &err), 0);
    assert_int_equal(pyc_history_pending(h), 2);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pyc_history_flush(h, 5, &err), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_int_equal(err.code, PYC_ETIMEDOUT);
    assert_non_null(strstr(err.text, "2 cells wait"));
    assert_true(waited < 0.5);                       /* a few ms asked; generous for a loaded machine */
    assert_int_equal(pyc_history_pending(h), 2);     /* kept, not lost */
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);

    assert_int_equal(pyc_history_flush(h, 5, &err), 0);
    assert_int_equal(pyc_history_pending(h), 0);
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": 0}",
                   "[[1, 1, \"a = 1\"], [1, 2, \"b = 2\"]]");
    /* No transaction is left open: the other connection writes at once. */
    sqlite3_busy_timeout(other, 0);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    /* A line queued twice is dropped with an error, and the rest is written. */
    assert_int_equal(pyc_history_queue(h, 2, "again", &err), 0);
    assert_int_equal(pyc_history_queue(h, 3, "c", &err), 0);
    assert_int_equal(pyc_history_flush(h, 5, &err), -1);
    assert_non_null(strstr(err.text, "already recorded"));
    assert_int_equal(pyc_history_pending(h), 0);
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 1}", "[[1, 3, \"c\"]]");
    /* Closing flushes what waits. */
    assert_int_equal(pyc_history_queue(h, 4, "d", &err), 0);
    pyc_history_close(&h);
    h = open_ok(path);
    expect_history(h, "{\"hist_access_type\": \"range\", \"session\": -1, \"start\": 4}", "[[1, 4, \"d\"]]");
    pyc_history_close(&h);
    sqlite3_close(other);
    assert_int_equal(pyc_history_flush(NULL, 5, &err), 0);
    assert_int_equal(pyc_history_pending(NULL), 0);
}

static void
test_add_cost(void **state)
{
    enum { CELLS = 10000 };
    char path[PATH_MAX];
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *h = open_ok(path);
    char src[128];
    double t0 = now_us();
    for (int i = 1; i <= CELLS; i++) {
        snprintf(src, sizeof src, "df = pd.read_csv('data-%d.csv')\ndf.describe()", i);
        add_ok(h, i, src, NULL);
    }
    double t1 = now_us();
    for (int i = 1; i <= CELLS; i += 10)
        assert_int_equal(pyc_history_set_output(h, i, "       a      b\ncount  3.0  3.0", NULL), 0);
    double t2 = now_us();
    print_message("%d adds: %.1f us per add; %d set_output: %.1f us each\n", CELLS, (t1 - t0) / CELLS, CELLS / 10,
                  (t2 - t1) / (CELLS / 10));
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 1, \"output\": true}",
                   "[[1, 10000, [\"df = pd.read_csv('data-10000.csv')\\ndf.describe()\", null]]]");
    t1 = now_us();
    json_t *req = parse("{\"hist_access_type\": \"search\", \"pattern\": \"*data-99*\", \"unique\": true}");
    json_t *reply = pyc_history_request(h, req);
    print_message("search over %d cells: %.0f us, %zu matches\n", CELLS, now_us() - t1,
                  json_array_size(json_object_get(reply, "history")));
    assert_int_equal(json_array_size(json_object_get(reply, "history")), 111);
    json_decref(reply);
    json_decref(req);

    /* The cost comes from WAL with synchronous=NORMAL: check the file's journal mode. */
    sqlite3 *db;
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(db);
    pyc_history_close(&h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test_setup_teardown(test_sessions_across_reopen, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_continue_session, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_tail, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_range, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_search, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_output_shapes),
        cmocka_unit_test(test_set_output),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test_setup_teardown(test_open_failures, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_utf8_in_file, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_default_path),
        cmocka_unit_test_setup_teardown(test_queue_and_flush_under_a_lock, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_add_cost, unit_tmpdir_setup, unit_tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
