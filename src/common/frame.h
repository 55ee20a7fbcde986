/*
 * frame.h -- byte views: the unit that is signed, sent and received.
 *
 * pyc_frame_t is a borrowed view (received frames, parts to sign).  pyc_outframe_t is an outgoing frame that
 * says who owns its bytes, so that a NumPy array's memory can reach the socket without a copy and be given
 * back when the socket is done with it.  Both programs and every layer use these; nothing here allocates.
 */
#ifndef PYC_FRAME_H
#define PYC_FRAME_H

#include <stddef.h>
#include <stdlib.h>

/* A borrowed view of bytes: the unit that is signed and sent. */
typedef struct pyc_frame {
    const void *data;
    size_t size;
} pyc_frame_t;

/* Bytes lent to the sender without a copy by someone who must hear when the sender is done with them: the
 * sender calls release(self) exactly once, from any thread (ZeroMQ's I/O thread, or the sending thread
 * itself) and at any later time, possibly after send has returned.  Embed it as the first member of the
 * lender's record. */
typedef struct pyc_releaser {
    void (*release)(struct pyc_releaser *self);
} pyc_releaser_t;

/* One outgoing frame, in one of three forms:
 *   1) owned not NULL: a malloc'd block holding the bytes (data points into it); the sender takes it over,
 *      sends it without a copy and frees it with free() afterwards.
 *   2) releaser not NULL (owned NULL): the bytes are lent; the sender sends them without a copy and calls
 *      releaser->release once it is done.  The bytes must stay valid, and should stay unchanged, until then.
 *   3) both NULL: the bytes are copied before send returns. */
typedef struct pyc_outframe {
    const void *data;
    size_t size;
    void *owned;
    pyc_releaser_t *releaser;
} pyc_outframe_t;

/* Gives up what the frame owns or has borrowed (forms 1 and 2), for paths that do not send it. */
static inline void
pyc_outframe_drop(pyc_outframe_t *f)
{
    free(f->owned);
    f->owned = NULL;
    if (f->releaser != NULL)
        f->releaser->release(f->releaser);
    f->releaser = NULL;
}

#endif
