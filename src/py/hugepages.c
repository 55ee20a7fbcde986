/*
 * hugepages.c -- large blocks of Python memory on transparent huge pages, so that a session fork stays cheap
 * when the session is big (README, "Session fork").
 *
 * Why: fork(2) copies the page tables of the whole process.  A session holding 1 GiB in 4 KiB pages has
 * 262144 entries to copy, each taking a reference to its page: about 6 ms per fork on the reference VM,
 * which makes a fan-out of 100 children cost 600 ms in fork(2) alone.  The same GiB in 2 MiB pages is 512
 * entries, and the fork costs about 0.35 ms.  The system's default here is "madvise" (huge pages only where
 * a program asks), so the kernel asks, for the blocks that matter: every block of at least HUGE_MIN bytes
 * that Python's raw allocator hands out (large bytes, bytearray, str, list and dict storage; pymalloc's
 * small objects live in its own arenas and are not touched).  NumPy asks for its own arrays already.
 *
 * What it costs: one comparison per raw allocation, one madvise(2) per large one (which the mmap(2) glibc
 * makes for a large block dwarfs); memory in 2 MiB steps where a large block is only partly written.  A
 * child that writes to a shared huge page copies 4 KiB of it, not 2 MiB (Linux 5.8 and later split the
 * mapping first).  PYC_HUGEPAGES=0 turns it off; so does a system whose setting is "never" or "always"
 * (where asking changes nothing).
 */
#include "pyint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Blocks this size or larger are advised (NumPy's threshold for its arrays). */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

/* The allocator that was in place: every call goes on to it, so blocks stay interchangeable with it. */
static PyMemAllocatorEx inner;

/* Advises the whole 2 MiB pages inside [p, p + size): a range that is not page-aligned would be refused. */
static void
advise(void *p, size_t size)
{
    if (p == NULL || size < HUGE_MIN)
        return;
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + size) & ~(HUGE_PAGE - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE);  /* advice only: a refusal leaves 4 KiB pages */
}

static void *
huge_malloc(void *ctx, size_t size)
{
    (void)ctx;
    void *p = inner.malloc(inner.ctx, size);
    advise(p, size);
    return p;
}

static void *
huge_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    void *p = inner.calloc(inner.ctx, nelem, elsize);
    if (p != NULL && elsize != 0 && nelem <= SIZE_MAX / elsize)
        advise(p, nelem * elsize);
    return p;
}

static void *
huge_realloc(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    void *p = inner.realloc(inner.ctx, ptr, size);
    advise(p, size);
    return p;
}

static void
huge_free(void *ctx, void *ptr)
{
    (void)ctx;
    inner.free(inner.ctx, ptr);
}

/* True when the system gives huge pages only where asked ("madvise"), and PYC_HUGEPAGES is not 0. */
static bool
worth_asking(void)
{
    const char *env = getenv("PYC_HUGEPAGES");
    if (env != NULL && strcmp(env, "0") == 0)
        return false;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (f == NULL)
        return false;
    bool ok = fgets(line, sizeof line, f) != NULL && strstr(line, "[madvise]") != NULL;
    fclose(f);
    return ok;
}

void
pyc__py_hugepages_install(void)
{
    if (!worth_asking())
        return;
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &inner);
    PyMemAllocatorEx huge = {NULL, huge_malloc, huge_calloc, huge_realloc, huge_free};
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &huge);
}
