/*
 * filecap.c -- the open-file cap (README, "Limits and outcomes": --open-files): a hard RLIMIT_NOFILE of the
 * descriptors the kernel has open when the cap is set, plus a headroom for those it opens later, plus the cap.
 *
 * RLIMIT_NOFILE bounds the numbers of new descriptors, and a process gets the lowest free one, so it bounds
 * how many the process can have open at once; past it open(2), socket(2), pipe(2) fail with EMFILE, which a
 * cell sees as OSError: [Errno 24] Too many open files.  The kernel's own descriptors (ZeroMQ's sockets and
 * eventfds, its epoll sets, the log, the stream pipes, the checkpoint file, about 40) are counted when the cap
 * is set, after the server started, so that the session gets the N it was given.  What the kernel opens later
 * -- a socket for each client that connects, the history database (three with its WAL), an isolated cell's
 * pipes, a forked session's new sockets -- comes out of PYC_FILECAP_HEADROOM.  The headroom is not held back:
 * one limit covers every thread, so a session that spends its N and the headroom too leaves the kernel none
 * until it closes some, and a new client's connection then waits (the clients already connected go on).
 *
 * The limit is hard, so that code in the session cannot lift it (resource.setrlimit); processes the session
 * starts, forked sessions and isolated cells inherit it.
 */
#include "kernelint.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

int
pyc__open_files(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    closedir(d);
    return n > 0 ? n - 1 : 0;    /* the directory's own descriptor is not one of the process's */
}

long long
pyc__open_files_max(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    return (long long)rl.rlim_cur;
}

int
pyc_kernel_limit_files(pyc_kernel_t *k, pyc_error_t *err)
{
    if (k->limits.open_files == 0)
        return 0;
    int own = pyc__open_files();
    if (own < 0)
        return pyc_error_set(err, "open-file limit: cannot list /proc/self/fd: %s", strerror(errno));
    unsigned long long want = (unsigned long long)own + PYC_FILECAP_HEADROOM + k->limits.open_files;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        pyc_log("open-file limit: the hard limit of this process (%llu files) is below the one asked for (%llu: "
                "%d of the kernel's, %d of headroom, %zu of the session's); keeping it",
                (unsigned long long)rl.rlim_max, want, own, PYC_FILECAP_HEADROOM, k->limits.open_files);
        want = rl.rlim_max;
    }
    rl.rlim_cur = rl.rlim_max = (rlim_t)want;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return pyc_error_set(err, "open-file limit: setrlimit: %s", strerror(errno));
    pyc_log("open-file limit: %llu descriptors (%d of the kernel's, %d of headroom, %zu of the session's)", want,
            own, PYC_FILECAP_HEADROOM, k->limits.open_files);
    return 0;
}
