/*
 * client.c -- the synchronous Jupyter client of the `pyc` command; see client.h.
 *
 * Costs that shaped it (pyc run, 2-core VM): the whole command is a few milliseconds, most of it process
 * start and TCP set-up, so the client makes no thread of its own, sends dicts with zmq_send (one copy of a
 * few hundred bytes) and buffers without a copy, and waits with zmq_poll.  The iopub handshake
 * (pyc_client_sync_iopub) re-asks as soon as the control reply has come and its iopub status has not,
 * instead of sleeping a fixed interval: the subscription of a fresh SUB socket is usually live within a
 * millisecond, and a fixed 100 ms retry would triple the time of `pyc run`.
 */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "buf.h"
#include "session.h"

/* How often a wait looks at the watched process. */
#define WATCH_SLICE_MS 250

/* After the control reply to the handshake's kernel_info has come, how long its iopub status may lag before
 * the subscription counts as not yet live and the request is sent again. */
#define SYNC_LAG_MS 3

/* Signatures remembered to refuse a replayed message (auth.h). */
#define CLIENT_REPLAY_WINDOW 256

static void *zctx;

struct pyc_client {
    void *sock[PYC_CHAN_COUNT];  /* shell, iopub, stdin, control; no heartbeat socket here */
    pyc_auth_t *auth;
    char session[PYC_MSG_ID_LEN + 1];
    char *username_json;         /* the user name as a JSON string, quotes included */
    long watch_pid;
    unsigned long long watch_start;
};

static const char *const chan_names[PYC_CHAN_COUNT] = {"shell", "iopub", "stdin", "control", "hb"};

static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *
context(pyc_error_t *err)
{
    if (zctx == NULL) {
        zctx = zmq_ctx_new();
        if (zctx == NULL)
            pyc_error_set(err, "cannot start ZeroMQ: %s", zmq_strerror(errno));
    }
    return zctx;
}

void
pyc_client_shutdown(void)
{
    if (zctx != NULL) {
        zmq_ctx_term(zctx);
        zctx = NULL;
    }
}

static void *
open_socket(const pyc_connfile_t *cf, int chan, int type, const char *identity, pyc_error_t *err)
{
    char ep[512];
    int zero = 0;
    void *s = zmq_socket(zctx, type);
    if (s == NULL) {
        pyc_error_set(err, "cannot make the %s socket: %s", chan_names[chan], zmq_strerror(errno));
        return NULL;
    }
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (type == ZMQ_SUB) {
        /* No high-water mark: output that comes faster than we print it waits here instead of being dropped. */
        zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero);
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    }
    if (identity != NULL)
        zmq_setsockopt(s, ZMQ_ROUTING_ID, identity, strlen(identity));
    if (pyc_connfile_endpoint(cf, chan, ep, sizeof ep) < 0 || cf->ports[chan] == 0) {
        pyc_error_set(err, "the connection has no usable %s endpoint", chan_names[chan]);
        zmq_close(s);
        return NULL;
    }
    if (zmq_connect(s, ep) < 0) {
        pyc_error_set(err, "cannot connect to %s: %s", ep, zmq_strerror(errno));
        zmq_close(s);
        return NULL;
    }
    return s;
}

pyc_client_t *
pyc_client_new(const pyc_connfile_t *cf, bool with_stdin, pyc_error_t *err)
{
    static const int types[PYC_CHAN_COUNT] = {ZMQ_DEALER, ZMQ_SUB, ZMQ_DEALER, ZMQ_DEALER, 0};
    if (context(err) == NULL)
        return NULL;
    pyc_client_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_set(err, "out of memory");
        return NULL;
    }
    pyc_msg_new_id(self->session);
    /* A short-lived client sees few messages: a small replay window saves touching the default's 96 KB. */
    self->auth = pyc_auth_new(cf->signature_scheme, cf->key, cf->keylen, CLIENT_REPLAY_WINDOW, err);
    if (self->auth == NULL)
        goto fail;
    const char *user = getenv("USER");
    pyc_buf_t u;
    pyc_buf_init(&u, 4096);
    if (user == NULL || user[0] == '\0' || strlen(user) > 1000)
        user = "pyc";
    if (pyc_buf_add_json_string(&u, user, strlen(user)) < 0 || (self->username_json = pyc_buf_detach(&u, NULL)) == NULL) {
        pyc_buf_free(&u);
        pyc_error_set(err, "out of memory");
        goto fail;
    }
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        if (types[c] == 0 || (c == PYC_CHAN_STDIN && !with_stdin))
            continue;
        /* The DEALERs share one routing id, the session id, as jupyter_client's do: the kernel addresses an
         * input_request to the identity of the shell request that asked for input. */
        self->sock[c] = open_socket(cf, c, types[c], types[c] == ZMQ_DEALER ? self->session : NULL, err);
        if (self->sock[c] == NULL)
            goto fail;
    }
    return self;
fail:
    pyc_client_destroy(&self);
    return NULL;
}

void
pyc_client_destroy(pyc_client_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_client_t *self = *self_p;
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        if (self->sock[c] != NULL)
            zmq_close(self->sock[c]);
    }
    pyc_auth_destroy(&self->auth);
    free(self->username_json);
    free(self);
    *self_p = NULL;
}

void
pyc_client_watch(pyc_client_t *self, long pid, unsigned long long start)
{
    self->watch_pid = pid;
    self->watch_start = start;
}

/* ---- sending --------------------------------------------------------------------------------------------- */

static char *
dump(json_t *v)
{
    return v != NULL ? json_dumps(v, JSON_COMPACT) : strdup("{}");
}

int
pyc_client_send(pyc_client_t *self, int chan, const char *msg_type, json_t *content, json_t *metadata,
                json_t *parent, const pyc_frame_t *bufs, size_t nbufs, char *msg_id_out, pyc_error_t *err)
{
    pyc_buf_t header;
    char id[PYC_MSG_ID_LEN + 1], sig[PYC_AUTH_MAX_HEX + 1];
    char *dicts[3] = {NULL, NULL, NULL};
    int rc = -1;
    void *s = chan >= 0 && chan < PYC_CHAN_COUNT ? self->sock[chan] : NULL;

    if (s == NULL || chan == PYC_CHAN_IOPUB)
        return pyc_error_set(err, "cannot send on the %s channel", chan >= 0 && chan < PYC_CHAN_COUNT ? chan_names[chan] : "unknown");
    pyc_buf_init(&header, 1 << 16);
    if (pyc_msg_header(&header, msg_type, self->session, self->username_json, id) < 0 ||
        (dicts[0] = dump(parent)) == NULL || (dicts[1] = dump(metadata)) == NULL || (dicts[2] = dump(content)) == NULL) {
        pyc_error_set(err, "out of memory (or a string that is not UTF-8) making a %s", msg_type);
        goto out;
    }
    pyc_frame_t signed_parts[4] = {
        {header.data, header.len},
        {dicts[0], strlen(dicts[0])},
        {dicts[1], strlen(dicts[1])},
        {dicts[2], strlen(dicts[2])},
    };
    if (pyc_wire_sign(self->auth, signed_parts, sig) < 0) {
        pyc_error_set(err, "cannot sign a %s", msg_type);
        goto out;
    }
    /* A DEALER queues a whole multipart message or none of it, and the kernel may be anywhere: a send only
     * fails here when ZeroMQ itself fails. */
    if (zmq_send(s, PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN, ZMQ_SNDMORE) < 0 || zmq_send(s, sig, strlen(sig), ZMQ_SNDMORE) < 0)
        goto send_failed;
    for (int i = 0; i < 4; i++) {
        int more = i < 3 || nbufs > 0 ? ZMQ_SNDMORE : 0;
        if (zmq_send(s, signed_parts[i].data, signed_parts[i].size, more) < 0)
            goto send_failed;
    }
    for (size_t i = 0; i < nbufs; i++) {
        zmq_msg_t m;
        /* No free function: ZeroMQ takes the bytes as constant and reads them in place (see client.h). */
        if (zmq_msg_init_data(&m, (void *)bufs[i].data, bufs[i].size, NULL, NULL) < 0)
            goto send_failed;
        if (zmq_msg_send(&m, s, i + 1 < nbufs ? ZMQ_SNDMORE : 0) < 0) {
            zmq_msg_close(&m);
            goto send_failed;
        }
    }
    if (msg_id_out != NULL)
        memcpy(msg_id_out, id, sizeof id);
    rc = 0;
    goto out;
send_failed:
    pyc_error_set(err, "cannot send a %s on %s: %s", msg_type, chan_names[chan], zmq_strerror(errno));
out:
    pyc_buf_free(&header);
    for (int i = 0; i < 3; i++)
        free(dicts[i]);
    return rc;
}

/* ---- receiving ------------------------------------------------------------------------------------------- */

typedef struct frameset {
    size_t n;
    zmq_msg_t msgs[];
} frameset_t;

static void
frameset_free(void *p)
{
    frameset_t *fs = p;
    for (size_t i = 0; i < fs->n; i++)
        zmq_msg_close(&fs->msgs[i]);
    free(fs);
}

/* Receives the waiting multipart message of socket s and decodes it.  Returns 1 with *out, 0 when the message
 * was dropped (with a line on stderr), -1 with err on a socket error. */
static int
recv_one(pyc_client_t *self, int chan, pyc_msg_t **out, pyc_error_t *err)
{
    void *s = self->sock[chan];
    size_t cap = 8;
    frameset_t *fs = malloc(sizeof *fs + cap * sizeof(zmq_msg_t));
    const char *why = NULL;
    int more = 1;

    *out = NULL;
    if (fs == NULL)
        return pyc_error_set(err, "out of memory");
    fs->n = 0;
    while (more) {
        if (fs->n == cap) {
            frameset_t *bigger = cap < PYC_WIRE_MAX_FRAMES ? realloc(fs, sizeof *fs + cap * 2 * sizeof(zmq_msg_t)) : NULL;
            if (bigger == NULL) {
                why = cap < PYC_WIRE_MAX_FRAMES ? "out of memory" : "too many frames";
                zmq_msg_t skip;
                zmq_msg_init(&skip);
                while (zmq_msg_recv(&skip, s, 0) >= 0 && zmq_msg_more(&skip))
                    ;
                zmq_msg_close(&skip);
                break;
            }
            fs = bigger;
            cap *= 2;
        }
        zmq_msg_init(&fs->msgs[fs->n]);
        if (zmq_msg_recv(&fs->msgs[fs->n], s, fs->n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            int e = errno;
            zmq_msg_close(&fs->msgs[fs->n]);
            if (fs->n == 0 && (e == EAGAIN || e == EINTR)) {
                frameset_free(fs);
                return 0;
            }
            frameset_free(fs);
            return pyc_error_set(err, "cannot receive on %s: %s", chan_names[chan], zmq_strerror(e));
        }
        more = zmq_msg_more(&fs->msgs[fs->n]);
        fs->n++;
    }
    pyc_frame_t *views = why == NULL ? malloc(fs->n * sizeof *views) : NULL;
    if (why == NULL && views == NULL)
        why = "out of memory";
    if (why == NULL) {
        for (size_t i = 0; i < fs->n; i++) {
            views[i].data = zmq_msg_data(&fs->msgs[i]);
            views[i].size = zmq_msg_size(&fs->msgs[i]);
        }
        pyc_error_t derr;
        if (pyc_wire_decode(views, fs->n, self->auth, out, &derr) < 0)
            fprintf(stderr, "pyc: dropped a message on %s: %s\n", chan_names[chan], derr.text);
        free(views);
    } else {
        fprintf(stderr, "pyc: dropped a message on %s: %s\n", chan_names[chan], why);
    }
    if (*out == NULL) {
        frameset_free(fs);
        return 0;
    }
    pyc_msg_set_owner(*out, fs, frameset_free);
    return 1;
}

int
pyc_client_recv(pyc_client_t *self, int timeout_ms, pyc_msg_t **out, int *chan, pyc_error_t *err)
{
    /* iopub first: a reply is worth less to the caller than the output that came before it. */
    static const int order[] = {PYC_CHAN_IOPUB, PYC_CHAN_SHELL, PYC_CHAN_CONTROL, PYC_CHAN_STDIN};
    zmq_pollitem_t items[4];
    int chans[4], n = 0;
    double deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;

    *out = NULL;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (self->sock[order[i]] == NULL)
            continue;
        items[n] = (zmq_pollitem_t){.socket = self->sock[order[i]], .events = ZMQ_POLLIN};
        chans[n++] = order[i];
    }
    for (;;) {
        long wait = -1;
        if (timeout_ms >= 0) {
            double left = deadline - now_ms();
            wait = left > 0 ? (long)(left + 0.999) : 0;
        }
        if (self->watch_pid > 0 && (wait < 0 || wait > WATCH_SLICE_MS))
            wait = WATCH_SLICE_MS;
        int r = zmq_poll(items, n, wait);
        if (r < 0) {
            if (errno == EINTR)
                return PYC_RECV_SIGNAL;
            return pyc_error_set(err, "cannot wait for the kernel: %s", zmq_strerror(errno));
        }
        for (int i = 0; i < n && r > 0; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            int got = recv_one(self, chans[i], out, err);
            if (got < 0)
                return PYC_RECV_ERROR;
            if (got > 0) {
                *chan = chans[i];
                return PYC_RECV_MSG;
            }
        }
        if (self->watch_pid > 0 && !pyc_proc_is(self->watch_pid, self->watch_start)) {
            pyc_error_set(err, "the kernel (pid %ld) is gone", self->watch_pid);
            return PYC_RECV_ERROR;
        }
        if (timeout_ms >= 0 && now_ms() >= deadline)
            return PYC_RECV_TIMEOUT;
    }
}

bool
pyc_client_is_child_of(const pyc_msg_t *msg, const char *id)
{
    json_t *v = json_object_get(msg->parent_header, "msg_id");
    return json_is_string(v) && strcmp(json_string_value(v), id) == 0;
}

int
pyc_client_sync_iopub(pyc_client_t *self, int timeout_ms, pyc_error_t *err)
{
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        char id[PYC_MSG_ID_LEN + 1];
        if (pyc_client_send(self, PYC_CHAN_CONTROL, "kernel_info_request", NULL, NULL, NULL, NULL, 0, id, err) < 0)
            return PYC_RECV_ERROR;
        double sent = now_ms(), replied = 0;
        for (;;) {
            double t = now_ms(), until = replied > 0 ? replied + SYNC_LAG_MS : sent + 100;
            if (until > deadline)
                until = deadline;
            if (t >= until)
                break;
            pyc_msg_t *m;
            int chan;
            int r = pyc_client_recv(self, (int)(until - t + 0.999), &m, &chan, err);
            if (r != PYC_RECV_MSG) {
                if (r == PYC_RECV_TIMEOUT)
                    continue;
                return r;
            }
            if (chan == PYC_CHAN_IOPUB) {
                pyc_msg_destroy(&m);
                return PYC_RECV_MSG;
            }
            if (chan == PYC_CHAN_CONTROL && pyc_client_is_child_of(m, id))
                replied = now_ms();
            pyc_msg_destroy(&m);
        }
        if (now_ms() >= deadline)
            return PYC_RECV_TIMEOUT;
    }
}

int
pyc_client_request(pyc_client_t *self, int chan, const char *msg_type, json_t *content, int timeout_ms,
                   pyc_msg_t **reply, pyc_error_t *err)
{
    char id[PYC_MSG_ID_LEN + 1];
    double deadline = now_ms() + timeout_ms;
    *reply = NULL;
    if (pyc_client_send(self, chan, msg_type, content, NULL, NULL, NULL, 0, id, err) < 0)
        return PYC_RECV_ERROR;
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0)
            return PYC_RECV_TIMEOUT;
        pyc_msg_t *m;
        int c;
        int r = pyc_client_recv(self, (int)(left + 0.999), &m, &c, err);
        if (r != PYC_RECV_MSG)
            return r;
        if (c == chan && pyc_client_is_child_of(m, id)) {
            *reply = m;
            return PYC_RECV_MSG;
        }
        pyc_msg_destroy(&m);
    }
}

/* ---- heartbeat ------------------------------------------------------------------------------------------- */

int
pyc_client_heartbeat(const pyc_connfile_t *const *cfs, size_t n, int timeout_ms, bool *alive, pyc_error_t *err)
{
    if (n == 0)
        return 0;
    if (context(err) == NULL)
        return -1;
    void **socks = calloc(n, sizeof *socks);
    zmq_pollitem_t *items = calloc(n, sizeof *items);
    int rc = -1;
    if (socks == NULL || items == NULL) {
        pyc_error_set(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        alive[i] = false;
        socks[i] = open_socket(cfs[i], PYC_CHAN_HB, ZMQ_REQ, NULL, NULL);
        if (socks[i] != NULL && zmq_send(socks[i], "ping", 4, ZMQ_DONTWAIT) < 0 && errno != EAGAIN) {
            zmq_close(socks[i]);
            socks[i] = NULL;
        }
    }
    double deadline = now_ms() + timeout_ms;
    size_t waiting = 0;
    for (size_t i = 0; i < n; i++)
        waiting += socks[i] != NULL;
    size_t *which = calloc(n, sizeof *which);
    if (which == NULL) {
        pyc_error_set(err, "out of memory");
        goto out;
    }
    while (waiting > 0) {
        double left = deadline - now_ms();
        if (left <= 0)
            break;
        int k = 0;
        for (size_t i = 0; i < n; i++) {
            if (socks[i] == NULL || alive[i])
                continue;
            items[k] = (zmq_pollitem_t){.socket = socks[i], .events = ZMQ_POLLIN};
            which[k++] = i;
        }
        int r = zmq_poll(items, k, (long)(left + 0.999));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int j = 0; j < k; j++) {
            char echo[16];
            if ((items[j].revents & ZMQ_POLLIN) && zmq_recv(socks[which[j]], echo, sizeof echo, ZMQ_DONTWAIT) >= 0) {
                alive[which[j]] = true;
                waiting--;
            }
        }
    }
    free(which);
    rc = 0;
out:
    if (socks != NULL) {
        for (size_t i = 0; i < n; i++) {
            if (socks[i] != NULL)
                zmq_close(socks[i]);
        }
    }
    free(socks);
    free(items);
    return rc;
}
