/*
 * events.c -- the event log's writer and reader; see events.h for the format, the locking and the bounds.
 *
 * The seq of a new line is one above the last line's.  A writer that wrote the last line itself (the file is
 * the one it has open and ends where its own last write ended) knows it; otherwise it reads the tail of the
 * file (or, for a file just started, of the old one) and takes the seq of the last line that is an event.
 */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* The largest file the reader loads at once: a log file is about max_bytes, but one left by a writer with a
 * larger bound (or grown by hand) is read only this far. */
#define READ_CAP ((size_t)64 << 20)

struct pyc_events {
    /* flock belongs to the open file description, which the process's threads share: two threads of one
     * process would both "hold" it.  This mutex makes them take turns. */
    pthread_mutex_t mutex;
    char path[4096];             /* pyc-events.jsonl */
    char old_path[4096];         /* pyc-events.1.jsonl */
    size_t max_bytes;
    int fd;                      /* -1 when the file could not be opened (again) */
    /* Where our last line ended, and its seq: valid while the file is the same and has not grown since. */
    dev_t dev;
    ino_t ino;
    off_t end;
    long long seq;
};

/* Opens path for appending: never through a link, never a FIFO (O_NONBLOCK), and only a regular file of
 * ours, made 0600.  Returns the descriptor, or -1 with err. */
static int
open_log(const char *path, pyc_error_t *err)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == ELOOP)
            return pyc_error_set(err, "%s is a symbolic link; the event log is never written through one", path);
        return pyc_error_set(err, "cannot open %s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        close(fd);
        return pyc_error_set(err, "%s is not a regular file of yours; the event log is not written there", path);
    }
    if ((st.st_mode & 07777) != 0600)
        fchmod(fd, 0600);
    return fd;
}

static size_t
max_from_env(void)
{
    const char *v = getenv("PYC_EVENTS_MAX_BYTES");
    char *end = NULL;
    if (v == NULL || v[0] == '\0')
        return PYC_EVENTS_MAX_BYTES;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    return errno == 0 && *end == '\0' && n >= 4096 ? (size_t)n : PYC_EVENTS_MAX_BYTES;
}

pyc_events_t *
pyc_events_open(const char *dir, size_t max_bytes, pyc_error_t *err)
{
    pyc_events_t *ev = calloc(1, sizeof *ev);
    if (ev == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    if ((size_t)snprintf(ev->path, sizeof ev->path, "%s/%s", dir, PYC_EVENTS_FILE) >= sizeof ev->path ||
        (size_t)snprintf(ev->old_path, sizeof ev->old_path, "%s/%s", dir, PYC_EVENTS_OLD_FILE) >=
            sizeof ev->old_path) {
        pyc_error_code(err, PYC_EINVAL, "the path of the event log in %s is too long", dir);
        free(ev);
        return NULL;
    }
    ev->max_bytes = max_bytes > 0 ? max_bytes : max_from_env();
    if ((ev->fd = open_log(ev->path, err)) < 0) {
        free(ev);
        return NULL;
    }
    pthread_mutex_init(&ev->mutex, NULL);
    return ev;
}

void
pyc_events_destroy(pyc_events_t **ev_p)
{
    if (ev_p == NULL || *ev_p == NULL)
        return;
    if ((*ev_p)->fd >= 0)
        close((*ev_p)->fd);
    pthread_mutex_destroy(&(*ev_p)->mutex);
    free(*ev_p);
    *ev_p = NULL;
}

int
pyc_events_reopen(pyc_events_t *ev, pyc_error_t *err)
{
    /* In a forked child, whose only thread is this one: the mutex may have been copied taken. */
    pthread_mutex_init(&ev->mutex, NULL);
    if (ev->fd >= 0)
        close(ev->fd);
    ev->ino = 0;
    ev->fd = open_log(ev->path, err);
    return ev->fd >= 0 ? 0 : -1;
}

/* ---- reading ----------------------------------------------------------------------------------------------- */

void
pyc_event_clear(pyc_event_t *e)
{
    json_decref(e->obj);
    memset(e, 0, sizeof *e);
}

int
pyc_event_parse(const char *line, size_t len, pyc_event_t *out, pyc_error_t *err)
{
    json_error_t jerr;
    memset(out, 0, sizeof *out);
    if (len == 0 || line[0] != '{')
        return pyc_error_code(err, PYC_EINVAL, "not a JSON object");
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (o == NULL)
        return pyc_error_code(err, PYC_EINVAL, "not JSON: %s", jerr.text);
    json_t *seq = json_object_get(o, "seq"), *t = json_object_get(o, "time"), *s = json_object_get(o, "session"),
           *pid = json_object_get(o, "pid"), *e = json_object_get(o, "event"), *r = json_object_get(o, "reason"),
           *sig = json_object_get(o, "signal");
    if (!json_is_object(o) || !json_is_integer(seq) || json_integer_value(seq) < 1 || !json_is_number(t) ||
        !json_is_string(s) || !json_is_integer(pid) || !json_is_string(e) || (r != NULL && !json_is_string(r)) ||
        (sig != NULL && !json_is_integer(sig))) {
        json_decref(o);
        return pyc_error_code(err, PYC_EINVAL, "not an event (seq, time, session, pid and event are needed)");
    }
    out->obj = o;
    out->seq = json_integer_value(seq);
    out->time = json_number_value(t);
    out->session = json_string_value(s);
    out->pid = (long)json_integer_value(pid);
    out->event = json_string_value(e);
    out->reason = json_string_value(r);
    json_int_t sv = json_integer_value(sig);
    out->signal = sv > 0 && sv < 1024 ? (int)sv : 0;
    return 0;
}

size_t
pyc_events_scan(const char *buf, size_t len, long long since, pyc_events_fn fn, void *ctx, int *stop)
{
    size_t at = 0;
    *stop = 0;
    while (at < len) {
        const char *nl = memchr(buf + at, '\n', len - at);
        if (nl == NULL)
            break;               /* a line still being written */
        size_t n = (size_t)(nl - (buf + at));
        pyc_event_t e;
        if (pyc_event_parse(buf + at, n, &e, NULL) == 0) {
            int r = e.seq > since && fn != NULL ? fn(ctx, &e) : 0;
            pyc_event_clear(&e);
            if (r != 0) {
                *stop = r;
                return (size_t)(nl - buf) + 1;
            }
        }
        at = (size_t)(nl - buf) + 1;
    }
    return at;
}

/* Reads fd from offset to its end (at most READ_CAP bytes) into a new buffer; *len gets its length.  NULL
 * with err on failure (an empty read is a buffer of length 0). */
static char *
read_from(int fd, off_t offset, size_t *len, pyc_error_t *err)
{
    struct stat st;
    *len = 0;
    if (fstat(fd, &st) < 0)
        return pyc_error_set(err, "cannot read the event log: %s", strerror(errno)), NULL;
    size_t want = st.st_size > offset ? (size_t)(st.st_size - offset) : 0;
    if (want > READ_CAP)
        want = READ_CAP;
    char *buf = malloc(want + 1);
    if (buf == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory"), NULL;
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, offset + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            return pyc_error_set(err, "cannot read the event log: %s", strerror(errno)), NULL;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* Opens a log file for reading (never through a link; only a regular file).  -1 with errno ENOENT when
 * there is none. */
static int
open_read(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

/* The reader's callback wrapper: moves the cursor's seq past each event it passes on. */
typedef struct {
    pyc_events_cursor_t *cur;
    pyc_events_fn fn;
    void *ctx;
} relay_t;

/* Gives fn the gap before event e: the seqs from just after the cursor up to e's were lost. */
static int
relay_gap(relay_t *r, const pyc_event_t *e)
{
    long long from = r->cur->seq + 1, to = e->seq - 1;
    json_t *o = json_pack("{s:I, s:f, s:n, s:n, s:s, s:I, s:I, s:I}", "seq", (json_int_t)to, "time", e->time,
                          "session", "pid", "event", PYC_EVENTS_GAP, "from", (json_int_t)from, "to",
                          (json_int_t)to, "lost", (json_int_t)(to - from + 1));
    if (o == NULL)
        return 0;                /* out of memory: the events still go out */
    pyc_event_t gap = {.seq = to, .time = e->time, .session = "", .pid = 0, .event = PYC_EVENTS_GAP, .obj = o};
    r->cur->seq = to;
    int rc = r->fn(r->ctx, &gap);
    json_decref(o);
    return rc;
}

static int
relay(void *ctx, const pyc_event_t *e)
{
    relay_t *r = ctx;
    if (e->seq > r->cur->newest)
        r->cur->newest = e->seq;
    if (e->seq <= r->cur->seq)
        return 0;                /* seen already (in the old file, or before a rotation) */
    if (r->cur->gaps && r->cur->seq > 0 && e->seq > r->cur->seq + 1) {
        int rc = relay_gap(r, e);
        if (rc != 0)
            return rc;
    }
    r->cur->seq = e->seq;
    return r->fn(r->ctx, e);
}

/* Passes on the events of fd from offset; returns the bytes consumed in *used, and 0, fn's stop or -1. */
static int
read_file(int fd, off_t offset, relay_t *r, off_t *used, pyc_error_t *err)
{
    size_t len;
    int stop;
    char *buf = read_from(fd, offset, &len, err);
    if (buf == NULL)
        return -1;
    /* Every event goes to relay, those at or below the cursor too: it learns the newest seq there. */
    *used = (off_t)pyc_events_scan(buf, len, 0, relay, r, &stop);
    free(buf);
    return stop;
}

int
pyc_events_read(const char *dir, pyc_events_cursor_t *cur, pyc_events_fn fn, void *ctx, pyc_error_t *err)
{
    char path[4096], old[4096];
    relay_t r = {cur, fn, ctx};
    off_t used = 0;
    int rc = 0;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, PYC_EVENTS_FILE) >= sizeof path ||
        (size_t)snprintf(old, sizeof old, "%s/%s", dir, PYC_EVENTS_OLD_FILE) >= sizeof old)
        return pyc_error_code(err, PYC_EINVAL, "the path of the event log in %s is too long", dir);
    int fd = open_read(path);
    struct stat st;
    if (fd < 0 && errno != ENOENT)
        return pyc_error_set(err, "cannot read %s: %s", path, strerror(errno));
    if (fd >= 0 && fstat(fd, &st) < 0) {
        close(fd);
        return pyc_error_set(err, "cannot read %s: %s", path, strerror(errno));
    }
    bool same = fd >= 0 && cur->ino != 0 && st.st_ino == cur->ino && st.st_dev == cur->dev &&
                st.st_size >= cur->offset;
    if (!same) {
        /* The first read, or the file was rotated (or removed) since: the old file first. */
        int ofd = open_read(old);
        if (ofd >= 0) {
            rc = read_file(ofd, 0, &r, &used, err);
            close(ofd);
        }
        cur->offset = 0;
        cur->ino = 0;
    }
    if (fd >= 0) {
        if (rc == 0) {
            rc = read_file(fd, cur->offset, &r, &used, err);
            if (rc >= 0) {
                cur->offset += used;
                cur->dev = st.st_dev;
                cur->ino = st.st_ino;
            }
        }
        close(fd);
    }
    return rc;
}

const char *
pyc_events_signal_name(int sig, char *buf, size_t cap)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},
                 {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},
                 {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"}, {SIGSYS, "SIGSYS"},   {SIGTRAP, "SIGTRAP"},
                 {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGPIPE, "SIGPIPE"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names[i].sig == sig)
            return names[i].name;
    }
    snprintf(buf, cap, "signal %d", sig);
    return buf;
}

/* ---- writing ----------------------------------------------------------------------------------------------- */

static int
last_seq_cb(void *ctx, const pyc_event_t *e)
{
    long long *last = ctx;
    if (e->seq > *last)
        *last = e->seq;
    return 0;
}

/* The seq of the last event in the file of descriptor fd (read-only or not), from its last
 * 2 * PYC_EVENTS_MAX_LINE bytes; 0 when it has none. */
static long long
tail_seq(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size == 0)
        return 0;
    off_t from = st.st_size > (off_t)(2 * PYC_EVENTS_MAX_LINE) ? st.st_size - (off_t)(2 * PYC_EVENTS_MAX_LINE) : 0;
    size_t len;
    char *buf = read_from(fd, from, &len, NULL);
    if (buf == NULL)
        return 0;
    /* A tail that starts mid-line: skip to the first whole line. */
    size_t skip = 0;
    if (from > 0) {
        const char *nl = memchr(buf, '\n', len);
        skip = nl != NULL ? (size_t)(nl - buf) + 1 : len;
    }
    long long last = 0;
    int stop;
    pyc_events_scan(buf + skip, len - skip, 0, last_seq_cb, &last, &stop);
    free(buf);
    return last;
}

/* Our descriptor needs O_RDONLY access for the tail read: the writer's is write-only, so the tail is read
 * through a read-only descriptor of the same file (opened by path, and checked to be the same inode). */
static long long
tail_seq_of(const char *path, dev_t dev, ino_t ino)
{
    int fd = open_read(path);
    if (fd < 0)
        return 0;
    struct stat st;
    long long seq = 0;
    if (fstat(fd, &st) == 0 && (ino == 0 || (st.st_ino == ino && st.st_dev == dev)))
        seq = tail_seq(fd);
    close(fd);
    return seq;
}

/* Takes the lock of fd, waiting up to timeout_ms (-1: for ever).  Returns 0 or -1 (errno). */
static int
lock_within(int fd, int timeout_ms)
{
    if (timeout_ms < 0) {
        int r;
        while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
            ;
        return r;
    }
    uint64_t t0 = pyc_now_ns();
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if (pyc_ms_since(t0) >= timeout_ms) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Makes the JSON text of a string (quotes included); NULL when it is not UTF-8 or memory ran out. */
static char *
json_text(const char *s)
{
    json_t *j = json_string(s);
    char *t = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return t;
}

/* Closes the writer's file (and with it the lock it held) and opens the path afresh: after a rotation, ours or
 * another writer's.  Returns 0, or -1 with err (the writer then has no file). */
static int
reopen(pyc_events_t *ev, pyc_error_t *err)
{
    pyc_error_t oerr;
    int fd = open_log(ev->path, &oerr);
    close(ev->fd);
    ev->fd = fd;
    ev->ino = 0;
    if (fd < 0 && err != NULL)
        *err = oerr;
    return fd < 0 ? -1 : 0;
}

/* pyc_events_append with the mutex held. */
static long long
append_locked(pyc_events_t *ev, const char *session, long pid, const char *event, json_t *fields, int timeout_ms,
              pyc_error_t *err)
{
    char *s = json_text(session), *e = json_text(event), *more = NULL, *line = NULL;
    long long rc = -1;
    if (ev->fd < 0) {
        pyc_error_set(err, "the event log %s is not open", ev->path);
        goto out;
    }
    if (s == NULL || e == NULL) {
        pyc_error_code(err, PYC_EINVAL, "the session or event name is not UTF-8 (or memory ran out)");
        goto out;
    }
    if (fields != NULL && json_object_size(fields) > 0) {
        more = json_dumps(fields, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (more == NULL) {
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
            goto out;
        }
    }
    /* The fields' members follow the five of every event: their text without its braces. */
    size_t more_len = more != NULL ? strlen(more) : 0;
    const char *inner = more_len > 2 ? more + 1 : "";
    int inner_len = more_len > 2 ? (int)(more_len - 2) : 0;
    size_t cap = strlen(s) + strlen(e) + (size_t)inner_len + 128;
    if (cap > PYC_EVENTS_MAX_LINE) {
        pyc_error_code(err, PYC_EINVAL, "an event of %zu bytes is longer than a line of the log may be", cap);
        goto out;
    }
    if ((line = malloc(cap)) == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto out;
    }
    for (int tries = 0; tries < 8; tries++) {
        struct stat st, at_path;
        if (lock_within(ev->fd, timeout_ms) < 0) {
            pyc_error_code(err, errno == ETIMEDOUT ? PYC_ETIMEDOUT : PYC_EIO, "cannot lock %s: %s", ev->path,
                           strerror(errno));
            goto out;
        }
        /* The path must still name our file: another writer may have rotated it (or someone removed it). */
        if (fstat(ev->fd, &st) < 0 || lstat(ev->path, &at_path) < 0 || st.st_ino != at_path.st_ino ||
            st.st_dev != at_path.st_dev) {
            if (reopen(ev, err) < 0)   /* closing the old one drops its lock */
                goto out;
            continue;
        }
        long long last;
        if (ev->ino == st.st_ino && ev->dev == st.st_dev && ev->end == st.st_size)
            last = ev->seq;      /* ours was the last line */
        else if (st.st_size > 0)
            last = tail_seq_of(ev->path, st.st_dev, st.st_ino);
        else
            last = tail_seq_of(ev->old_path, 0, 0);
        int n = snprintf(line, cap, "{\"seq\":%lld,\"time\":%.6f,\"session\":%s,\"pid\":%ld,\"event\":%s%s%.*s}\n",
                         last + 1, pyc_wall_s(), s, pid, e, inner_len > 0 ? "," : "", inner_len, inner);
        if (n < 0 || (size_t)n >= cap) {
            flock(ev->fd, LOCK_UN);
            pyc_error_set(err, "cannot format an event");
            goto out;
        }
        if (st.st_size > 0 && (size_t)st.st_size + (size_t)n > ev->max_bytes) {
            /* Rotate: the full file becomes the old one, and the line goes into a new file, whose lock is
             * taken (and whose seq is worked out) on the next turn. */
            if (rename(ev->path, ev->old_path) < 0) {
                flock(ev->fd, LOCK_UN);
                pyc_error_set(err, "cannot rotate %s: %s", ev->path, strerror(errno));
                goto out;
            }
            if (reopen(ev, err) < 0)
                goto out;
            continue;
        }
        ssize_t w;
        while ((w = write(ev->fd, line, (size_t)n)) < 0 && errno == EINTR)
            ;
        if (w != n) {
            /* A short write (a full disk) leaves a line without its newline, which readers skip; the next
             * line would be glued to it, so the file is ended with a newline when it can be. */
            int e2 = w < 0 ? errno : ENOSPC;
            if (w > 0 && write(ev->fd, "\n", 1) < 0)
                e2 = errno;
            ev->ino = 0;
            flock(ev->fd, LOCK_UN);
            pyc_error_code(err, PYC_EIO, "cannot write %s: %s", ev->path, strerror(e2));
            goto out;
        }
        ev->dev = st.st_dev;
        ev->ino = st.st_ino;
        ev->end = st.st_size + n;
        ev->seq = last + 1;
        flock(ev->fd, LOCK_UN);
        rc = last + 1;
        goto out;
    }
    pyc_error_set(err, "the event log %s kept changing under us", ev->path);
out:
    free(s);
    free(e);
    free(more);
    free(line);
    return rc;
}

long long
pyc_events_append(pyc_events_t *ev, const char *session, long pid, const char *event, json_t *fields,
                  int timeout_ms, pyc_error_t *err)
{
    int r;
    if (timeout_ms < 0) {
        r = pthread_mutex_lock(&ev->mutex);
    } else {
        /* Bounded like the flock: the crash path must not wait for a thread that died holding it. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        r = pthread_mutex_timedlock(&ev->mutex, &until);
    }
    if (r != 0)
        return pyc_error_code(err, PYC_ETIMEDOUT, "another thread holds the event log (%s)", strerror(r));
    long long seq = append_locked(ev, session, pid, event, fields, timeout_ms, err);
    pthread_mutex_unlock(&ev->mutex);
    return seq;
}
