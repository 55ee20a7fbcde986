/*
 * server.c -- sockets and threads; see server.h for the shape.
 *
 * Outgoing messages become arrays of zmq_msg_t in the sending thread and are queued to the owning thread,
 * which an eventfd wakes (zqueue.h).
 *
 * The iopub socket's high-water mark is PYC_IOPUB_HWM (default 100000 messages per subscriber), not
 * ZeroMQ's 1000: a client that pipelines 10,000 requests must still see every busy and idle.  Past it a
 * subscriber that stops reading loses messages; the output caps bound what a cell publishes.
 */
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "wire.h"
#include "serverint.h"
#include "zap.h"

/* Under iopub_lock: whether a subscription message waits on iopub.  Asking ZMQ_EVENTS also processes the
 * socket's pending commands, so the check cannot miss a subscription: a send processes the command that
 * announced it and thereby clears the socket's ZMQ_FD, which the control thread waits on; this check, made
 * after every send, hands the news on to the control thread instead. */
static bool
iopub_readable(pyc_server_t *srv)
{
    int events = 0;
    size_t size = sizeof events;
    return zmq_getsockopt(srv->sock[PYC_CHAN_IOPUB], ZMQ_EVENTS, &events, &size) == 0 && (events & ZMQ_POLLIN);
}

/* Whether an iopub message is a status busy (its topic and content frames; pyc__status writes the content
 * as this exact text). */
static bool
is_busy(const pyc_outframe_t *frames, size_t n)
{
    static const char busy[] = "{\"execution_state\":\"busy\"}";
    return n == 7 && frames[0].size == 6 && memcmp(frames[0].data, "status", 6) == 0 &&
           frames[6].size == sizeof busy - 1 && memcmp(frames[6].data, busy, sizeof busy - 1) == 0;
}

/* An input_request on stdin, sent by the thread that holds the kernel's stdin lock (the only thread that uses
 * the socket).  The stdin ROUTER has ZMQ_ROUTER_MANDATORY: a ROUTER drops a message for a peer whose
 * connection it has not finished yet without a word, and input() then waited for a reply that could not come
 * (a client whose stdin channel connects late, or is slow to, on a loaded machine).  Here a peer not known
 * (yet) fails the send with errno EHOSTUNREACH, and a peer whose pipe is full with EAGAIN, without a log line:
 * the caller (host.c's ask_input) tries again while it watches for an interrupt, and says what happened when
 * it gives up.  Any other failure is logged, errno kept. */
static int
send_stdin(pyc_server_t *srv, pyc_zqitem_t *it)
{
    void *sock = srv->sock[PYC_CHAN_STDIN];
    int rc = it->n == 0 ? -1 : zmq_msg_send(&it->frames[0], sock, (it->n > 1 ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    int why = rc < 0 ? (it->n == 0 ? EINVAL : zmq_errno()) : 0;
    /* Once the first frame (the peer's identity) is taken, the rest of the message goes with it. */
    for (size_t i = 1; rc >= 0 && i < it->n; i++)
        if (zmq_msg_send(&it->frames[i], sock, i + 1 < it->n ? ZMQ_SNDMORE : 0) < 0) {
            rc = -1;
            why = zmq_errno();
        }
    if (rc < 0 && why != EHOSTUNREACH && why != EAGAIN)
        pyc_log("stdin: send failed: %s", zmq_strerror(why));
    pyc_zqueue_item_free(it);
    errno = why;
    return rc < 0 ? -1 : 0;
}

static int
io_send(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    bool busy = chan == PYC_CHAN_IOPUB && is_busy(frames, n);
    pyc_zqitem_t *it = pyc_zqueue_item_new(frames, n);
    if (it == NULL)
        return -1;
    switch (chan) {
    case PYC_CHAN_IOPUB: {
        /* Sent at once by the calling thread: a PUB socket without a high-water mark never blocks, and
         * the lock both orders the messages and hands the socket from thread to thread safely.  A status
         * busy is not followed by the check: the next message of its request (execute_input, or another
         * output, or the idle) always comes soon after it, and is.  That is not so of execute_input, after
         * which a long cell may print nothing: a subscription its send took in would wait for the cell's end
         * (test_welcome_while_a_cell_runs). */
        pthread_mutex_lock(&srv->iopub_lock);
        int rc = srv->stop_iopub ? -1 : pyc_zqueue_item_send(srv->sock[PYC_CHAN_IOPUB], it);
        bool subscribed = rc == 0 && !busy && iopub_readable(srv);
        pthread_mutex_unlock(&srv->iopub_lock);
        if (subscribed)
            pyc_zqueue_signal(&srv->control_q);
        pyc_zqueue_item_free(it);
        return rc;
    }
    case PYC_CHAN_CONTROL:
        pyc_zqueue_push(&srv->control_q, it);
        return 0;
    case PYC_CHAN_SHELL:
        return pyc__shell_send(srv, it);
    case PYC_CHAN_STDIN:
        return send_stdin(srv, it);
    default:
        pyc_zqueue_item_free(it);
        return -1;
    }
}

/* ---- receiving (recv.c has the decoding of one message) ------------------------------------------- */

static pyc_msg_t *
io_recv_stdin(pyc_io_t *io, int timeout_ms)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    zmq_pollitem_t it = {.socket = srv->sock[PYC_CHAN_STDIN], .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return NULL;
    return pyc__server_recv(srv, PYC_CHAN_STDIN, NULL);
}

/* ---- threads --------------------------------------------------------------------------------------- */

/* Control thread: reads the subscription messages waiting on the XPUB iopub socket and tells the kernel
 * of each new subscription (JEP 65: it answers with iopub_welcome).  The socket is read under iopub_lock;
 * the callback runs after the lock is released, because it publishes.  Unsubscriptions (first byte 0) are
 * counted to on_unsubscribe; anything else is read and dropped.  At most 64 a round; more wait for the next
 * round, which the re-signalled queue brings at once. */
static void
drain_subscriptions(pyc_server_t *srv)
{
    enum { MAX_ROUND = 64 };
    zmq_msg_t subs[MAX_ROUND];
    int n = 0, unsubs = 0;
    bool more = false;
    pthread_mutex_lock(&srv->iopub_lock);
    while (!srv->stop_iopub && iopub_readable(srv)) {
        if (n == MAX_ROUND) {
            more = true;
            break;
        }
        zmq_msg_init(&subs[n]);
        if (zmq_msg_recv(&subs[n], srv->sock[PYC_CHAN_IOPUB], ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&subs[n]);
            break;
        }
        const unsigned char *d = zmq_msg_data(&subs[n]);
        if (zmq_msg_size(&subs[n]) >= 1 && d[0] == 1 && !zmq_msg_more(&subs[n])) {
            n++;
        } else {
            unsubs += zmq_msg_size(&subs[n]) >= 1 && d[0] == 0 && !zmq_msg_more(&subs[n]);
            zmq_msg_close(&subs[n]);
        }
    }
    pthread_mutex_unlock(&srv->iopub_lock);
    for (int i = 0; i < unsubs && srv->cb.on_unsubscribe != NULL; i++)
        srv->cb.on_unsubscribe(srv->cb.ctx);
    for (int i = 0; i < n; i++) {
        if (srv->cb.on_subscribe != NULL)
            srv->cb.on_subscribe(srv->cb.ctx, (const char *)zmq_msg_data(&subs[i]) + 1, zmq_msg_size(&subs[i]) - 1);
        zmq_msg_close(&subs[i]);
    }
    if (more)
        pyc_zqueue_signal(&srv->control_q);
}

static void *
control_main(void *arg)
{
    pyc_server_t *srv = arg;
    /* iopub's own descriptor: readable when the socket has news, such as a subscription (see iopub_readable
     * for the case where another thread took the news first).  Polled as a plain descriptor: the socket
     * itself belongs to whoever holds iopub_lock. */
    int iopub_fd = -1;
    size_t fd_size = sizeof iopub_fd;
    pthread_mutex_lock(&srv->iopub_lock);
    if (zmq_getsockopt(srv->sock[PYC_CHAN_IOPUB], ZMQ_FD, &iopub_fd, &fd_size) < 0)
        iopub_fd = -1;
    pthread_mutex_unlock(&srv->iopub_lock);
    for (;;) {
        zmq_pollitem_t items[3] = {
            {.socket = srv->sock[PYC_CHAN_CONTROL], .events = ZMQ_POLLIN},
            {.fd = srv->control_q.efd, .events = ZMQ_POLLIN},
            {.fd = iopub_fd, .events = ZMQ_POLLIN},
        };
        int stopping = srv->stop;
        if (zmq_poll(items, iopub_fd >= 0 ? 3 : 2, stopping ? 0 : -1) < 0 && zmq_errno() != EINTR)
            break;
        if (!stopping && (items[1].revents | items[2].revents) & ZMQ_POLLIN)
            drain_subscriptions(srv);
        /* Replies first, so that an answer queued by the main thread leaves before new work arrives. */
        pyc_zqueue_send_all(&srv->control_q, srv->sock[PYC_CHAN_CONTROL], "control");
        if (stopping)
            break;
        if (items[0].revents & ZMQ_POLLIN) {
            pyc_msg_t *msg;
            while ((msg = pyc__server_recv(srv, PYC_CHAN_CONTROL, NULL)) != NULL) {
                if (srv->cb.on_control == NULL || !srv->cb.on_control(srv->cb.ctx, msg))
                    pyc_zqueue_push_msg(&srv->inbox_q, PYC_CHAN_CONTROL, msg, "control");
            }
        }
    }
    return NULL;
}

static void *
hb_main(void *arg)
{
    pyc_server_t *srv = arg;
    /* Echo: a ROUTER proxied onto itself sends every message back to its sender.  Returns when
     * pyc_server_destroy sends TERMINATE on the steering socket. */
    zmq_proxy_steerable(srv->sock[PYC_CHAN_HB], srv->sock[PYC_CHAN_HB], NULL, srv->hb_ctl[1]);
    return NULL;
}

/* ---- life cycle ------------------------------------------------------------------------------------ */

/* Binds a port of [port_min, port_max] that is free, trying each once from a place that differs between
 * processes (kernels started together do not all race for the first); the port is written into cf. */
static int
bind_in_range(void *s, pyc_connfile_t *cf, int chan, pyc_error_t *err)
{
    unsigned span = (unsigned)(cf->port_max - cf->port_min + 1);
    unsigned start = ((unsigned)getpid() * 2654435761u + (unsigned)chan * 40503u) % span;
    char ep[512];
    for (unsigned i = 0; i < span; i++) {
        int port = cf->port_min + (int)((start + i) % span);
        snprintf(ep, sizeof ep, "tcp://%s:%d", cf->ip, port);
        if (zmq_bind(s, ep) == 0) {
            cf->ports[chan] = port;
            return 0;
        }
        if (zmq_errno() != EADDRINUSE)
            return pyc_error_set(err, "cannot bind the %s channel to %s: %s", pyc__chan_names[chan], ep,
                                 zmq_strerror(zmq_errno()));
    }
    return pyc_error_set(err, "cannot bind the %s channel: no free port in %d-%d", pyc__chan_names[chan], cf->port_min,
                         cf->port_max);
}

static int
bind_channel(pyc_server_t *srv, pyc_connfile_t *cf, int chan, int type, int fd, pyc_error_t *err)
{
    char ep[512];
    void *s = zmq_socket(srv->zctx, type);
    if (s == NULL) {
        if (fd >= 0)
            close(fd);
        return pyc_error_set(err, "cannot create the %s socket: %s", pyc__chan_names[chan], zmq_strerror(zmq_errno()));
    }
    /* A listening socket that is bound already: ZeroMQ serves it (and closes it with the socket). */
    if (fd >= 0 && zmq_setsockopt(s, ZMQ_USE_FD, &fd, sizeof fd) < 0)
        close(fd);
    srv->sock[chan] = s;
    int linger = 1000, zero = 0, one = 1;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    /* Bounds against peers that need no key to connect (every one on the network may):
     *  - the largest frame each channel takes (ZeroMQ disconnects a peer that sends more, before it is held
     *    in memory): 256 MiB on shell (PYC_MAX_MESSAGE_BYTES), control and stdin, whose frames are checked
     *    before the signature can be, so that a peer without the key cannot make one frame the kernel holds
     *    a gigabyte (pickle transfers send larger buffers in frames of 256 MiB: pyc/_digest.py), and small
     *    messages on iopub and the heartbeat;
     *  - inbound queues of 1000 messages (ZeroMQ's default; a full queue stops reading from that peer,
     *    which a pipelining client feels as back-pressure, never as loss);
     *  - replies and iopub queue without a bound for a client that reads (a pipelining client must see
     *    every busy and idle), except iopub for a subscriber that stops reading, past PYC_IOPUB_HWM
     *    messages (default 100000), and the heartbeat's echoes past 1000.  */
    int64_t maxmsg = chan == PYC_CHAN_SHELL ? srv->max_message : chan == PYC_CHAN_HB ? 1024
                   : chan == PYC_CHAN_IOPUB ? 4096 : (int64_t)PYC_SERVER_MAX_DICT;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (chan == PYC_CHAN_IOPUB) {
        zmq_setsockopt(s, ZMQ_SNDHWM, &srv->iopub_hwm, sizeof srv->iopub_hwm);
        /* Every subscription is passed up, not only the first of each topic: each client gets its welcome;
         * and every unsubscription, a client that goes away included, so that the kernel knows how many
         * listen (a restore waits for as many to come back). */
        zmq_setsockopt(s, ZMQ_XPUB_VERBOSE, &one, sizeof one);
        zmq_setsockopt(s, ZMQ_XPUB_VERBOSER, &one, sizeof one);
    }
    else if (chan != PYC_CHAN_HB)
        zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    if (type == ZMQ_ROUTER) {
        /* A reply to a client that went away is dropped, not an error for the next one. */
        zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    }
    if (chan == PYC_CHAN_STDIN)     /* see send_stdin */
        zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    if (pyc_connfile_curve(cf) && pyc_zap_secure(s, cf, pyc__chan_names[chan], err) < 0)
        return -1;
    if (cf->ports[chan] == 0 && cf->port_min > 0 && strcmp(cf->transport, "tcp") == 0)
        return bind_in_range(s, cf, chan, err);
    if (pyc_connfile_endpoint(cf, chan, ep, sizeof ep) < 0)
        return pyc_error_set(err, "%s endpoint is too long", pyc__chan_names[chan]);
    if (zmq_bind(s, ep) < 0)
        return pyc_error_set(err, "cannot bind the %s channel to %s: %s", pyc__chan_names[chan], ep,
                             zmq_strerror(zmq_errno()));
    if (cf->ports[chan] == 0 && strcmp(cf->transport, "tcp") == 0) {
        char last[512];
        size_t len = sizeof last;
        if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, last, &len) == 0) {
            const char *colon = strrchr(last, ':');
            if (colon != NULL)
                cf->ports[chan] = (int)strtol(colon + 1, NULL, 10);
        }
    }
    return 0;
}

pyc_server_t *
pyc_server_new(pyc_connfile_t *cf, pyc_auth_t *auth, pyc_error_t *err)
{
    return pyc_server_new_on(cf, auth, NULL, err);
}

pyc_server_t *
pyc_server_new_on(pyc_connfile_t *cf, pyc_auth_t *auth, int *fds, pyc_error_t *err)
{
    static const int types[PYC_CHAN_COUNT] = {ZMQ_ROUTER, ZMQ_XPUB, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_ROUTER};
    pyc_server_t *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto fail;
    }
    srv->auth = auth;
    srv->max_message = (int64_t)PYC_SERVER_MAX_DICT;
    srv->iopub_hwm = 100000;
    const char *v = getenv("PYC_MAX_MESSAGE_BYTES");
    if (v != NULL && v[0] != '\0' && strtoll(v, NULL, 10) > 0)
        srv->max_message = strtoll(v, NULL, 10);
    v = getenv("PYC_IOPUB_HWM");
    if (v != NULL && v[0] != '\0' && strtol(v, NULL, 10) > 0)
        srv->iopub_hwm = (int)strtol(v, NULL, 10);
    srv->io.send = io_send;
    srv->io.next_pending = pyc__shell_next_pending;
    srv->io.route_shell = pyc__shell_route;
    srv->io.send_to_returning = pyc__shell_send_to_returning;
    srv->io.recv_stdin = io_recv_stdin;
    pthread_mutex_init(&srv->iopub_lock, NULL);
    srv->control_q.efd = srv->inbox_q.efd = -1;
    if (pyc_zqueue_init(&srv->control_q) < 0 || pyc_zqueue_init(&srv->inbox_q) < 0 || pyc__shell_init(srv) < 0) {
        pyc_error_set(err, "eventfd: %s", strerror(errno));
        goto fail;
    }
    srv->zctx = zmq_ctx_new();
    if (srv->zctx == NULL) {
        pyc_error_set(err, "cannot create a ZeroMQ context");
        goto fail;
    }
    if (pyc_connfile_curve(cf) && cf->curve_restricted && (srv->zap = pyc_zap_start(srv->zctx, cf, err)) == NULL)
        goto fail;
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        int fd = fds != NULL ? fds[c] : -1;
        if (fds != NULL)
            fds[c] = -1;                  /* the socket's now, or closed */
        if (bind_channel(srv, cf, c, types[c], fd, err) < 0)
            goto fail;
    }
    size_t fd_size = sizeof srv->shell_fd;
    if (zmq_getsockopt(srv->sock[PYC_CHAN_SHELL], ZMQ_FD, &srv->shell_fd, &fd_size) < 0) {
        pyc_error_set(err, "cannot get the shell socket's descriptor: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    srv->shell_unread = true;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://pyc-hb-%p", (void *)srv);
    srv->hb_ctl[0] = zmq_socket(srv->zctx, ZMQ_PAIR);
    srv->hb_ctl[1] = zmq_socket(srv->zctx, ZMQ_PAIR);
    if (srv->hb_ctl[0] == NULL || srv->hb_ctl[1] == NULL || zmq_bind(srv->hb_ctl[1], ep) < 0 ||
        zmq_connect(srv->hb_ctl[0], ep) < 0) {
        pyc_error_set(err, "cannot create the heartbeat's steering socket: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    return srv;
fail:
    for (int c = 0; fds != NULL && c < PYC_CHAN_COUNT; c++) {
        if (fds[c] >= 0)
            close(fds[c]);
        fds[c] = -1;
    }
    pyc_server_destroy(&srv);
    return NULL;
}

int
pyc_server_start(pyc_server_t *srv, const pyc_server_callbacks_t *cb, pyc_error_t *err)
{
    srv->cb = *cb;
    if (pthread_create(&srv->th_control, NULL, control_main, srv) != 0)
        return pyc_error_set(err, "cannot start the control thread");
    if (pthread_create(&srv->th_hb, NULL, hb_main, srv) != 0) {
        srv->stop = 1;
        pyc_zqueue_signal(&srv->control_q);
        pthread_join(srv->th_control, NULL);
        return pyc_error_set(err, "cannot start the heartbeat thread");
    }
    srv->started = true;
    return 0;
}

pyc_io_t *
pyc_server_io(pyc_server_t *srv)
{
    return &srv->io;
}

void
pyc_server_wake(pyc_server_t *srv)
{
    atomic_store(&srv->woken, 1);
    pyc_zqueue_signal(&srv->inbox_q);
}

void
pyc_server_close(pyc_server_t *srv)
{
    if (srv == NULL || srv->closed)
        return;
    srv->closed = 1;
    if (srv->started) {
        srv->stop = 1;
        pyc_zqueue_signal(&srv->control_q);
        pthread_join(srv->th_control, NULL);
        pyc__shell_stop(srv);
    }
    if (srv->started) {
        zmq_send(srv->hb_ctl[0], "TERMINATE", 9, 0);
        pthread_join(srv->th_hb, NULL);
    }
    /* Under both locks: a Python thread still printing, or a subshell's thread still replying on shell, now
     * finds its socket gone. */
    pthread_mutex_lock(&srv->iopub_lock);
    pthread_mutex_lock(&srv->shell_lock);
    srv->stop_iopub = 1;
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        if (srv->sock[c] != NULL)
            zmq_close(srv->sock[c]);
        srv->sock[c] = NULL;
    }
    pthread_mutex_unlock(&srv->shell_lock);
    pthread_mutex_unlock(&srv->iopub_lock);
    for (int i = 0; i < 2; i++) {
        if (srv->hb_ctl[i] != NULL)
            zmq_close(srv->hb_ctl[i]);
        srv->hb_ctl[i] = NULL;
    }
    if (srv->zctx != NULL)
        zmq_ctx_term(srv->zctx);
    srv->zctx = NULL;
    pyc_zap_join(&srv->zap);     /* its thread ended when the context was terminated */
}

void
pyc_server_destroy(pyc_server_t **srv_p)
{
    if (srv_p == NULL || *srv_p == NULL)
        return;
    pyc_server_t *srv = *srv_p;
    pyc_server_close(srv);
    pyc_zqueue_clear(&srv->control_q);
    pyc_zqueue_clear(&srv->inbox_q);
    pyc__shell_clear(srv);
    pthread_mutex_destroy(&srv->iopub_lock);
    free(srv);
    *srv_p = NULL;
}
