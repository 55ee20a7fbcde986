/*
 * history.h -- the kernel's execution history, kept in SQLite so that it survives restarts.
 *
 * Each time the kernel starts it opens the history file and begins a new numbered session, as IPython does;
 * every executed cell is recorded as (session, line = execution_count, source) and, when the cell had a
 * result, its text/plain output.  The history answers Jupyter's history_request (messaging spec 5.3) with the
 * semantics of ipykernel: "tail", "range" and "search".  The storage layout, the query semantics and the
 * numbers behind them are described at the top of history.c.
 *
 * Thread-safety.  pyc_history_queue and pyc_history_pending may be called from any thread at any time (the
 * main thread queues each cell); every other call must be made by one thread at a time, which the kernel
 * ensures with its writer's work lock (persist.h): the writer thread flushes, the main thread answers
 * history_request while holding it.  The object must not be used in a process forked from the one that opened
 * it (a SQLite connection must not cross fork()).  Two kernels (two processes) may share one file: SQLite's
 * locking arbitrates between them, and no write transaction is held between calls (history.c says how cells are
 * queued and written off the request path).
 */
#ifndef PYC_HISTORY_H
#define PYC_HISTORY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef struct pyc_history pyc_history_t;

/* Opens or creates the database at path (":memory:" allowed), creating parent directories (mode 0700),
 * and starts a new session numbered one more than the highest in the file.  Returns NULL with err on failure
 * (the kernel then runs without history and logs the reason).
 *
 * A new file is created with mode 0600, since it holds whatever code the user typed.  Trailing newlines of
 * sources are stripped, as IPython strips them. */
pyc_history_t *pyc_history_open(const char *path, pyc_error_t *err);

/* NULL-safe; commits what is pending: it marks the session ended (end time and number of cells), closes the
 * database and sets *self_p to NULL.  A failure to write the end mark is not reported: the history is
 * intact without it, as it is after a crash. */
void pyc_history_close(pyc_history_t **self_p);

/* The number of the current session (1 for the first one in a file), or 0 when self is NULL. */
int pyc_history_session(const pyc_history_t *self);

/* This connection goes on writing the session `session` of the same file (a kernel restored from a snapshot
 * continues the history of the kernel it replaces), instead of the one it opened, whose row goes (it holds no
 * line yet).  Returns 0, or -1 with err (the connection keeps its own session). */
int pyc_history_continue(pyc_history_t *self, int session, pyc_error_t *err);

/* Records cell `line` (the execution_count) of the current session; output may be NULL (the text/plain of
 * the result, if any).  Cheap: must not cost a disk sync per cell.
 *
 * The write is committed before the call returns (it survives a crash of the kernel, not necessarily a
 * power loss).  Returns 0, or -1 with err when the write fails, including when `line` is already recorded
 * in this session (IPython refuses such duplicates too).  source and output must be NUL-terminated UTF-8. */
int pyc_history_add(pyc_history_t *self, int line, const char *source, const char *output, pyc_error_t *err);

/* Queues cell `line` (the execution_count) of the current session, copied, for the next pyc_history_flush.
 * Touches no database and takes no file lock, so that recording a cell never waits for another kernel that
 * shares the file; it waits for a flush in another thread only while that copies the queue's head.  Returns 0,
 * or -1 with err (out of memory, or PYC_EIO when 65536 cells already wait). */
int pyc_history_queue(pyc_history_t *self, int line, const char *source, pyc_error_t *err);

/* Writes the cells queued when it starts in one transaction, waiting at most wait_ms for another kernel's lock
 * on the file; cells queued meanwhile wait for the next call.  Returns 0 when those were written; -1 with err
 * otherwise: PYC_ETIMEDOUT when the file stayed locked (every cell stays queued for the next call), or a
 * database error.  A cell whose line is already
 * recorded is dropped with an error.  NULL-safe. */
int pyc_history_flush(pyc_history_t *self, int wait_ms, pyc_error_t *err);

/* How many queued cells wait to be written.  NULL-safe. */
size_t pyc_history_pending(pyc_history_t *self);

/* Sets the output of an already-added line of the current session (result arrives after the source).
 * Replaces an earlier output of that line; output NULL removes it.  Returns 0, or -1 with err when the line
 * was never added or the write fails. */
int pyc_history_set_output(pyc_history_t *self, int line, const char *output, pyc_error_t *err);

/* Answers a history_request: `content` is the request content (jansson object); returns a new reply content
 * object {"status": "ok", "history": [...]} or {"status": "error", "ename", "evalue", "traceback": []} for bad
 * arguments.  Never NULL except out of memory.
 *
 * The caller keeps its reference to content.  Entries are [session, line, source] when "output" is false
 * and [session, line, [source, output_or_null]] when it is true, in ascending (session, line) order (except
 * that "tail" puts the current session last); session numbers are absolute, also for the current session.
 * The fields are those of the spec:
 *   hist_access_type  "tail", "range" or "search" (required);
 *   raw, output       booleans, default true and false;
 *   tail:   n         an integer >= 0 (required): the last n cells over all sessions, the current session
 *                     counting as the latest (as IPython's get_tail);
 *   range:  session   0 = current, negative = counted back from it (-1 the previous one), positive = absolute;
 *           start, stop  lines start..stop-1; stop null, absent or 0 means to the end; negative values count
 *                     back from the end of the session, like Python slices;
 *   search: pattern   a glob (SQLite GLOB: *, ?, [...], case-sensitive) that must match the whole source;
 *           n         the last n matches, null or absent for all;  unique  keep only the latest of equal sources.
 * A database error gives an error reply too (ename "HistoryError").  When self is NULL (the kernel runs without
 * history) the request is still checked, and a good one is answered with an empty history, as ipykernel does
 * when its history is disabled. */
json_t *pyc_history_request(pyc_history_t *self, json_t *content);

/* Internal to history.c and history_query.c: answers content from db (NULL: an empty history) for the current
 * session number session, as pyc_history_request. */
typedef struct sqlite3 sqlite3;
json_t *pyc__history_query(sqlite3 *db, int session, json_t *content);

/* A history_reply holds at most PYC_HISTORY_REPLY_ENTRIES entries (PYC_HISTORY_REPLY_MAX sets another) and
 * about PYC_HISTORY_REPLY_BYTES of their text; a reply cut to them says so in "pyc": {"truncated": true, ...}. */
#define PYC_HISTORY_REPLY_ENTRIES ((size_t)10000)
#define PYC_HISTORY_REPLY_BYTES ((size_t)16 << 20)

/* The default path: $PYC_HISTORY_FILE if set, else <jupyter data dir>/pyc/history.sqlite where the data dir is
 * $JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else $HOME/.local/share/jupyter.  Writes into out.
 *
 * Variables that are set but empty count as unset (as in jupyter_core); without HOME the home directory comes
 * from the password database.  Returns 0, or -1 when no home directory is known or the path does not fit in
 * cap bytes (out is then "" when cap > 0). */
int pyc_history_default_path(char *out, size_t cap);

/* Opens the history at the default path (pyc_history_default_path).  Returns NULL with err when there is no
 * such place or it cannot be opened. */
pyc_history_t *pyc_history_open_default(pyc_error_t *err);

/* Before a kernel forks children that will each open the history (sessions forked from a template): loads
 * libsqlite3 and runs sqlite3_initialize here, once, so that the children share those pages instead of each
 * writing its own (measured: 90 of the 600 pages a forked session wrote before its first cell was idle).  A
 * library that cannot be loaded is left for pyc_history_open to report. */
void pyc_history_warm(void);

#endif
