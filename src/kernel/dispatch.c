/*
 * dispatch.c -- the handler table, and the rule every request follows: status busy before anything else it
 * causes, status idle after its last output, both with the request as parent (DESIGN.md section 3).  An
 * error with stop_on_error aborts the execute requests that were already waiting, each with its own busy and
 * idle; the other requests that were waiting are answered as usual, in order.
 *
 * Two entry points for two threads: pyc_kernel_control on the control thread (the requests whose handler
 * needs no Python, answered even while a cell runs), and pyc_kernel_handle on the main thread.
 */
#include "kernelint.h"

#include <time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fork.h"
#include "log.h"

typedef void (*handler_fn)(pyc_kernel_t *k, int chan, const pyc_msg_t *msg);

static const struct {
    const char *type;
    handler_fn fn;
    bool control_thread;         /* answered in the control thread, without Python */
} handlers[] = {
    /* Decoded first (pyc_execreq_decode, once per request): dispatch calls pyc__on_execute with it. */
    {"execute_request", NULL, false},
    {"kernel_info_request", pyc__on_kernel_info, true},
    {"is_complete_request", pyc__on_is_complete, false},
    {"complete_request", pyc__on_complete, false},
    {"inspect_request", pyc__on_inspect, false},
    {"comm_info_request", pyc__on_comm_info, false},
    {"history_request", pyc__on_history, false},
    {"comm_open", pyc__on_comm, false},
    {"comm_msg", pyc__on_comm, false},
    {"comm_close", pyc__on_comm, false},
    {"connect_request", pyc__on_connect, false},
    {"shutdown_request", pyc__on_shutdown, true},
    {"interrupt_request", pyc__on_interrupt, true},
    {"usage_request", pyc__on_usage, true},
    {"journal_request", pyc__on_journal, true},
    {"create_subshell_request", pyc__on_create_subshell, true},
    {"delete_subshell_request", pyc__on_delete_subshell, true},
    {"list_subshell_request", pyc__on_list_subshell, true},
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

/* The decoding of msg into *req when it is a readable execute_request (req, for the caller to pass on), else
 * NULL. */
static const pyc_execreq_t *
decode_execute(pyc_kernel_t *k, const pyc_msg_t *msg, pyc_execreq_t *req)
{
    if (msg->invalid != NULL || strcmp(msg->msg_type, "execute_request") != 0)
        return NULL;
    pyc_execreq_decode(req, msg->content, msg->metadata, &k->limits);
    return req;
}

/* Handles one request between busy and idle, on the main thread.  req: the request's decoding when it is an
 * execute_request that the caller decoded already; NULL to have it decoded here. */
static void
dispatch(pyc_kernel_t *k, int chan, pyc_msg_t *msg, const pyc_execreq_t *req)
{
    pyc__status(k, msg, "busy");
    /* Spares (children.c) stay good only while nothing but forks and kernel_info was asked. */
    const char *target = strcmp(msg->msg_type, "comm_open") == 0
                             ? json_string_value(json_object_get(msg->content, "target_name"))
                             : NULL;
    if (strcmp(msg->msg_type, "kernel_info_request") != 0 && (target == NULL || strcmp(target, "pyc.fork") != 0))
        pyc__state_may_change(k);
    handler_fn fn = find_handler(msg->msg_type, NULL);
    pyc_execreq_t here;
    if (req == NULL)
        req = decode_execute(k, msg, &here);
    if (msg->invalid != NULL)
        pyc__reply_invalid(k, chan, msg);
    else if (req != NULL)
        pyc__on_execute(k, chan, msg, req);
    else if (fn != NULL)
        fn(k, chan, msg);
    else
        pyc_log("%s: unknown message type '%s' (no reply)", chan == PYC_CHAN_CONTROL ? "control" : "shell",
                msg->msg_type);
    if (k->just_forked)
        return;                  /* a new child: the request was its parent's, and so is its idle */
    if (!k->flushed_at_end)
        pyc_streams_flush(k->streams);
    k->flushed_at_end = false;
    pyc__status(k, msg, "idle");
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
    if (msg->invalid == NULL && strcmp(msg->msg_type, "debug_request") == 0) {
        pyc__status(k, msg, "busy");
        pyc__debug_request(k, msg);   /* answered, and its idle published, by the debugger's thread */
        return true;
    }
    if (msg->invalid == NULL && (fn == NULL || !in_control)) {
        /* An execute_request on control (`pyc fire`) waits in the main thread's inbox: the journal has it as
         * queued from now on, before the main thread can begin (or refuse) it.  Silent ones are not journaled. */
        if (strcmp(msg->msg_type, "execute_request") == 0 && !pyc_execreq_silent(msg->content) &&
            pyc_journal_expect(k->journal, msg->msg_id) < 0)
            pyc_log("journal: out of memory: cell %s not recorded", msg->msg_id);
        return false;
    }
    pyc__status(k, msg, "busy");
    if (msg->invalid != NULL)
        pyc__reply_invalid(k, PYC_CHAN_CONTROL, msg);
    else
        fn(k, PYC_CHAN_CONTROL, msg);
    pyc__status(k, msg, "idle");
    pyc_msg_destroy(&msg);
    return true;
}

void
pyc_kernel_handle(pyc_kernel_t *k, int chan, pyc_msg_t *msg)
{
    pyc_guard_activity(k->guard);
    if (k->complete_warm == 1)
        k->complete_warm_since = pyc_now_ns();      /* the completer's warm-up waits for a pause */
    /* The rows of the cells before this request, when the kernel did not go idle after them (a pipelined burst):
     * committed within PYC_PERSIST_BATCH_MS even if this request runs long. */
    pyc__history_kick(k, false);
    if (chan == PYC_CHAN_SHELL && pyc__subshell_named(msg) && !pyc__subshell_kernel_level(msg)) {
        /* Requests for an existing subshell never come here (the shell thread routes them). */
        pyc__subshell_refuse(k, msg, NULL);
        pyc_msg_destroy(&msg);
        return;
    }
    /* Just after a restore: the clients' iopub sockets reconnect by themselves, a little after their shell
     * sockets may have; output published before they are back would be lost (handover.c). */
    pyc__handover_await_subscribers(k);
    pyc_execreq_t req;
    const pyc_execreq_t *er = decode_execute(k, msg, &req);
    if (chan == PYC_CHAN_SHELL && pyc__snapshot_before_cell(k, er) == 1) {
        /* This process is the snapshot taken before that cell, now restored: the cell was its restorer's. */
        pyc_fork_keep_inherited(msg);
        return;
    }
    pyc__set_parent(k, msg);
    k->current = msg;
    dispatch(k, chan, msg, er);
    k->current = NULL;
    pyc_guard_activity(k->guard);
    if (k->just_forked) {
        /* The request's frames are the parent's ZeroMQ messages: leave them alone in the child. */
        k->just_forked = false;
        pyc_fork_keep_inherited(msg);
        return;
    }
    pyc_msg_destroy(&msg);
    if (!k->aborting) {
        pyc__snapshot_after_request(k);
        return;
    }
    for (size_t i = 0; i < k->n_queued; i++) {
        pyc_msg_t *next = k->queued[i];
        pyc__set_parent(k, next);
        k->current = next;
        dispatch(k, PYC_CHAN_SHELL, next, NULL);
        k->current = NULL;
        if (k->just_forked) {
            /* A child made by a waiting request (pyc.fork, or a snapshot now restored): that request and the
             * ones after it are its parent's, answered there. */
            k->just_forked = false;
            for (size_t j = i; j < k->n_queued; j++)
                pyc_fork_keep_inherited(k->queued[j]);
            free(k->queued);
            k->queued = NULL;
            k->n_queued = 0;
            k->aborting = false;
            return;
        }
        pyc_msg_destroy(&next);
    }
    free(k->queued);
    k->queued = NULL;
    k->n_queued = 0;
    k->aborting = false;
    pyc__snapshot_after_request(k);
}
