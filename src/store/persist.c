/*
 * persist.c -- the kernel's writer thread; see persist.h for what it writes, when, and why a thread.
 *
 * The thread sleeps on a condition variable until kicked, then takes the work lock and writes one batch.
 * `kicked` is set under `lock` by every kick, so a kick that comes while a batch is being written makes one
 * more batch, and none is missed.  A lazy kick (`due`) and a locked file (`retry`) make the sleep a timed one
 * instead, whose end counts as a kick: PYC_PERSIST_BATCH_MS, PYC_PERSIST_RETRY_MS after it began.  A lazy kick
 * signals only a thread in an untimed sleep, so a pipelined burst costs one wake per batch.
 */
#include "persist.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"

/* How long the final batch of pyc_persist_destroy waits for another kernel's lock on the history file. */
#define FINAL_WAIT_MS 200

struct pyc_persist {
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;        /* guards the fields down to `stop` */
    pthread_cond_t cond;
    bool kicked;                 /* work was asked for since the last batch began */
    bool due;                    /* a lazy kick since the last batch began: a batch within PYC_PERSIST_BATCH_MS */
    bool sleeping;               /* the thread waits on cond: a kick must signal */
    bool timed;                  /* ... and will wake by itself at `until` */
    struct timespec until;
    bool stop;
    bool no_thread;              /* a forked child: the thread is the parent's */
    pthread_mutex_t work;        /* held while writing (pyc_persist_hold) */
    pyc_history_t *history;      /* borrowed; guarded by work */
};

/* Writes one batch; the caller holds p->work.  Returns true when history rows are left for a retry (the file
 * stayed locked by another kernel). */
static bool
write_batch(pyc_persist_t *p, int wait_ms)
{
    pyc_error_t err;
    if (pyc_history_pending(p->history) == 0)
        return false;
    if (pyc_history_flush(p->history, wait_ms, &err) == 0)
        return false;
    if (err.code == PYC_ETIMEDOUT)
        return true;
    pyc_log("%s", err.text);
    return pyc_history_pending(p->history) > 0;
}

/* The CLOCK_REALTIME time ms from now, for pthread_cond_timedwait. */
static struct timespec
after_ms(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += ms * 1000000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

static void *
writer_main(void *arg)
{
    pyc_persist_t *p = arg;
    bool retry = false;
    pthread_setname_np(pthread_self(), PYC_PERSIST_THREAD_NAME);   /* for ps, top and the tests */
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        if (!p->kicked) {
            p->sleeping = true;
            if (p->due || retry) {
                if (!p->timed) {
                    p->timed = true;
                    p->until = after_ms(p->due ? PYC_PERSIST_BATCH_MS : PYC_PERSIST_RETRY_MS);
                }
                if (pthread_cond_timedwait(&p->cond, &p->lock, &p->until) == ETIMEDOUT)
                    p->kicked = true;
            } else {
                pthread_cond_wait(&p->cond, &p->lock);
            }
            p->sleeping = false;
            continue;            /* look at stop and kicked again */
        }
        p->kicked = p->due = p->timed = false;
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_lock(&p->work);
        retry = write_batch(p, PYC_PERSIST_LOCK_WAIT_MS);
        pthread_mutex_unlock(&p->work);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

pyc_persist_t *
pyc_persist_new(pyc_error_t *err)
{
    pyc_persist_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    pthread_mutex_init(&p->work, NULL);
    /* Signals stay with the main thread (SIGINT interrupts a cell there); the new thread starts with the mask
     * in force at pthread_create. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&p->thread, NULL, writer_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pyc_error_set(err, "cannot start the history writer thread");
        pyc_persist_destroy(&p);
        return NULL;
    }
    p->started = true;
    return p;
}

void
pyc_persist_attach(pyc_persist_t *p, pyc_history_t *history)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->work);
    p->history = history;
    pthread_mutex_unlock(&p->work);
}

void
pyc_persist_kick(pyc_persist_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->kicked = true;
    if (p->sleeping && !p->no_thread)
        pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void
pyc_persist_kick_lazy(pyc_persist_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    if (!p->kicked && !p->due) {
        p->due = true;
        if (p->sleeping && !p->timed && !p->no_thread)
            pthread_cond_signal(&p->cond);   /* to turn its sleep into a timed one */
    }
    pthread_mutex_unlock(&p->lock);
}

void
pyc_persist_hold(pyc_persist_t *p)
{
    if (p != NULL)
        pthread_mutex_lock(&p->work);
}

void
pyc_persist_release(pyc_persist_t *p)
{
    if (p != NULL)
        pthread_mutex_unlock(&p->work);
}

void
pyc_persist_fork_prepare(pyc_persist_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->work);
    pthread_mutex_lock(&p->lock);
}

void
pyc_persist_fork_parent(pyc_persist_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->work);
}

void
pyc_persist_after_fork_child(pyc_persist_t *p)
{
    if (p == NULL)
        return;
    p->no_thread = true;
    p->started = false;
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->work);
}

void
pyc_persist_destroy(pyc_persist_t **p_p)
{
    if (p_p == NULL || *p_p == NULL)
        return;
    pyc_persist_t *p = *p_p;
    if (p->started) {
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
    }
    /* The last batch, on this thread: what was queued since the thread's last wake. */
    pthread_mutex_lock(&p->work);
    write_batch(p, FINAL_WAIT_MS);
    pthread_mutex_unlock(&p->work);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->work);
    free(p);
    *p_p = NULL;
}
