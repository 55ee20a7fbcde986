/*
 * zmtp.c -- the socket half of zmtp.h: one non-blocking connection per pyc_zmtp_t, which connects (again
 * after a refusal or a loss), writes our handshake and the queued messages, and reads what the peer sends
 * into the decoder of zmtp_codec.c; see zmtp.h for the wire subset and the contracts.
 *
 * Costs that shaped it: a `pyc run` moves a few hundred bytes each way, so output is queued as a list of
 * segments (copied headers and small bodies in one buffer, borrowed large bodies in place) and written with
 * one sendmsg per batch of 64; input is read 64 KB at a time and decoded in place, except that the body of a
 * large frame (at least 64 KB still missing) is read straight into its own storage, so a 1 GB pickle buffer
 * is read once and never copied.
 */
#include "zmtp.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "clientint.h"

/* Reconnection: the first retry after 10 ms, then doubling up to libzmq's 100 ms. */
#define RETRY_FIRST_MS 10
#define RETRY_MAX_MS 100

/* The read buffer; a frame body with at least this much still missing is read into its storage directly. */
#define RBUF_SIZE 65536

/* At most this much is read per pyc_zmtp_handle, so that one busy connection does not hold up the caller. */
#define READ_BUDGET ((size_t)16 << 20)

/* iovecs per sendmsg. */
#define IOV_BATCH 64

/* Our greeting and READY: 64 + 9 + a READY body of at most 6 + 22 + 13 + 255 bytes. */
#define HS_MAX 512

enum { C_WAIT, C_CONNECTING, C_HANDSHAKE, C_UP, C_FAILED };

/* A piece of queued output: borrowed bytes (ext), or bytes at obuf.data + off. */
typedef struct seg {
    const unsigned char *ext;
    size_t off, len;
    bool first;                  /* the first piece of a message */
} seg_t;

struct pyc_zmtp {
    int type;
    char *endpoint;
    pyc__zmtp_addr_t addr;       /* what endpoint names, parsed once by pyc_zmtp_new */
    socklen_t addrlen;
    int fd, state;
    double retry_at;             /* C_WAIT: when to connect again, in pyc_now_s seconds */
    int retry_ms;
    unsigned char hs[HS_MAX];    /* our greeting and READY, written first on every connection */
    size_t hs_len, hs_off;
    pyc_zmtp_dec_t *dec;
    /* output: segs[cur..nseg) are unwritten, the first of them from cur_off on; pending counts their bytes */
    pyc_buf_t obuf;
    seg_t *segs;
    size_t nseg, segcap, cur, cur_off, pending;
    bool in_msg;                 /* the caller's last send had PYC_ZMTP_MORE */
    bool discard;                /* the open message was dropped with a lost connection: drop its rest too */
    bool pong_due;               /* a PONG waits for the open message to end */
    unsigned char pong_ctx[16];
    size_t pong_len;
    unsigned char *rbuf;
    pyc_zmtp_msg_t *head, *tail; /* received messages */
    pyc_error_t failure;         /* C_FAILED: why */
};

static int
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
conn_fail(pyc_zmtp_t *self, pyc_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->failure.text, sizeof self->failure.text, fmt, ap);
    va_end(ap);
    if (self->fd >= 0)
        close(self->fd);
    self->fd = -1;
    self->state = C_FAILED;
    if (err != NULL)
        *err = self->failure;
    return -1;
}

/* Errors after which libzmq, and we, simply try again later: nobody listens yet, or the path to the peer is
 * down for now. */
static bool
retryable(int e)
{
    switch (e) {
    case ECONNREFUSED: case ENOENT: case EAGAIN: case ETIMEDOUT: case ECONNRESET: case ECONNABORTED:
    case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case EHOSTDOWN: case EADDRNOTAVAIL: case EPIPE:
    case EINTR:
        return true;
    default:
        return false;
    }
}

/* Skips the rest of the message whose bytes were being written when the connection was lost: the peer saw
 * only its start and dropped it, so writing the rest to the next connection would be nonsense. */
static void
drop_partial(pyc_zmtp_t *self)
{
    if (self->cur >= self->nseg || (self->cur_off == 0 && self->segs[self->cur].first))
        return;
    self->pending -= self->segs[self->cur].len - self->cur_off;
    self->cur++;
    self->cur_off = 0;
    while (self->cur < self->nseg && !self->segs[self->cur].first) {
        self->pending -= self->segs[self->cur].len;
        self->cur++;
    }
    if (self->cur == self->nseg) {
        self->discard = self->in_msg;
        self->nseg = self->cur = 0;
        pyc_buf_reset(&self->obuf);
    }
}

/* The connection is gone (refused, reset, closed by the peer): close it and try again later. */
static void
lost(pyc_zmtp_t *self)
{
    if (self->fd >= 0)
        close(self->fd);
    self->fd = -1;
    if (self->state == C_UP)
        drop_partial(self);
    self->state = C_WAIT;
    self->retry_at = pyc_now_s() + self->retry_ms / 1e3;
    self->retry_ms = self->retry_ms * 2 < RETRY_MAX_MS ? self->retry_ms * 2 : RETRY_MAX_MS;
    pyc_zmtp_dec_reset(self->dec);
}

/* Moves the output position on by w written bytes. */
static void
advance(pyc_zmtp_t *self, size_t w)
{
    if (self->hs_off < self->hs_len) {
        self->hs_off += w;       /* flush writes the handshake alone */
        return;
    }
    self->pending -= w;
    while (w > 0) {
        size_t rem = self->segs[self->cur].len - self->cur_off;
        if (w >= rem) {
            w -= rem;
            self->cur++;
            self->cur_off = 0;
        } else {
            self->cur_off += w;
            w = 0;
        }
    }
    if (self->cur == self->nseg) {
        self->nseg = self->cur = 0;
        pyc_buf_reset(&self->obuf);
    }
}

/* Writes what the socket takes: our greeting and READY first (the peer's READY may come before the socket took
 * all of ours), queued messages once up.  A write error is a lost connection. */
static void
flush(pyc_zmtp_t *self)
{
    for (;;) {
        struct iovec iov[IOV_BATCH];
        size_t k = 0;
        if ((self->state == C_HANDSHAKE || self->state == C_UP) && self->hs_off < self->hs_len) {
            iov[k].iov_base = self->hs + self->hs_off;
            iov[k++].iov_len = self->hs_len - self->hs_off;
        } else if (self->state == C_UP) {
            for (size_t j = self->cur; j < self->nseg && k < IOV_BATCH; j++) {
                const seg_t *s = &self->segs[j];
                const unsigned char *base = s->ext != NULL ? s->ext : (const unsigned char *)self->obuf.data + s->off;
                size_t off = j == self->cur ? self->cur_off : 0;
                iov[k].iov_base = (void *)(base + off);
                iov[k++].iov_len = s->len - off;
            }
        }
        if (k == 0)
            return;
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = k;
        /* MSG_NOSIGNAL: a peer that is gone is a lost connection, not a SIGPIPE. */
        ssize_t w = sendmsg(self->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                lost(self);
            return;
        }
        advance(self, (size_t)w);
    }
}

/* The socket is connected: the handshake starts with our greeting and READY. */
static void
connected(pyc_zmtp_t *self)
{
    self->state = C_HANDSHAKE;
    self->hs_off = 0;
    pyc_zmtp_dec_reset(self->dec);
    flush(self);
}

static int
try_connect(pyc_zmtp_t *self, pyc_error_t *err)
{
    int one = 1;
    self->fd = socket(self->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (self->fd < 0)
        return conn_fail(self, err, "cannot make a socket for %s: %s", self->endpoint, strerror(errno));
    /* As libzmq: a small message goes out now, not when Nagle's algorithm has waited for an ACK. */
    if (self->addr.sa.sa_family != AF_UNIX)
        setsockopt(self->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(self->fd, &self->addr.sa, self->addrlen) == 0) {
        connected(self);
        return 0;
    }
    int e = errno;
    if (e == EINPROGRESS || e == EINTR) {
        self->state = C_CONNECTING;
        return 0;
    }
    if (retryable(e)) {
        lost(self);
        return 0;
    }
    return conn_fail(self, err, "cannot connect to %s: %s", self->endpoint, strerror(e));
}

pyc_zmtp_t *
pyc_zmtp_new(const char *endpoint, int type, const char *identity, size_t max_msg, size_t max_frames,
             pyc_error_t *err)
{
    size_t idlen = identity != NULL ? strlen(identity) : 0;
    unsigned char greeting[PYC_ZMTP_GREETING_LEN];
    if (type < 0 || type >= PYC_ZMTP_NTYPES) {
        pyc_error_set(err, "unknown socket type %d", type);
        return NULL;
    }
    if (idlen > PYC_ZMTP_MAX_IDENTITY) {
        pyc_error_set(err, "an identity of %zu bytes (at most %d)", idlen, PYC_ZMTP_MAX_IDENTITY);
        return NULL;
    }
    pyc_zmtp_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    self->fd = -1;
    self->type = type;
    self->state = C_WAIT;
    self->retry_ms = RETRY_FIRST_MS;
    pyc_buf_init(&self->obuf, max_msg);
    if ((self->endpoint = strdup(endpoint)) == NULL || (self->rbuf = malloc(RBUF_SIZE)) == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto fail;
    }
    if ((self->dec = pyc_zmtp_dec_new(type, max_msg, max_frames, err)) == NULL)
        goto fail;
    if (pyc__zmtp_endpoint(endpoint, &self->addr, &self->addrlen, err) < 0)
        goto fail;
    pyc_zmtp_greeting(greeting);
    memcpy(self->hs, greeting, sizeof greeting);
    int r = pyc_zmtp_ready(self->hs + sizeof greeting, sizeof self->hs - sizeof greeting, type, identity, idlen);
    assert(r > 0);
    self->hs_len = sizeof greeting + (size_t)r;
    if (try_connect(self, err) < 0)
        goto fail;
    return self;
fail:
    pyc_zmtp_destroy(&self);
    return NULL;
}

void
pyc_zmtp_destroy(pyc_zmtp_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_zmtp_t *self = *self_p;
    if (self->fd >= 0)
        close(self->fd);
    while (self->head != NULL) {
        pyc_zmtp_msg_t *m = self->head;
        self->head = m->next;
        pyc_zmtp_msg_destroy(&m);
    }
    pyc_zmtp_dec_destroy(&self->dec);
    pyc_buf_free(&self->obuf);
    free(self->segs);
    free(self->rbuf);
    free(self->endpoint);
    free(self);
    *self_p = NULL;
}

/* Appends n bytes to the output: copied into obuf (and onto the last piece when that is the copy just
 * before), or borrowed.  Returns 0 or -1 when memory (or the cap) runs out. */
static int
queue(pyc_zmtp_t *self, const void *p, size_t n, bool borrow, bool first)
{
    if (n == 0)
        return 0;
    seg_t *last = self->nseg > self->cur ? &self->segs[self->nseg - 1] : NULL;
    if (!borrow && !first && last != NULL && last->ext == NULL && last->off + last->len == self->obuf.len) {
        if (pyc_buf_add(&self->obuf, p, n) < 0)
            return -1;
        last->len += n;
        self->pending += n;
        return 0;
    }
    if (self->nseg == self->segcap) {
        size_t ncap = self->segcap > 0 ? self->segcap * 2 : 16;
        seg_t *s = realloc(self->segs, ncap * sizeof *s);
        if (s == NULL)
            return -1;
        self->segs = s;
        self->segcap = ncap;
    }
    seg_t *s = &self->segs[self->nseg];
    if (borrow) {
        s->ext = p;
        s->off = 0;
    } else {
        s->ext = NULL;
        s->off = self->obuf.len;
        if (pyc_buf_add(&self->obuf, p, n) < 0)
            return -1;
    }
    s->len = n;
    s->first = first;
    self->nseg++;
    self->pending += n;
    return 0;
}

/* Queues a command or a one-frame message from our side (subscription, PONG) between the caller's
 * messages. */
static int
queue_own(pyc_zmtp_t *self, const unsigned char *body, size_t n, bool command)
{
    unsigned char hdr[9];
    size_t h = pyc_zmtp_frame_header(hdr, n, false, command);
    unsigned char frame[9 + 32];
    assert(n <= sizeof frame - h);
    memcpy(frame, hdr, h);
    memcpy(frame + h, body, n);
    return queue(self, frame, h + n, false, true);
}

static int
queue_pong(pyc_zmtp_t *self)
{
    unsigned char body[5 + 16];
    memcpy(body, "\4PONG", 5);
    memcpy(body + 5, self->pong_ctx, self->pong_len);
    self->pong_due = false;
    return queue_own(self, body, 5 + self->pong_len, true);
}

int
pyc_zmtp_send(pyc_zmtp_t *self, const pyc_frame_t *frames, size_t n, int flags, pyc_error_t *err)
{
    if (self->state == C_FAILED) {
        if (err != NULL)
            *err = self->failure;
        return -1;
    }
    bool more_after = (flags & PYC_ZMTP_MORE) != 0, starts = !self->in_msg;
    if (self->discard) {
        /* The start of this message went down with a lost connection: its rest goes nowhere either. */
        self->in_msg = more_after;
        self->discard = more_after;
        return 0;
    }
    size_t nseg0 = self->nseg, len0 = self->obuf.len, pending0 = self->pending;
    size_t lastlen0 = self->nseg > 0 ? self->segs[self->nseg - 1].len : 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char hdr[9];
        size_t h = pyc_zmtp_frame_header(hdr, frames[i].size, i + 1 < n || more_after, false);
        if (queue(self, hdr, h, false, starts && i == 0) < 0 ||
            queue(self, frames[i].data, frames[i].size, (flags & PYC_ZMTP_BORROW) != 0, false) < 0)
            goto nomem;
    }
    self->in_msg = more_after;
    if (!self->in_msg && self->pong_due && queue_pong(self) < 0)
        return conn_fail(self, err, "out of memory");
    if (self->state == C_UP)
        flush(self);
    return 0;
nomem:
    if (!starts)
        return conn_fail(self, err, "out of memory queueing a message");
    /* Undo this message: nothing of it was written, since nothing is written while queueing. */
    self->nseg = nseg0;
    if (nseg0 > 0)
        self->segs[nseg0 - 1].len = lastlen0;
    self->obuf.len = len0;
    self->pending = pending0;
    return pyc_error_set(err, "out of memory queueing a message");
}

int
pyc_zmtp_fd(const pyc_zmtp_t *self)
{
    return self->state == C_CONNECTING || self->state == C_HANDSHAKE || self->state == C_UP ? self->fd : -1;
}

short
pyc_zmtp_events(const pyc_zmtp_t *self)
{
    switch (self->state) {
    case C_CONNECTING:
        return POLLOUT;
    case C_HANDSHAKE:
        return (short)(POLLIN | (self->hs_off < self->hs_len ? POLLOUT : 0));
    case C_UP:
        return (short)(POLLIN | (self->pending > 0 || self->hs_off < self->hs_len ? POLLOUT : 0));
    default:
        return 0;
    }
}

int
pyc_zmtp_wake_ms(const pyc_zmtp_t *self)
{
    if (self->state != C_WAIT)
        return -1;
    double left_ms = (self->retry_at - pyc_now_s()) * 1e3;
    return left_ms > 0 ? (int)(left_ms + 0.999) : 0;
}

/* Acts on one decoded event.  Returns 0 or -1 (failed for good). */
static int
on_event(pyc_zmtp_t *self, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    static const unsigned char subscribe_all[1] = {1};
    switch (ev->type) {
    case PYC_ZMTP_EV_READY:
        self->state = C_UP;
        self->retry_ms = RETRY_FIRST_MS;
        /* ZMTP 3.0's subscription is a message whose first byte is 1 (then the topic, here none); it goes
         * before anything else the caller queued. */
        if (self->type == PYC_ZMTP_SUB) {
            if (queue_own(self, subscribe_all, 1, false) < 0)
                return conn_fail(self, err, "out of memory");
            /* It must be first: move it to the front (a SUB sends nothing else, but keep the rule general). */
            if (self->nseg - self->cur > 1) {
                seg_t s = self->segs[self->nseg - 1];
                memmove(&self->segs[self->cur + 1], &self->segs[self->cur],
                        (self->nseg - 1 - self->cur) * sizeof *self->segs);
                self->segs[self->cur] = s;
            }
        }
        flush(self);
        return 0;
    case PYC_ZMTP_EV_MSG:
        ev->msg->next = NULL;
        if (self->tail != NULL)
            self->tail->next = ev->msg;
        else
            self->head = ev->msg;
        self->tail = ev->msg;
        ev->msg = NULL;
        return 0;
    case PYC_ZMTP_EV_PING:
        memcpy(self->pong_ctx, ev->ping_ctx, ev->ping_len);
        self->pong_len = ev->ping_len;
        self->pong_due = true;
        if (!self->in_msg) {
            if (queue_pong(self) < 0)
                return conn_fail(self, err, "out of memory");
            flush(self);
        }
        return 0;
    default:
        return 0;
    }
}

/* Reads and decodes what the socket has (up to READ_BUDGET).  Returns 0 or -1 (failed for good). */
static int
read_all(pyc_zmtp_t *self, pyc_error_t *err)
{
    size_t total = 0;
    pyc_zmtp_event_t ev;
    pyc_error_t derr;
    while (total < READ_BUDGET && (self->state == C_HANDSHAKE || self->state == C_UP)) {
        void *dst = NULL;
        size_t want = pyc_zmtp_dec_body(self->dec, &dst);
        bool direct = want >= RBUF_SIZE;
        size_t ask = direct ? want : RBUF_SIZE;
        ssize_t r = read(self->fd, direct ? dst : self->rbuf, ask);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                lost(self);
            return 0;
        }
        if (r == 0) {
            lost(self);
            return 0;
        }
        total += (size_t)r;
        if (direct) {
            if (pyc_zmtp_dec_commit(self->dec, (size_t)r, &ev, &derr) < 0)
                return conn_fail(self, err, "%s", derr.text);
            if (on_event(self, &ev, err) < 0)
                return -1;
        } else {
            size_t off = 0;
            while (off < (size_t)r && (self->state == C_HANDSHAKE || self->state == C_UP)) {
                size_t used;
                if (pyc_zmtp_dec_feed(self->dec, self->rbuf + off, (size_t)r - off, &used, &ev, &derr) < 0)
                    return conn_fail(self, err, "%s", derr.text);
                off += used;
                if (on_event(self, &ev, err) < 0)
                    return -1;
            }
        }
        if ((size_t)r < ask)
            return 0;            /* drained for now; poll says when there is more */
    }
    return 0;
}

int
pyc_zmtp_handle(pyc_zmtp_t *self, short revents, pyc_error_t *err)
{
    switch (self->state) {
    case C_FAILED:
        if (err != NULL)
            *err = self->failure;
        return -1;
    case C_WAIT:
        if (pyc_now_s() >= self->retry_at)
            return try_connect(self, err);
        return 0;
    case C_CONNECTING: {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
            return 0;
        int e = 0;
        socklen_t len = sizeof e;
        if (getsockopt(self->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
            e = errno;
        if (e == 0) {
            connected(self);
            return 0;
        }
        if (retryable(e)) {
            lost(self);
            return 0;
        }
        return conn_fail(self, err, "cannot connect to %s: %s", self->endpoint, strerror(e));
    }
    default:
        if (revents & POLLOUT)
            flush(self);
        if ((revents & (POLLIN | POLLERR | POLLHUP)) && (self->state == C_HANDSHAKE || self->state == C_UP))
            return read_all(self, err);
        return 0;
    }
}

bool
pyc_zmtp_has_msg(const pyc_zmtp_t *self)
{
    return self->head != NULL;
}

pyc_zmtp_msg_t *
pyc_zmtp_recv(pyc_zmtp_t *self)
{
    pyc_zmtp_msg_t *m = self->head;
    if (m != NULL) {
        self->head = m->next;
        if (self->head == NULL)
            self->tail = NULL;
        m->next = NULL;
    }
    return m;
}

size_t
pyc_zmtp_pending(const pyc_zmtp_t *self)
{
    return self->pending;
}

bool
pyc_zmtp_is_up(const pyc_zmtp_t *self)
{
    return self->state == C_UP;
}
