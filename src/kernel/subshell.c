/*
 * subshell.c -- kernel subshells (JEP 91, as ipykernel 7 has them): create_subshell_request,
 * delete_subshell_request and list_subshell_request on control; shell requests whose header carries a
 * subshell_id run on that subshell's own thread, in the same __main__, concurrently with the main shell
 * (the GIL decides between bytecodes).
 *
 * The first subshell asks the io to route shell (io.h: a shell thread reads the socket from then on); the
 * router (take, on that thread) queues each request whose subshell_id names a subshell to that subshell,
 * answers an unknown subshell_id at once with an error reply (ipykernel logs it and answers nothing), and
 * leaves the rest to the main thread.  Each subshell answers its requests in order, each between its busy
 * and idle, with the request as the parent of everything it causes: its thread's streams and displays go to
 * it (pyc_py_thread_parent, and the thread-local parent publish.c reads), its input() asks on stdin with it
 * as parent (one input at a time in the kernel, stdin_lock).  Execute requests count with the subshell's own
 * execution_count and leave In/Out and the history to the main shell (the JEP's "each subshell stores its
 * own execution count and history"); an error with stop_on_error aborts the execute requests queued on that
 * subshell only.  history_request is the main shell's (its SQLite connection is the main thread's): a
 * subshell answers it with an error.
 *
 * Its cells run in subcell.c, under the same per-cell limits as the main shell's: each subshell has a guard
 * (guard.h; its thread starts with the first cell that has a limit) and an output gate (outgate.h: host.c
 * counts what the subshell's thread publishes against it) of its own, made here with the subshell.
 *
 * Requests that are the kernel's rather than a shell's go to the main thread whatever subshell they name:
 * history_request (the history's SQLite connection is the main thread's), the comm_open of pyc.fork (a fork
 * of the whole kernel must happen on the thread that runs its request loop), and control requests sent on
 * shell.
 *
 * interrupt_request interrupts the main shell (SIGINT) and every subshell busy in a cell: a short-lived
 * thread raises KeyboardInterrupt in theirs (py.h: at their next bytecode, and only while they are still in
 * that cell; a call blocked in C first returns), so the control thread never waits for the GIL.
 * delete_subshell_request answers at once: the subshell is interrupted, stops after the request it is
 * answering (the requests still queued get an error reply each), and its thread is joined later by the main
 * thread between requests (pyc__reap_subshells), never by control.  The kernel's end gives each subshell a
 * second and leaves those that do not stop to the process's exit.
 */
#include "subshellint.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"


/* ---- the subshell's thread -------------------------------------------------------------------------------- */

/* The next request (taken over), waiting for one; NULL when the subshell is to stop. */
static pyc_msg_t *
next_request(pyc__subshell_t *s)
{
    for (;;) {
        if (atomic_load(&s->stop))
            return NULL;
        pyc_zqitem_t *it = pyc_zqueue_pop(&s->q);
        if (it != NULL) {
            pyc_msg_t *msg = it->msg;
            it->msg = NULL;
            pyc_zqueue_item_free(it);
            return msg;
        }
        struct pollfd p = {.fd = s->q.efd, .events = POLLIN};
        poll(&p, 1, -1);
    }
}

static void
answer(pyc__subshell_t *s, pyc_msg_t *msg)
{
    pyc_kernel_t *k = s->k;
    const char *t = msg->msg_type;
    s->current = msg;
    s->allow_stdin = false;
    pyc__status(k, msg, "busy");
    const pyc_frame_t *h = pyc__header_frame(msg);
    pyc_py_thread_parent(h->data, h->size);
    if (msg->invalid != NULL)
        pyc__reply_invalid(k, PYC_CHAN_SHELL, msg);
    else if (strcmp(t, "execute_request") == 0)
        pyc__subcell_execute(s, msg);
    else if (strcmp(t, "complete_request") == 0)
        pyc__on_complete(k, PYC_CHAN_SHELL, msg);
    else if (strcmp(t, "inspect_request") == 0)
        pyc__on_inspect(k, PYC_CHAN_SHELL, msg);
    else if (strcmp(t, "is_complete_request") == 0)
        pyc__on_is_complete(k, PYC_CHAN_SHELL, msg);
    else if (strcmp(t, "comm_info_request") == 0)
        pyc__on_comm_info(k, PYC_CHAN_SHELL, msg);
    else if (strcmp(t, "comm_open") == 0 || strcmp(t, "comm_msg") == 0 || strcmp(t, "comm_close") == 0)
        pyc__on_comm(k, PYC_CHAN_SHELL, msg);
    else if (strcmp(t, "kernel_info_request") == 0)
        pyc__on_kernel_info(k, PYC_CHAN_SHELL, msg);
    else if (strcmp(t, "connect_request") == 0)
        pyc__on_connect(k, PYC_CHAN_SHELL, msg);
    else
        pyc_log("subshell %s: unknown message type '%s' (no reply)", s->id, t);
    pyc_py_thread_parent(NULL, 0);          /* hands over what the thread's streams still hold */
    s->current = NULL;
    if (atomic_exchange(&s->stuck_answered, false))
        return;                             /* its guard sent the reply and the idle (guard_stuck) */
    pyc__status(k, msg, "idle");
}

static void *
subshell_main(void *arg)
{
    pyc__subshell_t *s = arg;
    pyc__subshell_bind_thread(s);
    pyc_py_thread_t *py = pyc_py_thread_begin();
    pyc_msg_t *msg;
    while ((msg = next_request(s)) != NULL) {
        answer(s, msg);
        pyc_msg_destroy(&msg);
    }
    pyc_py_thread_end(py);
    /* Deleted: what was still queued is answered, so that no client waits for a reply that cannot come.  (At
     * the kernel's end the closer drops the queue instead.) */
    pyc_zqitem_t *it;
    pyc_kernel_t *k = s->k;
    bool deleted = !k->shells.closed;
    while (!k->shells.closed && (it = pyc_zqueue_pop(&s->q)) != NULL) {
        pyc__subshell_refuse(k, it->msg, "the subshell was deleted before it answered");
        pyc_zqueue_item_free(it);
    }
    atomic_store(&s->done, true);
    /* A deleted subshell is joined by the main thread when idle, which sleeps until something happens: this
     * is that something.  s may be freed from here on. */
    if (deleted && k->wake_main != NULL)
        k->wake_main(k->wake_ctx);
    return NULL;
}

/* ---- routing (the shell thread) ---------------------------------------------------------------------------- */

/* pyc_io_t.route_shell's take: a request for a subshell goes to its queue; one for a subshell that does not
 * exist is answered with an error; the main shell's are left to the main thread. */
static bool
take(void *ctx, pyc_msg_t *msg)
{
    pyc_kernel_t *k = ctx;
    if (!pyc__subshell_named(msg) || pyc__subshell_kernel_level(msg))
        return false;
    json_t *id = json_object_get(msg->header, "subshell_id");
    pthread_mutex_lock(&k->shells.lock);
    pyc__subshell_t *s = k->shells.live;
    while (s != NULL && !(json_is_string(id) && strcmp(s->id, json_string_value(id)) == 0))
        s = s->next;
    if (s != NULL)
        pyc_zqueue_push_msg(&s->q, PYC_CHAN_SHELL, msg, "shell");
    pthread_mutex_unlock(&k->shells.lock);
    if (s == NULL) {
        pyc__subshell_refuse(k, msg, NULL);
        pyc_msg_destroy(&msg);
    }
    return true;
}

bool
pyc__subshell_kernel_level(const pyc_msg_t *msg)
{
    static const char *const main_only[] = {"history_request", "shutdown_request", "interrupt_request",
                                            "usage_request", "debug_request", "create_subshell_request",
                                            "delete_subshell_request", "list_subshell_request"};
    for (size_t i = 0; i < sizeof main_only / sizeof main_only[0]; i++) {
        if (strcmp(msg->msg_type, main_only[i]) == 0)
            return true;
    }
    json_t *target = json_object_get(msg->content, "target_name");
    return strcmp(msg->msg_type, "comm_open") == 0 && json_is_string(target) &&
           strcmp(json_string_value(target), "pyc.fork") == 0;
}

bool
pyc__subshell_named(const pyc_msg_t *msg)
{
    json_t *id = msg->header != NULL ? json_object_get(msg->header, "subshell_id") : NULL;
    return id != NULL && !json_is_null(id);
}

void
pyc__subshell_refuse(pyc_kernel_t *k, const pyc_msg_t *msg, const char *why)
{
    json_t *id = json_object_get(msg->header, "subshell_id");
    char text[160], type[128];
    if (why == NULL)
        snprintf(text, sizeof text, "no subshell has the id %.60s",
                 json_is_string(id) ? json_string_value(id) : "(not a string)");
    else
        snprintf(text, sizeof text, "%s", why);
    pyc__reply_type(msg->msg_type, type, sizeof type);
    pyc_log("shell: %s (a %s)", text, msg->msg_type);
    pyc__status(k, msg, "busy");
    if (strncmp(msg->msg_type, "comm_", 5) != 0 || strcmp(msg->msg_type, "comm_info_request") == 0) {
        /* comm_open, comm_msg and comm_close have no reply */
        json_t *content = pyc__bad_request(text);
        json_object_set_new(content, "ename", json_string("SubshellNotFound"));
        pyc__reply(k, PYC_CHAN_SHELL, msg, type, pyc__reply_metadata("error"), content);
    }
    pyc__status(k, msg, "idle");
}

/* ---- control ----------------------------------------------------------------------------------------------- */

static void
subshell_free(pyc__subshell_t *s)
{
    pyc_zqueue_clear(&s->q);     /* requests still queued are dropped with it */
    pyc_guard_destroy(&s->guard);
    pyc_outgate_destroy(&s->out);
    free(s);
}

/* Asks a subshell to stop after its current request, interrupting that request if it is a cell. */
static void
subshell_stop(pyc__subshell_t *s)
{
    atomic_store(&s->stop, true);
    pyc_zqueue_signal(&s->q);
    pyc__subshell_interrupt_cell(s);
}

static void
reply_error(pyc_kernel_t *k, int chan, const pyc_msg_t *msg, const char *type, const char *ename, const char *why)
{
    pyc__reply(k, chan, msg, type, NULL,
               json_pack("{s:s, s:s, s:s, s:[]}", "status", "error", "ename", ename, "evalue", why, "traceback"));
}

void
pyc__on_create_subshell(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    pyc_error_t err;
    if (k->shells.closed) {
        reply_error(k, chan, msg, "create_subshell_reply", "SubshellError", "the kernel is shutting down");
        return;
    }
    if (k->io->route_shell == NULL || k->io->route_shell(k->io, take, k, &err) < 0) {
        reply_error(k, chan, msg, "create_subshell_reply", "SubshellError",
                    k->io->route_shell == NULL ? "this kernel's channels have no subshells" : err.text);
        return;
    }
    pyc__subshell_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        reply_error(k, chan, msg, "create_subshell_reply", "MemoryError", "out of memory");
        return;
    }
    s->k = k;
    pyc_outgate_init(&s->out);
    pyc_msg_new_id(s->id);
    if (pyc_zqueue_init(&s->q) < 0) {
        subshell_free(s);
        reply_error(k, chan, msg, "create_subshell_reply", "SubshellError", "cannot make the subshell's queue");
        return;
    }
    /* The per-cell limits only: the idle timeout, the lifetime, the memory and open-file caps are the
     * kernel's guard's.  Its thread starts with the first cell that has a limit. */
    pyc_limits_t cell_only = k->limits;
    cell_only.idle_timeout = cell_only.lifetime = 0;
    cell_only.cell_timeout = cell_only.cell_cpu = 0;
    cell_only.open_files = 0;
    pyc_guard_callbacks_t gcb = pyc__subcell_guard_callbacks(s);
    s->guard = pyc_guard_new(&cell_only, &gcb, &err);
    if (s->guard == NULL) {
        subshell_free(s);
        reply_error(k, chan, msg, "create_subshell_reply", "SubshellError", err.text);
        return;
    }
    /* Made by the control thread, which blocks SIGINT and SIGTERM (app.c): the new thread inherits that, and
     * the signals stay the main thread's. */
    pthread_mutex_lock(&k->shells.lock);
    int alive = 0;
    for (pyc__subshell_t *o = k->shells.live; o != NULL; o = o->next)
        alive++;
    int rc = k->shells.closed ? -1 : alive >= k->shells.max ? -2
                                      : pthread_create(&s->thread, NULL, subshell_main, s);
    if (rc == 0) {
        s->next = k->shells.live;
        k->shells.live = s;
    }
    pthread_mutex_unlock(&k->shells.lock);
    if (rc == -2) {
        subshell_free(s);
        char why[160];
        snprintf(why, sizeof why, "%d subshells are alive, the most this kernel keeps (PYC_MAX_SUBSHELLS): "
                 "delete one first", alive);
        reply_error(k, chan, msg, "create_subshell_reply", "SubshellError", why);
        return;
    }
    if (rc != 0) {
        subshell_free(s);
        reply_error(k, chan, msg, "create_subshell_reply", "SubshellError",
                    rc < 0 ? "the kernel is shutting down" : "cannot start the subshell's thread");
        return;
    }
    pyc__reply(k, chan, msg, "create_subshell_reply", NULL,
               json_pack("{s:s, s:s}", "status", "ok", "subshell_id", s->id));
}

void
pyc__on_delete_subshell(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *id = json_object_get(msg->content, "subshell_id");
    pyc__subshell_t *found = NULL;
    pthread_mutex_lock(&k->shells.lock);
    for (pyc__subshell_t **p = &k->shells.live; json_is_string(id) && *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->id, json_string_value(id)) == 0) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&k->shells.lock);
    if (found == NULL) {
        char why[160];
        snprintf(why, sizeof why, "no subshell has the id %.60s", json_is_string(id) ? json_string_value(id)
                                                                                       : "(none given)");
        reply_error(k, chan, msg, "delete_subshell_reply", "SubshellNotFound", why);
        return;
    }
    /* Not joined here: control must not wait for a cell, an input() or the GIL.  The main thread joins it
     * once it has returned (pyc__reap_subshells). */
    subshell_stop(found);
    pthread_mutex_lock(&k->shells.lock);
    found->next = k->shells.leaving;
    k->shells.leaving = found;
    pthread_mutex_unlock(&k->shells.lock);
    pyc__reply(k, chan, msg, "delete_subshell_reply", NULL, json_pack("{s:s}", "status", "ok"));
}

void
pyc__on_list_subshell(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&k->shells.lock);
    for (pyc__subshell_t *s = k->shells.live; s != NULL; s = s->next)
        json_array_insert_new(ids, 0, json_string(s->id));   /* in the order they were made */
    pthread_mutex_unlock(&k->shells.lock);
    pyc__reply(k, chan, msg, "list_subshell_reply", NULL, json_pack("{s:s, s:o}", "status", "ok", "subshell_id", ids));
}

void
pyc__reap_subshells(pyc_kernel_t *k)
{
    pthread_mutex_lock(&k->shells.lock);
    for (pyc__subshell_t **p = &k->shells.leaving; *p != NULL;) {
        pyc__subshell_t *s = *p;
        if (atomic_load(&s->done)) {
            *p = s->next;
            pthread_join(s->thread, NULL);
            subshell_free(s);
        } else {
            p = &s->next;
        }
    }
    pthread_mutex_unlock(&k->shells.lock);
}

int
pyc__end_subshells(pyc_kernel_t *k)
{
    pthread_mutex_lock(&k->shells.lock);
    pyc__subshell_t *all = k->shells.live, *leaving = k->shells.leaving;
    k->shells.live = k->shells.leaving = NULL;
    k->shells.closed = true;
    pthread_mutex_unlock(&k->shells.lock);
    /* Each gets a second to finish its request (interrupted just before, pyc_kernel_closing): a cell blocked
     * in C (time.sleep(100)) sees no interrupt until the call returns, and the kernel does not wait for that.
     * Such a thread is left running, with its memory; the caller then ends the process without freeing what
     * the thread may still touch. */
    int left = 0;
    for (int list = 0; list < 2; list++) {
        for (pyc__subshell_t *s = list == 0 ? all : leaving, *next; s != NULL; s = next) {
            next = s->next;
            atomic_store(&s->stop, true);
            pyc_zqueue_signal(&s->q);
            struct timespec until = pyc_wall_after(1000);
            if (pthread_timedjoin_np(s->thread, NULL, &until) == 0) {
                subshell_free(s);
            } else {
                pyc_log("subshell %s: still busy at shutdown; left to the process's end", s->id);
                pthread_detach(s->thread);
                left++;
            }
        }
    }
    return left;
}
