/*
 * test_sqlite_mem.c -- cmocka tests for sqlite_mem.c, SQLite's allocator, through SQLite's own interface
 * (sqlite3_malloc64, sqlite3_realloc64, sqlite3_msize, sqlite3_free) once pyc_sqlite_load has installed it:
 * sizes and contents, blocks reused after a free, and a forked child that allocates on pages of its own and
 * never reuses a block its parent made.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sqlite_lazy.h"

static int
setup(void **state)
{
    (void)state;
    pyc_error_t err;
    return pyc_sqlite_load(&err) == 0 ? 0 : -1;
}

static void
test_sizes_contents_and_reuse(void **state)
{
    (void)state;
    /* Every size from 1 byte to past the largest class (64 KiB, then a mapping of its own). */
    static const size_t sizes[] = {1, 15, 16, 17, 100, 512, 4000, 4097, 65536, 65537, 300000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = sqlite3_malloc64(sizes[i]);
        assert_non_null(p);
        assert_true((uintptr_t)p % 8 == 0);
        assert_true((size_t)sqlite3_msize(p) >= sizes[i]);
        memset(p, (int)i + 1, sizes[i]);
        unsigned char *q = sqlite3_realloc64(p, sizes[i] * 3 + 1);
        assert_non_null(q);
        for (size_t j = 0; j < sizes[i]; j++)
            assert_int_equal(q[j], (int)i + 1);
        sqlite3_free(q);
    }
    if (!PYC_SQLITE_MEM)
        return;                  /* under AddressSanitizer SQLite keeps malloc */
    /* A freed block is the next one of its class. */
    void *a = sqlite3_malloc64(200);
    sqlite3_free(a);
    void *b = sqlite3_malloc64(250);          /* the same class as 200: 256 bytes */
    assert_ptr_equal(a, b);
    sqlite3_free(b);
    /* SQLite itself works on it: a database in memory, a table, a row. */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES ('pyc');", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
}

static void
test_a_forked_child_never_reuses_its_parent_s_blocks(void **state)
{
    (void)state;
    if (!PYC_SQLITE_MEM)
        skip();
    void *parents = sqlite3_malloc64(200);
    assert_non_null(parents);
    memset(parents, 7, 200);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        /* The parent's block is freed here and is not handed out again: its page is the parent's too. */
        sqlite3_free(parents);
        void *mine = sqlite3_malloc64(190);
        bad |= mine == NULL || mine == parents;
        /* Its contents are still there (nothing was written to it), and msize still reads it. */
        bad |= ((unsigned char *)parents)[0] != 7 || sqlite3_msize(parents) < 200;
        /* A realloc of a block of the parent's copies it into one of the child's. */
        void *grown = sqlite3_realloc64(parents, 100);
        bad |= grown == NULL || grown == parents || ((unsigned char *)grown)[99] != 7;
        /* The child's own blocks are reused as usual. */
        sqlite3_free(mine);
        bad |= sqlite3_malloc64(180) != mine;
        _exit(bad);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* The parent's block is the parent's, as before. */
    assert_int_equal(((unsigned char *)parents)[199], 7);
    sqlite3_free(parents);
    assert_ptr_equal(sqlite3_malloc64(200), parents);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_contents_and_reuse),
        cmocka_unit_test(test_a_forked_child_never_reuses_its_parent_s_blocks),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
