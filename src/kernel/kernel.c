/*
 * kernel.c -- request dispatch, replies and iopub publishing; see kernel.h.
 *
 * Every request gets status busy before anything else it causes and status idle after its last output,
 * with the request's header as parent (DESIGN.md section 3).  Messages are assembled here as text: the
 * parent header is the request's own header frame, passed through byte for byte; the header is printed by
 * msg.c; contents come from jansson or, for stream text, from the JSON string encoder in buf.c.
 *
 * Thread safety: send_frames and publish may run on any thread (the control thread, the stream flusher,
 * Python threads); they read only immutable fields and the parent, which parent_lock guards.
 */
#include "kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "config.h"
#include "guard.h"
#include "history.h"
#include "limit.h"
#include "log.h"
#include "msg.h"
#include "py.h"
#include "usage.h"
#include "wire.h"

/* The per-cell output cap: what the running cell published and what was dropped.  Output comes from the
 * stream flusher, the main thread and Python threads, hence the lock. */
typedef struct out_gate {
    pthread_mutex_t lock;
    bool active;                 /* an execute request is running */
    bool dropping;               /* the cap was reached: everything else of this cell is dropped */
    size_t max_bytes, max_msgs;  /* 0: no cap */
    size_t bytes, msgs, dropped_bytes, dropped_msgs;
} out_gate_t;

/* A forked session: its pid, its connection file (removed when it ends), and whether it outlives us. */
typedef struct child {
    pid_t pid;
    char *file;
    bool outlive;
} child_t;

/* Wall and CPU clocks at the start of a cell. */
typedef struct cell_clock {
    struct timespec wall, cpu;
    double children_cpu;
} cell_clock_t;

/* Memory kept in reserve under a memory cap (mapped writable, never touched: it counts against RLIMIT_DATA
 * but costs no RAM), given back when a cell hits the cap so that the kernel can still format and send the
 * cell's error (ZeroMQ aborts when it cannot allocate). */
#define MEM_RESERVE ((size_t)32 << 20)

struct pyc_kernel {
    pyc_io_t *io;
    pyc_auth_t *auth;
    pyc_connfile_t cf;           /* copy without the key */
    void (*wake_main)(void *ctx);
    void *wake_ctx;
    char session[PYC_MSG_ID_LEN + 1];
    char *username_json;
    pyc_streams_t *streams;
    pthread_t main_thread;

    pthread_mutex_t parent_lock; /* guards parent and parent_len */
    char *parent;                /* header frame of the request being handled, for iopub messages */
    size_t parent_len;

    int execution_count;
    bool aborting;               /* after an error with stop_on_error: abort queued execute requests */
    pyc_msg_t **queued;          /* the requests that were waiting when the error happened */
    size_t n_queued;
    const pyc_msg_t *current;    /* the request being handled on the main thread */
    bool allow_stdin;

    char *kernel_info;           /* serialized kernel_info_reply content, made once by pyc_kernel_starting */
    pyc_history_t *history;      /* opened on first use (history_of); NULL when it could not be */
    bool history_tried;
    int (*fork_child)(void *ctx, bool outlive, json_t **info, pyc_error_t *err);
    void *fork_ctx;
    int max_children;
    child_t *children;           /* live forked children, reaped when idle */
    int n_children;
    bool just_forked;            /* this process is a child that has not finished the fork request */
    bool history_batch;          /* a batch of history rows is open (committed when idle) */
    atomic_int executing;
    atomic_int quit;
    atomic_int restart;

    /* Limits (DESIGN.md section 6). */
    pyc_limits_t limits;
    pyc_guard_t *guard;          /* the time limits' thread */
    void (*hard_exit)(void *ctx, int code);
    void *hard_exit_ctx;
    out_gate_t out;              /* the running cell's output cap */
    void *mem_reserve;           /* address space kept back for the kernel's own C work under the cap */
    /* The cell being run, for the guard thread's report when it cannot be stopped. */
    int cell_chan;
    int cell_count;
    bool cell_silent;
    bool cell_isolated;
    double cell_timeout;
    cell_clock_t cell_clock;
    pthread_mutex_t usage_lock;  /* guards usage */
    pyc_usage_state_t usage;
    pyc_checkpoint_t *checkpoint;/* made on first use (checkpoint_of); NULL when off */
    char *checkpoint_dir;        /* NULL when checkpoints are off */
    char *session_id;
    bool checkpoint_failed;      /* logged once */
    json_t *replayed;            /* what --replay did, for kernel_info; NULL when nothing was replayed */
};

/* Objects a forked child inherited and must never touch (the parent's server, history connection and the
 * fork request's frames).  They stay referenced here, so that leak checkers see them as kept on purpose,
 * not lost. */
static void *inherited[16];
static int n_inherited;

void
pyc_kernel_keep_inherited(void *p)
{
    if (p != NULL && n_inherited < (int)(sizeof inherited / sizeof inherited[0]))
        inherited[n_inherited++] = p;
}

/* ---- sending --------------------------------------------------------------------------------------- */

/* The header frame of a received message: the frame after the signature. */
static const pyc_frame_t *
header_frame(const pyc_msg_t *msg)
{
    return &msg->idents[msg->n_idents + 2];
}

/* Builds, signs and sends one message.  content is taken over when content_owned is true (it must then be
 * a malloc'd block); buffers[0..nbuf) are taken over in every case as pyc_io_t.send takes frames (copied,
 * owned or lent).  Returns 0 or -1; the message is lost on -1 (out of memory), with a log line. */
static int
send_frames_buf(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
                const void *parent, size_t parent_len, const char *metadata, char *content, size_t content_len,
                bool content_owned, pyc_outframe_t *buffers, size_t nbuf)
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
    if (pyc_msg_header(&hdr, msg_type, k->session, k->username_json, NULL) < 0)
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
    content_owned = false;       /* the io owns it now, whatever happens */
    rc = k->io->send(k->io, chan, f, n);
out:
    if (rc < 0)
        pyc_log("could not send %s (out of memory or channel closed)", msg_type);
    if (content_owned)
        free(content);
    for (size_t i = 0; i < nbuf; i++)
        pyc_outframe_drop(&buffers[i]);   /* not reached the io: failed before */
    pyc_buf_free(&hdr);
    if (f != stack_frames)
        free(f);
    return rc;
}

static int
send_frames(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
            const void *parent, size_t parent_len, const char *metadata, char *content, size_t content_len,
            bool content_owned)
{
    return send_frames_buf(k, chan, idents, n_idents, msg_type, parent, parent_len, metadata, content,
                           content_len, content_owned, NULL, 0);
}

/* Sends a JSON content (stolen) with optional metadata (stolen). */
static int
send_json(pyc_kernel_t *k, int chan, const pyc_frame_t *idents, size_t n_idents, const char *msg_type,
          const void *parent, size_t parent_len, json_t *metadata, json_t *content)
{
    char *md = metadata != NULL ? json_dumps(metadata, JSON_COMPACT) : NULL;
    char *text = json_dumps(content, JSON_COMPACT);
    json_decref(metadata);
    json_decref(content);
    if (text == NULL) {
        free(md);
        pyc_log("could not encode the content of %s", msg_type);
        return -1;
    }
    int rc = send_frames(k, chan, idents, n_idents, msg_type, parent, parent_len, md, text, strlen(text), true);
    free(md);
    return rc;
}

/* Replies to a request on the channel it came from. */
static int
reply(pyc_kernel_t *k, int chan, const pyc_msg_t *req, const char *msg_type, json_t *metadata, json_t *content)
{
    const pyc_frame_t *h = header_frame(req);
    return send_json(k, chan, req->idents, req->n_idents, msg_type, h->data, h->size, metadata, content);
}

/* Publishes on iopub with an explicit parent header. */
static int
publish_to(pyc_kernel_t *k, const pyc_msg_t *parent, const char *msg_type, json_t *content)
{
    const pyc_frame_t *h = header_frame(parent);
    pyc_frame_t topic = {msg_type, strlen(msg_type)};
    return send_json(k, PYC_CHAN_IOPUB, &topic, 1, msg_type, h->data, h->size, NULL, content);
}

static void
status(pyc_kernel_t *k, const pyc_msg_t *parent, const char *state)
{
    char text[64];
    int n = snprintf(text, sizeof text, "{\"execution_state\":\"%s\"}", state);
    pyc_frame_t topic = {"status", 6};
    const void *p = parent != NULL ? header_frame(parent)->data : NULL;
    size_t plen = parent != NULL ? header_frame(parent)->size : 0;
    send_frames(k, PYC_CHAN_IOPUB, &topic, 1, "status", p, plen, NULL, text, (size_t)n, false);
}

/* Makes msg the parent of iopub messages that have no request of their own (streams, displays). */
static void
set_parent(pyc_kernel_t *k, const pyc_msg_t *msg)
{
    const pyc_frame_t *h = header_frame(msg);
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

/* Publishes with the current parent; content text is taken over. */
static void
publish_current_text(pyc_kernel_t *k, const char *msg_type, char *text, size_t len)
{
    pyc_frame_t topic = {msg_type, strlen(msg_type)};
    pthread_mutex_lock(&k->parent_lock);
    send_frames(k, PYC_CHAN_IOPUB, &topic, 1, msg_type, k->parent, k->parent_len, NULL, text, len, true);
    pthread_mutex_unlock(&k->parent_lock);
}

/* ---- the output cap ---------------------------------------------------------------------------------- */

/* The message types the output cap counts: what a cell prints and displays.  Comm messages (widgets,
 * transfers) and the cell's error are not output in this sense and always go out. */
static bool
is_output(const char *msg_type)
{
    return strcmp(msg_type, "stream") == 0 || strcmp(msg_type, "display_data") == 0 ||
           strcmp(msg_type, "update_display_data") == 0 || strcmp(msg_type, "execute_result") == 0 ||
           strcmp(msg_type, "clear_output") == 0;
}

/* Counts an output message of `bytes` against the running cell's cap.  Returns how many of its bytes may go
 * out: all of them, none (the message is dropped), or -- for stream text, which can be cut (text not NULL)
 * -- the part that fits, ending on a whole UTF-8 character.  Once the cap is reached everything else of the
 * cell is dropped, so that output never resumes with a gap in it. */
static size_t
gate_admit(pyc_kernel_t *k, size_t bytes, const char *text)
{
    out_gate_t *g = &k->out;
    size_t allow = bytes;
    pthread_mutex_lock(&g->lock);
    if (g->active) {
        if (g->dropping || (g->max_msgs > 0 && g->msgs >= g->max_msgs)) {
            allow = 0;
        } else if (g->max_bytes > 0 && bytes > g->max_bytes - g->bytes) {
            allow = text != NULL ? g->max_bytes - g->bytes : 0;
            while (allow > 0 && ((unsigned char)text[allow] & 0xC0) == 0x80)
                allow--;
        }
        if (allow > 0) {
            g->msgs++;
            g->bytes += allow;
        } else {
            g->dropped_msgs++;
        }
        g->dropped_bytes += bytes - allow;
        if (allow < bytes || (g->max_msgs > 0 && g->msgs >= g->max_msgs))
            g->dropping = true;
    }
    pthread_mutex_unlock(&g->lock);
    return allow;
}

/* Starts or ends a cell's count.  Output is flushed by the caller first, so that nothing of the previous
 * request is counted against this one. */
static void
gate_set(pyc_kernel_t *k, bool active, size_t max_bytes, size_t max_msgs)
{
    out_gate_t *g = &k->out;
    pthread_mutex_lock(&g->lock);
    if (active) {
        g->bytes = g->msgs = g->dropped_bytes = g->dropped_msgs = 0;
        g->dropping = false;
        g->max_bytes = max_bytes;
        g->max_msgs = max_msgs;
    }
    g->active = active;
    pthread_mutex_unlock(&g->lock);
}

/* ---- host callbacks for the interpreter -------------------------------------------------------------- */

static void
on_stream_publish(void *ctx, int which, const char *text, size_t n)
{
    pyc_kernel_t *k = ctx;
    pyc_buf_t b;
    n = gate_admit(k, n, text);
    if (n == 0)
        return;
    pyc_buf_init(&b, SIZE_MAX / 2);
    if (pyc_buf_reserve(&b, n + 48) < 0 ||
        pyc_buf_adds(&b, which == PYC_STDOUT ? "{\"name\":\"stdout\",\"text\":" : "{\"name\":\"stderr\",\"text\":") < 0 ||
        pyc_buf_add_json_string(&b, text, n) < 0 || pyc_buf_add(&b, "}", 1) < 0) {
        pyc_buf_free(&b);
        pyc_log("could not publish %zu bytes of output (out of memory)", n);
        return;
    }
    size_t len;
    char *content = pyc_buf_detach(&b, &len);
    publish_current_text(k, "stream", content, len);
}

static void
host_publish(void *ctx, const char *msg_type, json_t *content)
{
    pyc_kernel_t *k = ctx;
    pyc_streams_flush(k->streams);
    char *text = json_dumps(content, JSON_COMPACT);
    json_decref(content);
    if (text == NULL) {
        pyc_log("could not encode the content of %s", msg_type);
        return;
    }
    if (is_output(msg_type) && gate_admit(k, strlen(text), NULL) == 0) {
        free(text);
        return;
    }
    publish_current_text(k, msg_type, text, strlen(text));
}

static void
host_publish_ex(void *ctx, const char *msg_type, json_t *content, json_t *metadata, pyc_outframe_t *buffers,
                size_t nbuf)
{
    pyc_kernel_t *k = ctx;
    pyc_streams_flush(k->streams);
    char *text = json_dumps(content, JSON_COMPACT);
    char *md = metadata != NULL ? json_dumps(metadata, JSON_COMPACT) : NULL;
    json_decref(content);
    json_decref(metadata);
    if (text == NULL) {
        free(md);
        for (size_t i = 0; i < nbuf; i++)
            pyc_outframe_drop(&buffers[i]);
        pyc_log("could not encode the content of %s", msg_type);
        return;
    }
    size_t total = strlen(text);
    for (size_t i = 0; i < nbuf; i++)
        total += buffers[i].size;
    if (is_output(msg_type) && gate_admit(k, total, NULL) == 0) {
        free(text);
        free(md);
        for (size_t i = 0; i < nbuf; i++)
            pyc_outframe_drop(&buffers[i]);   /* taken over: lent Python buffers must be given back */
        return;
    }
    pyc_frame_t topic = {msg_type, strlen(msg_type)};
    pthread_mutex_lock(&k->parent_lock);
    send_frames_buf(k, PYC_CHAN_IOPUB, &topic, 1, msg_type, k->parent, k->parent_len, md, text, strlen(text),
                    true, buffers, nbuf);
    pthread_mutex_unlock(&k->parent_lock);
    free(md);
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

static int
host_input(void *ctx, const char *prompt, bool password, char **out, pyc_error_t *err)
{
    pyc_kernel_t *k = ctx;
    const pyc_msg_t *req = k->current;
    *out = NULL;
    if (req == NULL || !k->allow_stdin)
        return pyc_error_set(err, "input() is not available: the frontend does not support stdin "
                                  "(allow_stdin is false)");
    pyc_streams_flush(k->streams);
    json_t *content = json_pack("{s:s, s:b}", "prompt", prompt, "password", password);
    const pyc_frame_t *h = header_frame(req);
    if (send_json(k, PYC_CHAN_STDIN, req->idents, req->n_idents, "input_request", h->data, h->size, NULL,
                  content) < 0)
        return pyc_error_set(err, "could not send input_request");
    for (;;) {
        if (pyc_py_interrupt_pending())
            return 1;
        if (atomic_load(&k->quit))
            return pyc_error_set(err, "the kernel is shutting down");
        pyc_msg_t *m = k->io->recv_stdin(k->io, 100);
        if (m == NULL)
            continue;
        if (strcmp(m->msg_type, "input_reply") != 0) {
            pyc_log("stdin: ignored %s while waiting for input_reply", m->msg_type);
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

void
pyc_kernel_py_host(pyc_kernel_t *k, pyc_py_host_t *host)
{
    host->ctx = k;
    host->publish = host_publish;
    host->publish_ex = host_publish_ex;
    host->stream_write = host_stream_write;
    host->stream_flush = host_stream_flush;
    host->input = host_input;
}

/* The history, opened on first use: SQLite costs a kernel 1.2 MB of resident memory and some start-up
 * time once a database is open, which a kernel that never runs a cell should not pay. */
static pyc_history_t *
history_of(pyc_kernel_t *k)
{
    if (!k->history_tried) {
        char hpath[4096];
        pyc_error_t herr;
        k->history_tried = true;
        if (pyc_history_default_path(hpath, sizeof hpath) < 0)
            pyc_log("history is off: no place for the history file");
        else if ((k->history = pyc_history_open(hpath, &herr)) == NULL)
            pyc_log("history is off: %s", herr.text);
    }
    return k->history;
}

/* ---- requests -------------------------------------------------------------------------------------- */

static bool
get_bool(json_t *obj, const char *key, bool dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static json_t *
reply_metadata(const char *status_text)
{
    char date[PYC_MSG_DATE_LEN + 1];
    pyc_msg_now(date);
    return json_pack("{s:s, s:b, s:s}", "started", date, "dependencies_met", 1, "status", status_text);
}

static void
abort_reply(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    char type[128];
    const char *us = strrchr(msg->msg_type, '_');
    size_t base = us != NULL ? (size_t)(us - msg->msg_type) : strlen(msg->msg_type);
    snprintf(type, sizeof type, "%.*s_reply", (int)(base < 100 ? base : 100), msg->msg_type);
    json_t *md = reply_metadata("aborted");
    if (strcmp(type, "execute_reply") == 0)
        json_object_set_new(md, "pyc", json_pack("{s:s, s:s}", "outcome", "aborted", "state", "intact"));
    reply(k, chan, msg, type, md, json_pack("{s:s}", "status", "aborted"));
}

/* ---- fork-isolated cells ----------------------------------------------------------------------------- */

/* Records on the pipe from an isolated cell's child to its parent: a header {type, chan, nframes} (three
 * uint32), then for each frame a uint64 size and the bytes.  Type 1 is a message to relay on `chan`; type
 * 2 is the cell's outcome: frames [JSON, pickle of the names the cell bound]. */
enum { ISO_RELAY = 1, ISO_DONE = 2 };

typedef struct iso_io {
    pyc_io_t io;                 /* first: the child's kernel sends through it */
    int fd;
} iso_io_t;

static int
read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static int
iso_write_record(int fd, uint32_t type, uint32_t chan, const pyc_frame_t *frames, size_t n)
{
    uint32_t hdr[3] = {type, chan, (uint32_t)n};
    if (pyc_write_all(fd, hdr, sizeof hdr) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t size = frames[i].size;
        if (pyc_write_all(fd, &size, sizeof size) < 0 || pyc_write_all(fd, frames[i].data, frames[i].size) < 0)
            return -1;
    }
    return 0;
}

/* The child's io: iopub messages go to the parent, which relays them; nothing else leaves the child. */
static int
iso_send(pyc_io_t *io, int chan, pyc_outframe_t *frames, size_t n)
{
    iso_io_t *iso = (iso_io_t *)io;
    int rc = 0;
    if (chan == PYC_CHAN_IOPUB) {
        pyc_frame_t *f = malloc(n * sizeof *f);
        if (f == NULL) {
            rc = -1;
        } else {
            for (size_t i = 0; i < n; i++)
                f[i] = (pyc_frame_t){frames[i].data, frames[i].size};
            rc = iso_write_record(iso->fd, ISO_RELAY, (uint32_t)chan, f, n);
            free(f);
        }
    }
    for (size_t i = 0; i < n; i++)
        pyc_outframe_drop(&frames[i]);
    return rc;
}

static pyc_msg_t *
iso_no_msg(pyc_io_t *io)
{
    (void)io;
    return NULL;
}

static pyc_msg_t *
iso_no_stdin(pyc_io_t *io, int timeout_ms)
{
    (void)io;
    (void)timeout_ms;
    return NULL;
}

/* Reads one record: *type, and frames as malloc'd blocks (freed by the caller).  Returns 0 or -1 at EOF. */
static int
iso_read_record(int fd, uint32_t *type, uint32_t *chan, pyc_outframe_t **frames, size_t *n)
{
    uint32_t hdr[3];
    *frames = NULL;
    *n = 0;
    if (read_all(fd, hdr, sizeof hdr) < 0 || hdr[2] > PYC_WIRE_MAX_FRAMES)
        return -1;
    pyc_outframe_t *f = calloc(hdr[2] + 1, sizeof *f);
    if (f == NULL)
        return -1;
    for (uint32_t i = 0; i < hdr[2]; i++) {
        uint64_t size;
        char *data;
        if (read_all(fd, &size, sizeof size) < 0 || size > ((uint64_t)8 << 30) ||
            (data = malloc(size + 1)) == NULL || read_all(fd, data, size) < 0) {
            for (uint32_t j = 0; j < i; j++)
                free(f[j].owned);
            free(f);
            return -1;
        }
        f[i] = (pyc_outframe_t){data, size, data, NULL};
    }
    *type = hdr[0];
    *chan = hdr[1];
    *frames = f;
    *n = hdr[2];
    return 0;
}

/* The child's side: runs the cell, sends the outcome and exits without finalizing Python (the parent owns
 * the session; atexit handlers belong to it). */
static void
iso_child(pyc_kernel_t *k, int fd, const char *code, const pyc_py_exec_opts_t *opts)
{
    static iso_io_t iso;
    pyc_error_t err;
    char *blob = NULL;
    size_t blen = 0;
    json_t *merged = NULL, *skipped = NULL;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    iso.io.send = iso_send;
    iso.io.next_pending = iso_no_msg;
    iso.io.recv_stdin = iso_no_stdin;
    iso.fd = fd;
    k->io = &iso.io;
    k->allow_stdin = false;
    k->out.active = false;       /* the parent counts what it relays (relay_admitted) */
    pyc_streams_set_passthrough(k->streams);

    pyc_py_exec_result_t res = {0};
    pyc_py_exec_opts_t o = *opts;
    o.allow_stdin = false;
    pyc_py_enter();
    if (pyc_py_isolate_snapshot(&err) < 0)
        pyc_log("isolated cell: %s", err.text);
    pyc_py_execute(code, &o, &res);
    if (pyc_py_isolate_collect(&blob, &blen, &merged, &skipped, &err) < 0) {
        merged = json_array();
        skipped = json_pack("{s:s}", "*", err.text);
    }
    json_t *out = json_pack("{s:b, s:o, s:o, s:o, s:o, s:o}", "ok", res.ok, "error",
                            res.error != NULL ? res.error : json_null(), "user_expressions",
                            res.user_expressions != NULL ? res.user_expressions : json_object(), "payload",
                            res.payload != NULL ? res.payload : json_array(), "merged", merged, "skipped", skipped);
    char *text = json_dumps(out, JSON_COMPACT);
    pyc_frame_t frames[2] = {{text != NULL ? text : "{}", text != NULL ? strlen(text) : 2}, {blob != NULL ? blob : "", blen}};
    fflush(NULL);
    iso_write_record(fd, ISO_DONE, 0, frames, 2);
    _exit(0);
}

/* Counts a message an isolated cell's child published against the cell's output cap.  The frames are
 * [topic, delimiter, signature, header, parent, metadata, content, buffers...]; the topic is the type. */
static bool
relay_admitted(pyc_kernel_t *k, const pyc_outframe_t *f, size_t n)
{
    if (n < 7)
        return true;
    char type[64];
    size_t tl = f[0].size < sizeof type - 1 ? f[0].size : sizeof type - 1;
    memcpy(type, f[0].data, tl);
    type[tl] = '\0';
    if (!is_output(type))
        return true;
    size_t total = 0;
    for (size_t i = 6; i < n; i++)
        total += f[i].size;
    return gate_admit(k, total, NULL) > 0;
}

/* Runs a cell in a forked child: its output streams as usual with the request as parent, the names it
 * bound that pickle are merged back, and an interrupt kills only the child (SIGKILL) and leaves the
 * kernel's state as it was.  A deadline reaches it as an interrupt from the guard (on_execute then reports
 * CellTimeout).  Fills res like pyc_py_execute and md_out with what happened (metadata.pyc of the reply). */
static void
run_isolated(pyc_kernel_t *k, const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res,
             json_t **md_out)
{
    const char *outcome = "ok";
    json_t *merged = json_array(), *skipped = json_object();
    json_t *done = NULL;
    pyc_outframe_t *df = NULL;
    size_t dn = 0;
    int p[2];
    char why[256] = "";

    res->ok = false;
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(why, sizeof why, "pipe: %s", strerror(errno));
        outcome = "died";
        goto out;
    }
    pyc_streams_flush(k->streams);
    int saved;
    pid_t pid = pyc_kernel_fork(k, &saved);
    if (pid == 0) {
        close(p[0]);
        iso_child(k, p[1], code, opts);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        snprintf(why, sizeof why, "fork: %s", strerror(saved));
        outcome = "died";
        goto out;
    }

    pyc_py_interrupt_arm();
    atomic_store(&k->executing, 1);
    for (;;) {
        if (pyc_py_interrupt_pending() || atomic_load(&k->quit)) {
            outcome = "interrupted";
            break;
        }
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        uint32_t type, chan;
        pyc_outframe_t *f;
        size_t n;
        if (iso_read_record(p[0], &type, &chan, &f, &n) < 0) {
            outcome = "died";
            break;
        }
        if (type == ISO_RELAY) {
            pyc_streams_flush(k->streams);   /* the child's earlier output, from the fd pipes, goes first */
            if (relay_admitted(k, f, n)) {
                k->io->send(k->io, PYC_CHAN_IOPUB, f, n);
            } else {
                for (size_t i = 0; i < n; i++)
                    pyc_outframe_drop(&f[i]);
            }
            free(f);
            continue;
        }
        df = f;
        dn = n;
        break;
    }
    atomic_store(&k->executing, 0);
    if (df == NULL)
        kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(p[0]);
    pyc_streams_flush(k->streams);
    if (strcmp(outcome, "died") == 0 && WIFSIGNALED(status))
        snprintf(why, sizeof why, "its process was killed by signal %d", WTERMSIG(status));

    if (df != NULL && dn == 2) {
        json_error_t jerr;
        done = json_loadb(df[0].data, df[0].size, 0, &jerr);
    }
    pyc_py_enter();
    pyc_py_interrupt_disarm();
    if (done != NULL) {
        res->ok = json_is_true(json_object_get(done, "ok"));
        res->error = json_incref(json_object_get(done, "error"));
        res->user_expressions = json_incref(json_object_get(done, "user_expressions"));
        res->payload = json_incref(json_object_get(done, "payload"));
        json_array_extend(merged, json_object_get(done, "merged"));
        json_object_update(skipped, json_object_get(done, "skipped"));
        json_t *m2 = NULL, *s2 = NULL;
        pyc_error_t err;
        if (df[1].size > 0 && pyc_py_isolate_merge(df[1].data, df[1].size, &m2, &s2, &err) == 0) {
            /* what failed to load here moves from merged to skipped */
            size_t i;
            json_t *v;
            const char *name;
            json_object_foreach(s2, name, v) {
                json_array_foreach(merged, i, v) {
                    if (strcmp(json_string_value(v), name) == 0) {
                        json_array_remove(merged, i);
                        break;
                    }
                }
            }
            json_object_update(skipped, s2);
        } else if (df[1].size > 0) {
            json_object_set_new(skipped, "*", json_string(err.text));
            json_array_clear(merged);
        }
        json_decref(m2);
        json_decref(s2);
        if (!res->ok)
            outcome = "error";
    }
    pyc_py_leave();
out:
    if (done == NULL) {
        const char *ename = strcmp(outcome, "interrupted") == 0 ? "KeyboardInterrupt" : "IsolatedCellDied";
        char evalue[512];
        if (strcmp(outcome, "interrupted") == 0)
            snprintf(evalue, sizeof evalue, "the isolated cell was interrupted: its process was killed; the "
                                            "kernel's state is as it was before the cell");
        else
            snprintf(evalue, sizeof evalue, "the isolated cell's process ended without a result (%s); the "
                                            "kernel's state is as it was before the cell", why[0] ? why : "no report");
        res->error = json_pack("{s:s, s:s, s:[s]}", "ename", ename, "evalue", evalue, "traceback", evalue);
        res->user_expressions = json_object();
        res->payload = json_array();
    }
    *md_out = json_pack("{s:s, s:s, s:o, s:o, s:s}", "isolated", "fork", "outcome", outcome, "merged", merged,
                        "skipped", skipped, "state", "intact");
    json_decref(done);
    for (size_t i = 0; i < dn; i++)
        free(df[i].owned);
    free(df);
}

/* Reads the isolation a request asks for: metadata {"pyc": {"isolate": "fork"}}, or a first line
 * "%%isolate [S]" (removed from *code; S, a duration, goes into *timeout, else 0).  Returns 1 when the cell
 * is to run isolated, 0 when not, -1 with err for a bad duration.  The metadata's "timeout" is the cell's
 * deadline either way (pyc_limits_for_cell). */
static int
isolation_of(const pyc_msg_t *msg, const char **code, double *timeout, pyc_error_t *err)
{
    json_t *iso = json_object_get(json_object_get(msg->metadata, "pyc"), "isolate");
    *timeout = 0;
    if (json_is_string(iso) && strcmp(json_string_value(iso), "fork") == 0)
        return 1;
    if (strncmp(*code, "%%isolate", 9) == 0 && ((*code)[9] == '\n' || (*code)[9] == ' ' || (*code)[9] == '\0')) {
        const char *p = *code + 9;
        const char *nl = strchr(*code, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        char arg[64];
        snprintf(arg, sizeof arg, "%.*s", (int)(n < sizeof arg - 1 ? n : sizeof arg - 1), p);
        if (strspn(arg, " ") != strlen(arg) && pyc_limits_parse_seconds(arg, timeout, err) < 0)
            return -1;
        *code = nl != NULL ? nl + 1 : "";
        return 1;
    }
    return 0;
}

/* ---- the outcome of a cell ------------------------------------------------------------------------------ */

static double
ts_diff(const struct timespec *a, const struct timespec *b)
{
    return (double)(a->tv_sec - b->tv_sec) + (double)(a->tv_nsec - b->tv_nsec) / 1e9;
}

/* CPU seconds of the children reaped so far (an isolated cell's process is one). */
static double
children_cpu(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) < 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static void
clock_start(cell_clock_t *c)
{
    clock_gettime(CLOCK_MONOTONIC, &c->wall);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c->cpu);
    c->children_cpu = children_cpu();
}

/* Wall and CPU seconds since clock_start. */
static void
clock_read(const cell_clock_t *c, double *wall, double *cpu)
{
    struct timespec w, p;
    clock_gettime(CLOCK_MONOTONIC, &w);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p);
    *wall = ts_diff(&w, &c->wall);
    *cpu = ts_diff(&p, &c->cpu) + (children_cpu() - c->children_cpu);
}

static const char *const limit_names[] = {[PYC_GUARD_NONE] = NULL, [PYC_GUARD_DEADLINE] = "deadline",
                                          [PYC_GUARD_LIFETIME] = "lifetime", [PYC_GUARD_IDLE] = "idle"};

/* The error of a cell stopped by a limit: ename CellTimeout (its deadline) or KernelLifetimeEnded.
 * `stuck` is the case where the cell did not stop and the kernel is ending. */
static json_t *
limit_error(const pyc_kernel_t *k, int why, bool stuck, json_t *traceback)
{
    char evalue[512];
    const char *ename = why == PYC_GUARD_LIFETIME ? "KernelLifetimeEnded" : "CellTimeout";
    const char *what = k->cell_isolated ? "the isolated cell" : "the cell";
    if (why == PYC_GUARD_LIFETIME)
        snprintf(evalue, sizeof evalue, "the kernel's lifetime of %g s ended while %s ran", k->limits.lifetime,
                 what);
    else
        snprintf(evalue, sizeof evalue, "%s ran past its deadline of %g s", what, k->cell_timeout);
    size_t n = strlen(evalue);
    if (stuck)
        snprintf(evalue + n, sizeof evalue - n, " and did not stop within %g s of being interrupted (stuck in "
                 "code that does not check for signals); the kernel is ending and the session's state is lost",
                 k->limits.cell_grace);
    else if (k->cell_isolated)
        snprintf(evalue + n, sizeof evalue - n, "; its process was killed and the kernel's state is as it was "
                 "before the cell");
    else
        snprintf(evalue + n, sizeof evalue - n, "; it was interrupted and the kernel goes on (what the cell did "
                 "before the interrupt stays done)%s", why == PYC_GUARD_LIFETIME ? ", then shuts down" : "");
    json_t *tb = json_array();
    if (json_is_array(traceback) && !k->cell_isolated) {
        /* Where the cell was when it was stopped, without the KeyboardInterrupt line that CellTimeout's
         * own line replaces. */
        json_array_extend(tb, traceback);
        size_t len = json_array_size(tb);
        const char *last = len > 0 ? json_string_value(json_array_get(tb, len - 1)) : NULL;
        if (last != NULL && strncmp(last, "KeyboardInterrupt", 17) == 0)
            json_array_remove(tb, len - 1);
    }
    json_array_append_new(tb, json_sprintf("%s: %s", ename, evalue));
    return json_pack("{s:s, s:s, s:o}", "ename", ename, "evalue", evalue, "traceback", tb);
}

/* metadata.pyc of an execute_reply: what happened to the cell (README, "Limits and outcomes"). */
static json_t *
outcome_metadata(pyc_kernel_t *k, const char *outcome, bool interrupted, int why, bool memory_hit, bool lost)
{
    double wall, cpu;
    clock_read(&k->cell_clock, &wall, &cpu);
    out_gate_t *g = &k->out;
    pthread_mutex_lock(&g->lock);
    json_t *output = json_pack("{s:I, s:I, s:I, s:I}", "bytes", (json_int_t)g->bytes, "messages",
                               (json_int_t)g->msgs, "dropped_bytes", (json_int_t)g->dropped_bytes,
                               "dropped_messages", (json_int_t)g->dropped_msgs);
    bool dropped = g->dropped_msgs > 0 || g->dropped_bytes > 0;
    pthread_mutex_unlock(&g->lock);
    return json_pack("{s:s, s:b, s:b, s:o, s:b, s:o, s:b, s:s, s:b, s:f, s:f}", "outcome", outcome,
                     "interrupted", interrupted, "timed_out", why != PYC_GUARD_NONE, "limit",
                     why != PYC_GUARD_NONE ? json_string(limit_names[why]) : json_null(), "output_dropped",
                     dropped, "output", output, "memory_cap_hit", memory_hit, "state", lost ? "lost" : "intact",
                     "kernel_ending", lost || atomic_load(&k->quit) != 0, "wall_time", wall, "cpu_time", cpu);
}

/* Publishes the one notice of a cell whose output was capped. */
static void
output_notice(pyc_kernel_t *k, const pyc_msg_t *msg)
{
    out_gate_t *g = &k->out;
    char text[512];
    pthread_mutex_lock(&g->lock);
    if (g->dropped_msgs == 0 && g->dropped_bytes == 0) {
        pthread_mutex_unlock(&g->lock);
        return;
    }
    int n = snprintf(text, sizeof text, "\n[pyc] output limit reached: %zu bytes of this cell's output were "
                     "dropped, %zu whole message%s among them (limit:", g->dropped_bytes, g->dropped_msgs,
                     g->dropped_msgs == 1 ? "" : "s");
    if (g->max_bytes > 0)
        n += snprintf(text + n, sizeof text - (size_t)n, " %zu bytes", g->max_bytes);
    if (g->max_msgs > 0)
        n += snprintf(text + n, sizeof text - (size_t)n, "%s %zu messages", g->max_bytes > 0 ? "," : "",
                      g->max_msgs);
    snprintf(text + n, sizeof text - (size_t)n, ")\n");
    pthread_mutex_unlock(&g->lock);
    publish_to(k, msg, "stream", json_pack("{s:s, s:s}", "name", "stderr", "text", text));
}

/* Under a memory cap: keeps MEM_RESERVE mapped so that it can be given back when a cell exhausts the cap. */
static void
memory_reserve(pyc_kernel_t *k, bool keep)
{
    if (k->limits.memory == 0)
        return;
    if (keep && k->mem_reserve == NULL) {
        void *p = mmap(NULL, MEM_RESERVE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       0);
        k->mem_reserve = p != MAP_FAILED ? p : NULL;
    } else if (!keep && k->mem_reserve != NULL) {
        munmap(k->mem_reserve, MEM_RESERVE);
        k->mem_reserve = NULL;
    }
}

/* True when the cell's error is a MemoryError (or the cell's process died of one). */
static bool
is_memory_error(json_t *error)
{
    const char *ename = json_string_value(json_object_get(error, "ename"));
    return ename != NULL && strcmp(ename, "MemoryError") == 0;
}

/* The session's checkpoint, made on first use (the interpreter's version goes into its header); NULL when
 * checkpoints are off. */
static pyc_checkpoint_t *
checkpoint_of(pyc_kernel_t *k)
{
    if (k->checkpoint == NULL && k->checkpoint_dir != NULL) {
        pyc_error_t err;
        k->checkpoint = pyc_checkpoint_new(k->checkpoint_dir, k->session_id, pyc_py_version(), &err);
        if (k->checkpoint == NULL) {
            pyc_log("%s; checkpoints are off", err.text);
            free(k->checkpoint_dir);
            k->checkpoint_dir = NULL;
        }
    }
    return k->checkpoint;
}

/* Appends a successful cell to the session's checkpoint; a failure is logged once. */
static void
checkpoint_cell(pyc_kernel_t *k, int count, const char *code)
{
    pyc_error_t err;
    if (checkpoint_of(k) == NULL)
        return;
    if (pyc_checkpoint_add(k->checkpoint, count, code, &err) < 0) {
        if (!k->checkpoint_failed)
            pyc_log("%s (checkpoints are off until it works)", err.text);
        k->checkpoint_failed = true;
    } else {
        k->checkpoint_failed = false;
    }
}

static void
on_execute(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *c = msg->content;
    json_t *code_v = json_object_get(c, "code");
    pyc_cell_limits_t cl;
    pyc_error_t lerr;
    const char *bad = NULL, *code = json_string_value(code_v);
    double iso_timeout = 0;
    int isolated = 0;
    if (!json_is_string(code_v))
        bad = "execute_request content lacks a string 'code'";
    else if (pyc_limits_for_cell(&k->limits, json_object_get(msg->metadata, "pyc"), &cl, &lerr) < 0 ||
             (isolated = isolation_of(msg, &code, &iso_timeout, &lerr)) < 0)
        bad = lerr.text;
    clock_start(&k->cell_clock);
    if (bad != NULL) {
        json_t *md = reply_metadata("error");
        json_object_set_new(md, "pyc", json_pack("{s:s, s:s}", "outcome", "bad_request", "state", "intact"));
        reply(k, chan, msg, "execute_reply", md,
              json_pack("{s:s, s:i, s:s, s:s, s:[o], s:{}}", "status", "error", "execution_count",
                        k->execution_count, "ename", "BadRequest", "evalue", bad, "traceback",
                        json_sprintf("BadRequest: %s", bad), "user_expressions"));
        return;
    }
    bool silent = get_bool(c, "silent", false);
    bool store_history = silent ? false : get_bool(c, "store_history", true);
    bool stop_on_error = get_bool(c, "stop_on_error", true);
    json_t *uexpr = json_object_get(c, "user_expressions");

    if (k->aborting) {
        abort_reply(k, chan, msg);
        return;
    }
    if (store_history)
        k->execution_count++;
    int count = k->execution_count;
    if (store_history && history_of(k) != NULL) {
        pyc_error_t err;
        if (!k->history_batch && pyc_history_batch(k->history, true, &err) == 0)
            k->history_batch = true;
        if (pyc_history_add(k->history, count, json_string_value(code_v), NULL, &err) < 0)
            pyc_log("%s", err.text);
    }
    if (!silent)
        publish_to(k, msg, "execute_input", json_pack("{s:O, s:i}", "code", code_v, "execution_count", count));

    pyc_py_exec_opts_t opts = {
        .silent = silent,
        .store_history = store_history,
        .allow_stdin = get_bool(c, "allow_stdin", true),
        .execution_count = count,
        .user_expressions = json_is_object(uexpr) ? uexpr : NULL,
    };
    pyc_py_exec_result_t res = {0};
    k->allow_stdin = opts.allow_stdin;
    pyc_streams_flush(k->streams);
    if (silent)
        pyc_streams_set_discard(k->streams, true);
    json_t *iso_md = NULL;
    if (isolated)
        cl.timeout = pyc_limits_tighter(cl.timeout, iso_timeout);

    k->cell_chan = chan;
    k->cell_count = count;
    k->cell_silent = silent;
    k->cell_isolated = isolated;
    k->cell_timeout = cl.timeout;
    gate_set(k, true, cl.output_bytes, cl.output_messages);
    memory_reserve(k, true);
    unsigned irq0 = pyc_py_interrupt_count();
    pyc_guard_cell_begin(k->guard, cl.timeout);
    if (isolated) {
        run_isolated(k, code, &opts, &res, &iso_md);      /* the guard keeps its deadline */
    } else {
        atomic_store(&k->executing, 1);
        pyc_py_enter();
        pyc_py_execute(code, &opts, &res);
        pyc_py_leave();
        atomic_store(&k->executing, 0);
    }
    int why;
    if (!pyc_guard_cell_end(k->guard, &why)) {
        /* The guard gave up on this cell and is ending the process; the channels are its now. */
        for (;;)
            pause();
    }
    pyc_streams_flush(k->streams);
    gate_set(k, false, 0, 0);
    if (silent)
        pyc_streams_set_discard(k->streams, false);

    bool interrupted = pyc_py_interrupt_count() != irq0 || why != PYC_GUARD_NONE;
    const char *outcome = res.ok ? "ok" : "error";
    if (iso_md != NULL)
        outcome = json_string_value(json_object_get(iso_md, "outcome"));
    if (why != PYC_GUARD_NONE) {
        json_t *e = limit_error(k, why, false, json_object_get(res.error, "traceback"));
        json_decref(res.error);
        res.error = e;
        res.ok = false;
        outcome = why == PYC_GUARD_LIFETIME ? "lifetime" : "timeout";
    } else if (!res.ok && interrupted && iso_md == NULL) {
        outcome = "interrupted";
    }
    bool memory_hit = !res.ok && k->limits.memory > 0 && is_memory_error(res.error);
    if (memory_hit)
        memory_reserve(k, false);          /* room for the C side to report it; taken again next cell */
    if (!silent)
        output_notice(k, msg);
    if (res.ok && !silent && store_history)
        checkpoint_cell(k, count, code);   /* without a %%isolate line: replay runs it in the kernel */

    if (!res.ok && stop_on_error && !silent) {
        /* Take the requests already waiting before the reply goes out: a request sent after the client
         * saw this reply must not be aborted. */
        k->aborting = true;
        pyc_msg_t *m;
        while ((m = k->io->next_pending(k->io)) != NULL) {
            pyc_msg_t **grown = realloc(k->queued, (k->n_queued + 1) * sizeof *grown);
            if (grown == NULL) {
                pyc_log("shell: dropped message: out of memory while aborting");
                pyc_msg_destroy(&m);
                continue;
            }
            k->queued = grown;
            k->queued[k->n_queued++] = m;
        }
    }
    json_t *content;
    if (res.payload == NULL)
        res.payload = json_array();
    if (res.user_expressions == NULL)
        res.user_expressions = json_object();
    if (res.ok) {
        content = json_pack("{s:s, s:i, s:O, s:O}", "status", "ok", "execution_count", count,
                            "user_expressions", res.user_expressions, "payload", res.payload);
    } else {
        if (!silent)
            publish_to(k, msg, "error", json_deep_copy(res.error));
        content = json_deep_copy(res.error);
        json_object_set_new(content, "status", json_string("error"));
        json_object_set_new(content, "execution_count", json_integer(count));
        json_object_set(content, "user_expressions", res.user_expressions);
        json_object_set(content, "payload", res.payload);
    }
    json_t *md = reply_metadata(res.ok ? "ok" : "error");
    json_t *pmd = outcome_metadata(k, outcome != NULL ? outcome : "error", interrupted, why, memory_hit, false);
    if (iso_md != NULL) {
        json_object_del(iso_md, "outcome");
        json_object_update(pmd, iso_md);
        json_decref(iso_md);
    }
    json_object_set_new(md, "pyc", pmd);
    reply(k, chan, msg, "execute_reply", md, content);
    json_decref(res.error);
    json_decref(res.user_expressions);
    json_decref(res.payload);
}

static void
on_kernel_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_error_t jerr;
    reply(k, chan, msg, "kernel_info_reply", NULL, json_loads(k->kernel_info, 0, &jerr));
}

static void
on_is_complete(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *code = json_object_get(msg->content, "code");
    json_t *content;
    if (!json_is_string(code)) {
        content = json_pack("{s:s}", "status", "unknown");
    } else {
        pyc_py_enter();
        content = pyc_py_is_complete(json_string_value(code));
        pyc_py_leave();
    }
    reply(k, chan, msg, "is_complete_reply", NULL, content);
}

/* Reads code and cursor_pos (default: the end of the code, counted in code points) of a request. */
static const char *
code_and_cursor(const pyc_msg_t *msg, long *cursor_pos)
{
    json_t *code = json_object_get(msg->content, "code");
    json_t *pos = json_object_get(msg->content, "cursor_pos");
    if (!json_is_string(code))
        return NULL;
    const char *c = json_string_value(code);
    if (json_is_integer(pos)) {
        *cursor_pos = (long)json_integer_value(pos);
    } else {
        long n = 0;
        for (const unsigned char *p = (const unsigned char *)c; *p != '\0'; p++)
            n += (*p & 0xC0) != 0x80;
        *cursor_pos = n;
    }
    return c;
}

static json_t *
bad_request(const char *what)
{
    return json_pack("{s:s, s:s, s:s, s:[]}", "status", "error", "ename", "BadRequest", "evalue", what,
                     "traceback");
}

static void
on_complete(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    long pos;
    const char *code = code_and_cursor(msg, &pos);
    json_t *content;
    if (code == NULL) {
        content = bad_request("complete_request content lacks a string 'code'");
    } else {
        pyc_py_enter();
        content = pyc_py_complete(code, pos);
        pyc_py_leave();
    }
    reply(k, chan, msg, "complete_reply", NULL, content);
}

static void
on_inspect(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    long pos;
    const char *code = code_and_cursor(msg, &pos);
    json_t *detail = json_object_get(msg->content, "detail_level");
    json_t *content;
    if (code == NULL) {
        content = bad_request("inspect_request content lacks a string 'code'");
    } else {
        pyc_py_enter();
        content = pyc_py_inspect(code, pos, json_is_integer(detail) ? (int)json_integer_value(detail) : 0);
        pyc_py_leave();
    }
    reply(k, chan, msg, "inspect_reply", NULL, content);
}

/* comm_open, comm_msg, comm_close from the frontend go to the comm manager inside the interpreter
 * (pyc._comm), which holds the targets registered from Python. */
/* Reaps the children that ended (those that outlive us too, or they would stay zombies while we run); keeps
 * the list to the live ones. */
static void
reap_children(pyc_kernel_t *k)
{
    int live = 0;
    for (int i = 0; i < k->n_children; i++) {
        if (waitpid(k->children[i].pid, NULL, WNOHANG) == 0) {
            k->children[live++] = k->children[i];
        } else {
            /* A child that ended by a signal could not remove its connection file. */
            unlink(k->children[i].file);
            free(k->children[i].file);
        }
    }
    k->n_children = live;
}

/* Records a new child and its connection file. */
static void
add_child(pyc_kernel_t *k, pid_t pid, const char *file, bool outlive)
{
    char *f = strdup(file != NULL ? file : "");
    child_t *grown = f != NULL ? realloc(k->children, (size_t)(k->n_children + 1) * sizeof *grown) : NULL;
    if (grown == NULL) {
        free(f);
        pyc_log("fork: out of memory: child %ld will not be reaped", (long)pid);
        return;
    }
    k->children = grown;
    k->children[k->n_children++] = (child_t){pid, f, outlive};
}

/* The kernel is ending: children that were not asked to outlive it end now (they would anyway, by
 * PR_SET_PDEATHSIG), and their connection files go. */
static void
end_children(pyc_kernel_t *k)
{
    for (int i = 0; i < k->n_children; i++) {
        if (k->children[i].outlive)
            continue;
        kill(k->children[i].pid, SIGKILL);
        unlink(k->children[i].file);
    }
}

/* Comm target pyc.fork: {"n": N, "outlive": false} forks N children from the state after the last
 * finished request; the answer is one comm_msg {"status": "ok", "children": [{pid, connection_file,
 * connection}...]} (or {"status": "error", "ename", "evalue"}), then comm_close. */
static void
on_fork(pyc_kernel_t *k, const pyc_msg_t *msg)
{
    json_t *content = msg->content;
    const char *comm_id = json_string_value(json_object_get(content, "comm_id"));
    json_t *data = json_object_get(content, "data");
    json_t *nv = json_object_get(data, "n");
    json_int_t n = json_is_integer(nv) ? json_integer_value(nv) : nv == NULL ? 1 : -1;
    bool outlive = json_is_true(json_object_get(data, "outlive"));
    json_t *children = json_array(), *result = NULL;
    pyc_error_t err;

    reap_children(k);
    if (comm_id == NULL) {
        pyc_log("pyc.fork: comm_open without a comm_id");
        json_decref(children);
        return;
    }
    if (k->fork_child == NULL || n < 1 || n > k->max_children - k->n_children) {
        json_decref(children);   /* the error answers carry no children */
        children = NULL;
    }
    if (k->fork_child == NULL) {
        result = json_pack("{s:s, s:s, s:s}", "status", "error", "ename", "ForkError", "evalue",
                           "this kernel cannot fork");
    } else if (n < 1 || n > k->max_children - k->n_children) {
        result = json_pack("{s:s, s:s, s:o}", "status", "error", "ename", "ForkError", "evalue",
                           json_sprintf("n must be a whole number from 1 to %d (at most %d live children)",
                                        k->max_children - k->n_children, k->max_children));
    } else {
        for (json_int_t i = 0; i < n; i++) {
            json_t *info = NULL;
            int pid = k->fork_child(k->fork_ctx, outlive, &info, &err);
            if (pid == 0) {      /* the child: the parent answers this request, not us */
                k->just_forked = true;
                json_decref(children);
                return;
            }
            if (pid < 0) {
                result = json_pack("{s:s, s:s, s:s, s:o}", "status", "error", "ename", "ForkError", "evalue",
                                   err.text, "children", children);
                children = NULL;
                break;
            }
            add_child(k, pid, json_string_value(json_object_get(info, "connection_file")), outlive);
            json_array_append_new(children, info);
        }
        if (result == NULL)
            result = json_pack("{s:s, s:o}", "status", "ok", "children", children);
    }
    if (result == NULL)
        return;
    publish_to(k, msg, "comm_msg", json_pack("{s:s, s:o}", "comm_id", comm_id, "data", result));
    publish_to(k, msg, "comm_close", json_pack("{s:s, s:{}}", "comm_id", comm_id, "data"));
}

static void
on_comm(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    (void)chan;
    json_t *target = json_object_get(msg->content, "target_name");
    if (strcmp(msg->msg_type, "comm_open") == 0 && json_is_string(target) &&
        strcmp(json_string_value(target), "pyc.fork") == 0) {
        on_fork(k, msg);
        return;
    }
    pyc_py_enter();
    pyc_py_comm(msg);
    pyc_py_leave();
}

static void
on_comm_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pyc_py_enter();
    json_t *content = pyc_py_comm_info(msg->content);
    pyc_py_leave();
    reply(k, chan, msg, "comm_info_reply", NULL, content);
}

static void
on_history(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pyc_kernel_idle(k);          /* the answer includes the cells of the open batch */
    reply(k, chan, msg, "history_reply", NULL, pyc_history_request(history_of(k), msg->content));
}

static void
on_connect(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    reply(k, chan, msg, "connect_reply", NULL,
          json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "status", "ok", "shell_port", k->cf.ports[PYC_CHAN_SHELL],
                    "iopub_port", k->cf.ports[PYC_CHAN_IOPUB], "stdin_port", k->cf.ports[PYC_CHAN_STDIN],
                    "control_port", k->cf.ports[PYC_CHAN_CONTROL], "hb_port", k->cf.ports[PYC_CHAN_HB]));
}

/* Asks the main thread to stop the running cell, if any. */
static void
interrupt_main(pyc_kernel_t *k)
{
    if (atomic_load(&k->executing))
        pthread_kill(k->main_thread, SIGINT);
}

static void
on_shutdown(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    bool restart = get_bool(msg->content, "restart", false);
    reply(k, chan, msg, "shutdown_reply", NULL, json_pack("{s:s, s:b}", "status", "ok", "restart", restart));
    publish_to(k, msg, "shutdown_reply", json_pack("{s:s, s:b}", "status", "ok", "restart", restart));
    atomic_store(&k->restart, restart);
    atomic_store(&k->quit, 1);
    interrupt_main(k);
    if (k->wake_main != NULL)
        k->wake_main(k->wake_ctx);
}

static void
on_interrupt(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    /* Delivered as a real SIGINT to the main thread so that blocking calls (time.sleep) wake up. */
    pthread_kill(k->main_thread, SIGINT);
    reply(k, chan, msg, "interrupt_reply", NULL, json_pack("{s:s}", "status", "ok"));
}

/* usage_request (control): the kernel's CPU and memory from /proc, with the host's, in ipykernel's shape,
 * plus what pyc knows of the session. */
static void
on_usage(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pthread_mutex_lock(&k->usage_lock);
    json_t *r = pyc_usage_report(getpid(), &k->usage);
    pthread_mutex_unlock(&k->usage_lock);
    if (r == NULL) {
        reply(k, chan, msg, "usage_reply", NULL,
              json_pack("{s:s, s:s, s:s}", "status", "error", "ename", "UsageError", "evalue",
                        "cannot read /proc for this process"));
        return;
    }
    json_t *p = json_object_get(r, "pyc");
    json_object_set_new(p, "uptime", json_real(pyc_guard_uptime(k->guard)));
    json_object_set_new(p, "execution_count", json_integer(k->execution_count));
    json_object_set_new(p, "execution_state", json_string(atomic_load(&k->executing) ? "busy" : "idle"));
    json_object_set_new(p, "limits", pyc_limits_to_json(&k->limits));
    json_object_set_new(r, "status", json_string("ok"));
    reply(k, chan, msg, "usage_reply", NULL, r);
}

/* ---- limits: the guard's callbacks (guard thread) ------------------------------------------------------- */

static void
guard_interrupt(void *ctx, int why)
{
    pyc_kernel_t *k = ctx;
    pyc_log("cell %d ran past its %s; interrupting it", k->cell_count, limit_names[why]);
    pthread_kill(k->main_thread, SIGINT);
}

static void
guard_expire(void *ctx, int why)
{
    pyc_kernel_t *k = ctx;
    if (why == PYC_GUARD_IDLE)
        pyc_log("no request for %g s (the idle timeout); shutting down", k->limits.idle_timeout);
    else
        pyc_log("the kernel's lifetime of %g s is over; shutting down", k->limits.lifetime);
    atomic_store(&k->quit, 1);
    interrupt_main(k);
    if (k->wake_main != NULL)
        k->wake_main(k->wake_ctx);
}

/* A cell did not stop after its interrupt: tell the client, then end the process.  The main thread is stuck
 * in the cell and will never send again (pyc_guard_cell_end fails for it). */
static void
guard_stuck(void *ctx, int why)
{
    pyc_kernel_t *k = ctx;
    const pyc_msg_t *msg = k->current;
    pyc_log("cell %d did not stop within %g s of being interrupted; ending the kernel (its state is lost)",
            k->cell_count, k->limits.cell_grace);
    pyc_streams_flush(k->streams);
    pthread_mutex_lock(&k->out.lock);
    k->out.dropping = true;      /* whatever the stuck cell or its threads print now goes nowhere */
    pthread_mutex_unlock(&k->out.lock);
    if (msg != NULL) {
        json_t *err = limit_error(k, why, true, NULL);
        if (!k->cell_silent) {
            output_notice(k, msg);
            publish_to(k, msg, "error", json_deep_copy(err));
        }
        json_t *content = err;
        json_object_set_new(content, "status", json_string("error"));
        json_object_set_new(content, "execution_count", json_integer(k->cell_count));
        json_object_set_new(content, "user_expressions", json_object());
        json_object_set_new(content, "payload", json_array());
        json_t *md = reply_metadata("error");
        json_object_set_new(md, "pyc", outcome_metadata(k, why == PYC_GUARD_LIFETIME ? "lifetime" : "timeout",
                                                        true, why, false, true));
        reply(k, k->cell_chan, msg, "execute_reply", md, content);
        status(k, msg, "idle");
    }
    end_children(k);
    k->hard_exit(k->hard_exit_ctx, 3);
}

static void
guard_overdue(void *ctx)
{
    pyc_kernel_t *k = ctx;
    pyc_log("shutdown took longer than its grace of %g s; exiting without finishing it",
            k->limits.shutdown_grace);
    end_children(k);
    k->hard_exit(k->hard_exit_ctx, 0);
}

typedef void (*handler_fn)(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);

static const struct {
    const char *type;
    handler_fn fn;
    bool control_thread;         /* answered in the control thread, without Python */
} handlers[] = {
    {"execute_request", on_execute, false},
    {"kernel_info_request", on_kernel_info, true},
    {"is_complete_request", on_is_complete, false},
    {"complete_request", on_complete, false},
    {"inspect_request", on_inspect, false},
    {"comm_info_request", on_comm_info, false},
    {"history_request", on_history, false},
    {"comm_open", on_comm, false},
    {"comm_msg", on_comm, false},
    {"comm_close", on_comm, false},
    {"connect_request", on_connect, false},
    {"shutdown_request", on_shutdown, true},
    {"interrupt_request", on_interrupt, true},
    {"usage_request", on_usage, true},
};

static handler_fn
find_handler(const char *type, bool *control_thread)
{
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++) {
        if (strcmp(handlers[i].type, type) == 0) {
            if (control_thread != NULL)
                *control_thread = handlers[i].control_thread;
            return handlers[i].fn;
        }
    }
    return NULL;
}

/* Handles one request between busy and idle. */
static void
dispatch(pyc_kernel_t *k, int chan, pyc_msg_t *msg)
{
    status(k, msg, "busy");
    handler_fn fn = find_handler(msg->msg_type, NULL);
    if (fn != NULL)
        fn(k, chan, msg);
    else
        pyc_log("%s: unknown message type '%s' (no reply)", chan == PYC_CHAN_CONTROL ? "control" : "shell",
                msg->msg_type);
    if (k->just_forked)
        return;                  /* a new child: the request was its parent's, and so is its idle */
    pyc_streams_flush(k->streams);
    status(k, msg, "idle");
}

bool
pyc_kernel_control(void *ctx, pyc_msg_t *msg)
{
    pyc_kernel_t *k = ctx;
    bool in_control = false;
    handler_fn fn = find_handler(msg->msg_type, &in_control);
    /* A resource indicator polling usage_request does not keep an idle kernel alive. */
    if (strcmp(msg->msg_type, "usage_request") != 0)
        pyc_guard_activity(k->guard);
    if (fn == NULL || !in_control)
        return false;
    status(k, msg, "busy");
    fn(k, PYC_CHAN_CONTROL, msg);
    status(k, msg, "idle");
    pyc_msg_destroy(&msg);
    return true;
}

void
pyc_kernel_handle(pyc_kernel_t *k, int chan, pyc_msg_t *msg)
{
    pyc_guard_activity(k->guard);
    set_parent(k, msg);
    k->current = msg;
    dispatch(k, chan, msg);
    k->current = NULL;
    pyc_guard_activity(k->guard);
    if (k->just_forked) {
        /* The request's frames are the parent's ZeroMQ messages: leave them alone in the child. */
        k->just_forked = false;
        pyc_kernel_keep_inherited(msg);
        return;
    }
    pyc_msg_destroy(&msg);
    if (!k->aborting)
        return;
    /* A cell failed with stop_on_error: every execute request that was waiting then is aborted, each with
     * its own busy and idle; other requests that were waiting are answered as usual, in order. */
    for (size_t i = 0; i < k->n_queued; i++) {
        pyc_msg_t *next = k->queued[i];
        set_parent(k, next);
        k->current = next;
        dispatch(k, PYC_CHAN_SHELL, next);
        k->current = NULL;
        pyc_msg_destroy(&next);
    }
    free(k->queued);
    k->queued = NULL;
    k->n_queued = 0;
    k->aborting = false;
}

pid_t
pyc_kernel_fork(pyc_kernel_t *k, int *errno_out)
{
    /* The GIL first, then CPython's before-fork handlers (Python code: it may print, so none of our locks
     * may be held yet), then the streams lock, the parent lock and the output cap's lock -- the order every
     * other path takes them -- around the bare fork(2) only, so that the child never inherits one of them
     * taken by another thread.  The guard's lock is not taken: a forked kernel starts a guard of its own
     * (pyc_guard_restart_in_child) and an isolated cell's child never uses it. */
    pyc_py_enter();
    pyc_py_fork_prepare();
    pyc_streams_lock(k->streams);
    pthread_mutex_lock(&k->parent_lock);
    pthread_mutex_lock(&k->out.lock);
    pid_t pid = fork();
    *errno_out = errno;
    pthread_mutex_unlock(&k->out.lock);
    pthread_mutex_unlock(&k->parent_lock);
    pyc_streams_unlock(k->streams);
    pyc_py_fork_done(pid);
    pyc_py_leave();
    return pid;
}

int
pyc_kernel_become_child(pyc_kernel_t *k, pyc_io_t *io, pyc_auth_t *auth, const pyc_connfile_t *cf,
                        const char *id, pyc_error_t *err)
{
    k->io = io;
    k->auth = auth;
    k->cf = *cf;
    k->cf.key = NULL;
    k->cf.keylen = 0;
    pyc_msg_new_id(k->session);
    k->main_thread = pthread_self();
    atomic_store(&k->executing, 0);
    atomic_store(&k->quit, 0);
    for (int i = 0; i < k->n_children; i++)
        free(k->children[i].file);   /* the parent's children are not ours */
    free(k->children);
    k->children = NULL;
    k->n_children = 0;
    /* The SQLite connection must not cross fork(): forget it and start a session of our own. */
    pyc_kernel_keep_inherited(k->history);
    k->history = NULL;
    k->history_tried = false;
    k->history_batch = false;
    if (pyc_guard_restart_in_child(k->guard, err) < 0)
        return -1;
    /* A forked session checkpoints on its own, starting from every cell of its parent's. */
    if (k->checkpoint_dir != NULL && id != NULL) {
        pyc_error_t cerr;
        char *nid = strdup(id);
        if (nid != NULL) {
            free(k->session_id);
            k->session_id = nid;
        }
        if (k->checkpoint != NULL && pyc_checkpoint_fork(k->checkpoint, k->checkpoint_dir, id, &cerr) < 0)
            pyc_log("%s", cerr.text);
    }
    pyc_streams_abandon(&k->streams);
    k->streams = pyc_streams_new(on_stream_publish, k, err);
    if (k->streams == NULL)
        return -1;
    return pyc_streams_capture_fds(k->streams, err);
}

void
pyc_kernel_idle(pyc_kernel_t *k)
{
    if (k->n_children > 0)
        reap_children(k);
    if (k->history_batch) {
        pyc_error_t err;
        if (pyc_history_batch(k->history, false, &err) < 0)
            pyc_log("%s", err.text);
        k->history_batch = false;
    }
}

bool
pyc_kernel_quitting(pyc_kernel_t *k, bool *restart)
{
    if (restart != NULL)
        *restart = atomic_load(&k->restart);
    return atomic_load(&k->quit) != 0;
}

/* ---- life cycle ------------------------------------------------------------------------------------ */

pyc_kernel_t *
pyc_kernel_new(const pyc_kernel_config_t *cfg, pyc_error_t *err)
{
    pyc_kernel_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    k->io = cfg->io;
    k->auth = cfg->auth;
    k->cf = *cfg->cf;
    k->cf.key = NULL;
    k->cf.keylen = 0;
    k->wake_main = cfg->wake_main;
    k->wake_ctx = cfg->wake_ctx;
    k->fork_child = cfg->fork_child;
    k->fork_ctx = cfg->fork_ctx;
    k->max_children = cfg->max_children > 0 ? cfg->max_children : 32;
    k->main_thread = pthread_self();
    pthread_mutex_init(&k->parent_lock, NULL);
    pthread_mutex_init(&k->out.lock, NULL);
    pthread_mutex_init(&k->usage_lock, NULL);
    if (cfg->limits != NULL)
        k->limits = *cfg->limits;
    else
        pyc_limits_init(&k->limits);
    k->hard_exit = cfg->hard_exit;
    k->hard_exit_ctx = cfg->hard_exit_ctx;
    pyc_guard_callbacks_t gcb = {guard_interrupt, guard_stuck, guard_expire, guard_overdue, k};
    k->guard = pyc_guard_new(&k->limits, &gcb, err);
    if (k->guard == NULL) {
        pyc_kernel_destroy(&k);
        return NULL;
    }
    if (cfg->checkpoint_dir != NULL && cfg->session_id != NULL) {
        k->checkpoint_dir = strdup(cfg->checkpoint_dir);
        k->session_id = strdup(cfg->session_id);
        if (k->checkpoint_dir == NULL || k->session_id == NULL) {
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
            pyc_kernel_destroy(&k);
            return NULL;
        }
    }
    pyc_msg_new_id(k->session);
    const char *user = getenv("USER");
    json_t *u = json_string(user != NULL && user[0] != '\0' ? user : "pyc");
    if (u == NULL)
        u = json_string("pyc");  /* USER was not valid UTF-8 */
    k->username_json = json_dumps(u, JSON_ENCODE_ANY);
    json_decref(u);
    k->streams = pyc_streams_new(on_stream_publish, k, err);
    if (k->username_json == NULL || k->streams == NULL) {
        if (k->username_json == NULL)
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
        pyc_kernel_destroy(&k);
        return NULL;
    }
    return k;
}

pyc_streams_t *
pyc_kernel_streams(pyc_kernel_t *k)
{
    return k->streams;
}

void
pyc_kernel_starting(pyc_kernel_t *k)
{
    char banner[256];
    snprintf(banner, sizeof banner,
             "Python %s (pyc %s) -- a Jupyter kernel for Python, written in C", pyc_py_version(),
             PACKAGE_VERSION);
    json_t *info = json_pack(
        "{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i}, s:s}, s:s, s:[{s:s, s:s}], s:b}",
        "status", "ok", "protocol_version", PYC_PROTOCOL_VERSION, "implementation", "pyc",
        "implementation_version", PACKAGE_VERSION, "language_info", "name", "python", "version",
        pyc_py_version(), "mimetype", "text/x-python", "file_extension", ".py", "pygments_lexer", "ipython3",
        "codemirror_mode", "name", "ipython", "version", 3, "nbconvert_exporter", "python", "banner", banner,
        "help_links", "text", "Python Reference", "url", "https://docs.python.org/3/", "debugger", 0);
    json_t *pyc = json_pack("{s:o, s:o}", "limits", pyc_limits_to_json(&k->limits), "checkpoint",
                            checkpoint_of(k) != NULL ? json_string(pyc_checkpoint_path(k->checkpoint)) : json_null());
    if (k->replayed != NULL)
        json_object_set(pyc, "replayed", k->replayed);
    json_object_set_new(info, "pyc", pyc);
    free(k->kernel_info);        /* a forked child makes it again */
    k->kernel_info = json_dumps(info, JSON_COMPACT);
    json_decref(info);
    status(k, NULL, "starting");
}

void
pyc_kernel_destroy(pyc_kernel_t **k_p)
{
    if (k_p == NULL || *k_p == NULL)
        return;
    pyc_kernel_t *k = *k_p;
    pyc_guard_destroy(&k->guard);
    pyc_streams_destroy(&k->streams);
    pyc_kernel_idle(k);
    pyc_history_close(&k->history);
    end_children(k);
    for (int i = 0; i < k->n_children; i++)
        free(k->children[i].file);
    free(k->parent);
    free(k->children);
    free(k->username_json);
    free(k->kernel_info);
    pyc_checkpoint_destroy(&k->checkpoint);
    free(k->checkpoint_dir);
    free(k->session_id);
    json_decref(k->replayed);
    memory_reserve(k, false);
    pthread_mutex_destroy(&k->parent_lock);
    pthread_mutex_destroy(&k->out.lock);
    pthread_mutex_destroy(&k->usage_lock);
    free(k);
    *k_p = NULL;
}

/* ---- start-up: the memory cap and replay ---------------------------------------------------------------- */

int
pyc_kernel_limit_memory(pyc_kernel_t *k, pyc_error_t *err)
{
    if (k->limits.memory == 0)
        return 0;
    /* The cap is an RLIMIT_DATA (private writable memory: the heap, anonymous mappings, thread stacks; not
     * shared libraries or reserved-but-inaccessible address space) of what the process has now plus the
     * cap: the interpreter, libraries and threads the kernel already has are not the session's.  The limit
     * is hard, so that code in the session cannot lift it (resource.setrlimit); processes the session
     * starts inherit it. */
    unsigned long long data = 0;
    char line[256];
    FILE *f = fopen("/proc/self/status", "re");
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmData:", 7) == 0)
            data = strtoull(line + 7, NULL, 10) * 1024;
    }
    if (f != NULL)
        fclose(f);
    if (data == 0)
        return pyc_error_set(err, "memory limit: cannot read VmData from /proc/self/status");
    memory_reserve(k, true);
    unsigned long long want = data + (k->mem_reserve != NULL ? MEM_RESERVE : 0) + k->limits.memory;
    struct rlimit rl;
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        pyc_log("memory limit: the hard data limit of this process (%llu bytes) is below the one asked for; "
                "keeping it", (unsigned long long)rl.rlim_max);
        want = rl.rlim_max;
    }
    rl.rlim_cur = rl.rlim_max = (rlim_t)want;
    if (setrlimit(RLIMIT_DATA, &rl) < 0)
        return pyc_error_set(err, "memory limit: setrlimit: %s", strerror(errno));
    return 0;
}

int
pyc_kernel_replay(pyc_kernel_t *k, const char *path, pyc_error_t *err)
{
    char **cells;
    size_t n, done = 0;
    if (pyc_checkpoint_load(path, &cells, &n, err) < 0)
        return -1;
    json_t *failure = json_null();
    pyc_streams_flush(k->streams);
    pyc_streams_set_discard(k->streams, true);   /* nobody is listening yet; the cells ran before */
    for (; done < n; done++) {
        pyc_py_exec_opts_t opts = {.silent = true, .store_history = false, .allow_stdin = false};
        pyc_py_exec_result_t res = {0};
        int why;
        /* Each replayed cell has the kernel's deadline, like any cell (a stuck one ends the kernel). */
        k->cell_count = (int)done + 1;
        k->cell_timeout = k->limits.cell_timeout;
        pyc_guard_cell_begin(k->guard, k->limits.cell_timeout);
        atomic_store(&k->executing, 1);
        pyc_py_enter();
        pyc_py_execute(cells[done], &opts, &res);
        pyc_py_leave();
        atomic_store(&k->executing, 0);
        if (!pyc_guard_cell_end(k->guard, &why)) {
            for (;;)
                pause();
        }
        if (!res.ok) {
            const char *en = json_string_value(json_object_get(res.error, "ename"));
            const char *ev = json_string_value(json_object_get(res.error, "evalue"));
            pyc_log("replay of %s: cell %zu of %zu failed (%s: %s); the other %zu were not run", path, done + 1,
                    n, en != NULL ? en : "?", ev != NULL ? ev : "", n - done - 1);
            failure = json_pack("{s:I, s:s, s:s}", "cell", (json_int_t)(done + 1), "ename", en != NULL ? en : "",
                                "evalue", ev != NULL ? ev : "");
        } else {
            checkpoint_cell(k, (int)done + 1, cells[done]);
        }
        json_decref(res.error);
        json_decref(res.user_expressions);
        json_decref(res.payload);
        if (!res.ok)
            break;
    }
    pyc_streams_flush(k->streams);
    pyc_streams_set_discard(k->streams, false);
    pyc_guard_activity(k->guard);      /* the idle clock starts when the kernel can first be asked */
    json_decref(k->replayed);
    k->replayed = json_pack("{s:s, s:I, s:I, s:o}", "file", path, "cells", (json_int_t)n, "ran",
                            (json_int_t)done, "error", failure);
    if (json_is_null(failure))
        pyc_log("replayed %zu cells from %s", n, path);
    pyc_checkpoint_free_cells(cells, n);
    return json_is_null(failure) ? 0 : pyc_error_set(err, "replay of %s stopped at cell %zu", path, done + 1);
}

void
pyc_kernel_closing(pyc_kernel_t *k)
{
    pyc_guard_shutdown(k->guard);
}
