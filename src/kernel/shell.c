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

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    pthread_mutex_unlock(&srv->shell_lock);
    if (rc < 0)
        pyc_log("shell: send failed: %s", zmq_strerror(zmq_errno()));
    pyc_zqueue_item_free(it);
    return rc;
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
        while ((msg = pyc__server_recv(srv, PYC_CHAN_SHELL)) != NULL) {
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
        if ((msg = pyc__server_recv(srv, PYC_CHAN_SHELL)) != NULL)
            break;
    }
    pthread_mutex_unlock(&srv->shell_lock);
    return msg;
}

pyc_msg_t *
pyc_server_next(pyc_server_t *srv, int timeout_ms, int *chan)
{
    bool fd_ready;
    return pyc_server_next_fd(srv, timeout_ms, -1, chan, &fd_ready);
}

/* Pops an item's message, or NULL when the queue is empty. */
static pyc_msg_t *
pop_msg(pyc_zqueue_t *q, int *chan)
{
    pyc_zqitem_t *it = pyc_zqueue_pop(q);
    if (it == NULL)
        return NULL;
    pyc_msg_t *msg = it->msg;
    it->msg = NULL;
    *chan = it->chan;
    pyc_zqueue_item_free(it);
    return msg;
}

pyc_msg_t *
pyc_server_next_fd(pyc_server_t *srv, int timeout_ms, int fd, int *chan, bool *fd_ready)
{
    *fd_ready = false;
    for (;;) {
        pyc_msg_t *msg = pop_msg(&srv->inbox_q, chan);
        if (msg != NULL)
            return msg;
        bool routed = atomic_load(&srv->want_route);
        if (routed && (msg = pop_msg(&srv->shell_in, chan)) != NULL)
            return msg;
        if (!routed) {
            pthread_mutex_lock(&srv->shell_lock);
            if (atomic_load(&srv->want_route)) {
                pthread_mutex_unlock(&srv->shell_lock);
                continue;
            }
        }
        zmq_pollitem_t items[3] = {
            {.fd = srv->inbox_q.efd, .events = ZMQ_POLLIN},
            routed ? (zmq_pollitem_t){.fd = srv->shell_in.efd, .events = ZMQ_POLLIN}
                   : (zmq_pollitem_t){.socket = srv->sock[PYC_CHAN_SHELL], .events = ZMQ_POLLIN},
            {.fd = fd, .events = ZMQ_POLLIN},
        };
        int rc = zmq_poll(items, fd >= 0 ? 3 : 2, timeout_ms);
        if (rc > 0 && !routed && (items[1].revents & ZMQ_POLLIN) && !(items[0].revents & ZMQ_POLLIN)) {
            msg = pyc__server_recv(srv, PYC_CHAN_SHELL);
            pthread_mutex_unlock(&srv->shell_lock);
            if (msg != NULL) {
                *chan = PYC_CHAN_SHELL;
                return msg;
            }
            continue;
        }
        if (!routed)
            pthread_mutex_unlock(&srv->shell_lock);
        if (rc <= 0)
            return NULL;
        if (fd >= 0 && (items[2].revents & ZMQ_POLLIN) && !(items[0].revents & ZMQ_POLLIN) &&
            !(items[1].revents & ZMQ_POLLIN)) {
            *fd_ready = true;
            return NULL;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            uint64_t v;
            ssize_t r = read(srv->inbox_q.efd, &v, sizeof v);
            (void)r;
            pthread_mutex_lock(&srv->inbox_q.lock);
            bool queued = srv->inbox_q.head != NULL;
            pthread_mutex_unlock(&srv->inbox_q.lock);
            if (!queued)
                return NULL;     /* a wake-up, not a request */
        }
    }
}
