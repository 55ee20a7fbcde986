/*
 * handlers.c -- every request but execute_request: kernel_info, is_complete, complete, inspect, comm_open,
 * comm_msg, comm_close, comm_info, history, connect, shutdown, interrupt and usage.  dispatch.c's table says
 * which thread runs each: the control thread answers kernel_info, shutdown, interrupt and usage without the
 * GIL, even while a cell runs; the rest run on the main thread and take the GIL to reach Python.
 */
#include "kernelint.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "limit.h"

/* The document made at start (kernelinfo.c) goes out as it is, copied, not parsed and written again: a
 * client asks for it often, and a forked session's first one would otherwise allocate a few dozen blocks
 * across the heap it shares with its parent. */
void
pyc__on_kernel_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    const char *info = atomic_load(&k->kernel_info);
    char *text = info != NULL ? strdup(info) : NULL;
    if (text == NULL) {
        pyc_log("kernel_info_request dropped: the kernel_info document could not be made (out of memory)");
        return;
    }
    pyc__reply_text(k, chan, msg, "kernel_info_reply", NULL, text, strlen(text));
}

/* Runs the Python of a request other than a cell -- completion, inspection, is_complete, comms -- the way a
 * cell runs: interruptible (interrupt_request, SIGINT) and under a deadline (the kernel's cell deadline,
 * tightened to `timeout` when that is not 0), so that user code it reaches (a property, __getattr__, a
 * widget's callback) can never wedge the kernel.  Returns with the GIL held; python_end returns the limit
 * that stopped it (PYC_GUARD_NONE when none did). */
static void
python_begin(pyc_kernel_t *k, int chan, double timeout)
{
    if (pyc__subshell_request() != NULL) {
        pyc_py_enter();          /* a subshell's thread: the main shell's deadline and SIGINT are not its */
        return;
    }
    k->cell = (pyc__cell_t){.chan = chan, .count = k->execution_count, .silent = true,
                            .timeout = pyc_limits_tighter(k->limits.cell_timeout, timeout)};
    pyc_cellclock_start(&k->cell.clock);
    pyc_guard_cell_begin(k->guard, k->cell.timeout, 0);   /* the CPU limit is a cell's */
    atomic_store(&k->executing, 1);
    pyc_py_enter();
    pyc_py_interrupt_arm();
}

static int
python_end(pyc_kernel_t *k)
{
    int why = PYC_GUARD_NONE;
    if (pyc__subshell_request() != NULL) {
        if (k->user_forked)
            pyc__user_fork_exit(k);  /* a comm callback on a subshell that forked, back in the child */
        pyc_py_leave();
        return why;
    }
    pyc_py_interrupt_disarm();
    if (k->user_forked)
        pyc__user_fork_exit(k);  /* a comm callback that forked and came back in the child */
    pyc_py_leave();
    atomic_store(&k->executing, 0);
    if (!pyc_guard_cell_end(k->guard, &why)) {
        for (;;)                 /* the guard answers the request and ends the process */
            pause();
    }
    return why;
}

/* Ends the Python of a request begun with python_begin: its reply content stands, unless a limit stopped it;
 * then content (the support code's own) is dropped for the error of that limit. */
static json_t *
python_end_reply(pyc_kernel_t *k, const pyc_msg_t *msg, json_t *content)
{
    int why = python_end(k);
    if (why == PYC_GUARD_NONE)
        return content;
    char what[160];
    json_decref(content);
    snprintf(what, sizeof what, "the %.100s", msg->msg_type);
    pyc_limit_stop_t stop = {.what = what, .why = why, .cell_timeout = k->cell.timeout,
                             .lifetime = k->limits.lifetime, .grace = k->limits.cell_grace,
                             .memory_cap = (double)k->limits.memory};
    json_t *e = pyc_outcome_limit_error(&stop, NULL);
    json_object_set_new(e, "status", json_string("error"));
    return e;
}

void
pyc__on_is_complete(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *code = json_object_get(msg->content, "code");
    json_t *content;
    if (!json_is_string(code)) {
        content = json_pack("{s:s}", "status", "unknown");
    } else {
        python_begin(k, chan, PYC_LIMITS_REQUEST_TIMEOUT);
        content = pyc_py_is_complete(json_string_value(code));
        content = python_end_reply(k, msg, content);
    }
    pyc__reply(k, chan, msg, "is_complete_reply", NULL, content);
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

void
pyc__on_complete(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    long pos;
    const char *code = code_and_cursor(msg, &pos);
    json_t *content;
    if (code == NULL) {
        content = pyc__bad_request("complete_request content lacks a string 'code'");
    } else {
        python_begin(k, chan, PYC_LIMITS_REQUEST_TIMEOUT);
        content = pyc_py_complete(code, pos);
        content = python_end_reply(k, msg, content);
        /* A frontend that completes: the completer is warmed in the next pause (pyc_kernel_idle). */
        if (k->complete_warm == 0 && pyc__subshell_request() == NULL) {
            k->complete_warm = 1;
            k->complete_warm_since = pyc_now_ns();
        }
    }
    pyc__reply(k, chan, msg, "complete_reply", NULL, content);
}

void
pyc__on_inspect(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    long pos;
    const char *code = code_and_cursor(msg, &pos);
    json_t *detail = json_object_get(msg->content, "detail_level");
    json_t *content;
    if (code == NULL) {
        content = pyc__bad_request("inspect_request content lacks a string 'code'");
    } else {
        python_begin(k, chan, PYC_LIMITS_REQUEST_TIMEOUT);
        content = pyc_py_inspect(code, pos, json_is_integer(detail) ? (int)json_integer_value(detail) : 0);
        content = python_end_reply(k, msg, content);
    }
    pyc__reply(k, chan, msg, "inspect_reply", NULL, content);
}

/* comm_open, comm_msg and comm_close from the frontend go to the comm manager inside the interpreter
 * (pyc._comm), which holds the targets registered from Python; pyc.fork and pyc.snapshot are the kernel's own. */
void
pyc__on_comm(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    (void)chan;
    json_t *target = json_object_get(msg->content, "target_name");
    if (strcmp(msg->msg_type, "comm_open") == 0 && json_is_string(target) &&
        strcmp(json_string_value(target), "pyc.fork") == 0) {
        pyc__on_fork(k, msg);
        return;
    }
    if (strcmp(msg->msg_type, "comm_open") == 0 && json_is_string(target) &&
        strcmp(json_string_value(target), "pyc.snapshot") == 0) {
        pyc__on_snapshot(k, msg);
        return;
    }
    /* A comm's callback (a widget's) may compute for long: bounded by the cell deadline only. */
    python_begin(k, chan, 0);
    pyc_py_comm(msg);
    if (python_end(k) != PYC_GUARD_NONE)
        pyc_log("a %s handler ran past the cell deadline of %g s and was interrupted", msg->msg_type,
                k->cell.timeout);
}

void
pyc__on_comm_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    python_begin(k, chan, PYC_LIMITS_REQUEST_TIMEOUT);
    json_t *content = pyc_py_comm_info(msg->content);
    python_end(k);
    pyc__reply(k, chan, msg, "comm_info_reply", NULL, content);
}

void
pyc__on_history(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pyc__reply(k, chan, msg, "history_reply", NULL, pyc__history_answer(k, msg->content));
}

void
pyc__on_connect(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pyc__reply(k, chan, msg, "connect_reply", NULL,
               json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "status", "ok", "shell_port", k->cf.ports[PYC_CHAN_SHELL],
                         "iopub_port", k->cf.ports[PYC_CHAN_IOPUB], "stdin_port", k->cf.ports[PYC_CHAN_STDIN],
                         "control_port", k->cf.ports[PYC_CHAN_CONTROL], "hb_port", k->cf.ports[PYC_CHAN_HB]));
}

void
pyc__on_shutdown(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *restart = json_object_get(msg->content, "restart");
    bool r = json_is_true(restart);
    /* `pyc new --replace` says why it ends the session ({"pyc": {"reason": "replaced"}}), for the closed
     * event; any other shutdown is a shutdown. */
    const char *why = json_string_value(json_object_get(json_object_get(msg->content, "pyc"), "reason"));
    pyc__lifelog_close_reason(k, why != NULL && strcmp(why, "replaced") == 0 ? PYC__CLOSE_REPLACED
                                                                                : PYC__CLOSE_SHUTDOWN);
    pyc__reply(k, chan, msg, "shutdown_reply", NULL, json_pack("{s:s, s:b}", "status", "ok", "restart", r));
    pyc__publish(k, msg, "shutdown_reply", json_pack("{s:s, s:b}", "status", "ok", "restart", r));
    atomic_store(&k->restart, r);
    pyc__quit(k);
}

void
pyc__on_interrupt(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    /* Delivered as a real SIGINT to the main thread so that blocking calls (time.sleep) wake up; an isolated
     * cell's process is killed instead. */
    if (atomic_load(&k->iso_pid) > 0)
        pyc__interrupt_main(k);
    else
        pthread_kill(k->main_thread, SIGINT);
    pyc__interrupt_subshells(k);
    pyc__reply(k, chan, msg, "interrupt_reply", NULL, json_pack("{s:s}", "status", "ok"));
}

/* usage_request (control): the kernel's CPU and memory from /proc, with the host's, in ipykernel's shape,
 * plus what pyc knows of the session: its limits and its checkpoint file (`pyc status` shows both). */
void
pyc__on_usage(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pthread_mutex_lock(&k->usage_lock);
    json_t *r = pyc_usage_report(getpid(), &k->usage);
    pthread_mutex_unlock(&k->usage_lock);
    if (r == NULL) {
        pyc__reply(k, chan, msg, "usage_reply", NULL,
                   json_pack("{s:s, s:s, s:s}", "status", "error", "ename", "UsageError", "evalue",
                             "cannot read /proc for this process"));
        return;
    }
    json_t *p = json_object_get(r, "pyc");
    json_object_set_new(p, "uptime", json_real(pyc_guard_uptime(k->guard)));
    json_object_set_new(p, "execution_count", json_integer(k->execution_count));
    json_object_set_new(p, "execution_state", json_string(atomic_load(&k->executing) ? "busy" : "idle"));
    json_object_set_new(p, "limits", pyc_limits_to_json(&k->limits));
    /* The running cell's CPU seconds so far, on the clock its CPU limit counts (null between cells); the
     * session's since its start are cpu_time. */
    double cell_cpu = pyc_guard_cell_cpu(k->guard);
    json_object_set_new(p, "cell_cpu_time", cell_cpu >= 0 ? json_real(cell_cpu) : json_null());
    /* The descriptors open now, the kernel's included, and the most the process may have (null: unknown, or
     * no limit); under --open-files the second is the kernel's own, the headroom and the cap. */
    int files = pyc__open_files();
    long long files_max = pyc__open_files_max();
    json_object_set_new(p, "open_files", files >= 0 ? json_integer(files) : json_null());
    json_object_set_new(p, "open_files_max", files_max >= 0 ? json_integer(files_max) : json_null());
    /* The checkpoint is made before the kernel answers its first request (kernel_info_reply names it), and
     * changed only in a forked child before its control thread starts: reading it here needs no lock. */
    const char *cp = pyc__checkpoint_path_if_made(k);
    json_object_set_new(p, "checkpoint", cp != NULL ? json_string(cp) : json_null());
    json_object_set_new(p, "environment", pyc_py_environment());
    json_object_set_new(p, "snapshots", pyc__snapshot_usage(k));
    json_object_set_new(r, "status", json_string("ok"));
    pyc__reply(k, chan, msg, "usage_reply", NULL, r);
}

/* True when v is absent or an array of strings. */
static bool
string_list(json_t *v)
{
    size_t i;
    json_t *s;
    if (v == NULL)
        return true;
    if (!json_is_array(v))
        return false;
    json_array_foreach(v, i, s) {
        if (!json_is_string(s))
            return false;
    }
    return true;
}

/* journal_request (control): {"expect": [msg_id...]} records cells a client sent and will not wait for
 * (`pyc fire`), {"ids": [msg_id...]} selects cells to report (default: the expected ones, else every
 * record), {"outputs": bool} (default: true when cells are selected) includes their outputs and replies;
 * {"late": true} reports instead the late outputs not handed out yet (what cells' threads printed after their
 * cells ended: pyc_journal_report_late), each once.  Answered on the control thread, so that it works while a
 * cell runs. */
void
pyc__on_journal(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *ids = json_object_get(msg->content, "ids"), *expect = json_object_get(msg->content, "expect");
    json_t *outputs = json_object_get(msg->content, "outputs"), *late = json_object_get(msg->content, "late");
    if (!string_list(ids) || !string_list(expect) || (outputs != NULL && !json_is_boolean(outputs)) ||
        (late != NULL && !json_is_boolean(late))) {
        pyc__reply(k, chan, msg, "journal_reply", NULL,
                   pyc__bad_request("journal_request: 'ids' and 'expect' must be lists of msg_ids, 'outputs' "
                                    "and 'late' booleans"));
        return;
    }
    size_t i;
    json_t *id;
    json_array_foreach(expect, i, id) {
        if (pyc_journal_expect(k->journal, json_string_value(id)) < 0)
            pyc_log("journal: out of memory: cell %s not recorded", json_string_value(id));
    }
    json_t *sel = ids != NULL ? ids : expect;
    size_t len;
    char *text = json_is_true(late) ? pyc_journal_report_late(k->journal, &len)
                                    : pyc_journal_report(k->journal, sel,
                                                         outputs != NULL ? json_is_true(outputs) : sel != NULL, &len);
    if (text == NULL) {
        pyc__reply(k, chan, msg, "journal_reply", NULL, pyc__bad_request("journal_request: out of memory"));
        return;
    }
    const pyc_frame_t *h = pyc__header_frame(msg);
    pyc__send_frames(k, chan, msg->idents, msg->n_idents, "journal_reply", h->data, h->size, NULL, text, len, true,
                     NULL, 0);
}
