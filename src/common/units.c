/*
 * units.c -- parsing durations and sizes; see units.h.  Moved here from the kernel's limit.c so that `pyc new`
 * refuses what the kernel would refuse, by the same code.
 */
#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Splits text into a number and a unit: *unit points at the first non-space after the number, and the
 * unit's length (letters only) goes into *unit_len.  Returns -1 when something other than spaces follows
 * the unit. */
static int
split_unit(const char *end, const char **unit, size_t *unit_len)
{
    while (*end == ' ')
        end++;
    size_t n = 0;
    while (isalpha((unsigned char)end[n]))
        n++;
    const char *rest = end + n;
    while (*rest == ' ')
        rest++;
    *unit = end;
    *unit_len = n;
    return *rest == '\0' ? 0 : -1;
}

static int
unit_is(const char *unit, size_t len, const char *name)
{
    return strlen(name) == len && strncasecmp(unit, name, len) == 0;
}

int
pyc_units_seconds(const char *text, double *out, pyc_error_t *err)
{
    char *end;
    const char *unit;
    size_t ulen;
    if (text == NULL || text[0] == '\0')
        return pyc_error_set(err, "an empty duration");
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0 || !isfinite(v) || v < 0 || split_unit(end, &unit, &ulen) < 0)
        return pyc_error_set(err, "'%.64s' is not a duration (seconds, or a number with ms, s, m or h)", text);
    double scale;
    if (ulen == 0 || unit_is(unit, ulen, "s") || unit_is(unit, ulen, "sec"))
        scale = 1;
    else if (unit_is(unit, ulen, "ms"))
        scale = 1e-3;
    else if (unit_is(unit, ulen, "m") || unit_is(unit, ulen, "min"))
        scale = 60;
    else if (unit_is(unit, ulen, "h"))
        scale = 3600;
    else
        return pyc_error_set(err, "'%.64s': unknown unit of time (use ms, s, m or h)", text);
    v *= scale;
    if (!isfinite(v) || v > 1e9)
        return pyc_error_set(err, "'%.64s' is too long a duration", text);
    *out = v;
    return 0;
}

int
pyc_units_bytes(const char *text, size_t *out, pyc_error_t *err)
{
    char *end;
    const char *unit;
    size_t ulen;
    if (text == NULL || text[0] == '\0')
        return pyc_error_set(err, "an empty size");
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno != 0 || !isfinite(v) || v < 0 || split_unit(end, &unit, &ulen) < 0)
        return pyc_error_set(err, "'%.64s' is not a size (bytes, or a number with K, M, G or T)", text);
    double scale = 1;
    if (ulen > 0) {
        static const char *const units = "KMGT";
        const char *u = strchr(units, toupper((unsigned char)unit[0]));
        bool suffix_ok = ulen == 1 || (ulen == 2 && toupper((unsigned char)unit[1]) == 'B') ||
                         (ulen == 3 && unit[1] == 'i' && toupper((unsigned char)unit[2]) == 'B');
        if (unit_is(unit, ulen, "b"))
            scale = 1;
        else if (u == NULL || unit[0] == '\0' || !suffix_ok)
            return pyc_error_set(err, "'%.64s': unknown unit of size (use K, M, G or T)", text);
        else
            for (const char *p = units; p <= u; p++)
                scale *= 1024;
    }
    double bytes = v * scale;
    if (!(bytes < (double)SIZE_MAX))
        return pyc_error_set(err, "'%.64s' is too large a size", text);
    size_t whole = (size_t)bytes;      /* truncation of a positive number: its floor */
    if (whole == 0 && v > 0)
        return pyc_error_set(err, "'%.64s' is less than one byte", text);
    *out = whole;
    return 0;
}

int
pyc_units_count(const char *text, size_t max, size_t *out, pyc_error_t *err)
{
    char *end;
    while (*text == ' ')
        text++;
    if (!isdigit((unsigned char)text[0]))
        return pyc_error_set(err, "'%.64s' is not a whole number", text);
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    while (*end == ' ')
        end++;
    if (errno != 0 || *end != '\0' || v > SIZE_MAX)
        return pyc_error_set(err, "'%.64s' is not a whole number", text);
    if (v > max)
        return pyc_error_set(err, "'%.64s' is more than %zu", text, max);
    *out = (size_t)v;
    return 0;
}
