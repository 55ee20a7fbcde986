/*
 * proc.h -- the one reader of Linux's /proc for both programs: a process's identity (state, parent, start
 * tick), its CPU ticks and its memory.
 *
 * The `pyc` command uses it to tell whether a session's kernel is still the very process it recorded (a pid
 * with a different start tick is another process, never killed); the kernel uses it for usage_request.
 * Nothing here allocates; every call reads one small file.  Beside the readers, pyc_proc_pidfd: a descriptor
 * that tells when a process ends, for the kernel's waits (no polling of /proc or kill(2) while idle).
 */
#ifndef PYC_PROC_H
#define PYC_PROC_H

#include <stdbool.h>

/* What /proc/PID/stat says of a process, in the fields pyc needs. */
typedef struct pyc_proc_stat {
    char state;                  /* field 3: 'R', 'S', 'Z', ... */
    long ppid;                   /* field 4 */
    unsigned long long ticks;    /* fields 14 + 15: user and system CPU, in clock ticks */
    unsigned long long start;    /* field 22: start time, in clock ticks after boot */
} pyc_proc_stat_t;

/* Parses the text of /proc/PID/stat.  The command name (field 2) is in parentheses and may itself hold
 * spaces and parentheses, so fields are counted from the last ')'.  Returns 0, or -1 when the text is not
 * of that form. */
int pyc_proc_stat_parse(const char *text, pyc_proc_stat_t *st);

/* Reads and parses /proc/PID/stat.  Returns 0, or -1 when the process is gone (or pid <= 0). */
int pyc_proc_stat(long pid, pyc_proc_stat_t *st);

/* True when process pid exists, is not a zombie, and (when start is not 0) started at that tick: that is,
 * when it is still the very process that was recorded. */
bool pyc_proc_is(long pid, unsigned long long start);

/* The start tick of a live process, or 0 when it is gone or /proc cannot tell. */
unsigned long long pyc_proc_start(long pid);

/* A process's resident and proportional set sizes in bytes (PSS falls back to RSS where smaps_rollup is not
 * available).  Returns 0, or -1 when the process is gone. */
int pyc_proc_memory(long pid, unsigned long long *rss, unsigned long long *pss);

/* What only this process holds (its unique set size): the Private_Clean, Private_Dirty and Swap of
 * smaps_rollup, in bytes.  For a copy-on-write fork of a kernel it is the memory the fork really costs: the
 * pages either side has written since.  Returns 0, or -1 when the process is gone or smaps_rollup is not
 * available. */
int pyc_proc_private(long pid, unsigned long long *uss);

/* Reads a small file (most of /proc) into buf, NUL-terminated.  Returns the length, or -1. */
long pyc_proc_read_small(const char *path, char *buf, unsigned long cap);

/* This process's pid, kept after the first call instead of a getpid(2) each time (a system call costs
 * 1.1 us on the 2-core reference VM, and the kernel asks per cell and libzmq per message: pidcache.h).  It
 * is read again in the child of every fork(3): the first call registers a pthread_atfork child handler that
 * forgets it.  A child made otherwise (a raw clone(2), vfork) sees its parent's pid.  Thread-safe. */
long pyc_proc_self(void);

/* pidfd_open(2) of pid (Linux 5.3 and later; close-on-exec): a descriptor that poll(2) finds readable once
 * the process has ended (exited or been killed, reaped or not).  Returns it, or -1 with errno (ENOSYS on an
 * older kernel, ESRCH when there is no such process). */
int pyc_proc_pidfd(long pid);

#endif
