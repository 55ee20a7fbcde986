/*
 * serverint.h -- what server.c, shell.c and recv.c share (never included outside them): the server's
 * struct, and the receiving of one message.
 */
#ifndef PYC_SERVERINT_H
#define PYC_SERVERINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "server.h"
#include "zqueue.h"

/* Received frames, kept alive as long as the decoded message that points into them. */
typedef struct frameset {
    size_t n;
    zmq_msg_t msgs[];
} frameset_t;

struct pyc_server {
    void *zctx;
    void *sock[PYC_CHAN_COUNT];
    pyc_auth_t *auth;
    pyc_io_t io;
    pthread_mutex_t iopub_lock;  /* whoever holds it may send on iopub */
    int closed;                  /* pyc_server_close has run */
    pyc_zqueue_t control_q, inbox_q;
    atomic_int woken;            /* pyc_server_wake was called: the inbox's next signal returns the wait */

    /* The shell socket (shell.c): the main thread's until the first subshell, then the shell thread's. */
    pthread_mutex_t shell_lock;  /* whoever holds it may use the shell socket, while it is not routed */
    atomic_int want_route;       /* the control thread is handing the socket over: main keeps off it */
    atomic_int routed;           /* the shell thread owns the socket */
    int shell_fd;                /* the socket's ZMQ_FD: readable when its state may have changed */
    /* Under shell_lock: the socket may hold a message that shell_fd will not announce, because the last
     * operation on it (a message received, any send, which also processes the socket's pending commands
     * and so may consume the signal of a message arriving) was not a receive that found nothing.  While
     * it is false, shell_fd alone tells of the next request: waits poll it without asking libzmq first. */
    bool shell_unread;
    pyc_zqueue_t shell_in;       /* requests for the main shell, read by the shell thread */
    pyc_zqueue_t shell_out;      /* replies on shell, for the shell thread to send */
    pthread_t th_shell;
    bool (*take)(void *ctx, pyc_msg_t *msg);  /* the owner's router (pyc_io_t.route_shell) */
    void *take_ctx;
    pyc_server_callbacks_t cb;
    void *hb_ctl[2];             /* inproc PAIR: [0] kept by the main thread, [1] steers the proxy */
    pthread_t th_control, th_hb;
    bool started;
    volatile int stop;
    int stop_iopub;              /* set under iopub_lock once the socket is closed */
    int64_t max_message;         /* the largest frame shell takes (PYC_MAX_MESSAGE_BYTES) */
    int iopub_hwm;               /* iopub messages queued for one subscriber at most (PYC_IOPUB_HWM) */
    struct pyc_zap *zap;         /* the CURVE allow-list's handler (zap.c), or NULL */
};

/* ---- recv.c ---- */

/* The channels' names, for log lines, indexed by PYC_CHAN_*. */
extern const char *const pyc__chan_names[PYC_CHAN_COUNT];

/* Receives one whole multipart message on chan without waiting and decodes it.  Returns the message, or
 * NULL when nothing was waiting or the message was dropped (with a log line); *nothing (may be NULL) tells
 * which: true when nothing was waiting.  By the socket's owner. */
pyc_msg_t *pyc__server_recv(pyc_server_t *srv, int chan, bool *nothing);

/* ---- shell.c ---- */

/* pyc_io_t.next_pending and pyc_io_t.route_shell of the server's io. */
pyc_msg_t *pyc__shell_next_pending(pyc_io_t *io);
int pyc__shell_route(pyc_io_t *io, bool (*take)(void *ctx, pyc_msg_t *msg), void *ctx, pyc_error_t *err);

/* io_send's shell case: sends at once while the main thread owns the socket, or queues for the shell
 * thread.  Takes the item over. */
int pyc__shell_send(pyc_server_t *srv, pyc_zqitem_t *it);

/* pyc_io_t.send_to_returning of the server's io: the shell send with ZMQ_ROUTER_MANDATORY, tried again
 * until the peer is back or timeout_ms has passed. */
int pyc__shell_send_to_returning(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n, int timeout_ms);

/* Sets up the shell's queues and lock (0, or -1 when no eventfd could be made); stops the shell thread,
 * after it has sent what was queued; frees what is left. */
int pyc__shell_init(pyc_server_t *srv);
void pyc__shell_stop(pyc_server_t *srv);
void pyc__shell_clear(pyc_server_t *srv);

#endif
