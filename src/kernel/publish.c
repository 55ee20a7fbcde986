/*
 * publish.c -- the only code of the kernel that builds, signs and sends messages: replies, iopub messages,
 * status, and the parent that iopub messages without a request of their own carry.
 *
 * Messages are assembled as text: the parent header is the request's own header frame, passed through byte
 * for byte; the header is printed by msg.c; contents come from jansson or, for stream text and the fixed
 * shapes of execute_input and an ok execute_reply (execute.c), are written as text with buf.c.  Up to 16
 * frames are assembled on the stack.
 *
 * Thread safety: everything here may run on any thread (the control thread, the stream flusher, Python
 * threads, the guard); it reads only fields that are fixed while the kernel runs, and the parent, which
 * parent_lock guards.
 */
#include "kernelint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "jsontext.h"
#include "log.h"
#include "wire.h"

const pyc_frame_t *
pyc__header_frame(const pyc_msg_t *msg)
{
    return &msg->idents[msg->n_idents + 2];
}

int
pyc__send_frames(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
                 const void *parent, size_t parent_len, const char *metadata, char *content, size_t content_len,
                 bool content_owned, pyc_outframe_t *buffers, size_t nbuf)
{
    return pyc__send_frames_id(k, chan, idents, n_idents, msg_type, parent, parent_len, metadata, content,
                               content_len, content_owned, buffers, nbuf, NULL);
}

int
pyc__send_frames_id(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
                    const void *parent, size_t parent_len, const char *metadata, char *content, size_t content_len,
                    bool content_owned, pyc_outframe_t *buffers, size_t nbuf, char *msg_id_out)
{
    pyc_buf_t hdr;
    char sig[PYC_AUTH_MAX_HEX + 1];
    pyc_outframe_t stack_frames[16];
    pyc_outframe_t *f = stack_frames;
    size_t n = n_idents + 6 + nbuf;
    int rc = -1;

    pyc_buf_init(&hdr, 4096);
    if (n > sizeof stack_frames / sizeof stack_frames[0]) {
        f = malloc(n * sizeof *f);
        if (f == NULL)
            goto out;
    }
    if (pyc_msg_header(&hdr, msg_type, k->session, k->username_json, msg_id_out) < 0)
        goto out;
    if (metadata == NULL)
        metadata = "{}";
    pyc_frame_t dicts[4] = {
        {hdr.data, hdr.len},
        {parent != NULL ? parent : "{}", parent != NULL ? parent_len : 2},
        {metadata, strlen(metadata)},
        {content, content_len},
    };
    if (pyc_wire_sign(k->auth, dicts, sig) < 0)
        goto out;
    for (size_t i = 0; i < n_idents; i++)
        f[i] = (pyc_outframe_t){idents[i].data, idents[i].size, NULL, NULL};
    f[n_idents] = (pyc_outframe_t){PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN, NULL, NULL};
    f[n_idents + 1] = (pyc_outframe_t){sig, strlen(sig), NULL, NULL};
    size_t hlen;
    char *h = pyc_buf_detach(&hdr, &hlen);
    f[n_idents + 2] = (pyc_outframe_t){h, hlen, h, NULL};
    f[n_idents + 3] = (pyc_outframe_t){dicts[1].data, dicts[1].size, NULL, NULL};
    f[n_idents + 4] = (pyc_outframe_t){metadata, dicts[2].size, NULL, NULL};
    f[n_idents + 5] = (pyc_outframe_t){content, content_len, content_owned ? content : NULL, NULL};
    for (size_t i = 0; i < nbuf; i++) {
        f[n_idents + 6 + i] = buffers[i];
        buffers[i] = (pyc_outframe_t){NULL, 0, NULL, NULL};
    }
    pyc_journal_tap(k->journal, msg_type, dicts[1].size > 2 ? dicts[1].data : NULL, dicts[1].size, metadata,
                    content, content_len);
    if (chan == PYC_CHAN_IOPUB && pyc_outgate_counts(msg_type))
        atomic_store(&k->last_output_ns, pyc_now_ns());
    content_owned = false;       /* the io owns it now, whatever happens */
    if (pyc__handover_holds(k, chan, msg_type, idents, n_idents))
        rc = pyc__handover_hold(k, chan, f, n);     /* the restored kernel sends it (handover.c) */
    else
        rc = k->io->send(k->io, chan, f, n);
out:;
    /* An input_request whose client is not (yet) on the stdin channel is the caller's to try again and to
     * report (host.c); errno says why, for it. */
    int why = errno;
    bool retry = chan == PYC_CHAN_STDIN && (why == EHOSTUNREACH || why == EAGAIN);
    if (rc < 0 && !retry)
        pyc_log("could not send %s (out of memory or channel closed)", msg_type);
    if (content_owned)
        free(content);
    for (size_t i = 0; i < nbuf; i++)
        pyc_outframe_drop(&buffers[i]);   /* not reached the io: failed before */
    pyc_buf_free(&hdr);
    if (f != stack_frames)
        free(f);
    errno = why;
    return rc;
}

/* Sends a JSON content (stolen) with optional metadata (stolen). */
static int
send_json(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
          const void *parent, size_t parent_len, json_t *metadata, json_t *content)
{
    size_t len = 0;
    char *md = metadata != NULL ? pyc_json_text_dup(metadata, NULL) : NULL;
    char *text = pyc_json_text_dup(content, &len);
    json_decref(metadata);
    json_decref(content);
    if (text == NULL) {
        free(md);
        pyc_log("could not encode the content of %s", msg_type);
        return -1;
    }
    int rc = pyc__send_frames(k, chan, idents, n_idents, msg_type, parent, parent_len, md, text, len, true,
                              NULL, 0);
    free(md);
    return rc;
}

int
pyc__reply(pyc_kernel_t *k, int chan, const pyc_msg_t *req, const char *msg_type, json_t *metadata,
           json_t *content)
{
    const pyc_frame_t *h = pyc__header_frame(req);
    return send_json(k, chan, req->idents, req->n_idents, msg_type, h->data, h->size, metadata, content);
}

int
pyc__publish(pyc_kernel_t *k, const pyc_msg_t *req, const char *msg_type, json_t *content)
{
    const pyc_frame_t *h = pyc__header_frame(req);
    pyc_frame_t topic = {msg_type, strlen(msg_type)};
    return send_json(k, PYC_CHAN_IOPUB, &topic, 1, msg_type, h->data, h->size, NULL, content);
}

int
pyc__reply_text(pyc_kernel_t *k, int chan, const pyc_msg_t *req, const char *msg_type, const char *metadata,
                char *content, size_t content_len)
{
    const pyc_frame_t *h = pyc__header_frame(req);
    return pyc__send_frames(k, chan, req->idents, req->n_idents, msg_type, h->data, h->size, metadata, content,
                            content_len, true, NULL, 0);
}

int
pyc__publish_text(pyc_kernel_t *k, const pyc_msg_t *req, const char *msg_type, char *content, size_t content_len)
{
    const pyc_frame_t *h = pyc__header_frame(req);
    pyc_frame_t topic = {msg_type, strlen(msg_type)};
    return pyc__send_frames(k, PYC_CHAN_IOPUB, &topic, 1, msg_type, h->data, h->size, NULL, content, content_len,
                            true, NULL, 0);
}

void
pyc__status(pyc_kernel_t *k, const pyc_msg_t *req, const char *state)
{
    /* Copied together rather than printed: two of these go with every request. */
    static const char head[] = "{\"execution_state\":\"";
    char text[64];
    size_t sl = strnlen(state, sizeof text - sizeof head - 2);
    memcpy(text, head, sizeof head - 1);
    memcpy(text + sizeof head - 1, state, sl);
    memcpy(text + sizeof head - 1 + sl, "\"}", 2);
    size_t n = sizeof head - 1 + sl + 2;
    pyc_frame_t topic = {"status", 6};
    const void *p = req != NULL ? pyc__header_frame(req)->data : NULL;
    size_t plen = req != NULL ? pyc__header_frame(req)->size : 0;
    pyc__send_frames(k, PYC_CHAN_IOPUB, &topic, 1, "status", p, plen, NULL, text, n, false, NULL, 0);
}

void
pyc__set_parent(pyc_kernel_t *k, const pyc_msg_t *msg)
{
    const pyc_frame_t *h = pyc__header_frame(msg);
    char *copy = malloc(h->size);
    if (copy == NULL)
        return;
    memcpy(copy, h->data, h->size);
    pyc_streams_flush(k->streams);   /* earlier output keeps its own parent */
    pthread_mutex_lock(&k->parent_lock);
    free(k->parent);
    k->parent = copy;
    k->parent_len = h->size;
    pthread_mutex_unlock(&k->parent_lock);
}

void
pyc__publish_current(pyc_kernel_t *k, const char *msg_type, char *text, size_t len, const char *metadata,
                     pyc_outframe_t *buffers, size_t nbuf)
{
    pyc_frame_t topic = {msg_type, strlen(msg_type)};
    const pyc_msg_t *sub = pyc__subshell_request();
    if (sub != NULL) {
        /* A subshell's thread: its request is the parent. */
        const pyc_frame_t *h = pyc__header_frame(sub);
        pyc__send_frames(k, PYC_CHAN_IOPUB, &topic, 1, msg_type, h->data, h->size, metadata, text, len, true,
                         buffers, nbuf);
        return;
    }
    pthread_mutex_lock(&k->parent_lock);
    pyc__send_frames(k, PYC_CHAN_IOPUB, &topic, 1, msg_type, k->parent, k->parent_len, metadata, text, len, true,
                     buffers, nbuf);
    pthread_mutex_unlock(&k->parent_lock);
}

json_t *
pyc__reply_metadata(const char *status_text)
{
    char date[PYC_MSG_DATE_LEN + 1];
    pyc_msg_now(date);
    return json_pack("{s:s, s:b, s:s}", "started", date, "dependencies_met", 1, "status", status_text);
}

int
pyc__reply_metadata_open(pyc_buf_t *b, const char *status_text)
{
    char date[PYC_MSG_DATE_LEN + 1];
    pyc_msg_now(date);
    return pyc_buf_add(b, "{\"started\":\"", 12) < 0 || pyc_buf_add(b, date, PYC_MSG_DATE_LEN) < 0 ||
                   pyc_buf_adds(b, "\",\"dependencies_met\":true,\"status\":") < 0 ||
                   pyc_buf_add_json_string(b, status_text, strlen(status_text)) < 0
               ? -1
               : 0;
}

json_t *
pyc__execute_error_content(json_t *error, int count, json_t *user_expressions, json_t *payload)
{
    json_t *content = json_is_object(error) ? json_deep_copy(error) : json_object();
    json_object_set_new(content, "status", json_string("error"));
    json_object_set_new(content, "execution_count", json_integer(count));
    json_object_set_new(content, "user_expressions",
                        user_expressions != NULL ? json_incref(user_expressions) : json_object());
    json_object_set_new(content, "payload", payload != NULL ? json_incref(payload) : json_array());
    return content;
}

json_t *
pyc__bad_request(const char *what)
{
    return json_pack("{s:s, s:s, s:s, s:[]}", "status", "error", "ename", "BadRequest", "evalue", what,
                     "traceback");
}

void
pyc__reply_type(const char *msg_type, char *out, size_t cap)
{
    const char *us = strrchr(msg_type, '_');
    size_t base = us != NULL ? (size_t)(us - msg_type) : strlen(msg_type);
    snprintf(out, cap, "%.*s_reply", (int)(base < 100 ? base : 100), msg_type);
}

void
pyc__abort_reply(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    char type[128];
    pyc__reply_type(msg->msg_type, type, sizeof type);
    json_t *md = pyc__reply_metadata("aborted");
    if (strcmp(type, "execute_reply") == 0)
        json_object_set_new(md, "pyc", json_pack("{s:s, s:s}", "outcome", "aborted", "state", "intact"));
    pyc__reply(k, chan, msg, type, md, json_pack("{s:s}", "status", "aborted"));
}

void
pyc_kernel_subscribed(void *ctx, const char *topic, size_t len)
{
    pyc_kernel_t *k = ctx;
    atomic_fetch_add(&k->subscriptions, 1);
    json_t *sub = json_stringn(topic, len);
    if (sub == NULL) {
        pyc_log("iopub: a subscription whose topic is not UTF-8 gets no welcome");
        return;
    }
    pyc_frame_t ident = {topic, len};
    send_json(k, PYC_CHAN_IOPUB, &ident, 1, "iopub_welcome", NULL, 0, NULL, json_pack("{s:o}", "subscription", sub));
}

void
pyc_kernel_unsubscribed(void *ctx)
{
    pyc_kernel_t *k = ctx;
    atomic_fetch_sub(&k->subscriptions, 1);
}

/* PYC_REPLY_PACE_US, read once: microseconds per message, 0 for off. */
static long
reply_pace_us(void)
{
    static long us = -1;
    if (us < 0) {
        const char *s = getenv("PYC_REPLY_PACE_US");
        char *end = NULL;
        long v = s != NULL && s[0] != '\0' ? strtol(s, &end, 10) : -1;
        us = end != NULL && *end == '\0' && v >= 0 && v <= REPLY_PACE_MAX_US ? v : REPLY_PACE_US;
    }
    return us;
}

void
pyc__pace_reply(uint64_t last_ns, size_t n_outputs, size_t output_bytes)
{
    long per = reply_pace_us();
    if (per == 0 || n_outputs == 0 || last_ns == 0 || output_bytes > REPLY_PACE_MAX_BYTES)
        return;
    /* busy and execute_input come before the outputs; past REPLY_PACE_MAX_MSGS, the cell ran long enough
     * for the relay to forward the earlier ones while it did */
    size_t n = n_outputs + 2 < REPLY_PACE_MAX_MSGS ? n_outputs + 2 : REPLY_PACE_MAX_MSGS;
    double pace = (REPLY_PACE_BASE_US + (double)per * (double)n) / 1e6;
    double left = pace - (double)(pyc_now_ns() - last_ns) / 1e9;
    if (left <= 0)
        return;
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

void
pyc__reply_invalid(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    char type[128], why[300];
    pyc__reply_type(msg->msg_type, type, sizeof type);
    snprintf(why, sizeof why, "the request could not be read: %s", msg->invalid);
    pyc_log("%s: %s from session %s: %s", chan == PYC_CHAN_CONTROL ? "control" : "shell", msg->msg_type,
            msg->session, msg->invalid);
    json_t *content = pyc__bad_request(why), *md = NULL;
    if (strcmp(msg->msg_type, "execute_request") == 0) {
        json_object_set_new(content, "execution_count", json_integer(k->execution_count));
        json_object_set_new(content, "user_expressions", json_object());
        json_object_set_new(content, "payload", json_array());
        md = pyc__reply_metadata("error");
        json_object_set_new(md, "pyc", json_pack("{s:s, s:s}", "outcome", "bad_request", "state", "intact"));
    }
    pyc__reply(k, chan, msg, type, md, content);
}
