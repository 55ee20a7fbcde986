/*
 * server.c -- sockets and threads; see server.h for the shape.
 *
 * Outgoing messages become arrays of zmq_msg_t in the sending thread (small frames copied, large owned
 * blocks handed over without a copy) and are queued to the owning thread, which an eventfd wakes.  zmq_poll
 * accepts plain file descriptors, so a thread waits on its socket and its queue at once.
 *
 * The iopub socket has no high-water mark: a client that pipelines 10,000 requests must still see every
 * busy and idle, and ZeroMQ's default of 1000 messages would drop them.  Memory is bounded by the output
 * caps instead.
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
#include "zap.h"

static const char *const chan_names[PYC_CHAN_COUNT] = {"shell", "iopub", "stdin", "control", "heartbeat"};

/* Lines about dropped messages, which a peer without the key can cause at will, are rate-limited. */
static pyc_log_limit_t dropped_log = PYC_LOG_LIMIT_INIT;

/* A multipart message waiting in a queue. */
typedef struct qitem {
    struct qitem *next;
    int chan;                    /* for the main inbox: where the request came from */
    pyc_msg_t *msg;              /* inbox items carry a decoded request ... */
    size_t n;                    /* ... outbox items carry frames */
    zmq_msg_t frames[];
} qitem_t;

/* A mutex-guarded FIFO with an eventfd that is readable while the queue may be non-empty. */
typedef struct queue {
    pthread_mutex_t lock;
    qitem_t *head, *tail;
    int efd;
} queue_t;

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
    queue_t control_q, inbox_q;
    pyc_control_fn on_control;
    void *control_ctx;
    void *hb_ctl[2];             /* inproc PAIR: [0] kept by the main thread, [1] steers the proxy */
    pthread_t th_control, th_hb;
    bool started;
    volatile int stop;
    int stop_iopub;              /* set under iopub_lock once the socket is closed */
    int64_t max_message;         /* the largest frame shell takes (PYC_MAX_MESSAGE_BYTES) */
    int iopub_hwm;               /* iopub messages queued for one subscriber at most (PYC_IOPUB_HWM) */
    pyc_zap_t *zap;              /* the CURVE allow-list's handler (zap.c), or NULL */
};

/* ---- queues ---------------------------------------------------------------------------------------- */

static int
queue_init(queue_t *q)
{
    pthread_mutex_init(&q->lock, NULL);
    q->head = q->tail = NULL;
    q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return q->efd < 0 ? -1 : 0;
}

static void
queue_signal(queue_t *q)
{
    uint64_t one = 1;
    ssize_t w = write(q->efd, &one, sizeof one);
    (void)w;
}

static void
queue_push(queue_t *q, qitem_t *it)
{
    it->next = NULL;
    pthread_mutex_lock(&q->lock);
    bool was_empty = q->head == NULL;
    if (q->tail != NULL)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    pthread_mutex_unlock(&q->lock);
    if (was_empty)
        queue_signal(q);
}

/* Pops the whole queue at once (FIFO order kept) and clears the eventfd. */
static qitem_t *
queue_take_all(queue_t *q)
{
    uint64_t v;
    ssize_t r = read(q->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&q->lock);
    qitem_t *all = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return all;
}

static qitem_t *
queue_pop(queue_t *q)
{
    pthread_mutex_lock(&q->lock);
    qitem_t *it = q->head;
    if (it != NULL) {
        q->head = it->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    pthread_mutex_unlock(&q->lock);
    if (it == NULL) {
        uint64_t v;
        ssize_t r = read(q->efd, &v, sizeof v);
        (void)r;
        /* A push may have raced with the read above: re-signal so the waiter looks again. */
        pthread_mutex_lock(&q->lock);
        bool again = q->head != NULL;
        pthread_mutex_unlock(&q->lock);
        if (again)
            queue_signal(q);
    }
    return it;
}

static void
qitem_free(qitem_t *it)
{
    for (size_t i = 0; i < it->n; i++)
        zmq_msg_close(&it->frames[i]);
    pyc_msg_destroy(&it->msg);
    free(it);
}

static void
queue_clear(queue_t *q)
{
    for (qitem_t *it = q->head, *next; it != NULL; it = next) {
        next = it->next;
        qitem_free(it);
    }
    q->head = q->tail = NULL;
    if (q->efd >= 0)
        close(q->efd);
    q->efd = -1;
    pthread_mutex_destroy(&q->lock);
}

/* ---- sending --------------------------------------------------------------------------------------- */

static void
free_owned(void *data, void *hint)
{
    (void)data;
    free(hint);
}

/* ZeroMQ is done with lent bytes (see pyc_releaser_t); runs on whatever thread closed the last copy of the
 * message, usually the I/O thread. */
static void
release_lent(void *data, void *hint)
{
    (void)data;
    pyc_releaser_t *r = hint;
    r->release(r);
}

/* Converts outframes to zmq messages; owned blocks and lent bytes are taken over in every case.  Neither is
 * copied: a 100 MiB buffer copied here cost 60 ms, most of it faulting in the fresh block. */
static qitem_t *
make_item(pyc_outframe_t *frames, size_t n)
{
    qitem_t *it = calloc(1, sizeof *it + n * sizeof(zmq_msg_t));
    size_t i = 0;
    if (it == NULL)
        goto fail;
    for (; i < n; i++) {
        int rc;
        if (frames[i].owned != NULL) {
            rc = zmq_msg_init_data(&it->frames[i], (void *)frames[i].data, frames[i].size, free_owned,
                                   frames[i].owned);
            if (rc == 0)
                frames[i].owned = NULL;
        } else if (frames[i].releaser != NULL && frames[i].size > 0) {
            rc = zmq_msg_init_data(&it->frames[i], (void *)frames[i].data, frames[i].size, release_lent,
                                   frames[i].releaser);
            if (rc == 0)
                frames[i].releaser = NULL;
        } else {
            rc = zmq_msg_init_size(&it->frames[i], frames[i].size);
            if (rc == 0 && frames[i].size > 0)
                memcpy(zmq_msg_data(&it->frames[i]), frames[i].data, frames[i].size);
            if (rc == 0)
                pyc_outframe_drop(&frames[i]);   /* an empty lent frame: nothing was borrowed after all */
        }
        if (rc != 0)
            goto fail;
        it->n = i + 1;
    }
    return it;
fail:
    for (size_t j = 0; j < n; j++)
        pyc_outframe_drop(&frames[j]);
    if (it != NULL)
        qitem_free(it);
    return NULL;
}

/* Sends a queued item on a socket.  A failure (a peer gone, ETERM) drops the rest of the message. */
static int
send_item(void *sock, qitem_t *it)
{
    int rc = 0;
    for (size_t i = 0; i < it->n; i++) {
        if (zmq_msg_send(&it->frames[i], sock, i + 1 < it->n ? ZMQ_SNDMORE : 0) < 0) {
            rc = -1;
            break;
        }
    }
    return rc;
}

static int
io_send(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    qitem_t *it = make_item(frames, n);
    if (it == NULL)
        return -1;
    switch (chan) {
    case PYC_CHAN_IOPUB: {
        /* Sent at once by the calling thread: a PUB socket without a high-water mark never blocks, and
         * the lock both orders the messages and hands the socket from thread to thread safely. */
        pthread_mutex_lock(&srv->iopub_lock);
        int rc = srv->stop_iopub ? -1 : send_item(srv->sock[PYC_CHAN_IOPUB], it);
        pthread_mutex_unlock(&srv->iopub_lock);
        qitem_free(it);
        return rc;
    }
    case PYC_CHAN_CONTROL:
        queue_push(&srv->control_q, it);
        return 0;
    case PYC_CHAN_SHELL:
    case PYC_CHAN_STDIN: {
        int rc = send_item(srv->sock[chan], it);
        if (rc < 0)
            pyc_log("%s: send failed: %s", chan_names[chan], zmq_strerror(zmq_errno()));
        qitem_free(it);
        return rc;
    }
    default:
        qitem_free(it);
        return -1;
    }
}

/* ---- receiving ------------------------------------------------------------------------------------- */

static void
frameset_free(void *p)
{
    frameset_t *fs = p;
    for (size_t i = 0; i < fs->n; i++)
        zmq_msg_close(&fs->msgs[i]);
    free(fs);
}

/* Receives one whole multipart message without waiting and decodes it.  Returns the message, or NULL when
 * nothing was waiting or the message was dropped (with a log line). */
static pyc_msg_t *
recv_msg(pyc_server_t *srv, int chan)
{
    void *sock = srv->sock[chan];
    size_t cap = 8, n = 0, total_big = 0;  /* 8 frames cover a request with one identity */
    frameset_t *fs = malloc(sizeof *fs + cap * sizeof(zmq_msg_t));
    const char *why = NULL;
    int more = 1;

    if (fs == NULL)
        return NULL;
    fs->n = 0;
    while (more) {
        if (n == cap) {
            if (cap >= PYC_WIRE_MAX_FRAMES) {
                why = "too many frames";
                zmq_msg_t skip;
                zmq_msg_init(&skip);
                /* Read and discard the rest of the message. */
                while (zmq_msg_recv(&skip, sock, 0) >= 0 && zmq_msg_more(&skip))
                    ;
                zmq_msg_close(&skip);
                break;
            }
            frameset_t *bigger = realloc(fs, sizeof *fs + cap * 2 * sizeof(zmq_msg_t));
            if (bigger == NULL) {
                why = "out of memory";
                break;
            }
            fs = bigger;
            cap *= 2;
        }
        zmq_msg_init(&fs->msgs[n]);
        if (zmq_msg_recv(&fs->msgs[n], sock, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&fs->msgs[n]);
            if (n > 0)
                why = "message ended early";
            break;
        }
        more = zmq_msg_more(&fs->msgs[n]);
        total_big += zmq_msg_size(&fs->msgs[n]);
        n++;
        fs->n = n;
    }
    if (n == 0 && why == NULL) {
        frameset_free(fs);
        return NULL;
    }

    pyc_msg_t *msg = NULL;
    if (why == NULL && total_big > PYC_SERVER_MAX_BUFFERS + 4 * PYC_SERVER_MAX_DICT)
        why = "message larger than the limit";
    pyc_frame_t *views = why == NULL ? malloc(n * sizeof *views) : NULL;
    if (why == NULL && views == NULL)
        why = "out of memory";
    if (why == NULL) {
        for (size_t i = 0; i < n; i++) {
            views[i].data = zmq_msg_data(&fs->msgs[i]);
            views[i].size = zmq_msg_size(&fs->msgs[i]);
        }
        pyc_error_t err;
        /* The four JSON frames are bounded before the HMAC is computed over them. */
        size_t d = 0;
        while (d < n && !(views[d].size == PYC_WIRE_DELIM_LEN && memcmp(views[d].data, PYC_WIRE_DELIM,
                                                                       PYC_WIRE_DELIM_LEN) == 0))
            d++;
        bool too_big = false;
        for (size_t i = d + 2; i < n && i < d + 6; i++)
            too_big = too_big || views[i].size > PYC_SERVER_MAX_DICT;
        if (too_big)
            pyc_log_limited(&dropped_log, "%s: dropped message: a JSON frame is larger than %zu MiB",
                            chan_names[chan], PYC_SERVER_MAX_DICT >> 20);
        else if (pyc_wire_decode_request(views, n, srv->auth, &msg, &err) < 0)
            pyc_log_limited(&dropped_log, "%s: dropped message: %s", chan_names[chan], err.text);
        free(views);
    } else {
        pyc_log_limited(&dropped_log, "%s: dropped message: %s", chan_names[chan], why);
    }
    if (msg == NULL) {
        frameset_free(fs);
        return NULL;
    }
    pyc_msg_set_owner(msg, fs, frameset_free);
    return msg;
}

static pyc_msg_t *
io_next_pending(pyc_io_t *io)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    for (;;) {
        zmq_pollitem_t it = {.socket = srv->sock[PYC_CHAN_SHELL], .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 0) <= 0)
            return NULL;
        pyc_msg_t *msg = recv_msg(srv, PYC_CHAN_SHELL);
        if (msg != NULL)
            return msg;
    }
}

static pyc_msg_t *
io_recv_stdin(pyc_io_t *io, int timeout_ms)
{
    pyc_server_t *srv = (pyc_server_t *)((char *)io - offsetof(pyc_server_t, io));
    zmq_pollitem_t it = {.socket = srv->sock[PYC_CHAN_STDIN], .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return NULL;
    return recv_msg(srv, PYC_CHAN_STDIN);
}

/* ---- threads --------------------------------------------------------------------------------------- */

static void *
control_main(void *arg)
{
    pyc_server_t *srv = arg;
    for (;;) {
        zmq_pollitem_t items[2] = {
            {.socket = srv->sock[PYC_CHAN_CONTROL], .events = ZMQ_POLLIN},
            {.fd = srv->control_q.efd, .events = ZMQ_POLLIN},
        };
        int stopping = srv->stop;
        if (zmq_poll(items, 2, stopping ? 0 : -1) < 0 && zmq_errno() != EINTR)
            break;
        /* Replies first, so that an answer queued by the main thread leaves before new work arrives. */
        for (qitem_t *it = queue_take_all(&srv->control_q), *next; it != NULL; it = next) {
            next = it->next;
            send_item(srv->sock[PYC_CHAN_CONTROL], it);
            qitem_free(it);
        }
        if (stopping)
            break;
        if (items[0].revents & ZMQ_POLLIN) {
            pyc_msg_t *msg;
            while ((msg = recv_msg(srv, PYC_CHAN_CONTROL)) != NULL) {
                if (srv->on_control != NULL && srv->on_control(srv->control_ctx, msg))
                    continue;
                qitem_t *it = calloc(1, sizeof *it);
                if (it == NULL) {
                    pyc_log("control: dropped message: out of memory");
                    pyc_msg_destroy(&msg);
                    continue;
                }
                it->chan = PYC_CHAN_CONTROL;
                it->msg = msg;
                queue_push(&srv->inbox_q, it);
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

static int
bind_channel(pyc_server_t *srv, pyc_connfile_t *cf, int chan, int type, pyc_error_t *err)
{
    char ep[512];
    void *s = zmq_socket(srv->zctx, type);
    if (s == NULL)
        return pyc_error_set(err, "cannot create the %s socket: %s", chan_names[chan], zmq_strerror(zmq_errno()));
    srv->sock[chan] = s;
    int linger = 1000, zero = 0, one = 1;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    /* Bounds against peers that need no key to connect (every one on the network may):
     *  - the largest frame each channel takes (ZeroMQ disconnects a peer that sends more, before it is held
     *    in memory): shell carries pickles (PYC_MAX_MESSAGE_BYTES, default 4 GiB and 256 MiB), the others
     *    small messages;
     *  - inbound queues of 1000 messages (ZeroMQ's default; a full queue stops reading from that peer,
     *    which a pipelining client feels as back-pressure, never as loss);
     *  - replies and iopub queue without a bound for a client that reads (a pipelining client must see
     *    every busy and idle), except iopub for a subscriber that stops reading, past PYC_IOPUB_HWM
     *    messages (default 100000), and the heartbeat's echoes past 1000.  */
    int64_t maxmsg = chan == PYC_CHAN_SHELL ? srv->max_message : chan == PYC_CHAN_HB ? 1024
                   : chan == PYC_CHAN_IOPUB ? 4096 : (int64_t)PYC_SERVER_MAX_DICT;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (chan == PYC_CHAN_IOPUB)
        zmq_setsockopt(s, ZMQ_SNDHWM, &srv->iopub_hwm, sizeof srv->iopub_hwm);
    else if (chan != PYC_CHAN_HB)
        zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    if (type == ZMQ_ROUTER) {
        /* A reply to a client that went away is dropped, not an error for the next one. */
        zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    }
    if (pyc_connfile_curve(cf) && pyc_zap_secure(s, cf, chan_names[chan], err) < 0)
        return -1;
    if (pyc_connfile_endpoint(cf, chan, ep, sizeof ep) < 0)
        return pyc_error_set(err, "%s endpoint is too long", chan_names[chan]);
    if (zmq_bind(s, ep) < 0)
        return pyc_error_set(err, "cannot bind the %s channel to %s: %s", chan_names[chan], ep,
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
    static const int types[PYC_CHAN_COUNT] = {ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_ROUTER};
    pyc_server_t *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    srv->auth = auth;
    srv->max_message = (int64_t)(PYC_SERVER_MAX_BUFFERS + PYC_SERVER_MAX_DICT);
    srv->iopub_hwm = 100000;
    const char *v = getenv("PYC_MAX_MESSAGE_BYTES");
    if (v != NULL && v[0] != '\0' && strtoll(v, NULL, 10) > 0)
        srv->max_message = strtoll(v, NULL, 10);
    v = getenv("PYC_IOPUB_HWM");
    if (v != NULL && v[0] != '\0' && strtol(v, NULL, 10) > 0)
        srv->iopub_hwm = (int)strtol(v, NULL, 10);
    srv->io.send = io_send;
    srv->io.next_pending = io_next_pending;
    srv->io.recv_stdin = io_recv_stdin;
    pthread_mutex_init(&srv->iopub_lock, NULL);
    srv->control_q.efd = srv->inbox_q.efd = -1;
    if (queue_init(&srv->control_q) < 0 || queue_init(&srv->inbox_q) < 0) {
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
        if (bind_channel(srv, cf, c, types[c], err) < 0)
            goto fail;
    }
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
    pyc_server_destroy(&srv);
    return NULL;
}

int
pyc_server_start(pyc_server_t *srv, pyc_control_fn on_control, void *ctx, pyc_error_t *err)
{
    srv->on_control = on_control;
    srv->control_ctx = ctx;
    if (pthread_create(&srv->th_control, NULL, control_main, srv) != 0)
        return pyc_error_set(err, "cannot start the control thread");
    if (pthread_create(&srv->th_hb, NULL, hb_main, srv) != 0) {
        srv->stop = 1;
        queue_signal(&srv->control_q);
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

pyc_msg_t *
pyc_server_next(pyc_server_t *srv, int timeout_ms, int *chan)
{
    bool fd_ready;
    return pyc_server_next_fd(srv, timeout_ms, -1, chan, &fd_ready);
}

pyc_msg_t *
pyc_server_next_fd(pyc_server_t *srv, int timeout_ms, int fd, int *chan, bool *fd_ready)
{
    *fd_ready = false;
    for (;;) {
        qitem_t *it = queue_pop(&srv->inbox_q);
        if (it != NULL) {
            pyc_msg_t *msg = it->msg;
            it->msg = NULL;
            *chan = it->chan;
            qitem_free(it);
            return msg;
        }
        zmq_pollitem_t items[3] = {
            {.fd = srv->inbox_q.efd, .events = ZMQ_POLLIN},
            {.socket = srv->sock[PYC_CHAN_SHELL], .events = ZMQ_POLLIN},
            {.fd = fd, .events = ZMQ_POLLIN},
        };
        int rc = zmq_poll(items, fd >= 0 ? 3 : 2, timeout_ms);
        if (rc < 0 && zmq_errno() == EINTR)
            return NULL;
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
            continue;
        }
        if (items[1].revents & ZMQ_POLLIN) {
            pyc_msg_t *msg = recv_msg(srv, PYC_CHAN_SHELL);
            if (msg != NULL) {
                *chan = PYC_CHAN_SHELL;
                return msg;
            }
        }
    }
}

void
pyc_server_wake(pyc_server_t *srv)
{
    queue_signal(&srv->inbox_q);
}

void
pyc_server_close(pyc_server_t *srv)
{
    if (srv == NULL || srv->closed)
        return;
    srv->closed = 1;
    if (srv->started) {
        srv->stop = 1;
        queue_signal(&srv->control_q);
        pthread_join(srv->th_control, NULL);
    }
    if (srv->started) {
        zmq_send(srv->hb_ctl[0], "TERMINATE", 9, 0);
        pthread_join(srv->th_hb, NULL);
    }
    pthread_mutex_lock(&srv->iopub_lock);
    srv->stop_iopub = 1;         /* a Python thread still printing now finds the socket gone */
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        if (srv->sock[c] != NULL)
            zmq_close(srv->sock[c]);
        srv->sock[c] = NULL;
    }
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
    queue_clear(&srv->control_q);
    queue_clear(&srv->inbox_q);
    pthread_mutex_destroy(&srv->iopub_lock);
    free(srv);
    *srv_p = NULL;
}
