/*
 * sqlite_lazy.h -- libsqlite3 loaded when the history is first opened, not when the kernel starts.
 *
 * Why: linked the usual way, libsqlite3 is mapped and relocated by the dynamic loader before main, 0.25 MB of
 * the kernel's resident memory right after start (smaps, bench/bench_floor.py), although a kernel uses it only
 * from its first cell on (the history opens on first use, kernel.c), and some never do (PYC_HISTORY_FILE=
 * :memory: still needs it; a kernel that only answers kernel_info does not).  So the history's files include
 * this header instead of <sqlite3.h>: it declares SQLite's API as usual and then names every function they
 * call as a field of pyc_sqlite, a table that pyc_sqlite_load fills with dlopen(3) and dlsym(3).
 *
 * pyc_sqlite_load must have returned 0 before any of those functions is called (pyc_history_open calls it
 * first).  It is thread-safe and loads once; the library stays loaded for the life of the process.
 */
#ifndef PYC_SQLITE_LAZY_H
#define PYC_SQLITE_LAZY_H

#include <sqlite3.h>

#include "error.h"

/* The library's name as the loader looks it up: SQLite 3's soname, stable since 3.0.  The loader's search
 * path decides which one (configure's -L for SQLite does not): one older than PYC_SQLITE_MIN, the version
 * configure asks for, is refused. */
#define PYC_SQLITE_SONAME "libsqlite3.so.0"
#define PYC_SQLITE_MIN 3031000

#define PYC_SQLITE_FUNCTIONS(X) \
    X(sqlite3_bind_int) X(sqlite3_bind_int64) X(sqlite3_bind_text) X(sqlite3_busy_timeout) X(sqlite3_changes) \
    X(sqlite3_clear_bindings) X(sqlite3_close) X(sqlite3_column_bytes) X(sqlite3_column_int) \
    X(sqlite3_column_int64) X(sqlite3_column_text) X(sqlite3_column_type) X(sqlite3_config) X(sqlite3_errcode) \
    X(sqlite3_errmsg) X(sqlite3_errstr) X(sqlite3_exec) X(sqlite3_finalize) X(sqlite3_free) \
    X(sqlite3_get_autocommit) X(sqlite3_initialize) X(sqlite3_last_insert_rowid) X(sqlite3_libversion_number) \
    X(sqlite3_malloc64) X(sqlite3_msize) X(sqlite3_open) X(sqlite3_open_v2) X(sqlite3_realloc64) \
    X(sqlite3_prepare_v2) X(sqlite3_prepare_v3) X(sqlite3_reset) X(sqlite3_step)

#define PYC_SQLITE_FIELD(name) __typeof__(name) *name;
typedef struct pyc_sqlite_api {
    PYC_SQLITE_FUNCTIONS(PYC_SQLITE_FIELD)
} pyc_sqlite_api_t;
#undef PYC_SQLITE_FIELD

extern pyc_sqlite_api_t pyc_sqlite;

/* Loads libsqlite3 and fills pyc_sqlite, once.  Returns 0, or -1 with err (the library or a function is
 * missing: the history is then off). */
int pyc_sqlite_load(pyc_error_t *err);

/* The allocator of sqlite_mem.c (SQLite's blocks side by side in regions of their own, which a forked child
 * starts afresh), for SQLITE_CONFIG_MALLOC: pyc_sqlite_load gives it to SQLite once the table is filled,
 * before anything initializes SQLite (sqlite3_config is refused after that).  NULL under AddressSanitizer
 * (PYC_SQLITE_MEM is then 0): SQLite's blocks then come from malloc, where ASan checks every access. */
#if defined(__SANITIZE_ADDRESS__)
#define PYC_SQLITE_MEM 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PYC_SQLITE_MEM 0
#endif
#endif
#ifndef PYC_SQLITE_MEM
#define PYC_SQLITE_MEM 1
#endif
const sqlite3_mem_methods *pyc_sqlite_mem_methods(void);

/* From here on, a call of an SQLite function goes through the table (not in sqlite_lazy.c, which fills it). */
#ifndef PYC_SQLITE_NO_REDIRECT
#define sqlite3_bind_int (pyc_sqlite.sqlite3_bind_int)
#define sqlite3_bind_int64 (pyc_sqlite.sqlite3_bind_int64)
#define sqlite3_bind_text (pyc_sqlite.sqlite3_bind_text)
#define sqlite3_busy_timeout (pyc_sqlite.sqlite3_busy_timeout)
#define sqlite3_changes (pyc_sqlite.sqlite3_changes)
#define sqlite3_clear_bindings (pyc_sqlite.sqlite3_clear_bindings)
#define sqlite3_close (pyc_sqlite.sqlite3_close)
#define sqlite3_column_bytes (pyc_sqlite.sqlite3_column_bytes)
#define sqlite3_column_int (pyc_sqlite.sqlite3_column_int)
#define sqlite3_column_int64 (pyc_sqlite.sqlite3_column_int64)
#define sqlite3_column_text (pyc_sqlite.sqlite3_column_text)
#define sqlite3_column_type (pyc_sqlite.sqlite3_column_type)
#define sqlite3_config (pyc_sqlite.sqlite3_config)
#define sqlite3_errcode (pyc_sqlite.sqlite3_errcode)
#define sqlite3_errmsg (pyc_sqlite.sqlite3_errmsg)
#define sqlite3_errstr (pyc_sqlite.sqlite3_errstr)
#define sqlite3_exec (pyc_sqlite.sqlite3_exec)
#define sqlite3_finalize (pyc_sqlite.sqlite3_finalize)
#define sqlite3_free (pyc_sqlite.sqlite3_free)
#define sqlite3_get_autocommit (pyc_sqlite.sqlite3_get_autocommit)
#define sqlite3_initialize (pyc_sqlite.sqlite3_initialize)
#define sqlite3_last_insert_rowid (pyc_sqlite.sqlite3_last_insert_rowid)
#define sqlite3_libversion_number (pyc_sqlite.sqlite3_libversion_number)
#define sqlite3_malloc64 (pyc_sqlite.sqlite3_malloc64)
#define sqlite3_msize (pyc_sqlite.sqlite3_msize)
#define sqlite3_open (pyc_sqlite.sqlite3_open)
#define sqlite3_open_v2 (pyc_sqlite.sqlite3_open_v2)
#define sqlite3_realloc64 (pyc_sqlite.sqlite3_realloc64)
#define sqlite3_prepare_v2 (pyc_sqlite.sqlite3_prepare_v2)
#define sqlite3_prepare_v3 (pyc_sqlite.sqlite3_prepare_v3)
#define sqlite3_reset (pyc_sqlite.sqlite3_reset)
#define sqlite3_step (pyc_sqlite.sqlite3_step)
#endif

#endif
