/*
 * clock.h -- the one clock helper: monotonic time in nanoseconds and seconds, any clock (CPU time) in seconds,
 * the wall clock in seconds, and the wall-clock deadlines of POSIX's timed waits.
 *
 * Deadlines and timeouts use CLOCK_MONOTONIC, which does not jump when the system time is set.  Modules whose
 * timing is unit-tested (the guard) take a clock as a function pointer of this type, so that a test can
 * advance time without sleeping.
 */
#ifndef PYC_CLOCK_H
#define PYC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* A source of monotonic seconds, for modules that let tests inject time. */
typedef double (*pyc_clock_fn)(void *ctx);

static inline uint64_t
pyc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double
pyc_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Milliseconds since t0_ns (a pyc_now_ns reading). */
static inline long
pyc_ms_since(uint64_t t0_ns)
{
    return (long)((pyc_now_ns() - t0_ns) / 1000000u);
}

/* Seconds on clock c (a CPU-time clock: CLOCK_PROCESS_CPUTIME_ID, clock_getcpuclockid's), or 0 when it cannot
 * be read (a process that has just ended). */
static inline double
pyc_clock_s(clockid_t c)
{
    struct timespec ts;
    if (clock_gettime(c, &ts) < 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds since the epoch (CLOCK_REALTIME), for timestamps that people read. */
static inline double
pyc_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The wall-clock instant ms milliseconds from now: the absolute deadline that POSIX's timed waits
 * (pthread_mutex_timedlock, pthread_timedjoin_np) take, which they measure against CLOCK_REALTIME. */
static inline struct timespec
pyc_wall_after(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
