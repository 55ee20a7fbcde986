/*
 * guard.h -- the thread that keeps a session's time limits: idle timeout, lifetime, the per-cell deadline
 * and its CPU time, their grace, and the shutdown grace (DESIGN.md section 6).
 *
 * The guard never touches Python or a socket itself: it calls the kernel back, from its own thread.
 *   on_interrupt(why)   a cell ran past its deadline, spent its CPU time (PYC_GUARD_CPU), or (PYC_GUARD_MEMORY)
 *                       grew the process past its memory watch: interrupt it.  Called again once, half way
 *                       through the grace, in case the first interrupt was eaten.  Runs with the guard's lock
 *                       held: it must only signal, never wait or call back into the guard.
 *   on_stuck(why)       the interrupted cell has not stopped within the grace: the guard now owns the cell's
 *                       end; the callback reports it to the client and ends the process.  It must not return.
 *   on_expire(why)      the kernel was idle too long, or its lifetime is over: shut down cleanly (and
 *                       interrupt a running cell).  Runs with the guard's lock held, like on_interrupt.
 *   on_overdue()        the closing shutdown took longer than its grace: end the process now.  Must not return.
 *
 * The main thread brackets every cell with pyc_guard_cell_begin / pyc_guard_cell_end.  Their handshake with
 * on_stuck is a compare-and-swap on the cell's state, so exactly one of the two ends a cell: when cell_end
 * loses, the main thread must not touch the channels again (the process is about to end).
 */
#ifndef PYC_GUARD_H
#define PYC_GUARD_H

#include <stdbool.h>

#include "clock.h"
#include "error.h"
#include "limit.h"

typedef struct pyc_guard pyc_guard_t;

/* Why a limit acted. */
enum { PYC_GUARD_NONE = 0, PYC_GUARD_DEADLINE, PYC_GUARD_LIFETIME, PYC_GUARD_IDLE, PYC_GUARD_MEMORY, PYC_GUARD_CPU };

/* The number of PYC_GUARD_* values, for tables indexed by them. */
#define PYC_GUARD_NWHY (PYC_GUARD_CPU + 1)

typedef struct pyc_guard_callbacks {
    void (*on_interrupt)(void *ctx, int why);
    void (*on_stuck)(void *ctx, int why);
    void (*on_expire)(void *ctx, int why);
    void (*on_overdue)(void *ctx);
    void *ctx;
    /* The clock every limit is measured on, in seconds (called with ctx); NULL is CLOCK_MONOTONIC.  Tests
     * give a clock they move by hand, and pyc_guard_poke to have the guard look at it. */
    pyc_clock_fn now;
    /* The process's resident memory in bytes (called with ctx), for the memory watch; NULL: the guard
     * reads /proc/self/statm. */
    unsigned long long (*memory)(void *ctx);
    /* The CPU seconds the running cell's work is measured on (called with ctx), for the CPU limit: any
     * counter that only grows while the cell runs; NULL: the process's CPU clock (CLOCK_PROCESS_CPUTIME_ID,
     * all its threads).  The kernel adds an isolated cell's process. */
    double (*cpu)(void *ctx);
    /* Under an open-file limit (limits.open_files), called every PYC_GUARD_FILES_POLL_MS while a cell runs:
     * the kernel gives its reserve of descriptors back when the cell has taken every other one, so that a
     * client can still connect (to interrupt the cell, to ask how it is) while the cell runs.  NULL: none. */
    void (*files)(void *ctx);
} pyc_guard_callbacks_t;

#define PYC_GUARD_FILES_POLL_MS 200

/* Starts the guard thread.  limits is copied.  Returns NULL with err when the thread cannot start. */
pyc_guard_t *pyc_guard_new(const pyc_limits_t *limits, const pyc_guard_callbacks_t *cb, pyc_error_t *err);

/* Stops and joins the thread; sets *g_p to NULL.  NULL-safe. */
void pyc_guard_destroy(pyc_guard_t **g_p);

/* Any thread: a request arrived or finished; the idle clock starts again. */
void pyc_guard_activity(pyc_guard_t *g);

/* Main thread: a cell starts with this deadline in seconds (0: none besides the lifetime), and may spend `cpu`
 * seconds of the cpu callback's clock (0: no limit).  A cell that spends them is interrupted with why
 * PYC_GUARD_CPU, then treated like one past its deadline (a second interrupt half way through the grace, then
 * on_stuck).  The clock is read at least every PYC_GUARD_CPU_POLL_MAX_MS and, near the limit, every
 * PYC_GUARD_CPU_POLL_MIN_MS: the wait is the least wall time in which the online CPUs could spend what is
 * left, so a cell is stopped within about PYC_GUARD_CPU_POLL_MIN_MS x (CPUs) of CPU past its limit, and a
 * cell that sleeps costs one look a second. */
#define PYC_GUARD_CPU_POLL_MIN_MS 10
#define PYC_GUARD_CPU_POLL_MAX_MS 1000
void pyc_guard_cell_begin(pyc_guard_t *g, double timeout, double cpu);

/* Main thread: the cell ended.  Returns true when the main thread still owns the cell's end, with *why set
 * to the limit that interrupted it (PYC_GUARD_NONE when none did); false when on_stuck has taken over. */
bool pyc_guard_cell_end(pyc_guard_t *g, int *why);

/* Watches the resident memory of the process while cells run (every PYC_GUARD_MEMORY_POLL_MS): a cell that
 * grows it past `limit` bytes is interrupted with why PYC_GUARD_MEMORY, then treated like one past its
 * deadline (a second interrupt, then on_stuck after the grace).  This catches what RLIMIT_DATA does not
 * count (shared and file mappings: mmap(-1, n), a memfd).  A cell that starts above the limit is hit only
 * when it grows further, so that a cell can still free memory.  0 turns the watch off. */
#define PYC_GUARD_MEMORY_POLL_MS 50
void pyc_guard_watch_memory(pyc_guard_t *g, unsigned long long limit);

/* Any thread: the CPU seconds the running cell has spent so far on the cpu callback's clock, or -1 when no
 * cell runs. */
double pyc_guard_cell_cpu(pyc_guard_t *g);

/* Main thread: the kernel is closing; on_overdue runs when it is not done within the shutdown grace. */
void pyc_guard_shutdown(pyc_guard_t *g);

/* Seconds since the guard started (the kernel's uptime). */
double pyc_guard_uptime(const pyc_guard_t *g);

/* Tests with their own clock: makes the guard look at the time now, and returns once it has acted on what is
 * due (its callbacks have returned) and is waiting again.  Returns at once when the thread is not running. */
void pyc_guard_poke(pyc_guard_t *g);

/* After fork, in the child: the inherited guard's thread does not exist there.  Starts a new one with the
 * same limits and callbacks; the lifetime still counts from the parent's start.  Returns 0 or -1 with err. */
int pyc_guard_restart_in_child(pyc_guard_t *g, pyc_error_t *err);

#endif
