/*
 * output.c -- what `pyc` prints of a request, and the execute loop that `run` and `attach` share; see cli.h.
 *
 * Everything for stdout goes through one writer, which flushes each piece (output streams as the kernel
 * sends it) and remembers the first failed write: after it nothing more is written there, since the output
 * is incomplete anyway, and cli_stdout_finish turns it into the exit code.  EPIPE (the reader went away:
 * `pyc run ... | head -1`) ends a cell's wait at once, quietly, with the cell left running, as a tool killed
 * by SIGPIPE would leave it; any other failure (a full disk) is reported.  stderr is written directly.
 *
 * A SystemExit in a `pyc run` cell is the command's own exit, as it is a script's: the kernel reports it as an
 * error whose evalue is str(code) ("3", "None", "bye"), from which the status is taken as Python's own exit
 * takes it from the code (cli_reply_exit), and only a text code is printed, without a traceback.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* errno of the first failed write to stdout, 0 while none failed.  After a failure nothing more is written
 * there: the output is incomplete anyway, and cli_stdout_finish reports it. */
static int stdout_errno;

/* Writes n bytes to f and flushes them (output streams as the kernel sends it). */
static void
out_write(FILE *f, const void *p, size_t n)
{
    if (f == stdout && stdout_errno != 0)
        return;
    errno = 0;
    if ((n > 0 && fwrite(p, 1, n, f) != n) || fflush(f) != 0) {
        if (f == stdout)
            stdout_errno = errno != 0 ? errno : EIO;
    }
}

bool
cli_stdout_closed(void)
{
    return stdout_errno == EPIPE;
}

int
cli_stdout_finish(int rc)
{
    errno = 0;
    if (stdout_errno == 0 && (fflush(stdout) != 0 || ferror(stdout)))
        stdout_errno = errno != 0 ? errno : EIO;
    if (stdout_errno == 0)
        return rc;
    if (stdout_errno == EPIPE)
        return rc == PYC_EXIT_OK || rc == PYC_EXIT_PIPE ? PYC_EXIT_PIPE : rc;
    cli_err("cannot write to stdout: %s", strerror(stdout_errno));
    return rc == PYC_EXIT_OK ? PYC_EXIT_IOERR : rc;
}

void
cli_print_json_line(json_t *v)
{
    char *s = v != NULL ? json_dumps(v, JSON_COMPACT) : NULL;
    if (s == NULL) {
        cli_err("out of memory printing JSON");
        return;
    }
    size_t n = strlen(s);
    s[n] = '\n';                 /* json_dumps's NUL: one write for the whole line */
    out_write(stdout, s, n + 1);
    free(s);
}

void
cli_print_text(const char *s, size_t n)
{
    out_write(stdout, s, n);
}

static void
put_text(cli_output_t *o, FILE *f, const char *s, size_t n)
{
    if (n == 0)
        return;
    out_write(f, s, n);
    if (f == stdout)
        o->wrote_nl = s[n - 1] == '\n';
}

/* Writes a line of a traceback to stderr; without color, its ANSI escape sequences (ESC [ ... final byte, as
 * IPython-style tracebacks color their parts) are left out, so that a log or a pipe gets plain text. */
static void
put_traceback_line(const char *s, size_t n, bool color)
{
    if (color) {
        fwrite(s, 1, n, stderr);
        return;
    }
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\033' || i + 1 >= n || s[i + 1] != '[')
            continue;
        fwrite(s + start, 1, i - start, stderr);
        size_t j = i + 2;
        while (j < n && !((unsigned char)s[j] >= 0x40 && (unsigned char)s[j] <= 0x7e))
            j++;
        start = j < n ? j + 1 : n;
        i = start - 1;
    }
    fwrite(s + start, 1, n - start, stderr);
}

/* Prints a mime bundle: its text/plain, else one line naming what it holds. */
static void
put_bundle(cli_output_t *o, json_t *data)
{
    json_t *text = json_object_get(data, "text/plain");
    if (!o->wrote_nl && json_is_object(data) && json_object_size(data) > 0)
        put_text(o, stdout, "\n", 1);   /* a result starts a line of its own, after print(..., end="") */
    if (json_is_string(text)) {
        put_text(o, stdout, json_string_value(text), json_string_length(text));
        if (json_string_length(text) > 0 && !o->wrote_nl)
            put_text(o, stdout, "\n", 1);
        return;
    }
    const char *key;
    json_t *v;
    bool first = true;
    if (!json_is_object(data) || json_object_size(data) == 0)
        return;
    put_text(o, stdout, "[display:", 9);
    json_object_foreach(data, key, v) {
        put_text(o, stdout, first ? " " : ", ", first ? 1 : 2);
        put_text(o, stdout, key, strlen(key));
        first = false;
    }
    put_text(o, stdout, "]\n", 2);
}

/* When content (of an error message or an execute_reply) is a SystemExit: true, with the status Python exits
 * with for its code into *status, and *text true when the code is text, which Python prints on stderr. */
static bool
system_exit(json_t *content, int *status, bool *text)
{
    const char *ename = json_string_value(json_object_get(content, "ename"));
    if (ename == NULL || strcmp(ename, "SystemExit") != 0)
        return false;
    const char *ev = json_string_value(json_object_get(content, "evalue"));
    char *end = NULL;
    *text = false;
    if (ev == NULL || ev[0] == '\0' || strcmp(ev, "None") == 0 || strcmp(ev, "False") == 0) {
        *status = 0;
        return true;
    }
    if (strcmp(ev, "True") == 0) {
        *status = 1;
        return true;
    }
    errno = 0;
    long v = strtol(ev, &end, 10);
    if (end != ev && *end == '\0' && errno == 0 && (ev[0] == '-' || (ev[0] >= '0' && ev[0] <= '9'))) {
        *status = (int)((unsigned long)v & 0xff);
        return true;
    }
    *status = 1;
    *text = true;
    return true;
}

void
cli_print_iopub(cli_output_t *o, const pyc_msg_t *m)
{
    const char *t = m->msg_type;
    if (strcmp(t, "status") == 0 || strcmp(t, "execute_input") == 0)
        return;
    if (o->json) {
        json_t *line = json_pack("{s:s, s:O}", "type", t, "content", m->content);
        cli_print_json_line(line);
        json_decref(line);
        return;
    }
    json_t *c = m->content;
    if (strcmp(t, "stream") == 0) {
        json_t *text = json_object_get(c, "text");
        const char *name = json_string_value(json_object_get(c, "name"));
        if (json_is_string(text))
            put_text(o, name != NULL && strcmp(name, "stderr") == 0 ? stderr : stdout, json_string_value(text),
                     json_string_length(text));
    } else if (strcmp(t, "execute_result") == 0 || strcmp(t, "display_data") == 0 ||
               strcmp(t, "update_display_data") == 0) {
        put_bundle(o, json_object_get(c, "data"));
    } else if (strcmp(t, "error") == 0) {
        json_t *tb = json_object_get(c, "traceback");
        size_t i;
        json_t *line;
        bool color = isatty(fileno(stderr)) && getenv("NO_COLOR") == NULL, text;
        int status;
        fflush(stdout);
        if (o->system_exit && system_exit(c, &status, &text)) {
            if (text)
                fprintf(stderr, "%s\n", json_string_value(json_object_get(c, "evalue")));
            fflush(stderr);
            return;
        }
        if (json_is_array(tb) && json_array_size(tb) > 0) {
            json_array_foreach(tb, i, line) {
                if (json_is_string(line)) {
                    put_traceback_line(json_string_value(line), json_string_length(line), color);
                    fputc('\n', stderr);
                }
            }
        } else {
            fprintf(stderr, "%s: %s\n", json_string_value(json_object_get(c, "ename")) ?: "Error",
                    json_string_value(json_object_get(c, "evalue")) ?: "");
        }
        fflush(stderr);
    }
}

bool
cli_reply_lost(const pyc_msg_t *reply)
{
    json_t *pm = json_object_get(reply->metadata, "pyc");
    const char *state = json_string_value(json_object_get(pm, "state"));
    const char *outcome = json_string_value(json_object_get(pm, "outcome"));
    return (state != NULL && strcmp(state, "lost") == 0) || json_is_true(json_object_get(pm, "kernel_ending")) ||
           (outcome != NULL && strcmp(outcome, "lifetime") == 0);
}

/* The last judgement of cli_reply_exit (see cli_cell_outcome). */
static const char *judged_word;
static int judged_code;

static int
judged(const char *word, int code)
{
    judged_word = word;
    judged_code = code;
    return code;
}

const char *
cli_cell_outcome(int *code)
{
    *code = judged_code;
    return judged_word;
}

int
cli_reply_exit(const pyc_msg_t *reply, bool interrupted)
{
    const char *status = json_string_value(json_object_get(reply->content, "status"));
    int code;
    bool text;
    if (cli_reply_lost(reply))
        return judged("lost", PYC_EXIT_LOST);
    if (status != NULL && strcmp(status, "ok") == 0)
        return judged("ok", PYC_EXIT_OK);
    if (system_exit(reply->content, &code, &text))
        return judged("system_exit", code);
    const char *ename = json_string_value(json_object_get(reply->content, "ename"));
    json_t *pm = json_object_get(reply->metadata, "pyc");
    const char *outcome = json_string_value(json_object_get(pm, "outcome"));
    if ((ename != NULL && strcmp(ename, "CellTimeout") == 0) || (outcome != NULL && strcmp(outcome, "timeout") == 0) ||
        json_is_true(json_object_get(pm, "timed_out")))
        return judged("timeout", PYC_EXIT_TIMEOUT);
    if (interrupted && ename != NULL && strcmp(ename, "KeyboardInterrupt") == 0)
        return judged("interrupted", PYC_EXIT_INTERRUPTED);
    return judged("raised", PYC_EXIT_ERROR);
}

/* The name of one of pyc's own exit codes, for the outcome line. */
static const char *
exit_word(int rc)
{
    switch (rc) {
    case PYC_EXIT_OK: return "ok";
    case PYC_EXIT_USAGE: return "usage";
    case PYC_EXIT_REFUSED: return "refused";
    case PYC_EXIT_NOINPUT: return "no_input";
    case PYC_EXIT_NOSESSION: return "no_session";
    case PYC_EXIT_CONNECTION: return "unavailable";
    case PYC_EXIT_LOST: return "lost";
    case PYC_EXIT_OSERR: return "system_error";
    case PYC_EXIT_EXISTS: return "exists";
    case PYC_EXIT_IOERR: return "io_error";
    case PYC_EXIT_PENDING: return "pending";
    case PYC_EXIT_PROTOCOL: return "protocol";
    case PYC_EXIT_NOPERM: return "no_permission";
    case PYC_EXIT_TIMEOUT: return "timeout";
    case PYC_EXIT_INTERRUPTED: return "interrupted";
    case PYC_EXIT_PIPE: return "pipe";
    default: return "error";
    }
}

bool
cli_exit_is_cells(int rc)
{
    int code;
    const char *word = cli_cell_outcome(&code);
    return word != NULL && code == rc &&
           (strcmp(word, "ok") == 0 || strcmp(word, "raised") == 0 || strcmp(word, "system_exit") == 0);
}

void
cli_outcome_line(int rc)
{
    if (cli_stdout_closed())
        return;
    int code;
    const char *word = cli_cell_outcome(&code);
    bool by_cell = cli_exit_is_cells(rc);
    if (word == NULL || code != rc)
        word = exit_word(rc);
    json_t *line = json_pack("{s:s, s:s, s:i, s:s, s:s?}", "type", "outcome", "outcome", word, "exit", rc, "by",
                             by_cell ? "cell" : "pyc", "message", cli_last_err());
    cli_print_json_line(line);
    json_decref(line);
}

/* How long cli_execute waits in all for a cell whose deadline is deadline_s (see cli.h). */
static double
client_bound_s(double deadline_s)
{
    return deadline_s + CLI_CELL_GRACE_S + (deadline_s / 10 > 5 ? deadline_s / 10 : 5);
}

/* The gist of why an isolated cell's name was not merged back, from the kernel's reason (README,
 * "Fork-isolated cells"), into out: the type of "TypeError: cannot pickle 'generator' object"
 * ("generator"), the object of "Can't pickle <function <lambda> at 0x...>: ..." ("function <lambda>"),
 * "module: re-import it" for a module, else the reason itself cut to 80 bytes. */
static void
short_reason(const char *reason, char *out, size_t cap)
{
    const char *p;
    size_t n;
    if (strncmp(reason, "a module", 8) == 0) {
        snprintf(out, cap, "module: re-import it");
    } else if ((p = strstr(reason, "cannot pickle '")) != NULL && (n = strcspn(p + 15, "'")) > 0 &&
               p[15 + n] == '\'') {
        snprintf(out, cap, "%.*s", (int)n, p + 15);
    } else if ((p = strstr(reason, "Can't pickle <")) != NULL) {
        p += 14;
        const char *at = strstr(p, " at 0x");
        n = at != NULL ? (size_t)(at - p) : strcspn(p, ">:");
        snprintf(out, cap, "%.*s", (int)(n < 80 ? n : 80), p);
    } else {
        n = strlen(reason);
        snprintf(out, cap, "%.80s%s", reason, n > 80 ? "..." : "");
    }
}

void
cli_report_unmerged(const pyc_msg_t *reply)
{
    json_t *skipped = json_object_get(json_object_get(reply->metadata, "pyc"), "skipped");
    const char *name;
    json_t *v;
    if (!json_is_object(skipped) || json_object_size(skipped) == 0)
        return;
    json_t *all = json_object_get(skipped, "*");
    if (json_is_string(all)) {
        /* The names could not be collected or loaded at all. */
        cli_err("nothing was merged back from the isolated cell: %s", json_string_value(all));
        return;
    }
    fflush(stdout);
    fputs("pyc: not merged back (cannot be pickled):", stderr);
    bool first = true;
    json_object_foreach(skipped, name, v) {
        char why[128];
        short_reason(json_is_string(v) ? json_string_value(v) : "?", why, sizeof why);
        fprintf(stderr, "%s %s (%s)", first ? "" : ",", name, why);
        first = false;
    }
    fputc('\n', stderr);
    fflush(stderr);
}

/* Prints the late outputs the kernel's journal holds (what earlier cells' threads printed after their cells
 * ended, which nobody saw), when reply's metadata.pyc says there are some: asked for on control with
 * journal_request {"late": true}, which hands each out once.  In text mode each cell's come after a line on
 * stderr that names the cell, and print as its outputs would; with --json each is a line {"type":
 * "late_output", "id", "execution_count", "output": {"type", "content"}}.  A kernel that does not answer in
 * time is passed over in silence: the cell's own outcome is what the command reports. */
static void
show_late(pyc_client_t *cl, const pyc_msg_t *reply, cli_output_t *o)
{
    json_t *n = json_object_get(json_object_get(reply->metadata, "pyc"), "late_outputs");
    if (!json_is_integer(n) || json_integer_value(n) <= 0)
        return;
    pyc_msg_t *answer = NULL;
    pyc_error_t err;
    json_t *ask = json_pack("{s:b}", "late", 1);
    int r = pyc_client_request(cl, PYC_CHAN_CONTROL, "journal_request", ask, cli_connect_ms(), &answer, &err);
    json_decref(ask);
    if (r != PYC_RECV_MSG) {
        pyc_msg_destroy(&answer);
        return;
    }
    size_t i, j;
    json_t *cell, *out;
    json_array_foreach(json_object_get(answer->content, "cells"), i, cell) {
        const char *cid = json_string_value(json_object_get(cell, "id")) ?: "?";
        json_t *count = json_object_get(cell, "execution_count");
        if (!o->json) {
            fflush(stdout);
            if (json_is_integer(count))
                fprintf(stderr, "pyc: output of cell In [%lld] (%s) after it ended:\n",
                        (long long)json_integer_value(count), cid);
            else
                fprintf(stderr, "pyc: output of cell %s after it ended:\n", cid);
            fflush(stderr);
        }
        json_array_foreach(json_object_get(cell, "late"), j, out) {
            const char *type = json_string_value(json_object_get(out, "type"));
            json_t *content = json_object_get(out, "content");
            if (type == NULL || !json_is_object(content))
                continue;
            if (o->json) {
                json_t *line = json_pack("{s:s, s:s, s:O?, s:O}", "type", "late_output", "id", cid,
                                         "execution_count", count, "output", out);
                cli_print_json_line(line);
                json_decref(line);
            } else {
                pyc_msg_t m = {.msg_type = (char *)type, .content = content};
                cli_print_iopub(o, &m);
            }
        }
    }
    pyc_msg_destroy(&answer);
}

int
cli_execute(pyc_client_t *cl, const char *code, json_t *metadata, bool allow_stdin, cli_output_t *o,
            pyc_msg_t **reply_out)
{
    char id[PYC_MSG_ID_LEN + 1];
    pyc_error_t err;
    pyc_msg_t *reply = NULL;
    bool idle = false, started = false;
    int interrupts = 0, rc;
    json_t *deadline = json_object_get(json_object_get(metadata, "pyc"), "timeout");
    double bound = json_is_number(deadline) && json_number_value(deadline) > 0
                       ? client_bound_s(json_number_value(deadline)) : 0;
    double give_up = 0;

    if (reply_out != NULL)
        *reply_out = NULL;
    json_t *content = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 0, "store_history", 1,
                                "user_expressions", "allow_stdin", allow_stdin, "stop_on_error", 1);
    if (content == NULL) {
        cli_err("the code is not valid UTF-8 (or memory ran out)");
        return PYC_EXIT_USAGE;
    }
    int sent = pyc_client_send(cl, PYC_CHAN_SHELL, "execute_request", content, metadata, NULL, NULL, 0, id, &err);
    json_decref(content);
    if (sent < 0) {
        cli_err("%s", err.text);
        return PYC_EXIT_CONNECTION;
    }
    cli_sigint_count = 0;
    if (bound > 0)
        give_up = pyc_now_s() + bound;
    while (reply == NULL || !idle) {
        pyc_msg_t *m;
        int chan;
        double left = give_up > 0 ? give_up - pyc_now_s() : 0;
        if (give_up > 0 && left <= 0) {
            /* The kernel keeps the deadline; this is for a kernel that keeps neither it nor its promise to
             * report a stuck cell (or that never got to the cell). */
            if (started)
                cli_err("gave up after %g s: the kernel (pid %ld) neither ended the cell at its deadline of %g s "
                        "nor reported it stuck; the session may be unusable (pyc status, pyc kill)", bound,
                        pyc_client_watched_pid(cl), json_number_value(deadline));
            else
                cli_err("gave up after %g s: the cell did not start (the kernel is busy with another request); "
                        "it stays queued and will run later", bound);
            pyc_msg_destroy(&reply);
            return PYC_EXIT_CONNECTION;
        }
        int r = pyc_client_recv(cl, give_up > 0 ? (int)(left * 1000) + 1 : -1, &m, &chan, &err);
        if (r == PYC_RECV_SIGNAL || cli_sigint_count > interrupts) {
            /* Each Ctrl-C asks the kernel to interrupt the cell; the third leaves at once, the cell running. */
            while (interrupts < cli_sigint_count) {
                interrupts++;
                if (interrupts >= 3) {
                    cli_err("left the cell running after three interrupts");
                    pyc_msg_destroy(&reply);
                    return PYC_EXIT_INTERRUPTED;
                }
                if (pyc_client_send(cl, PYC_CHAN_CONTROL, "interrupt_request", NULL, NULL, NULL, NULL, 0, NULL,
                                    &err) < 0)
                    cli_err("%s", err.text);
            }
            if (r == PYC_RECV_SIGNAL)
                continue;
        }
        if (r == PYC_RECV_ERROR && err.code == PYC_EGONE && reply != NULL)
            break;               /* a kernel that said it ends (a lost cell) may end before its idle */
        if (r == PYC_RECV_ERROR && err.code == PYC_EGONE) {
            cli_err("the kernel (pid %ld) died during the cell; the session is lost", pyc_client_watched_pid(cl));
            return PYC_EXIT_LOST;
        }
        if (r == PYC_RECV_ERROR) {
            cli_err("%s", err.text);
            pyc_msg_destroy(&reply);
            return PYC_EXIT_CONNECTION;
        }
        if (r != PYC_RECV_MSG)
            continue;
        if (chan == PYC_CHAN_IOPUB && pyc_client_is_child_of(m, id)) {
            if (strcmp(m->msg_type, "status") == 0) {
                const char *st = json_string_value(json_object_get(m->content, "execution_state"));
                if (st != NULL && strcmp(st, "idle") == 0)
                    idle = true;
                started = true;
            } else {
                cli_print_iopub(o, m);
                if (cli_stdout_closed()) {
                    /* The reader of stdout is gone (`pyc run ... | head -1`): stop, as a tool killed by
                     * SIGPIPE would, and leave the cell running, as a dropped ssh connection does. */
                    pyc_msg_destroy(&m);
                    pyc_msg_destroy(&reply);
                    return PYC_EXIT_PIPE;
                }
            }
        } else if (chan == PYC_CHAN_SHELL && reply == NULL && pyc_client_is_child_of(m, id) &&
                   strcmp(m->msg_type, "execute_reply") == 0) {
            reply = m;
            m = NULL;
        } else if (chan == PYC_CHAN_STDIN && strcmp(m->msg_type, "input_request") == 0 && allow_stdin) {
            const char *prompt = json_string_value(json_object_get(m->content, "prompt"));
            bool password = json_is_true(json_object_get(m->content, "password"));
            char *line = cli_read_input(prompt != NULL ? prompt : "", password);
            json_t *rc_content = json_pack("{s:s}", "value", line != NULL ? line : "");
            if (line == NULL)
                fputc('\n', stdout);
            if (rc_content == NULL ||
                pyc_client_send(cl, PYC_CHAN_STDIN, "input_reply", rc_content, NULL, m->header, NULL, 0, NULL,
                                &err) < 0)
                cli_err("cannot answer input(): %s", rc_content == NULL ? "the line is not valid UTF-8" : err.text);
            json_decref(rc_content);
            free(line);
        }
        pyc_msg_destroy(&m);
    }
    show_late(cl, reply, o);
    if (o->json) {
        json_t *line = json_pack("{s:s, s:O, s:O}", "type", "execute_reply", "content", reply->content, "metadata",
                                 reply->metadata);
        cli_print_json_line(line);
        json_decref(line);
    }
    const char *status = json_string_value(json_object_get(reply->content, "status"));
    if (!o->json && status != NULL && strcmp(status, "aborted") == 0)
        cli_err("the cell was not run: the kernel aborted it because a cell before it failed");
    if (!o->json)
        cli_report_unmerged(reply);
    rc = cli_reply_exit(reply, interrupts > 0);
    if (cli_reply_lost(reply)) {
        const char *outcome = json_string_value(json_object_get(json_object_get(reply->metadata, "pyc"), "outcome"));
        cli_err("the session is lost: the kernel (pid %ld) ends after this cell (outcome %s)",
                pyc_client_watched_pid(cl), outcome != NULL ? outcome : "unknown");
    }
    if (reply_out != NULL)
        *reply_out = reply;
    else
        pyc_msg_destroy(&reply);
    return rc;
}
