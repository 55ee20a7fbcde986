/*
 * handover.c -- what crosses a restore's hand-over (README, "Time travel"; snapshot.c does the rest): the
 * answer to the request that asked for the restore, which the kernel that hands over holds back and the
 * restored kernel sends once the clients are back; the requests that reached the old process meanwhile,
 * which the restored kernel answers first; and the restored kernel's wait for its iopub subscribers.  Both
 * cross as the frames of their messages, in hex, within the state the old process sends the snapshot.
 */
#include "kernelint.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "clock.h"
#include "log.h"
#include "wire.h"

/* How long a restored kernel waits at most for its clients to come back: for as many iopub subscribers as
 * the replaced kernel had (a SUB socket subscribes again only once its owner polls it: a client that reads
 * only shell would hold every request up for this long), and for the peer of a held reply (ZeroMQ
 * reconnects it by itself within 0.1-0.2 s; a client that is gone for good holds the kernel up this long). */
#define SUBSCRIBERS_WAIT_S 1.0
#define RETURN_WAIT_S 5.0

/* ---- messages that cross a hand-over as frames (hex) ------------------------------------------------ */

/* Appends one frame to arr as hex; -1 when out of memory. */
static int
append_hex(json_t *arr, const void *data, size_t size)
{
    char *text = malloc(size * 2 + 1);
    if (text == NULL)
        return -1;
    pyc_hex_encode(data, size, text);
    int rc = json_array_append_new(arr, json_string(text));
    free(text);
    return rc;
}

static int
unhex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The frames of a JSON array of hex strings, as views into one block (returned, the caller's to free, and
 * *f_out too), or NULL when it is not such an array or memory ran out. */
static unsigned char *
unhex_frames(const json_t *frames, pyc_frame_t **f_out, size_t *n_out)
{
    size_t n = json_array_size(frames), total = 0;
    for (size_t i = 0; i < n; i++)
        total += json_string_length(json_array_get(frames, i)) / 2;
    pyc_frame_t *f = calloc(n > 0 ? n : 1, sizeof *f);
    unsigned char *block = malloc(total > 0 ? total : 1), *p = block;
    bool ok = f != NULL && block != NULL && n > 0;
    for (size_t i = 0; ok && i < n; i++) {
        const char *t = json_string_value(json_array_get(frames, i));
        size_t len = json_string_length(json_array_get(frames, i)) / 2;
        ok = t != NULL;
        f[i] = (pyc_frame_t){p, len};
        for (size_t j = 0; ok && j < len; j++) {
            int hi = unhex(t[2 * j]), lo = unhex(t[2 * j + 1]);
            ok = hi >= 0 && lo >= 0;
            *p++ = (unsigned char)(hi << 4 | lo);
        }
    }
    if (!ok) {
        free(f);
        free(block);
        return NULL;
    }
    *f_out = f;
    *n_out = n;
    return block;
}

/* ---- the answer to the request that asked for a restore ---------------------------------------------- */

/* The answer to the request that asked for a restore (its reply, its idle, and whatever the main thread
 * sends after them) is not sent by the kernel that hands over but by the restored one, once the clients are
 * back.  A client sends its next request only once it has that answer, so nothing it sends is on its way to
 * a socket that closes: the replaced kernel's sockets close while every client waits.  (Sending the answer
 * and closing a few milliseconds later lost nbclient's next cell now and then under load: it was written to
 * the old connection just before that closed.)  A client whose routing id libzmq made up (a 0 byte and 4
 * more) comes back under another one, where no reply could find it: its reply goes at once. */
bool
pyc__handover_holds(pyc_kernel_t *k, int chan, const char *msg_type, const pyc_frame_t *idents, size_t n_idents)
{
    /* The main thread's fields: read by it alone. */
    if (!pthread_equal(pthread_self(), k->main_thread) || (k->tt.restore_to <= 0 && !k->tt.holding))
        return false;
    if (!k->tt.holding) {
        if (chan != PYC_CHAN_SHELL && strcmp(msg_type, "status") != 0)
            return false;        /* the request's own output, before its answer: sent as usual */
        k->tt.holding = true;
    }
    return !(chan == PYC_CHAN_SHELL && n_idents > 0 && idents[0].size == 5 &&
             ((const unsigned char *)idents[0].data)[0] == 0);
}

int
pyc__handover_hold(pyc_kernel_t *k, int chan, pyc_outframe_t *f, size_t n)
{
    json_t *frames = json_array();
    int rc = frames != NULL ? 0 : -1;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && append_hex(frames, f[i].data, f[i].size) < 0)
            rc = -1;
        pyc_outframe_drop(&f[i]);
    }
    if (k->tt.held == NULL)
        k->tt.held = json_array();
    json_t *item = rc == 0 ? json_pack("{s:i, s:O}", "chan", chan, "frames", frames) : NULL;
    json_decref(frames);
    if (item != NULL && json_array_append_new(k->tt.held, item) == 0)
        return 0;
    pyc_log("restore: a message of the held answer could not be kept (out of memory); dropped");
    return -1;
}

/* Whether as many iopub subscribers as the replaced kernel had are back, or it is no use waiting longer. */
static bool
subscribers_back(pyc_kernel_t *k)
{
    if (k->tt.await_until <= 0)
        return true;
    if (atomic_load(&k->subscriptions) >= k->tt.await_subscribers || pyc_now_s() >= k->tt.await_until) {
        k->tt.await_until = 0;
        return true;
    }
    return false;
}

void
pyc__handover_await_subscribers(pyc_kernel_t *k)
{
    while (!subscribers_back(k)) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Sends the held answer (k->tt.held): in a restored kernel to clients that are coming back (an iopub message
 * once the subscribers are, a reply once its client is, each within its bound), or at once where no restore
 * happened. */
void
pyc__handover_send_held(pyc_kernel_t *k, bool returning)
{
    json_t *held = k->tt.held;
    k->tt.held = NULL;
    size_t i;
    json_t *item;
    json_array_foreach(held, i, item) {
        int chan = (int)json_integer_value(json_object_get(item, "chan"));
        pyc_frame_t *f = NULL;
        size_t n = 0;
        unsigned char *block = unhex_frames(json_object_get(item, "frames"), &f, &n);
        pyc_outframe_t *out = block != NULL ? calloc(n, sizeof *out) : NULL;
        if (out == NULL) {
            pyc_log("restore: a message of the held answer cannot be read; dropped");
            free(f);
            free(block);
            continue;
        }
        for (size_t j = 0; j < n; j++)
            out[j] = (pyc_outframe_t){f[j].data, f[j].size, NULL, NULL};   /* lent: the io copies them */
        if (returning && chan == PYC_CHAN_IOPUB)
            pyc__handover_await_subscribers(k);
        if (returning && chan == PYC_CHAN_SHELL && k->io->send_to_returning != NULL) {
            double left = k->tt.return_until - pyc_now_s();
            k->io->send_to_returning(k->io, chan, out, n, left > 0 ? (int)(left * 1000) : 0);
        } else {
            k->io->send(k->io, chan, out, n);
        }
        free(out);
        free(f);
        free(block);
    }
    json_decref(held);
}

/* ---- requests that reached the replaced kernel after it stopped taking them ------------------------- */

json_t *
pyc_kernel_take_pending(pyc_kernel_t *k)
{
    json_t *out = json_array();
    pyc_msg_t *m;
    /* Until the shell socket has been quiet for QUIET_MS (at most MAX_MS): a client that sends a burst of
     * requests has them all here, and none reaches a socket about to close. */
    enum { QUIET_MS = 5, MAX_MS = 100 };
    double start = pyc_now_s(), last = start;
    for (;;) {
        m = k->io->next_pending(k->io);
        if (m == NULL) {
            double now = pyc_now_s();
            if ((now - last) * 1000 >= QUIET_MS || (now - start) * 1000 >= MAX_MS)
                break;
            struct timespec ts = {0, 500 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        last = pyc_now_s();
        /* The frames as received (identities, delimiter, signature, the four parts, buffers): the restored
         * kernel checks and decodes them again with the same key. */
        size_t n = m->n_idents + 6 + m->n_buffers;
        json_t *frames = json_array();
        for (size_t i = 0; i < n && frames != NULL; i++) {
            if (append_hex(frames, m->idents[i].data, m->idents[i].size) < 0)
                break;
        }
        pyc_log("restore: %s %s came during the hand-over: the restored kernel answers it", m->msg_type, m->msg_id);
        json_array_append_new(out, frames);
        pyc_msg_destroy(&m);
    }
    return out;
}

pyc_msg_t *
pyc_kernel_next_forwarded(pyc_kernel_t *k)
{
    if (k->tt.held != NULL)
        pyc__handover_send_held(k, true);
    if (json_array_size(k->tt.forwarded) > 0) {
        /* Their senders reconnect by themselves, within 0.1-0.2 s (ZeroMQ's reconnect interval and its
         * jitter): a reply sent before would find no one to go to. */
        double wait = k->tt.forward_after - pyc_now_s();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    while (json_array_size(k->tt.forwarded) > 0) {
        json_t *frames = json_incref(json_array_get(k->tt.forwarded, 0));
        json_array_remove(k->tt.forwarded, 0);
        pyc_frame_t *f = NULL;
        size_t n = 0;
        unsigned char *block = unhex_frames(frames, &f, &n);
        json_decref(frames);
        pyc_msg_t *msg = NULL;
        pyc_error_t err;
        if (block != NULL && pyc_wire_decode_request(f, n, k->auth, &msg, &err) == 0 && msg != NULL) {
            pyc_msg_set_owner(msg, block, free);
            free(f);
            return msg;
        }
        pyc_log("restore: a request forwarded by the replaced kernel cannot be read; dropped");
        free(f);
        free(block);
    }
    return NULL;
}

void
pyc__handover_resumed(pyc_kernel_t *k, json_t *state)
{
    json_decref(k->tt.forwarded);
    k->tt.forwarded = json_incref(json_object_get(state, "forwarded"));
    k->tt.forward_after = pyc_now_s() + 0.3;
    /* The clients reconnect by themselves (ZeroMQ, within about 0.1-0.2 s; a SUB socket subscribes again
     * once its owner next polls it, which a frontend's event loop does at once): iopub messages wait, up to
     * SUBSCRIBERS_WAIT_S, until as many iopub subscribers as the replaced kernel had are back, so that none is
     * published before they listen again (subscriptions were counted from zero when the server started).
     * Only a client that went away for good makes the wait last. */
    k->tt.await_subscribers = (int)json_integer_value(json_object_get(state, "subscribers"));
    k->tt.await_until = pyc_now_s() + SUBSCRIBERS_WAIT_S;
    k->tt.return_until = pyc_now_s() + RETURN_WAIT_S;
    /* The answer the replaced kernel held back goes first (pyc_kernel_next_forwarded).  What this process
     * held when it was forked (a snapshot taken by a request that then asked for a restore) is not its. */
    json_decref(k->tt.held);
    k->tt.held = json_incref(json_object_get(state, "held"));
    k->tt.holding = false;
}

void
pyc__handover_failed(pyc_kernel_t *k, json_t *state)
{
    /* The sockets may have been made anew (the old ones closed before the snapshot was asked): the clients
     * come back to them as they would have to the snapshot, and the answer waits for them the same way. */
    pyc__handover_resumed(k, state);
    pyc__handover_send_held(k, true);
}

void
pyc__handover_end(pyc_kernel_t *k)
{
    json_decref(k->tt.forwarded);
    k->tt.forwarded = NULL;
    json_decref(k->tt.held);
    k->tt.held = NULL;
    k->tt.holding = false;
}
