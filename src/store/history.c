/*
 * history.c -- the execution history in SQLite, numbered sessions and history_request, as IPython keeps them.
 *
 * Storage.  The tables are IPython's own (IPython/core/history.py), so the file reads like an IPython
 * history.sqlite and IPython's HistoryAccessor can open it:
 *   sessions(session integer primary key autoincrement, start timestamp, end timestamp, num_cmds integer,
 *            remark text)                         one row per kernel run; end and num_cmds are written at close
 *   history(session integer, line integer, source text, source_raw text, primary key (session, line))
 *   output_history(session integer, line integer, output text, primary key (session, line))
 * The kernel does not transform its input, so source and source_raw hold the same text; "raw" in a request
 * chooses the column all the same, for files that IPython wrote.  A session's number is the rowid that
 * AUTOINCREMENT gives its sessions row: one more than the highest ever used in the file, and distinct even when
 * two kernels start at the same moment, because the insert runs in a write transaction.
 *
 * Cost.  The file is in WAL mode with synchronous=NORMAL: a commit appends a few pages to the WAL with write(2)
 * and does not fsync; only checkpoints (by default every 1000 WAL pages, that is every few hundred cells) sync.
 * Each pyc_history_add is therefore its own committed transaction of about 30 us (10,000 adds, timed by
 * tests/unit/kernel/test_history.c on a 2-core VM with ext4; the same inserts with synchronous=FULL, a sync
 * per commit, cost 420 us).  All the kernels of a user share one file, so no write transaction is ever held
 * while user code runs: the kernel queues each cell in memory (pyc_history_queue, no database work at all)
 * and its writer thread (persist.h) writes the queue in one short transaction after the cell's reply
 * (pyc_history_flush), waiting for another kernel's lock only a few milliseconds; when the file stays locked
 * the cells stay queued for the next try, so a locked database never delays a cell nor loses its row while the
 * kernel lives.  Neither the commit nor the WAL checkpoint's sync runs on the main thread.  A file where WAL is
 * unavailable (some network file systems) keeps its rollback journal and works, at the price of a sync per
 * flush.
 *
 * Queries (history_query.c) follow IPython 8 (HistoryManager.get_tail, HistoryAccessor.get_range and search)
 * with three deliberate differences: entries of the current session carry its real number rather than 0,
 * results are always oldest first (IPython leaves an unlimited search in table order), and negative start/stop
 * count back from the end of any session, not only of the current one.  A missing or ill-typed argument is an
 * error reply where ipykernel would raise inside its handler and send no reply at all.
 */
#include "history.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "sqlite_lazy.h"

/* How long a write waits for another kernel's lock on the same file before failing.  Their transactions
 * last microseconds, so only a stuck process makes this wait expire. */
#define BUSY_TIMEOUT_MS 2000

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS sessions (session integer primary key autoincrement, start timestamp,"
    " end timestamp, num_cmds integer, remark text);"
    "CREATE TABLE IF NOT EXISTS history (session integer, line integer, source text, source_raw text,"
    " PRIMARY KEY (session, line));"
    "CREATE TABLE IF NOT EXISTS output_history (session integer, line integer, output text,"
    " PRIMARY KEY (session, line));"
    "INSERT INTO sessions VALUES (NULL, datetime('now', 'localtime'), NULL, NULL, '');";

/* The statements of the write path, prepared once.  ?1 is always the session and ?2 the line. */
enum { ST_ADD, ST_OUTPUT, ST_DEL_OUTPUT, ST_HAS_LINE, ST_COUNT };
static const char *const stmt_sql[ST_COUNT] = {
    [ST_ADD] = "INSERT INTO history (session, line, source, source_raw) VALUES (?1, ?2, ?3, ?3)",
    /* Inserts nothing (sqlite3_changes() == 0) when the line was never added. */
    [ST_OUTPUT] = ("INSERT OR REPLACE INTO output_history (session, line, output)"
                   " SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM history WHERE session = ?1 AND line = ?2)"),
    [ST_DEL_OUTPUT] = "DELETE FROM output_history WHERE session = ?1 AND line = ?2",
    [ST_HAS_LINE] = "SELECT 1 FROM history WHERE session = ?1 AND line = ?2",
};

/* A cell waiting to be written (pyc_history_queue). */
typedef struct pending {
    int line;
    char *source;                /* owned, trailing newlines stripped */
} pending_t;

/* At most this many cells wait in memory when the file stays locked: about a day of a busy session. */
#define MAX_PENDING 65536

struct pyc_history {
    sqlite3 *db;
    int session;
    sqlite3_stmt *stmt[ST_COUNT];
    pthread_mutex_t qlock;       /* guards pending, n_pending and cap_pending: the queue is filled by the main
                                  * thread while the writer thread (persist.c) flushes */
    pending_t *pending;          /* owned: cells queued, oldest first */
    size_t n_pending, cap_pending;
    pending_t *batch;            /* owned by the flusher: a copy of the queue's head while it is written */
    size_t cap_batch;
};

/* ---- opening and closing ------------------------------------------------------------------------------ */

/* Creates every missing directory above the last '/' of path with mode 0700.  Existing directories are left
 * as they are. */
static int
make_parents(const char *path, pyc_error_t *err)
{
    char dir[PATH_MAX];
    if (strlen(path) >= sizeof dir)
        return pyc_error_set(err, "history file path is too long (%zu bytes)", strlen(path));
    memcpy(dir, path, strlen(path) + 1);
    char *last = strrchr(dir, '/');
    if (last == NULL)
        return 0;
    *last = '\0';
    if (pyc_mkdirs(dir, 0700) < 0)
        return pyc_error_set(err, "cannot create directory %s for the history: %s", dir, strerror(errno));
    return 0;
}

/* Formats "history: WHAT: SQLITE'S MESSAGE" into err.  Returns -1. */
static int
db_error(const pyc_history_t *self, const char *what, pyc_error_t *err)
{
    return pyc_error_set(err, "history: %s: %s", what, sqlite3_errmsg(self->db));
}

pyc_history_t *
pyc_history_open(const char *path, pyc_error_t *err)
{
    pyc_history_t *self = NULL;
    bool memory = path != NULL && strcmp(path, ":memory:") == 0;

    if (path == NULL || path[0] == '\0') {
        pyc_error_set(err, "history file path is empty");
        return NULL;
    }
    if (pyc_sqlite_load(err) < 0)
        return NULL;
    if (!memory) {
        if (make_parents(path, err) < 0)
            return NULL;
        /* Created here rather than by SQLite so that the file, and the -wal and -shm files that SQLite gives
         * the same mode, are private: the history holds whatever the user typed, passwords included. */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            pyc_error_set(err, "cannot open history file %s: %s", path, strerror(errno));
            return NULL;
        }
        close(fd);
    }
    self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&self->qlock, NULL);
    int rc = sqlite3_open_v2(path, &self->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        pyc_error_set(err, "cannot open history file %s: %s", path,
                      self->db != NULL ? sqlite3_errmsg(self->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_busy_timeout(self->db, BUSY_TIMEOUT_MS);
    /* Both pragmas are best effort: without WAL the history still works, only slower, and a file that is not a
     * database fails in the next step with SQLite's own sentence. */
    if (!memory)
        sqlite3_exec(self->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
    sqlite3_exec(self->db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
    if (sqlite3_exec(self->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        pyc_error_set(err, "history file %s: %s", path, sqlite3_errmsg(self->db));
        goto fail;
    }
    if (sqlite3_exec(self->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK) {
        pyc_error_set(err, "history file %s: %s", path, sqlite3_errmsg(self->db));
        sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    sqlite3_int64 session = sqlite3_last_insert_rowid(self->db);
    if (sqlite3_exec(self->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        pyc_error_set(err, "history file %s: %s", path, sqlite3_errmsg(self->db));
        sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    if (session <= 0 || session > INT_MAX) {
        pyc_error_set(err, "history file %s: session number %lld is out of range", path, (long long)session);
        goto fail;
    }
    self->session = (int)session;
    for (int i = 0; i < ST_COUNT; i++) {
        if (sqlite3_prepare_v3(self->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &self->stmt[i], NULL) !=
            SQLITE_OK) {
            pyc_error_set(err, "history file %s: %s", path, sqlite3_errmsg(self->db));
            goto fail;
        }
    }
    return self;
fail:
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(self->stmt[i]);
    sqlite3_close(self->db);
    pthread_mutex_destroy(&self->qlock);
    free(self);
    return NULL;
}

int
pyc_history_continue(pyc_history_t *self, int session, pyc_error_t *err)
{
    if (session <= 0 || session == self->session)
        return 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(self->db, "DELETE FROM sessions WHERE session = ?1 AND NOT EXISTS"
                                          " (SELECT 1 FROM history WHERE session = ?1)", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int(st, 1, self->session);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return pyc_error_set(err, "history: cannot continue session %d: %s", session, sqlite3_errmsg(self->db));
    self->session = session;
    return 0;
}

void
pyc_history_close(pyc_history_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_history_t *self = *self_p;
    pyc_history_flush(self, BUSY_TIMEOUT_MS, NULL);   /* what could not be written now is lost */
    for (size_t i = 0; i < self->n_pending; i++)
        free(self->pending[i].source);
    free(self->pending);
    free(self->batch);
    sqlite3_stmt *end = NULL;
    if (sqlite3_prepare_v2(self->db,
                           "UPDATE sessions SET end = datetime('now', 'localtime'),"
                           " num_cmds = (SELECT count(*) FROM history WHERE session = ?1) WHERE session = ?1",
                           -1, &end, NULL) == SQLITE_OK) {
        sqlite3_bind_int(end, 1, self->session);
        sqlite3_step(end);
    }
    sqlite3_finalize(end);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(self->stmt[i]);
    sqlite3_close(self->db);
    pthread_mutex_destroy(&self->qlock);
    free(self);
    *self_p = NULL;
}

int
pyc_history_session(const pyc_history_t *self)
{
    return self != NULL ? self->session : 0;
}

/* ---- recording ---------------------------------------------------------------------------------------- */

/* Steps a prepared write statement of the cache to completion and resets it.  Returns 0 or -1 with err. */
static int
step_done(pyc_history_t *self, sqlite3_stmt *st, const char *what, pyc_error_t *err)
{
    int rc = sqlite3_step(st);
    int status = 0;
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        status = db_error(self, what, err);
    sqlite3_reset(st);
    /* The texts are bound SQLITE_STATIC: drop them before the caller's buffers go. */
    sqlite3_clear_bindings(st);
    return status;
}

/* Writes or replaces the output of a recorded line.  Returns 1 when written, 0 when the line is not
 * recorded, -1 on a database error. */
static int
put_output(pyc_history_t *self, int line, const char *output, pyc_error_t *err)
{
    sqlite3_stmt *st = self->stmt[ST_OUTPUT];
    sqlite3_bind_int(st, 1, self->session);
    sqlite3_bind_int(st, 2, line);
    sqlite3_bind_text(st, 3, output, -1, SQLITE_STATIC);
    if (step_done(self, st, "cannot record an output", err) < 0)
        return -1;
    return sqlite3_changes(self->db) > 0 ? 1 : 0;
}

/* The length of a cell's source without its trailing newlines, as it is recorded; -1 with err when it is too
 * large for SQLite. */
static int
source_length(const char *source, int line, size_t *len, pyc_error_t *err)
{
    size_t n = strlen(source);
    while (n > 0 && source[n - 1] == '\n')
        n--;
    if (n > INT_MAX)
        return pyc_error_set(err, "history: cell %d is too large to record (%zu bytes)", line, n);
    *len = n;
    return 0;
}

int
pyc_history_add(pyc_history_t *self, int line, const char *source, const char *output, pyc_error_t *err)
{
    assert(self != NULL && source != NULL);
    size_t len = 0;
    if (source_length(source, line, &len, err) < 0)
        return -1;
    bool txn = output != NULL;
    if (txn && sqlite3_exec(self->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_error(self, "cannot start a transaction", err);
    sqlite3_stmt *st = self->stmt[ST_ADD];
    sqlite3_bind_int(st, 1, self->session);
    sqlite3_bind_int(st, 2, line);
    sqlite3_bind_text(st, 3, source, (int)len, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int status = 0;
    if (rc == SQLITE_CONSTRAINT)
        status = pyc_error_set(err, "history: line %d of session %d is already recorded", line, self->session);
    else if (rc != SQLITE_DONE)
        status = db_error(self, "cannot record a cell", err);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (status == 0 && txn && put_output(self, line, output, err) < 0)
        status = -1;
    if (txn) {
        if (status == 0 && sqlite3_exec(self->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
            status = db_error(self, "cannot commit a cell", err);
        if (status < 0 && !sqlite3_get_autocommit(self->db))
            sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
    }
    return status;
}

int
pyc_history_queue(pyc_history_t *self, int line, const char *source, pyc_error_t *err)
{
    assert(self != NULL && source != NULL);
    size_t len = 0;
    if (source_length(source, line, &len, err) < 0)
        return -1;
    char *copy = strndup(source, len);  /* before the lock: a flush in progress waits for it only briefly */
    if (copy == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    int status = 0;
    pthread_mutex_lock(&self->qlock);
    if (self->n_pending == MAX_PENDING) {
        status = pyc_error_code(err, PYC_EIO, "history: %d cells are waiting for the locked history file; cell "
                                "%d is not recorded", MAX_PENDING, line);
        goto out;
    }
    if (self->n_pending == self->cap_pending) {
        size_t cap = self->cap_pending ? self->cap_pending * 2 : 16;
        pending_t *grown = realloc(self->pending, cap * sizeof *grown);
        if (grown == NULL) {
            status = pyc_error_code(err, PYC_ENOMEM, "out of memory");
            goto out;
        }
        self->pending = grown;
        self->cap_pending = cap;
    }
    self->pending[self->n_pending++] = (pending_t){line, copy};
    copy = NULL;
out:
    pthread_mutex_unlock(&self->qlock);
    free(copy);
    return status;
}

size_t
pyc_history_pending(pyc_history_t *self)
{
    if (self == NULL)
        return 0;
    pthread_mutex_lock(&self->qlock);
    size_t n = self->n_pending;
    pthread_mutex_unlock(&self->qlock);
    return n;
}

/* Copies the head of the queue (every cell queued now) into self->batch, so that the flusher can write it
 * without holding qlock: the main thread goes on queueing, which may move the array.  Only the flusher removes
 * cells, so the head stays as copied.  Returns how many, or 0 when out of memory (then nothing is written). */
static size_t
take_batch(pyc_history_t *self)
{
    pthread_mutex_lock(&self->qlock);
    size_t n = self->n_pending;
    if (n > self->cap_batch) {
        pending_t *grown = realloc(self->batch, self->cap_pending * sizeof *grown);
        if (grown == NULL) {
            n = 0;
        } else {
            self->batch = grown;
            self->cap_batch = self->cap_pending;
        }
    }
    if (n > 0)
        memcpy(self->batch, self->pending, n * sizeof *self->batch);
    pthread_mutex_unlock(&self->qlock);
    return n;
}

/* Removes the first n cells of the queue, which were written (or dropped as duplicates). */
static void
drop_batch(pyc_history_t *self, size_t n)
{
    pthread_mutex_lock(&self->qlock);
    for (size_t i = 0; i < n; i++)
        free(self->pending[i].source);
    memmove(self->pending, self->pending + n, (self->n_pending - n) * sizeof *self->pending);
    self->n_pending -= n;
    pthread_mutex_unlock(&self->qlock);
}

int
pyc_history_flush(pyc_history_t *self, int wait_ms, pyc_error_t *err)
{
    if (self == NULL)
        return 0;
    size_t n = take_batch(self);
    if (n == 0)
        return pyc_history_pending(self) > 0 ? pyc_error_code(err, PYC_ENOMEM, "out of memory") : 0;
    int status = 0;
    size_t done = 0;
    sqlite3_busy_timeout(self->db, wait_ms);
    int rc = sqlite3_exec(self->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        bool busy = sqlite3_errcode(self->db) == SQLITE_BUSY;
        status = busy ? pyc_error_code(err, PYC_ETIMEDOUT, "history: the file stayed locked for %d ms by another "
                                       "kernel; %zu cells wait for the next try", wait_ms, n)
                      : db_error(self, "cannot start a transaction", err);
        goto out;
    }
    sqlite3_stmt *st = self->stmt[ST_ADD];
    for (; done < n; done++) {
        const pending_t *p = &self->batch[done];
        sqlite3_bind_int(st, 1, self->session);
        sqlite3_bind_int(st, 2, p->line);
        sqlite3_bind_text(st, 3, p->source, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        /* A line recorded twice (IPython refuses that too) is dropped, not retried for ever. */
        if (rc == SQLITE_CONSTRAINT && status == 0)
            status = pyc_error_set(err, "history: line %d of session %d is already recorded", p->line,
                                   self->session);
        else if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT)
            break;
    }
    if (done < n || sqlite3_exec(self->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        status = db_error(self, "cannot record the queued cells", err);
        sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
        goto out;                /* nothing was written: all stay queued */
    }
    drop_batch(self, n);
out:
    sqlite3_busy_timeout(self->db, BUSY_TIMEOUT_MS);
    return status;
}

int
pyc_history_set_output(pyc_history_t *self, int line, const char *output, pyc_error_t *err)
{
    assert(self != NULL);
    if (output != NULL) {
        int r = put_output(self, line, output, err);
        if (r < 0)
            return -1;
        if (r == 0)
            return pyc_error_set(err, "history: line %d of session %d was never recorded", line, self->session);
        return 0;
    }
    sqlite3_stmt *has = self->stmt[ST_HAS_LINE];
    sqlite3_bind_int(has, 1, self->session);
    sqlite3_bind_int(has, 2, line);
    int rc = sqlite3_step(has);
    sqlite3_reset(has);
    if (rc == SQLITE_DONE)
        return pyc_error_set(err, "history: line %d of session %d was never recorded", line, self->session);
    if (rc != SQLITE_ROW)
        return db_error(self, "cannot look up a line", err);
    sqlite3_stmt *del = self->stmt[ST_DEL_OUTPUT];
    sqlite3_bind_int(del, 1, self->session);
    sqlite3_bind_int(del, 2, line);
    return step_done(self, del, "cannot remove an output", err);
}

/* ---- history_request (history_query.c) ---------------------------------------------------------------- */

json_t *
pyc_history_request(pyc_history_t *self, json_t *content)
{
    return pyc__history_query(self != NULL ? self->db : NULL, self != NULL ? self->session : 0, content);
}

/* ---- the default path --------------------------------------------------------------------------------- */

int
pyc_history_default_path(char *out, size_t cap)
{
    const char *v = getenv("PYC_HISTORY_FILE");
    char data[4096];
    int n;
    if (cap > 0)
        out[0] = '\0';
    if (v != NULL && v[0] != '\0')
        n = snprintf(out, cap, "%s", v);
    else if (pyc_jupyter_data_dir(data, sizeof data) == 0)
        n = snprintf(out, cap, "%s/pyc/history.sqlite", data);
    else
        return -1;
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return -1;
    }
    return 0;
}

void
pyc_history_warm(void)
{
    pyc_error_t err;
    if (pyc_sqlite_load(&err) == 0)
        sqlite3_initialize();
}

pyc_history_t *
pyc_history_open_default(pyc_error_t *err)
{
    char path[4096];
    if (pyc_history_default_path(path, sizeof path) < 0) {
        pyc_error_code(err, PYC_ENOENT, "no place for the history file (set PYC_HISTORY_FILE or HOME)");
        return NULL;
    }
    return pyc_history_open(path, err);
}
