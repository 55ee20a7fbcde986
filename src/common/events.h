/*
 * events.h -- the event log of pyc sessions: one JSON object per line in pyc-events.jsonl in the runtime dir,
 * written by the kernels of `pyc` sessions (ready, cell_started, cell_done, closed) and by the `pyc` command
 * (closed: killed, replaced, vanished), read by `pyc events` and `pyc ls` (README, "pyc events").
 *
 * A line is {"seq": N, "time": T, "session": NAME, "pid": P, "event": E, ...more fields}: seq counts from 1
 * across the whole log (both files), one above the last line's; time is the wall clock in seconds.  Every
 * append takes flock(2) on the file, so that lines of several processes never interleave and their seqs never
 * repeat; a writer remembers where its own last line ended, so that while nobody else writes, an append costs
 * one flock, one fstat, one lstat and one write (about 10 us), with no read.  The file is opened once per
 * writer, never through a symbolic link (O_NOFOLLOW), created with mode 0600, and refused unless it is a
 * regular file of ours.  A writer may be shared by the threads of a process (a mutex orders them, since
 * flock is per open file, not per thread).
 *
 * Bounded on disk: an append that would take the file past max_bytes (1 MiB, or $PYC_EVENTS_MAX_BYTES)
 * first renames it to pyc-events.1.jsonl (replacing the older one) and starts a new file; the log therefore
 * holds at most about twice max_bytes, and seq goes on across the rename.  A writer that finds the path no
 * longer names the file it has open (another writer rotated it) opens the new one.  One line is at most
 * PYC_EVENTS_MAX_LINE bytes: callers cut long fields (a traceback) to fit.
 *
 * Readers take no lock: a line is written with one write(2) to a file opened O_APPEND, and a last line
 * without its newline (a write in progress) is left for the next read.  A line that is not an event (not a
 * JSON object with seq, time, session, pid and event of the right types) is skipped.
 */
#ifndef PYC_EVENTS_H
#define PYC_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

#define PYC_EVENTS_FILE "pyc-events.jsonl"
#define PYC_EVENTS_OLD_FILE "pyc-events.1.jsonl"
#define PYC_EVENTS_MAX_BYTES ((size_t)1 << 20)
#define PYC_EVENTS_MAX_LINE ((size_t)64 << 10)

/* ---- writing ----------------------------------------------------------------------------------------------- */

typedef struct pyc_events pyc_events_t;

/* A writer of the log in directory dir (which the caller has checked is private: the runtime dir).  The
 * file is opened (created) now.  max_bytes 0 means $PYC_EVENTS_MAX_BYTES (a whole number of bytes, at least
 * 4096) or PYC_EVENTS_MAX_BYTES.  NULL with err on failure. */
pyc_events_t *pyc_events_open(const char *dir, size_t max_bytes, pyc_error_t *err);

/* Closes the writer; NULL-safe, clears the caller's pointer. */
void pyc_events_destroy(pyc_events_t **ev_p);

/* Opens the file again, for a forked child: an open file description and its flock are shared across
 * fork(2), so a child that kept its parent's could write while its parent holds "the" lock.  Returns 0 or -1
 * (err; the writer then writes nothing). */
int pyc_events_reopen(pyc_events_t *ev, pyc_error_t *err);

/* Appends the event {"seq", "time", "session", "pid", "event", then the members of fields (borrowed; may be
 * NULL), in their order}.  Waits up to timeout_ms for the lock (-1: as long as it takes; the crash path gives
 * a short time, since it must end).  Returns the event's seq (> 0), or -1 with err: the lock was not had in
 * time, the line is longer than PYC_EVENTS_MAX_LINE, or the file failed. */
long long pyc_events_append(pyc_events_t *ev, const char *session, long pid, const char *event, json_t *fields,
                            int timeout_ms, pyc_error_t *err);

/* ---- reading ----------------------------------------------------------------------------------------------- */

/* One event as read.  The strings and obj belong to the reader and live until the callback returns (take a
 * reference of obj to keep it). */
typedef struct pyc_event {
    long long seq;
    double time;
    const char *session;
    long pid;
    const char *event;
    const char *reason;          /* "reason" of a closed event, or NULL */
    int signal;                  /* "signal" of a crashed one, or 0 */
    json_t *obj;                 /* the whole line */
} pyc_event_t;

/* Called for each event; a non-zero return stops the read (and is returned by it). */
typedef int (*pyc_events_fn)(void *ctx, const pyc_event_t *e);

/* Parses one line (without its newline).  Returns 0 with *out filled (release it with pyc_event_clear), or
 * -1 with err when the line is not an event. */
int pyc_event_parse(const char *line, size_t len, pyc_event_t *out, pyc_error_t *err);
void pyc_event_clear(pyc_event_t *e);

/* Calls fn for each event of the complete lines of buf[0..len) whose seq is above since, skipping lines that
 * are not events.  Returns the bytes consumed (up to the end of the last complete line); *stop gets fn's
 * non-zero return when it stopped the scan (else 0). */
size_t pyc_events_scan(const char *buf, size_t len, long long since, pyc_events_fn fn, void *ctx, int *stop);

/* Where a reader is: the seq of the last event it was given, and how far it read which current file. */
typedef struct pyc_events_cursor {
    long long seq;
    dev_t dev;
    ino_t ino;                   /* 0: nothing read yet */
    off_t offset;
    bool gaps;                   /* set by the caller: report lost events to fn (see pyc_events_read) */
    long long newest;            /* out: the largest seq any read of this cursor has seen in the log, 0: none */
} pyc_events_cursor_t;

/* The event name of the gap a reader reports (never a line of the log). */
#define PYC_EVENTS_GAP "gap"

/* Gives fn every event of the log in dir with a seq above cur->seq, oldest first, and moves the cursor past
 * them.  The first read (cur->ino 0) reads the old file, then the current one; later reads go on in the
 * current file from where the last stopped, and read both again (still only seqs above cur->seq) after a
 * rotation.  A missing file is an empty one.  Returns 0, fn's non-zero return, or -1 with err.
 *
 * With cur->gaps, a cursor above 0 whose next event is not the one right after it (the log was rotated past
 * it: the events between were dropped with the old file) first gives fn a gap: an event that is no line of
 * the log, {"seq": the last lost seq, "time": the time of the first event kept after it, "session": null,
 * "pid": null, "event": "gap", "from": the first lost seq, "to": the last, "lost": how many}, with session ""
 * and pid 0 in the pyc_event_t.  A reader that keeps the last seq it was given as its cursor thus resumes
 * after the gap. */
int pyc_events_read(const char *dir, pyc_events_cursor_t *cur, pyc_events_fn fn, void *ctx, pyc_error_t *err);

/* The name of a signal ("SIGSEGV"), or "signal N" into buf. */
const char *pyc_events_signal_name(int sig, char *buf, size_t cap);

#endif
