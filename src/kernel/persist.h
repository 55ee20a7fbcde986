/*
 * persist.h -- the kernel's writer thread: history commits and checkpoint appends, off the request path.
 *
 * A cell's history row (history.h, SQLite) and its checkpoint text (checkpoint.h, an append-only file) used to
 * be written by the main thread: the checkpoint with a write(2) before the execute_reply, the history in one
 * SQLite transaction when the kernel went idle.  That cost a one-at-a-time request about 60 us of the main
 * thread's CPU (BEGIN, INSERT, COMMIT: 4 pwrite64, 6 fcntl) and, every ~150 cells, a 5-20 ms WAL checkpoint
 * (fdatasync) that delayed the next request: the p99 of the round trip.  Now the main thread only queues
 * (pyc_history_queue, pyc_checkpoint_add: a copy in memory, no system call) and kicks this thread once the
 * execute_reply is sent; the thread writes the checkpoint text first (one write(2) per wake) and then commits
 * the queued history rows in one transaction (SQLite's WAL checkpoints happen here too).  Under a pipelined
 * burst a wake takes whatever has queued meanwhile, so the batches grow with the load.
 *
 * One thread with a lock held around its work was chosen over batching on the main thread (one transaction
 * kept open across a burst, committed when idle or every 100 ms): that keeps the commit and the WAL
 * checkpoint's fdatasync in the main thread's path, only rarer, and a transaction held open across cells
 * would lock out the user's other kernels that share the history file.
 *
 * Durability.  What the thread has written is in the kernel's files and survives a crash of the kernel
 * (SIGKILL, a segfault), not necessarily a power loss (no fsync, as before).  A cell is written normally well
 * under a millisecond after its execute_reply left; a crash inside that window can lose the last cells replied
 * to.  History rows wait in memory, retried every PYC_PERSIST_RETRY_MS, while another kernel holds the shared
 * history file locked; the checkpoint does not wait for them.
 *
 * Locks.  The work lock (pyc_persist_hold) is held by the thread while it writes, and by the main thread while
 * it uses the history connection itself (history_request flushes the queue first, so it sees every earlier
 * cell).  The fork handlers hold it too, so that no fork happens while the thread is inside SQLite (whose
 * global mutexes a child would otherwise inherit locked) or between a checkpoint's buffer and its file.  A
 * lock hold lasts one batch: a checkpoint write, and a commit that waits at most PYC_PERSIST_LOCK_WAIT_MS for
 * another kernel's lock on the file (plus a WAL checkpoint's fdatasync when one falls due).
 *
 * Thread-safety: pyc_persist_kick, _hold and _release from any thread; _attach, _new and _destroy from the
 * main thread.
 */
#ifndef PYC_PERSIST_H
#define PYC_PERSIST_H

#include "checkpoint.h"
#include "error.h"
#include "history.h"

/* How long a commit waits for another kernel's lock on the history file before the thread lets go of the
 * work lock and tries again PYC_PERSIST_RETRY_MS later. */
#define PYC_PERSIST_LOCK_WAIT_MS 5
#define PYC_PERSIST_RETRY_MS 50

typedef struct pyc_persist pyc_persist_t;

/* Starts the writer thread (with every signal blocked: SIGINT belongs to the main thread).  Returns NULL with
 * err when it cannot be started. */
pyc_persist_t *pyc_persist_new(pyc_error_t *err);

/* Tells the thread what to write: either may be NULL (off, or not made yet).  The caller keeps ownership and
 * must keep both alive until it attaches others or destroys p.  NULL-safe. */
void pyc_persist_attach(pyc_persist_t *p, pyc_history_t *history, pyc_checkpoint_t *checkpoint);

/* Wakes the thread when it sleeps: a mutex and, at most, one futex wake.  NULL-safe. */
void pyc_persist_kick(pyc_persist_t *p);

/* Holds the thread off its work (it finishes the batch it is writing first) and releases it.  While held, the
 * caller may use the attached history and checkpoint as the thread does.  NULL-safe. */
void pyc_persist_hold(pyc_persist_t *p);
void pyc_persist_release(pyc_persist_t *p);

/* In a child process made by fork(2) while the fork handlers held p: the thread does not exist here, so kicks
 * do nothing from now on (a kernel's child makes a new one; a user's child writes nothing).  Releases the
 * locks the handlers took. */
void pyc_persist_after_fork_child(pyc_persist_t *p);

/* Stops the thread after a last batch (waiting for a locked history file at most as long as a history_request
 * does), and frees p; the attached objects stay the caller's.  NULL-safe; clears *p_p. */
void pyc_persist_destroy(pyc_persist_t **p_p);

/* The work lock's side of the fork handlers: take (prepare) and give back (parent). */
void pyc_persist_fork_prepare(pyc_persist_t *p);
void pyc_persist_fork_parent(pyc_persist_t *p);

#endif
