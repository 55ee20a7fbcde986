/*
 * shell.c -- the shell socket: read by the main thread between requests, until the first subshell exists;
 * from then on by a shell thread of its own, which routes each request to its subshell (the kernel's
 * take callback) or to the main thread (the shell_in queue), and sends every reply on shell (shell_out).
 *
 * Reading on the main thread saves a thread hop per request (a pass round trip is about 0.3 ms, of which a
 * hop between threads would be 20 to 50 us), so the shell thread exists only for kernels that use subshells,
 * and once it does it stays.  The hand-over (pyc__shell_route, on the control thread): want_route tells the
 * main thread to keep off the socket and wakes it; the control thread then takes shell_lock, which the
 * main thread holds whenever it touches the socket (its waits included), so that once the lock is taken
 * the main thread is out; the shell thread starts, routed is set, and the lock is released.  A zmq socket may
 * change threads this way: the mutex is the full barrier that libzmq asks for.
 */
#include "serverint.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

int
pyc__shell_init(pyc_server_t *srv)
{
    pthread_mutex_init(&srv->shell_lock, NULL);
    srv->shell_in.efd = srv->shell_out.efd = -1;
    return pyc_zqueue_init(&srv->shell_in) < 0 || pyc_zqueue_init(&srv->shell_out) < 0 ? -1 : 0;
}

int
pyc__shell_send(pyc_server_t *srv, pyc_zqitem_t *it)
{
    pthread_mutex_lock(&srv->shell_lock);
    if (srv->closed) {
        pthread_mutex_unlock(&srv->shell_lock);
        pyc_zqueue_item_free(it);
        return -1;
    }
    if (atomic_load(&srv->routed)) {
        pthread_mutex_unlock(&srv->shell_lock);
        pyc_zqueue_push(&srv->shell_out, it);
        return 0;
    }
    int rc = pyc_zqueue_item_send(srv->sock[PYC_CHAN_SHELL], it);
    srv->shell_unread = true;
    pthread_mutex_unlock(&srv->shell_lock);
    if (rc < 0)
        pyc_log("shell: send failed: %s", zmq_strerror(zmq_errno()));
    pyc_zqueue_item_free(it);
    return rc;
}

int
pyc__shell_send_to_returning(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n, int timeout_ms)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    if (chan != PYC_CHAN_SHELL)
        return io->send(io, chan, frames, n);
    pyc_zqitem_t *it = pyc_zqueue_item_new(frames, n);
    if (it == NULL)
        return -1;
    if (it->n == 0 || atomic_load(&srv->routed) || atomic_load(&srv->want_route))
        return pyc__shell_send(srv, it);
    /* ZMQ_ROUTER_MANDATORY for this message only: a ROUTER drops a message for a peer it does not know
     * without a word, and with the option refuses it (EHOSTUNREACH) and keeps it, so that it can be tried
     * again until the peer has reconnected.  The lock is let go between tries: the control thread may want
     * the socket meanwhile (want_route), and then the message goes the usual way. */
    double deadline = pyc_now_s() + timeout_ms / 1000.0;
    int on = 1, off = 0, rc = -1;
    for (;;) {
        pthread_mutex_lock(&srv->shell_lock);
        if (srv->closed || atomic_load(&srv->want_route)) {
            pthread_mutex_unlock(&srv->shell_lock);
            break;
        }
        void *sock = srv->sock[PYC_CHAN_SHELL];
        zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &on, sizeof on);
        rc = zmq_msg_send(&it->frames[0], sock, (it->n > 1 ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0 ? -1 : 0;
        int why = rc < 0 ? zmq_errno() : 0;
        zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &off, sizeof off);
        for (size_t i = 1; rc == 0 && i < it->n; i++)
            rc = zmq_msg_send(&it->frames[i], sock, i + 1 < it->n ? ZMQ_SNDMORE : 0) < 0 ? -1 : 0;
        srv->shell_unread = true;
        pthread_mutex_unlock(&srv->shell_lock);
        if (rc == 0 || (why != EHOSTUNREACH && why != EAGAIN) || pyc_now_s() >= deadline) {
            if (rc < 0 && why == EHOSTUNREACH)
                pyc_log("shell: a reply for a client that did not come back was dropped");
            else if (rc < 0)
                pyc_log("shell: send failed: %s", zmq_strerror(why != 0 ? why : zmq_errno()));
            pyc_zqueue_item_free(it);
            return rc;
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return pyc__shell_send(srv, it);
}

/* The shell thread: replies first (so that an answer leaves before new work arrives), then every request
 * waiting, each to its subshell or to the main thread. */
static void *
shell_main(void *arg)
{
    pyc_server_t *srv = arg;
    for (;;) {
        zmq_pollitem_t items[2] = {
            {.socket = srv->sock[PYC_CHAN_SHELL], .events = ZMQ_POLLIN},
            {.fd = srv->shell_out.efd, .events = ZMQ_POLLIN},
        };
        int stopping = srv->stop;
        if (zmq_poll(items, 2, stopping ? 0 : -1) < 0 && zmq_errno() != EINTR)
            break;
        pyc_zqueue_send_all(&srv->shell_out, srv->sock[PYC_CHAN_SHELL], "shell");
        if (stopping)
            break;
        if (!(items[0].revents & ZMQ_POLLIN))
            continue;
        pyc_msg_t *msg;
        while ((msg = pyc__server_recv(srv, PYC_CHAN_SHELL, NULL)) != NULL) {
            if (!srv->take(srv->take_ctx, msg))
                pyc_zqueue_push_msg(&srv->shell_in, PYC_CHAN_SHELL, msg, "shell");
        }
    }
    return NULL;
}

int
pyc__shell_route(pyc_io_t *io, bool (*take)(void *ctx, pyc_msg_t *msg), void *ctx, pyc_error_t *err)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    if (atomic_load(&srv->routed))
        return 0;
    srv->take = take;
    srv->take_ctx = ctx;
    atomic_store(&srv->want_route, 1);
    pyc_zqueue_signal(&srv->inbox_q);        /* the main thread leaves its wait on the socket */
    pthread_mutex_lock(&srv->shell_lock);
    int rc = pthread_create(&srv->th_shell, NULL, shell_main, srv);
    if (rc == 0)
        atomic_store(&srv->routed, 1);
    else
        atomic_store(&srv->want_route, 0);
    pthread_mutex_unlock(&srv->shell_lock);
    if (rc != 0)
        pyc_zqueue_signal(&srv->inbox_q);    /* the main thread went back to the socket: let it look */
    if (rc != 0)
        return pyc_error_set(err, "cannot start the shell thread: %s", strerror(rc));
    return 0;
}

void
pyc__shell_stop(pyc_server_t *srv)
{
    if (!atomic_load(&srv->routed))
        return;
    srv->stop = 1;
    pyc_zqueue_signal(&srv->shell_out);
    pthread_join(srv->th_shell, NULL);
    atomic_store(&srv->routed, 0);
    atomic_store(&srv->want_route, 1);       /* nobody reads the socket any more */
}

void
pyc__shell_clear(pyc_server_t *srv)
{
    pyc_zqueue_clear(&srv->shell_in);
    pyc_zqueue_clear(&srv->shell_out);
    pthread_mutex_destroy(&srv->shell_lock);
}

/* The main thread's shell requests: taken from shell_in once routed (or while being routed), else read from
 * the socket under shell_lock. */
pyc_msg_t *
pyc__shell_next_pending(pyc_io_t *io)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    if (atomic_load(&srv->want_route)) {
        pyc_zqitem_t *it = pyc_zqueue_pop(&srv->shell_in);
        pyc_msg_t *msg = it != NULL ? it->msg : NULL;
        if (it != NULL) {
            it->msg = NULL;
            pyc_zqueue_item_free(it);
        }
        return msg;
    }
    pthread_mutex_lock(&srv->shell_lock);
    pyc_msg_t *msg = NULL;
    for (;;) {
        zmq_pollitem_t it = {.socket = srv->sock[PYC_CHAN_SHELL], .events = ZMQ_POLLIN};
        if (atomic_load(&srv->routed) || zmq_poll(&it, 1, 0) <= 0)
            break;
        if ((msg = pyc__server_recv(srv, PYC_CHAN_SHELL, NULL)) != NULL)
            break;
    }
    srv->shell_unread = true;
    pthread_mutex_unlock(&srv->shell_lock);
    return msg;
}

pyc_msg_t *
pyc_server_next(pyc_server_t *srv, int timeout_ms, int *chan)
{
    return pyc_server_next_fds(srv, timeout_ms, NULL, 0, chan);
}

/* Pops an item's message, or NULL when the queue is empty.  The inbox's eventfd is read only when poll says
 * it was signalled (pyc_zqueue_try_pop); the shell thread's queue is emptied with its signal. */
static pyc_msg_t *
pop_msg(pyc_zqueue_t *q, bool try, int *chan)
{
    pyc_zqitem_t *it = try ? pyc_zqueue_try_pop(q) : pyc_zqueue_pop(q);
    if (it == NULL)
        return NULL;
    pyc_msg_t *msg = it->msg;
    it->msg = NULL;
    *chan = it->chan;
    pyc_zqueue_item_free(it);
    return msg;
}

/* Under shell_lock, while the main thread owns the socket: a request the socket holds, unless shell_fd has
 * said nothing since a receive found nothing (shell_unread).  Sets *again when a message was dropped (there
 * may be another). */
static pyc_msg_t *
shell_take(pyc_server_t *srv, bool *again)
{
    *again = false;
    if (!srv->shell_unread)
        return NULL;
    bool nothing;
    pyc_msg_t *msg = pyc__server_recv(srv, PYC_CHAN_SHELL, &nothing);
    if (msg == NULL && nothing)
        srv->shell_unread = false;
    *again = msg == NULL && !nothing;
    return msg;
}

/* The wait, in one poll(2): the inbox's eventfd, the shell socket's descriptor (or the shell thread's queue),
 * and the caller's.  The shell socket is not polled through zmq_poll, which asks libzmq for the socket's
 * state before and after every wait (each a getpid and a poll of its mailbox): a receive that found nothing
 * leaves ZMQ_FD to announce the next message, and shell_unread says when that does not hold. */
pyc_msg_t *
pyc_server_next_fds(pyc_server_t *srv, int timeout_ms, pyc_server_fd_t *fds, int nfds, int *chan)
{
    enum { MAX_FDS = 8 };
    assert(nfds >= 0 && nfds <= MAX_FDS);
    for (int i = 0; i < nfds; i++)
        fds[i].ready = false;
    for (;;) {
        pyc_msg_t *msg = pop_msg(&srv->inbox_q, true, chan);
        if (msg != NULL)
            return msg;
        bool routed = atomic_load(&srv->want_route);
        if (routed && (msg = pop_msg(&srv->shell_in, false, chan)) != NULL)
            return msg;
        if (!routed) {
            pthread_mutex_lock(&srv->shell_lock);
            if (atomic_load(&srv->want_route)) {
                pthread_mutex_unlock(&srv->shell_lock);
                continue;
            }
            bool again;
            msg = shell_take(srv, &again);
            if (msg != NULL || again) {
                pthread_mutex_unlock(&srv->shell_lock);
                if (msg == NULL)
                    continue;
                *chan = PYC_CHAN_SHELL;
                return msg;
            }
        }
        if (timeout_ms == 0 && nfds == 0) {
            /* Nothing queued, nothing on the socket: a wake-up pending on the inbox waits for the next wait. */
            if (!routed)
                pthread_mutex_unlock(&srv->shell_lock);
            return NULL;
        }
        struct pollfd pfd[2 + MAX_FDS] = {
            {.fd = srv->inbox_q.efd, .events = POLLIN},
            {.fd = routed ? srv->shell_in.efd : srv->shell_fd, .events = POLLIN},
        };
        for (int i = 0; i < nfds; i++)
            pfd[2 + i] = (struct pollfd){.fd = fds[i].fd, .events = POLLIN};
        int rc = poll(pfd, (nfds_t)(2 + nfds), timeout_ms);
        if (!routed) {
            if (rc > 0 && (pfd[1].revents & POLLIN))
                srv->shell_unread = true;
            pthread_mutex_unlock(&srv->shell_lock);
        }
        if (rc <= 0)
            return NULL;         /* the time is up, or a signal came */
        if (pfd[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(srv->inbox_q.efd, &v, sizeof v);
            (void)r;
            if (atomic_exchange(&srv->woken, 0))
                return NULL;     /* pyc_server_wake; anything queued is taken by the next call */
        }
        if ((pfd[0].revents | pfd[1].revents) & POLLIN)
            continue;            /* a request may be waiting: it goes before the caller's descriptors */
        bool any = false;
        for (int i = 0; i < nfds; i++) {
            fds[i].ready = (pfd[2 + i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
            any = any || fds[i].ready;
        }
        if (any)
            return NULL;
    }
}
