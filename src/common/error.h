/*
 * error.h -- the caller-owned error record that fallible pyc functions fill in.
 *
 * Functions that can fail return 0 (or a non-NULL pointer) on success and a negative status (or NULL) on
 * failure.  When the caller passes a pyc_error_t, the failing function writes one human sentence into it,
 * in the manner of jansson's json_error_t.  Passing NULL is always allowed and means "I only want the status".
 */
#ifndef PYC_ERROR_H
#define PYC_ERROR_H

#include <stdarg.h>
#include <stdio.h>

typedef struct pyc_error {
    char text[256];
} pyc_error_t;

/* Writes a formatted sentence into err when err is not NULL.  Always returns -1 so that a failure path can
 * read `return pyc_error_set(err, "...")`. */
static inline int
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
pyc_error_set(pyc_error_t *err, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#endif
