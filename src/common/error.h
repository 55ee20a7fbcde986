/*
 * error.h -- the caller-owned error record that fallible pyc functions fill in, and the naming rule of the
 * tree.
 *
 * Functions that can fail return 0 (or a non-NULL pointer) on success and -1 (or NULL) on failure.  When the
 * caller passes a pyc_error_t, the failing function writes one human sentence into it, in the manner of
 * jansson's json_error_t, and a code for callers that must branch on what went wrong (a missing file is not
 * a broken one) instead of on special return values.  Passing NULL is always allowed and means "I only want
 * the status".
 *
 * Names (libuv writes its rule down the same way):
 *   pyc_<module>_<verb>   public functions of a module, declared in its header (pyc_wire_decode);
 *   pyc_<module>_t        its types; constructors pyc_<module>_new, destructors pyc_<module>_destroy(&p),
 *                         NULL-safe, clearing the caller's pointer (czmq);
 *   pyc__<name>           shared between the files of one library only, declared in that library's internal
 *                         header (src/kernel/kernelint.h, src/py/pyint.h), never in a public one;
 *   everything else       static.
 */
#ifndef PYC_ERROR_H
#define PYC_ERROR_H

#include <stdarg.h>
#include <stdio.h>

/* What went wrong, for callers that branch on it; the sentence says the rest. */
typedef enum pyc_errcode {
    PYC_EFAIL = 1,               /* anything not named below */
    PYC_ENOENT,                  /* the thing asked for does not exist (a file, a session) */
    PYC_EINVAL,                  /* bad input: a malformed file, message or argument */
    PYC_ENOMEM,                  /* out of memory */
    PYC_EIO,                     /* reading or writing failed (disk full, a closed pipe) */
    PYC_ETIMEDOUT,               /* no answer in time */
    PYC_EGONE,                   /* the process we were waiting for has ended */
    PYC_EAUTH,                   /* a signature does not verify: the two sides hold different keys */
} pyc_errcode_t;

typedef struct pyc_error {
    int code;                    /* a pyc_errcode_t once set */
    char text[512];
} pyc_error_t;

/* Writes code and a formatted sentence into err when err is not NULL.  Always returns -1 so that a failure
 * path can read `return pyc_error_code(err, PYC_ENOENT, "...")`. */
static inline int
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
pyc_error_code(pyc_error_t *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The same with the code PYC_EFAIL, for the failures nobody branches on. */
static inline int
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
pyc_error_set(pyc_error_t *err, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        err->code = PYC_EFAIL;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#endif
