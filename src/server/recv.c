/*
 * recv.c -- receiving one message on a server's socket (serverint.h): its frames read whole, bounded before
 * anything is checked (frame count, JSON frame sizes, the total), then decoded and verified by the wire
 * (signature, replay window, JSON), the frames kept alive as long as the message that points into them.
 * Used by server.c (control, stdin) and shell.c (shell, on whichever thread owns it); dropped messages are
 * logged, rate-limited.  Also the channels' names for log lines.
 */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "serverint.h"
#include "wire.h"

const char *const pyc__chan_names[PYC_CHAN_COUNT] = {"shell", "iopub", "stdin", "control", "heartbeat"};

/* Lines about dropped messages, which a peer without the key can cause at will, are rate-limited. */
static pyc_log_limit_t dropped_log = PYC_LOG_LIMIT_INIT;

/* Frees frame i's storage early (msg.h's frame_free); frameset_free then closes an empty message. */
static void
frameset_free_frame(void *p, size_t i)
{
    frameset_t *fs = p;
    if (i < fs->n) {
        zmq_msg_close(&fs->msgs[i]);
        zmq_msg_init(&fs->msgs[i]);
    }
}

static void
frameset_free(void *p)
{
    frameset_t *fs = p;
    for (size_t i = 0; i < fs->n; i++)
        zmq_msg_close(&fs->msgs[i]);
    free(fs);
}

pyc_msg_t *
pyc__server_recv(pyc_server_t *srv, int chan, bool *nothing)
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
    if (nothing != NULL)
        *nothing = n == 0 && why == NULL;
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
                            pyc__chan_names[chan], PYC_SERVER_MAX_DICT >> 20);
        else if (pyc_wire_decode_request(views, n, srv->auth, &msg, &err) < 0)
            pyc_log_limited(&dropped_log, "%s: dropped message: %s", pyc__chan_names[chan], err.text);
        free(views);
    } else {
        pyc_log_limited(&dropped_log, "%s: dropped message: %s", pyc__chan_names[chan], why);
    }
    if (msg == NULL) {
        frameset_free(fs);
        return NULL;
    }
    pyc_msg_set_owner(msg, fs, frameset_free);
    pyc_msg_set_frame_free(msg, frameset_free_frame);
    return msg;
}
