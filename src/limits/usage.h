/*
 * usage.h -- the kernel's resource use, read from /proc, for usage_request (the ipykernel extension that
 * JupyterLab's resource indicator and `pyc status` ask for).
 *
 * The reply has ipykernel's shape:
 *   {"hostname", "pid", "kernel_cpu" (percent of one CPU since the previous request, the first time since
 *    the kernel started), "kernel_memory" (bytes: PSS of the kernel and every process below it),
 *    "host_cpu_percent", "cpu_count", "host_virtual_memory": {"total", "available", "percent", "used",
 *    "free", "buffers", "cached", "shared", "active", "inactive"}}
 * plus "pyc": {"rss", "pss", "cpu_time" (seconds), "processes"} for the kernel process alone and the count
 * of processes measured.  Nothing here needs Python: the control thread answers while a cell runs.
 */
#ifndef PYC_USAGE_H
#define PYC_USAGE_H

#include <jansson.h>
#include <sys/types.h>

/* What the previous request saw, to turn CPU tick counters into percentages.  Zero-initialise. */
typedef struct pyc_usage_state {
    double when;                  /* CLOCK_MONOTONIC seconds; 0 before the first request */
    unsigned long long ticks;     /* CPU ticks of the measured processes */
    unsigned long long host_busy; /* host ticks not idle */
    unsigned long long host_total;
} pyc_usage_state_t;

/* Measures pid and its descendants.  Returns a new object, or NULL when /proc cannot be read. */
json_t *pyc_usage_report(pid_t pid, pyc_usage_state_t *state);

#endif
