/*
 * server.h -- the five ZeroMQ channels and the threads that own them.
 *
 * Threads (kernel.h has the whole table):
 *   main      owns shell and stdin; asks pyc_server_next for the next request, with the GIL released.
 *   control   owns control; hands each request to a callback that answers what needs no Python
 *             (kernel_info, interrupt, shutdown, usage) and forwards the rest to the main thread; sends
 *             the replies other threads queue for control.
 *   heartbeat echoes on a ROUTER socket through zmq_proxy.
 * iopub has no thread of its own: whichever thread makes an iopub message sends it, under the iopub lock
 * (an XPUB socket never blocks: past its high-water mark, PYC_IOPUB_HWM, a subscriber that does not read
 * loses messages), which also orders the messages.  It is XPUB so
 * that the kernel learns of each subscription (JEP 65): the control thread reads those and calls
 * on_subscribe, which answers with iopub_welcome.
 * Threads inherit the signal mask of the thread that creates them: create the server with SIGINT and
 * SIGTERM blocked, so that signals reach only the main thread.  Only this module and fork touch ZeroMQ.
 *
 * Frames that cannot be decoded (layout, signature, replay, JSON, header) are dropped with one log line.
 */
#ifndef PYC_SERVER_H
#define PYC_SERVER_H

#include <stdbool.h>

#include "auth.h"
#include "connfile.h"
#include "io.h"

/* The largest JSON dict frame accepted (and the largest frame shell, control and stdin take by default), and
 * the largest total of one message's buffers.  Larger messages are dropped with a log line. */
#define PYC_SERVER_MAX_DICT ((size_t)256 << 20)
#define PYC_SERVER_MAX_BUFFERS ((size_t)4 << 30)

typedef struct pyc_server pyc_server_t;

/* Called in the control thread for each decoded control request.  Returns true when the request was fully
 * handled (the callback destroyed it or kept it), false to have it queued for the main thread. */
typedef bool (*pyc_control_fn)(void *ctx, pyc_msg_t *msg);

/* Creates the context and binds the five sockets.  Ports given as 0 are chosen by the system and written
 * back into cf.  auth is borrowed and must outlive the server. */
pyc_server_t *pyc_server_new(pyc_connfile_t *cf, pyc_auth_t *auth, pyc_error_t *err);

/* As pyc_server_new, on listening sockets that are bound already (a restore: the live kernel's own, passed
 * to the snapshot that takes over, so that no port is ever free for another process to take and a client that
 * connects meanwhile waits in the backlog).  fds[chan] (-1: bind as usual) become the server's, or are closed
 * on failure; each is set to -1. */
pyc_server_t *pyc_server_new_on(pyc_connfile_t *cf, pyc_auth_t *auth, int *fds, pyc_error_t *err);

/* What the server tells its owner, each call on the control thread with ctx. */
typedef struct pyc_server_callbacks {
    pyc_control_fn on_control;   /* each decoded control request */
    /* A client subscribed to iopub with this topic (not NUL-terminated; may be empty, which means all).
     * Called outside every lock of the server, so it may publish. */
    void (*on_subscribe)(void *ctx, const char *topic, size_t len);
    /* A subscription ended (a client unsubscribed or went away); may be NULL. */
    void (*on_unsubscribe)(void *ctx);
    void *ctx;
} pyc_server_callbacks_t;

/* Starts the control and heartbeat threads; cb is copied. */
int pyc_server_start(pyc_server_t *srv, const pyc_server_callbacks_t *cb, pyc_error_t *err);

/* The io interface for kernel.c. */
pyc_io_t *pyc_server_io(pyc_server_t *srv);

/* Main thread: returns the next request (control requests forwarded by the control thread come before
 * shell requests), with *chan set to PYC_CHAN_SHELL or PYC_CHAN_CONTROL.  Returns NULL when timeout_ms
 * (-1: no limit) passes, a signal interrupts the wait, or pyc_server_wake is called. */
pyc_msg_t *pyc_server_next(pyc_server_t *srv, int timeout_ms, int *chan);

/* One more file descriptor for pyc_server_next_fds to watch, and whether it was found readable (or hung up,
 * or in error). */
typedef struct pyc_server_fd {
    int fd;
    bool ready;
} pyc_server_fd_t;

/* As pyc_server_next, watching fds[0..nfds) too (at most 8): when one becomes readable before a request
 * comes, returns NULL with its ready set (requests waiting go first). */
pyc_msg_t *pyc_server_next_fds(pyc_server_t *srv, int timeout_ms, pyc_server_fd_t *fds, int nfds, int *chan);

/* Any thread: makes a waiting pyc_server_next return NULL. */
void pyc_server_wake(pyc_server_t *srv);

/* Stops the threads and closes the sockets, giving queued messages up to one second to leave, but frees
 * nothing: other threads may still call the io, and find iopub closed.  For an exit that cannot wait for
 * them (a cell stuck in C, an overdue shutdown).  Idempotent; NULL-safe. */
void pyc_server_close(pyc_server_t *srv);

/* Sends everything queued for iopub and control, stops the threads, and closes the sockets, giving queued
 * messages up to one second to leave.  Sets *srv_p to NULL.  NULL-safe. */
void pyc_server_destroy(pyc_server_t **srv_p);

#endif
