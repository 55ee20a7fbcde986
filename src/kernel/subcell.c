/*
 * subcell.c -- a subshell's cells (subshell.c has its threads, its routing and its control requests): an
 * execute_request on a subshell, decoded as on the main shell (execreq.h), run under the subshell's own
 * per-cell limits -- its deadline and CPU time kept by its guard (guard.h), its output cap by its gate
 * (outgate.h) -- and answered with metadata.pyc (outcome.h); stop_on_error aborts the execute requests
 * queued on that subshell only.
 *
 * A cell that does not stop within the grace after its interrupt is answered by the guard's thread
 * (guard_stuck) and goes on in the subshell's: the kernel is not ended for it, as it is for the main shell's,
 * whose thread is the kernel's.  The subshell's thread, back from such a cell, drops its result and waits
 * until the guard's answer is out (stuck_answered) before it touches the request again.
 */
#include "subshellint.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "zqueue.h"

/* The token of the next subshell cell (pyc_py_interrupt_cells); never 0. */
static atomic_ulong next_cell_token = 1;

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

/* The metadata of a subshell cell's execute_reply: status, and metadata.pyc as a main-shell cell's. */
static json_t *
subshell_metadata(const char *status, const pyc_outcome_t *o)
{
    json_t *md = pyc__reply_metadata(status);
    json_object_set_new(md, "pyc", pyc_outcome_metadata(o));
    return md;
}

/* The end of a cell's output: what its thread's streams still hold goes out under the cap, then the cap's
 * notice when output was dropped, then the count stops. */
static void
close_output(pyc__subshell_t *s, const pyc_msg_t *msg, bool silent)
{
    pyc_py_thread_parent(NULL, 0);          /* the cell's last text leaves before its reply */
    pyc_py_thread_parent(pyc__header_frame(msg)->data, pyc__header_frame(msg)->size);
    char notice[512];
    if (!silent && pyc_outgate_notice(&s->out, notice, sizeof notice) > 0)
        pyc__publish(s->k, msg, "stream", json_pack("{s:s, s:s}", "name", "stderr", "text", notice));
}

/* ---- the subshell's guard (its thread) --------------------------------------------------------------------- */

/* The cell ran past its deadline or its CPU time: KeyboardInterrupt in it (twice, the guard's second half way
 * through the grace).  Called with the guard's lock held: it only starts the interrupter. */
static void
guard_interrupt(void *ctx, int why)
{
    (void)why;
    pyc__subshell_interrupt_cell(ctx);
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
    char notice[512];
    if (!s->cell_silent && pyc_outgate_notice(&s->out, notice, sizeof notice) > 0)
        pyc__publish(k, msg, "stream", json_pack("{s:s, s:s}", "name", "stderr", "text", notice));
    if (!s->cell_silent)
        pyc__publish_error_within_cap(s->k, &s->out, msg, err);
    pyc_outcome_t o = {.outcome = pyc_outcome_of_limit(why), .interrupted = true, .why = why,
                       .kernel_ending = atomic_load(&k->quit) != 0, .output = pyc_outgate_stats(&s->out)};
    pyc_cellclock_read(&s->clock, &o.wall, &o.cpu);
    /* As for any failed cell: with stop_on_error, the execute requests queued behind it are aborted. */
    pyc_zqitem_t *aborted = s->cell_stop_on_error && !s->cell_silent ? abort_take(s) : NULL;
    pyc__reply(k, PYC_CHAN_SHELL, msg, "execute_reply", subshell_metadata("error", &o),
               pyc__execute_error_content(err, s->execution_count, NULL, NULL));
    json_decref(err);
    pyc__status(k, msg, "idle");
    abort_answer(s, aborted);
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

void
pyc__subcell_execute(pyc__subshell_t *s, const pyc_msg_t *msg)
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
        /* As the main shell answers a request it cannot run: BadRequest, and the whole metadata.pyc. */
        json_t *error = json_pack("{s:s, s:s, s:[o]}", "ename", "BadRequest", "evalue", bad, "traceback",
                                  json_sprintf("BadRequest: %s", bad));
        pyc_outcome_t o = {.outcome = "bad_request", .kernel_ending = atomic_load(&k->quit) != 0};
        pyc__reply(k, PYC_CHAN_SHELL, msg, "execute_reply", subshell_metadata("error", &o),
                   pyc__execute_error_content(error, s->execution_count, NULL, NULL));
        json_decref(error);
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
    s->cell_silent = silent;
    s->cell_stop_on_error = stop_on_error;
    pyc_cellclock_start(&s->clock);
    atomic_store(&s->cell_token, opts.cell_token);
    pyc_outgate_set(&s->out, true, req.limits.output_bytes, req.limits.output_messages);
    pyc_guard_cell_begin(s->guard, req.limits.timeout, req.limits.cpu);
    /* The state may change under the main shell's spares (children.c) from here on, and until the cell's end:
     * a spare forked while it ran holds a half-run cell, and is dropped by the second mark. */
    pyc__state_may_change(k);
    pyc_py_execute_subshell(req.code, &opts, &res);
    pyc__state_may_change(k);
    if (k->user_forked)
        pyc__user_fork_exit(k);  /* a child of os.fork() in the cell, back from it: not a subshell (and its
                                  * guard's lock and thread are the parent's) */
    atomic_store(&s->cell_token, 0);
    int why = PYC_GUARD_NONE;
    if (!pyc_guard_cell_end(s->guard, &why)) {
        /* The guard answered this request when the cell did not stop (guard_stuck): the result is dropped, and
         * the subshell goes on with its next request once the guard is done with this one. */
        while (!atomic_load(&s->stuck_answered))
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        pyc_py_thread_parent(NULL, 0);
        pyc_outgate_set(&s->out, false, 0, 0);
        json_decref(res.error);
        json_decref(res.user_expressions);
        json_decref(res.payload);
        return;
    }
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
    close_output(s, msg, silent);
    json_t *content;
    if (res.ok) {
        content = json_pack("{s:s, s:i, s:o, s:o}", "status", "ok", "execution_count", s->execution_count,
                            "user_expressions", res.user_expressions, "payload", res.payload);
    } else {
        /* As on the main shell: the error is output too, published cut to what the cap leaves; the reply
         * carries it cut as a capped cell's error is. */
        size_t room = pyc_outgate_room(&s->out);
        if (!silent)
            pyc__publish_error_within_cap(s->k, &s->out, msg, res.error);
        json_t *fit = pyc_outcome_fit_error(res.error, room);
        json_decref(res.error);
        res.error = fit;
        content = pyc__execute_error_content(res.error, s->execution_count, res.user_expressions, res.payload);
        json_decref(res.user_expressions);
        json_decref(res.payload);
    }
    pyc_outcome_t o = {.outcome = outcome, .interrupted = interrupted, .why = why,
                       .kernel_ending = atomic_load(&k->quit) != 0, .output = pyc_outgate_stats(&s->out)};
    pyc_outgate_set(&s->out, false, 0, 0);
    pyc_cellclock_read(&s->clock, &o.wall, &o.cpu);
    pyc_zqitem_t *aborted = !res.ok && stop_on_error && !silent ? abort_take(s) : NULL;
    pyc__reply(k, PYC_CHAN_SHELL, msg, "execute_reply", subshell_metadata(res.ok ? "ok" : "error", &o), content);
    abort_answer(s, aborted);
    json_decref(res.error);
}

pyc_guard_callbacks_t
pyc__subcell_guard_callbacks(pyc__subshell_t *s)
{
    return (pyc_guard_callbacks_t){guard_interrupt, guard_stuck, guard_none, guard_no_overdue, s, NULL, NULL, NULL,
                                   NULL};
}
