/*
 * test_guard.c -- cmocka tests for the limits thread (guard.c): the deadline's interrupt and second
 * interrupt, the stuck path and its handshake with pyc_guard_cell_end, the idle timeout (and activity that
 * postpones it), the lifetime during a cell, and the shutdown grace.
 *
 * The callbacks only count what they were called with.  The guard runs on a clock that the tests move by
 * hand (pyc_guard_poke returns once the guard has acted on the new time), so every check is exact -- "not
 * before", "then at once" -- and nothing sleeps; one test checks the real clock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "guard.h"

typedef struct calls {
    atomic_int interrupts, stuck, expired, overdue;
    atomic_int last_why;
    atomic_int files;            /* looks at the open-file reserve */
} calls_t;

static void
on_files(void *ctx)
{
    calls_t *c = ctx;
    atomic_fetch_add(&c->files, 1);
}

static void
on_interrupt(void *ctx, int why)
{
    calls_t *c = ctx;
    atomic_store(&c->last_why, why);
    atomic_fetch_add(&c->interrupts, 1);
}

static void
on_stuck(void *ctx, int why)
{
    calls_t *c = ctx;
    atomic_store(&c->last_why, why);
    atomic_fetch_add(&c->stuck, 1);
}

static void
on_expire(void *ctx, int why)
{
    calls_t *c = ctx;
    atomic_store(&c->last_why, why);
    atomic_fetch_add(&c->expired, 1);
}

static void
on_overdue(void *ctx)
{
    calls_t *c = ctx;
    atomic_fetch_add(&c->overdue, 1);
}

/* The guard's clock in these tests: it moves only when a test says so (advance), so that nothing depends on
 * how fast this machine runs.  Steps are binary fractions, which add up exactly. */
static _Atomic double fake_now = 1024.0;

static double
fake_clock(void *ctx)
{
    (void)ctx;
    return atomic_load(&fake_now);
}

/* The process's memory as the guard sees it in these tests. */
static _Atomic unsigned long long fake_rss = 100 << 20;

static unsigned long long
fake_memory(void *ctx)
{
    (void)ctx;
    return atomic_load(&fake_rss);
}

/* The cell's CPU clock as the guard sees it in these tests: it moves only when a test says so, apart from the
 * wall clock, as it does for a cell that sleeps (it stays) or spins (it moves with the wall). */
static _Atomic double fake_cpu_s = 10.0;

static double
fake_cpu(void *ctx)
{
    (void)ctx;
    return atomic_load(&fake_cpu_s);
}

static pyc_guard_t *
new_guard(calls_t *c, const pyc_limits_t *l)
{
    pyc_guard_callbacks_t cb = {on_interrupt, on_stuck, on_expire, on_overdue, c, fake_clock, fake_memory, fake_cpu,
                                on_files};
    pyc_guard_t *g = pyc_guard_new(l, &cb, NULL);
    assert_non_null(g);
    return g;
}

/* Moves the clock by s seconds and returns once the guard has acted on it. */
static void
advance(pyc_guard_t *g, double s)
{
    atomic_store(&fake_now, atomic_load(&fake_now) + s);
    pyc_guard_poke(g);
}

/* Waits up to `limit` seconds of real time for *v to reach want (the real-clock test only). */
static int
wait_for(atomic_int *v, int want, double limit)
{
    for (double t = 0; t < limit; t += 0.01) {
        if (atomic_load(v) >= want)
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(v) >= want;
}

/* Under an open-file limit the guard looks at the kernel's reserve every PYC_GUARD_FILES_POLL_MS while a cell
 * runs (so that a cell that took every descriptor does not keep clients out), and not between cells. */
static void
test_open_file_limit_is_watched_while_a_cell_runs(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.open_files = 10;
    pyc_guard_t *g = new_guard(&c, &l);
    advance(g, 1.0);
    assert_int_equal(atomic_load(&c.files), 0);
    pyc_guard_cell_begin(g, 0, 0);
    advance(g, 0);
    int seen = atomic_load(&c.files);
    assert_true(seen >= 1);
    advance(g, PYC_GUARD_FILES_POLL_MS / 1000.0);
    assert_true(atomic_load(&c.files) > seen);
    int why;
    assert_true(pyc_guard_cell_end(g, &why));
    seen = atomic_load(&c.files);
    advance(g, 1.0);
    assert_int_equal(atomic_load(&c.files), seen);
    pyc_guard_destroy(&g);
    /* without the limit: never */
    calls_t d = {0};
    pyc_limits_init(&l);
    g = new_guard(&d, &l);
    pyc_guard_cell_begin(g, 0, 0);
    advance(g, 1.0);
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(atomic_load(&d.files), 0);
    pyc_guard_destroy(&g);
}

static void
test_cell_that_ends_in_time(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    pyc_guard_t *g = new_guard(&c, &l);
    int why = -1;
    pyc_guard_cell_begin(g, 0.5, 0);
    advance(g, 0.375);
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_NONE);
    advance(g, 10);
    assert_int_equal(atomic_load(&c.interrupts), 0);
    assert_int_equal(atomic_load(&c.stuck), 0);
    pyc_guard_destroy(&g);
    assert_null(g);
    pyc_guard_destroy(&g);
}

static void
test_deadline_interrupts_once_then_again(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.cell_grace = 2;
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_cell_begin(g, 0.25, 0);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.interrupts), 0);              /* not before the deadline */
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.interrupts), 1);
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_DEADLINE);
    advance(g, 0.875);
    assert_int_equal(atomic_load(&c.interrupts), 1);              /* the second waits for half the grace */
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    int why = -1;
    assert_true(pyc_guard_cell_end(g, &why));                     /* stopped within the grace */
    assert_int_equal(why, PYC_GUARD_DEADLINE);
    advance(g, 100);
    assert_int_equal(atomic_load(&c.stuck), 0);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    pyc_guard_destroy(&g);
}

static void
test_stuck_cell_is_taken_over(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.cell_grace = 0.5;
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_cell_begin(g, 0.125, 0);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.interrupts), 1);
    advance(g, 0.25);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.stuck), 0);                   /* not before the grace is over */
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.stuck), 1);
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_DEADLINE);
    int why = -1;
    assert_false(pyc_guard_cell_end(g, &why));                    /* the guard owns the end now */
    pyc_guard_destroy(&g);
}

static void
test_cell_end_wins_the_race_with_stuck(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.cell_grace = 0.25;
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_cell_begin(g, 0.125, 0);
    advance(g, 0.25);
    assert_int_equal(atomic_load(&c.interrupts), 1);
    int why = -1;
    assert_true(pyc_guard_cell_end(g, &why));                     /* the cell stopped within its grace */
    advance(g, 10);
    assert_int_equal(atomic_load(&c.stuck), 0);                   /* so it is not reported stuck */
    pyc_guard_destroy(&g);
}

static void
test_idle_timeout_and_activity(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.idle_timeout = 0.5;
    pyc_guard_t *g = new_guard(&c, &l);
    for (int i = 0; i < 4; i++) {          /* activity every 0.25 s keeps it alive */
        advance(g, 0.25);
        pyc_guard_activity(g);
    }
    assert_int_equal(atomic_load(&c.expired), 0);
    pyc_guard_cell_begin(g, 0, 0);              /* a running cell is not idleness */
    advance(g, 7);
    assert_int_equal(atomic_load(&c.expired), 0);
    int why;
    assert_true(pyc_guard_cell_end(g, &why));
    advance(g, 0.375);
    assert_int_equal(atomic_load(&c.expired), 0);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.expired), 1);
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_IDLE);
    advance(g, 6);
    assert_int_equal(atomic_load(&c.expired), 1);                 /* once */
    pyc_guard_destroy(&g);
}

static void
test_lifetime_during_a_cell(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.lifetime = 0.375;
    pyc_guard_t *g = new_guard(&c, &l);
    assert_true(pyc_guard_uptime(g) == 0);
    pyc_guard_cell_begin(g, 10, 0);
    advance(g, 0.25);
    assert_true(pyc_guard_uptime(g) == 0.25);
    assert_int_equal(atomic_load(&c.expired), 0);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.expired), 1);
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_LIFETIME);
    int why = -1;
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_LIFETIME);
    pyc_guard_destroy(&g);
}

static void
test_shutdown_grace(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    assert_true(l.shutdown_grace == PYC_LIMITS_DEFAULT_SHUTDOWN_GRACE);   /* on unless turned off */
    l.shutdown_grace = 0;
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_shutdown(g);                   /* a grace of 0: wait for ever */
    advance(g, 100);
    assert_int_equal(atomic_load(&c.overdue), 0);
    pyc_guard_destroy(&g);
    l.shutdown_grace = 0.25;
    g = new_guard(&c, &l);
    pyc_guard_shutdown(g);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.overdue), 0);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.overdue), 1);
    pyc_guard_destroy(&g);
}

/* The memory watch: a cell that grows the process past the limit is interrupted (why MEMORY), a second time
 * half way through the grace, then taken over; a cell that starts above the limit is hit only when it grows
 * further; nothing is watched between cells. */
static void
test_memory_watch(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.cell_grace = 1;
    atomic_store(&fake_rss, 100 << 20);
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_watch_memory(g, 200 << 20);
    pyc_guard_cell_begin(g, 0, 0);
    atomic_store(&fake_rss, 150 << 20);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.interrupts), 0);
    atomic_store(&fake_rss, 300 << 20);
    advance(g, 0.0625);                      /* the next look, within one poll */
    assert_int_equal(atomic_load(&c.interrupts), 1);
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_MEMORY);
    advance(g, 0.5);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    int why = -1;
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_MEMORY);
    /* Between cells: nothing. */
    advance(g, 1);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    /* A cell that starts above the limit (to free memory) is left alone... */
    pyc_guard_cell_begin(g, 0, 0);
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    atomic_store(&fake_rss, 250 << 20);      /* ... and it frees some */
    advance(g, 0.125);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_NONE);
    /* ... until it grows further. */
    pyc_guard_cell_begin(g, 0, 0);
    atomic_store(&fake_rss, 400 << 20);
    advance(g, 0.0625);
    assert_int_equal(atomic_load(&c.interrupts), 3);
    advance(g, 2);                           /* does not stop: the stuck path */
    assert_int_equal(atomic_load(&c.stuck), 1);
    assert_false(pyc_guard_cell_end(g, &why));
    pyc_guard_destroy(&g);
}

/* The CPU limit: wall time alone (a cell that sleeps) never spends it; CPU time does, counted from the cell's
 * start; then a second interrupt half way through the grace, then the stuck path, as for a deadline.  The
 * limit is the cell's: the next cell has its own, or none. */
static void
test_cpu_limit(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.cell_grace = 1;
    atomic_store(&fake_cpu_s, 10.0);
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_cell_begin(g, 0, 0.5);
    assert_true(pyc_guard_cell_cpu(g) == 0);
    advance(g, 4);                            /* sleeps: 4 s of wall time, no CPU */
    assert_int_equal(atomic_load(&c.interrupts), 0);
    atomic_store(&fake_cpu_s, 10.25);
    advance(g, 0.25);
    assert_int_equal(atomic_load(&c.interrupts), 0);
    assert_true(pyc_guard_cell_cpu(g) == 0.25);
    atomic_store(&fake_cpu_s, 10.5);          /* spent */
    advance(g, 0.25);
    assert_int_equal(atomic_load(&c.interrupts), 1);
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_CPU);
    advance(g, 0.5);                          /* half the grace: the second interrupt */
    assert_int_equal(atomic_load(&c.interrupts), 2);
    int why = -1;
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_CPU);
    assert_true(pyc_guard_cell_cpu(g) == -1);  /* no cell */
    /* A cell without a CPU limit spends what it likes. */
    pyc_guard_cell_begin(g, 0, 0);
    atomic_store(&fake_cpu_s, 100.0);
    advance(g, 1);
    assert_int_equal(atomic_load(&c.interrupts), 2);
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_NONE);
    /* A cell that spends its limit and does not stop: taken over after the grace. */
    pyc_guard_cell_begin(g, 0, 1);
    atomic_store(&fake_cpu_s, 101.0);
    advance(g, 0.0625);
    assert_int_equal(atomic_load(&c.interrupts), 3);
    advance(g, 1);
    assert_int_equal(atomic_load(&c.stuck), 1);
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_CPU);
    assert_false(pyc_guard_cell_end(g, &why));
    pyc_guard_destroy(&g);
}

/* The CPU limit on the real process clock: a cell that spins is interrupted on its own, without pokes. */
static void
test_cpu_limit_real_clock(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    pyc_guard_callbacks_t cb = {on_interrupt, on_stuck, on_expire, on_overdue, &c, NULL, NULL, NULL, NULL};
    pyc_guard_t *g = pyc_guard_new(&l, &cb, NULL);
    pyc_guard_cell_begin(g, 0, 0.05);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile unsigned long spin = 0;
    do {                                      /* at most 30 s of wall time, however loaded the machine */
        for (int i = 0; i < 100000; i++)
            spin++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (atomic_load(&c.interrupts) == 0 && t.tv_sec - t0.tv_sec < 30);
    assert_true(spin > 0);                    /* the work was done (and the count is read: newer compilers) */
    int why = -1;
    assert_int_equal(atomic_load(&c.interrupts), 1);
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_CPU);
    pyc_guard_destroy(&g);
}

/* The real clock still works: a deadline of 50 ms fires on its own, without pokes. */
static void
test_real_clock(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    pyc_guard_callbacks_t cb = {on_interrupt, on_stuck, on_expire, on_overdue, &c, NULL, NULL, NULL, NULL};
    pyc_guard_t *g = pyc_guard_new(&l, &cb, NULL);
    pyc_guard_cell_begin(g, 0.05, 0);
    assert_true(wait_for(&c.interrupts, 1, 5));
    int why = -1;
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_DEADLINE);
    pyc_guard_destroy(&g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_file_limit_is_watched_while_a_cell_runs),
        cmocka_unit_test(test_cell_that_ends_in_time),
        cmocka_unit_test(test_deadline_interrupts_once_then_again),
        cmocka_unit_test(test_stuck_cell_is_taken_over),
        cmocka_unit_test(test_cell_end_wins_the_race_with_stuck),
        cmocka_unit_test(test_idle_timeout_and_activity),
        cmocka_unit_test(test_lifetime_during_a_cell),
        cmocka_unit_test(test_shutdown_grace),
        cmocka_unit_test(test_memory_watch),
        cmocka_unit_test(test_cpu_limit),
        cmocka_unit_test(test_cpu_limit_real_clock),
        cmocka_unit_test(test_real_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
