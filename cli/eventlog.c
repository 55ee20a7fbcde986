/*
 * eventlog.c -- what the commands of `pyc` write into the sessions' event log and read back from it
 * (events.h; README, "pyc events"): closed with reason killed (`kill` had to SIGKILL), replaced (`new
 * --replace`) and vanished (a kernel gone without a closed event of its own), and the closed event `ls` shows
 * a stale session's reason from.  The `events` command itself is events.c, above every other command.
 *
 * vanished is written by the first command that finds a session's kernel gone (cli_session_state judging it
 * stale, or `run` losing it) while nobody else holds the name's lock, or while this command holds it: a
 * `kill` or `new` in progress ends the kernel itself and says how.  It is written only when the log has no
 * closed event of that session and pid yet -- the kernel writes its own before it ends, even when it
 * crashes -- so it is written once.  (A closed event rotated out of the log, after about 2 MiB of events,
 * is not found: the session is then said to have vanished.)  The closed events pyc writes name the
 * session's checkpoint as the kernel's do (checkpoints.c).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "events.h"

#define WRITE_LOCK_MS 1000

/* The process's writer, opened on first use; a failure is said once and never fails the command. */
static pyc_events_t *
writer(void)
{
    static pyc_events_t *ev;
    static bool tried;
    char dir[4096];
    pyc_error_t err;
    if (!tried) {
        tried = true;
        if (cli_runtime_dir(dir, sizeof dir) == 0 && (ev = pyc_events_open(dir, 0, &err)) == NULL)
            cli_err("warning: %s; no event is recorded", err.text);
    }
    return ev;
}

void
cli_event_closed(const char *name, long pid, const char *reason)
{
    pyc_error_t err;
    pyc_events_t *ev = writer();
    json_t *f = json_pack("{s:s}", "reason", reason);
    /* As the kernel's own closed event: the file that brings the session's work back, when it holds any. */
    char *cp = ev != NULL && f != NULL ? cli_checkpoint_of(name, pid) : NULL;
    if (cp != NULL)
        json_object_set_new(f, "checkpoint", json_string(cp));
    free(cp);
    if (ev != NULL && f != NULL && pyc_events_append(ev, name, pid, "closed", f, WRITE_LOCK_MS, &err) < 0)
        cli_err("warning: the event log: %s", err.text);
    json_decref(f);
}

/* Looks for the last closed event of (session, pid). */
typedef struct {
    const char *name;
    long pid;
    json_t *found;               /* a reference, or NULL */
} find_t;

static int
find_closed(void *ctx, const pyc_event_t *e)
{
    find_t *f = ctx;
    if (e->pid == f->pid && strcmp(e->event, "closed") == 0 && strcmp(e->session, f->name) == 0) {
        json_decref(f->found);
        f->found = json_incref(e->obj);
    }
    return 0;
}

json_t *
cli_event_closing(const char *name, long pid)
{
    char dir[4096];
    pyc_events_cursor_t cur = {0};
    find_t f = {name, pid, NULL};
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return NULL;
    pyc_events_read(dir, &cur, find_closed, &f, NULL);
    return f.found;
}

void
cli_notice_gone(const char *name, const pyc_session_file_t *sf)
{
    char why[16];
    if (sf->pid <= 0 || (!cli_lock_is_ours(name) && cli_locked(name, why, sizeof why)))
        return;
    json_t *closed = cli_event_closing(name, sf->pid);
    if (closed == NULL)
        cli_event_closed(name, sf->pid, "vanished");
    json_decref(closed);
}

void
cli_closed_state(const json_t *closed, char *out, size_t cap)
{
    const char *reason = json_string_value(json_object_get(closed, "reason"));
    const char *sig = json_string_value(json_object_get(closed, "signal_name"));
    if (reason == NULL || strcmp(reason, "vanished") == 0)
        snprintf(out, cap, "stale");   /* gone without a word: what stale always meant */
    else if (strcmp(reason, "crashed") == 0)
        snprintf(out, cap, "crashed (%s)", sig != NULL ? sig : "signal");
    else if (strcmp(reason, "killed") == 0 || strcmp(reason, "replaced") == 0)
        snprintf(out, cap, "%s", reason);
    else if (strcmp(reason, "idle_timeout") == 0)
        snprintf(out, cap, "ended (idle timeout)");
    else if (strcmp(reason, "out_of_memory") == 0)
        snprintf(out, cap, "ended (out of memory)");
    else if (strcmp(reason, "parent_gone") == 0)
        snprintf(out, cap, "ended (parent gone)");
    else if (strcmp(reason, "stuck") == 0)
        snprintf(out, cap, "ended (stuck cell)");
    else if (strcmp(reason, "terminated") == 0)
        snprintf(out, cap, "ended (SIGTERM)");
    else
        snprintf(out, cap, "ended (%s)", reason);
}
