/*
 * test_events.c -- cmocka tests for events.c: appended events carry seq one above the last, in order, with
 * their fields after the five of every event; the file is 0600 and never opened through a link; rotation
 * keeps the file under its bound and seq going on across it; a reader's cursor resumes exactly (also across a
 * rotation, and past a line still being written); lines that are not events are skipped; two processes, or
 * two threads sharing a writer, that append at once never repeat a seq; and the per-event cost is printed
 * (it is measured, not asserted).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "events.h"
#include "unit_util.h"

/* Collects the events a read gives. */
typedef struct {
    long long seqs[4096];
    char events[4096][24];
    int n;
} got_t;

static int
collect(void *ctx, const pyc_event_t *e)
{
    got_t *g = ctx;
    if (g->n < 4096) {
        g->seqs[g->n] = e->seq;
        snprintf(g->events[g->n], sizeof g->events[0], "%s", e->event);
        g->n++;
    }
    return 0;
}

static void
path_in(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void
test_append_and_read(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    pyc_events_t *ev = pyc_events_open(dir, 0, &err);
    assert_non_null(ev);
    json_t *f = json_pack("{s:s, s:i}", "reason", "crashed", "signal", 11);
    assert_int_equal(pyc_events_append(ev, "work", 42, "ready", NULL, -1, &err), 1);
    assert_int_equal(pyc_events_append(ev, "work", 42, "closed", f, -1, &err), 2);
    json_decref(f);
    pyc_events_destroy(&ev);
    assert_null(ev);

    char path[4096];
    path_in(path, sizeof path, dir, PYC_EVENTS_FILE);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    FILE *fp = fopen(path, "r");
    char line[512];
    assert_non_null(fgets(line, sizeof line, fp));
    assert_true(strncmp(line, "{\"seq\":1,\"time\":", 16) == 0);
    assert_non_null(strstr(line, "\"session\":\"work\",\"pid\":42,\"event\":\"ready\"}\n"));
    assert_non_null(fgets(line, sizeof line, fp));
    assert_non_null(strstr(line, "\"event\":\"closed\",\"reason\":\"crashed\",\"signal\":11}\n"));
    fclose(fp);

    /* A second writer (another process, as far as the file knows) goes on from the last seq. */
    pyc_events_t *other = pyc_events_open(dir, 0, &err);
    assert_int_equal(pyc_events_append(other, "b", 7, "ready", NULL, 100, &err), 3);
    pyc_events_destroy(&other);

    pyc_events_cursor_t cur = {0};
    got_t *g = calloc(1, sizeof *g);
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    assert_int_equal(g->n, 3);
    assert_int_equal(g->seqs[2], 3);
    assert_string_equal(g->events[1], "closed");
    assert_int_equal(cur.seq, 3);
    /* Nothing new: nothing given. */
    g->n = 0;
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    assert_int_equal(g->n, 0);
    /* A cursor made from a seq alone (--since 1) gives what follows it. */
    pyc_events_cursor_t since = {.seq = 1};
    assert_int_equal(pyc_events_read(dir, &since, collect, g, &err), 0);
    assert_int_equal(g->n, 2);
    assert_int_equal(g->seqs[0], 2);
    free(g);
}

static void
test_parse_checks_the_fields(void **state)
{
    (void)state;
    pyc_event_t e;
    const char *good = "{\"seq\":5,\"time\":1.5,\"session\":\"s\",\"pid\":3,\"event\":\"closed\","
                       "\"reason\":\"crashed\",\"signal\":11,\"traceback\":\"x\"}";
    assert_int_equal(pyc_event_parse(good, strlen(good), &e, NULL), 0);
    assert_int_equal(e.seq, 5);
    assert_string_equal(e.reason, "crashed");
    assert_int_equal(e.signal, 11);
    assert_int_equal(e.pid, 3);
    pyc_event_clear(&e);
    static const char *const bad[] = {
        "", "[]", "{", "{\"seq\":0,\"time\":1,\"session\":\"s\",\"pid\":1,\"event\":\"e\"}",
        "{\"seq\":1,\"time\":\"x\",\"session\":\"s\",\"pid\":1,\"event\":\"e\"}",
        "{\"seq\":1,\"time\":1,\"session\":2,\"pid\":1,\"event\":\"e\"}",
        "{\"seq\":1,\"time\":1,\"session\":\"s\",\"pid\":1}",
        "{\"seq\":1,\"time\":1,\"session\":\"s\",\"pid\":1,\"event\":\"e\",\"reason\":3}",
        "{\"seq\":1,\"seq\":2,\"time\":1,\"session\":\"s\",\"pid\":1,\"event\":\"e\"}",
    };
    pyc_error_t err;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(pyc_event_parse(bad[i], strlen(bad[i]), &e, &err), -1);
        assert_null(e.obj);
    }
}

static void
test_scan_skips_garbage_and_partial_lines(void **state)
{
    (void)state;
    const char buf[] = "garbage\n{\"seq\":1,\"time\":1,\"session\":\"s\",\"pid\":1,\"event\":\"a\"}\n\n"
                       "{\"seq\":2,\"time\":1,\"session\":\"s\",\"pid\":1,\"event\":\"b\"}\n{\"seq\":3,\"ti";
    got_t *g = calloc(1, sizeof *g);
    int stop;
    size_t used = pyc_events_scan(buf, sizeof buf - 1, 0, collect, g, &stop);
    assert_int_equal(g->n, 2);
    assert_int_equal(stop, 0);
    assert_int_equal(used, (size_t)(strstr(buf, "{\"seq\":3") - buf));
    free(g);
}

static void
test_reader_resumes_past_a_partial_line(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    char path[4096];
    path_in(path, sizeof path, dir, PYC_EVENTS_FILE);
    pyc_events_t *ev = pyc_events_open(dir, 0, &err);
    assert_int_equal(pyc_events_append(ev, "s", 1, "a", NULL, -1, &err), 1);
    /* Half a line, as a writer in the middle of its write leaves it. */
    int fd = open(path, O_WRONLY | O_APPEND);
    const char *half = "{\"seq\":2,\"time\":1,\"session\":\"s\",";
    assert_int_equal(write(fd, half, strlen(half)), (ssize_t)strlen(half));
    pyc_events_cursor_t cur = {0};
    got_t *g = calloc(1, sizeof *g);
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    assert_int_equal(g->n, 1);
    const char *rest = "\"pid\":1,\"event\":\"b\"}\n";
    assert_int_equal(write(fd, rest, strlen(rest)), (ssize_t)strlen(rest));
    close(fd);
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    assert_int_equal(g->n, 2);
    assert_string_equal(g->events[1], "b");
    /* The writer, which did not write that line, reads its seq from the file. */
    assert_int_equal(pyc_events_append(ev, "s", 1, "c", NULL, -1, &err), 3);
    pyc_events_destroy(&ev);
    free(g);
}

static void
test_rotation_keeps_the_bound(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    char path[4096], old[4096];
    path_in(path, sizeof path, dir, PYC_EVENTS_FILE);
    path_in(old, sizeof old, dir, PYC_EVENTS_OLD_FILE);
    pyc_events_t *ev = pyc_events_open(dir, 4096, &err);
    assert_non_null(ev);
    pyc_events_cursor_t cur = {0};
    got_t *g = calloc(1, sizeof *g);
    json_t *f = json_pack("{s:s}", "pad", "0123456789012345678901234567890123456789");
    for (int i = 1; i <= 500; i++) {
        assert_int_equal(pyc_events_append(ev, "rot", 9, "cell_done", f, -1, &err), i);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_true(st.st_size <= 4096);
        if (i % 20 == 0)
            assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    }
    json_decref(f);
    pyc_events_destroy(&ev);
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    /* Read along every 20 events, the follower saw every one, in order: fewer than 20 happen between two
     * reads, and one file holds more than that. */
    assert_int_equal(g->n, 500);
    for (int i = 0; i < g->n; i++)
        assert_int_equal(g->seqs[i], i + 1);
    struct stat st;
    assert_int_equal(stat(old, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_true(st.st_size <= 4096);
    /* A fresh reader gets what both files still hold: the newest events, ending at 500. */
    pyc_events_cursor_t fresh = {0};
    g->n = 0;
    assert_int_equal(pyc_events_read(dir, &fresh, collect, g, &err), 0);
    assert_true(g->n > 20 && g->n < 500);
    assert_int_equal(g->seqs[g->n - 1], 500);
    for (int i = 1; i < g->n; i++)
        assert_int_equal(g->seqs[i], g->seqs[i - 1] + 1);
    /* A writer that starts on a file just rotated (renamed, no new file yet) takes its seq from the old one. */
    assert_int_equal(rename(path, old), 0);
    ev = pyc_events_open(dir, 4096, &err);
    assert_int_equal(pyc_events_append(ev, "rot", 9, "ready", NULL, -1, &err), 501);
    pyc_events_destroy(&ev);
    free(g);
}

/* A cursor older than what the rotated log keeps: with gaps asked for, the reader says how many events were
 * lost before the first it gives (and the gap's seq resumes right after them); newest is the last seq. */
static json_t *first_gap;

static int
keep_gap(void *ctx, const pyc_event_t *e)
{
    if (strcmp(e->event, PYC_EVENTS_GAP) == 0 && first_gap == NULL)
        first_gap = json_incref(e->obj);
    return collect(ctx, e);
}

static void
test_gap_after_rotation(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    pyc_events_t *ev = pyc_events_open(dir, 4096, &err);
    assert_non_null(ev);
    json_t *f = json_pack("{s:s}", "pad", "0123456789012345678901234567890123456789");
    for (int i = 1; i <= 300; i++)
        assert_int_equal(pyc_events_append(ev, "rot", 9, "cell_done", f, -1, &err), i);
    got_t *g = calloc(1, sizeof *g);
    pyc_events_cursor_t cur = {.seq = 5, .gaps = true};
    assert_int_equal(pyc_events_read(dir, &cur, keep_gap, g, &err), 0);
    assert_non_null(first_gap);
    assert_string_equal(g->events[0], PYC_EVENTS_GAP);
    long long oldest = g->seqs[1];
    assert_true(oldest > 7 && oldest < 300);
    assert_int_equal(g->seqs[0], oldest - 1);
    assert_int_equal(json_integer_value(json_object_get(first_gap, "from")), 6);
    assert_int_equal(json_integer_value(json_object_get(first_gap, "to")), oldest - 1);
    assert_int_equal(json_integer_value(json_object_get(first_gap, "lost")), oldest - 6);
    assert_true(json_is_null(json_object_get(first_gap, "session")));
    assert_int_equal(g->seqs[g->n - 1], 300);
    assert_int_equal(cur.newest, 300);
    json_decref(first_gap);
    first_gap = NULL;

    /* A follower that falls behind by more than the log holds is told too, once, and goes on in order. */
    g->n = 0;
    for (int i = 301; i <= 600; i++)
        assert_int_equal(pyc_events_append(ev, "rot", 9, "cell_done", f, -1, &err), i);
    assert_int_equal(pyc_events_read(dir, &cur, keep_gap, g, &err), 0);
    assert_non_null(first_gap);
    assert_int_equal(json_integer_value(json_object_get(first_gap, "from")), 301);
    assert_string_equal(g->events[0], PYC_EVENTS_GAP);
    for (int i = 2; i < g->n; i++)
        assert_int_equal(g->seqs[i], g->seqs[i - 1] + 1);
    json_decref(first_gap);
    first_gap = NULL;

    /* Without gaps asked for (the readers of ls and poll), nothing but events; a cursor within the log: no gap. */
    pyc_events_cursor_t plain = {.seq = 5}, within = {.seq = 595, .gaps = true};
    g->n = 0;
    assert_int_equal(pyc_events_read(dir, &plain, collect, g, &err), 0);
    assert_string_equal(g->events[0], "cell_done");
    g->n = 0;
    assert_int_equal(pyc_events_read(dir, &within, collect, g, &err), 0);
    assert_int_equal(g->n, 5);
    assert_int_equal(g->seqs[0], 596);
    assert_int_equal(within.newest, 600);
    json_decref(f);
    pyc_events_destroy(&ev);
    free(g);
}

static void
test_never_through_a_link(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    char path[4096], victim[4096];
    path_in(path, sizeof path, dir, PYC_EVENTS_FILE);
    path_in(victim, sizeof victim, dir, "victim");
    FILE *fp = fopen(victim, "w");
    fputs("precious\n", fp);
    fclose(fp);
    assert_int_equal(symlink(victim, path), 0);
    assert_null(pyc_events_open(dir, 0, &err));
    assert_non_null(strstr(err.text, "symbolic link"));
    /* The reader does not follow it either: nothing is read. */
    pyc_events_cursor_t cur = {0};
    got_t *g = calloc(1, sizeof *g);
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), -1);
    assert_int_equal(g->n, 0);
    free(g);
    unlink(path);
    /* Nor is a FIFO written (the open does not block). */
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_null(pyc_events_open(dir, 0, &err));
    unlink(path);
    fp = fopen(victim, "r");
    char line[64];
    assert_non_null(fgets(line, sizeof line, fp));
    assert_string_equal(line, "precious\n");
    fclose(fp);
}

static void
test_line_too_long_is_refused(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    pyc_events_t *ev = pyc_events_open(dir, 0, &err);
    char *big = malloc(PYC_EVENTS_MAX_LINE + 1);
    memset(big, 'x', PYC_EVENTS_MAX_LINE);
    big[PYC_EVENTS_MAX_LINE] = '\0';
    json_t *f = json_pack("{s:s}", "traceback", big);
    assert_int_equal(pyc_events_append(ev, "s", 1, "closed", f, -1, &err), -1);
    assert_int_equal(err.code, PYC_EINVAL);
    assert_int_equal(pyc_events_append(ev, "s", 1, "closed", NULL, -1, &err), 1);
    json_decref(f);
    free(big);
    pyc_events_destroy(&ev);
}

static void
test_lock_timeout(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    pyc_events_t *ev = pyc_events_open(dir, 0, &err);
    char path[4096];
    path_in(path, sizeof path, dir, PYC_EVENTS_FILE);
    int fd = open(path, O_RDONLY);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    uint64_t t0 = pyc_now_ns();
    assert_int_equal(pyc_events_append(ev, "s", 1, "closed", NULL, 50, &err), -1);
    assert_int_equal(err.code, PYC_ETIMEDOUT);
    assert_true(pyc_ms_since(t0) >= 50 && pyc_ms_since(t0) < 2000);
    close(fd);
    assert_int_equal(pyc_events_append(ev, "s", 1, "closed", NULL, 50, &err), 1);
    pyc_events_destroy(&ev);
}

static void
test_two_processes_never_repeat_a_seq(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    enum { EACH = 300 };
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            pyc_events_t *ev = pyc_events_open(dir, 8192, NULL);
            for (int i = 0; i < EACH; i++) {
                if (ev == NULL || pyc_events_append(ev, k ? "b" : "a", getpid(), "cell_done", NULL, -1, NULL) < 0)
                    _exit(1);
            }
            pyc_events_destroy(&ev);
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status;
        assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* Both wrote 600 events with seqs 1..600; the files still hold the newest, consecutive. */
    pyc_events_cursor_t cur = {0};
    got_t *g = calloc(1, sizeof *g);
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    assert_true(g->n > 0);
    assert_int_equal(g->seqs[g->n - 1], 2 * EACH);
    for (int i = 1; i < g->n; i++)
        assert_int_equal(g->seqs[i], g->seqs[i - 1] + 1);
    free(g);
}

static void *
thread_appends(void *arg)
{
    pyc_events_t *ev = arg;
    for (int i = 0; i < 300; i++) {
        if (pyc_events_append(ev, "t", 1, "cell_done", NULL, -1, NULL) < 0)
            return (void *)1;
    }
    return NULL;
}

static void
test_threads_share_a_writer(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    pyc_events_t *ev = pyc_events_open(dir, 0, &err);
    pthread_t th[2];
    void *rc[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_appends, ev), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], &rc[i]);
        assert_null(rc[i]);
    }
    pyc_events_destroy(&ev);
    pyc_events_cursor_t cur = {0};
    got_t *g = calloc(1, sizeof *g);
    assert_int_equal(pyc_events_read(dir, &cur, collect, g, &err), 0);
    assert_int_equal(g->n, 600);
    for (int i = 0; i < g->n; i++)
        assert_int_equal(g->seqs[i], i + 1);
    free(g);
}

static void
test_cost_of_an_event(void **state)
{
    const char *dir = *state;
    pyc_error_t err;
    pyc_events_t *ev = pyc_events_open(dir, 0, &err);
    json_t *f = json_pack("{s:s, s:s}", "id", "0123456789abcdef0123456789abcdef", "outcome", "ok");
    enum { N = 2000 };
    uint64_t t0 = pyc_now_ns();
    for (int i = 0; i < N; i++)
        assert_true(pyc_events_append(ev, "bench", 1, "cell_done", f, -1, &err) > 0);
    double us = (double)(pyc_now_ns() - t0) / 1e3 / N;
    print_message("one event: %.1f us (mean of %d, one writer)\n", us, N);
    json_decref(f);
    pyc_events_destroy(&ev);
}

static void
test_signal_names(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(pyc_events_signal_name(SIGSEGV, buf, sizeof buf), "SIGSEGV");
    assert_string_equal(pyc_events_signal_name(SIGABRT, buf, sizeof buf), "SIGABRT");
    assert_string_equal(pyc_events_signal_name(77, buf, sizeof buf), "signal 77");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_and_read, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_parse_checks_the_fields),
        cmocka_unit_test(test_scan_skips_garbage_and_partial_lines),
        cmocka_unit_test_setup_teardown(test_reader_resumes_past_a_partial_line, unit_tmpdir_setup,
                                        unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_rotation_keeps_the_bound, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_gap_after_rotation, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_never_through_a_link, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_line_too_long_is_refused, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_lock_timeout, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_two_processes_never_repeat_a_seq, unit_tmpdir_setup,
                                        unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_threads_share_a_writer, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_cost_of_an_event, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_signal_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
