/*
 * control.c -- stopping what runs, from any thread: the running cell (a SIGINT to the main thread, or the kill
 * of an isolated cell's process) and the kernel itself (quit: the flag, the interrupt, the main loop woken).
 * Also the requests waiting behind a failed cell (pyc__abort_queue: taken to be aborted), and the cells of
 * subshells: KeyboardInterrupt raised in them from a short-lived thread (the caller never
 * waits for the GIL).  The interrupt_request and shutdown_request handlers (handlers.c), the guard's callbacks
 * (execute.c, subcell.c) and the idle timeout all end here.  A bottom file of src/kernel: signals, threads
 * and the kernel object's atomics only.
 */
#include "subshellint.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "log.h"

void
pyc__interrupt_main(pyc_kernel_t *k)
{
    if (atomic_load(&k->executing))
        pyc__stop_cell(k, (pid_t)atomic_load(&k->iso_pid), ISO_STOP_INTERRUPT);
}

void
pyc__stop_cell(pyc_kernel_t *k, pid_t iso, int why)
{
    if (iso > 0) {
        int none = 0;
        atomic_compare_exchange_strong(&k->iso_stop, &none, why);
        kill(iso, SIGKILL);
        return;
    }
    pthread_kill(k->main_thread, SIGINT);
}

void
pyc__quit(pyc_kernel_t *k)
{
    atomic_store(&k->quit, 1);
    pyc__interrupt_main(k);
    if (k->wake_main != NULL)
        k->wake_main(k->wake_ctx);
}

/* The interrupter: raises KeyboardInterrupt in the given cells (those still running when it has the GIL: py.h),
 * then ends. */
static void *
interrupter(void *arg)
{
    unsigned long *idents = arg;
    size_t n = 0;
    while (idents[n] != 0)
        n++;
    pyc_py_interrupt_cells(idents, n);
    free(idents);
    return NULL;
}

static void
interrupt_idents(unsigned long *idents)
{
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, interrupter, idents) != 0)
        free(idents);
    pthread_attr_destroy(&attr);
}

void
pyc__subshell_interrupt_cell(pyc__subshell_t *s)
{
    unsigned long *one = calloc(2, sizeof *one);
    if (one != NULL && (one[0] = atomic_load(&s->cell_token)) != 0)
        interrupt_idents(one);
    else
        free(one);
}

void
pyc__interrupt_subshells(pyc_kernel_t *k)
{
    size_t n = 0, cap = 0;
    unsigned long *idents = NULL;
    pthread_mutex_lock(&k->shells.lock);
    for (pyc__subshell_t *s = k->shells.live; s != NULL; s = s->next) {
        unsigned long id = atomic_load(&s->cell_token);
        if (id == 0)
            continue;
        if (n + 1 >= cap) {
            size_t c = cap == 0 ? 8 : cap * 2;
            unsigned long *grown = realloc(idents, c * sizeof *grown);
            if (grown == NULL)
                break;
            idents = grown;
            cap = c;
        }
        idents[n++] = id;
    }
    pthread_mutex_unlock(&k->shells.lock);
    if (n == 0) {
        free(idents);
        return;
    }
    idents[n] = 0;
    interrupt_idents(idents);
}

void
pyc__abort_queue(pyc_kernel_t *k)
{
    k->aborting = true;
    pyc_msg_t *m;
    while ((m = k->io->next_pending(k->io)) != NULL) {
        pyc_msg_t **grown = realloc(k->queued, (k->n_queued + 1) * sizeof *grown);
        if (grown == NULL) {
            pyc_log("shell: dropped message: out of memory while aborting");
            pyc_msg_destroy(&m);
            continue;
        }
        k->queued = grown;
        k->queued[k->n_queued++] = m;
    }
}
