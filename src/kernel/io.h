/*
 * io.h -- the interface between the kernel logic and the sockets.
 *
 * kernel.c never sees a ZeroMQ object: it hands finished frames to an io and asks it for queued requests.
 * server.c implements the interface over ZeroMQ; unit tests can implement it with arrays.
 */
#ifndef PYC_IO_H
#define PYC_IO_H

#include <stddef.h>
#include <stdlib.h>

#include "wire.h"

/* Bytes lent to the io without a copy by someone who must hear when the io is done with them: the io calls
 * release(self) exactly once, from any thread (ZeroMQ's I/O thread, or the sending thread itself) and at any
 * later time, possibly after send has returned.  Embed it as the first member of the lender's record. */
typedef struct pyc_releaser {
    void (*release)(struct pyc_releaser *self);
} pyc_releaser_t;

/* One outgoing frame, in one of three forms:
 *   1) owned not NULL: a malloc'd block holding the bytes (data points into it); the io takes it over, sends
 *      it without a copy and frees it with free() afterwards.
 *   2) releaser not NULL (owned NULL): the bytes are lent; the io sends them without a copy and calls
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

typedef struct pyc_io pyc_io_t;

struct pyc_io {
    /* Sends a multipart message on a channel (PYC_CHAN_*).  Thread-safe for iopub and control (queued to
     * the thread that owns the socket); shell and stdin only from the main thread.  Owned blocks and lent
     * bytes are taken over even when sending fails.  Returns 0 or -1. */
    int (*send)(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n);

    /* Main thread: returns the next well-formed request already waiting on the shell channel, or NULL
     * when none is waiting.  Never blocks.  Used to abort queued requests after an error. */
    pyc_msg_t *(*next_pending)(pyc_io_t *io);

    /* Main thread: waits up to timeout_ms for a message on the stdin channel from the given identity and
     * returns it (NULL on timeout or shutdown).  Used by input(). */
    pyc_msg_t *(*recv_stdin)(pyc_io_t *io, int timeout_ms);
};

#endif
