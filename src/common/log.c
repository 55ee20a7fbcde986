/*
 * log.c -- see log.h.  Lines are formatted into a stack buffer of 1 KiB; longer text is cut, never split.
 */
#include "log.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"

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

static void
#if defined(__GNUC__)
__attribute__((format(printf, 1, 0)))
#endif
vlog(const char *fmt, va_list ap)
{
    char line[1024];
    static const char prefix[] = "pyc-kernel: ";
    size_t n = sizeof prefix - 1;
    memcpy(line, prefix, n);
    int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    n += (size_t)m < sizeof line - n - 1 ? (size_t)m : sizeof line - n - 2;
    line[n++] = '\n';
    ssize_t w = write(log_fd, line, n);
    (void)w;
}

void
pyc_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

void
pyc_log_limited(pyc_log_limit_t *lim, const char *fmt, ...)
{
    uint64_t now = pyc_now_ns(), second = now / 1000000000u;
    pthread_mutex_lock(&lim->lock);
    if (second != lim->second) {
        if (lim->suppressed > 0)
            pyc_log("(%lu more like the last line in the second before were not logged)", lim->suppressed);
        lim->second = second;
        lim->logged = 0;
        lim->suppressed = 0;
    }
    bool show = lim->logged < PYC_LOG_LIMIT_PER_SECOND;
    if (show)
        lim->logged++;
    else
        lim->suppressed++;
    pthread_mutex_unlock(&lim->lock);
    if (!show)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}
