/*
 * stream.c -- see stream.h for the contract.
 *
 * Numbers: a chunk of 1 MiB keeps a 50 MB print to 50 messages while bounding memory; the pipes are grown to
 * 1 MiB (F_SETPIPE_SZ) so a child process writing fast rarely blocks; 20 ms of coalescing turns a loop of
 * prints into a few messages without a visible delay.
 */
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"

typedef struct one_stream {
    pyc_buf_t pending;
    uint64_t since_ns;           /* when pending became non-empty; 0 when empty */
    int pipe_rd;                 /* read end of the pipe over the fd, or -1 */
    int saved_fd;                /* the original fd 1 or 2, or -1 */
} one_stream_t;

struct pyc_streams {
    pthread_mutex_t lock;
    one_stream_t s[2];
    int last;                    /* the stream written last, for ordering between the two */
    bool discard;
    bool passthrough;            /* write to fds 1 and 2 directly (see pyc_streams_set_passthrough) */
    pyc_stream_publish_fn publish;
    void *ctx;
    int wake_fd;                 /* eventfd: tells the flusher that pending text or a stop is waiting */
    volatile int stop;
    pthread_t thread;
    bool thread_started;
};

static void
wake(pyc_streams_t *s)
{
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
}

/* Publishes the complete-UTF-8 part of a stream's pending text.  When `all` is false only whole chunks go
 * out.  Caller holds the lock. */
static void
publish_pending(pyc_streams_t *s, int which, bool all)
{
    one_stream_t *st = &s->s[which];
    size_t off = 0;
    while (st->pending.len - off >= (all ? 1 : PYC_STREAM_CHUNK)) {
        size_t n = st->pending.len - off;
        if (n > PYC_STREAM_CHUNK)
            n = PYC_STREAM_CHUNK;
        size_t ok = pyc_utf8_complete_prefix(st->pending.data + off, n);
        if (ok == 0) {
            /* An incomplete character at the very end: wait for the rest unless it can never come. */
            if (st->pending.len - off < 4)
                break;
            ok = n;              /* invalid bytes: the JSON encoder replaces them */
        }
        if (!s->discard)
            s->publish(s->ctx, which, st->pending.data + off, ok);
        off += ok;
    }
    if (off > 0) {
        memmove(st->pending.data, st->pending.data + off, st->pending.len - off);
        st->pending.len -= off;
        st->pending.data[st->pending.len] = '\0';
    }
    st->since_ns = st->pending.len > 0 ? (st->since_ns ? st->since_ns : pyc_now_ns()) : 0;
}

/* Appends bytes to a stream, publishing the other stream first when the writer switches.  Caller holds the
 * lock.  from_flusher says whether the caller is the flusher thread (which needs no wake-up). */
static void
append(pyc_streams_t *s, int which, const char *data, size_t n, bool from_flusher)
{
    if (s->discard)
        return;
    if (which != s->last && s->s[s->last].pending.len > 0)
        publish_pending(s, s->last, true);
    s->last = which;
    one_stream_t *st = &s->s[which];
    bool was_empty = st->pending.len == 0;
    while (n > 0) {
        /* Invariant: pending.len < PYC_STREAM_CHUNK here, because a full chunk is published at once. */
        size_t room = PYC_STREAM_CHUNK - st->pending.len;
        size_t take = n < room ? n : room;
        if (pyc_buf_add(&st->pending, data, take) < 0)
            return;              /* out of memory: the text is lost, the kernel goes on */
        data += take;
        n -= take;
        if (st->pending.len >= PYC_STREAM_CHUNK)
            publish_pending(s, which, false);
    }
    if (st->pending.len > 0 && st->since_ns == 0)
        st->since_ns = pyc_now_ns();
    if (was_empty && st->pending.len > 0 && !from_flusher)
        wake(s);
}

/* Reads whatever a pipe holds right now.  Caller holds the lock. */
static void
drain_pipe(pyc_streams_t *s, int which, bool from_flusher)
{
    int fd = s->s[which].pipe_rd;
    char buf[65536];
    if (fd < 0)
        return;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r > 0) {
            append(s, which, buf, (size_t)r, from_flusher);
            if ((size_t)r < sizeof buf)
                return;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        return;                  /* EAGAIN, EOF or error: nothing more now */
    }
}

/* Reads whatever both pipes hold right now: one poll(2) says which have anything, and only those are read
 * (a flush of two empty pipes is one system call, not two failed reads).  Caller holds the lock. */
static void
drain_pipes(pyc_streams_t *s, bool from_flusher)
{
    struct pollfd pfd[2];
    int which[2], n = 0;
    for (int i = 0; i < 2; i++) {
        if (s->s[i].pipe_rd >= 0) {
            which[n] = i;
            pfd[n++] = (struct pollfd){.fd = s->s[i].pipe_rd, .events = POLLIN};
        }
    }
    if (n == 0 || poll(pfd, (nfds_t)n, 0) <= 0)
        return;
    for (int i = 0; i < n; i++) {
        if (pfd[i].revents & POLLIN)
            drain_pipe(s, which[i], from_flusher);
    }
}

static void *
flusher_main(void *arg)
{
    pyc_streams_t *s = arg;
    while (!s->stop) {
        struct pollfd pfd[3];
        int n = 0, at[2] = {-1, -1};
        pfd[n++] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
        for (int i = 0; i < 2; i++) {
            if (s->s[i].pipe_rd >= 0) {
                at[i] = n;
                pfd[n++] = (struct pollfd){.fd = s->s[i].pipe_rd, .events = POLLIN};
            }
        }
        int timeout = -1;
        pthread_mutex_lock(&s->lock);
        uint64_t now = pyc_now_ns();
        for (int i = 0; i < 2; i++) {
            if (s->s[i].since_ns == 0)
                continue;
            uint64_t due = s->s[i].since_ns + (uint64_t)PYC_STREAM_FLUSH_MS * 1000000u;
            int ms = due <= now ? 0 : (int)((due - now + 999999) / 1000000);
            if (timeout < 0 || ms < timeout)
                timeout = ms;
        }
        pthread_mutex_unlock(&s->lock);

        int rc = poll(pfd, (nfds_t)n, timeout);
        if (rc < 0 && errno != EINTR)
            break;
        if (pfd[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(s->wake_fd, &v, sizeof v);
            (void)r;
        }
        pthread_mutex_lock(&s->lock);
        /* Only the pipes poll found readable (a pipe the main thread emptied meanwhile costs one EAGAIN). */
        for (int i = 0; i < 2; i++) {
            if (rc > 0 && at[i] >= 0 && (pfd[at[i]].revents & POLLIN))
                drain_pipe(s, i, true);
        }
        now = pyc_now_ns();
        for (int i = 0; i < 2; i++) {
            if (s->s[i].since_ns != 0 && now - s->s[i].since_ns >= (uint64_t)PYC_STREAM_FLUSH_MS * 1000000u)
                publish_pending(s, i, true);
        }
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

pyc_streams_t *
pyc_streams_new(pyc_stream_publish_fn publish, void *ctx, pyc_error_t *err)
{
    pyc_streams_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    for (int i = 0; i < 2; i++) {
        pyc_buf_init(&s->s[i].pending, PYC_STREAM_CHUNK * 2);
        s->s[i].pipe_rd = -1;
        s->s[i].saved_fd = -1;
    }
    s->publish = publish;
    s->ctx = ctx;
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wake_fd < 0) {
        pyc_error_set(err, "eventfd: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, flusher_main, s) != 0) {
        pyc_error_set(err, "cannot start the stream flusher thread");
        goto fail;
    }
    s->thread_started = true;
    return s;
fail:
    pyc_streams_destroy(&s);
    return NULL;
}

int
pyc_streams_capture_fds(pyc_streams_t *s, pyc_error_t *err)
{
    for (int i = 0; i < 2; i++) {
        int fd = i + 1, p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return pyc_error_set(err, "pipe: %s", strerror(errno));
        fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        pthread_mutex_lock(&s->lock);
        s->s[i].saved_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup2(p[1], fd) < 0) {
            pthread_mutex_unlock(&s->lock);
            close(p[0]);
            close(p[1]);
            return pyc_error_set(err, "dup2: %s", strerror(errno));
        }
        close(p[1]);
        s->s[i].pipe_rd = p[0];
        pthread_mutex_unlock(&s->lock);
    }
    wake(s);                     /* make the flusher poll the new pipes */
    return 0;
}

/* Passthrough: writes out what is pending of a stream up to its last newline (everything when all), so that
 * whole lines reach the shared pipe in one write(2) -- atomic up to PIPE_BUF bytes, and thus not interleaved
 * with the lines of other processes writing to the same pipe.  A failed write loses the text, as a closed
 * terminal would.  Caller holds the lock. */
static void
passthrough_out(pyc_streams_t *s, int which, bool all)
{
    one_stream_t *st = &s->s[which];
    const char *nl = all ? NULL : memrchr(st->pending.data, '\n', st->pending.len);
    size_t n = all ? st->pending.len : nl != NULL ? (size_t)(nl - st->pending.data) + 1 : 0;
    if (n == 0)
        return;
    pyc_write_all(which + 1, st->pending.data, n);
    memmove(st->pending.data, st->pending.data + n, st->pending.len - n);
    st->pending.len -= n;
}

void
pyc_streams_write(pyc_streams_t *s, int which, const char *data, size_t n)
{
    if (s->passthrough) {
        pthread_mutex_lock(&s->lock);
        if (which != s->last)
            passthrough_out(s, s->last, true);
        s->last = which;
        if (pyc_buf_add(&s->s[which].pending, data, n) < 0) {
            passthrough_out(s, which, true);
            pyc_write_all(which + 1, data, n);
        } else {
            passthrough_out(s, which, s->s[which].pending.len >= PYC_STREAM_CHUNK);
        }
        pthread_mutex_unlock(&s->lock);
        return;
    }
    pthread_mutex_lock(&s->lock);
    drain_pipe(s, which, false);
    append(s, which, data, n, false);
    pthread_mutex_unlock(&s->lock);
}

void
pyc_streams_flush(pyc_streams_t *s)
{
    if (s->passthrough) {
        pthread_mutex_lock(&s->lock);
        passthrough_out(s, 1 - s->last, true);
        passthrough_out(s, s->last, true);
        pthread_mutex_unlock(&s->lock);
        return;
    }
    pthread_mutex_lock(&s->lock);
    drain_pipes(s, false);
    /* The stream written last is published last, so that the order of the two is kept. */
    int first = 1 - s->last;
    publish_pending(s, first, true);
    publish_pending(s, s->last, true);
    pthread_mutex_unlock(&s->lock);
}

void
pyc_streams_set_discard(pyc_streams_t *s, bool discard)
{
    pthread_mutex_lock(&s->lock);
    s->discard = discard;
    pthread_mutex_unlock(&s->lock);
}

void
pyc_streams_destroy(pyc_streams_t **s_p)
{
    if (s_p == NULL || *s_p == NULL)
        return;
    pyc_streams_t *s = *s_p;
    if (s->thread_started) {
        s->stop = 1;
        wake(s);
        pthread_join(s->thread, NULL);
    }
    pyc_streams_flush(s);
    for (int i = 0; i < 2; i++) {
        if (s->s[i].saved_fd >= 0) {
            dup2(s->s[i].saved_fd, i + 1);
            close(s->s[i].saved_fd);
        }
        if (s->s[i].pipe_rd >= 0)
            close(s->s[i].pipe_rd);
        pyc_buf_free(&s->s[i].pending);
    }
    if (s->wake_fd >= 0)
        close(s->wake_fd);
    pthread_mutex_destroy(&s->lock);
    free(s);
    *s_p = NULL;
}

void
pyc_streams_lock(pyc_streams_t *s)
{
    pthread_mutex_lock(&s->lock);
}

void
pyc_streams_unlock(pyc_streams_t *s)
{
    pthread_mutex_unlock(&s->lock);
}

void
pyc_streams_abandon(pyc_streams_t **s_p)
{
    /* The memory is the parent's copy; freeing it is safe, but nothing else is: no join, no fd restore. */
    pyc_streams_t *s = *s_p;
    *s_p = NULL;
    if (s == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        if (s->s[i].pipe_rd >= 0)
            close(s->s[i].pipe_rd);
        if (s->s[i].saved_fd >= 0)
            close(s->s[i].saved_fd);
        pyc_buf_free(&s->s[i].pending);
    }
    if (s->wake_fd >= 0)
        close(s->wake_fd);
    free(s);
}

void
pyc_streams_set_passthrough(pyc_streams_t *s)
{
    /* In a child: what the parent had pending is the parent's to publish, not this process's to repeat. */
    for (int i = 0; i < 2; i++)
        s->s[i].pending.len = 0;
    s->passthrough = true;
}
