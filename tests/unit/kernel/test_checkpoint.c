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
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    assert_false(pyc_checkpoint_has_cells(c));             /* a closed event does not name an empty file */
    assert_false(pyc_checkpoint_has_cells(NULL));
    /* A second session of the same name (a restarted kernel) gets a file of its own. */
    pyc_checkpoint_t *again = pyc_checkpoint_new(dir, "kernel-1/../x", "3.11.2", &err);
    assert_non_null(again);
    assert_non_null(strstr(pyc_checkpoint_path(again), "/a/b/kernel-1_.._x-2.py"));
    pyc_checkpoint_destroy(&again);
    const char *cells[] = {"x = 1", "# %% pyc looks like a marker\ny = 2\n", "def f():\n    return 3\n\n\n",
                           "!echo hi"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pyc_checkpoint_add(c, i + 1, cells[i], &err), 0);
    assert_true(pyc_checkpoint_has_cells(c));
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
    assert_true(pyc_checkpoint_has_cells(c));               /* the parent's, copied */
    assert_int_equal(pyc_checkpoint_add(c, 5, "z = 3", &err), 0);
    assert_int_equal(pyc_checkpoint_load(pyc_checkpoint_path(c), &got, &n, &err), 0);
    assert_int_equal(n, 5);
    assert_string_equal(got[4], "z = 3");
    pyc_checkpoint_free_cells(got, n);
    pyc_checkpoint_destroy(&c);
    assert_null(c);
    pyc_checkpoint_destroy(&c);
}

/* A restore (time travel) leaves out the cells recorded after the state it went back to; a second kernel
 * (the restored one, with a checkpoint object of its own) goes on writing the same file under its token. */
static void
test_checkpoint_restore(void **state)
{
    char dir[PATH_MAX];
    pyc_error_t err;
    snprintf(dir, sizeof dir, "%s/r", (const char *)*state);
    pyc_checkpoint_t *c = pyc_checkpoint_new(dir, "k", "3.11.2", &err);
    pyc_checkpoint_t *other = pyc_checkpoint_new(dir, "other", "3.11.2", &err);
    assert_non_null(c);
    assert_non_null(other);
    for (int i = 1; i <= 4; i++) {
        char code[32];
        snprintf(code, sizeof code, "x = %d", i);
        assert_int_equal(pyc_checkpoint_add(c, i, code, &err), 0);
    }
    /* back to the state after In[2]; the count goes on from 5 */
    assert_false(pyc_checkpoint_has_cells(other));
    assert_int_equal(pyc_checkpoint_restored(other, pyc_checkpoint_path(c), 2, &err), 0);
    assert_true(pyc_checkpoint_has_cells(other));           /* the cells up to In[2] are kept */
    assert_string_equal(pyc_checkpoint_path(other), pyc_checkpoint_path(c));
    assert_int_equal(pyc_checkpoint_add(other, 5, "y = 5", &err), 0);
    /* and back again, after In[1] */
    assert_int_equal(pyc_checkpoint_restored(other, NULL, 1, &err), 0);
    assert_int_equal(pyc_checkpoint_add(other, 6, "z = 6", &err), 0);
    char **got;
    size_t n;
    assert_int_equal(pyc_checkpoint_load(pyc_checkpoint_path(c), &got, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(got[0], "x = 1");
    assert_string_equal(got[1], "z = 6");
    pyc_checkpoint_free_cells(got, n);
    assert_int_equal(pyc_checkpoint_restored(other, "/nonexistent/x.py", 1, &err), -1);
    pyc_checkpoint_destroy(&c);
    pyc_checkpoint_destroy(&other);
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
test_checkpoint_bounds(void **state)
{
    char dir[PATH_MAX];
    pyc_error_t err;
    snprintf(dir, sizeof dir, "%s/ck", (const char *)*state);
    pyc_checkpoint_t *c = pyc_checkpoint_new(dir, "k", "3.11.2", &err);
    assert_non_null(c);
    pyc_checkpoint_set_caps(c, 32, 1200);
    assert_int_equal(pyc_checkpoint_add(c, 1, "x = 1", &err), 0);
    assert_int_equal(pyc_checkpoint_add(c, 2, "y = '0123456789012345678901234567890123456789'", &err), 0);
    char **got;
    size_t n;
    assert_int_equal(pyc_checkpoint_load(pyc_checkpoint_path(c), &got, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(got[0], "x = 1");
    assert_non_null(strstr(got[1], "raise RuntimeError('cell 2 (46 bytes) is not in this checkpoint"));
    pyc_checkpoint_free_cells(got, n);
    /* Up to the file's bound, then one line that stops a replay, then nothing. */
    for (int i = 3; i < 60; i++)
        assert_int_equal(pyc_checkpoint_add(c, i, "z = 12345", &err), 0);
    struct stat st;
    assert_int_equal(stat(pyc_checkpoint_path(c), &st), 0);
    assert_true(st.st_size <= 1200 + 200);
    assert_int_equal(pyc_checkpoint_load(pyc_checkpoint_path(c), &got, &n, &err), 0);
    assert_non_null(strstr(got[n - 1], "the checkpoint reached its size limit"));
    assert_null(strstr(got[n - 2], "RuntimeError"));
    pyc_checkpoint_free_cells(got, n);
    pyc_checkpoint_destroy(&c);
}

/* The size bound counts what another process wrote to the same file while this one was a parked snapshot: the
 * size this process keeps is asked again after a restore. */
static void
test_checkpoint_bounds_after_restore(void **state)
{
    char dir[PATH_MAX];
    pyc_error_t err;
    snprintf(dir, sizeof dir, "%s/ck", (const char *)*state);
    pyc_checkpoint_t *c = pyc_checkpoint_new(dir, "k", "3.11.2", &err);
    assert_non_null(c);
    assert_int_equal(pyc_checkpoint_add(c, 1, "x = 1", &err), 0);
    int fd = open(pyc_checkpoint_path(c), O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    char other[600];
    memset(other, '#', sizeof other);
    other[sizeof other - 1] = '\n';
    assert_int_equal(write(fd, other, sizeof other), (ssize_t)sizeof other);
    close(fd);
    assert_int_equal(pyc_checkpoint_restored(c, NULL, 1, &err), 0);
    struct stat before, after;
    assert_int_equal(stat(pyc_checkpoint_path(c), &before), 0);
    pyc_checkpoint_set_caps(c, 64, (size_t)before.st_size + 300);
    for (int i = 2; i < 40; i++)
        assert_int_equal(pyc_checkpoint_add(c, i, "z = 12345", &err), 0);
    assert_int_equal(stat(pyc_checkpoint_path(c), &after), 0);
    /* Up to the bound, one cell past it and the lines that stop a replay (about 250 bytes); a size kept from
     * before the restore would have let the 600 bytes written meanwhile, and the restore's own lines, in once
     * more (measured: 547 bytes past `before` with the size asked again). */
    assert_true(after.st_size <= before.st_size + 300 + 400);
    assert_true(after.st_size > before.st_size + 200);
    pyc_checkpoint_destroy(&c);
}

static void
test_checkpoint_expire(void **state)
{
    char path[PATH_MAX];
    const char *dir = *state;
    const char *names[] = {"old.py", "new.py", "old.txt"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
        if (i != 1) {
            struct timespec old[2] = {{time(NULL) - 40 * 86400, 0}, {time(NULL) - 40 * 86400, 0}};
            assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
        }
    }
    pyc_error_t err;
    assert_int_equal(pyc_checkpoint_expire(dir, 30 * 86400.0, &err), 1);
    snprintf(path, sizeof path, "%s/old.py", dir);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/new.py", dir);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/old.txt", dir);
    assert_int_equal(access(path, F_OK), 0);           /* not a checkpoint */
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(pyc_checkpoint_expire(path, 1, &err), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_checkpoint_round_trip, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test(test_checkpoint_refusals),
        cmocka_unit_test_setup_teardown(test_checkpoint_restore, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_bounds, unit_tmpdir_setup, unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_bounds_after_restore, unit_tmpdir_setup,
                                        unit_tmpdir_teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_expire, unit_tmpdir_setup, unit_tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
