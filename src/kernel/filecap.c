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
 * pipes, a forked session's new sockets -- comes out of PYC_FILECAP_HEADROOM.  The headroom is not held back
 * (one limit covers every thread, and a cell may use what the kernel does not), so the kernel also holds a
 * reserve of PYC_FILECAP_RESERVE descriptors (copies of /dev/null, counted in the limit): when a cell ends with
 * the process at its limit, the reserve is given back, so that the kernel can still read /proc for
 * usage_request, write its history and take a new client's connection; it is taken again, as far as there is
 * room, before the next cell (as memcap.c's reserve of address space is).
 *
 * An import opens the module's files, so the modules the kernel needs to report a cell's error (pyc._traceback
 * and the standard modules it imports) are imported before the cap is set: the first error of a session is
 * often the EMFILE of a cell that took every descriptor, and without them its traceback could not be made.
 *
 * The limit is hard, so that code in the session cannot lift it (resource.setrlimit); processes the session
 * starts, forked sessions and isolated cells inherit it.
 */
#include "kernelint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"
#include "py.h"

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

/* The reserve: descriptors of /dev/null, each slot holding fd + 1 (0: empty).  Taken by the main thread
 * before a cell; given back by the main thread after it or by the guard thread during it: a slot is emptied
 * with an atomic exchange, so that each descriptor is closed once (a forked child has its own copy, of its
 * own inherited descriptors; no lock is held across fork). */
static atomic_int reserve[PYC_FILECAP_RESERVE];

void
pyc__files_reserve(pyc_kernel_t *k, bool keep)
{
    if (k->limits.open_files == 0)
        return;
    if (keep) {
        for (int i = 0; i < PYC_FILECAP_RESERVE; i++) {
            if (atomic_load(&reserve[i]) != 0)
                continue;
            int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                break;           /* no room left: the session holds it */
            atomic_store(&reserve[i], fd + 1);
        }
        return;
    }
    /* Given back only when the process is at its limit: one more descriptor cannot be had. */
    int probe = -1, held = 0;
    for (int i = 0; i < PYC_FILECAP_RESERVE && probe < 0; i++) {
        int slot = atomic_load(&reserve[i]);
        if (slot == 0)
            continue;
        held = 1;
        probe = fcntl(slot - 1, F_DUPFD_CLOEXEC, 0);
        if (probe < 0 && errno != EMFILE)
            return;              /* emptied meanwhile by the other thread (EBADF): nothing to decide */
        if (probe < 0)
            break;
    }
    if (probe >= 0) {
        close(probe);
        return;
    }
    int given = 0;
    for (int i = 0; i < PYC_FILECAP_RESERVE && held; i++) {
        int slot = atomic_exchange(&reserve[i], 0);
        if (slot != 0) {
            close(slot - 1);
            given++;
        }
    }
    if (given > 0)
        pyc_log("the session reached its open-file limit; the kernel's reserve of %d descriptors is given back "
                "until the next cell", given);
}

int
pyc_kernel_limit_files(pyc_kernel_t *k, pyc_error_t *err)
{
    if (k->limits.open_files == 0)
        return 0;
    pyc_py_preload("pyc._traceback");
    int own = pyc__open_files();
    if (own < 0)
        return pyc_error_set(err, "open-file limit: cannot list /proc/self/fd: %s", strerror(errno));
    unsigned long long want =
        (unsigned long long)own + PYC_FILECAP_HEADROOM + PYC_FILECAP_RESERVE + k->limits.open_files;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        pyc_log("open-file limit: the hard limit of this process (%llu files) is below the one asked for (%llu: "
                "%d of the kernel's, %d of headroom and reserve, %zu of the session's); keeping it",
                (unsigned long long)rl.rlim_max, want, own, PYC_FILECAP_HEADROOM + PYC_FILECAP_RESERVE,
                k->limits.open_files);
        want = rl.rlim_max;
    }
    rl.rlim_cur = rl.rlim_max = (rlim_t)want;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return pyc_error_set(err, "open-file limit: setrlimit: %s", strerror(errno));
    pyc__files_reserve(k, true);
    pyc_log("open-file limit: %llu descriptors (%d of the kernel's, %d of headroom, a reserve of %d, %zu of the "
            "session's)", want, own, PYC_FILECAP_HEADROOM, PYC_FILECAP_RESERVE, k->limits.open_files);
    return 0;
}
