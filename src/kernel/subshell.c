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
 * An execute_request is decoded as on the main shell (execreq.h), and a cell keeps the same per-cell limits:
 * its deadline and CPU time are kept by a guard of the subshell's own (guard.h; its thread starts with the
 * first cell that has a limit), and its reply carries metadata.pyc (outcome.h) without the output counts,
 * which only the main shell keeps.  A cell that does not stop within the grace after its interrupt is answered
 * by that guard's thread and goes on in the subshell's (guard_stuck): the kernel is not ended for it, as it is
 * for the main shell's, whose thread is the kernel's.
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
#include "kernelint.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "zqueue.h"

struct pyc__subshell {
    pyc__subshell_t *next;       /* in the kernel's list, under subshells_lock */
    pyc_kernel_t *k;
    char id[PYC_MSG_ID_LEN + 1];
    pthread_t thread;
    pyc_zqueue_t q;              /* its requests; the eventfd also wakes the thread to stop */
    atomic_bool stop;
    atomic_bool done;            /* its thread has returned: a join will not wait */
    atomic_ulong cell_token;     /* the token of the cell it runs (pyc_py_interrupt_cells), else 0 */

    /* The limits of its cells: the per-cell deadline and CPU time, kept by a guard of its own (its thread is
     * started by the first cell with a limit).  Stuck past the grace, a subshell cell is answered by the
     * guard's thread (guard_stuck), and goes on in the subshell's thread: see execute(). */
    pyc_guard_t *guard;
    atomic_bool stuck_answered;  /* guard_stuck has sent the reply and the idle of the running request */
    pyc_cellclock_t clock;       /* the running cell's */
    double cell_timeout, cell_cpu;

    /* Its thread only. */
    int execution_count;
    const pyc_msg_t *current;    /* the request being answered */
    bool allow_stdin;
};

/* The subshell whose thread this is; NULL on every other thread. */
static _Thread_local pyc__subshell_t *here;

/* The token of the next subshell cell (pyc_py_interrupt_cells); never 0. */
static atomic_ulong next_cell_token = 1;

const pyc_msg_t *
pyc__subshell_request(void)
{
    return here != NULL ? here->current : NULL;
}

bool
pyc__subshell_stopping(void)
{
    return here != NULL && atomic_load(&here->stop);
}

bool
pyc__subshell_allow_stdin(void)
{
    return here != NULL && here->allow_stdin;
}

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

static bool
is_execute(const pyc_zqitem_t *it)
{
    return strcmp(it->msg->msg_type, "execute_request") == 0;
}

/* After an error with stop_on_error: the execute requests queued on this subshell when the cell failed are taken
 * out (abort_take, before the cell's reply: a request sent after the client saw that reply is not aborted),
 * then aborted, each with its busy and idle (abort_answer, after the reply); the others stay queued, in their
 * order. */
static pyc_zqitem_t *
abort_take(pyc__subshell_t *s)
{
    return pyc_zqueue_take_if(&s->q, is_execute);
}

static void
abort_answer(pyc__subshell_t *s, pyc_zqitem_t *taken)
{
    for (pyc_zqitem_t *it = taken, *next; it != NULL; it = next) {
        next = it->next;
        pyc__status(s->k, it->msg, "busy");
        pyc__abort_reply(s->k, PYC_CHAN_SHELL, it->msg);
        pyc__status(s->k, it->msg, "idle");
        pyc_zqueue_item_free(it);
    }
}

/* The metadata of a subshell cell's execute_reply: status, and metadata.pyc as a main-shell cell's without
 * "output" and "output_dropped": a subshell's output is not counted (no output cap), and zeros would say
 * that it printed nothing. */
static json_t *
subshell_metadata(const char *status, const pyc_outcome_t *o)
{
    json_t *md = pyc__reply_metadata(status);
    json_t *pmd = pyc_outcome_metadata(o);
    json_object_del(pmd, "output");
    json_object_del(pmd, "output_dropped");
    json_object_set_new(md, "pyc", pmd);
    return md;
}

/* ---- the subshell's guard (its thread) --------------------------------------------------------------------- */

/* Starts a thread that raises KeyboardInterrupt in the given cells (idents: their cell tokens, a malloc'd array
 * ending in 0, taken over), so that the caller never waits for the GIL. */
static void
interrupt_idents(unsigned long *idents);

/* The cell ran past its deadline or its CPU time: KeyboardInterrupt in it (twice, the guard's second half way
 * through the grace).  Called with the guard's lock held: it only starts the interrupter. */
static void
guard_interrupt(void *ctx, int why)
{
    pyc__subshell_t *s = ctx;
    (void)why;
    unsigned long *one = calloc(2, sizeof *one);
    if (one != NULL && (one[0] = atomic_load(&s->cell_token)) != 0)
        interrupt_idents(one);
    else
        free(one);
}

/* The interrupted cell did not stop within the grace: blocked in C (a subshell's time.sleep is not cut short
 * by an interrupt, which only the main thread's signal handler does) or ignoring KeyboardInterrupt.  The main
 * shell's stuck cell ends the kernel, whose main thread is the one stuck; here only this subshell is, so the
 * request is answered now -- the limit's error, outcome "timeout", the kernel intact -- and the cell goes on in
 * the subshell's thread, which answers its next requests once the cell ends (its result is dropped). */
static void
guard_stuck(void *ctx, int why)
{
    pyc__subshell_t *s = ctx;
    pyc_kernel_t *k = s->k;
    const pyc_msg_t *msg = s->current;
    pyc_log("subshell %s: cell %d did not stop within %g s of being interrupted; answered, and left running in "
            "its thread", s->id, s->execution_count, k->limits.cell_grace);
    pyc_limit_stop_t stop = {.why = why, .cell_timeout = s->cell_timeout, .cell_cpu = s->cell_cpu,
                             .lifetime = k->limits.lifetime, .grace = k->limits.cell_grace};
    json_t *err = pyc_outcome_limit_error(&stop, NULL);     /* its ename; the evalue says more here */
    json_t *ev = json_sprintf("the cell ran past its %s of %g s and did not stop within %g s of its interrupt "
                              "(stuck in code that does not check for interrupts, such as time.sleep); it goes on "
                              "in the subshell's thread, which answers its next requests once it ends, and the "
                              "kernel goes on", why == PYC_GUARD_CPU ? "CPU time limit" : "deadline",
                              why == PYC_GUARD_CPU ? s->cell_cpu : s->cell_timeout, k->limits.cell_grace);
    json_object_set_new(err, "evalue", ev);
    json_t *tb = json_array();
    json_array_append_new(tb, json_sprintf("%s: %s", json_string_value(json_object_get(err, "ename")),
                                           json_string_value(ev)));
    json_object_set_new(err, "traceback", tb);
    pyc__publish(k, msg, "error", json_deep_copy(err));
    pyc_outcome_t o = {.outcome = pyc_outcome_of_limit(why), .interrupted = true, .why = why,
                       .kernel_ending = atomic_load(&k->quit) != 0};
    pyc_cellclock_read(&s->clock, &o.wall, &o.cpu);
    pyc__reply(k, PYC_CHAN_SHELL, msg, "execute_reply", subshell_metadata("error", &o),
               pyc__execute_error_content(err, s->execution_count, NULL, NULL));
    json_decref(err);
    pyc__status(k, msg, "idle");
    atomic_store(&s->stuck_answered, true);
}

static void
guard_none(void *ctx, int why)
{
    (void)ctx;
    (void)why;              /* a subshell's guard keeps no idle timeout or lifetime: the kernel's guard does */
}

static void
guard_no_overdue(void *ctx)
{
    (void)ctx;              /* nor the shutdown grace */
}

static void
execute(pyc__subshell_t *s, const pyc_msg_t *msg)
{
    pyc_kernel_t *k = s->k;
    pyc_execreq_t req;
    const char *bad = pyc_execreq_decode(&req, msg->content, msg->metadata, &k->limits) < 0 ? req.refused : NULL;
    /* Isolation and transactions fork the whole kernel, which only its main shell does (the fork rules): a
     * subshell cell that asks for either is refused rather than run without it. */
    if (bad == NULL && req.isolated)
        bad = "a subshell cannot run an isolated cell (only the main shell forks): send it without subshell_id";
    else if (bad == NULL && (req.transaction || req.snapshot != NULL))
        bad = "a subshell cannot take a snapshot or run a transaction (only the main shell forks): send it "
              "without subshell_id";
    if (bad != NULL) {
        json_t *content = pyc__bad_request(bad);
        json_object_set_new(content, "execution_count", json_integer(s->execution_count));
        pyc__reply(k, PYC_CHAN_SHELL, msg, "execute_reply", pyc__reply_metadata("error"), content);
        return;
    }
    bool silent = req.silent, stop_on_error = req.stop_on_error;
    if (req.store_history)
        s->execution_count++;
    s->allow_stdin = req.allow_stdin;
    if (!silent) {
        pyc__publish(k, msg, "execute_input",
                     json_pack("{s:O, s:i}", "code", req.source_v, "execution_count", s->execution_count));
        pyc_journal_begin(k->journal, msg->msg_id, pyc__header_frame(msg)->data, pyc__header_frame(msg)->size,
                          s->execution_count);
    }
    pyc_py_exec_opts_t opts = {.silent = silent, .store_history = false, .allow_stdin = s->allow_stdin,
                               .execution_count = s->execution_count, .user_expressions = req.user_expressions};
    pyc_py_exec_result_t res;
    opts.cell_token = atomic_fetch_add(&next_cell_token, 1);
    s->cell_timeout = req.limits.timeout;
    s->cell_cpu = req.limits.cpu;
    pyc_cellclock_start(&s->clock);
    atomic_store(&s->cell_token, opts.cell_token);
    pyc_guard_cell_begin(s->guard, req.limits.timeout, req.limits.cpu);
    pyc_py_execute_subshell(req.code, &opts, &res);
    atomic_store(&s->cell_token, 0);
    int why = PYC_GUARD_NONE;
    if (!pyc_guard_cell_end(s->guard, &why)) {
        /* The guard answered this request when the cell did not stop (guard_stuck): the result is dropped, and
         * the subshell goes on with its next request once the guard is done with this one. */
        while (!atomic_load(&s->stuck_answered))
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        json_decref(res.error);
        json_decref(res.user_expressions);
        json_decref(res.payload);
        return;
    }
    if (k->user_forked)
        pyc__user_fork_exit(k);  /* a child of os.fork() in the cell, back from it: not a subshell */
    /* An interrupt reached the cell: a limit's, or an interrupt_request's (the subshell's cell raised it). */
    const char *ename = res.ok ? NULL : json_string_value(json_object_get(res.error, "ename"));
    bool interrupted = why != PYC_GUARD_NONE || (ename != NULL && strcmp(ename, "KeyboardInterrupt") == 0);
    const char *outcome = res.ok ? "ok" : interrupted ? "interrupted" : "error";
    if (why != PYC_GUARD_NONE) {
        /* As a main-shell cell: the limit's error, with where the cell was when it was interrupted. */
        pyc_limit_stop_t stop = {.why = why, .cell_timeout = req.limits.timeout, .cell_cpu = req.limits.cpu,
                                 .lifetime = k->limits.lifetime, .grace = k->limits.cell_grace};
        json_t *e = pyc_outcome_limit_error(&stop, json_object_get(res.error, "traceback"));
        json_decref(res.error);
        res.error = e;
        res.ok = false;
        outcome = pyc_outcome_of_limit(why);
    }
    json_t *content;
    if (res.ok) {
        content = json_pack("{s:s, s:i, s:o, s:o}", "status", "ok", "execution_count", s->execution_count,
                            "user_expressions", res.user_expressions, "payload", res.payload);
    } else {
        if (!silent)
            pyc__publish(k, msg, "error", json_deep_copy(res.error));
        content = pyc__execute_error_content(res.error, s->execution_count, res.user_expressions, res.payload);
        json_decref(res.user_expressions);
        json_decref(res.payload);
    }
    pyc_outcome_t o = {.outcome = outcome, .interrupted = interrupted, .why = why,
                       .kernel_ending = atomic_load(&k->quit) != 0};
    pyc_cellclock_read(&s->clock, &o.wall, &o.cpu);
    pyc_py_thread_parent(NULL, 0);          /* the cell's last text leaves before its reply */
    pyc_py_thread_parent(pyc__header_frame(msg)->data, pyc__header_frame(msg)->size);
    pyc_zqitem_t *aborted = !res.ok && stop_on_error && !silent ? abort_take(s) : NULL;
    pyc__reply(k, PYC_CHAN_SHELL, msg, "execute_reply", subshell_metadata(res.ok ? "ok" : "error", &o), content);
    abort_answer(s, aborted);
    json_decref(res.error);
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
        execute(s, msg);
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
    here = s;
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
    bool deleted = !k->subshells_closed;
    while (!k->subshells_closed && (it = pyc_zqueue_pop(&s->q)) != NULL) {
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
    pthread_mutex_lock(&k->subshells_lock);
    pyc__subshell_t *s = k->subshells;
    while (s != NULL && !(json_is_string(id) && strcmp(s->id, json_string_value(id)) == 0))
        s = s->next;
    if (s != NULL)
        pyc_zqueue_push_msg(&s->q, PYC_CHAN_SHELL, msg, "shell");
    pthread_mutex_unlock(&k->subshells_lock);
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
    free(s);
}

/* Asks a subshell to stop after its current request, interrupting that request if it is a cell. */
static void
subshell_stop(pyc__subshell_t *s)
{
    atomic_store(&s->stop, true);
    pyc_zqueue_signal(&s->q);
    unsigned long *one = calloc(2, sizeof *one);
    if (one != NULL && (one[0] = atomic_load(&s->cell_token)) != 0)
        interrupt_idents(one);
    else
        free(one);
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
    if (k->subshells_closed) {
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
    pyc_guard_callbacks_t gcb = {guard_interrupt, guard_stuck, guard_none, guard_no_overdue, s, NULL, NULL, NULL,
                                 NULL};
    s->guard = pyc_guard_new(&cell_only, &gcb, &err);
    if (s->guard == NULL) {
        subshell_free(s);
        reply_error(k, chan, msg, "create_subshell_reply", "SubshellError", err.text);
        return;
    }
    /* Made by the control thread, which blocks SIGINT and SIGTERM (app.c): the new thread inherits that, and
     * the signals stay the main thread's. */
    pthread_mutex_lock(&k->subshells_lock);
    int alive = 0;
    for (pyc__subshell_t *o = k->subshells; o != NULL; o = o->next)
        alive++;
    int rc = k->subshells_closed ? -1 : alive >= k->max_subshells ? -2
                                      : pthread_create(&s->thread, NULL, subshell_main, s);
    if (rc == 0) {
        s->next = k->subshells;
        k->subshells = s;
    }
    pthread_mutex_unlock(&k->subshells_lock);
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
    pthread_mutex_lock(&k->subshells_lock);
    for (pyc__subshell_t **p = &k->subshells; json_is_string(id) && *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->id, json_string_value(id)) == 0) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&k->subshells_lock);
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
    pthread_mutex_lock(&k->subshells_lock);
    found->next = k->leaving;
    k->leaving = found;
    pthread_mutex_unlock(&k->subshells_lock);
    pyc__reply(k, chan, msg, "delete_subshell_reply", NULL, json_pack("{s:s}", "status", "ok"));
}

void
pyc__on_list_subshell(pyc_kernel_t *k, int chan, const pyc_msg_t *msg)
{
    json_t *ids = json_array();
    pthread_mutex_lock(&k->subshells_lock);
    for (pyc__subshell_t *s = k->subshells; s != NULL; s = s->next)
        json_array_insert_new(ids, 0, json_string(s->id));   /* in the order they were made */
    pthread_mutex_unlock(&k->subshells_lock);
    pyc__reply(k, chan, msg, "list_subshell_reply", NULL, json_pack("{s:s, s:o}", "status", "ok", "subshell_id", ids));
}

/* The interrupter: raises KeyboardInterrupt in the given cells (those still running when it has the GIL: py.h),
 * then ends. */
static void *
interrupter(void *arg)
{
    unsigned long *idents = arg;
    size_t n = 0;
    while (idents[n] != 0)
        n++;
    pyc_py_interrupt_cells(idents, n);
    free(idents);
    return NULL;
}

static void
interrupt_idents(unsigned long *idents)
{
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, interrupter, idents) != 0)
        free(idents);
    pthread_attr_destroy(&attr);
}

void
pyc__interrupt_subshells(pyc_kernel_t *k)
{
    size_t n = 0, cap = 0;
    unsigned long *idents = NULL;
    pthread_mutex_lock(&k->subshells_lock);
    for (pyc__subshell_t *s = k->subshells; s != NULL; s = s->next) {
        unsigned long id = atomic_load(&s->cell_token);
        if (id == 0)
            continue;
        if (n + 1 >= cap) {
            size_t c = cap == 0 ? 8 : cap * 2;
            unsigned long *grown = realloc(idents, c * sizeof *grown);
            if (grown == NULL)
                break;
            idents = grown;
            cap = c;
        }
        idents[n++] = id;
    }
    pthread_mutex_unlock(&k->subshells_lock);
    if (n == 0) {
        free(idents);
        return;
    }
    idents[n] = 0;
    interrupt_idents(idents);
}

void
pyc__reap_subshells(pyc_kernel_t *k)
{
    pthread_mutex_lock(&k->subshells_lock);
    for (pyc__subshell_t **p = &k->leaving; *p != NULL;) {
        pyc__subshell_t *s = *p;
        if (atomic_load(&s->done)) {
            *p = s->next;
            pthread_join(s->thread, NULL);
            subshell_free(s);
        } else {
            p = &s->next;
        }
    }
    pthread_mutex_unlock(&k->subshells_lock);
}

int
pyc__end_subshells(pyc_kernel_t *k)
{
    pthread_mutex_lock(&k->subshells_lock);
    pyc__subshell_t *all = k->subshells, *leaving = k->leaving;
    k->subshells = k->leaving = NULL;
    k->subshells_closed = true;
    pthread_mutex_unlock(&k->subshells_lock);
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
