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

void
pyc__on_kernel_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_error_t jerr;
    pyc__reply(k, chan, msg, "kernel_info_reply", NULL, json_loads(k->kernel_info, 0, &jerr));
}

void
pyc__on_is_complete(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
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
        pyc_py_enter();
        content = pyc_py_complete(code, pos);
        pyc_py_leave();
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
        pyc_py_enter();
        content = pyc_py_inspect(code, pos, json_is_integer(detail) ? (int)json_integer_value(detail) : 0);
        pyc_py_leave();
    }
    pyc__reply(k, chan, msg, "inspect_reply", NULL, content);
}

/* comm_open, comm_msg and comm_close from the frontend go to the comm manager inside the interpreter
 * (pyc._comm), which holds the targets registered from Python; pyc.fork is the kernel's own. */
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
    pyc_py_enter();
    pyc_py_comm(msg);
    pyc_py_leave();
}

void
pyc__on_comm_info(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pyc_py_enter();
    json_t *content = pyc_py_comm_info(msg->content);
    pyc_py_leave();
    pyc__reply(k, chan, msg, "comm_info_reply", NULL, content);
}

void
pyc__on_history(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    /* The answer includes the cells still queued: the client asked, so a lock is worth waiting for. */
    pyc_error_t err;
    pyc_history_t *h = pyc__history(k);
    if (pyc_history_flush(h, 200, &err) < 0)
        pyc_log("%s", err.text);
    pyc__reply(k, chan, msg, "history_reply", NULL, pyc_history_request(h, msg->content));
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
pyc__interrupt_main(pyc_kernel_t *k)
{
    if (atomic_load(&k->executing))
        pthread_kill(k->main_thread, SIGINT);
}

void
pyc__quit(pyc_kernel_t *k)
{
    atomic_store(&k->quit, 1);
    pyc__interrupt_main(k);
    if (k->wake_main != NULL)
        k->wake_main(k->wake_ctx);
}

void
pyc__on_shutdown(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *restart = json_object_get(msg->content, "restart");
    bool r = json_is_true(restart);
    pyc__reply(k, chan, msg, "shutdown_reply", NULL, json_pack("{s:s, s:b}", "status", "ok", "restart", r));
    pyc__publish(k, msg, "shutdown_reply", json_pack("{s:s, s:b}", "status", "ok", "restart", r));
    atomic_store(&k->restart, r);
    pyc__quit(k);
}

void
pyc__on_interrupt(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    /* Delivered as a real SIGINT to the main thread so that blocking calls (time.sleep) wake up. */
    pthread_kill(k->main_thread, SIGINT);
    pyc__reply(k, chan, msg, "interrupt_reply", NULL, json_pack("{s:s}", "status", "ok"));
}

/* usage_request (control): the kernel's CPU and memory from /proc, with the host's, in ipykernel's shape,
 * plus what pyc knows of the session. */
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
    json_object_set_new(r, "status", json_string("ok"));
    pyc__reply(k, chan, msg, "usage_reply", NULL, r);
}
