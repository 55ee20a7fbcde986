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

#endif
