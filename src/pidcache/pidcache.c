/*
 * pidcache.c -- getpid() answered from memory when libzmq asks, which it does on every mailbox operation.
 *
 * Why.  libzmq (built with HAVE_FORK, as Debian's is) compares getpid() with the pid it saved at each
 * signaler send, wait and receive, to notice that it runs in a forked child: about 19 getpid(2) calls per
 * one-at-a-time `pass` request over the kernel's threads (strace, main and I/O thread), about 9 of them on
 * the main thread.  glibc stopped caching the pid in 2.25, and a system call costs 1.1 us on the 2-core
 * reference VM (bench/README.md), so that check alone was a tenth of the kernel's CPU for such a request.
 *
 * How.  The program defines getpid itself: the dynamic linker binds every other object's calls to it (the
 * executable comes first in the lookup scope), glibc's own internal calls excepted.  A call whose return
 * address lies in libzmq's code gets the pid kept here, read once with the raw system call; every other
 * caller (Python's os.getpid, C extensions, pyc itself) still makes the system call, so that no code but
 * libzmq's fork check can be misled by the cache.  The cache is pyc_proc_self's (proc.h, which the kernel's
 * cell file names use too), cleared in the child of every fork(3) by a pthread_atfork handler that
 * pyc_pidcache_init has registered before any other, so that it runs first in the child.  fork(3) is how the
 * kernel and Python make their children; a process made by a raw clone(2) that then used the parent's
 * libzmq state would see its parent's pid, but libzmq state is not usable in such a child in any case.
 *
 * pyc_pidcache_init must run first thing in main, before any thread or fork.  Until it has run, and when
 * libzmq's code cannot be found, every call makes the system call.  This file is a library of its own
 * (libpycpidcache.a, Makefile.am), linked by pyc-kernel and its unit test only: in libpyckernel.a, any
 * program that calls getpid would have pulled it in.
 */
#include "pidcache.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zmq.h>

#include "proc.h"

/* libzmq 4's soname, under which the loader has it. */
#define PYC_ZMQ_SONAME "libzmq.so.5"

/* libzmq's executable segments, [lo, hi); both 0 until found. */
static uintptr_t zmq_lo, zmq_hi;

/* dl_iterate_phdr's callback: records the executable segments of the shared object that holds *data.  The
 * program itself is skipped: in a program built without PIE, &zmq_msg_send is its own PLT entry. */
static int
find_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
        return 0;
    uintptr_t target = (uintptr_t)data, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < lo)
            lo = start;
        if (start + ph->p_memsz > hi)
            hi = start + ph->p_memsz;
    }
    if (lo < hi && target >= lo && target < hi) {
        zmq_lo = lo;
        zmq_hi = hi;
        return 1;
    }
    return 0;
}

void
pyc_pidcache_init(void)
{
    pyc_proc_self();             /* registers the cache's fork handler: first, as main's first call */
    /* libzmq's own address of one of its functions: asked of the library itself, since the program's
     * reference may be a PLT entry (above). */
    void *zmq = dlopen(PYC_ZMQ_SONAME, RTLD_LAZY | RTLD_NOLOAD);
    void *fn = zmq != NULL ? dlsym(zmq, "zmq_msg_send") : NULL;
    if (fn == NULL)
        fn = (void *)(uintptr_t)&zmq_msg_send;
    dl_iterate_phdr(find_object, fn);
    if (zmq != NULL)
        dlclose(zmq);            /* only the reference RTLD_NOLOAD took: the library stays */
}

pid_t
pyc_pidcache_pid(uintptr_t from)
{
    if (from >= zmq_lo && from < zmq_hi)
        return (pid_t)pyc_proc_self();
    return (pid_t)syscall(SYS_getpid);
}

pid_t
getpid(void)
{
    return pyc_pidcache_pid((uintptr_t)__builtin_return_address(0));
}
