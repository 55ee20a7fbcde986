/*
 * subshellint.h -- what subshell.c (a subshell's thread, routing, control requests), subcell.c (its cells),
 * thisshell.c (which shell a thread serves) and control.c (interrupts) share: the subshell object and the
 * calls between those files.  Nothing else includes it.
 */
#ifndef PYC_SUBSHELLINT_H
#define PYC_SUBSHELLINT_H

#include "kernelint.h"

#include "zqueue.h"

struct pyc__subshell {
    pyc__subshell_t *next;       /* in the kernel's list, under subshells_lock */
    pyc_kernel_t *k;
    char id[PYC_MSG_ID_LEN + 1];
    pthread_t thread;
    pyc_zqueue_t q;              /* its requests; the eventfd also wakes the thread to stop */
    atomic_bool stop;
    atomic_bool done;            /* its thread has returned: a join will not wait */
    atomic_ulong cell_token;     /* the token of the cell it runs (pyc_py_interrupt_cells), else 0 */

    /* The limits of its cells: the per-cell deadline and CPU time, kept by a guard of its own (its thread is
     * started by the first cell with a limit).  Stuck past the grace, a subshell cell is answered by the
     * guard's thread (guard_stuck), and goes on in the subshell's thread: see execute(). */
    pyc_guard_t *guard;
    pyc_outgate_t out;           /* the output cap of its cells (host.c counts what its thread publishes) */
    atomic_bool stuck_answered;  /* guard_stuck has sent the reply and the idle of the running request */
    pyc_cellclock_t clock;       /* the running cell's */
    double cell_timeout, cell_cpu;
    bool cell_silent, cell_stop_on_error;   /* the running cell's request asked for these */

    /* Its thread only. */
    int execution_count;
    const pyc_msg_t *current;    /* the request being answered */
    bool allow_stdin;
};

/* Runs an execute_request on the subshell's thread (s->current is msg), and answers it. */
void pyc__subcell_execute(pyc__subshell_t *s, const pyc_msg_t *msg);

/* The callbacks of the subshell's guard (its cells' deadline and CPU time), with s as their context. */
pyc_guard_callbacks_t pyc__subcell_guard_callbacks(pyc__subshell_t *s);

/* Raises KeyboardInterrupt in the subshell's running cell, if one runs, from a short-lived thread: the caller
 * never waits for the GIL (control.c). */
void pyc__subshell_interrupt_cell(pyc__subshell_t *s);

/* Binds the calling thread to subshell s (thisshell.c): its requests, output gate and stdin are s's. */
void pyc__subshell_bind_thread(pyc__subshell_t *s);

#endif
