/*
 * lifelog.c -- what the kernel of a `pyc` session writes into the sessions' event log (events.h, README "pyc
 * events"): ready (with the checkpoint file the kernel writes), cell_started and cell_done of each cell that is
 * not silent (cell_done with the output's size and, when the session asked for it with --event-output, its
 * first bytes), and closed with its reason when the kernel ends by itself (shutdown, idle_timeout, lifetime,
 * parent_gone, stuck, out_of_memory, crashed) and the checkpoint when it holds a cell.
 *
 * Only a kernel that knows its session's name writes (pyc_kernel_events: `pyc new` sets PYC_SESSION, and a
 * session forked by `pyc fork` is named in the fork request); a kernel Jupyter started writes nothing, and
 * every function here is then one test of a NULL pointer.  The log is opened once; an event is one flock'd
 * write of about 5-10 us, against the 100-odd us of a cell.  A failing write is logged once and never
 * fails the request: the log is a record, not a gate.
 *
 * Threads: cell events come from the main thread; closed from the main thread (shutdown and the limits'
 * ends, at the kernel's closing), the guard thread (a stuck cell) or the crash reporter, and only the first
 * of them is written (closed_written).  The reason is settled by the first thing that ends the kernel
 * (close_why), so that an idle timeout that races with a shutdown_request is reported as what came first.
 */
#include "kernelint.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "events.h"
#include "log.h"

/* How long an event waits for another writer's lock: long enough for any append (microseconds), short
 * enough that a cell -- or the crash path, which must end -- is never held up by a stuck peer. */
#define EVENT_LOCK_MS 300

/* The most of a crash's traceback that goes into its closed event (the log line must stay under
 * PYC_EVENTS_MAX_LINE); the whole of it is in the kernel's log. */
#define TRACEBACK_MAX ((size_t)16 << 10)

static const char *const close_names[] = {
    [PYC__CLOSE_SHUTDOWN] = "shutdown",       [PYC__CLOSE_REPLACED] = "replaced",
    [PYC__CLOSE_IDLE] = "idle_timeout",       [PYC__CLOSE_LIFETIME] = "lifetime",
    [PYC__CLOSE_PARENT_GONE] = "parent_gone", [PYC__CLOSE_STUCK] = "stuck",
    [PYC__CLOSE_OUT_OF_MEMORY] = "out_of_memory", [PYC__CLOSE_TERMINATED] = "terminated",
};

/* True for a session name as `pyc` makes them: 1 to 80 of a-z, 0-9, '_' and '-'. */
static bool
name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n < 1 || n > 80)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

int
pyc_kernel_events(pyc_kernel_t *k, const char *session, const char *dir, pyc_error_t *err)
{
    if (!name_ok(session))
        return pyc_error_set(err, "event log: '%.100s' is not a session name (1 to 80 of a-z, 0-9, _ and -)",
                             session);
    char *name = strdup(session);
    if (name == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    pyc_events_t *ev = pyc_events_open(dir, 0, err);
    if (ev == NULL) {
        free(name);
        return -1;
    }
    pyc_events_destroy(&k->lifelog.events);
    free(k->lifelog.session);
    k->lifelog.events = ev;
    k->lifelog.session = name;
    /* The head of each cell's output goes into its cell_done event when the session asked for it. */
    pyc_outgate_set_head(&k->out, k->limits.event_output);
    return 0;
}

/* Writes one event of this kernel (fields borrowed, may be NULL); a failure is logged, once. */
static void
emit(pyc_kernel_t *k, const char *event, json_t *fields)
{
    pyc_error_t err;
    if (pyc_events_append(k->lifelog.events, k->lifelog.session, (long)getpid(), event, fields, EVENT_LOCK_MS,
                          &err) < 0 &&
        !k->lifelog.failed) {
        k->lifelog.failed = true;
        pyc_log("event log: %s (this is said once)", err.text);
    }
}

/* Adds "checkpoint", the path of the session's checkpoint file, to f: always (ready: where the kernel writes
 * its cells), or only when the file holds a cell (closed: the file that brings the session's work back). */
static void
add_checkpoint(pyc_kernel_t *k, json_t *f, bool only_with_cells)
{
    const char *cp = pyc__checkpoint_path_if_made(k);
    if (f != NULL && cp != NULL && (!only_with_cells || pyc__checkpoint_has_cells(k)))
        json_object_set_new(f, "checkpoint", json_string(cp));
}

void
pyc_kernel_ready(pyc_kernel_t *k)
{
    if (k->lifelog.events == NULL)
        return;
    pyc__checkpoint(k);          /* made now if it was not (kernel_info_reply names it from now on anyway) */
    json_t *f = json_object();
    add_checkpoint(k, f, false);
    emit(k, "ready", f);
    json_decref(f);
}

/* The msg_id of a request, or "". */
static const char *
msg_id(const pyc_msg_t *msg)
{
    const char *id = msg != NULL ? json_string_value(json_object_get(msg->header, "msg_id")) : NULL;
    return id != NULL ? id : "";
}

void
pyc__lifelog_cell(pyc_kernel_t *k, const pyc_msg_t *msg, int count, const char *outcome,
                  const pyc_outgate_stats_t *output)
{
    if (k->lifelog.events == NULL)
        return;
    json_t *f = outcome == NULL ? json_pack("{s:s, s:i}", "id", msg_id(msg), "count", count)
                                : json_pack("{s:s, s:i, s:s}", "id", msg_id(msg), "count", count, "outcome", outcome);
    if (f != NULL && outcome != NULL && output != NULL) {
        /* What the cell published, as metadata.pyc.output counts it; and its first bytes when asked for. */
        json_object_set_new(f, "output_bytes", json_integer((json_int_t)output->bytes));
        json_object_set_new(f, "output_messages", json_integer((json_int_t)output->msgs));
        if (output->dropped_bytes > 0 || output->dropped_msgs > 0)
            json_object_set_new(f, "output_dropped_bytes", json_integer((json_int_t)output->dropped_bytes));
        if (k->limits.event_output > 0) {
            char head[PYC_OUTGATE_HEAD_MAX + 1];
            size_t n = pyc_outgate_head(&k->out, head, sizeof head);
            json_t *h = json_stringn(head, n);   /* NULL for text that is not UTF-8: left out */
            if (h != NULL)
                json_object_set_new(f, "output_head", h);
        }
    }
    emit(k, outcome == NULL ? "cell_started" : "cell_done", f);
    json_decref(f);
}

void
pyc__lifelog_close_reason(pyc_kernel_t *k, int why)
{
    int none = PYC__CLOSE_NONE;
    atomic_compare_exchange_strong(&k->lifelog.close_why, &none, why);
}

/* Writes the closed event with fields (borrowed; its "reason" first), once per process. */
static void
emit_closed(pyc_kernel_t *k, json_t *fields)
{
    if (k->lifelog.events == NULL || atomic_exchange(&k->lifelog.closed_written, 1) != 0)
        return;
    /* The cell that was running, if one was: what an agent needs to tie the end to its request. */
    const pyc_msg_t *cur = k->current;
    if (cur != NULL && strcmp(cur->msg_type, "execute_request") == 0)
        json_object_set_new(fields, "cell", json_string(msg_id(cur)));
    add_checkpoint(k, fields, true);
    emit(k, "closed", fields);
}

void
pyc__lifelog_closed(pyc_kernel_t *k)
{
    if (k->lifelog.events == NULL)
        return;
    int why = atomic_load(&k->lifelog.close_why);
    json_t *f = json_pack("{s:s}", "reason", close_names[why == PYC__CLOSE_NONE ? PYC__CLOSE_SHUTDOWN : why]);
    emit_closed(k, f);
    json_decref(f);
}

void
pyc__lifelog_crashed(pyc_kernel_t *k, int sig, const char *traceback)
{
    if (k->lifelog.events == NULL)
        return;
    char buf[32];
    const char *tb = traceback != NULL ? traceback : "";
    size_t n = strlen(tb);
    if (n > TRACEBACK_MAX) {
        /* Cut at a line's end (UTF-8 stays whole); faulthandler writes the crashed thread first. */
        n = TRACEBACK_MAX;
        while (n > 0 && tb[n - 1] != '\n')
            n--;
    }
    json_t *f = json_pack("{s:s, s:i, s:s, s:s%}", "reason", "crashed", "signal", sig, "signal_name",
                          pyc_events_signal_name(sig, buf, sizeof buf), "traceback", tb, n);
    if (f == NULL)                /* a traceback that is not UTF-8: the reason still goes out */
        f = json_pack("{s:s, s:i, s:s}", "reason", "crashed", "signal", sig, "signal_name",
                      pyc_events_signal_name(sig, buf, sizeof buf));
    if (f != NULL && k->limits.memory > 0)
        json_object_set_new(f, "memory_limit", json_integer((json_int_t)k->limits.memory));
    emit_closed(k, f);
    json_decref(f);
}

void
pyc__lifelog_forked(pyc_kernel_t *k, const char *name, const char *parent)
{
    pyc_error_t err;
    if (k->lifelog.events == NULL)
        return;
    char *own = name_ok(name) ? strdup(name) : NULL;
    /* The parent's open file (and its lock) is shared with us: the child opens its own. */
    if (own == NULL || pyc_events_reopen(k->lifelog.events, &err) < 0) {
        if (own != NULL)
            pyc_log("event log: %s; this session writes no events", err.text);
        free(own);
        pyc_events_destroy(&k->lifelog.events);
        return;
    }
    free(k->lifelog.session);
    k->lifelog.session = own;
    atomic_store(&k->lifelog.closed_written, 0);
    atomic_store(&k->lifelog.close_why, PYC__CLOSE_NONE);
    k->lifelog.failed = false;
    json_t *f = json_pack("{s:s}", "forked_from", parent);
    add_checkpoint(k, f, false);
    emit(k, "ready", f);
    json_decref(f);
}

const char *
pyc__lifelog_session(const pyc_kernel_t *k)
{
    return k->lifelog.events != NULL ? k->lifelog.session : NULL;
}

void
pyc__lifelog_destroy(pyc_kernel_t *k)
{
    pyc_events_destroy(&k->lifelog.events);
    free(k->lifelog.session);
    k->lifelog.session = NULL;
}
