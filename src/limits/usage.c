/*
 * usage.c -- /proc readers for usage_request; see usage.h.
 *
 * Cost: one request reads /proc/<pid>/stat of every process on the host once (to find the kernel's
 * descendants: subprocesses, forked sessions, isolated cells) and smaps_rollup of each descendant; with a few
 * hundred processes that is about a millisecond.  The scan stops at 65536 entries.
 */
#include "usage.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "proc.h"

#define MAX_SCAN 65536

/* The pids of pid and all its descendants, pid first.  Returns the count (at least 1); *out is malloc'd. */
static size_t
family(pid_t pid, pid_t **out)
{
    size_t cap = 64, n = 0, nall = 0, capall = 0;
    pid_t *fam = malloc(cap * sizeof *fam);
    struct pp {
        pid_t pid, ppid;
    } *all = NULL;
    *out = fam;
    if (fam == NULL)
        return 0;
    fam[n++] = pid;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return n;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && nall < MAX_SCAN) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t p = (pid_t)strtol(e->d_name, NULL, 10);
        pyc_proc_stat_t st;
        if (p == pid || pyc_proc_stat(p, &st) < 0 || st.ppid <= 1)
            continue;
        pid_t pp = (pid_t)st.ppid;
        if (nall == capall) {
            size_t c = capall ? capall * 2 : 256;
            struct pp *g = realloc(all, c * sizeof *g);
            if (g == NULL)
                break;
            all = g;
            capall = c;
        }
        all[nall++] = (struct pp){p, pp};
    }
    closedir(d);
    /* Breadth first: fam[i]'s children are appended as fam grows. */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < nall; j++) {
            if (all[j].ppid != fam[i])
                continue;
            if (n == cap) {
                pid_t *g = realloc(fam, cap * 2 * sizeof *g);
                if (g == NULL)
                    goto done;
                fam = g;
                cap *= 2;
            }
            fam[n++] = all[j].pid;
        }
    }
done:
    free(all);
    *out = fam;
    return n;
}

/* The host's busy and total CPU ticks, from the first line of /proc/stat. */
static int
host_cpu(unsigned long long *busy, unsigned long long *total)
{
    char buf[512];
    unsigned long long v[8] = {0};
    if (pyc_proc_read_small("/proc/stat", buf, sizeof buf) <= 0 ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], &v[7]) < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4];   /* idle and iowait */
    return 0;
}

/* The host's memory in psutil's virtual_memory() terms. */
static json_t *
host_memory(void)
{
    char buf[8192];
    if (pyc_proc_read_small("/proc/meminfo", buf, sizeof buf) <= 0)
        return json_object();
    static const char *const keys[] = {"MemTotal:", "MemAvailable:", "MemFree:", "Buffers:", "Cached:",
                                       "Shmem:", "Active:", "Inactive:", "SReclaimable:"};
    unsigned long long v[sizeof keys / sizeof keys[0]] = {0};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char *p = strstr(buf, keys[i]);
        if (p != NULL && (p == buf || p[-1] == '\n'))
            v[i] = strtoull(p + strlen(keys[i]), NULL, 10) * 1024;
    }
    unsigned long long total = v[0], avail = v[1], free_ = v[2], buffers = v[3];
    unsigned long long cached = v[4] + v[8];
    unsigned long long used = total > free_ + buffers + cached ? total - free_ - buffers - cached : 0;
    double percent = total > 0 ? 100.0 * (double)(total - avail) / (double)total : 0;
    return json_pack("{s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "total", (json_int_t)total,
                     "available", (json_int_t)avail, "percent", percent, "used", (json_int_t)used, "free",
                     (json_int_t)free_, "buffers", (json_int_t)buffers, "cached", (json_int_t)cached, "shared",
                     (json_int_t)v[5], "active", (json_int_t)v[6], "inactive", (json_int_t)v[7]);
}

json_t *
pyc_usage_report(pid_t pid, pyc_usage_state_t *st)
{
    unsigned long long own_rss, own_pss;
    pyc_proc_stat_t own;
    if (pyc_proc_stat(pid, &own) < 0 || pyc_proc_memory(pid, &own_rss, &own_pss) < 0)
        return NULL;
    unsigned long long own_ticks = own.ticks, start = own.start;
    pid_t *fam;
    size_t n = family(pid, &fam);
    unsigned long long ticks = own_ticks, mem = own_pss;
    for (size_t i = 1; i < n; i++) {
        unsigned long long rss, pss;
        pyc_proc_stat_t ps;
        if (pyc_proc_stat(fam[i], &ps) == 0)
            ticks += ps.ticks;
        if (pyc_proc_memory(fam[i], &rss, &pss) == 0)
            mem += pss;
    }
    free(fam);

    double hz = (double)sysconf(_SC_CLK_TCK);
    double now = pyc_now_s();
    double kernel_cpu;
    if (st->when > 0 && now > st->when) {
        kernel_cpu = ticks >= st->ticks ? 100.0 * (double)(ticks - st->ticks) / hz / (now - st->when) : 0;
    } else {
        /* The first request: the average since the kernel started (uptime and start are in ticks). */
        char buf[128];
        double up = pyc_proc_read_small("/proc/uptime", buf, sizeof buf) > 0 ? strtod(buf, NULL) : 0;
        double age = up - (double)start / hz;
        kernel_cpu = age > 0 ? 100.0 * (double)own_ticks / hz / age : 0;
    }
    unsigned long long busy = 0, total = 0;
    double host_pct = 0;
    if (host_cpu(&busy, &total) == 0 && st->host_total > 0 && total > st->host_total)
        host_pct = 100.0 * (double)(busy - st->host_busy) / (double)(total - st->host_total);
    st->when = now;
    st->ticks = ticks;
    st->host_busy = busy;
    st->host_total = total;

    char host[256] = "";
    gethostname(host, sizeof host - 1);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    json_t *r = json_pack("{s:s, s:I, s:f, s:I, s:I, s:o, s:{s:I, s:I, s:f, s:I}}", "hostname", host, "pid",
                          (json_int_t)pid, "kernel_cpu", kernel_cpu, "kernel_memory", (json_int_t)mem,
                          "cpu_count", (json_int_t)(ncpu > 0 ? ncpu : 1), "host_virtual_memory", host_memory(),
                          "pyc", "rss", (json_int_t)own_rss, "pss", (json_int_t)own_pss, "cpu_time",
                          (double)own_ticks / hz, "processes", (json_int_t)n);
    if (r != NULL && host_pct > 0)
        json_object_set_new(r, "host_cpu_percent", json_real(host_pct));
    return r;
}
