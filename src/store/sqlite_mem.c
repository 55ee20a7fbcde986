/*
 * sqlite_mem.c -- SQLite's memory, in blocks of its own that a forked process starts afresh (sqlite_mem.h).
 *
 * Why: a session forked from a warm template opens its own history database, and SQLite allocates a few
 * hundred small blocks for the connection and its schema.  From glibc's malloc those blocks land in the free
 * chunks the session inherited, scattered over the heap it shares with its template, and each one costs the
 * session a private copy of a 4 KiB page: 200 to 700 KiB of private memory per idle session, measured with
 * perf's write faults (issue 32: a thousand idle sessions on one machine).  Here SQLite's blocks come from
 * regions of this allocator's own, and after a fork (pthread_atfork) the child starts a new region: its
 * blocks sit side by side on pages that only it writes.
 *
 * How: blocks of 24 size classes from 16 bytes to 64 KiB, cut from 256 KiB regions (mmap) and kept on a free
 * list per class once freed; larger blocks are mappings of their own.  Each block has a 16-byte header: its
 * class (or its size, for a mapping) and the generation it was made in, which a fork's child increments.  A
 * block of an earlier generation (made by the parent before the fork) is never put on a list in the child:
 * its page is shared, and reusing it would copy the page.  It stays where it is, as the parent's memory does
 * in any forked child.  One mutex; SQLite calls these from any thread.
 */
#define PYC_SQLITE_NO_REDIRECT
#include "sqlite_lazy.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

enum { HEADER = 16, REGION = 256 << 10, BIG = 0xffffffffu };

static const uint32_t class_size[] = {16,   32,   48,   64,    96,    128,   192,   256,
                                      384,  512,  768,  1024,  1536,  2048,  3072,  4096,
                                      6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536};
#define N_CLASSES (sizeof class_size / sizeof class_size[0])

typedef struct header {
    uint32_t cls;                /* index into class_size, or BIG */
    uint32_t generation;
    uint64_t size;               /* BIG: the size of the whole mapping */
} header_t;

typedef struct free_block {
    struct free_block *next;
} free_block_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static free_block_t *free_list[N_CLASSES];
static char *bump, *bump_end;    /* what is left of the current region */
static uint32_t generation;

/* The class that holds n bytes, or N_CLASSES when none does. */
static unsigned
class_of(size_t n)
{
    unsigned c = 0;
    while (c < N_CLASSES && class_size[c] < n)
        c++;
    return c;
}

static void *
mem_malloc(int n_)
{
    size_t n = n_ > 0 ? (size_t)n_ : 1;
    unsigned c = class_of(n);
    header_t *h;
    if (c == N_CLASSES) {
        size_t total = (n + HEADER + 4095) & ~(size_t)4095;
        void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        h = m;
        h->cls = BIG;
        h->size = total;
        pthread_mutex_lock(&lock);
        h->generation = generation;
        pthread_mutex_unlock(&lock);
        return (char *)h + HEADER;
    }
    size_t block = HEADER + class_size[c];
    pthread_mutex_lock(&lock);
    if (free_list[c] != NULL) {
        h = (header_t *)((char *)free_list[c] - HEADER);
        free_list[c] = free_list[c]->next;
    } else {
        if (bump == NULL || (size_t)(bump_end - bump) < block) {
            /* The rest of the old region stays unused: at most one block of each class is lost this way. */
            void *m = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) {
                pthread_mutex_unlock(&lock);
                return NULL;
            }
            bump = m;
            bump_end = bump + REGION;
        }
        h = (header_t *)bump;
        bump += block;
    }
    h->cls = c;
    h->generation = generation;
    h->size = 0;
    pthread_mutex_unlock(&lock);
    return (char *)h + HEADER;
}

static void
mem_free(void *p)
{
    if (p == NULL)
        return;
    header_t *h = (header_t *)((char *)p - HEADER);
    pthread_mutex_lock(&lock);
    bool own = h->generation == generation;
    if (own && h->cls != BIG) {
        free_block_t *f = p;
        f->next = free_list[h->cls];
        free_list[h->cls] = f;
    }
    pthread_mutex_unlock(&lock);
    if (own && h->cls == BIG)
        munmap(h, (size_t)h->size);
}

static int
mem_size(void *p)
{
    if (p == NULL)
        return 0;
    const header_t *h = (const header_t *)((char *)p - HEADER);
    return h->cls == BIG ? (int)(h->size - HEADER) : (int)class_size[h->cls];
}

static void *
mem_realloc(void *p, int n)
{
    if (p == NULL)
        return mem_malloc(n);
    int have = mem_size(p);
    const header_t *h = (const header_t *)((char *)p - HEADER);
    /* A block of this generation that holds n already stays as it is (SQLite grows its buffers in steps). */
    if (n <= have && h->cls != BIG && h->generation == generation && (n > have / 2 || h->cls == 0))
        return p;
    void *q = mem_malloc(n);
    if (q == NULL)
        return NULL;
    memcpy(q, p, (size_t)(have < n ? have : n));
    mem_free(p);
    return q;
}

static int
mem_roundup(int n)
{
    unsigned c = class_of(n > 0 ? (size_t)n : 1);
    return c < N_CLASSES ? (int)class_size[c] : (int)((((size_t)n + HEADER + 4095) & ~(size_t)4095) - HEADER);
}

static int
mem_init(void *ctx)
{
    (void)ctx;
    return SQLITE_OK;
}

static void
mem_shutdown(void *ctx)
{
    (void)ctx;
}

/* In a forked child: a new generation and a new region; the lists, which name the parent's free blocks on
 * shared pages, are emptied.  The lock may have been held by another thread of the parent at the fork. */
static void
after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    generation++;
    memset(free_list, 0, sizeof free_list);
    bump = bump_end = NULL;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

const sqlite3_mem_methods *
pyc_sqlite_mem_methods(void)
{
    static const sqlite3_mem_methods methods = {mem_malloc, mem_free,     mem_realloc, mem_size,
                                                mem_roundup, mem_init,    mem_shutdown, NULL};
    if (!PYC_SQLITE_MEM)
        return NULL;
    pthread_once(&atfork_once, register_atfork);
    return &methods;
}
