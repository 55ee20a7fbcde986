/*
 * zmtp_queue.c -- the output queue of a ZMTP connection (zmtp.c): what the caller and the protocol want
 * written, as segments over one buffer.  Headers and small bodies are copied into obuf, large borrowed bodies
 * are kept in place, so one sendmsg writes a batch of them; with CURVE each frame is sealed into obuf (a copy
 * made anyway, by the cipher), or kept unsealed in cq until the handshake gives the keys.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "clientint.h"

/* Skips the rest of the message whose bytes were being written when the connection was lost: the peer saw
 * only its start and dropped it, so writing the rest to the next connection would be nonsense. */
void
pyc__zmtp_drop_partial(pyc_zmtp_t *self)
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

size_t
pyc__zmtp_cq_bytes(const pyc_zmtp_t *self)
{
    size_t n = 0;
    for (size_t i = 0; i < self->ncq; i++)
        n += self->cq[i].len;
    return n;
}

/* Moves the output position on by w written bytes. */
void
pyc__zmtp_advance(pyc_zmtp_t *self, size_t w)
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

/* Records n bytes, borrowed at ext or just appended to obuf at off, as the next piece of output (merged
 * into the piece before when that is the copy just before).  Returns 0 or -1 when memory runs out. */
static int
add_seg(pyc_zmtp_t *self, const unsigned char *ext, size_t off, size_t n, bool first)
{
    seg_t *last = self->nseg > self->cur ? &self->segs[self->nseg - 1] : NULL;
    if (ext == NULL && !first && last != NULL && last->ext == NULL && last->off + last->len == off) {
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
    s->ext = ext;
    s->off = off;
    s->len = n;
    s->first = first;
    self->nseg++;
    self->pending += n;
    return 0;
}

/* Appends n bytes to the output: copied into obuf, or borrowed.  Returns 0 or -1 when memory (or the cap)
 * runs out. */
int
pyc__zmtp_queue(pyc_zmtp_t *self, const void *p, size_t n, bool borrow, bool first)
{
    if (n == 0)
        return 0;
    if (borrow)
        return add_seg(self, p, 0, n, first);
    size_t off = self->obuf.len;
    if (pyc_buf_add(&self->obuf, p, n) < 0)
        return -1;
    if (add_seg(self, NULL, off, n, first) < 0) {
        self->obuf.len = off;
        return -1;
    }
    return 0;
}

/* CURVE: seals one frame (flags: PYC_CURVE_*) into obuf as a MESSAGE, after its frame header. */
int
pyc__zmtp_queue_sealed(pyc_zmtp_t *self, const void *p, size_t n, int flags, bool first)
{
    unsigned char hdr[9];
    size_t body = n + PYC_CURVE_MESSAGE_OVERHEAD, off = self->obuf.len;
    size_t h = pyc_zmtp_frame_header(hdr, body, false, false);
    if (pyc_buf_reserve(&self->obuf, h + body) < 0)
        return -1;
    unsigned char *dst = (unsigned char *)self->obuf.data + off;
    memcpy(dst, hdr, h);
    pyc_zmtp_curve_seal(self->curve, flags, p, n, dst + h);
    self->obuf.len += h + body;
    return add_seg(self, NULL, off, h + body, first);
}

/* CURVE: keeps a frame unsealed until the handshake is done (a copy, or borrowed). */
int
pyc__zmtp_cq_add(pyc_zmtp_t *self, const pyc_frame_t *f, int flags, bool borrow, bool first)
{
    if (self->ncq == self->cqcap) {
        size_t ncap = self->cqcap > 0 ? self->cqcap * 2 : 8;
        cframe_t *q = realloc(self->cq, ncap * sizeof *q);
        if (q == NULL)
            return -1;
        self->cq = q;
        self->cqcap = ncap;
    }
    cframe_t *c = &self->cq[self->ncq];
    c->own = NULL;
    c->ext = f->data;
    if (!borrow && f->size > 0) {
        if ((c->own = malloc(f->size)) == NULL)
            return -1;
        memcpy(c->own, f->data, f->size);
        c->ext = c->own;
    }
    c->len = f->size;
    c->flags = flags;
    c->first = first;
    self->ncq++;
    self->pending += f->size;
    return 0;
}

/* CURVE: the handshake is done: seals the frames that waited, in order. */
int
pyc__zmtp_cq_seal(pyc_zmtp_t *self)
{
    int rc = 0;
    for (size_t i = 0; i < self->ncq; i++) {
        cframe_t *c = &self->cq[i];
        self->pending -= c->len;
        if (rc == 0)
            rc = pyc__zmtp_queue_sealed(self, c->ext, c->len, c->flags, c->first);
        free(c->own);
    }
    self->ncq = 0;
    return rc;
}

/* Queues a command or a one-frame message from our side (subscription, PONG) between the caller's
 * messages. */
int
pyc__zmtp_queue_own(pyc_zmtp_t *self, const unsigned char *body, size_t n, bool command)
{
    if (self->curve != NULL)
        return pyc__zmtp_queue_sealed(self, body, n, command ? PYC_CURVE_COMMAND : 0, true);
    unsigned char hdr[9];
    size_t h = pyc_zmtp_frame_header(hdr, n, false, command);
    unsigned char frame[9 + 32];
    assert(n <= sizeof frame - h);
    memcpy(frame, hdr, h);
    memcpy(frame + h, body, n);
    return pyc__zmtp_queue(self, frame, h + n, false, true);
}

int
pyc__zmtp_queue_pong(pyc_zmtp_t *self)
{
    unsigned char body[5 + 16];
    memcpy(body, "\4PONG", 5);
    memcpy(body + 5, self->pong_ctx, self->pong_len);
    self->pong_due = false;
    return pyc__zmtp_queue_own(self, body, 5 + self->pong_len, true);
}

