/*
 * checkpoints.c -- what brings an ended session's work back: its checkpoint file (README, "Checkpoints"), as
 * `pyc ls`, `status`, `run` and the stale-session error name it, and the file `pyc new NAME --replay` takes
 * when given none.
 *
 * The kernel names the file in its events (events.h): ready carries the file it writes, closed the file when
 * it holds a cell.  A closed event that pyc writes (killed, replaced, vanished) or that was rotated out of
 * the log leaves the ready event's file, which is taken when it still holds a cell.  The newest checkpoint of
 * a name is looked for among the files the log's ready events of that name give and the files of the default
 * checkpoint dir ($PYC_CHECKPOINT_DIR, else <Jupyter data dir>/pyc/checkpoints) whose header names kernel
 * pyc-NAME (a kernel of `pyc new NAME`; the file's own name, pyc-NAME-2.py, could also be session NAME-2's),
 * so that it is found after the log lost its ready event too.  The one written last wins.
 *
 * The file's format is checkpoint.h's: a first line "# pyc checkpoint 1 TOKEN", a second "# kernel ID, ...",
 * and a line "# %% pyc TOKEN In[N] DATE" before each cell ("# %% pyc TOKEN restore In[N]" is no cell).
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events.h"
#include "paths.h"

#define MAGIC "# pyc checkpoint 1 "
#define TOKEN_LEN 16
/* The most of a file read to count its cells: a checkpoint stops growing at 64 MiB (PYC_CHECKPOINT_MAX_BYTES),
 * and one grown past that with another bound is counted as far as this. */
#define COUNT_CAP ((size_t)256 << 20)
/* Enough to see the header and the first cell's marker, which follows it. */
#define HEAD_BYTES ((size_t)4096)

/* Reads up to cap bytes of path (a regular file, never through a link) into a NUL-terminated buffer. */
static char *
read_head(const char *path, size_t cap, size_t *len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return NULL;
    }
    size_t want = (size_t)st.st_size < cap ? (size_t)st.st_size : cap, got = 0;
    char *buf = malloc(want + 1);
    while (buf != NULL && got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (buf != NULL)
        buf[got] = '\0';
    *len = got;
    return buf;
}

long
cli_checkpoint_cells(const char *path, long at_most, char *kernel_id, size_t id_cap)
{
    size_t len;
    char *buf = read_head(path, at_most == 1 ? HEAD_BYTES : COUNT_CAP, &len);
    size_t ml = strlen(MAGIC);
    if (buf == NULL || len < ml + TOKEN_LEN || memcmp(buf, MAGIC, ml) != 0) {
        free(buf);
        return -1;
    }
    if (kernel_id != NULL && id_cap > 0) {
        /* "# kernel ID, started ..." on the second line. */
        const char *l2 = strchr(buf, '\n');
        kernel_id[0] = '\0';
        if (l2 != NULL && strncmp(l2 + 1, "# kernel ", 9) == 0) {
            size_t n = strcspn(l2 + 10, ",\n");
            snprintf(kernel_id, id_cap, "%.*s", (int)n, l2 + 10);
        }
    }
    char marker[64];
    snprintf(marker, sizeof marker, "\n# %%%% pyc %.*s In[", TOKEN_LEN, buf + ml);
    long n = 0;
    for (const char *p = buf; (p = strstr(p, marker)) != NULL && (at_most <= 0 || n < at_most); p++)
        n++;
    free(buf);
    return n;
}

/* True when path is a checkpoint that holds a cell. */
static bool
holds_cells(const char *path)
{
    return path != NULL && cli_checkpoint_cells(path, 1, NULL, 0) > 0;
}

/* The ready and closed events of (session, pid), read in one pass. */
typedef struct {
    const char *name;
    long pid;
    json_t *ready, *closed;      /* references, or NULL */
} of_t;

static int
find_of(void *ctx, const pyc_event_t *e)
{
    of_t *f = ctx;
    if (e->pid != f->pid || strcmp(e->session, f->name) != 0)
        return 0;
    json_t **slot = strcmp(e->event, "ready") == 0 ? &f->ready : strcmp(e->event, "closed") == 0 ? &f->closed : NULL;
    if (slot != NULL) {
        json_decref(*slot);
        *slot = json_incref(e->obj);
    }
    return 0;
}

char *
cli_checkpoint_of(const char *name, long pid)
{
    char dir[4096];
    pyc_events_cursor_t cur = {0};
    of_t f = {name, pid, NULL, NULL};
    if (pid <= 0 || cli_runtime_dir(dir, sizeof dir) < 0)
        return NULL;
    pyc_events_read(dir, &cur, find_of, &f, NULL);
    const char *path = json_string_value(json_object_get(f.closed, "checkpoint"));
    if (path == NULL)
        path = json_string_value(json_object_get(f.ready, "checkpoint"));
    char *out = holds_cells(path) ? strdup(path) : NULL;
    json_decref(f.ready);
    json_decref(f.closed);
    return out;
}

/* The candidates for a name's newest checkpoint, without repeats: a path (owned), and whether the log's ready
 * event of that name gave it (else the directory did, and the file's header must name the kernel). */
typedef struct {
    char *path;
    bool from_log;
} cand_t;

typedef struct {
    const char *name;
    cand_t *v;
    size_t n, cap;
} cands_t;

static void
add_cand(cands_t *c, const char *path, bool from_log)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->v[i].path, path) == 0) {
            c->v[i].from_log |= from_log;
            return;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        cand_t *v = realloc(c->v, cap * sizeof *v);
        if (v == NULL)
            return;
        c->v = v;
        c->cap = cap;
    }
    if ((c->v[c->n].path = strdup(path)) != NULL)
        c->v[c->n++].from_log = from_log;
}

static int
ready_files(void *ctx, const pyc_event_t *e)
{
    cands_t *c = ctx;
    const char *path = json_string_value(json_object_get(e->obj, "checkpoint"));
    if (path != NULL && strcmp(e->event, "ready") == 0 && strcmp(e->session, c->name) == 0)
        add_cand(c, path, true);
    return 0;
}

/* The default checkpoint dir into out, as the kernel chooses it without --checkpoint-dir.  0 or -1. */
static int
default_dir(char *out, size_t cap)
{
    const char *env = getenv("PYC_CHECKPOINT_DIR");
    char data[4000];
    if (env != NULL && env[0] != '\0')
        return (size_t)snprintf(out, cap, "%s", env) < cap ? 0 : -1;
    if (pyc_jupyter_data_dir(data, sizeof data) < 0)
        return -1;
    return (size_t)snprintf(out, cap, "%s/pyc/checkpoints", data) < cap ? 0 : -1;
}

/* Adds the files of the default dir named pyc-NAME.py or pyc-NAME-N.py (their headers are checked later). */
static void
dir_files(cands_t *c)
{
    char dir[4096], stem[128], path[4400];
    if (default_dir(dir, sizeof dir) < 0)
        return;
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t sl = (size_t)snprintf(stem, sizeof stem, "pyc-%s", c->name);
    while (d != NULL && (de = readdir(d)) != NULL) {
        const char *n = de->d_name, *rest = n + sl;
        size_t len = strlen(n);
        if (strncmp(n, stem, sl) != 0 || len < sl + 3 || strcmp(n + len - 3, ".py") != 0)
            continue;
        if (rest[0] == '-') {                   /* pyc-NAME-N.py */
            size_t digits = strspn(rest + 1, "0123456789");
            if (digits == 0 || strcmp(rest + 1 + digits, ".py") != 0)
                continue;
        } else if (strcmp(rest, ".py") != 0) {
            continue;
        }
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, n) < sizeof path)
            add_cand(c, path, false);
    }
    if (d != NULL)
        closedir(d);
}

char *
cli_checkpoint_newest(const char *name, long *cells)
{
    char dir[4096], want[128], id[128];
    cands_t c = {.name = name};
    pyc_events_cursor_t cur = {0};
    if (cli_runtime_dir(dir, sizeof dir) == 0)
        pyc_events_read(dir, &cur, ready_files, &c, NULL);
    dir_files(&c);
    snprintf(want, sizeof want, "pyc-%s", name);
    char *best = NULL;
    struct timespec best_t = {0, 0};
    long best_cells = 0;
    for (size_t i = 0; i < c.n; i++) {
        struct stat st;
        /* The head of each file says whether it holds a cell and whose it is; only the winner is read whole,
         * to count its cells (a checkpoint may be tens of MiB). */
        long n = stat(c.v[i].path, &st) == 0 ? cli_checkpoint_cells(c.v[i].path, 1, id, sizeof id) : -1;
        if (n <= 0 || (!c.v[i].from_log && strcmp(id, want) != 0))
            continue;            /* no cell, or pyc-NAME-2.py of session NAME-2 */
        if (best == NULL || st.st_mtim.tv_sec > best_t.tv_sec ||
            (st.st_mtim.tv_sec == best_t.tv_sec && st.st_mtim.tv_nsec > best_t.tv_nsec)) {
            best = c.v[i].path;
            best_t = st.st_mtim;
        }
    }
    if (best != NULL)
        best_cells = cli_checkpoint_cells(best, 0, NULL, 0);
    char *out = best != NULL ? strdup(best) : NULL;
    for (size_t i = 0; i < c.n; i++)
        free(c.v[i].path);
    free(c.v);
    if (cells != NULL)
        *cells = out != NULL ? best_cells : 0;
    return out;
}

void
cli_checkpoint_hint(const char *name, const char *path)
{
    cli_err("session %s's cells are in its checkpoint %s: pyc new %s --replay brings them back", name, path, name);
}
