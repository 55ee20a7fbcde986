/*
 * checkpoint.c -- writing and reading checkpoint files; see checkpoint.h.
 *
 * Writes are one write(2) per cell on an O_APPEND descriptor, without fsync: a checkpoint is there for a
 * kernel that died or was ended, not for a machine that lost power, and a cell's cost stays a few
 * microseconds (pipelined execution runs above 10,000 cells a second).
 */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "msg.h"
#include "paths.h"
#include "random.h"

#define MAGIC "# pyc checkpoint 1 "
#define TOKEN_LEN 16
#define MAX_FILE ((size_t)256 << 20)

struct pyc_checkpoint {
    char *dir;
    char *stem;                  /* dir/id: the file is stem.py, or stem-N.py when that name was taken */
    char *path;                  /* NULL until the file is created */
    char token[TOKEN_LEN + 1];
    char *header;                /* the lines written when the file is created */
    int fd;                      /* -1 until the first cell */
    off_t size;                  /* the file's size as this process wrote it, or -1: ask the descriptor */
    size_t max_cell, max_bytes;  /* pyc_checkpoint_set_caps */
    bool full;                   /* the file reached max_bytes: nothing more is added */
    bool has_cells;              /* the file holds a cell a replay runs (pyc_checkpoint_has_cells) */
};

/* Sets dir, path and header for the session id.  Returns 0 or -1. */
static int
set_place(pyc_checkpoint_t *c, const char *dir, const char *id, const char *python_version, pyc_error_t *err)
{
    char clean[128];
    size_t n = 0;
    for (const char *p = id; *p != '\0' && n < sizeof clean - 1; p++)
        clean[n++] = (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *p) && *p)
                         ? *p : '_';
    clean[n] = '\0';
    if (n == 0 || clean[0] == '.')
        return pyc_error_set(err, "checkpoint: bad session id '%.64s'", id);
    char date[PYC_MSG_DATE_LEN + 1];
    pyc_msg_now(date);
    free(c->dir);
    free(c->stem);
    free(c->path);
    free(c->header);
    c->path = NULL;
    c->dir = strdup(dir);
    size_t slen = strlen(dir) + n + 2;
    c->stem = malloc(slen);
    size_t hcap = 1024;
    c->header = malloc(hcap);
    if (c->dir == NULL || c->stem == NULL || c->header == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    snprintf(c->stem, slen, "%s/%s", dir, clean);
    snprintf(c->header, hcap,
             MAGIC "%s\n"
             "# kernel %s, started %s, Python %s\n"
             "# The cells of one session that ran without error, in order.  Replay them into a new kernel with\n"
             "#   pyc-kernel --replay THIS_FILE ...   (or PYC_REPLAY=THIS_FILE in a kernelspec's env).\n"
             "# This file holds whatever was typed into those cells, secrets included: keep it private.\n",
             c->token, clean, date, python_version != NULL ? python_version : "3");
    return 0;
}

/* Creates the directory and a new file: O_EXCL, so that a name already taken (a restarted kernel keeps its
 * connection file, another host may use the same name) is never appended to under a different token;
 * stem-2.py, stem-3.py... are tried instead.  Writes the header. */
static int
open_file(pyc_checkpoint_t *c, pyc_error_t *err)
{
    if (pyc_mkdirs(c->dir, 0700) < 0)
        return pyc_error_set(err, "checkpoint: cannot create %s: %s", c->dir, strerror(errno));
    size_t plen = strlen(c->stem) + 16;
    char *path = malloc(plen);
    if (path == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    for (int i = 1; i <= 1000; i++) {
        if (i == 1)
            snprintf(path, plen, "%s.py", c->stem);
        else
            snprintf(path, plen, "%s-%d.py", c->stem, i);
        c->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
        if (c->fd >= 0 || errno != EEXIST)
            break;
    }
    if (c->fd < 0) {
        pyc_error_set(err, "checkpoint: cannot create %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    c->path = path;
    if (pyc_write_all(c->fd, c->header, strlen(c->header)) < 0)
        return pyc_error_set(err, "checkpoint: cannot write %s: %s", c->path, strerror(errno));
    return 0;
}

pyc_checkpoint_t *
pyc_checkpoint_new(const char *dir, const char *id, const char *python_version, pyc_error_t *err)
{
    pyc_checkpoint_t *c = calloc(1, sizeof *c);
    if (c != NULL)
        pyc_checkpoint_set_caps(c, PYC_CHECKPOINT_MAX_CELL, PYC_CHECKPOINT_MAX_BYTES);
    if (c == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    c->fd = -1;
    c->size = -1;
    if (pyc_random_hex(c->token, TOKEN_LEN / 2, err) < 0 || set_place(c, dir, id, python_version, err) < 0 ||
        open_file(c, err) < 0)
        pyc_checkpoint_destroy(&c);
    return c;
}

int
pyc_checkpoint_add(pyc_checkpoint_t *c, int count, const char *code, pyc_error_t *err)
{
    if (c->fd < 0)
        return pyc_error_set(err, "checkpoint: the file could not be created");
    if (c->full)
        return 0;                /* said once, in the file itself */
    pyc_buf_t b;
    char date[PYC_MSG_DATE_LEN + 1];
    char stop[256];
    pyc_msg_now(date);
    size_t n = strlen(code);
    /* A cell larger than a cell may be, or one that would take the file past its size: in its place, a cell
     * that stops a replay there with the reason (a replay must not go on without a cell it needs). */
    /* The size is asked once (an lseek per cell was a tenth of the system calls a `pass` cell made on the main
     * thread) and then kept: only this process writes through this descriptor between the points that forget
     * it (a restore, a fork's copy, a failed write). */
    if (c->size < 0)
        c->size = lseek(c->fd, 0, SEEK_END);
    off_t size = c->size;
    if (n > c->max_cell || (size > 0 && (size_t)size + n > c->max_bytes)) {
        bool file_full = n <= c->max_cell;
        snprintf(stop, sizeof stop, "raise RuntimeError('cell %d (%zu bytes) is not in this checkpoint: %s')",
                 count, n, file_full ? "the checkpoint reached its size limit (PYC_CHECKPOINT_MAX_BYTES)"
                                     : "it is larger than a checkpoint keeps (PYC_CHECKPOINT_MAX_CELL)");
        code = stop;
        n = strlen(stop);
        c->full = file_full;
    }
    pyc_buf_init(&b, SIZE_MAX / 2);
    char marker[128];
    int m = snprintf(marker, sizeof marker, "\n# %%%% pyc %s In[%d] %s\n", c->token, count, date);
    int rc = -1;
    if (pyc_buf_add(&b, marker, (size_t)m) < 0 || pyc_buf_add(&b, code, n) < 0 ||
        (n > 0 && code[n - 1] != '\n' && pyc_buf_add(&b, "\n", 1) < 0)) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto out;
    }
    if (pyc_write_all(c->fd, b.data, b.len) < 0) {
        c->size = -1;            /* part of it may have been written */
        pyc_error_set(err, "checkpoint: cannot write %s: %s", c->path, strerror(errno));
        goto out;
    }
    if (c->size >= 0)
        c->size += (off_t)b.len;
    c->has_cells = true;
    rc = 0;
out:
    pyc_buf_free(&b);
    return rc;
}

int
pyc_checkpoint_restored(pyc_checkpoint_t *c, const char *path, int count, pyc_error_t *err)
{
    c->size = -1;                /* the file grew in the process that went on after the snapshot */
    if (path != NULL && (c->path == NULL || strcmp(c->path, path) != 0)) {
        /* The restorer's file: this kernel goes on writing it, under its token (from its first line). */
        char first[128];
        int in = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t r = in >= 0 ? pread(in, first, sizeof first - 1, 0) : -1;
        if (in >= 0)
            close(in);
        size_t ml = strlen(MAGIC);
        if (r < (ssize_t)(ml + TOKEN_LEN) || memcmp(first, MAGIC, ml) != 0)
            return pyc_error_set(err, "checkpoint: %s is not a pyc checkpoint", path);
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        char *p = strdup(path);
        if (fd < 0 || p == NULL) {
            if (fd >= 0)
                close(fd);
            free(p);
            return pyc_error_set(err, "checkpoint: cannot open %s: %s", path, strerror(errno));
        }
        if (c->fd >= 0)
            close(c->fd);
        free(c->path);
        c->fd = fd;
        c->path = p;
        memcpy(c->token, first + ml, TOKEN_LEN);
        c->token[TOKEN_LEN] = '\0';
    }
    /* A replay keeps the cells up to In[count]: none when the state went back to before the first. */
    c->has_cells = count > 0;
    if (c->fd < 0)
        return 0;                /* no cell was written yet: nothing to leave out */
    char date[PYC_MSG_DATE_LEN + 1], text[512];
    pyc_msg_now(date);
    int n = snprintf(text, sizeof text,
                     "\n# %%%% pyc %s restore In[%d] %s\n# The kernel went back to its state after In[%d] (a snapshot "
                     "was restored): a replay leaves out the cells above that came after In[%d].\n",
                     c->token, count, date, count, count);
    if (pyc_write_all(c->fd, text, (size_t)n) < 0)
        return pyc_error_set(err, "checkpoint: cannot write %s: %s", c->path, strerror(errno));
    return 0;
}

bool
pyc_checkpoint_has_cells(const pyc_checkpoint_t *c)
{
    return c != NULL && c->path != NULL && c->has_cells;
}

void
pyc_checkpoint_set_caps(pyc_checkpoint_t *c, size_t max_cell, size_t max_bytes)
{
    c->max_cell = max_cell > 0 ? max_cell : SIZE_MAX;
    c->max_bytes = max_bytes > 0 ? max_bytes : SIZE_MAX;
}

int
pyc_checkpoint_expire(const char *dir, double max_age, pyc_error_t *err)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : pyc_error_set(err, "checkpoint: cannot read %s: %s", dir, strerror(errno));
    time_t now = time(NULL);
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len < 4 || strcmp(e->d_name + len - 3, ".py") != 0)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            difftime(now, st.st_mtime) > max_age && unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

const char *
pyc_checkpoint_path(const pyc_checkpoint_t *c)
{
    return c->path != NULL ? c->path : "";
}

int
pyc_checkpoint_fork(pyc_checkpoint_t *c, const char *dir, const char *id, pyc_error_t *err)
{
    int old = c->fd;             /* the parent's file: copied, then closed here (the parent keeps its own) */
    char *old_path = c->path;
    c->path = NULL;
    c->fd = -1;
    c->size = -1;
    int rc = set_place(c, dir, id, NULL, err);
    if (rc == 0)
        rc = open_file(c, err);
    /* The parent's descriptor is write-only: the copy reads the file by its name, up to the size the
     * descriptor shows (what the parent had written at the fork). */
    int in = rc == 0 && old >= 0 && old_path != NULL ? open(old_path, O_RDONLY | O_CLOEXEC) : -1;
    if (rc == 0 && old >= 0 && in < 0)
        rc = pyc_error_set(err, "checkpoint: cannot read %s: %s", old_path, strerror(errno));
    if (rc == 0 && in >= 0) {
        /* Copy what the parent had written, header and token included (so that one replay splits every
         * cell): the cells that made the state this session starts from. */
        struct stat st;
        off_t limit = fstat(old, &st) == 0 ? st.st_size : 0, done = 0;
        if (ftruncate(c->fd, 0) < 0)
            limit = -1;          /* reported below as a failed copy */
        /* The system copies the bytes itself (copy_file_range): a forked session, often one of a fan-out of
         * a hundred, then neither spends the time of a copy through a buffer nor writes 64 KiB of stack it
         * would keep.  A file system that cannot (an old kernel, another device) gets the copy through a
         * buffer. */
        int flags = fcntl(c->fd, F_GETFL);     /* copy_file_range refuses a descriptor in append mode */
        bool plain = flags >= 0 && fcntl(c->fd, F_SETFL, flags & ~O_APPEND) == 0;
        while (plain && done < limit) {
            loff_t from = done, to = done;
            ssize_t r = copy_file_range(in, &from, c->fd, &to, (size_t)(limit - done), 0);
            if (r <= 0)
                break;
            done += (off_t)r;
        }
        if (plain && fcntl(c->fd, F_SETFL, flags) < 0)
            rc = pyc_error_set(err, "checkpoint: %s: %s", c->path, strerror(errno));
        if (done < limit && lseek(c->fd, done, SEEK_SET) == done) {
            char buf[16384];
            ssize_t r;
            while (done < limit && (r = pread(in, buf, sizeof buf, done)) > 0) {
                size_t take = (size_t)r < (size_t)(limit - done) ? (size_t)r : (size_t)(limit - done);
                if (pyc_write_all(c->fd, buf, take) < 0)
                    break;
                done += (off_t)take;
            }
        }
        if (done != limit)
            rc = pyc_error_set(err, "checkpoint: cannot copy %s: %s", old_path, strerror(errno));
        char head[64];
        if (strlen(MAGIC) + TOKEN_LEN <= sizeof head &&
            pread(in, head, strlen(MAGIC) + TOKEN_LEN, 0) == (ssize_t)(strlen(MAGIC) + TOKEN_LEN) &&
            memcmp(head, MAGIC, strlen(MAGIC)) == 0)
            memcpy(c->token, head + strlen(MAGIC), TOKEN_LEN);
    }
    if (in >= 0)
        close(in);
    if (old >= 0)
        close(old);
    free(old_path);
    return rc;
}

void
pyc_checkpoint_destroy(pyc_checkpoint_t **c_p)
{
    if (c_p == NULL || *c_p == NULL)
        return;
    pyc_checkpoint_t *c = *c_p;
    if (c->fd >= 0)
        close(c->fd);
    free(c->dir);
    free(c->stem);
    free(c->path);
    free(c->header);
    free(c);
    *c_p = NULL;
}

void
pyc_checkpoint_free_cells(char **cells, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(cells[i]);
    free(cells);
}

/* Appends a cell's code (text[a..b), trailing blank lines removed) to the array. */
static int
push_cell(char ***cells, size_t *n, size_t *cap, const char *a, const char *b)
{
    while (b > a && (b[-1] == '\n' || b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
        b--;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **g = realloc(*cells, nc * sizeof *g);
        if (g == NULL)
            return -1;
        *cells = g;
        *cap = nc;
    }
    char *s = strndup(a, (size_t)(b - a));
    if (s == NULL)
        return -1;
    (*cells)[(*n)++] = s;
    return 0;
}

int
pyc_checkpoint_parse(const char *text, size_t len, char ***cells_out, size_t *n_out, pyc_error_t *err)
{
    char marker[64];
    char **cells = NULL;
    long *counts = NULL;         /* each cell's In[N], for the restore lines */
    size_t n = 0, cap = 0;
    long count = 0;
    *cells_out = NULL;
    *n_out = 0;
    size_t ml = strlen(MAGIC);
    if (len < ml + TOKEN_LEN || memcmp(text, MAGIC, ml) != 0)
        return pyc_error_set(err, "not a pyc checkpoint (the first line must start with '%s')", MAGIC);
    for (size_t i = 0; i < TOKEN_LEN; i++) {
        if (!strchr("0123456789abcdef", text[ml + i]) || text[ml + i] == '\0')
            return pyc_error_set(err, "not a pyc checkpoint (bad token on the first line)");
    }
    if (memchr(text, '\0', len) != NULL)
        return pyc_error_set(err, "a checkpoint is text: this one holds a NUL byte");
    int mlen = snprintf(marker, sizeof marker, "# %%%% pyc %.*s ", TOKEN_LEN, text + ml);
    const char *end = text + len, *cell = NULL;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *next = nl != NULL ? nl + 1 : end;
        if ((size_t)(end - line) >= (size_t)mlen && memcmp(line, marker, (size_t)mlen) == 0) {
            size_t before = n;
            if (cell != NULL && push_cell(&cells, &n, &cap, cell, line) < 0)
                goto oom;
            if (n > before) {
                long *g = realloc(counts, cap * sizeof *g);
                if (g == NULL)
                    goto oom;
                counts = g;
                counts[n - 1] = count;
            }
            /* "In[N] DATE" opens a cell; "restore In[N] DATE" says the kernel went back to its state after
             * In[N]: the cells recorded since with a later count were undone, and are left out. */
            const char *rest = line + mlen, *stop = nl != NULL ? nl : end;
            bool restore = (size_t)(stop - rest) > 8 && memcmp(rest, "restore ", 8) == 0;
            const char *in = restore ? rest + 8 : rest;
            /* The count's digits, read within the line (the text is not NUL-terminated). */
            long parsed = -1;
            if ((size_t)(stop - in) > 3 && memcmp(in, "In[", 3) == 0) {
                parsed = 0;
                for (const char *d = in + 3; d < stop && *d >= '0' && *d <= '9' && parsed < 1000000000; d++)
                    parsed = parsed * 10 + (*d - '0');
            }
            count = parsed >= 0 ? parsed : count + 1;
            if (restore) {
                while (n > 0 && counts[n - 1] > count)
                    free(cells[--n]);
                cell = NULL;
            } else {
                cell = next;
            }
        }
        line = next;
    }
    if (cell != NULL && push_cell(&cells, &n, &cap, cell, end) < 0)
        goto oom;
    free(counts);
    *cells_out = cells;
    *n_out = n;
    return 0;
oom:
    free(counts);
    pyc_checkpoint_free_cells(cells, n);
    return pyc_error_code(err, PYC_ENOMEM, "out of memory");
}

int
pyc_checkpoint_load(const char *path, char ***cells, size_t *n, pyc_error_t *err)
{
    *cells = NULL;
    *n = 0;
    FILE *f = fopen(path, "rbe");
    if (f == NULL)
        return pyc_error_set(err, "cannot open %s: %s", path, strerror(errno));
    pyc_buf_t b;
    pyc_buf_init(&b, MAX_FILE);
    char chunk[65536];
    size_t r;
    int rc = 0;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (pyc_buf_add(&b, chunk, r) < 0) {
            rc = pyc_error_set(err, "%s is larger than %zu MiB", path, MAX_FILE >> 20);
            break;
        }
    }
    if (rc == 0 && ferror(f))
        rc = pyc_error_set(err, "cannot read %s", path);
    fclose(f);
    if (rc == 0) {
        pyc_error_t e;
        rc = pyc_checkpoint_parse(b.data != NULL ? b.data : "", b.len, cells, n, &e);
        if (rc < 0)
            pyc_error_set(err, "%s: %s", path, e.text);
    }
    pyc_buf_free(&b);
    return rc;
}
