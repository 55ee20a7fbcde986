/*
 * persist.h -- the kernel's history writer thread: SQLite commits off the request path.
 *
 * A cell's history row used to be committed by the main thread when it went idle after the cell: one SQLite
 * transaction (BEGIN IMMEDIATE, INSERT, COMMIT: 4 pwrite64 and 6 fcntl) of about 60 us of the main thread's
 * CPU per one-at-a-time request, and every ~150 cells a WAL checkpoint whose fdatasync (5-20 ms) delayed the
 * next request: the p99 of the round trip.  Now the main thread only queues the row (pyc_history_queue: a copy
 * in memory), and the thread commits every queued row in one transaction; SQLite's WAL checkpoints run here
 * too.  The kernel kicks it lazily, when it goes idle after a request and when another request follows at
 * once: cells are committed in batches, every PYC_PERSIST_BATCH_MS or every PYC__HISTORY_BATCH_CELLS cells
 * (kernelint.h), whichever comes first.  A kick when idle used to commit at once, one transaction per cell for
 * cells run one at a time: about 40 us of the thread's CPU and one more wake per request, a sixth of the
 * kernel's CPU for a `pass` cell.  A batch in 100 ms costs two wakes (the kick that makes the thread's sleep a
 * timed one, and its end) for any number of cells, and no timer runs while nothing is queued.
 *
 * A thread was chosen over batching on the main thread (one transaction kept open across a burst, committed
 * when idle or every 100 ms): batching keeps the commit and the WAL checkpoint's fdatasync in the main thread's
 * path, only rarer, and a transaction held open across cells locks out the user's other kernels that share the
 * history file.  The checkpoint (checkpoint.h) stays a write(2) on the main thread before the reply: it is one
 * system call, and it keeps the promise that every cell replied to is in the checkpoint.
 *
 * Durability.  A committed row survives a crash of the kernel (SIGKILL, a segfault), not necessarily a power
 * loss (synchronous=NORMAL, as before).  A crash before the commit loses the rows replied to since the last
 * one: at most those of the last PYC_PERSIST_BATCH_MS (plus the commit's own time) or of a batch.  While
 * another kernel holds the shared file locked, rows wait in memory, retried every PYC_PERSIST_RETRY_MS.
 *
 * Locks.  The work lock (pyc_persist_hold) is held by the thread while it writes, and by the main thread while
 * it uses the history connection itself (history_request flushes the queue first, so it sees every earlier
 * cell).  The fork handlers hold it too, so that no fork happens while the thread is inside SQLite, whose
 * global mutexes a child (which opens a connection of its own) would otherwise inherit locked.  A hold lasts
 * one batch: a commit that waits at most PYC_PERSIST_LOCK_WAIT_MS for another kernel's lock on the file, plus a
 * WAL checkpoint's fdatasync when one falls due.
 *
 * Thread-safety: pyc_persist_kick, _kick_lazy, _hold and _release from any thread; _attach, _new and _destroy from the
 * main thread.
 */
#ifndef PYC_PERSIST_H
#define PYC_PERSIST_H

#include "error.h"
#include "history.h"

/* How long a commit waits for another kernel's lock on the history file before the thread lets go of the
 * work lock and tries again PYC_PERSIST_RETRY_MS later. */
#define PYC_PERSIST_LOCK_WAIT_MS 5
#define PYC_PERSIST_RETRY_MS 50

/* The writer thread's name (/proc/PID/task/TID/comm). */
#define PYC_PERSIST_THREAD_NAME "pyc-history"

/* The longest a lazy kick (pyc_persist_kick_lazy) waits for its batch. */
#define PYC_PERSIST_BATCH_MS 100

typedef struct pyc_persist pyc_persist_t;

/* Starts the writer thread (with every signal blocked: SIGINT belongs to the main thread).  Returns NULL with
 * err when it cannot be started. */
pyc_persist_t *pyc_persist_new(pyc_error_t *err);

/* Tells the thread which history to write (NULL: none).  The caller keeps ownership and must keep it alive
 * until it attaches another or destroys p.  NULL-safe. */
void pyc_persist_attach(pyc_persist_t *p, pyc_history_t *history);

/* Wakes the thread when it sleeps, for a batch now: a mutex and, at most, one futex wake.  NULL-safe. */
void pyc_persist_kick(pyc_persist_t *p);

/* Asks for a batch within PYC_PERSIST_BATCH_MS: wakes the thread only when no batch is asked for yet (to
 * start its clock), so that kicks from every request of a burst cost a mutex each.  NULL-safe. */
void pyc_persist_kick_lazy(pyc_persist_t *p);

/* Holds the thread off its work (it finishes the batch it is writing first) and releases it.  While held, the
 * caller may use the attached history as the thread does.  NULL-safe. */
void pyc_persist_hold(pyc_persist_t *p);
void pyc_persist_release(pyc_persist_t *p);

/* In a child process made by fork(2) while the fork handlers held p: the thread does not exist here, so kicks
 * do nothing from now on (a kernel's child makes a new one; a user's child writes nothing).  Releases the
 * locks the handlers took. */
void pyc_persist_after_fork_child(pyc_persist_t *p);

/* Stops the thread, writes a last batch (waiting for a locked history file at most as long as a
 * history_request does), and frees p; the history stays the caller's.  NULL-safe; clears *p_p. */
void pyc_persist_destroy(pyc_persist_t **p_p);

/* The work lock's side of the fork handlers: take (prepare) and give back (parent). */
void pyc_persist_fork_prepare(pyc_persist_t *p);
void pyc_persist_fork_parent(pyc_persist_t *p);

#endif
