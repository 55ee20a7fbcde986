/*
 * memcap.c -- the memory cap (README, "Limits and outcomes": --memory-limit): a hard RLIMIT_DATA of what the
 * process has at start-up plus the cap, and a reserve of address space kept for the kernel's own C work.
 *
 * RLIMIT_DATA counts private writable memory: the heap, anonymous mappings, thread stacks; not shared
 * libraries or reserved-but-inaccessible address space.  The interpreter, libraries and threads the kernel
 * already has are not the session's, hence "what the process has now plus the cap".  The limit is hard, so
 * that code in the session cannot lift it (resource.setrlimit); processes the session starts inherit it.
 *
 * The reserve (32 MiB, mapped writable but never touched: it counts against the limit but costs no RAM) is
 * given back when a cell hits the cap, so that the kernel can still format and send the cell's error
 * (ZeroMQ aborts when it cannot allocate); it is taken again before the next cell.
 */
#include "kernelint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "proc.h"

#define MEM_RESERVE ((size_t)32 << 20)

void
pyc__memory_reserve(pyc_kernel_t *k, bool keep)
{
    if (k->limits.memory == 0)
        return;
    if (keep && k->mem_reserve == NULL) {
        void *p = mmap(NULL, MEM_RESERVE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       0);
        k->mem_reserve = p != MAP_FAILED ? p : NULL;
    } else if (!keep && k->mem_reserve != NULL) {
        munmap(k->mem_reserve, MEM_RESERVE);
        k->mem_reserve = NULL;
    }
}

int
pyc_kernel_limit_memory(pyc_kernel_t *k, pyc_error_t *err)
{
    if (k->limits.memory == 0)
        return 0;
    char buf[4096];
    unsigned long long data = 0;
    if (pyc_proc_read_small("/proc/self/status", buf, sizeof buf) > 0) {
        const char *v = strstr(buf, "\nVmData:");
        if (v != NULL)
            data = strtoull(v + 8, NULL, 10) * 1024;
    }
    if (data == 0)
        return pyc_error_set(err, "memory limit: cannot read VmData from /proc/self/status");
    pyc__memory_reserve(k, true);
    unsigned long long want = data + (k->mem_reserve != NULL ? MEM_RESERVE : 0) + k->limits.memory;
    struct rlimit rl;
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        pyc_log("memory limit: the hard data limit of this process (%llu bytes) is below the one asked for; "
                "keeping it", (unsigned long long)rl.rlim_max);
        want = rl.rlim_max;
    }
    rl.rlim_cur = rl.rlim_max = (rlim_t)want;
    if (setrlimit(RLIMIT_DATA, &rl) < 0)
        return pyc_error_set(err, "memory limit: setrlimit: %s", strerror(errno));
    /* RLIMIT_DATA does not count shared mappings (mmap(-1, n) from Python, a memfd, /dev/shm): the guard
     * also watches what the process really holds, its resident memory. */
    unsigned long long rss = 0, pss = 0;
    if (pyc_proc_memory(getpid(), &rss, &pss) == 0 && rss > 0)
        pyc_guard_watch_memory(k->guard, rss + (k->mem_reserve != NULL ? MEM_RESERVE : 0) + k->limits.memory);
    return 0;
}

json_t *
pyc__memory_enforcement(const pyc_kernel_t *k)
{
    json_t *how = json_array();
    if (k->limits.memory > 0) {
        json_array_append_new(how, json_string("rlimit_data"));
        json_array_append_new(how, json_string("rss_watch"));
    }
    /* A cgroup the kernel was started in, with a memory limit (systemd-run -p MemoryMax=..., a container):
     * the stronger fence, kept by the operating system; pyc reports it, and does not make one itself. */
    char buf[4096], path[4400];
    if (pyc_proc_read_small("/proc/self/cgroup", buf, sizeof buf) > 0) {
        char *save = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
            const char *p = NULL, *file = NULL;
            if (strncmp(line, "0::", 3) == 0) {
                p = line + 3;
                file = "memory.max";
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/%s", p, file);
            } else if ((p = strstr(line, ":memory:")) != NULL) {
                p += 8;
                file = "memory.limit_in_bytes";
                snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/%s", p, file);
            } else {
                continue;
            }
            char val[64];
            if (pyc_proc_read_small(path, val, sizeof val) <= 0)
                continue;
            unsigned long long max = strtoull(val, NULL, 10);
            if (strncmp(val, "max", 3) == 0 || max == 0 || max >= (1ULL << 60))
                continue;
            json_array_append_new(how, json_pack("{s:s, s:I}", "cgroup", path, "bytes", (json_int_t)max));
        }
    }
    return how;
}
