/*
 * host.c -- the interpreter's callbacks into the kernel (py.h's pyc_py_host_t): stream text, displays and
 * comm messages out to iopub through the output cap, and input() over the stdin channel.
 *
 * Streams and displays may come from any thread Python code runs on (user threads print too), and from the
 * stream flusher; they are published with the current parent (publish.c).  input() runs on the main thread
 * with the GIL released by the caller.
 */
#include "kernelint.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jsontext.h"
#include "log.h"

void
pyc__keep_output_text(pyc_kernel_t *k, const char *msg_type, json_t *content)
{
    const char *t = NULL;
    if (!pyc_outgate_wants_text(&k->out))
        return;
    if (strcmp(msg_type, "stream") == 0) {
        t = json_string_value(json_object_get(content, "text"));
    } else if (strcmp(msg_type, "execute_result") == 0 || strcmp(msg_type, "display_data") == 0) {
        t = json_string_value(json_object_get(json_object_get(content, "data"), "text/plain"));
        if (t != NULL) {
            pyc_outgate_keep(&k->out, t, strlen(t));
            t = "\n";           /* as pyc run prints a result: on a line of its own */
        }
    }
    if (t != NULL)
        pyc_outgate_keep(&k->out, t, strlen(t));
}

/* Publishes, once, the notice that output between cells is dropped from now on (counted in the session's
 * budget by the gate). */
static void
idle_notice(pyc_kernel_t *k)
{
    char text[256];
    size_t n = pyc_outgate_take_idle_notice(&k->out, text, sizeof text);
    if (n == 0)
        return;
    json_t *c = json_pack("{s:s, s:s%}", "name", "stderr", "text", text, n);
    char *content = c != NULL ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    if (content != NULL)
        pyc__publish_current(k, "stream", content, strlen(content), NULL, NULL, 0);
}

/* The output gate that counts what this thread publishes: its subshell's cell's on a subshell's thread, else
 * the kernel's (the main shell's cell, and the budget between cells); *main says which. */
static pyc_outgate_t *
gate_of(pyc_kernel_t *k, bool *main)
{
    pyc_outgate_t *g = pyc__subshell_gate();
    *main = g == NULL;
    return g != NULL ? g : &k->out;
}

/* Publishes stream text with parent (a header frame), or with the current parent when parent is NULL. */
static void
stream_publish_to(pyc_kernel_t *k, int which, const char *text, size_t n, const char *parent, size_t plen)
{
    pyc_buf_t b;
    bool main;
    pyc_outgate_t *gate = gate_of(k, &main);
    n = pyc_outgate_admit(gate, n, text);
    if (n == 0) {
        if (main)
            idle_notice(k);
        return;
    }
    if (main)
        pyc_outgate_keep(&k->out, text, n);   /* the cell's head, for its event (README, "pyc events") */
    const char *head = which == PYC_STDOUT ? "{\"name\":\"stdout\",\"text\":" : "{\"name\":\"stderr\",\"text\":";
    pyc_buf_init(&b, SIZE_MAX / 2);
    if (pyc_buf_reserve(&b, n + 48) < 0 || pyc_buf_adds(&b, head) < 0 ||
        pyc_buf_add_json_string(&b, text, n) < 0 || pyc_buf_add(&b, "}", 1) < 0) {
        pyc_buf_free(&b);
        pyc_log("could not publish %zu bytes of output (out of memory)", n);
        return;
    }
    size_t len;
    char *content = pyc_buf_detach(&b, &len);
    if (parent == NULL) {
        pyc__publish_current(k, "stream", content, len, NULL, NULL, 0);
    } else {
        pyc_frame_t topic = {"stream", 6};
        pyc__send_frames(k, PYC_CHAN_IOPUB, &topic, 1, "stream", parent, plen, NULL, content, len, true, NULL, 0);
    }
    if (main)
        idle_notice(k);          /* after the part that still fitted */
}

void
pyc__stream_publish(void *ctx, int which, const char *text, size_t n)
{
    stream_publish_to(ctx, which, text, n, NULL, 0);
}

/* Publishes content (JSON text, len bytes, taken) with metadata (JSON text or NULL, taken) and buffers (taken
 * over) for the current request, through the output cap.  plain (borrowed, may be NULL) is the text/plain of a
 * result or display, kept for the cell's event; when the gate wants it and the caller had none to give, it
 * is read from the content. */
static void
host_publish_text(void *ctx, const char *msg_type, char *content, size_t len, char *metadata, const char *plain,
                  size_t plain_len, pyc_outframe_t *buffers, size_t nbuf)
{
    pyc_kernel_t *k = ctx;
    if (k->user_forked) {
        /* A child of user code has no channel of its own (atfork_child): only its streams reach the cell. */
        free(content);
        free(metadata);
        for (size_t i = 0; i < nbuf; i++)
            pyc_outframe_drop(&buffers[i]);
        return;
    }
    pyc_streams_flush(k->streams);
    size_t total = len;
    for (size_t i = 0; i < nbuf; i++)
        total += buffers[i].size;
    bool main;
    pyc_outgate_t *gate = gate_of(k, &main);
    bool counted = pyc_outgate_counts(msg_type);
    bool drop = content == NULL || (counted && pyc_outgate_admit(gate, total, NULL) == 0);
    if (counted && main && !drop && pyc_outgate_wants_text(&k->out)) {
        if (plain != NULL) {
            pyc_outgate_keep(&k->out, plain, plain_len);
            pyc_outgate_keep(&k->out, "\n", 1);      /* as pyc run prints a result: on a line of its own */
        } else {
            json_t *c = json_loadb(content, len, 0, NULL);
            pyc__keep_output_text(k, msg_type, c);
            json_decref(c);
        }
    }
    if (drop) {
        if (main)
            idle_notice(k);
        if (content == NULL)
            pyc_log("could not encode the content of %s", msg_type);
        free(content);
        free(metadata);
        for (size_t i = 0; i < nbuf; i++)
            pyc_outframe_drop(&buffers[i]);   /* taken over: lent Python buffers must be given back */
        return;
    }
    pyc__publish_current(k, msg_type, content, len, metadata, buffers, nbuf);
    free(metadata);
}

static void
host_publish(void *ctx, const char *msg_type, json_t *content)
{
    size_t len = 0;
    char *text = pyc_json_text_dup(content, &len);
    json_decref(content);
    host_publish_text(ctx, msg_type, text, len, NULL, NULL, 0, NULL, 0);
}

static void
host_stream_write(void *ctx, int which, const char *data, size_t n)
{
    pyc_kernel_t *k = ctx;
    pyc_streams_write(k->streams, which, data, n);
}

static void
host_stream_flush(void *ctx)
{
    pyc_kernel_t *k = ctx;
    pyc_streams_flush(k->streams);
}

static int ask_input(pyc_kernel_t *k, const pyc_msg_t *req, bool subshell, const char *prompt, bool password,
                     char **out, pyc_error_t *err);

/* How long input() waits for its client's stdin connection before it gives up (ask_input): PYC_STDIN_WAIT
 * seconds, 5 by default; a value that does not read as 0.001 to 3600 is the default, with a log line. */
static double
stdin_wait_s(void)
{
    const char *v = getenv("PYC_STDIN_WAIT");
    if (v == NULL || v[0] == '\0')
        return 5;
    char *end;
    double s = strtod(v, &end);
    if (*end != '\0' || !(s >= 0.001 && s <= 3600)) {
        pyc_log("PYC_STDIN_WAIT=%s is not a number of seconds from 0.001 to 3600; 5 s it is", v);
        return 5;
    }
    return s;
}

static int
host_input(void *ctx, const char *prompt, bool password, char **out, pyc_error_t *err)
{
    pyc_kernel_t *k = ctx;
    const pyc_msg_t *sub = pyc__subshell_request();
    const pyc_msg_t *req = sub != NULL ? sub : k->current;
    bool allowed = sub != NULL ? pyc__subshell_allow_stdin() : k->allow_stdin;
    *out = NULL;
    if (req == NULL || !allowed || k->user_forked)
        return pyc_error_set(err, "input() is not available: the frontend does not support stdin "
                                  "(allow_stdin is false)");
    /* One input() at a time on the stdin channel (the main shell's and the subshells'): each reads the one
     * stdin socket, and drops what is not its own reply.  The wait for another's input() ends with an
     * interrupt (the main shell's), a deleted subshell, or the kernel's end. */
    for (;;) {
        struct timespec until = pyc_wall_after(100);
        if (pthread_mutex_timedlock(&k->stdin_lock, &until) == 0)
            break;
        if (sub == NULL && pyc_py_interrupt_pending())
            return 1;
        if (atomic_load(&k->quit) || (sub != NULL && pyc__subshell_stopping()))
            return pyc_error_set(err, "input() was given up: the kernel or the subshell is ending");
    }
    int rc = ask_input(k, req, sub != NULL, prompt, password, out, err);
    pthread_mutex_unlock(&k->stdin_lock);
    return rc;
}

/* Drops every message already waiting on stdin, so that an input_reply no input() asked for (a client that
 * answers ahead, or the late answer to an input() an interrupt gave up) cannot answer the next one.
 * ipykernel drains its stdin socket the same way before each input_request.  At most 10000 messages: a
 * client flooding stdin cannot keep input() here for ever (the msg_id check in ask_input covers the rest).
 * A malformed message ends the drain early, for the same reason. */
static void
drain_stdin(pyc_kernel_t *k)
{
    for (int i = 0; i < 10000; i++) {
        pyc_msg_t *m = k->io->recv_stdin(k->io, 0);
        if (m == NULL)
            return;
        pyc_log("stdin: dropped a stale %s (%s) before input_request", m->msg_type, m->msg_id);
        pyc_msg_destroy(&m);
    }
}

/* True when m may answer the input_request whose msg_id is id: its parent_header names that request, or
 * names none.  The notebook, JupyterLab and pyc's own client name it; jupyter_client's KernelClient.input(),
 * which jupyter_console and agent frameworks call, sends an empty parent_header, so a reply without a parent
 * is taken (a stale one sent before the request was dropped by drain_stdin).  A reply that names another
 * message answers something else and is dropped. */
static bool
answers(const pyc_msg_t *m, const char *id)
{
    json_t *pid = json_object_get(m->parent_header, "msg_id");
    if (pid == NULL || (json_is_string(pid) && json_string_value(pid)[0] == '\0'))
        return true;
    return json_is_string(pid) && strcmp(json_string_value(pid), id) == 0;
}

/* input(): one input_request on stdin with req as the parent, and its input_reply -- the first whose
 * parent_header names that input_request or none (see answers); stdin messages waiting before the request,
 * and replies to other messages, are dropped with a log line.  On a subshell's thread the main shell's
 * interrupt does not end the wait. */
static int
ask_input(pyc_kernel_t *k, const pyc_msg_t *req, bool subshell, const char *prompt, bool password, char **out,
          pyc_error_t *err)
{
    pyc_streams_flush(k->streams);
    drain_stdin(k);
    const pyc_frame_t *h = pyc__header_frame(req);
    json_t *content = json_pack("{s:s, s:b}", "prompt", prompt, "password", password);
    char *text = content != NULL ? json_dumps(content, JSON_COMPACT) : NULL;
    char request_id[PYC_MSG_ID_LEN + 1];
    json_decref(content);
    if (text == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    /* The stdin socket refuses a message for a client whose stdin connection it does not know (yet), rather
     * than drop it without a word (server.c's send_stdin): tried again every 2 ms for PYC_STDIN_WAIT s,
     * with an interrupt, the kernel's end and the subshell's end watched as in the wait for the reply. */
    double wait = stdin_wait_s(), deadline = pyc_now_s() + wait;
    for (;;) {
        char *copy = strdup(text);
        int rc = copy != NULL ? pyc__send_frames_id(k, PYC_CHAN_STDIN, req->idents, req->n_idents, "input_request",
                                                    h->data, h->size, NULL, copy, strlen(copy), true, NULL, 0,
                                                    request_id)
                              : -1;
        int why = copy != NULL ? errno : ENOMEM;
        if (rc == 0)
            break;
        bool absent = why == EHOSTUNREACH || why == EAGAIN;
        if (!absent || pyc_now_s() >= deadline) {
            free(text);
            if (why != EHOSTUNREACH)
                return pyc_error_set(err, "could not send input_request: %s", strerror(why));
            pyc_log("stdin: no frontend is connected to the stdin channel; input() gave up after %g s", wait);
            return pyc_error_set(err, "could not send input_request: no frontend is connected to the stdin "
                                      "channel");
        }
        if ((!subshell && pyc_py_interrupt_pending()) || atomic_load(&k->quit) ||
            (subshell && pyc__subshell_stopping())) {
            free(text);
            if (!subshell && pyc_py_interrupt_pending())
                return 1;
            return pyc_error_set(err, "input() was given up: the kernel or the subshell is ending");
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    free(text);
    for (;;) {
        if (!subshell && pyc_py_interrupt_pending())
            return 1;
        if (atomic_load(&k->quit))
            return pyc_error_set(err, "the kernel is shutting down");
        if (subshell && pyc__subshell_stopping())
            return pyc_error_set(err, "the subshell was deleted");
        pyc_msg_t *m = k->io->recv_stdin(k->io, 100);
        if (m == NULL)
            continue;
        if (strcmp(m->msg_type, "input_reply") != 0) {
            pyc_log("stdin: ignored %s while waiting for input_reply", m->msg_type);
            pyc_msg_destroy(&m);
            continue;
        }
        if (!answers(m, request_id)) {
            pyc_log("stdin: ignored an input_reply (%s) whose parent is not the input_request %s", m->msg_id,
                    request_id);
            pyc_msg_destroy(&m);
            continue;
        }
        json_t *v = json_object_get(m->content, "value");
        *out = strdup(json_is_string(v) ? json_string_value(v) : "");
        pyc_msg_destroy(&m);
        if (*out == NULL)
            return pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return 0;
    }
}

static size_t
host_parent_copy(void *ctx, char **out)
{
    pyc_kernel_t *k = ctx;
    size_t len = 0;
    *out = NULL;
    pthread_mutex_lock(&k->parent_lock);
    if (k->parent != NULL && (*out = malloc(k->parent_len)) != NULL) {
        memcpy(*out, k->parent, k->parent_len);
        len = k->parent_len;
    }
    pthread_mutex_unlock(&k->parent_lock);
    return len;
}

static void
host_stream_write_for(void *ctx, int which, const char *data, size_t n, const char *parent, size_t plen)
{
    pyc_kernel_t *k = ctx;
    pthread_mutex_lock(&k->parent_lock);
    bool current = k->parent == NULL || (k->parent_len == plen && memcmp(k->parent, parent, plen) == 0);
    pthread_mutex_unlock(&k->parent_lock);
    if (current || k->user_forked) {
        pyc_streams_write(k->streams, which, data, n);
        return;
    }
    pyc_streams_flush(k->streams);         /* what the current cell wrote before keeps its place */
    stream_publish_to(k, which, data, n, parent, plen);
}

static json_t *
host_parent(void *ctx)
{
    char *copy;
    size_t len = host_parent_copy(ctx, &copy);
    json_t *header = copy != NULL ? json_loadb(copy, len, 0, NULL) : NULL;
    free(copy);
    return header;
}

void
pyc_kernel_py_host(pyc_kernel_t *k, pyc_py_host_t *host)
{
    host->ctx = k;
    host->publish = host_publish;
    host->publish_text = host_publish_text;
    host->stream_write = host_stream_write;
    host->stream_flush = host_stream_flush;
    host->input = host_input;
    host->parent = host_parent;
    host->parent_copy = host_parent_copy;
    host->stream_write_for = host_stream_write_for;
    host->kernel_call = pyc__kernel_call;
}
