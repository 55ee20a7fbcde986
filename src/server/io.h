/*
 * io.h -- the interface between the kernel logic and the sockets.
 *
 * The kernel object never sees a ZeroMQ object: it hands finished frames to an io and asks it for queued
 * requests.  server.c implements the interface over ZeroMQ; tests/unit/kernel/test_dispatch.c with arrays,
 * and an isolated cell's child with a pipe to its parent (isolate.c).
 */
#ifndef PYC_IO_H
#define PYC_IO_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#include "frame.h"
#include "msg.h"

typedef struct pyc_io pyc_io_t;

struct pyc_io {
    /* Sends a multipart message on a channel (PYC_CHAN_*).  Any thread for iopub (sent by the caller under
     * the io's iopub lock) and control (queued to the control thread), and for shell once it is routed
     * (route_shell; a subshell's thread replies there); shell and stdin otherwise only from the main
     * thread -- or, once, from the guard thread with the reply of a stuck cell, after the guard's
     * compare-and-swap has made sure that the main thread never sends again (guard.h).  Owned blocks and
     * lent bytes are taken over even when sending fails.  Returns 0 or -1. */
    int (*send)(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n);

    /* Main thread: returns the next well-formed request already waiting on the shell channel, or NULL
     * when none is waiting.  Never blocks.  Used to abort queued requests after an error. */
    pyc_msg_t *(*next_pending)(pyc_io_t *io);

    /* Main thread: waits up to timeout_ms for a message on the stdin channel from the given identity and
     * returns it (NULL on timeout or shutdown).  Used by input(). */
    pyc_msg_t *(*recv_stdin)(pyc_io_t *io, int timeout_ms);
    /* Control thread, once (later calls return 0): from now on shell requests are read by a thread of the
     * io's own, which hands each to take(ctx, msg) -- that thread, so take must not wait -- and gives those
     * that take returns false for (it keeps the others) to the main thread as before; replies on shell may
     * then be sent from any thread.  Returns 0, or -1 with err.  NULL in an io without subshells. */
    int (*route_shell)(pyc_io_t *io, bool (*take)(void *ctx, pyc_msg_t *msg), void *ctx, pyc_error_t *err);

    /* Main thread, before the shell is routed: sends a reply on shell to a peer that may not be connected yet
     * (a client reconnecting to a restored kernel), waiting up to timeout_ms for the peer that its first
     * frame names; takes the frames over as send does.  Once the shell is routed (a subshell was made
     * meanwhile) it is sent as send does, without waiting.  Returns 0, or -1 when no such peer came (the
     * reply is dropped) or sending failed.  NULL in an io whose peers cannot go away (send is used then). */
    int (*send_to_returning)(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n, int timeout_ms);
};

#endif
