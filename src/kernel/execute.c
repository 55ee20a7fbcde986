/*
 * execute.c -- execute_request: the cell's limits and isolation, history, execute_input, running the cell
 * under its deadline, the outcome, the abort of queued requests after an error, and the reply.  Also replay
 * of a checkpoint (which runs cells the same way), the session's checkpoint, and the callbacks of the guard,
 * the thread that keeps the time limits.
 *
 * A cell is bracketed by pyc_guard_cell_begin and pyc_guard_cell_end (run_cell), which keep its deadline and its
 * CPU time limit.  When the guard decides that
 * an interrupted cell will not stop, it takes over the cell's end (guard_stuck: it tells the client and ends
 * the process), and the main thread, if it ever comes back, must not touch the channels again: run_cell then
 * never returns.
 */
#include "kernelint.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsontext.h"
#include "log.h"

/* Tracebacks without color when the request's metadata says {"pyc": {"color": false}}, or the kernel runs
 * with NO_COLOR set (no-color.org); in color otherwise, as IPython sends them. */
static bool
plain_errors(const pyc_execreq_t *req)
{
    if (req->color >= 0)
        return req->color == 0;
    const char *no = getenv("NO_COLOR");
    return no != NULL && no[0] != '\0';
}

/* Runs code as the cell described by k->cell, in the kernel or (isolated) in a forked child, between the
 * guard's begin and end.  Returns the limit that stopped it (PYC_GUARD_NONE when none did).  Never returns
 * when the guard has taken the cell's end over: the process is about to end, and the channels are its. */
static int
run_cell(pyc_kernel_t *k, const char *code, const pyc_py_exec_opts_t *opts, pyc_py_exec_result_t *res,
         json_t **iso_md)
{
    int why = PYC_GUARD_NONE;
    atomic_store(&k->memory_interrupts, 0);
    pyc_guard_cell_begin(k->guard, k->cell.timeout, k->cell.cpu);
    if (k->cell.isolated) {
        pyc__run_isolated(k, code, opts, res, iso_md);     /* the guard keeps its deadline */
    } else {
        /* Armed before the kernel counts as executing: an interrupt that comes while this thread waits for the
         * GIL, before the cell's first bytecode, is kept for the cell instead of being dropped as one for an
         * idle kernel. */
        pyc_py_interrupt_arm();
        atomic_store(&k->executing, 1);
        pyc_py_enter();
        pyc_py_execute(code, opts, res);
        if (k->user_forked)
            pyc__user_fork_exit(k);
        pyc_py_leave();
        atomic_store(&k->executing, 0);
    }
    if (!pyc_guard_cell_end(k->guard, &why)) {
        for (;;)
            pause();
    }
    return why;
}

/* Answers an execute_request that cannot be run (no code, bad limits) with the error BadRequest. */
static void
reply_bad_request(pyc_kernel_t *k, int chan, const pyc_msg_t *msg, const char *why)
{
    json_t *error = json_pack("{s:s, s:s, s:[o]}", "ename", "BadRequest", "evalue", why, "traceback",
                              json_sprintf("BadRequest: %s", why));
    json_t *md = pyc__reply_metadata("error");
    /* The whole metadata.pyc, as for a cell that ran: nothing ran, and the state is that of the session. */
    pyc_outcome_t o = {.outcome = "bad_request", .kernel_ending = atomic_load(&k->quit) != 0};
    pyc_cellclock_read(&k->cell.clock, &o.wall, &o.cpu);
    json_object_set_new(md, "pyc", pyc_outcome_metadata(&o));
    pyc__reply(k, chan, msg, "execute_reply", md, pyc__execute_error_content(error, k->execution_count, NULL, NULL));
    json_decref(error);
}

/* Publishes execute_input: {"code", "execution_count"}, written as text (code_v is a jansson string, valid
 * UTF-8, so the JSON string encoder writes the same string jansson would). */
static void
publish_execute_input(pyc_kernel_t *k, const pyc_msg_t *msg, json_t *code_v, int count)
{
    pyc_buf_t b;
    size_t len;
    pyc_buf_init(&b, SIZE_MAX / 2);
    if (pyc_buf_add(&b, "{\"code\":", 8) < 0 ||
        pyc_buf_add_json_string(&b, json_string_value(code_v), json_string_length(code_v)) < 0 ||
        pyc_buf_adds(&b, ",\"execution_count\":") < 0 || pyc_buf_add_int(&b, count) < 0 ||
        pyc_buf_add(&b, "}", 1) < 0) {
        pyc_buf_free(&b);
        pyc_log("could not encode the content of execute_input (out of memory)");
        return;
    }
    char *text = pyc_buf_detach(&b, &len);
    pyc__publish_text(k, msg, "execute_input", text, len);
}

/* Appends v (borrowed) as compact JSON, or `empty` when v is NULL.  Empty objects and arrays, the usual
 * user_expressions and payload, are written without jansson. */
static int
add_json_or_empty(pyc_buf_t *b, json_t *v, const char *empty)
{
    if (v == NULL)
        return pyc_buf_adds(b, empty);
    if (json_is_object(v) && json_object_size(v) == 0)
        return pyc_buf_add(b, "{}", 2);
    if (json_is_array(v) && json_array_size(v) == 0)
        return pyc_buf_add(b, "[]", 2);
    return pyc_json_text(b, v);
}

/* The execute_reply of a cell that ran to its end (status ok) as text: metadata {"started", "dependencies_met",
 * "status", "pyc"} and content {"status", "execution_count", "user_expressions", "payload"}, in the members'
 * order of the jansson path.  Every cell that succeeds is answered this way; its fixed shape costs a tenth of
 * building and dumping the objects.  iso_md (borrowed, may be NULL) holds an isolated cell's members of
 * metadata.pyc.  Returns 0 with *md_out (a NUL-terminated string) and *content_out (content_len bytes), both
 * malloc'd and the caller's; or -1 with neither, when pyc_outcome_metadata_text cannot write the same object
 * or memory ran out, and the caller builds the reply with jansson. */
static int
ok_reply_text(int count, const pyc_py_exec_result_t *res, const pyc_outcome_t *o, json_t *iso_md, char **md_out,
              char **content_out, size_t *content_len)
{
    pyc_buf_t md, content;
    pyc_buf_init(&md, SIZE_MAX / 2);
    pyc_buf_init(&content, SIZE_MAX / 2);
    if (pyc__reply_metadata_open(&md, "ok") < 0 || pyc_buf_adds(&md, ",\"pyc\":") < 0 ||
        pyc_outcome_metadata_text(&md, o, iso_md) < 0 || pyc_buf_add(&md, "}", 1) < 0 ||
        pyc_buf_adds(&content, "{\"status\":\"ok\",\"execution_count\":") < 0 ||
        pyc_buf_add_int(&content, count) < 0 || pyc_buf_adds(&content, ",\"user_expressions\":") < 0 ||
        add_json_or_empty(&content, res->user_expressions, "{}") < 0 || pyc_buf_adds(&content, ",\"payload\":") < 0 ||
        add_json_or_empty(&content, res->payload, "[]") < 0 || pyc_buf_add(&content, "}", 1) < 0) {
        pyc_buf_free(&md);
        pyc_buf_free(&content);
        return -1;
    }
    *md_out = pyc_buf_detach(&md, NULL);
    *content_out = pyc_buf_detach(&content, content_len);
    return 0;
}

void
pyc__publish_error_within_cap(pyc_kernel_t *k, pyc_outgate_t *gate, const pyc_msg_t *msg, json_t *error)
{
    json_t *shown = pyc_outgate_can_send(gate) ? pyc_outcome_error_within(error, pyc_outgate_room(gate)) : NULL;
    if (shown == NULL)
        return;
    size_t len = 0;
    char *text = pyc_json_text_dup(shown, &len);
    /* The head of the cell's output (its event) gets the error's last line, as a traceback ends. */
    const char *ename = json_string_value(json_object_get(shown, "ename"));
    const char *evalue = json_string_value(json_object_get(shown, "evalue"));
    char *line = NULL;
    if (ename != NULL && asprintf(&line, "%s: %s\n", ename, evalue != NULL ? evalue : "") < 0)
        line = NULL;
    pyc_outgate_count(gate, len, line, line != NULL ? strlen(line) : 0);
    free(line);
    json_decref(shown);
    if (text != NULL)
        pyc__publish_text(k, msg, "error", text, len);    /* takes the text */
    else
        pyc_log("could not encode the content of error");
}

void
pyc__on_execute(pyc_kernel_t *k, int chan, const pyc_msg_t *msg, const pyc_execreq_t *req)
{
    json_t *code_v = req->source_v;
    const char *bad = req->refused, *code = req->code;
    const pyc_cell_limits_t cl = req->limits;
    bool in_txn = pyc__snapshot_in_transaction(k);
    if (bad == NULL && in_txn && req->isolated)
        bad = "a cell is either isolated or a transaction, not both (an isolated cell leaves the kernel as it was)";
    if (bad != NULL && in_txn)
        pyc__snapshot_after_cell(k, true);     /* nothing ran: the transaction's snapshot goes */
    pyc_cellclock_start(&k->cell.clock);
    if (bad != NULL) {
        reply_bad_request(k, chan, msg, bad);
        return;
    }
    bool silent = req->silent, store_history = req->store_history, stop_on_error = req->stop_on_error;
    bool isolated = req->isolated;

    if (k->aborting) {
        pyc__abort_reply(k, chan, msg);
        return;
    }
    if (store_history)
        k->execution_count++;
    int count = k->execution_count;
    if (store_history)
        pyc__history_add(k, count, json_string_value(code_v));
    if (!silent) {
        publish_execute_input(k, msg, code_v, count);
        pyc_journal_begin(k->journal, msg->msg_id, pyc__header_frame(msg)->data, pyc__header_frame(msg)->size,
                          count);
        pyc__lifelog_cell(k, msg, count, NULL, NULL);
    }

    pyc_py_exec_opts_t opts = {
        .silent = silent,
        .store_history = store_history,
        .allow_stdin = req->allow_stdin,
        .plain_errors = plain_errors(req),
        .execution_count = count,
        .user_expressions = req->user_expressions,
    };
    pyc_py_exec_result_t res = {0};
    k->allow_stdin = opts.allow_stdin;
    /* Output since the request came (pyc__set_parent flushed what came before) goes out under this request
     * with the cell's own, in order; only a silent cell, whose own output is discarded, must let it out
     * first. */
    if (silent) {
        pyc_streams_flush(k->streams);
        pyc_streams_set_discard(k->streams, true);
    }
    json_t *iso_md = NULL;
    k->cell.chan = chan;
    k->cell.count = count;
    k->cell.silent = silent;
    k->cell.isolated = isolated;
    k->cell.timeout = isolated ? pyc_limits_tighter(cl.timeout, req->isolate_timeout) : cl.timeout;
    k->cell.cpu = cl.cpu;
    pyc_outgate_set(&k->out, true, cl.output_bytes, cl.output_messages);
    pyc__memory_reserve(k, true);
    pyc__files_reserve(k, true);
    unsigned irq0 = pyc_py_interrupt_count();
    int why = run_cell(k, code, &opts, &res, &iso_md);
    pyc__files_reserve(k, false);      /* room for the kernel's own work when the cell took every descriptor */
    pyc_streams_flush(k->streams);
    /* No user code runs from here to idle: dispatch need not flush again.  (A subshell's thread publishes
     * its own idle.) */
    if (pthread_equal(pthread_self(), k->main_thread))
        k->flushed_at_end = true;
    pyc_outgate_set(&k->out, false, 0, 0);
    if (silent)
        pyc_streams_set_discard(k->streams, false);

    bool interrupted = pyc_py_interrupt_count() != irq0 || why != PYC_GUARD_NONE;
    const char *outcome = res.ok ? "ok" : "error";
    json_t *iso_outcome = NULL;
    if (iso_md != NULL) {
        /* An isolated cell's outcome is the cell's (held here: outcome points into it); its other members are
         * added to metadata.pyc. */
        iso_outcome = json_incref(json_object_get(iso_md, "outcome"));
        json_object_del(iso_md, "outcome");
        outcome = json_string_value(iso_outcome);
        /* The interrupt of an isolated cell stops its child (killed by the parent, which consumed the
         * request): the parent's interrupt count need not move, but the interrupt reached the cell. */
        if (outcome != NULL && strcmp(outcome, "interrupted") == 0)
            interrupted = true;
    }
    if (why != PYC_GUARD_NONE) {
        pyc_limit_stop_t stop = {.why = why, .isolated = k->cell.isolated, .cell_timeout = k->cell.timeout,
                                 .cell_cpu = k->cell.cpu, .lifetime = k->limits.lifetime,
                                 .grace = k->limits.cell_grace, .memory_cap = (double)k->limits.memory};
        /* Past the memory watch, the cell's own MemoryError (raised in it by the watch) stands as it is. */
        if (why != PYC_GUARD_MEMORY || !pyc_outcome_is_memory_error(res.error)) {
            json_t *e = pyc_outcome_limit_error(&stop, json_object_get(res.error, "traceback"));
            json_decref(res.error);
            res.error = e;
        }
        res.ok = false;
        outcome = pyc_outcome_of_limit(why);
    } else if (!res.ok && interrupted && iso_md == NULL) {
        outcome = "interrupted";
    }
    bool memory_hit = why == PYC_GUARD_MEMORY ||
                      (!res.ok && k->limits.memory > 0 && pyc_outcome_is_memory_error(res.error));
    if (memory_hit)
        pyc__memory_reserve(k, false);          /* room for the C side to report it; taken again next cell */
    char notice[512];
    if (!silent && pyc_outgate_notice(&k->out, notice, sizeof notice) > 0)
        pyc__publish(k, msg, "stream", json_pack("{s:s, s:s}", "name", "stderr", "text", notice));
    if (res.ok && !silent && store_history)
        pyc__checkpoint_cell(k, count, code);   /* without a %%isolate line: replay runs it in the kernel */
    const char *txn = pyc__snapshot_after_cell(k, res.ok && why == PYC_GUARD_NONE);
    if (txn != NULL) {
        if (iso_md == NULL)
            iso_md = json_object();
        json_object_set_new(iso_md, "transaction", json_string(txn));
    }
    /* Outputs that earlier cells' threads published after those cells ended, which the journal holds for a
     * client that was not there (`pyc run` asks for them when this says there are some). */
    size_t late = pyc_journal_late_unseen(k->journal);
    if (late > 0) {
        if (iso_md == NULL)
            iso_md = json_object();
        json_object_set_new(iso_md, "late_outputs", json_integer((json_int_t)late));
    }

    if (!res.ok && stop_on_error && !silent)
        pyc__abort_queue(k);     /* before the reply: a request sent after the client saw it is not aborted */
    json_t *content = NULL;
    if (!res.ok) {
        /* The error is output too: published cut to what the cap leaves (notice included), or not at all when
         * not even its name fits; the reply carries it in any case, cut as a capped cell's error is. */
        size_t room = pyc_outgate_room(&k->out);
        if (!silent)
            pyc__publish_error_within_cap(k, &k->out, msg, res.error);
        json_t *fit = pyc_outcome_fit_error(res.error, room);
        json_decref(res.error);
        res.error = fit;
        content = pyc__execute_error_content(res.error, count, res.user_expressions, res.payload);
    }
    double wall, cpu;
    pyc_cellclock_read(&k->cell.clock, &wall, &cpu);
    pyc_outcome_t o = {
        .outcome = outcome != NULL ? outcome : "error",
        .interrupted = interrupted,
        .why = why,
        .memory_hit = memory_hit,
        .kernel_ending = atomic_load(&k->quit) != 0,
        .output = pyc_outgate_stats(&k->out),
        .wall = wall,
        .cpu = cpu,
    };
    /* An ok reply as text; an error, or what the text cannot say, through jansson. */
    char *md_text = NULL, *content_text = NULL;
    size_t content_len = 0;
    json_t *md = NULL;
    if (!res.ok || ok_reply_text(count, &res, &o, iso_md, &md_text, &content_text, &content_len) < 0) {
        if (res.ok)
            content = json_pack("{s:s, s:i, s:o, s:o}", "status", "ok", "execution_count", count,
                                "user_expressions",
                                res.user_expressions != NULL ? json_incref(res.user_expressions) : json_object(),
                                "payload", res.payload != NULL ? json_incref(res.payload) : json_array());
        md = pyc__reply_metadata(res.ok ? "ok" : "error");
        json_t *pmd = pyc_outcome_metadata(&o);
        if (iso_md != NULL)
            json_object_update(pmd, iso_md);
        json_object_set_new(md, "pyc", pmd);
    }
    json_decref(iso_md);
    if (!silent) {
        pyc__lifelog_cell(k, msg, count, o.outcome, &o.output);
        if (req->pace)
            pyc__pace_reply(atomic_load(&k->last_output_ns), o.output.msgs, o.output.bytes);
    }
    if (md_text != NULL) {
        pyc__reply_text(k, chan, msg, "execute_reply", md_text, content_text, content_len);
        free(md_text);
    } else {
        pyc__reply(k, chan, msg, "execute_reply", md, content);
    }
    json_decref(iso_outcome);
    json_decref(res.error);
    json_decref(res.user_expressions);
    json_decref(res.payload);
}

/* ---- replay ------------------------------------------------------------------------------------------- */

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
        /* Each replayed cell has the kernel's deadline, like any cell (a stuck one ends the kernel). */
        k->cell = (pyc__cell_t){.count = (int)done + 1, .silent = true, .timeout = k->limits.cell_timeout,
                                .cpu = k->limits.cell_cpu};
        pyc_cellclock_start(&k->cell.clock);
        run_cell(k, cells[done], &opts, &res, NULL);
        if (!res.ok) {
            const char *en = json_string_value(json_object_get(res.error, "ename"));
            const char *ev = json_string_value(json_object_get(res.error, "evalue"));
            pyc_log("replay of %s: cell %zu of %zu failed (%s: %s); the other %zu were not run", path, done + 1,
                    n, en != NULL ? en : "?", ev != NULL ? ev : "", n - done - 1);
            failure = json_pack("{s:I, s:s, s:s}", "cell", (json_int_t)(done + 1), "ename", en != NULL ? en : "",
                                "evalue", ev != NULL ? ev : "");
        } else {
            pyc__checkpoint_cell(k, (int)done + 1, cells[done]);
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

/* ---- the guard's callbacks (guard thread) ------------------------------------------------------------- */

static void
guard_interrupt(void *ctx, int why)
{
    pyc_kernel_t *k = ctx;
    pid_t iso = (pid_t)atomic_load(&k->iso_pid);
    if (why == PYC_GUARD_MEMORY && iso <= 0 && atomic_fetch_add(&k->memory_interrupts, 1) == 0) {
        /* First a MemoryError in the cell, as an allocation past RLIMIT_DATA gives; a SIGINT (which would
         * raise KeyboardInterrupt) only if it does not stop, half way through the grace. */
        char msg[200];
        snprintf(msg, sizeof msg, "the cell grew the kernel's memory past its cap of %zu bytes (shared memory "
                 "counted)", k->limits.memory);
        pyc_log("cell %d grew the kernel's memory past its cap; raising MemoryError in it", k->cell.count);
        pyc_py_raise_memory_error(msg);
        pthread_kill(k->main_thread, SIGINT);
        return;
    }
    pyc_log("%s %s%s; %s", k->current != NULL ? k->current->msg_type : "a cell",
            why == PYC_GUARD_CPU ? "spent its CPU time limit" : "ran past its ",
            why == PYC_GUARD_CPU ? "" : pyc_outcome_limit_names[why],
            iso > 0 ? "killing its process" : "interrupting it");
    pyc__stop_cell(k, iso, ISO_STOP_DEADLINE);
}

static void
guard_expire(void *ctx, int why)
{
    pyc_kernel_t *k = ctx;
    if (why == PYC_GUARD_IDLE)
        pyc_log("no request for %g s (the idle timeout); shutting down", k->limits.idle_timeout);
    else
        pyc_log("the kernel's lifetime of %g s is over; shutting down", k->limits.lifetime);
    pyc__lifelog_close_reason(k, why == PYC_GUARD_IDLE ? PYC__CLOSE_IDLE : PYC__CLOSE_LIFETIME);
    pyc__quit(k);
}

/* A cell did not stop after its interrupt: tell the client, then end the process.  The main thread is stuck
 * in the cell and will never send again (pyc_guard_cell_end fails for it), which is what makes sending its
 * reply on shell from this thread safe. */
static void
guard_stuck(void *ctx, int why)
{
    pyc_kernel_t *k = ctx;
    const pyc_msg_t *msg = k->current;
    pyc_log("cell %d did not stop within %g s of being interrupted; ending the kernel (its state is lost)",
            k->cell.count, k->limits.cell_grace);
    pyc_streams_flush(k->streams);
    pyc_outgate_stop(&k->out);   /* whatever the stuck cell or its threads print now goes nowhere */
    if (msg != NULL && strcmp(msg->msg_type, "execute_request") != 0) {
        /* A completion, inspection or comm stuck in user code: its own reply type, with the error. */
        char type[128], what[160];
        pyc__reply_type(msg->msg_type, type, sizeof type);
        snprintf(what, sizeof what, "the %.100s", msg->msg_type);
        pyc_limit_stop_t stop = {.what = what, .why = why, .stuck = true, .cell_timeout = k->cell.timeout,
                                 .lifetime = k->limits.lifetime, .grace = k->limits.cell_grace};
        json_t *err = pyc_outcome_limit_error(&stop, NULL);
        json_object_set_new(err, "status", json_string("error"));
        pyc__reply(k, k->cell.chan, msg, type, NULL, err);
        pyc__status(k, msg, "idle");
    } else if (msg != NULL) {
        pyc_limit_stop_t stop = {.why = why, .stuck = true, .isolated = k->cell.isolated,
                                 .cell_timeout = k->cell.timeout, .cell_cpu = k->cell.cpu,
                                 .lifetime = k->limits.lifetime, .grace = k->limits.cell_grace,
                                 .memory_cap = (double)k->limits.memory};
        json_t *err = pyc_outcome_limit_error(&stop, NULL);
        char notice[512];
        if (!k->cell.silent) {
            if (pyc_outgate_notice(&k->out, notice, sizeof notice) > 0)
                pyc__publish(k, msg, "stream", json_pack("{s:s, s:s}", "name", "stderr", "text", notice));
            pyc__publish_error_within_cap(k, &k->out, msg, err);
        }
        json_t *md = pyc__reply_metadata("error");
        double wall, cpu;
        pyc_cellclock_read(&k->cell.clock, &wall, &cpu);
        pyc_outcome_t o = {
            .outcome = pyc_outcome_of_limit(why),
            .interrupted = true,
            .why = why,
            .memory_hit = why == PYC_GUARD_MEMORY,
            .lost = true,
            .output = pyc_outgate_stats(&k->out),
            .wall = wall,
            .cpu = cpu,
        };
        json_object_set_new(md, "pyc", pyc_outcome_metadata(&o));
        pyc__reply(k, k->cell.chan, msg, "execute_reply", md,
                   pyc__execute_error_content(err, k->cell.count, NULL, NULL));
        json_decref(err);
        pyc__status(k, msg, "idle");
    }
    pyc__lifelog_close_reason(k, why == PYC_GUARD_MEMORY     ? PYC__CLOSE_OUT_OF_MEMORY
                                 : why == PYC_GUARD_LIFETIME ? PYC__CLOSE_LIFETIME
                                                             : PYC__CLOSE_STUCK);
    pyc__lifelog_closed(k);
    pyc__end_children(k);
    k->hard_exit(k->hard_exit_ctx, 3);
}

/* The CPU seconds a cell's limit counts (the guard's cpu clock): the kernel process's, all its threads, and an
 * isolated cell's process while it runs (its clock starts at 0 at the fork, after the cell's began).  A
 * subprocess the cell starts is not counted: its CPU is not the kernel's to read until it is reaped. */
static double
guard_cpu(void *ctx)
{
    pyc_kernel_t *k = ctx;
    double s = pyc_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    pid_t iso = (pid_t)atomic_load(&k->iso_pid);
    clockid_t cid;
    if (iso > 0 && clock_getcpuclockid(iso, &cid) == 0)
        s += pyc_clock_s(cid);
    return s;
}

/* The guard thread, while a cell runs under an open-file limit. */
static void
guard_files(void *ctx)
{
    pyc__files_reserve(ctx, false);
}

static void
guard_overdue(void *ctx)
{
    pyc_kernel_t *k = ctx;
    pyc_log("shutdown took longer than its grace of %g s; exiting without finishing it",
            k->limits.shutdown_grace);
    pyc__end_children(k);
    k->hard_exit(k->hard_exit_ctx, 0);
}

pyc_guard_callbacks_t
pyc__guard_callbacks(pyc_kernel_t *k)
{
    return (pyc_guard_callbacks_t){guard_interrupt, guard_stuck, guard_expire, guard_overdue, k, NULL, NULL,
                                   guard_cpu, guard_files};
}
