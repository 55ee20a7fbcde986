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
 *
 * With CURVE, each frame is sealed (zmtp_curve.c) into the output buffer as it is queued, once the handshake is
 * done; frames queued before that wait unsealed in a list of their own and are sealed, in order, when the
 * server's READY comes, since the session key and the nonces exist only then.
 */
#include "zmtp.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
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

/* The connection is gone (refused, reset, closed by the peer): close it and try again later (an accepted
 * connection has no later: it fails). */
static void
lost(pyc_zmtp_t *self)
{
    if (self->accepted) {
        conn_fail(self, NULL, "the peer closed the connection");
        return;
    }
    if (self->fd >= 0)
        close(self->fd);
    self->fd = -1;
    if (self->state == C_UP && self->curve != NULL) {
        /* Sealed for this connection's keys: no use on the next one. */
        self->pending -= self->pending - pyc__zmtp_cq_bytes(self);
        self->discard = self->in_msg;
        self->nseg = self->cur = self->cur_off = 0;
        pyc_buf_reset(&self->obuf);
    } else if (self->state == C_UP) {
        pyc__zmtp_drop_partial(self);
    }
    self->state = C_WAIT;
    self->retry_at = pyc_now_s() + self->retry_ms / 1e3;
    self->retry_ms = self->retry_ms * 2 < RETRY_MAX_MS ? self->retry_ms * 2 : RETRY_MAX_MS;
    pyc_zmtp_dec_reset(self->dec);
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
        pyc__zmtp_advance(self, (size_t)w);
    }
}

/* The socket is connected: the handshake starts with our greeting and READY. */
static void
connected(pyc_zmtp_t *self)
{
    self->state = C_HANDSHAKE;
    self->hs_off = 0;
    if (self->curve != NULL) {
        /* A new transient key and nonces from 1 on every connection. */
        pyc_zmtp_greeting(self->hs, true);
        size_t h = pyc_zmtp_frame_header(self->hs + PYC_ZMTP_GREETING_LEN, PYC_CURVE_HELLO_LEN, false, true);
        if (pyc_zmtp_curve_hello(self->curve, self->hs + PYC_ZMTP_GREETING_LEN + h) < 0) {
            conn_fail(self, NULL, "the server's CURVE key in the connection file cannot be used");
            return;
        }
        self->hs_len = PYC_ZMTP_GREETING_LEN + h + PYC_CURVE_HELLO_LEN;
    }
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
    return pyc_zmtp_new_curve(endpoint, type, identity, max_msg, max_frames, NULL, err);
}

/* A connection object that is not connected yet (no endpoint parsed, nothing tried). */
static pyc_zmtp_t *
make(const char *endpoint, int type, const char *identity, size_t max_msg, size_t max_frames,
     const pyc_zmtp_keys_t *keys, pyc_error_t *err)
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
    /* Sealed frames are 42 bytes longer at most (header and MESSAGE overhead). */
    size_t slack = (max_frames > 0 ? max_frames : 1) * (9 + PYC_CURVE_MESSAGE_OVERHEAD);
    pyc_buf_init(&self->obuf, keys == NULL ? max_msg : max_msg > SIZE_MAX - slack ? SIZE_MAX : max_msg + slack);
    if ((self->endpoint = strdup(endpoint)) == NULL || (self->rbuf = malloc(RBUF_SIZE)) == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto fail;
    }
    if ((self->dec = pyc_zmtp_dec_new(type, max_msg, max_frames, err)) == NULL)
        goto fail;
    if (keys != NULL) {
        int p = pyc_zmtp_properties(self->props, type, identity, idlen);
        assert(p > 0);
        self->props_len = (size_t)p;
        if ((self->curve = pyc_zmtp_curve_new(keys->server, keys->public_key, keys->secret_key, err)) == NULL)
            goto fail;
        pyc_zmtp_dec_set_curve(self->dec, self->curve);
    } else {
        pyc_zmtp_greeting(greeting, false);
        memcpy(self->hs, greeting, sizeof greeting);
        int r = pyc_zmtp_ready(self->hs + sizeof greeting, sizeof self->hs - sizeof greeting, type, identity, idlen);
        assert(r > 0);
        self->hs_len = sizeof greeting + (size_t)r;
    }
    return self;
fail:
    pyc_zmtp_destroy(&self);
    return NULL;
}

pyc_zmtp_t *
pyc_zmtp_new_curve(const char *endpoint, int type, const char *identity, size_t max_msg, size_t max_frames,
                   const pyc_zmtp_keys_t *keys, pyc_error_t *err)
{
    pyc_zmtp_t *self = make(endpoint, type, identity, max_msg, max_frames, keys, err);
    if (self != NULL && (pyc__zmtp_endpoint(endpoint, &self->addr, &self->addrlen, err) < 0 ||
                         try_connect(self, err) < 0))
        pyc_zmtp_destroy(&self);
    return self;
}

pyc_zmtp_t *
pyc_zmtp_new_fd(int fd, int type, size_t max_msg, size_t max_frames, pyc_error_t *err)
{
    pyc_zmtp_t *self = make("(accepted)", type, NULL, max_msg, max_frames, NULL, err);
    if (self == NULL)
        return NULL;
    int one = 1, flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        pyc_error_set(err, "cannot make the accepted socket non-blocking: %s", strerror(errno));
        pyc_zmtp_destroy(&self);
        return NULL;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    self->fd = fd;
    self->accepted = true;
    connected(self);
    return self;
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
    pyc_zmtp_curve_destroy(&self->curve);
    for (size_t i = 0; i < self->ncq; i++)
        free(self->cq[i].own);
    free(self->cq);
    pyc_buf_free(&self->obuf);
    free(self->segs);
    free(self->rbuf);
    free(self->endpoint);
    free(self);
    *self_p = NULL;
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
        if (self->curve != NULL) {
            /* Sealing uses nonces up, so a failure cannot be undone: the connection fails. */
            int f = i + 1 < n || more_after ? PYC_CURVE_MORE : 0;
            int rc = self->state == C_UP && self->ncq == 0
                         ? pyc__zmtp_queue_sealed(self, frames[i].data, frames[i].size, f, starts && i == 0)
                         : pyc__zmtp_cq_add(self, &frames[i], f, (flags & PYC_ZMTP_BORROW) != 0, starts && i == 0);
            if (rc < 0)
                return conn_fail(self, err, "out of memory queueing a message");
            continue;
        }
        unsigned char hdr[9];
        size_t h = pyc_zmtp_frame_header(hdr, frames[i].size, i + 1 < n || more_after, false);
        if (pyc__zmtp_queue(self, hdr, h, false, starts && i == 0) < 0 ||
            pyc__zmtp_queue(self, frames[i].data, frames[i].size, (flags & PYC_ZMTP_BORROW) != 0, false) < 0)
            goto nomem;
    }
    self->in_msg = more_after;
    if (!self->in_msg && self->pong_due && pyc__zmtp_queue_pong(self) < 0)
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
    case PYC_ZMTP_EV_WELCOME: {
        /* Our HELLO was all written (the server answered it): INITIATE takes the handshake buffer. */
        unsigned char body[PYC_CURVE_INITIATE_MAX];
        int r = pyc_zmtp_curve_initiate(self->curve, self->props, self->props_len, body);
        if (r < 0)
            return conn_fail(self, err, "cannot make CURVE's INITIATE");
        size_t h = pyc_zmtp_frame_header(self->hs, (size_t)r, false, true);
        memcpy(self->hs + h, body, (size_t)r);
        self->hs_len = h + (size_t)r;
        self->hs_off = 0;
        flush(self);
        return 0;
    }
    case PYC_ZMTP_EV_READY:
        self->state = C_UP;
        self->retry_ms = RETRY_FIRST_MS;
        if (self->curve != NULL) {
            /* Sealed in the order they are written: the subscription, then what waited. */
            if ((self->type == PYC_ZMTP_SUB && pyc__zmtp_queue_own(self, subscribe_all, 1, false) < 0) ||
                pyc__zmtp_cq_seal(self) < 0)
                return conn_fail(self, err, "out of memory");
            flush(self);
            return 0;
        }
        /* ZMTP 3.0's subscription is a message whose first byte is 1 (then the topic, here none); it goes
         * before anything else the caller queued. */
        if (self->type == PYC_ZMTP_SUB) {
            if (pyc__zmtp_queue_own(self, subscribe_all, 1, false) < 0)
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
            if (pyc__zmtp_queue_pong(self) < 0)
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
