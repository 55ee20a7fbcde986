/*
 * proc.c -- see proc.h.
 *
 * /proc/PID/stat is read with one read(2) into 1 KiB: the file is about 300 bytes, and its command name is at
 * most 16 characters (TASK_COMM_LEN), so nothing is ever cut.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Linux's number for pidfd_open on every architecture (a new-style syscall), for C libraries older than the
 * call. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

long
pyc_proc_read_small(const char *path, char *buf, unsigned long cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || cap == 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1)
            break;
    }
    close(fd);
    buf[len] = '\0';
    return len > 0 ? (long)len : -1;
}

/* Reads one unsigned decimal field at *p (after spaces), moving *p past it.  Returns -1 on anything else. */
static int
field_ull(const char **p, unsigned long long *out)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || (*end != ' ' && *end != '\0' && *end != '\n'))
        return -1;
    *out = v;
    *p = end;
    return 0;
}

/* Skips one field at *p (after spaces).  Returns -1 at the end of the text. */
static int
field_skip(const char **p)
{
    const char *s = *p;
    if (*s != ' ')
        return -1;
    while (*s == ' ')
        s++;
    if (*s == '\0' || *s == '\n')
        return -1;
    while (*s != ' ' && *s != '\0' && *s != '\n')
        s++;
    *p = s;
    return 0;
}

int
pyc_proc_stat_parse(const char *text, pyc_proc_stat_t *st)
{
    const char *p = strrchr(text, ')');
    if (p == NULL)
        return -1;
    p++;
    while (*p == ' ')
        p++;
    if (*p == '\0' || *p == ' ' || *p == '\n')
        return -1;
    char state = *p++;
    /* ppid is field 4 and may be 0; it is signed in the kernel's format only for the idle task's parent. */
    unsigned long long ppid, utime, stime, start;
    if (*p != ' ' || field_ull(&p, &ppid) < 0)
        return -1;
    for (int field = 5; field < 14; field++) {
        if (field_skip(&p) < 0)
            return -1;
    }
    if (field_ull(&p, &utime) < 0 || field_ull(&p, &stime) < 0)
        return -1;
    for (int field = 16; field < 22; field++) {
        if (field_skip(&p) < 0)
            return -1;
    }
    if (field_ull(&p, &start) < 0)
        return -1;
    st->state = state;
    st->ppid = (long)ppid;
    st->ticks = utime + stime;
    st->start = start;
    return 0;
}

int
pyc_proc_stat(long pid, pyc_proc_stat_t *st)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (pyc_proc_read_small(path, buf, sizeof buf) < 0)
        return -1;
    return pyc_proc_stat_parse(buf, st);
}

static bool
gone(char state)
{
    return state == 'Z' || state == 'X' || state == 'x';
}

bool
pyc_proc_is(long pid, unsigned long long start)
{
    pyc_proc_stat_t st;
    if (pyc_proc_stat(pid, &st) < 0 || gone(st.state))
        return false;
    return start == 0 || st.start == start;
}

unsigned long long
pyc_proc_start(long pid)
{
    pyc_proc_stat_t st;
    if (pyc_proc_stat(pid, &st) < 0 || gone(st.state))
        return 0;
    return st.start;
}

int
pyc_proc_memory(long pid, unsigned long long *rss, unsigned long long *pss)
{
    char path[64], buf[4096];
    *rss = *pss = 0;
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", pid);
    if (pyc_proc_read_small(path, buf, sizeof buf) > 0) {
        char *r = strstr(buf, "\nRss:"), *q = strstr(buf, "\nPss:");
        if (r != NULL)
            *rss = strtoull(r + 5, NULL, 10) * 1024;
        if (q != NULL)
            *pss = strtoull(q + 5, NULL, 10) * 1024;
        if (r != NULL)
            return 0;
    }
    snprintf(path, sizeof path, "/proc/%ld/statm", pid);
    if (pyc_proc_read_small(path, buf, sizeof buf) < 0)
        return -1;
    unsigned long long size, res;
    if (sscanf(buf, "%llu %llu", &size, &res) != 2)
        return -1;
    *rss = *pss = res * (unsigned long long)sysconf(_SC_PAGESIZE);
    return 0;
}

int
pyc_proc_private(long pid, unsigned long long *uss)
{
    static const char *const fields[] = {"\nPrivate_Clean:", "\nPrivate_Dirty:", "\nSwap:"};
    char path[64], buf[4096];
    *uss = 0;
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", pid);
    if (pyc_proc_read_small(path, buf, sizeof buf) <= 0 || strstr(buf, fields[0]) == NULL)
        return -1;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *f = strstr(buf, fields[i]);
        if (f != NULL)
            *uss += strtoull(f + strlen(fields[i]), NULL, 10) * 1024;
    }
    return 0;
}

/* The pid pyc_proc_self answers: 0 when it is to be read again (at first, and in a new child), -1 when no
 * fork handler could be registered (then never kept). */
static _Atomic long self_pid;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void
forget_self(void)
{
    atomic_store_explicit(&self_pid, 0, memory_order_relaxed);
}

static void
watch_forks(void)
{
    if (pthread_atfork(NULL, NULL, forget_self) != 0)
        atomic_store_explicit(&self_pid, -1, memory_order_relaxed);
}

long
pyc_proc_self(void)
{
    pthread_once(&self_once, watch_forks);
    long pid = atomic_load_explicit(&self_pid, memory_order_relaxed);
    if (pid < 0)
        return (long)syscall(SYS_getpid);
    if (pid == 0) {
        pid = (long)syscall(SYS_getpid);
        atomic_store_explicit(&self_pid, pid, memory_order_relaxed);
    }
    return pid;
}

int
pyc_proc_pidfd(long pid)
{
    if (pid <= 0) {
        errno = ESRCH;
        return -1;
    }
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
}
