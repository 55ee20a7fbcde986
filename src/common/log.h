/*
 * log.h -- one-line diagnostics on the kernel's real stderr.
 *
 * Once output capture replaces file descriptors 1 and 2 with pipes, writing to stderr would send our own log
 * lines to the notebook.  The log therefore writes to a duplicate of the original stderr taken at start-up
 * (pyc_log_init), with one write(2) per line so that lines from different threads never interleave.
 * Every line starts with "pyc-kernel: ".
 */
#ifndef PYC_LOG_H
#define PYC_LOG_H

#include <pthread.h>

/* Duplicates the current fd 2 for the log.  Call once, before output capture starts. */
void pyc_log_init(void);

/* The file descriptor log lines go to (the original stderr). */
int pyc_log_fd(void);

/* Writes "pyc-kernel: <formatted text>\n" as one write. */
void pyc_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* A rate limit for lines that a peer can cause at will (a message dropped for a bad signature): at most
 * PYC_LOG_LIMIT_PER_SECOND lines a second; the rest are counted, and the count is logged once the next second
 * begins.  Initialize with PYC_LOG_LIMIT_INIT. */
#define PYC_LOG_LIMIT_PER_SECOND 10
typedef struct pyc_log_limit {
    pthread_mutex_t lock;
    unsigned long second, logged, suppressed;
} pyc_log_limit_t;
#define PYC_LOG_LIMIT_INIT {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0}

/* pyc_log under the limit lim (any thread). */
void pyc_log_limited(pyc_log_limit_t *lim, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
