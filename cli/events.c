/*
 * events.c -- `pyc events` (events.h; README, "pyc events"); what the other commands write into the log is
 * eventlog.c's.
 *
 * `events --since SEQ` reads with gaps on (events.h): events the log rotated out after the cursor are said as
 * one gap event before the first kept one; a SEQ above the newest event of the log is a usage error.  The
 * closed events pyc writes name the session's checkpoint as the kernel's do (checkpoints.c).
 *
 * `events --follow` reads the file every 150 ms from where it stopped (a rotation is noticed by the change
 * of inode), and looks for sessions whose kernel vanished once a second.  It ends on Ctrl-C (exit 130) or
 * when stdout's reader goes away (exit 141, quietly), which it watches with poll even while nothing is
 * printed.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.h"

#define FOLLOW_POLL_MS 150
#define FOLLOW_NOTICE_S 1.0

/* ---- pyc events ----------------------------------------------------------------------------------------- */

typedef struct {
    bool json;
    char **names;                /* only these sessions (NULL: all) */
    int nnames;
} show_t;

/* Prints one event: its JSON line, or the one-line text form. */
static int
show(void *ctx, const pyc_event_t *e)
{
    show_t *s = ctx;
    bool gap = strcmp(e->event, PYC_EVENTS_GAP) == 0;   /* lost events may have been any session's */
    if (s->nnames > 0 && !gap) {
        int i = 0;
        while (i < s->nnames && strcmp(s->names[i], e->session) != 0)
            i++;
        if (i == s->nnames)
            return 0;
    }
    if (s->json) {
        cli_print_json_line(e->obj);
        return cli_stdout_closed();
    }
    char when[64] = "?", detail[4608] = "";
    time_t t = (time_t)e->time;
    struct tm tm;
    if (localtime_r(&t, &tm) != NULL) {
        size_t n = strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(when + n, sizeof when - n, ".%03d", (int)((e->time - (double)t) * 1000) % 1000);
    }
    json_t *o = e->obj;
    const char *id = json_string_value(json_object_get(o, "id"));
    const char *cell = json_string_value(json_object_get(o, "cell"));
    const char *outcome = json_string_value(json_object_get(o, "outcome"));
    const char *from = json_string_value(json_object_get(o, "forked_from"));
    json_t *count = json_object_get(o, "count");
    if (gap) {
        json_int_t lost = json_integer_value(json_object_get(o, "lost"));
        snprintf(detail, sizeof detail, "%lld event%s lost (seq %lld to %lld): the log was rotated past them",
                 (long long)lost, lost == 1 ? "" : "s", (long long)json_integer_value(json_object_get(o, "from")),
                 (long long)json_integer_value(json_object_get(o, "to")));
    } else if (strcmp(e->event, "closed") == 0) {
        char sig[32] = "";
        if (e->signal > 0)
            snprintf(sig, sizeof sig, " (%s, signal %d)",
                     json_string_value(json_object_get(o, "signal_name")) ?: "?", e->signal);
        snprintf(detail, sizeof detail, "%s%s%s%s", e->reason != NULL ? e->reason : "?", sig,
                 cell != NULL ? " during cell " : "", cell != NULL ? cell : "");
    } else if (id != NULL) {
        snprintf(detail, sizeof detail, "[%lld] %s%s%s", (long long)json_integer_value(count), id,
                 outcome != NULL ? " " : "", outcome != NULL ? outcome : "");
    } else if (from != NULL) {
        snprintf(detail, sizeof detail, "forked from %s", from);
    }
    const char *cp = json_string_value(json_object_get(o, "checkpoint"));
    size_t dl = strlen(detail);
    if (cp != NULL)
        snprintf(detail + dl, sizeof detail - dl, "%scheckpoint %s", dl > 0 ? " " : "", cp);
    char line[5200];
    char pid[24] = "-";
    if (!gap)
        snprintf(pid, sizeof pid, "%ld", e->pid);
    int n = snprintf(line, sizeof line, "%lld %s %s %s %s%s%s\n", e->seq, when, gap ? "-" : e->session, pid,
                     e->event, detail[0] ? " " : "", detail);
    cli_print_text(line, n > 0 && (size_t)n < sizeof line ? (size_t)n : strlen(line));
    return cli_stdout_closed();
}

/* Looks at every session once (their files and processes, no heartbeat), so that a kernel that vanished
 * gets its event before the log is read. */
static void
notice_all(void)
{
    char dir[4096];
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        char name[PYC_SESSION_NAME_MAX + 1];
        pyc_session_file_t sf;
        if (!pyc_session_name_of_file(de->d_name, name))
            continue;
        cli_session_state(name, &sf, 0, NULL);   /* a stale one is noticed there */
        pyc_session_file_clear(&sf);
    }
    if (d != NULL)
        closedir(d);
}

int
cli_events(const cli_args_t *a)
{
    pyc_error_t err;
    char dir[4096];
    show_t s = {.json = a->value[CLI_EVENTS_JSON] != NULL, .names = (char **)a->pos, .nnames = a->npos};
    bool follow = a->value[CLI_EVENTS_FOLLOW] != NULL;
    pyc_events_cursor_t cur = {.gaps = true};
    for (int i = 0; i < a->npos; i++) {
        if (pyc_session_name_check(a->pos[i], &err) < 0) {
            cli_err("%s", err.text);
            return PYC_EXIT_USAGE;
        }
    }
    const char *since = a->value[CLI_EVENTS_SINCE];
    if (since != NULL) {
        char *end;
        errno = 0;
        long long v = strtoll(since, &end, 10);
        if (since[0] == '\0' || *end != '\0' || errno != 0 || v < 0) {
            cli_err("--since wants a seq (a whole number, 0 or more), not '%s'", since);
            return PYC_EXIT_USAGE;
        }
        cur.seq = v;
    }
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return PYC_EXIT_NOPERM;
    cli_catch_sigint();
    notice_all();
    long long asked = cur.seq;
    int r = pyc_events_read(dir, &cur, show, &s, &err);
    if (r < 0) {
        cli_err("%s", err.text);
        return PYC_EXIT_IOERR;
    }
    if (r == 0 && asked > cur.newest) {
        /* A cursor from the future: it came from another log (another runtime dir, or a log removed since),
         * and resuming after it would wait for events that the log numbers again from lower seqs. */
        cli_err("--since %lld is past the newest event of the log (%lld): the cursor is not from this log, or "
                "the log was removed since; --since 0 reads it all", asked, cur.newest);
        return PYC_EXIT_USAGE;
    }
    if (!follow || r != 0)
        return PYC_EXIT_OK;     /* r: stdout's reader went away (cli_stdout_finish makes it 141) */
    double noticed = pyc_now_s();
    for (;;) {
        /* Sleep on stdout itself: a pipe whose reader went away reports POLLERR at once. */
        struct pollfd pfd = {.fd = 1, .events = 0};
        int p = poll(&pfd, 1, FOLLOW_POLL_MS);
        if (cli_sigint_count > 0)
            return PYC_EXIT_INTERRUPTED;
        if (p > 0 && (pfd.revents & (POLLERR | POLLHUP)))
            return PYC_EXIT_PIPE;
        if (pyc_now_s() - noticed >= FOLLOW_NOTICE_S) {
            notice_all();
            noticed = pyc_now_s();
        }
        r = pyc_events_read(dir, &cur, show, &s, &err);
        if (r < 0) {
            cli_err("%s", err.text);
            return PYC_EXIT_IOERR;
        }
        if (r != 0)
            return PYC_EXIT_OK;  /* stdout's reader went away: cli_stdout_finish makes it 141 */
    }
}
