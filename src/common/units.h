/*
 * units.h -- durations and sizes as people write them ("90", "250ms", "5m", "24h"; "4096", "512K", "2G"),
 * and counts ("64"), parsed the one way both programs read them: the kernel's limits (src/limits/limit.c, from
 * its options and PYC_* variables) and the limit flags of `pyc new`, which checks them before it starts a
 * kernel so that a bad value is a usage error rather than a kernel that will not start.
 *
 * Durations are seconds with an optional unit (ms, s, sec, m, min, h); sizes are bytes with an optional
 * binary unit (K, M, G, T, also KB, KiB ... as powers of 1024, and B).  Exactly one number and one optional
 * unit, with nothing around them but spaces; negatives, NaN, infinities, durations past 1e9 s and sizes past
 * SIZE_MAX are refused, and so are counts past their maximum: a limit that is silently misread is worse than
 * none, because whoever set it believes the session is bounded.  No I/O; no libm (pyc links none).
 */
#ifndef PYC_UNITS_H
#define PYC_UNITS_H

#include <stddef.h>

#include "error.h"

/* Parses a duration into seconds (>= 0, finite).  Returns 0, or -1 with err. */
int pyc_units_seconds(const char *text, double *out, pyc_error_t *err);

/* Parses a size into bytes.  Returns 0, or -1 with err. */
int pyc_units_bytes(const char *text, size_t *out, pyc_error_t *err);

/* Parses a count: a whole number (no unit, no sign), at most max.  Returns 0, or -1 with err. */
int pyc_units_count(const char *text, size_t max, size_t *out, pyc_error_t *err);

/* The largest count of open files a limit may name: 2^30, past the largest fs.nr_open Linux allows (the limit
 * is an rlim_t, and a count past what one holds must not wrap). */
#define PYC_UNITS_MAX_FILES ((size_t)1 << 30)

#endif
