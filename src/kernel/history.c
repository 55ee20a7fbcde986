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
 * and writes the queue in one short transaction when it is idle (pyc_history_flush), waiting for another
 * kernel's lock only a few milliseconds; when the file stays locked the cells stay queued for the next idle
 * moment, so a locked database never delays a cell nor loses its row.  A file where WAL is unavailable (some
 * network file systems) keeps its rollback journal and works, at the price of a sync per flush.
 *
 * Queries follow IPython 8 (HistoryManager.get_tail, HistoryAccessor.get_range and search) with three
 * deliberate differences: entries of the current session carry its real number rather than 0, results are
 * always oldest first (IPython leaves an unlimited search in table order), and negative start/stop count back
 * from the end of any session, not only of the current one.  A missing or ill-typed argument is an error reply
 * where ipykernel would raise inside its handler and send no reply at all.
 */
#include "history.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"

/* How long a write waits for another kernel's lock on the same file before failing.  Their transactions
 * last microseconds, so only a stuck process makes this wait expire. */
#define BUSY_TIMEOUT_MS 2000

/* Request values longer than this are not echoed in error replies. */
#define MAX_ECHO 40

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
    pending_t *pending;          /* owned: cells queued, oldest first */
    size_t n_pending, cap_pending;
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
    free(self);
    return NULL;
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

int
pyc_history_add(pyc_history_t *self, int line, const char *source, const char *output, pyc_error_t *err)
{
    assert(self != NULL && source != NULL);
    size_t len = strlen(source);
    while (len > 0 && source[len - 1] == '\n')
        len--;
    if (len > INT_MAX)
        return pyc_error_set(err, "history: cell %d is too large to record (%zu bytes)", line, len);
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
    size_t len = strlen(source);
    while (len > 0 && source[len - 1] == '\n')
        len--;
    if (len > INT_MAX)
        return pyc_error_set(err, "history: cell %d is too large to record (%zu bytes)", line, len);
    if (self->n_pending == MAX_PENDING)
        return pyc_error_code(err, PYC_EIO, "history: %d cells are waiting for the locked history file; cell %d "
                              "is not recorded", MAX_PENDING, line);
    if (self->n_pending == self->cap_pending) {
        size_t cap = self->cap_pending ? self->cap_pending * 2 : 16;
        pending_t *grown = realloc(self->pending, cap * sizeof *grown);
        if (grown == NULL)
            return pyc_error_code(err, PYC_ENOMEM, "out of memory");
        self->pending = grown;
        self->cap_pending = cap;
    }
    char *copy = strndup(source, len);
    if (copy == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    self->pending[self->n_pending++] = (pending_t){line, copy};
    return 0;
}

size_t
pyc_history_pending(const pyc_history_t *self)
{
    return self != NULL ? self->n_pending : 0;
}

int
pyc_history_flush(pyc_history_t *self, int wait_ms, pyc_error_t *err)
{
    if (self == NULL || self->n_pending == 0)
        return 0;
    int status = 0;
    size_t done = 0;
    sqlite3_busy_timeout(self->db, wait_ms);
    int rc = sqlite3_exec(self->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        bool busy = sqlite3_errcode(self->db) == SQLITE_BUSY;
        status = busy ? pyc_error_code(err, PYC_ETIMEDOUT, "history: the file stayed locked for %d ms by another "
                                       "kernel; %zu cells wait for the next try", wait_ms, self->n_pending)
                      : db_error(self, "cannot start a transaction", err);
        goto out;
    }
    sqlite3_stmt *st = self->stmt[ST_ADD];
    for (; done < self->n_pending; done++) {
        const pending_t *p = &self->pending[done];
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
    if (done < self->n_pending || sqlite3_exec(self->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        status = db_error(self, "cannot record the queued cells", err);
        sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
        done = 0;                /* nothing was written: all stay queued */
        goto out;
    }
    for (size_t i = 0; i < done; i++)
        free(self->pending[i].source);
    memmove(self->pending, self->pending + done, (self->n_pending - done) * sizeof *self->pending);
    self->n_pending -= done;
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

/* ---- history_request ---------------------------------------------------------------------------------- */

enum access { ACCESS_TAIL, ACCESS_RANGE, ACCESS_SEARCH };

/* A request's arguments once checked.  The integers are json_int_t (long long) as they came. */
typedef struct request {
    enum access access;
    bool raw, output, unique;
    bool has_n, has_stop;
    json_int_t n, session, start, stop;
    const char *pattern;
} request_t;

/* A new error reply; the sentence names the field.  Returns NULL only out of memory. */
static json_t *
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
error_reply(const char *ename, const char *fmt, ...)
{
    char evalue[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(evalue, sizeof evalue, fmt, ap);
    va_end(ap);
    json_t *evalue_j = json_string(evalue);
    if (evalue_j == NULL) /* cut inside a UTF-8 sequence; values are ASCII except echoed ones */
        evalue_j = json_string("invalid history_request");
    return json_pack("{s:s, s:s, s:o, s:[]}", "status", "error", "ename", ename, "evalue", evalue_j, "traceback");
}

/* Reads the optional boolean `name`: absent or null gives dflt.  Returns NULL, or a new error reply. */
static json_t *
get_bool(json_t *content, const char *name, bool dflt, bool *out)
{
    json_t *v = json_object_get(content, name);
    *out = dflt;
    if (v == NULL || json_is_null(v))
        return NULL;
    if (!json_is_boolean(v))
        return error_reply("TypeError", "history_request: \"%s\" must be a boolean", name);
    *out = json_is_true(v);
    return NULL;
}

/* Reads the integer `name`, which must be >= min.  Absent or null sets *present false, which is an error
 * when required.  Returns NULL, or a new error reply. */
static json_t *
get_int(json_t *content, const char *name, bool required, json_int_t min, bool *present, json_int_t *out)
{
    json_t *v = json_object_get(content, name);
    *present = false;
    *out = 0;
    if (v == NULL || json_is_null(v)) {
        if (required)
            return error_reply("TypeError", "history_request: \"%s\" is required (an integer)", name);
        return NULL;
    }
    if (!json_is_integer(v))
        return error_reply("TypeError", "history_request: \"%s\" must be an integer", name);
    if (json_integer_value(v) < min)
        return error_reply("ValueError", "history_request: \"%s\" must be at least %lld", name, (long long)min);
    *present = true;
    *out = json_integer_value(v);
    return NULL;
}

/* Checks the request content into r.  Returns NULL, or a new error reply. */
static json_t *
parse_request(json_t *content, request_t *r)
{
    json_t *e;
    bool present;

    memset(r, 0, sizeof *r);
    if (!json_is_object(content))
        return error_reply("TypeError", "history_request: the content is not an object");
    json_t *type = json_object_get(content, "hist_access_type");
    if (type == NULL || !json_is_string(type))
        return error_reply("TypeError", "history_request: \"hist_access_type\" is required (\"tail\", "
                                        "\"range\" or \"search\")");
    const char *t = json_string_value(type);
    if (strcmp(t, "tail") == 0) {
        r->access = ACCESS_TAIL;
    } else if (strcmp(t, "range") == 0) {
        r->access = ACCESS_RANGE;
    } else if (strcmp(t, "search") == 0) {
        r->access = ACCESS_SEARCH;
    } else if (json_string_length(type) <= MAX_ECHO && strlen(t) == json_string_length(type)) {
        return error_reply("ValueError", "history_request: unknown hist_access_type \"%s\" (expected \"tail\", "
                                         "\"range\" or \"search\")", t);
    } else {
        return error_reply("ValueError", "history_request: unknown hist_access_type (expected \"tail\", "
                                         "\"range\" or \"search\")");
    }
    if ((e = get_bool(content, "raw", true, &r->raw)) != NULL ||
        (e = get_bool(content, "output", false, &r->output)) != NULL)
        return e;
    switch (r->access) {
    case ACCESS_TAIL:
        r->has_n = true;
        return get_int(content, "n", true, 0, &present, &r->n);
    case ACCESS_RANGE:
        if ((e = get_int(content, "session", false, LLONG_MIN, &present, &r->session)) != NULL ||
            (e = get_int(content, "start", false, LLONG_MIN, &present, &r->start)) != NULL)
            return e;
        return get_int(content, "stop", false, LLONG_MIN, &r->has_stop, &r->stop);
    case ACCESS_SEARCH: {
        json_t *p = json_object_get(content, "pattern");
        if (p == NULL || !json_is_string(p))
            return error_reply("TypeError", "history_request: a search needs a string \"pattern\" (a glob)");
        r->pattern = json_string_value(p);
        if ((e = get_int(content, "n", false, 0, &r->has_n, &r->n)) != NULL)
            return e;
        return get_bool(content, "unique", false, &r->unique);
    }
    }
    return NULL;
}

/* A JSON string of len bytes of text that should be UTF-8.  Text that is not (a file damaged, or written by
 * another program) has each bad byte replaced with U+FFFD rather than failing the whole reply.  NULL only out
 * of memory. */
static json_t *
text_json(const unsigned char *s, size_t len)
{
    json_t *j = json_stringn((const char *)s, len);
    if (j != NULL)
        return j;
    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    unsigned char *fixed = malloc(len * 3 + 1), *o = fixed;
    if (fixed == NULL)
        return NULL;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t need = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                                               : c >= 0xF0 && c <= 0xF4 ? 3 : 4;
        bool ok = need < 4 && i + need < len;
        unsigned cp = need == 0 ? c : need == 1 ? c & 0x1F : need == 2 ? c & 0x0F : c & 0x07;
        for (size_t k = 1; ok && k <= need; k++) {
            ok = (s[i + k] & 0xC0) == 0x80;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        /* Overlong forms, surrogates and code points above U+10FFFF are invalid, as jansson judges. */
        if (ok && ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
                   (need == 3 && (cp < 0x10000 || cp > 0x10FFFF))))
            ok = false;
        if (ok) {
            memcpy(o, s + i, need + 1);
            o += need + 1;
            i += need + 1;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    j = json_stringn((const char *)fixed, (size_t)(o - fixed));
    free(fixed);
    return j;
}

/* Runs st (bound by the caller) and appends one entry per row to hist.  The columns are session, line,
 * source_raw, source, output; r->raw chooses the source.  Returns 0, -1 on a database error (the message is
 * sqlite3_errmsg), -2 out of memory. */
static int
collect(sqlite3_stmt *st, const request_t *r, json_t *hist)
{
    int rc, col = r->raw ? 2 : 3;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *src = sqlite3_column_text(st, col);
        json_t *source = text_json(src != NULL ? src : (const unsigned char *)"",
                                   (size_t)sqlite3_column_bytes(st, col));
        json_t *item = source;
        if (r->output && source != NULL) {
            json_t *out = json_null();
            if (sqlite3_column_type(st, 4) != SQLITE_NULL)
                out = text_json(sqlite3_column_text(st, 4), (size_t)sqlite3_column_bytes(st, 4));
            item = out != NULL ? json_pack("[o, o]", source, out) : NULL;
            if (out == NULL)
                json_decref(source);
        }
        json_t *entry = item != NULL ? json_pack("[I, I, o]", (json_int_t)sqlite3_column_int64(st, 0),
                                                  (json_int_t)sqlite3_column_int64(st, 1), item)
                                     : NULL;
        if (entry == NULL || json_array_append_new(hist, entry) < 0)
            return -2;
    }
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Prepares sql, binds the integers args[0..nargs-1] to ?1.. in order, skipping ?text_at, where the pattern goes
 * when text_at > 0; runs it and appends to hist.  Returns as collect. */
static int
query(sqlite3 *db, const char *sql, const request_t *r, const sqlite3_int64 *args, int nargs, int text_at,
      json_t *hist)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    for (int i = 0, p = 1; i < nargs; i++, p++) {
        if (p == text_at)
            p++;
        sqlite3_bind_int64(st, p, args[i]);
    }
    if (text_at > 0)
        sqlite3_bind_text(st, text_at, r->pattern, -1, SQLITE_STATIC);
    int rc = collect(st, r, hist);
    sqlite3_finalize(st);
    return rc;
}

/* The columns collect reads, for a history row h and its output o. */
#define SELECT_ENTRY \
    "SELECT h.session, h.line, h.source_raw, h.source, o.output FROM history AS h" \
    " LEFT JOIN output_history AS o ON o.session = h.session AND o.line = h.line "

/* Reverses the order of the array's elements in place. */
static void
reverse(json_t *arr)
{
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n / 2; i++) {
        json_t *a = json_incref(json_array_get(arr, i)), *b = json_incref(json_array_get(arr, n - 1 - i));
        json_array_set_new(arr, i, b);
        json_array_set_new(arr, n - 1 - i, a);
    }
}

/* Fills hist for r.  Returns as collect. */
static int
answer(pyc_history_t *self, const request_t *r, json_t *hist)
{
    int rc;
    switch (r->access) {
    case ACCESS_TAIL: {
        /* As IPython's HistoryManager.get_tail: the current session's cells count as the latest, even when a
         * kernel started later has a higher session number; each query walks the primary key backwards. */
        sqlite3_int64 a[2] = { self->session, r->n };
        rc = query(self->db, SELECT_ENTRY "WHERE h.session = ?1 ORDER BY h.line DESC LIMIT ?2", r, a, 2, 0, hist);
        a[1] = r->n - (json_int_t)json_array_size(hist);
        if (rc == 0 && a[1] > 0)
            rc = query(self->db, SELECT_ENTRY "WHERE h.session != ?1 ORDER BY h.session DESC, h.line DESC LIMIT ?2",
                       r, a, 2, 0, hist);
        reverse(hist);
        return rc;
    }
    case ACCESS_RANGE: {
        json_int_t session = r->session <= 0 ? r->session + self->session : r->session;
        json_int_t start = r->start, stop = r->has_stop ? r->stop : 0;
        bool to_end = stop == 0; /* IPython tests `not stop` before adjusting: 0 is the end, -end is nothing */
        if (start < 0 || stop < 0) {
            /* Python slice semantics over the lines 0..last, as IPython's range of the current session. */
            sqlite3_stmt *st = NULL;
            if (sqlite3_prepare_v2(self->db, "SELECT coalesce(max(line), 0) + 1 FROM history WHERE session = ?1",
                                   -1, &st, NULL) != SQLITE_OK)
                return -1;
            sqlite3_bind_int64(st, 1, session);
            rc = sqlite3_step(st);
            json_int_t end = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
            sqlite3_finalize(st);
            if (rc != SQLITE_ROW)
                return -1;
            if (start < 0)
                start += end;
            if (stop < 0)
                stop += end;
        }
        sqlite3_int64 a[3] = { session, start, stop };
        if (to_end)
            return query(self->db, SELECT_ENTRY "WHERE h.session = ?1 AND h.line >= ?2 ORDER BY h.line", r, a, 2, 0,
                         hist);
        return query(self->db, SELECT_ENTRY "WHERE h.session = ?1 AND h.line >= ?2 AND h.line < ?3 ORDER BY h.line",
                     r, a, 3, 0, hist);
    }
    case ACCESS_SEARCH: {
        /* As IPython's search: the glob is matched against source_raw whatever "raw" says, "unique" keeps the
         * latest row of each distinct source_raw, and n then takes the last n of what is left. */
        sqlite3_int64 a[1] = { r->has_n ? r->n : -1 }; /* LIMIT -1: no limit */
        if (r->unique)
            rc = query(self->db,
                       "SELECT session, line, source_raw, source, output FROM ("
                       "SELECT h.session, h.line, h.source_raw, h.source, o.output, row_number() OVER"
                       " (PARTITION BY h.source_raw ORDER BY h.session DESC, h.line DESC) AS latest"
                       " FROM history AS h LEFT JOIN output_history AS o ON o.session = h.session AND o.line = h.line"
                       " WHERE h.source_raw GLOB ?1)"
                       " WHERE latest = 1 ORDER BY session DESC, line DESC LIMIT ?2",
                       r, a, 1, 1, hist);
        else
            rc = query(self->db,
                       SELECT_ENTRY "WHERE h.source_raw GLOB ?1 ORDER BY h.session DESC, h.line DESC LIMIT ?2", r,
                       a, 1, 1, hist);
        reverse(hist);
        return rc;
    }
    }
    return 0;
}

json_t *
pyc_history_request(pyc_history_t *self, json_t *content)
{
    request_t r;
    json_t *e = parse_request(content, &r);
    if (e != NULL)
        return e;
    json_t *hist = json_array();
    if (hist == NULL)
        return NULL;
    int rc = self != NULL ? answer(self, &r, hist) : 0;
    if (rc == -2) {
        json_decref(hist);
        return NULL;
    }
    if (rc < 0) {
        json_decref(hist);
        return error_reply("HistoryError", "history: %s", sqlite3_errmsg(self->db));
    }
    return json_pack("{s:s, s:o}", "status", "ok", "history", hist);
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
