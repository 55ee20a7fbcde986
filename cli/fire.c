/*
 * fire.c -- `pyc fire` and `pyc poll`: a cell that outlives the command that started it.
 *
 * fire sends the execute_request on the control channel, then a journal_request {"ids": [id]} on the same
 * channel, and leaves when that is answered.  pyc's control thread reads control at once, even while a cell
 * runs: it records the execute_request in the journal as queued and hands it to the main thread's inbox, a
 * FIFO that the main thread empties before it reads shell, then answers the journal_request itself.  So the
 * answer is a receipt (the kernel holds the cell in memory, and the journal has it), and fired cells run in
 * the order they were fired.  (The record is made before the main thread can see the cell: an expect sent
 * after it could come after the cell's end, when the cell was refused or aborted without beginning, and
 * would stay queued for ever.)  On shell
 * they would not: a ROUTER socket takes waiting requests from its peers in turn, not in the order they came,
 * so three `pyc fire` commands (three connections) queued behind a running cell ran in any order.  Fired
 * cells are sent with stop_on_error off: a failed one does not abort the ones fired after it, each is polled
 * for its own outcome.  The cell's id is the request's msg_id.
 *
 * poll asks the journal (journal_request {"ids": [id]}) and prints what run would have printed, with run's exit
 * codes; a cell not done yet is exit PYC_EXIT_PENDING, unless --wait waits for it: the wait ends on the cell's
 * idle status on iopub, and asks the journal again every POLL_RETRY_MS in case that status was missed.
 * Without an id, poll lists the journal.  The journal lives in the kernel, bounded (README, "Fire and poll"):
 * a cell it no longer holds is "unknown" (PYC_EXIT_NOSESSION).  When the session's kernel is gone, its
 * journal went with it, and poll answers from the event log instead (events.c): the cell's outcome if it ended
 * before the kernel did (its output is lost), else how the session ended while the cell ran (PYC_EXIT_LOST,
 * the reason and a crash's traceback printed).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "events.h"

#define POLL_RETRY_MS 1000

/* What a wait of poll returns when the kernel's process ended during it (nothing printed yet): poll then
 * answers from the event log. */
#define POLL_GONE (-1)

/* Sends a journal_request with content (stolen) on control and waits up to timeout_ms for its reply.  Returns
 * the reply's content (a new reference), or NULL with *rc set (printed; but POLL_GONE, unprinted, when the
 * kernel's process ended and gone_quiet). */
static json_t *
ask_journal(pyc_client_t *cl, json_t *content, int timeout_ms, bool gone_quiet, int *rc)
{
    pyc_error_t err;
    pyc_msg_t *reply = NULL;
    int r = pyc_client_request(cl, PYC_CHAN_CONTROL, "journal_request", content, timeout_ms, &reply, &err);
    json_decref(content);
    if (r == PYC_RECV_SIGNAL) {
        cli_err("interrupted");
        *rc = PYC_EXIT_INTERRUPTED;
        return NULL;
    }
    if (r == PYC_RECV_ERROR) {
        *rc = err.code == PYC_EGONE && gone_quiet ? POLL_GONE : cli_recv_failed(&err);
        return NULL;
    }
    if (r == PYC_RECV_TIMEOUT) {
        cli_err("the kernel did not answer journal_request within %d ms (a pyc kernel answers it at once: "
                "is this one pyc?)", timeout_ms);
        *rc = PYC_EXIT_CONNECTION;
        return NULL;
    }
    json_t *c = json_incref(reply->content);
    pyc_msg_destroy(&reply);
    const char *status = json_string_value(json_object_get(c, "status"));
    if (status == NULL || strcmp(status, "ok") != 0 || !json_is_array(json_object_get(c, "cells"))) {
        cli_err("the kernel refused journal_request: %s",
                json_string_value(json_object_get(c, "evalue")) ?: "no reason given");
        json_decref(c);
        *rc = PYC_EXIT_REFUSED;
        return NULL;
    }
    return c;
}

int
cli_fire(const cli_args_t *a)
{
    double timeout = 0;
    int rc;
    if (a->value[CLI_FIRE_TIMEOUT] != NULL && cli_seconds("--timeout", a->value[CLI_FIRE_TIMEOUT], &timeout) < 0)
        return PYC_EXIT_USAGE;
    char *code = cli_read_code(a->pos[1]);
    if (code == NULL)
        return PYC_EXIT_NOINPUT;
    json_t *md = cli_cell_metadata(timeout, a->value[CLI_FIRE_ISOLATE] != NULL);
    json_t *content = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 0, "store_history", 1,
                                "user_expressions", "allow_stdin", 0, "stop_on_error", 0);
    free(code);
    if (content == NULL) {
        cli_err("the code is not valid UTF-8 (or memory ran out)");
        json_decref(md);
        return PYC_EXIT_USAGE;
    }
    cli_catch_sigint();
    pyc_session_file_t sf;
    pyc_client_t *cl = cli_connect(a->pos[0], &sf, false, false, &rc);
    if (cl == NULL) {
        json_decref(content);
        json_decref(md);
        return rc;
    }
    char id[PYC_MSG_ID_LEN + 1];
    pyc_error_t err;
    rc = PYC_EXIT_OK;
    if (pyc_client_send(cl, PYC_CHAN_CONTROL, "execute_request", content, md, NULL, NULL, 0, id, &err) < 0) {
        cli_err("%s", err.text);
        rc = PYC_EXIT_CONNECTION;
    }
    json_decref(content);
    json_decref(md);
    json_t *j = NULL;
    if (rc == PYC_EXIT_OK)
        j = ask_journal(cl, json_pack("{s:[s], s:b}", "ids", id, "outputs", 0), cli_connect_ms(), false, &rc);
    json_t *c = json_array_get(json_object_get(j, "cells"), 0);
    const char *state = json_string_value(json_object_get(c, "state"));
    if (rc == PYC_EXIT_OK && (state == NULL || strcmp(state, "unknown") == 0)) {
        cli_err("the cell %s was sent, but session %s keeps no journal (PYC_JOURNAL_CELLS=0?): pyc poll cannot "
                "follow it", id, a->pos[0]);
        rc = PYC_EXIT_REFUSED;
    }
    if (rc == PYC_EXIT_OK) {
        if (a->value[CLI_FIRE_JSON] != NULL) {
            json_t *line = json_pack("{s:s, s:s, s:s}", "id", id, "session", a->pos[0], "state", state);
            cli_print_json_line(line);
            json_decref(line);
        } else {
            printf("%s\n", id);
        }
    }
    json_decref(j);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
    return rc;
}

/* Prints a done cell as `run` would have printed it, and returns run's exit code. */
static int
print_done(json_t *c, cli_output_t *o)
{
    size_t i;
    json_t *out;
    bool cut = false;
    json_array_foreach(json_object_get(c, "outputs"), i, out) {
        pyc_msg_t m = {.msg_type = json_string_value(json_object_get(out, "type")),
                       .content = json_object_get(out, "content")};
        if (m.msg_type != NULL && json_is_object(m.content))
            cli_print_iopub(o, &m);
        cut = cut || json_is_true(json_object_get(out, "cut"));
    }
    json_int_t dropped = json_integer_value(json_object_get(c, "outputs_dropped"));
    if (cut || dropped > 0)
        cli_err("the journal kept the first part of this cell's output only%s: %lld more message(s) were not kept",
                cut ? " (the last message it kept is cut)" : "", (long long)dropped);
    json_t *reply = json_object_get(c, "reply");
    if (o->json) {
        json_t *line = json_pack("{s:s, s:O?, s:O?}", "type", "execute_reply", "content",
                                 json_object_get(reply, "content"), "metadata", json_object_get(reply, "metadata"));
        cli_print_json_line(line);
        json_decref(line);
    }
    json_t *content = json_object_get(reply, "content");
    json_t *metadata = json_object_get(reply, "metadata");
    pyc_msg_t r = {.msg_type = "execute_reply", .content = json_is_object(content) ? content : NULL,
                   .metadata = json_is_object(metadata) ? metadata : NULL};
    if (r.content == NULL) {
        cli_err("the journal holds no reply for this cell");
        return PYC_EXIT_PROTOCOL;
    }
    const char *status = json_string_value(json_object_get(r.content, "status"));
    if (!o->json && status != NULL && strcmp(status, "aborted") == 0)
        cli_err("the cell was not run: the kernel aborted it because a cell before it failed");
    if (!o->json)
        cli_report_unmerged(&r);     /* as run prints it */
    return cli_reply_exit(&r, false);
}

/* `pyc poll NAME`: the journal, one cell a line (id, state, status, execution count), oldest first. */
static int
list_journal(pyc_client_t *cl, bool json)
{
    int rc = PYC_EXIT_OK;
    json_t *j = ask_journal(cl, json_pack("{s:b}", "outputs", 0), cli_connect_ms(), false, &rc);
    if (j == NULL)
        return rc;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(j, "cells"), i, c) {
        if (json) {
            cli_print_json_line(c);
            continue;
        }
        json_t *n = json_object_get(c, "execution_count");
        char count[32] = "-";
        if (json_is_integer(n))
            snprintf(count, sizeof count, "%lld", (long long)json_integer_value(n));
        printf("%-44s %-8s %-8s %s\n", json_string_value(json_object_get(c, "id")) ?: "?",
               json_string_value(json_object_get(c, "state")) ?: "?",
               json_string_value(json_object_get(c, "status")) ?: "-", count);
    }
    json_decref(j);
    return rc;
}

/* Waits for the idle status of cell id on iopub, at most POLL_RETRY_MS and not past deadline (pyc_now_s time; 0
 * for none).  Returns PYC_EXIT_OK (look again), or the exit code of a failed wait (printed). */
static int
wait_idle(pyc_client_t *cl, const char *id, double deadline)
{
    double until = pyc_now_s() + POLL_RETRY_MS / 1e3;
    if (deadline > 0 && deadline < until)
        until = deadline;
    for (;;) {
        double left_ms = (until - pyc_now_s()) * 1000;
        if (left_ms <= 0)
            return PYC_EXIT_OK;
        pyc_error_t err;
        pyc_msg_t *m;
        int chan;
        int r = pyc_client_recv(cl, (int)left_ms + 1, &m, &chan, &err);
        if (r == PYC_RECV_SIGNAL && cli_sigint_count > 0) {
            cli_err("interrupted (the cell goes on)");
            return PYC_EXIT_INTERRUPTED;
        }
        if (r == PYC_RECV_ERROR)
            return err.code == PYC_EGONE ? POLL_GONE : cli_recv_failed(&err);
        bool idle = r == PYC_RECV_MSG && chan == PYC_CHAN_IOPUB && pyc_client_is_child_of(m, id) &&
                    strcmp(m->msg_type, "status") == 0 &&
                    strcmp(json_string_value(json_object_get(m->content, "execution_state")) ?: "", "idle") == 0;
        pyc_msg_destroy(&m);
        if (idle || r == PYC_RECV_TIMEOUT)
            return PYC_EXIT_OK;
    }
}

/* What the event log says of cell id of session name's kernel pid (or, with other, of any earlier kernel of
 * that name: one that `pyc new --replace` replaced; found_pid is then the kernel that ran it). */
typedef struct {
    const char *name, *id;
    long pid;
    bool other;
    bool started;
    long found_pid;
    json_t *done;                /* its cell_done (a new reference), or NULL */
    json_t *closed;              /* the kernel's closed event after the cell began (a new reference), or NULL */
} cell_fate_t;

static int
find_fate(void *ctx, const pyc_event_t *e)
{
    cell_fate_t *f = ctx;
    if (strcmp(e->session, f->name) != 0)
        return 0;
    const char *id = json_string_value(json_object_get(e->obj, "id"));
    bool ours = id != NULL && strcmp(id, f->id) == 0;
    if (!f->other) {
        if (e->pid != f->pid)
            return 0;
    } else if (e->pid == f->pid || (f->found_pid != 0 ? e->pid != f->found_pid : !ours)) {
        return 0;                /* the live kernel's, or not the earlier kernel that ran the cell */
    } else {
        f->found_pid = e->pid;
    }
    if (strcmp(e->event, "cell_started") == 0 && ours) {
        f->started = true;
    } else if (strcmp(e->event, "cell_done") == 0 && ours) {
        json_decref(f->done);
        f->done = json_incref(e->obj);
    } else if (strcmp(e->event, "closed") == 0 && (f->other || (f->started && f->done == NULL))) {
        json_decref(f->closed);
        f->closed = json_incref(e->obj);
    }
    return 0;
}

/* The exit code of a cell known only by its outcome in the event log (its output is gone): run's for the
 * outcome, the cell's own 1 for any error (a SystemExit's code is not kept there). */
static int
outcome_exit(const char *outcome)
{
    return strcmp(outcome, "ok") == 0 ? PYC_EXIT_OK : strcmp(outcome, "timeout") == 0 ? PYC_EXIT_TIMEOUT
           : strcmp(outcome, "lifetime") == 0 ? PYC_EXIT_LOST : PYC_EXIT_ERROR;
}

/* poll of a cell that the live kernel of session name (pid) does not know: when the event log has it from an
 * earlier kernel of that name (one that `pyc new --replace` replaced, or that ended otherwise before a new one
 * took the name), prints so, with how that kernel ended, and returns the exit code (the outcome's when the cell
 * had ended, LOST when the kernel's end took it while it ran); else returns -1, unprinted. */
static int
poll_replaced(const char *name, const char *id, long pid)
{
    char dir[4096];
    pyc_events_cursor_t cur = {0};
    cell_fate_t f = {.name = name, .id = id, .pid = pid, .other = true};
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return -1;
    pyc_events_read(dir, &cur, find_fate, &f, NULL);
    char state[64];
    cli_closed_state(f.closed, state, sizeof state);
    const char *how = strcmp(state, "replaced") == 0 ? "replaced by pyc new --replace" : state;
    int rc = -1;
    if (f.done != NULL) {
        const char *outcome = json_string_value(json_object_get(f.done, "outcome")) ?: "?";
        cli_err("cell %s ran in an earlier kernel of session %s (pid %ld), which has ended since (%s): the cell "
                "had ended with outcome %s, and its output went with that kernel", id, name, f.found_pid, how,
                outcome);
        rc = outcome_exit(outcome);
    } else if (f.started) {
        cli_err("cell %s was lost: it ran in an earlier kernel of session %s (pid %ld), which ended (%s) before "
                "the cell did", id, name, f.found_pid, how);
        rc = PYC_EXIT_LOST;
    }
    json_decref(f.done);
    json_decref(f.closed);
    return rc;
}

/* poll of a session whose kernel is gone (sf: its file): the cell's fate from the event log, printed.  Returns
 * the exit code: run's for a cell that ended before the kernel, LOST for one the kernel's end took, NOSESSION
 * when the log does not know the cell. */
static int
poll_gone(const char *name, const char *id, const pyc_session_file_t *sf)
{
    char dir[4096], state[64];
    pyc_events_cursor_t cur = {0};
    cell_fate_t f = {.name = name, .id = id, .pid = sf->pid};
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return PYC_EXIT_NOPERM;
    pyc_events_read(dir, &cur, find_fate, &f, NULL);
    json_t *closed = f.closed != NULL ? json_incref(f.closed) : cli_event_closing(name, sf->pid);
    cli_closed_state(closed, state, sizeof state);
    int rc;
    if (f.done != NULL) {
        const char *outcome = json_string_value(json_object_get(f.done, "outcome")) ?: "?";
        cli_err("session %s has ended (%s); cell %s had ended before, with outcome %s: its output went with the "
                "kernel", name, state, id, outcome);
        rc = outcome_exit(outcome);
    } else if (f.started) {
        const char *tb = json_string_value(json_object_get(closed, "traceback"));
        if (tb != NULL)
            fprintf(stderr, "%s%s", tb, tb[0] != '\0' && tb[strlen(tb) - 1] != '\n' ? "\n" : "");
        cli_err("cell %s was lost: session %s ended while it ran (%s)", id, name, state);
        rc = PYC_EXIT_LOST;
    } else {
        cli_err("session %s has ended (%s; pyc kill %s cleans it), and its event log has no cell %s", name, state,
                name, id);
        rc = PYC_EXIT_NOSESSION;
    }
    json_decref(f.done);
    json_decref(f.closed);
    json_decref(closed);
    return rc;
}

int
cli_poll(const cli_args_t *a)
{
    double wait_s = 0;
    bool wait = a->value[CLI_POLL_WAIT] != NULL, json = a->value[CLI_POLL_JSON] != NULL;
    const char *w = a->value[CLI_POLL_WAIT];
    if (wait && w[0] != '\0' && cli_seconds("--wait", w, &wait_s) < 0)
        return PYC_EXIT_USAGE;
    int rc;
    cli_catch_sigint();
    pyc_session_file_t sf;
    pyc_error_t serr;
    if (pyc_session_name_check(a->pos[0], &serr) < 0) {
        cli_err("%s", serr.text);
        return PYC_EXIT_USAGE;
    }
    if (a->npos > 1) {
        /* A session whose kernel is gone: its journal went with it (see the top of this file). */
        bool gone = cli_session_state(a->pos[0], &sf, 0, &serr) == CLI_STALE;
        rc = gone ? poll_gone(a->pos[0], a->pos[1], &sf) : PYC_EXIT_OK;
        pyc_session_file_clear(&sf);
        if (gone)
            return rc;
    }
    pyc_client_t *cl = cli_connect(a->pos[0], &sf, wait && a->npos > 1, false, &rc);
    if (cl == NULL && a->npos > 1 && rc == PYC_EXIT_CONNECTION &&
        cli_session_state(a->pos[0], &sf, 0, &serr) == CLI_STALE) {
        rc = poll_gone(a->pos[0], a->pos[1], &sf);   /* it died while we connected */
        pyc_session_file_clear(&sf);
    }
    if (cl == NULL)
        return rc;
    if (a->npos == 1) {
        rc = list_journal(cl, json);
        pyc_client_destroy(&cl);
        pyc_session_file_clear(&sf);
        return rc;
    }
    const char *id = a->pos[1];
    double t0 = pyc_now_s();
    json_t *j = NULL, *c = NULL;
    const char *state = NULL;
    for (;;) {
        json_decref(j);
        j = ask_journal(cl, json_pack("{s:[s], s:b}", "ids", id, "outputs", 1), cli_connect_ms(), true, &rc);
        if (j == NULL)
            break;
        c = json_array_get(json_object_get(j, "cells"), 0);
        state = json_string_value(json_object_get(c, "state"));
        if (state == NULL || strcmp(state, "done") == 0 || strcmp(state, "unknown") == 0 || !wait)
            break;
        /* Not done: wait for its idle (or POLL_RETRY_MS, or what --wait leaves), then ask again. */
        if (wait_s > 0 && pyc_now_s() - t0 >= wait_s)
            break;
        rc = wait_idle(cl, id, wait_s > 0 ? t0 + wait_s : 0);
        if (rc != PYC_EXIT_OK)
            break;
    }
    if (rc == POLL_GONE)
        rc = poll_gone(a->pos[0], id, &sf);
    if (rc == PYC_EXIT_OK && j != NULL && state != NULL) {
        cli_output_t o = {.json = json, .wrote_nl = true, .system_exit = true};
        if (strcmp(state, "unknown") == 0 && (rc = poll_replaced(a->pos[0], id, sf.pid)) >= 0) {
            /* printed: the cell was an earlier kernel's */
        } else if (strcmp(state, "unknown") == 0) {
            cli_err("session %s's journal has no cell %s: no client ran it in this kernel, or it is older than the "
                    "last %lld cells that were not silent, which the journal keeps", a->pos[0], id,
                    (long long)json_integer_value(json_object_get(json_object_get(j, "limits"), "cells")));
            rc = PYC_EXIT_NOSESSION;
        } else if (strcmp(state, "done") == 0) {
            rc = print_done(c, &o);
        } else {
            if (json) {
                json_t *line = json_pack("{s:s, s:s, s:s}", "type", "state", "id", id, "state", state);
                cli_print_json_line(line);
                json_decref(line);
            } else {
                printf("%s\n", state);
            }
            rc = PYC_EXIT_PENDING;
        }
    }
    json_decref(j);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
    return rc;
}
