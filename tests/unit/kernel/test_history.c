/*
 * test_history.c -- cmocka tests for history.c: sessions, recording, the queue a locked file keeps, and the
 * default path (history_request: test_history_query.c).
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
#include "history_util.h"
#include "unit_util.h"

/* ---- helpers ------------------------------------------------------------------------------------------ */

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
/* Opens the test's history file (its path into path, PATH_MAX bytes) while another connection, *other, holds
 * its write lock, as another kernel in a long transaction would (the way pyc's batches once did). */
static pyc_history_t *
open_with_the_file_locked(void **state, char *path, sqlite3 **other)
{
    join(path, (char *)*state, "history.sqlite");
    pyc_history_t *h = open_ok(path);
    *other = NULL;
    assert_int_equal(sqlite3_open(path, other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(*other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    return h;
}

static void
test_queue_and_flush_under_a_lock(void **state)
{
    char path[PATH_MAX];
    pyc_error_t err;
    sqlite3 *other;
    pyc_history_t *h = open_with_the_file_locked(state, path, &other);
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

/* While the file stays locked, at most 65536 cells wait in memory: one more is refused with PYC_EIO and a
 * sentence, the queue keeps what it had, and it is all written once the lock goes. */
static void
test_cells_waiting_for_a_locked_file_are_bounded(void **state)
{
    char path[PATH_MAX];
    pyc_error_t err;
    sqlite3 *other;
    pyc_history_t *h = open_with_the_file_locked(state, path, &other);
    for (int i = 1; i <= 65536; i++)
        assert_int_equal(pyc_history_queue(h, i, "x", &err), 0);
    assert_int_equal(pyc_history_queue(h, 65537, "one too many", &err), -1);
    assert_int_equal(err.code, PYC_EIO);
    assert_non_null(strstr(err.text, "65536 cells are waiting"));
    assert_int_equal(pyc_history_pending(h), 65536);
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(pyc_history_flush(h, 5000, &err), 0);
    assert_int_equal(pyc_history_pending(h), 0);
    expect_history(h, "{\"hist_access_type\": \"tail\", \"n\": 1}", "[[1, 65536, \"x\"]]");
    pyc_history_close(&h);
    sqlite3_close(other);
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
        cmocka_unit_test(test_set_output),
        cmocka_unit_test_setup_teardown(test_open_failures, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_utf8_in_file, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_default_path),
        cmocka_unit_test_setup_teardown(test_queue_and_flush_under_a_lock, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cells_waiting_for_a_locked_file_are_bounded, unit_tmpdir_setup,
                                        unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_add_cost, unit_tmpdir_setup, unit_tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
