/*
 * guard.c -- the limits thread; see guard.h.
 *
 * One thread sleeps on a condition variable (CLOCK_MONOTONIC) until the nearest of: the cell's deadline,
 * the end of its grace, the lifetime, the idle timeout, the shutdown grace, the next look at the cell's memory
 * or CPU clock.  State changes from other threads signal it so that it recomputes.  It costs nothing while no
 * limit is set: the thread is not even started then.
 */
#include "guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "proc.h"

enum { CELL_NONE, CELL_RUNNING, CELL_STUCK };

struct pyc_guard {
    pyc_limits_t limits;
    pyc_guard_callbacks_t cb;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool started;
    bool stop;
    double t0;                   /* when the guard (the kernel) started */
    double last_activity;
    bool expired;                /* on_expire was called */
    /* The running cell. */
    atomic_int cell;             /* CELL_* */
    double deadline;             /* 0: none */
    int deadline_why;            /* PYC_GUARD_DEADLINE or PYC_GUARD_LIFETIME */
    int fired;                   /* the limit that interrupted the cell, PYC_GUARD_NONE if none */
    double interrupted_at;
    int interrupts;              /* interrupts sent for this cell (at most 2) */
    double shutdown_at;          /* 0: not shutting down; -1: overdue, reported */
    /* The memory watch (pyc_guard_watch_memory). */
    unsigned long long mem_limit;    /* bytes of resident memory; 0: off */
    unsigned long long mem_at_begin; /* at the start of the running cell */
    /* The CPU limit of the running cell (pyc_guard_cell_begin). */
    double cpu_limit;            /* seconds; 0: none */
    double cpu_at_begin;         /* the cpu callback at the start of the cell */
    double ncpu;                 /* online CPUs: how fast CPU time can be spent, per second of wall time */
    /* pyc_guard_poke's handshake: asked counts pokes, answered the pokes the thread has acted on. */
    pthread_cond_t answered_cond;
    unsigned long asked, answered;
};

static double
monotonic(void *ctx)
{
    (void)ctx;
    return pyc_now_s();
}

/* The process's resident memory, from /proc/self/statm (about 5 us). */
static unsigned long long
statm_rss(void *ctx)
{
    (void)ctx;
    char buf[128];
    unsigned long long size, res;
    if (pyc_proc_read_small("/proc/self/statm", buf, sizeof buf) < 0 || sscanf(buf, "%llu %llu", &size, &res) != 2)
        return 0;
    return res * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* The process's CPU time, all threads. */
static double
process_cpu(void *ctx)
{
    (void)ctx;
    return pyc_clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

/* The guard's time: its clock (monotonic unless a test gave one). */
static double
now_s(const pyc_guard_t *g)
{
    return g->cb.now(g->cb.ctx);
}

static void
min_into(double *next, double t)
{
    if (t > 0 && (*next == 0 || t < *next))
        *next = t;
}

/* Decides what is due at `now`, with the lock held; returns the action to take without it and the time of
 * the next check in *next (0: nothing to wait for). */
enum { ACT_NONE, ACT_INTERRUPT, ACT_STUCK, ACT_EXPIRE, ACT_OVERDUE };

/* A per-cell limit (why) stopped the running cell at `now`: records it, and has the guard look again half way
 * through the grace (the second interrupt).  The one path of the deadline, the memory watch and the CPU limit,
 * so that what follows -- the second interrupt, then the stuck path -- is the same for all.  Lock held. */
static int
fire(pyc_guard_t *g, double now, int why, int *why_out, double *next)
{
    g->fired = why;
    g->interrupted_at = now;
    g->interrupts = 1;
    *why_out = why;
    min_into(next, now + g->limits.cell_grace / 2);
    if (why == PYC_GUARD_LIFETIME) {
        g->expired = true;
        return ACT_EXPIRE;
    }
    return ACT_INTERRUPT;
}

static int
due(pyc_guard_t *g, double now, int *why, double *next)
{
    const pyc_limits_t *l = &g->limits;
    *next = 0;
    if (g->shutdown_at != 0) {
        if (g->shutdown_at < 0)
            return ACT_NONE;     /* on_overdue ran (it does not return in a kernel; it may in tests) */
        if (now >= g->shutdown_at) {
            g->shutdown_at = -1;
            return ACT_OVERDUE;
        }
        min_into(next, g->shutdown_at);
        return ACT_NONE;
    }
    double life_end = l->lifetime > 0 ? g->t0 + l->lifetime : 0;
    if (atomic_load(&g->cell) == CELL_RUNNING) {
        double dl = g->deadline;
        int dwhy = g->deadline_why;
        if (life_end > 0 && (dl == 0 || life_end < dl)) {
            dl = life_end;
            dwhy = PYC_GUARD_LIFETIME;
        }
        if (g->interrupts == 0 && g->mem_limit > 0) {
            unsigned long long rss = g->cb.memory(g->cb.ctx);
            if (rss > g->mem_limit && rss > g->mem_at_begin + (1u << 20))
                return fire(g, now, PYC_GUARD_MEMORY, why, next);
            min_into(next, now + PYC_GUARD_MEMORY_POLL_MS / 1000.0);
        }
        if (g->cb.files != NULL && l->open_files > 0) {
            g->cb.files(g->cb.ctx);  /* quick: one fcntl(2), and closes when the process is at its limit */
            min_into(next, now + PYC_GUARD_FILES_POLL_MS / 1000.0);
        }
        if (g->interrupts == 0 && g->cpu_limit > 0) {
            double left = g->cpu_limit - (g->cb.cpu(g->cb.ctx) - g->cpu_at_begin);
            if (left <= 0)
                return fire(g, now, PYC_GUARD_CPU, why, next);
            /* No sooner than the online CPUs, all busy, could spend what is left (a sleeping cell is looked at
             * once a second, a busy one more often as its limit nears). */
            double wait = left / g->ncpu;
            if (wait < PYC_GUARD_CPU_POLL_MIN_MS / 1000.0)
                wait = PYC_GUARD_CPU_POLL_MIN_MS / 1000.0;
            if (wait > PYC_GUARD_CPU_POLL_MAX_MS / 1000.0)
                wait = PYC_GUARD_CPU_POLL_MAX_MS / 1000.0;
            min_into(next, now + wait);
        }
        if (g->interrupts == 0) {
            if (dl > 0 && now >= dl)
                return fire(g, now, dwhy, why, next);
            min_into(next, dl);
            return ACT_NONE;
        }
        double half = g->interrupted_at + l->cell_grace / 2, end = g->interrupted_at + l->cell_grace;
        *why = g->fired;
        if (now >= end) {
            int expect = CELL_RUNNING;
            if (atomic_compare_exchange_strong(&g->cell, &expect, CELL_STUCK))
                return ACT_STUCK;
            return ACT_NONE;
        }
        if (g->interrupts == 1 && now >= half) {
            g->interrupts = 2;
            min_into(next, end);
            return ACT_INTERRUPT;
        }
        min_into(next, g->interrupts == 1 ? half : end);
        return ACT_NONE;
    }
    if (g->expired)
        return ACT_NONE;
    if (life_end > 0) {
        if (now >= life_end) {
            g->expired = true;
            *why = PYC_GUARD_LIFETIME;
            return ACT_EXPIRE;
        }
        min_into(next, life_end);
    }
    if (l->idle_timeout > 0) {
        double idle_end = g->last_activity + l->idle_timeout;
        if (now >= idle_end) {
            g->expired = true;
            *why = PYC_GUARD_IDLE;
            return ACT_EXPIRE;
        }
        min_into(next, idle_end);
    }
    return ACT_NONE;
}

static void *
guard_main(void *arg)
{
    pyc_guard_t *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        int why = PYC_GUARD_NONE;
        double next;
        unsigned long asked = g->asked;
        int act = due(g, now_s(g), &why, &next);
        if (act == ACT_INTERRUPT || act == ACT_EXPIRE) {
            /* Called with the lock held: pyc_guard_cell_end and the next pyc_guard_cell_begin wait for it,
             * so an interrupt meant for this cell is delivered before another cell can start (the main
             * thread takes it on its way out of the lock wait, while no cell runs, and it is ignored). */
            if (act == ACT_INTERRUPT)
                g->cb.on_interrupt(g->cb.ctx, why);
            else
                g->cb.on_expire(g->cb.ctx, why);   /* a lifetime ending during a cell interrupts it too */
            continue;
        }
        if (act != ACT_NONE) {
            pthread_mutex_unlock(&g->lock);
            switch (act) {
            case ACT_STUCK:
                g->cb.on_stuck(g->cb.ctx, why);
                break;
            case ACT_OVERDUE:
                g->cb.on_overdue(g->cb.ctx);
                break;
            }
            pthread_mutex_lock(&g->lock);
            continue;
        }
        if (g->answered != asked) {
            g->answered = asked;
            pthread_cond_broadcast(&g->answered_cond);
        }
        if (next == 0) {
            pthread_cond_wait(&g->cond, &g->lock);
        } else {
            /* The wait is on the real monotonic clock, for as long as the guard's clock says is left.  Limits
             * are at most 1e9 s, but a wait is never longer than a day: the time is recomputed. */
            double left = next - now_s(g);
            if (left > 86400)
                left = 86400;
            double until = pyc_now_s() + (left > 0 ? left : 0);
            struct timespec ts;
            ts.tv_sec = (time_t)until;
            ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&g->cond, &g->lock, &ts);
        }
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* Starts the thread with a small stack: it only computes times and calls back, and under a memory cap
 * (RLIMIT_DATA) the default 8 MB stack would count against the session. */
static int
spawn(pyc_guard_t *g)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    /* Signals are the main thread's (DESIGN.md section 2): the thread starts with all of them blocked, even
     * when it is started late, by a cell, after the main thread unblocked SIGINT. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&g->thread, &attr, guard_main, g);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

/* Initialises the lock and condition variable, and starts the thread when a kernel-wide limit needs it.
 * keep_t0 keeps the start time (a forked session keeps its parent's lifetime). */
static int
start(pyc_guard_t *g, bool keep_t0, pyc_error_t *err)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cond, &ca);
    pthread_cond_init(&g->answered_cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->lock, NULL);
    g->last_activity = now_s(g);
    if (!keep_t0)
        g->t0 = g->last_activity;
    g->started = false;
    const pyc_limits_t *l = &g->limits;
    if (l->idle_timeout <= 0 && l->lifetime <= 0 && l->cell_timeout <= 0 && l->cell_cpu <= 0)
        return 0;                /* started on demand: by a cell with its own deadline, or at shutdown */
    int rc = spawn(g);
    if (rc != 0)
        return pyc_error_set(err, "cannot start the limits thread: %s", strerror(rc));
    g->started = true;
    return 0;
}

/* Starts the thread the first time something needs it.  Lock held. */
static void
ensure_started(pyc_guard_t *g)
{
    if (g->started)
        return;
    if (spawn(g) != 0) {
        pyc_log("cannot start the limits thread; a cell deadline will not be kept");
        return;
    }
    g->started = true;
}

pyc_guard_t *
pyc_guard_new(const pyc_limits_t *limits, const pyc_guard_callbacks_t *cb, pyc_error_t *err)
{
    pyc_guard_t *g = calloc(1, sizeof *g);
    if (g == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    g->limits = *limits;
    g->cb = *cb;
    if (g->cb.now == NULL)
        g->cb.now = monotonic;
    if (g->cb.memory == NULL)
        g->cb.memory = statm_rss;
    if (g->cb.cpu == NULL)
        g->cb.cpu = process_cpu;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    g->ncpu = ncpu > 0 ? (double)ncpu : 1;
    if (start(g, false, err) < 0) {
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->cond);
        pthread_cond_destroy(&g->answered_cond);
        free(g);
        return NULL;
    }
    return g;
}

void
pyc_guard_destroy(pyc_guard_t **g_p)
{
    if (g_p == NULL || *g_p == NULL)
        return;
    pyc_guard_t *g = *g_p;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
    if (g->started)
        pthread_join(g->thread, NULL);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    pthread_cond_destroy(&g->answered_cond);
    free(g);
    *g_p = NULL;
}

void
pyc_guard_activity(pyc_guard_t *g)
{
    if (g == NULL || g->limits.idle_timeout <= 0)
        return;
    pthread_mutex_lock(&g->lock);
    g->last_activity = now_s(g);
    pthread_mutex_unlock(&g->lock);  /* no signal: the deadline only moves later */
}

void
pyc_guard_cell_begin(pyc_guard_t *g, double timeout, double cpu)
{
    pthread_mutex_lock(&g->lock);
    g->deadline = timeout > 0 ? now_s(g) + timeout : 0;
    g->cpu_limit = cpu > 0 ? cpu : 0;
    g->cpu_at_begin = g->cb.cpu(g->cb.ctx);
    g->deadline_why = PYC_GUARD_DEADLINE;
    g->fired = PYC_GUARD_NONE;
    g->interrupts = 0;
    g->mem_at_begin = g->mem_limit > 0 ? g->cb.memory(g->cb.ctx) : 0;
    atomic_store(&g->cell, CELL_RUNNING);
    if (timeout > 0 || cpu > 0 || g->mem_limit > 0 || (g->limits.open_files > 0 && g->cb.files != NULL))
        ensure_started(g);
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

bool
pyc_guard_cell_end(pyc_guard_t *g, int *why)
{
    int expect = CELL_RUNNING;
    if (!atomic_compare_exchange_strong(&g->cell, &expect, CELL_NONE))
        return false;            /* on_stuck owns the end */
    pthread_mutex_lock(&g->lock);
    *why = g->fired;
    g->deadline = 0;
    g->cpu_limit = 0;
    g->last_activity = now_s(g);
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
    return true;
}

void
pyc_guard_shutdown(pyc_guard_t *g)
{
    if (g == NULL || g->limits.shutdown_grace <= 0)
        return;
    pthread_mutex_lock(&g->lock);
    g->shutdown_at = now_s(g) + g->limits.shutdown_grace;
    ensure_started(g);
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

void
pyc_guard_watch_memory(pyc_guard_t *g, unsigned long long limit)
{
    pthread_mutex_lock(&g->lock);
    g->mem_limit = limit;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

void
pyc_guard_poke(pyc_guard_t *g)
{
    pthread_mutex_lock(&g->lock);
    if (g->started && !g->stop) {
        unsigned long ticket = ++g->asked;
        pthread_cond_signal(&g->cond);
        while (g->answered < ticket && !g->stop)
            pthread_cond_wait(&g->answered_cond, &g->lock);
    }
    pthread_mutex_unlock(&g->lock);
}

double
pyc_guard_cell_cpu(pyc_guard_t *g)
{
    double used = -1;
    pthread_mutex_lock(&g->lock);
    if (atomic_load(&g->cell) != CELL_NONE) {
        used = g->cb.cpu(g->cb.ctx) - g->cpu_at_begin;
        if (used < 0)
            used = 0;            /* an isolated cell's process was just reaped: its CPU left the clock */
    }
    pthread_mutex_unlock(&g->lock);
    return used;
}

double
pyc_guard_uptime(const pyc_guard_t *g)
{
    return now_s(g) - g->t0;
}

int
pyc_guard_restart_in_child(pyc_guard_t *g, pyc_error_t *err)
{
    /* The lock and condition variable are the parent's copies, possibly taken by its guard thread at the
     * fork; that thread does not exist here, and destroying a condition variable it waited on could block
     * for ever.  Start afresh, keeping the lifetime: a forked session ends when its parent's would, so that
     * forking is no way around the host's limit. */
    memset(&g->lock, 0, sizeof g->lock);
    memset(&g->cond, 0, sizeof g->cond);
    memset(&g->answered_cond, 0, sizeof g->answered_cond);
    g->asked = g->answered = 0;
    g->stop = false;
    g->expired = false;
    g->shutdown_at = 0;
    atomic_store(&g->cell, CELL_NONE);
    return start(g, true, err);
}
