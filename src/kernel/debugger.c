/*
 * debugger.c -- JupyterLab's debugger: debug_request on control, relayed as the Debug Adapter Protocol to
 * debugpy's adapter over TCP; debug_reply on control; the adapter's events as debug_event on iopub.
 *
 * The debugger has a thread of its own, started by the first debug_request.  The control thread publishes
 * the request's busy status and queues it here (pyc__debug_request); this thread answers it, publishes its
 * idle, and reads the adapter.  So control never waits for debugpy and never needs the GIL: it answers
 * kernel_info, interrupt and shutdown while a cell is stopped at a breakpoint.  This thread takes the GIL
 * only for the commands that look at Python objects (pyc._debugger, through py.h), and a stopped cell lets
 * it go every few milliseconds inside pydevd.
 *
 * Commands, as ipykernel answers them (the front end was written against it):
 *   kernel's own, without Python  debugInfo, dumpCell, source, configurationDone (done during attach)
 *   kernel's own, with Python     initialize (debugpy.listen, once per process), inspectVariables,
 *                                 richInspectVariables, modules, variables while no thread is stopped
 *   relayed, then adjusted        attach (adds where the adapter listens; runs the initialized /
 *                                 configurationDone sequence), setBreakpoints (remembered for debugInfo),
 *                                 stackTrace (kernel frames below the cell cut off), variables while stopped,
 *                                 richInspectVariables while stopped (the value is stashed by an evaluate in
 *                                 the frame, then formatted), copyToGlobals (a setExpression), disconnect
 *   relayed as they are           everything else: continue, next, stepIn, stepOut, pause, evaluate, scopes,
 *                                 setExceptionBreakpoints, threads, ...
 * A request that debugpy does not answer within PYC_DEBUG_TIMEOUT_S gets a failed response.  Requests are
 * answered one at a time, in order; the adapter's events are published as they come, also while waiting.
 */
#include "kernelint.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cellfile.h"
#include "clock.h"
#include "dap.h"
#include "log.h"
#include "zqueue.h"

#define PYC_DEBUG_TIMEOUT_S 60
#define INTERNAL_SEQ 1000000000  /* seq of the requests the kernel makes itself, apart from the front end's */

struct pyc__debugger {
    pyc_kernel_t *k;
    pthread_t thread;
    pyc_zqueue_t q;              /* the requests; its eventfd also wakes the thread to stop */
    atomic_bool stop;

    /* The debugger thread only. */
    pyc_dap_conn_t conn;         /* to the adapter; conn.fd is -1 while no session */
    int port;                    /* where the adapter listens; 0 before initialize */
    bool started;                /* initialize succeeded and no disconnect since */
    bool initialized_seen;       /* the adapter's "initialized" event came (attach waits for it) */
    json_t *breakpoints;         /* {source path: [breakpoint, ...]} as set, for debugInfo */
    json_t *stopped;             /* [threadId, ...] stopped now */
    int internal_seq;
};

static bool
stopping(pyc__debugger_t *d)
{
    return atomic_load(&d->stop);
}

/* ---- events ---------------------------------------------------------------------------------------------- */

static void
set_stopped(pyc__debugger_t *d, json_t *thread, bool add)
{
    size_t i;
    json_t *v;
    json_array_foreach(d->stopped, i, v) {
        if (json_equal(v, thread)) {
            if (!add)
                json_array_remove(d->stopped, i);
            return;
        }
    }
    if (add)
        json_array_append(d->stopped, thread);
}

/* An event of the adapter: tracks stopped threads, then publishes it as debug_event (no parent: events are
 * not answers to a request). */
static void
on_event(pyc__debugger_t *d, json_t *ev)
{
    const char *name = json_string_value(json_object_get(ev, "event"));
    json_t *body = json_object_get(ev, "body");
    json_t *thread = json_object_get(body, "threadId");
    if (name != NULL && strcmp(name, "initialized") == 0)
        d->initialized_seen = true;
    else if (name != NULL && strcmp(name, "stopped") == 0 && thread != NULL)
        set_stopped(d, thread, true);
    else if (name != NULL && strcmp(name, "continued") == 0) {
        if (json_is_true(json_object_get(body, "allThreadsContinued")))
            json_array_clear(d->stopped);
        else if (thread != NULL)
            set_stopped(d, thread, false);
    }
    char *text = json_dumps(ev, JSON_COMPACT);
    if (text != NULL) {
        pyc_frame_t topic = {"debug_event", 11};
        pyc__send_frames(d->k, PYC_CHAN_IOPUB, &topic, 1, "debug_event", NULL, 0, NULL, text, strlen(text), true,
                         NULL, 0);
    }
}

/* Publishes the events that are whole in rx; returns the first response found (a new reference), if any. */
static json_t *
drain(pyc__debugger_t *d)
{
    json_t *m;
    while ((m = pyc_dap_next(&d->conn)) != NULL) {
        const char *type = json_string_value(json_object_get(m, "type"));
        if (type != NULL && strcmp(type, "event") == 0) {
            on_event(d, m);
            json_decref(m);
            continue;
        }
        return m;
    }
    return NULL;
}

/* ---- requests to the adapter ----------------------------------------------------------------------------- */

static const char *
command_of(json_t *req)
{
    const char *cmd = json_string_value(json_object_get(req, "command"));
    return cmd != NULL ? cmd : "";
}

/* A failed response to req with a message. */
static json_t *
failure(json_t *req, const char *message)
{
    json_t *seq = json_object_get(req, "seq");
    return json_pack("{s:s, s:O, s:O, s:b, s:s, s:s}", "type", "response", "request_seq", seq ? seq : json_null(),
                     "seq", seq ? seq : json_null(), "success", 0, "command",
                     command_of(req), "message", message);
}

/* Waits for the response to the request numbered seq, publishing events meanwhile; when until_initialized
 * is set, returns NULL as soon as the "initialized" event has come.  Other responses are dropped. */
static json_t *
await_response(pyc__debugger_t *d, json_int_t seq, bool until_initialized)
{
    double deadline = pyc_now_s() + PYC_DEBUG_TIMEOUT_S;
    for (;;) {
        json_t *m = drain(d);
        if (m != NULL) {
            if (json_integer_value(json_object_get(m, "request_seq")) == seq)
                return m;
            json_decref(m);
            continue;
        }
        if (until_initialized && d->initialized_seen)
            return NULL;
        double left = deadline - pyc_now_s();
        if (left <= 0 || d->conn.fd < 0 || stopping(d))
            return NULL;
        /* In slices of at most 200 ms, so that a kernel shutting down does not wait for debugpy. */
        if (pyc_dap_read(&d->conn, left < 0.2 ? (int)(left * 1000) + 1 : 200) < 0)
            return NULL;
    }
}

/* Sends req (borrowed) and returns debugpy's response, or a failed one. */
static json_t *
forward(pyc__debugger_t *d, json_t *req)
{
    if (pyc_dap_send(&d->conn, req) < 0)
        return failure(req, "the connection to debugpy is closed");
    json_t *rep = await_response(d, json_integer_value(json_object_get(req, "seq")), false);
    if (rep == NULL)
        return failure(req, d->conn.fd < 0 ? "debugpy's adapter closed the connection"
                                        : "debugpy did not answer in time");
    return rep;
}

/* A request of the kernel's own to the adapter; returns its response (never NULL). */
static json_t *
internal(pyc__debugger_t *d, const char *command, json_t *arguments)
{
    json_t *req = json_pack("{s:s, s:i, s:s, s:o}", "type", "request", "seq", INTERNAL_SEQ + d->internal_seq++,
                            "command", command, "arguments", arguments != NULL ? arguments : json_object());
    json_t *rep = forward(d, req);
    json_decref(req);
    return rep;
}

/* ---- the commands ---------------------------------------------------------------------------------------- */

/* A successful response to req with body (stolen; NULL for none). */
static json_t *
success(json_t *req, json_t *body)
{
    json_t *seq = json_object_get(req, "seq");
    json_t *r = json_pack("{s:s, s:O, s:O, s:b, s:s}", "type", "response", "request_seq", seq ? seq : json_null(),
                          "seq", seq ? seq : json_null(), "success", 1, "command",
                          command_of(req));
    if (body != NULL)
        json_object_set_new(r, "body", body);
    return r;
}

static json_t *
debug_info(pyc__debugger_t *d, json_t *req)
{
    char prefix[512];
    if (pyc_cellfile_prefix(prefix, sizeof prefix) < 0)
        return failure(req, "$TMPDIR is too long");
    json_t *bps = json_array();
    const char *source;
    json_t *list;
    json_object_foreach(d->breakpoints, source, list) {
        json_array_append_new(bps, json_pack("{s:s, s:O}", "source", source, "breakpoints", list));
    }
    return success(req, json_pack("{s:b, s:s, s:I, s:s, s:s, s:o, s:O, s:b, s:[s], s:b}", "isStarted", d->started,
                                  "hashMethod", "Murmur2", "hashSeed", (json_int_t)PYC_CELLFILE_SEED,
                                  "tmpFilePrefix", prefix, "tmpFileSuffix", PYC_CELLFILE_SUFFIX, "breakpoints", bps,
                                  "stoppedThreads", d->stopped, "richRendering", 1, "exceptionPaths",
                                  "Python Exceptions", "copyToGlobals", 1));
}

/* dumpCell: writes the cell's code to the file that cells with that code are compiled under. */
static json_t *
dump_cell(json_t *req)
{
    const char *code = json_string_value(json_object_get(json_object_get(req, "arguments"), "code"));
    char path[512], dir[512];
    if (code == NULL)
        return failure(req, "dumpCell needs arguments.code");
    size_t len = strlen(code);
    if (pyc_cellfile_prefix(dir, sizeof dir) < 0 || pyc_cellfile_name(code, len, path, sizeof path) < 0)
        return failure(req, "$TMPDIR is too long");
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return failure(req, "cannot create the directory of cell files");
    FILE *f = fopen(path, "w");
    bool ok = f != NULL && fwrite(code, 1, len, f) == len;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (!ok)
        return failure(req, "cannot write the cell's file");
    return success(req, json_pack("{s:s}", "sourcePath", path));
}

/* source: the text of a file (a cell's, or a module's). */
static json_t *
source(json_t *req)
{
    const char *path = json_string_value(json_object_get(json_object_get(json_object_get(req, "arguments"),
                                                                          "source"), "path"));
    FILE *f = path != NULL ? fopen(path, "r") : NULL;
    if (f == NULL)
        return failure(req, "source unavailable");
    pyc_buf_t text;
    pyc_buf_init(&text, (size_t)64 << 20);
    char chunk[65536];
    size_t n;
    int rc = 0;
    while (rc == 0 && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = pyc_buf_add(&text, chunk, n);
    fclose(f);
    json_t *content = rc == 0 ? json_stringn(text.data != NULL ? text.data : "", text.len) : NULL;
    pyc_buf_free(&text);
    if (content == NULL)
        return failure(req, "source unavailable (too large, or not UTF-8)");
    return success(req, json_pack("{s:o}", "content", content));
}

/* A Python helper of pyc._debugger whose dict result is the response's body. */
static json_t *
python_body(json_t *req, const char *func, json_t *args)
{
    pyc_error_t err;
    json_t *body = pyc_py_debug_call(func, args, &err);
    json_decref(args);
    return body != NULL ? success(req, body) : failure(req, err.text);
}

/* initialize: debugpy listens (once per process), the kernel connects to it, and the request goes on. */
static json_t *
initialize(pyc__debugger_t *d, json_t *req)
{
    pyc_error_t err;
    if (!d->started || d->conn.fd < 0) {   /* first, or after a disconnect, or after losing the adapter */
        if (d->port == 0) {
            json_t *r = pyc_py_debug_call("start", NULL, &err);
            d->port = r != NULL ? (int)json_integer_value(json_object_get(r, "port")) : 0;
            json_decref(r);
            if (d->port == 0)
                return failure(req, r == NULL ? err.text : "debugpy did not say where it listens");
        }
        if (pyc_dap_connect(&d->conn, d->port, &err) < 0)
            return failure(req, err.text);
        d->started = true;
        d->initialized_seen = false;
    }
    return forward(d, req);
}

/* attach: tells the adapter where it listens, then answers the configuration sequence as ipykernel does:
 * "initialized" event, configurationDone, and then the attach response. */
static json_t *
attach(pyc__debugger_t *d, json_t *req)
{
    json_t *args = json_object_get(req, "arguments");
    if (!json_is_object(args)) {
        args = json_object();
        json_object_set_new(req, "arguments", args);
    }
    json_object_set_new(args, "connect", json_pack("{s:s, s:i}", "host", "127.0.0.1", "port", d->port));
    json_int_t seq = json_integer_value(json_object_get(req, "seq"));
    if (pyc_dap_send(&d->conn, req) < 0)
        return failure(req, "the connection to debugpy is closed");
    json_t *rep = await_response(d, seq, true);
    if (rep == NULL && d->initialized_seen) {
        json_decref(internal(d, "configurationDone", NULL));
        rep = await_response(d, seq, false);
    }
    if (rep == NULL)
        return failure(req, "debugpy did not finish attaching");
    if (json_is_true(json_object_get(rep, "success")))
        pyc_py_debug_session(true);
    return rep;
}

static bool
identifier(const char *s)
{
    /* ASCII letters, digits and underscores, or any non-ASCII byte (Unicode identifiers): nothing that could
     * make the expression it goes into say more than the name. */
    if (s == NULL || s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (!(*p >= 0x80 || *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9')))
            return false;
    }
    return true;
}

/* richInspectVariables: the variable's rich representation, from the session's globals, or from the stopped
 * frame that frameId names (the value is stashed by an evaluate there, then formatted). */
static json_t *
rich_inspect(pyc__debugger_t *d, json_t *req)
{
    json_t *args = json_object_get(req, "arguments");
    const char *name = json_string_value(json_object_get(args, "variableName"));
    json_t *frame = json_object_get(args, "frameId");
    if (name != NULL && (strcmp(name, "special variables") == 0 || strcmp(name, "function variables") == 0))
        return success(req, json_pack("{s:{}, s:{}}", "data", "metadata"));
    if (!identifier(name))
        return failure(req, "variableName is not a Python name");
    json_t *which;
    if (json_array_size(d->stopped) > 0 && json_is_integer(frame) && d->conn.fd >= 0) {
        char expr[600];
        snprintf(expr, sizeof expr, "__import__('pyc._debugger', fromlist=['_']).stash(%.500s)", name);
        json_t *rep = internal(d, "evaluate", json_pack("{s:s, s:O, s:s}", "expression", expr, "frameId", frame,
                                                        "context", "clipboard"));
        const char *token = json_string_value(json_object_get(json_object_get(rep, "body"), "result"));
        bool ok = json_is_true(json_object_get(rep, "success")) && token != NULL && strlen(token) > 2;
        which = ok ? json_pack("[s, s#]", "stash", token + 1, strlen(token) - 2) : NULL;  /* 's0' -> s0 */
        json_decref(rep);
        if (which == NULL)
            return failure(req, "the variable could not be evaluated in that frame");
    } else {
        which = json_pack("[s, s]", "global", name);
    }
    pyc_error_t err;
    json_t *body = pyc_py_debug_rich(which, &err);
    json_decref(which);
    return body != NULL ? success(req, body) : failure(req, err.text);
}

/* copyToGlobals: a variable of a stopped frame becomes a global of the session. */
static json_t *
copy_to_globals(pyc__debugger_t *d, json_t *req)
{
    json_t *args = json_object_get(req, "arguments");
    const char *src = json_string_value(json_object_get(args, "srcVariableName"));
    const char *dst = json_string_value(json_object_get(args, "dstVariableName"));
    json_t *frame = json_object_get(args, "srcFrameId");
    if (!identifier(src) || !identifier(dst) || !json_is_integer(frame))
        return failure(req, "copyToGlobals needs srcVariableName, dstVariableName (Python names) and srcFrameId");
    char expr[600];
    snprintf(expr, sizeof expr, "globals()['%.500s']", dst);
    json_t *rep = internal(d, "setExpression", json_pack("{s:s, s:s, s:O}", "expression", expr, "value", src,
                                                         "frameId", frame));
    json_t *out = json_is_true(json_object_get(rep, "success")) ? success(req, json_incref(json_object_get(rep,
                                                                                                        "body")))
                                                                : failure(req, "the variable could not be copied");
    json_decref(rep);
    return out;
}

/* stackTrace: debugpy's frames, cut after the first cell frame at module level (anything below it is the
 * kernel's, such as the asyncio loop of an awaiting cell). */
static json_t *
stack_trace(pyc__debugger_t *d, json_t *req)
{
    json_t *rep = forward(d, req);
    json_t *frames = json_object_get(json_object_get(rep, "body"), "stackFrames");
    char prefix[512];
    if (!json_is_array(frames) || pyc_cellfile_prefix(prefix, sizeof prefix) < 0)
        return rep;
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < json_array_size(frames); i++) {
        json_t *f = json_array_get(frames, i);
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *path = json_string_value(json_object_get(json_object_get(f, "source"), "path"));
        if (name != NULL && strcmp(name, "<module>") == 0 && path != NULL && strncmp(path, prefix, plen) == 0) {
            while (json_array_size(frames) > i + 1)
                json_array_remove(frames, i + 1);
            json_object_set_new(json_object_get(rep, "body"), "totalFrames", json_integer((json_int_t)i + 1));
            break;
        }
    }
    return rep;
}

/* disconnect: relayed; then the session's state is dropped, and debugpy keeps listening for the next one.
 * The kernel is the debuggee: it is never terminated by the debugger, whatever terminateDebuggee says (with
 * true, debugpy's adapter would also stop listening, and no second session could start). */
static json_t *
disconnect(pyc__debugger_t *d, json_t *req)
{
    json_t *args = json_object_get(req, "arguments");
    if (json_is_object(args))
        json_object_set_new(args, "terminateDebuggee", json_false());
    json_t *rep = forward(d, req);
    pyc_dap_close(&d->conn);
    d->started = false;
    json_object_clear(d->breakpoints);
    json_array_clear(d->stopped);
    pyc_py_debug_session(false);
    return rep;
}

/* The response to one request (never NULL). */
static json_t *
answer(pyc__debugger_t *d, json_t *req)
{
    const char *cmd = json_string_value(json_object_get(req, "command"));
    json_t *args = json_object_get(req, "arguments");
    if (cmd == NULL || !json_is_integer(json_object_get(req, "seq")))
        return failure(req, "a debug request needs a command and a seq");
    /* What works without a debug session. */
    if (strcmp(cmd, "debugInfo") == 0)
        return debug_info(d, req);
    if (strcmp(cmd, "inspectVariables") == 0)
        return python_body(req, "inspect_variables", NULL);
    if (strcmp(cmd, "richInspectVariables") == 0)
        return rich_inspect(d, req);
    if (strcmp(cmd, "modules") == 0) {
        json_t *start = json_object_get(args, "startModule"), *count = json_object_get(args, "moduleCount");
        return python_body(req, "modules", json_pack("[O, O]", json_is_integer(start) ? start : json_integer(0),
                                                     json_is_integer(count) ? count : json_null()));
    }
    if (strcmp(cmd, "initialize") == 0)
        return initialize(d, req);
    if (!d->started || d->conn.fd < 0)
        return failure(req, "the debugger is not started (send initialize first)");
    if (strcmp(cmd, "dumpCell") == 0)
        return dump_cell(req);
    if (strcmp(cmd, "source") == 0)
        return source(req);
    if (strcmp(cmd, "configurationDone") == 0)
        return success(req, NULL);
    if (strcmp(cmd, "attach") == 0)
        return attach(d, req);
    if (strcmp(cmd, "disconnect") == 0)
        return disconnect(d, req);
    if (strcmp(cmd, "stackTrace") == 0)
        return stack_trace(d, req);
    if (strcmp(cmd, "copyToGlobals") == 0)
        return copy_to_globals(d, req);
    if (strcmp(cmd, "variables") == 0 && json_array_size(d->stopped) == 0) {
        json_t *ref = json_object_get(args, "variablesReference");
        return python_body(req, "variables", json_pack("[O]", ref != NULL ? ref : json_null()));
    }
    if (strcmp(cmd, "continue") == 0) {
        /* Forget the stopped threads at once: the "continued" event may come after the response. */
        json_t *rep = forward(d, req);
        if (json_is_true(json_object_get(json_object_get(rep, "body"), "allThreadsContinued")))
            json_array_clear(d->stopped);
        else if (json_is_true(json_object_get(rep, "success")))
            set_stopped(d, json_object_get(args, "threadId"), false);
        return rep;
    }
    if (strcmp(cmd, "setBreakpoints") == 0) {
        const char *path = json_string_value(json_object_get(json_object_get(args, "source"), "path"));
        json_t *bps = json_object_get(args, "breakpoints");
        if (path != NULL && json_is_array(bps))
            json_object_set(d->breakpoints, path, bps);
    }
    return forward(d, req);
}

/* Answers one debug_request: debug_reply on control, then the request's idle. */
static void
handle(pyc__debugger_t *d, pyc_msg_t *msg)
{
    json_t *req = json_deep_copy(msg->content);
    json_t *rep = req != NULL && json_is_object(req) ? answer(d, req) : json_pack("{s:s, s:b, s:s}", "type",
                                                                                  "response", "success", 0,
                                                                                  "message", "not a DAP request");
    json_decref(req);
    pyc__reply(d->k, PYC_CHAN_CONTROL, msg, "debug_reply", NULL, rep);
    pyc__status(d->k, msg, "idle");
}

/* ---- the thread ------------------------------------------------------------------------------------------ */

static void *
debugger_main(void *arg)
{
    pyc__debugger_t *d = arg;
    while (!stopping(d)) {
        struct pollfd p[2] = {{.fd = d->q.efd, .events = POLLIN}, {.fd = d->conn.fd, .events = POLLIN}};
        if (poll(p, d->conn.fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
            break;
        if (d->conn.fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) && pyc_dap_read(&d->conn, 0) >= 0) {
            json_t *stray;
            while ((stray = drain(d)) != NULL)
                json_decref(stray);  /* a response nobody waits for (its request timed out) */
        }
        pyc_zqitem_t *it;
        while (!stopping(d) && (it = pyc_zqueue_pop(&d->q)) != NULL) {
            handle(d, it->msg);
            pyc_zqueue_item_free(it);
        }
    }
    return NULL;
}

static pyc__debugger_t *
debugger_new(pyc_kernel_t *k)
{
    pyc__debugger_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->k = k;
    pyc_dap_init(&d->conn);
    d->breakpoints = json_object();
    d->stopped = json_array();
    /* Made by the control thread, which blocks SIGINT and SIGTERM (app.c): the new thread inherits that, and
     * the signals stay the main thread's. */
    int rc = pyc_zqueue_init(&d->q) == 0 ? pthread_create(&d->thread, NULL, debugger_main, d) : -1;
    if (rc != 0) {
        pyc_zqueue_clear(&d->q);
        json_decref(d->breakpoints);
        json_decref(d->stopped);
        free(d);
        return NULL;
    }
    return d;
}

void
pyc__debug_request(pyc_kernel_t *k, pyc_msg_t *msg)
{
    pyc__state_may_change(k);    /* the debugger may set variables, evaluate, step */
    pthread_mutex_lock(&k->dbg.lock);
    if (k->dbg.debugger == NULL && !k->dbg.closed)
        k->dbg.debugger = debugger_new(k);
    pyc__debugger_t *d = k->dbg.debugger;
    if (d == NULL) {
        pthread_mutex_unlock(&k->dbg.lock);
        json_t *rep = json_pack("{s:s, s:b, s:s}", "type", "response", "success", 0, "message",
                                k->dbg.closed ? "the kernel is shutting down"
                                                   : "the kernel could not start its debugger thread");
        pyc__reply(k, PYC_CHAN_CONTROL, msg, "debug_reply", NULL, rep);
        pyc__status(k, msg, "idle");
        pyc_msg_destroy(&msg);
        return;
    }
    pyc_zqueue_push_msg(&d->q, PYC_CHAN_CONTROL, msg, "debugger");
    pthread_mutex_unlock(&k->dbg.lock);
}

void
pyc__debugger_forget(pyc__debugger_t *d)
{
    if (d == NULL)
        return;
    if (d->conn.fd >= 0)
        close(d->conn.fd);       /* so that the parent's disconnect reaches the adapter as the end of stream */
    if (d->q.efd >= 0)
        close(d->q.efd);
}

void
pyc__debugger_destroy(pyc__debugger_t **d_p)
{
    pyc__debugger_t *d = *d_p;
    if (d == NULL)
        return;
    atomic_store(&d->stop, true);
    pyc_zqueue_signal(&d->q);
    pthread_join(d->thread, NULL);
    pyc_zqueue_clear(&d->q);     /* requests still queued are dropped: the kernel is ending */
    pyc_dap_close(&d->conn);
    json_decref(d->breakpoints);
    json_decref(d->stopped);
    free(d);
    *d_p = NULL;
}
