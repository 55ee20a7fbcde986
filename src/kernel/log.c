/*
 * log.c -- see log.h.  Lines are formatted into a stack buffer of 1 KiB; longer text is cut, never split.
 */
#include "log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int log_fd = 2;

void
pyc_log_init(void)
{
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0)
        log_fd = fd;
}

int
pyc_log_fd(void)
{
    return log_fd;
}

void
pyc_log(const char *fmt, ...)
{
    char line[1024];
    static const char prefix[] = "pyc-kernel: ";
    size_t n = sizeof prefix - 1;
    memcpy(line, prefix, n);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += (size_t)m < sizeof line - n - 1 ? (size_t)m : sizeof line - n - 2;
    line[n++] = '\n';
    ssize_t w = write(log_fd, line, n);
    (void)w;
}
