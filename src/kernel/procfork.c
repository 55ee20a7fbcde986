/*
 * procfork.c -- fork(2) of the kernel's process, safe with its threads: the fork handlers that take every
 * lock of the kernel another thread may hold (in kernel.h's order) so that a child inherits none of them
 * taken, pyc_kernel_fork for the kernel's own children (an isolated cell, a forked session, a snapshot), and
 * what a child of user code (os.fork, multiprocessing) becomes: not a kernel, its output passed through to
 * the cell that made it.  Below every file that forks (fork.c, isolate.c, snapshot.c) and above none of them.
 */
#include "kernelint.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

/* The kernel of this process, for the fork handlers (a process has one kernel). */
static pyc_kernel_t *fork_kernel;
/* True while pyc_kernel_fork forks (main thread only): the child is the kernel's own (an isolated cell, a
 * forked session), which sets itself up; any other fork is user code's (os.fork, multiprocessing). */
static bool kernel_forking;
/* The pid of the process that is the kernel: set when the kernel is made and in the kernel's own children.
 * A process with another pid is a child of user code.  Atomic: signal handlers read it. */
static _Atomic pid_t kernel_pid;

/* LLVM 14's AddressSanitizer does not take its own locks around fork(2) (the fork interceptor that does came
 * with LLVM 15): a fork while another thread -- libzmq's I/O thread, the stream flusher -- is inside malloc
 * left the child waiting for the allocator's lock for ever (seen with gdb: an isolated cell's child stuck in
 * the malloc of PyOS_AfterFork_Child, 1 run in 2).  In a clang AddressSanitizer build the fork handlers below
 * take the sanitizer's locks as that interceptor does, last before the fork and first after it.  Other builds
 * use glibc's malloc, which handles fork itself. */
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PYC_ASAN_FORK_LOCKS 1
#endif
#endif
#ifdef PYC_ASAN_FORK_LOCKS
/* __lsan::LockThreadRegistry() and friends: C++ functions of the sanitizer runtime, linked statically. */
void _ZN6__lsan18LockThreadRegistryEv(void);
void _ZN6__lsan20UnlockThreadRegistryEv(void);
void _ZN6__lsan13LockAllocatorEv(void);
void _ZN6__lsan15UnlockAllocatorEv(void);
void _ZN11__sanitizer17StackDepotLockAllEv(void);
void _ZN11__sanitizer19StackDepotUnlockAllEv(void);

static void
sanitizer_lock(void)
{
    _ZN6__lsan18LockThreadRegistryEv();
    _ZN6__lsan13LockAllocatorEv();
    _ZN11__sanitizer17StackDepotLockAllEv();
}

static void
sanitizer_unlock(void)
{
    _ZN11__sanitizer19StackDepotUnlockAllEv();
    _ZN6__lsan15UnlockAllocatorEv();
    _ZN6__lsan20UnlockThreadRegistryEv();
}
#else
static void
sanitizer_lock(void)
{
}

static void
sanitizer_unlock(void)
{
}
#endif

/* Before any fork(2) of this process, from whatever thread calls it: takes every lock of the kernel that
 * another thread may hold, in the order of kernel.h, so that the child inherits none of them taken by a
 * thread that does not exist in it.  (The GIL is held by the forking thread already when Python forks, and
 * by pyc_kernel_fork.)  The server's locks and the guard's belong to objects a child never uses: a forked
 * session makes its own, and a user's child leaves the kernel's sockets alone (atfork_child). */
static void
atfork_prepare(void)
{
    pyc_kernel_t *k = fork_kernel;
    if (k == NULL)
        return;
    pyc_streams_lock(k->streams);
    pthread_mutex_lock(&k->parent_lock);
    pyc_journal_lock(k->journal);        /* after parent_lock, as the send path takes them */
    pyc_outgate_lock(&k->out);
    pthread_mutex_lock(&k->usage_lock);
    pyc__store_fork(k, PYC__FORK_PREPARE);
    sanitizer_lock();
}

/* Gives back the locks of atfork_prepare before the writer's, in reverse order. */
static void
unlock_kernel(pyc_kernel_t *k)
{
    pthread_mutex_unlock(&k->usage_lock);
    pyc_outgate_unlock(&k->out);
    pyc_journal_unlock(k->journal);
    pthread_mutex_unlock(&k->parent_lock);
    pyc_streams_unlock(k->streams);
}

static void
atfork_parent(void)
{
    pyc_kernel_t *k = fork_kernel;
    if (k == NULL)
        return;
    sanitizer_unlock();
    pyc__store_fork(k, PYC__FORK_PARENT);
    unlock_kernel(k);
}

/* In the child.  A child of user code (a multiprocessing worker, os.fork in a cell) is not a kernel: its
 * output goes straight to the fds it inherited, which are the pipes the kernel drains, so that it reaches
 * the cell that made the child, as under ipykernel; it publishes nothing else (the kernel's sockets are the
 * parent's, and their threads do not exist here). */
static void
atfork_child(void)
{
    pyc_kernel_t *k = fork_kernel;
    if (k == NULL)
        return;
    sanitizer_unlock();
    pyc__store_fork(k, PYC__FORK_CHILD);
    unlock_kernel(k);
    if (kernel_forking) {
        atomic_store(&kernel_pid, getpid());
        return;
    }
    k->user_forked = true;
    pyc_streams_set_passthrough(k->streams);
    /* SIGTERM kills a user's child as it kills any Python process: multiprocessing.Pool ends its workers
     * so, and the kernel's handler here would only have interrupted the worker (which then may go on
     * waiting, and its pool's join with it: seen as a soak test's hang) and woken the parent's main loop
     * through the inherited eventfd.  A SIGTERM that comes before this line is handled the same way by
     * pyc_kernel_owns_process's caller. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL);
}

bool
pyc_kernel_owns_process(void)
{
    return getpid() == atomic_load(&kernel_pid);
}

int
pyc__procfork_install(pyc_kernel_t *k, pyc_error_t *err)
{
    static bool installed;
    if (!installed) {
        if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child) != 0)
            return pyc_error_set(err, "pthread_atfork failed");
        installed = true;
    }
    fork_kernel = k;
    atomic_store(&kernel_pid, getpid());
    return 0;
}

pid_t
pyc_kernel_fork(pyc_kernel_t *k, int *errno_out)
{
    /* The GIL first, then CPython's before-fork handlers (Python code: it may print, so none of our locks
     * may be held yet), then fork(2), around which atfork_prepare takes the kernel's locks. */
    (void)k;
    pyc_py_enter();
    /* Once per process (its children inherit it): what each child would do at its first cell, done here so
     * that they share it (issue 32's idle sessions). */
    static bool warmed;
    if (!warmed) {
        warmed = true;
        pyc_history_warm();
        pyc_py_warm_for_fork();
    }
    pyc_py_fork_prepare();
    kernel_forking = true;
    pid_t pid = fork();
    *errno_out = errno;
    kernel_forking = false;
    pyc_py_fork_done(pid);
    pyc_py_leave();
    return pid;
}

void
pyc__user_fork_exit(pyc_kernel_t *k)
{
    /* A child of user code that came back from the cell (os.fork() without os._exit): it must not go on as a
     * second kernel on its parent's sockets.  What it printed has reached the cell already. */
    (void)k;
    fflush(NULL);
    _exit(0);
}

void
pyc__procfork_forget(pyc_kernel_t *k)
{
    if (fork_kernel == k)
        fork_kernel = NULL;
}
