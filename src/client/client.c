/*
 * client.c -- the synchronous Jupyter client of the `pyc` command; see client.h.
 *
 * Costs that shaped it (pyc run, 2-core VM): the whole command is a few milliseconds, most of it process
 * start and TCP set-up, so the client speaks ZMTP itself (zmtp.h) instead of linking libzmq, whose loading
 * and I/O threads cost 3-4 ms of every run; it makes no thread, copies the few hundred bytes of a message's
 * dicts once and its buffers never, and waits in one poll(2) over all its connections.  The iopub handshake
 * (pyc_client_sync_iopub) re-asks as soon as the control reply has come and its iopub status has not,
 * instead of sleeping a fixed interval: the subscription of a fresh SUB socket is usually live within a
 * millisecond, and a fixed 100 ms retry would triple the time of `pyc run`.
 *
 * The heartbeat watch (pyc_client_watch_heartbeat) costs a short wait nothing: its REQ connection is opened
 * only once the client has waited HB_START_S in all without a sign of life from the kernel, so a `pyc run` of a
 * few milliseconds never makes it.  Its clock counts only the time spent waiting inside pyc_client_recv (the
 * `waited` field), not the time between waits (attach's prompt), so that a ping's answer that sat in the
 * socket while nobody was polling is read before the ping counts as unanswered.  A sign of life is any
 * message that decodes or a heartbeat echo; a ping goes out HB_START_S after the last one, again every
 * HB_RESEND_S while unanswered (a lost connection drops what it had half written), and the wait fails when
 * the silence passes HB_START_S plus the caller's limit.  A kernel whose heartbeat answers but which sent
 * nothing that verifies is asked kernel_info on control (the probe; pyc's control thread and ipykernel's
 * answer it while a cell runs): no answer within the same limit means it drops what we sign.
 */
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "session.h"
#include "zmtp.h"

/* How much longer than asked a poll may take before the difference counts as this process having been stopped
 * or starved rather than as time the kernel was silent (the heartbeat watch). */
#define WAIT_SLACK_S 0.5

/* How often a wait looks at the watched process. */
#define WATCH_SLICE_MS 250

/* The heartbeat watch (see the top of this file): the first ping after HB_START_S of waiting without a sign
 * of life, and again every HB_RESEND_S while unanswered. */
#define HB_START_S 1.0
#define HB_RESEND_S 1.0

/* After the control reply to the handshake's kernel_info has come, how long its iopub status may lag before
 * the subscription counts as not yet live and the request is sent again; and how long the handshake waits
 * for that reply before asking again. */
#define SYNC_LAG_S 0.003
#define SYNC_RETRY_S 0.1

/* Signatures remembered to refuse a replayed message (auth.h). */
#define CLIENT_REPLAY_WINDOW 256

/* The most one received message may hold: the kernel's largest pickle transfer (PYC_PICKLE_MAX_BYTES, default
 * 4 GiB, read from the same variable) and room for the JSON frames beside it, so that a kernel -- or whatever
 * answers on its port -- cannot make `pyc` ask for more memory than a transfer may take. */
#define CLIENT_MAX_JSON ((size_t)256 << 20)

static size_t
max_message(void)
{
    size_t pickle = (size_t)4 << 30;
    const char *v = getenv("PYC_PICKLE_MAX_BYTES");
    char *end;
    if (v != NULL && v[0] != '\0') {
        unsigned long long n = strtoull(v, &end, 10);
        if (*end == '\0' && n > 0)
            pickle = (size_t)n;
    }
    return pickle + 4 * CLIENT_MAX_JSON;
}

struct pyc_client {
    pyc_zmtp_t *conn[PYC_CHAN_COUNT];  /* shell, iopub, stdin, control; no heartbeat connection here */
    pyc_auth_t *auth;
    char session[PYC_MSG_ID_LEN + 1];
    char *username_json;         /* the user name as a JSON string, quotes included */
    long watch_pid;
    unsigned long long watch_start;
    /* The heartbeat watch (pyc_client_watch_heartbeat); times are in `waited` seconds. */
    int hb_silence_ms;           /* 0: off */
    char hb_endpoint[512];       /* where the heartbeat is ("" when the connection file names none) */
    bool hb_curve;
    pyc_zmtp_keys_t hb_keys;
    pyc_zmtp_t *hb;              /* the REQ connection, made at the first ping */
    double waited;               /* seconds spent waiting inside pyc_client_recv, in all */
    double life_at;              /* `waited` at the last sign of life (a message that decoded, an echo) */
    double ping_at;              /* `waited` when a ping was last tried */
    bool key_ok;                 /* a message whose signature verified has come: the key is right */
    bool probe_out;              /* the key probe (kernel_info_request on control) was sent */
    double probe_at;
    bool echo_since_probe;       /* the heartbeat answered after the probe went out */
    char probe_id[PYC_MSG_ID_LEN + 1];
    bool watch_gone;             /* the watched process was seen gone: what it sent is being read to the end */
};

static const char *const chan_names[PYC_CHAN_COUNT] = {"shell", "iopub", "stdin", "control", "hb"};

/* The endpoint of cf's channel chan into ep (cap bytes) and, for a CURVE kernel, the keys to use.  Returns 0,
 * or -1 with err. */
static int
conn_params(const pyc_connfile_t *cf, int chan, char *ep, size_t cap, pyc_zmtp_keys_t *keys, pyc_error_t *err)
{
    if (pyc_connfile_endpoint(cf, chan, ep, cap) < 0 || cf->ports[chan] == 0)
        return pyc_error_set(err, "the connection has no usable %s endpoint", chan_names[chan]);
    /* A CURVE kernel: the connection file's key pair is ours too (the Jupyter convention), its public key the
     * server's. */
    if (pyc_connfile_curve(cf)) {
        if (pyc_z85_key(cf->curve_publickey, strlen(cf->curve_publickey), keys->server, "curve_publickey", err) < 0 ||
            pyc_z85_key(cf->curve_secretkey, strlen(cf->curve_secretkey), keys->secret_key, "curve_secretkey", err) < 0)
            return -1;
        memcpy(keys->public_key, keys->server, sizeof keys->public_key);
    }
    return 0;
}

static pyc_zmtp_t *
open_conn(const pyc_connfile_t *cf, int chan, int type, const char *identity, pyc_error_t *err)
{
    char ep[512];
    pyc_error_t zerr;
    pyc_zmtp_keys_t keys;
    if (conn_params(cf, chan, ep, sizeof ep, &keys, err) < 0)
        return NULL;
    pyc_zmtp_t *c = pyc_zmtp_new_curve(ep, type, identity, max_message(), PYC_WIRE_MAX_FRAMES,
                                       pyc_connfile_curve(cf) ? &keys : NULL, &zerr);
    if (c == NULL)
        pyc_error_set(err, "cannot open the %s channel: %s", chan_names[chan], zerr.text);
    return c;
}

pyc_client_t *
pyc_client_new(const pyc_connfile_t *cf, bool with_stdin, pyc_error_t *err)
{
    static const int types[PYC_CHAN_COUNT] = {PYC_ZMTP_DEALER, PYC_ZMTP_SUB, PYC_ZMTP_DEALER, PYC_ZMTP_DEALER, -1};
    pyc_client_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
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
    if (pyc_buf_add_json_string(&u, user, strlen(user)) < 0 ||
        (self->username_json = pyc_buf_detach(&u, NULL)) == NULL) {
        pyc_buf_free(&u);
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto fail;
    }
    for (int c = 0; c < PYC_CHAN_COUNT; c++) {
        if (types[c] < 0 || (c == PYC_CHAN_STDIN && !with_stdin))
            continue;
        /* The DEALERs share one routing id, the session id, as jupyter_client's do: the kernel addresses an
         * input_request to the identity of the shell request that asked for input. */
        self->conn[c] = open_conn(cf, c, types[c], types[c] == PYC_ZMTP_DEALER ? self->session : NULL, err);
        if (self->conn[c] == NULL)
            goto fail;
    }
    /* Where the heartbeat is, for the watch (its connection is made only when a wait grows long). */
    self->hb_curve = pyc_connfile_curve(cf);
    if (conn_params(cf, PYC_CHAN_HB, self->hb_endpoint, sizeof self->hb_endpoint, &self->hb_keys, NULL) < 0)
        self->hb_endpoint[0] = '\0';
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
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        pyc_zmtp_destroy(&self->conn[c]);
    pyc_zmtp_destroy(&self->hb);
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
    self->watch_gone = false;
}

long
pyc_client_watched_pid(const pyc_client_t *self)
{
    return self->watch_pid;
}

void
pyc_client_watch_heartbeat(pyc_client_t *self, int silence_ms)
{
    self->hb_silence_ms = silence_ms > 0 && self->hb_endpoint[0] != '\0' ? silence_ms : 0;
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
    pyc_error_t zerr;
    int rc = -1;
    pyc_zmtp_t *c = chan >= 0 && chan < PYC_CHAN_COUNT ? self->conn[chan] : NULL;

    if (c == NULL || chan == PYC_CHAN_IOPUB)
        return pyc_error_set(err, "cannot send on the %s channel",
                             chan >= 0 && chan < PYC_CHAN_COUNT ? chan_names[chan] : "unknown");
    pyc_buf_init(&header, 1 << 16);
    if (pyc_msg_header(&header, msg_type, self->session, self->username_json, id) < 0 ||
        (dicts[0] = dump(parent)) == NULL || (dicts[1] = dump(metadata)) == NULL ||
        (dicts[2] = dump(content)) == NULL) {
        pyc_error_set(err, "out of memory (or a string that is not UTF-8) making a %s", msg_type);
        goto out;
    }
    pyc_frame_t parts[6] = {
        {PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN},
        {sig, 0},
        {header.data, header.len},
        {dicts[0], strlen(dicts[0])},
        {dicts[1], strlen(dicts[1])},
        {dicts[2], strlen(dicts[2])},
    };
    if (pyc_wire_sign(self->auth, parts + 2, sig) < 0) {
        pyc_error_set(err, "cannot sign a %s", msg_type);
        goto out;
    }
    parts[1].size = strlen(sig);
    /* The dicts are copied into the connection's queue; the buffers are written from the caller's memory
     * (client.h).  The kernel may be anywhere: a send only fails when memory runs out or the connection has
     * failed for good. */
    if (pyc_zmtp_send(c, parts, 6, nbufs > 0 ? PYC_ZMTP_MORE : 0, &zerr) < 0 ||
        (nbufs > 0 && pyc_zmtp_send(c, bufs, nbufs, PYC_ZMTP_BORROW, &zerr) < 0)) {
        pyc_error_set(err, "cannot send a %s on %s: %s", msg_type, chan_names[chan], zerr.text);
        goto out;
    }
    if (msg_id_out != NULL)
        memcpy(msg_id_out, id, sizeof id);
    rc = 0;
out:
    pyc_buf_free(&header);
    for (int i = 0; i < 3; i++)
        free(dicts[i]);
    return rc;
}

/* ---- receiving ------------------------------------------------------------------------------------------- */

/* iopub first: a reply is worth less to the caller than the output that came before it. */
static const int recv_order[] = {PYC_CHAN_IOPUB, PYC_CHAN_SHELL, PYC_CHAN_CONTROL, PYC_CHAN_STDIN};

/* The read end of the process's signal pipe (pyc_client_set_signal_fd), or -1. */
static int signal_fd = -1;

void
pyc_client_set_signal_fd(int fd)
{
    signal_fd = fd;
}

/* Empties the signal pipe; true when it held anything (a signal came). */
static bool
signal_drain(void)
{
    char buf[64];
    bool any = false;
    while (signal_fd >= 0 && read(signal_fd, buf, sizeof buf) > 0)
        any = true;
    return any;
}
#define N_RECV (sizeof recv_order / sizeof recv_order[0])

/* The sentence of a wait that the kernel's signatures (or its silence towards ours) ended. */
#define KEY_DIFFERS "the kernel ignores our messages: the session file's key is probably not the kernel's"

/* Decodes the first received message that decodes, in channel order.  Returns 1 with *out and *chan, 0 when
 * none waits, or -1 with err (PYC_EAUTH) when a message's signature does not verify: nobody but the kernel
 * can send on these connections, so it signs with another key, and it drops everything we send as well.
 * Any other message that fails to decode is dropped with a line on stderr.  The reply to the key probe is
 * the client's own and is dropped here. */
static int
deliver(pyc_client_t *self, pyc_msg_t **out, int *chan, pyc_error_t *err)
{
    for (size_t i = 0; i < N_RECV; i++) {
        int c = recv_order[i];
        pyc_zmtp_msg_t *zm;
        if (self->conn[c] == NULL)
            continue;
        while ((zm = pyc_zmtp_recv(self->conn[c])) != NULL) {
            pyc_error_t derr;
            if (pyc_wire_decode(zm->frames, zm->n, self->auth, out, &derr) < 0) {
                pyc_zmtp_msg_destroy(&zm);
                if (derr.code == PYC_EAUTH)
                    return pyc_error_code(err, PYC_EAUTH, "the kernel's messages are not signed with our key: the "
                                          "session file's key is probably not the kernel's (a message on %s: %s)",
                                          chan_names[c], derr.text);
                fprintf(stderr, "pyc: dropped a message on %s: %s\n", chan_names[c], derr.text);
                continue;
            }
            pyc_msg_set_owner(*out, zm, pyc_zmtp_msg_free);
            self->key_ok = true;
            self->life_at = self->waited;
            if (self->probe_out && c == PYC_CHAN_CONTROL && pyc_client_is_child_of(*out, self->probe_id)) {
                pyc_msg_destroy(out);
                continue;
            }
            *chan = c;
            return 1;
        }
    }
    return 0;
}

/* Milliseconds until the heartbeat watch has something to do (a ping, a verdict), or -1 when it is off. */
static long
hb_due_ms(const pyc_client_t *self)
{
    if (self->hb_silence_ms <= 0)
        return -1;
    double silence = self->hb_silence_ms / 1e3, quiet = self->waited - self->life_at, due;
    if (quiet < HB_START_S)
        due = HB_START_S - quiet;
    else {
        due = HB_START_S + silence - quiet;
        /* (a ping is due at once when none was tried since the last sign of life: hb_step tries it now) */
        double resend = self->ping_at > self->life_at ? self->ping_at + HB_RESEND_S - self->waited : 0;
        if (resend < due)
            due = resend;
    }
    if (self->probe_out && !self->key_ok && self->echo_since_probe && self->probe_at + silence - self->waited < due)
        due = self->probe_at + silence - self->waited;
    return due > 0 ? (long)(due * 1e3 + 0.999) : 0;
}

/* Reads what the heartbeat connection has (revents from poll, 0 when it was not polled): an echo is a sign
 * of life.  A heartbeat that breaks the protocol is closed and opened again at the next ping. */
static void
hb_handle(pyc_client_t *self, short revents)
{
    pyc_zmtp_msg_t *m;
    if (self->hb == NULL)
        return;
    if (pyc_zmtp_handle(self->hb, revents, NULL) < 0) {
        pyc_zmtp_destroy(&self->hb);
        return;
    }
    while ((m = pyc_zmtp_recv(self->hb)) != NULL) {
        if (m->n >= 1 && m->frames[0].size == 0) {
            self->life_at = self->waited;
            if (self->probe_out)
                self->echo_since_probe = true;
        }
        pyc_zmtp_msg_destroy(&m);
    }
}

/* Does what the heartbeat watch has due (see the top of this file).  Returns 0, or -1 with err when the wait
 * must end: PYC_ETIMEDOUT (the heartbeat is silent) or PYC_EAUTH (it answers, but our messages are
 * dropped). */
static int
hb_step(pyc_client_t *self, pyc_error_t *err)
{
    static const pyc_frame_t ping[2] = {{"", 0}, {"ping", 4}};
    if (self->hb_silence_ms <= 0)
        return 0;
    double silence = self->hb_silence_ms / 1e3, quiet = self->waited - self->life_at;
    if (quiet < HB_START_S)
        return 0;
    if (quiet >= HB_START_S + silence) {
        if (self->watch_pid > 0)
            return pyc_error_code(err, PYC_ETIMEDOUT, "the kernel (pid %ld) does not answer its heartbeat: it is "
                                  "stopped or stuck (silent for %.1f s)", self->watch_pid, quiet);
        return pyc_error_code(err, PYC_ETIMEDOUT, "the kernel does not answer its heartbeat: it is stopped, stuck "
                              "or gone (silent for %.1f s)", quiet);
    }
    if (!self->key_ok && self->probe_out && self->echo_since_probe && self->waited - self->probe_at >= silence)
        return pyc_error_code(err, PYC_EAUTH, KEY_DIFFERS " (its heartbeat answers, but not one message we "
                              "signed in %.1f s)", self->waited - self->probe_at);
    if (self->ping_at <= self->life_at || self->waited - self->ping_at >= HB_RESEND_S) {
        /* A ping that cannot be made (no memory) is tried again at the next resend; meanwhile the silence
         * grows, as it should when nothing can be asked.  Extra echoes are harmless. */
        self->ping_at = self->waited;
        if (self->hb == NULL)
            self->hb = pyc_zmtp_new_curve(self->hb_endpoint, PYC_ZMTP_REQ, NULL, 4096, 4,
                                          self->hb_curve ? &self->hb_keys : NULL, NULL);
        if (self->hb != NULL)
            pyc_zmtp_send(self->hb, ping, 2, 0, NULL);
    }
    if (!self->key_ok && !self->probe_out &&
        pyc_client_send(self, PYC_CHAN_CONTROL, "kernel_info_request", NULL, NULL, NULL, NULL, 0, self->probe_id,
                        NULL) == 0) {
        self->probe_out = true;
        self->probe_at = self->waited;
        self->echo_since_probe = false;
    }
    return 0;
}

int
pyc_client_recv(pyc_client_t *self, int timeout_ms, pyc_msg_t **out, int *chan, pyc_error_t *err)
{
    double deadline = timeout_ms >= 0 ? pyc_now_s() + timeout_ms / 1e3 : 0, last = pyc_now_s();
    int d;

    *out = NULL;
    for (;;) {
        /* Messages already read come first: poll would not wake for bytes that are no longer in the socket. */
        if ((d = deliver(self, out, chan, err)) != 0)
            return d > 0 ? PYC_RECV_MSG : PYC_RECV_ERROR;
        long wait = -1, hb_wait = hb_due_ms(self);
        if (timeout_ms >= 0) {
            double left_ms = (deadline - pyc_now_s()) * 1e3;
            wait = left_ms > 0 ? (long)(left_ms + 0.999) : 0;
        }
        if (self->watch_pid > 0 && (wait < 0 || wait > WATCH_SLICE_MS))
            wait = WATCH_SLICE_MS;
        if (hb_wait >= 0 && (wait < 0 || hb_wait < wait))
            wait = hb_wait;
        if (self->watch_gone)
            wait = 0;
        struct pollfd pfd[N_RECV + 2];
        int at[N_RECV];
        nfds_t k = 0;
        for (size_t i = 0; i < N_RECV; i++) {
            pyc_zmtp_t *c = self->conn[recv_order[i]];
            at[i] = -1;
            if (c == NULL)
                continue;
            int fd = pyc_zmtp_fd(c), wake = pyc_zmtp_wake_ms(c);
            if (fd >= 0) {
                pfd[k] = (struct pollfd){.fd = fd, .events = pyc_zmtp_events(c)};
                at[i] = (int)k++;
            }
            if (wake >= 0 && (wait < 0 || wake < wait))
                wait = wake;
        }
        int hb_at = -1;
        if (self->hb != NULL) {
            int fd = pyc_zmtp_fd(self->hb), wake = pyc_zmtp_wake_ms(self->hb);
            if (fd >= 0) {
                pfd[k] = (struct pollfd){.fd = fd, .events = pyc_zmtp_events(self->hb)};
                hb_at = (int)k++;
            }
            if (wake >= 0 && (wait < 0 || wake < wait))
                wait = wake;
        }
        /* A signal that came before poll began would not interrupt it: the pipe stays readable instead. */
        nfds_t nsock = k;
        if (signal_fd >= 0)
            pfd[k++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
        int r = poll(pfd, k, wait > (long)1 << 30 ? 1 << 30 : (int)wait);
        double now = pyc_now_s(), step = now - last;
        last = now;
        if (wait >= 0 && step > wait / 1e3 + WAIT_SLACK_S) {
            /* Longer than poll was asked to wait: this process was stopped (Ctrl-Z, a suspended laptop) or
             * starved, and that time says nothing of the kernel.  Only the time asked counts, and the kernel
             * gets a fresh window of silence: a new ping must go unanswered before it is judged. */
            step = wait / 1e3;
            self->life_at = self->waited + step;
        }
        self->waited += step;
        if (r < 0) {
            if (errno == EINTR)
                return PYC_RECV_SIGNAL;
            return pyc_error_set(err, "cannot wait for the kernel: %s", strerror(errno));
        }
        if (k > nsock && (pfd[nsock].revents & POLLIN) && signal_drain())
            return PYC_RECV_SIGNAL;
        for (size_t i = 0; i < N_RECV; i++) {
            pyc_zmtp_t *c = self->conn[recv_order[i]];
            pyc_error_t zerr;
            if (c != NULL && pyc_zmtp_handle(c, at[i] >= 0 ? pfd[at[i]].revents : 0, &zerr) < 0) {
                pyc_error_set(err, "the kernel's %s channel: %s", chan_names[recv_order[i]], zerr.text);
                return PYC_RECV_ERROR;
            }
        }
        hb_handle(self, hb_at >= 0 ? pfd[hb_at].revents : 0);
        if ((d = deliver(self, out, chan, err)) != 0)
            return d > 0 ? PYC_RECV_MSG : PYC_RECV_ERROR;
        if (self->watch_pid > 0 && !pyc_proc_is(self->watch_pid, self->watch_start)) {
            /* Gone -- but what it sent before it died (a crashed kernel's error and reply) may have reached
             * our sockets after the poll above returned: one more look without waiting reads it, and only a
             * look that finds nothing more ends the wait. */
            if (!self->watch_gone) {
                self->watch_gone = true;
                continue;
            }
            pyc_error_code(err, PYC_EGONE, "the kernel (pid %ld) is gone", self->watch_pid);
            return PYC_RECV_ERROR;
        }
        if (hb_step(self, err) < 0)
            return PYC_RECV_ERROR;
        if (timeout_ms >= 0 && pyc_now_s() >= deadline)
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
    double deadline = pyc_now_s() + timeout_ms / 1e3;
    for (;;) {
        char id[PYC_MSG_ID_LEN + 1];
        if (pyc_client_send(self, PYC_CHAN_CONTROL, "kernel_info_request", NULL, NULL, NULL, NULL, 0, id, err) < 0)
            return PYC_RECV_ERROR;
        double sent = pyc_now_s(), replied = 0;
        for (;;) {
            double t = pyc_now_s(), until = replied > 0 ? replied + SYNC_LAG_S : sent + SYNC_RETRY_S;
            if (until > deadline)
                until = deadline;
            if (t >= until)
                break;
            pyc_msg_t *m;
            int chan;
            int r = pyc_client_recv(self, (int)((until - t) * 1e3 + 0.999), &m, &chan, err);
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
                replied = pyc_now_s();
            pyc_msg_destroy(&m);
        }
        if (pyc_now_s() >= deadline)
            return PYC_RECV_TIMEOUT;
    }
}

int
pyc_client_request(pyc_client_t *self, int chan, const char *msg_type, json_t *content, int timeout_ms,
                   pyc_msg_t **reply, pyc_error_t *err)
{
    char id[PYC_MSG_ID_LEN + 1];
    double deadline = pyc_now_s() + timeout_ms / 1e3;
    *reply = NULL;
    if (pyc_client_send(self, chan, msg_type, content, NULL, NULL, NULL, 0, id, err) < 0)
        return PYC_RECV_ERROR;
    for (;;) {
        double left_ms = (deadline - pyc_now_s()) * 1e3;
        if (left_ms <= 0)
            return PYC_RECV_TIMEOUT;
        pyc_msg_t *m;
        int c;
        int r = pyc_client_recv(self, (int)(left_ms + 0.999), &m, &c, err);
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
    /* REQ framing, as the REQ socket used before: an empty delimiter, then the ping; the kernel's ROUTER
     * echoes both. */
    static const pyc_frame_t ping[2] = {{"", 0}, {"ping", 4}};
    if (n == 0)
        return 0;
    pyc_zmtp_t **conns = calloc(n, sizeof *conns);
    struct pollfd *pfd = calloc(n, sizeof *pfd);
    size_t *which = calloc(n, sizeof *which);
    int rc = -1;
    if (conns == NULL || pfd == NULL || which == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto out;
    }
    size_t waiting = 0;
    for (size_t i = 0; i < n; i++) {
        alive[i] = false;
        conns[i] = open_conn(cfs[i], PYC_CHAN_HB, PYC_ZMTP_REQ, NULL, NULL);
        if (conns[i] != NULL && pyc_zmtp_send(conns[i], ping, 2, 0, NULL) < 0)
            pyc_zmtp_destroy(&conns[i]);
        waiting += conns[i] != NULL;
    }
    double deadline = pyc_now_s() + timeout_ms / 1e3;
    while (waiting > 0) {
        double left_ms = (deadline - pyc_now_s()) * 1e3;
        if (left_ms <= 0)
            break;
        long wait = (long)(left_ms + 0.999);
        nfds_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (conns[i] == NULL || alive[i])
                continue;
            int fd = pyc_zmtp_fd(conns[i]), wake = pyc_zmtp_wake_ms(conns[i]);
            if (fd >= 0) {
                pfd[k] = (struct pollfd){.fd = fd, .events = pyc_zmtp_events(conns[i])};
                which[k++] = i;
            }
            if (wake >= 0 && wake < wait)
                wait = wake;
        }
        if (poll(pfd, k, (int)wait) < 0 && errno != EINTR)
            break;
        for (size_t i = 0, j = 0; i < n; i++) {
            if (conns[i] == NULL || alive[i])
                continue;
            short revents = 0;
            if (j < k && which[j] == i)
                revents = pfd[j++].revents;
            if (pyc_zmtp_handle(conns[i], revents, NULL) < 0) {
                pyc_zmtp_destroy(&conns[i]);   /* it spoke nonsense: not alive */
                waiting--;
                continue;
            }
            pyc_zmtp_msg_t *m;
            while (!alive[i] && (m = pyc_zmtp_recv(conns[i])) != NULL) {
                if (m->n >= 1 && m->frames[0].size == 0) {
                    alive[i] = true;
                    waiting--;
                }
                pyc_zmtp_msg_destroy(&m);
            }
        }
    }
    rc = 0;
out:
    if (conns != NULL) {
        for (size_t i = 0; i < n; i++)
            pyc_zmtp_destroy(&conns[i]);
    }
    free(conns);
    free(pfd);
    free(which);
    return rc;
}
