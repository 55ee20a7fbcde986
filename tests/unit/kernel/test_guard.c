/*
 * test_guard.c -- cmocka tests for the limits thread (guard.c): the deadline's interrupt and second
 * interrupt, the stuck path and its handshake with pyc_guard_cell_end, the idle timeout (and activity that
 * postpones it), the lifetime during a cell, and the shutdown grace.
 *
 * The callbacks only count what they were called with.  Times are tenths of a second and the checks leave
 * wide margins both ways ("not before", "by a second later"): they test order and outcome, not timing.
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
} calls_t;

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

static pyc_guard_t *
new_guard(calls_t *c, const pyc_limits_t *l)
{
    pyc_guard_callbacks_t cb = {on_interrupt, on_stuck, on_expire, on_overdue, c};
    pyc_guard_t *g = pyc_guard_new(l, &cb, NULL);
    assert_non_null(g);
    return g;
}

static void
sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Waits up to `limit` seconds for *v to reach want. */
static int
wait_for(atomic_int *v, int want, double limit)
{
    for (double t = 0; t < limit; t += 0.01) {
        if (atomic_load(v) >= want)
            return 1;
        sleep_s(0.01);
    }
    return atomic_load(v) >= want;
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
    pyc_guard_cell_begin(g, 0.5);
    assert_true(pyc_guard_cell_end(g, &why));
    assert_int_equal(why, PYC_GUARD_NONE);
    sleep_s(0.8);
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
    pyc_guard_cell_begin(g, 0.2);
    sleep_s(0.1);
    assert_int_equal(atomic_load(&c.interrupts), 0);              /* not before the deadline */
    assert_true(wait_for(&c.interrupts, 1, 2));
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_DEADLINE);
    sleep_s(0.3);
    assert_int_equal(atomic_load(&c.interrupts), 1);              /* the second waits for half the grace */
    assert_true(wait_for(&c.interrupts, 2, 3));
    int why = -1;
    assert_true(pyc_guard_cell_end(g, &why));                     /* stopped within the grace */
    assert_int_equal(why, PYC_GUARD_DEADLINE);
    sleep_s(1.5);
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
    l.cell_grace = 0.3;
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_cell_begin(g, 0.1);
    assert_true(wait_for(&c.stuck, 1, 5));
    assert_int_equal(atomic_load(&c.interrupts), 2);
    int why = -1;
    assert_false(pyc_guard_cell_end(g, &why));                    /* the guard owns the end now */
    pyc_guard_destroy(&g);
}

static void
test_idle_timeout_and_activity(void **state)
{
    (void)state;
    calls_t c = {0};
    pyc_limits_t l;
    pyc_limits_init(&l);
    l.idle_timeout = 0.4;
    pyc_guard_t *g = new_guard(&c, &l);
    for (int i = 0; i < 4; i++) {          /* activity every 0.2 s keeps it alive */
        sleep_s(0.2);
        pyc_guard_activity(g);
    }
    assert_int_equal(atomic_load(&c.expired), 0);
    pyc_guard_cell_begin(g, 0);              /* a running cell is not idleness */
    sleep_s(0.7);
    assert_int_equal(atomic_load(&c.expired), 0);
    int why;
    assert_true(pyc_guard_cell_end(g, &why));
    assert_true(wait_for(&c.expired, 1, 3));
    assert_int_equal(atomic_load(&c.last_why), PYC_GUARD_IDLE);
    sleep_s(0.6);
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
    l.lifetime = 0.3;
    pyc_guard_t *g = new_guard(&c, &l);
    assert_true(pyc_guard_uptime(g) >= 0 && pyc_guard_uptime(g) < 1);
    pyc_guard_cell_begin(g, 10);
    assert_true(wait_for(&c.expired, 1, 3));
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
    pyc_guard_t *g = new_guard(&c, &l);
    pyc_guard_shutdown(g);                   /* no grace set: nothing */
    sleep_s(0.3);
    assert_int_equal(atomic_load(&c.overdue), 0);
    pyc_guard_destroy(&g);
    l.shutdown_grace = 0.2;
    g = new_guard(&c, &l);
    pyc_guard_shutdown(g);
    sleep_s(0.05);
    assert_int_equal(atomic_load(&c.overdue), 0);
    assert_true(wait_for(&c.overdue, 1, 3));
    pyc_guard_destroy(&g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cell_that_ends_in_time),
        cmocka_unit_test(test_deadline_interrupts_once_then_again),
        cmocka_unit_test(test_stuck_cell_is_taken_over),
        cmocka_unit_test(test_idle_timeout_and_activity),
        cmocka_unit_test(test_lifetime_during_a_cell),
        cmocka_unit_test(test_shutdown_grace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
