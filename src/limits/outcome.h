/*
 * outcome.h -- what happened to a cell, as the kernel tells it: metadata.pyc of every execute_reply (README,
 * "Limits and outcomes"), the error of a cell stopped by a limit, and the clocks behind wall_time and
 * cpu_time.
 *
 * Pure functions of their arguments (the clocks aside), so that the truthfulness of every outcome can be
 * unit-tested without a kernel.
 */
#ifndef PYC_OUTCOME_H
#define PYC_OUTCOME_H

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

#include "buf.h"
#include "outgate.h"

/* Wall and CPU clocks at the start of a cell. */
typedef struct pyc_cellclock {
    struct timespec wall, cpu;
    double children_cpu;         /* CPU seconds of children reaped before the cell */
} pyc_cellclock_t;

void pyc_cellclock_start(pyc_cellclock_t *c);

/* Wall and CPU seconds since pyc_cellclock_start; CPU includes the children reaped meanwhile (an isolated
 * cell's process is one). */
void pyc_cellclock_read(const pyc_cellclock_t *c, double *wall, double *cpu);

/* The name of each limit in metadata.pyc.limit, indexed by PYC_GUARD_* (NULL for PYC_GUARD_NONE). */
extern const char *const pyc_outcome_limit_names[];

/* metadata.pyc.outcome of a cell that the limit `why` (PYC_GUARD_*, not NONE) stopped: "lifetime", "error" for
 * the memory cap (the cell's MemoryError), else "timeout" (its deadline, or its CPU time: both are time
 * limits, and a client that knows the outcome "timeout" treats a CPU limit right without knowing it). */
const char *pyc_outcome_of_limit(int why);

/* What stopped a cell, for its error. */
typedef struct pyc_limit_stop {
    const char *what;            /* what was stopped ("the complete_request"); NULL: the cell */
    int why;                     /* PYC_GUARD_DEADLINE, _LIFETIME, _MEMORY or _CPU */
    bool stuck;                  /* it did not stop within its grace: the kernel is ending */
    bool isolated;               /* it ran in a forked child, which was killed */
    double cell_timeout;         /* its deadline, seconds */
    double cell_cpu;             /* its CPU time limit, seconds, for PYC_GUARD_CPU */
    double lifetime, grace;      /* the kernel's */
    double memory_cap;           /* bytes, for PYC_GUARD_MEMORY */
} pyc_limit_stop_t;

/* The error of a cell stopped by a limit: ename CellTimeout (its deadline; RequestTimeout for another
 * request that ran user code), CellCPUTimeout (its CPU time), MemoryError or KernelLifetimeEnded.  traceback
 * (borrowed, may be NULL) is where an in-kernel cell was when it was stopped; its KeyboardInterrupt line is
 * replaced by the limit's own.  A new reference. */
json_t *pyc_outcome_limit_error(const pyc_limit_stop_t *s, json_t *traceback);

/* Everything metadata.pyc says. */
typedef struct pyc_outcome {
    const char *outcome;         /* ok, error, interrupted, timeout, lifetime, aborted, bad_request, died */
    bool interrupted;            /* an interrupt reached the cell */
    int why;                     /* PYC_GUARD_*: the limit that stopped it (timed_out only for the time
                                  * limits: a deadline, the CPU time, the lifetime) */
    bool memory_hit;             /* it raised MemoryError under a memory cap */
    bool lost;                   /* the kernel is ending at once (a stuck cell): its state is lost */
    bool kernel_ending;          /* the kernel shuts down after this reply (cleanly: the lifetime, a
                                  * shutdown_request); its state is lost too.  Either makes metadata.pyc
                                  * say state "lost" and kernel_ending true; neither: state "intact". */
    pyc_outgate_stats_t output;
    double wall, cpu;
} pyc_outcome_t;

/* metadata.pyc of an execute_reply (a new reference). */
json_t *pyc_outcome_metadata(const pyc_outcome_t *o);

/* The same object as text, for the hot path (about 10x cheaper than building and dumping it with jansson):
 * appends to b what pyc_outcome_metadata(o), with extra's members merged in, dumps to with JSON_COMPACT --
 * the same members in the same order, of the same types -- except that wall_time and cpu_time are rounded
 * to the nanosecond, the resolution of the clocks they come from.  extra (borrowed, may be NULL) is an
 * object whose members follow the fixed ones, in its order, as json_object_update adds them (an isolated
 * cell's "isolated", "merged", "skipped").  Returns 0, or -1 with b as it was when the text cannot say
 * exactly that, and the caller must use pyc_outcome_metadata: extra names one of the fixed members (which
 * json_object_update would replace in place) or is not an object, o->outcome is NULL, a time is not in
 * [0, 1e9) seconds, or b's cap or memory ran out. */
int pyc_outcome_metadata_text(pyc_buf_t *b, const pyc_outcome_t *o, json_t *extra);

/* A cell's error ({"ename", "evalue", "traceback"}, borrowed) cut to about `budget` bytes of JSON, the room
 * the output cap leaves: evalue is cut to 1000 characters, then the traceback's lines are dropped from the
 * top (the last lines say where it failed), with one line that says how many went.  At least ename, the
 * start of evalue and that line are always kept: the client must learn that the cell failed.  A new
 * reference (the same error, when it fits). */
json_t *pyc_outcome_fit_error(json_t *error, size_t budget);

/* The error as it may be published under an output cap: pyc_outcome_fit_error's, and when that is still
 * larger than budget bytes (compact JSON), without its traceback and with evalue cut to fit; NULL when not
 * even {"ename", "evalue": "", "traceback": []} fits.  A new reference; error is not changed. */
json_t *pyc_outcome_error_within(json_t *error, size_t budget);

/* True when a cell's error ({"ename", ...}, borrowed) is a MemoryError. */
bool pyc_outcome_is_memory_error(json_t *error);

#endif
