/*
 * query.c -- `pyc run`, `status`, `vars`, `complete` and `int`: requests to one live session.
 *
 * `status` asks usage_request on control first: pyc's control thread answers it while a cell runs, with the
 * kernel's own execution_state (the state its iopub status messages announce) and execution_count.  A kernel
 * that has no usage_request (no answer within USAGE_WAIT_MS) is judged by asking: a silent, empty
 * execute_request on shell is answered within milliseconds by an idle kernel and only after the running cell
 * by a busy one, so no answer within BUSY_PROBE_MS means busy.  That probe stays queued behind the running
 * cell and runs, silently and without effect, when it ends.  (pyc's control thread also answers kernel_info
 * while a cell runs, so a kernel_info says nothing about busy or idle; it says only that the kernel hears us,
 * which is asked before that probe.)  A kernel that answers no usage_request is also pinged on its
 * heartbeat (as `pyc ls` does, 1 s): silent, it is stopped or stuck, and `status` prints its state as
 * "unresponsive" (pid, uptime and memory from /proc, execution_count null) and exits PYC_EXIT_CONNECTION.
 *
 * `vars` evaluates one expression as a user_expression of a silent execute_request: it produces no output,
 * does not count as a cell, and works in any Python kernel.  The expression returns JSON text; its
 * text/plain is that str's repr, which for the pure-ASCII text json.dumps writes has only two escapes
 * (\\ and \'), undone here before the JSON is parsed.  It runs in the user's namespace, where any name may
 * have been rebound (type = 'A', list = [1], even __import__ or globals), so it looks up no global name at
 * all: the namespace is a lambda's __globals__, and every builtin it uses is taken from the namespace's
 * __builtins__ (the module in __main__, a dict elsewhere) and passed in as a parameter.  Only rebinding
 * __builtins__ itself, which breaks every name lookup of the user's own code too, defeats it.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "proc.h"

#define BUSY_PROBE_MS 500
#define USAGE_WAIT_MS 300
#define LS_HB_MS 1000            /* `pyc ls`'s heartbeat wait: a kernel silent for it is unresponsive */
#define MAX_CODE (64u << 20)

/* The listing.  Names it leaves out, besides "_..." names (as pyc.pickle's get does): In, Out, get_ipython,
 * exit, quit.  g is the user's namespace, B the real builtins' dict (see the top of this file). */
#define VARS_EXPR                                                                                              \
    "(lambda g: (lambda B: (lambda json, ModuleType, isinstance, getattr, sorted, type, list, str: "            \
    "json.dumps([{'name': k, 'type': 'module' if isinstance(v, ModuleType) "                                    \
    "else (type(v).__qualname__ if getattr(type(v), '__module__', None) in ('builtins', None) "                 \
    "else type(v).__module__ + '.' + type(v).__qualname__)} for k, v in sorted((k, v) for k, v in "            \
    "list(g.items()) if isinstance(k, str) and not k.startswith('_') and k not in "                             \
    "('In', 'Out', 'get_ipython', 'exit', 'quit'))]))("                                                        \
    "B['__import__']('json'), B['__import__']('types').ModuleType, B['isinstance'], B['getattr'], "             \
    "B['sorted'], B['type'], B['list'], B['str']))("                                                            \
    "g['__builtins__'] if g['__builtins__'].__class__ is {}.__class__ else g['__builtins__'].__dict__))("      \
    "(lambda: 0).__globals__)"

/* Reads all of fd (up to MAX_CODE bytes) into a new string. */
static char *
read_all(int fd, const char *what)
{
    pyc_buf_t b;
    char chunk[65536];
    pyc_buf_init(&b, MAX_CODE);
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            cli_err("cannot read %s: %s", what, strerror(errno));
            pyc_buf_free(&b);
            return NULL;
        }
        if (r == 0)
            break;
        if (pyc_buf_add(&b, chunk, (size_t)r) < 0) {
            cli_err("%s is larger than %u MiB", what, MAX_CODE >> 20);
            pyc_buf_free(&b);
            return NULL;
        }
    }
    char *s = pyc_buf_detach(&b, NULL);
    return s != NULL ? s : strdup("");
}

char *
cli_read_code(const char *arg)
{
    if (strcmp(arg, "-") == 0)
        return read_all(0, "stdin");
    if (arg[0] == '@' && strchr(arg, '\n') == NULL) {
        int fd = open(arg + 1, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            cli_err("cannot open %s: %s", arg + 1, strerror(errno));
            return NULL;
        }
        char *s = read_all(fd, arg + 1);
        close(fd);
        return s;
    }
    char *s = strdup(arg);
    if (s == NULL)
        cli_err("out of memory");
    return s;
}

json_t *
cli_cell_metadata(double timeout, bool isolate)
{
    /* pace false: pyc reads iopub to the idle, so the kernel need not hold the reply back for relays (README,
     * "Agent frameworks"). */
    json_t *p = json_pack("{s:b}", "pace", 0);
    if (timeout > 0)
        json_object_set_new(p, "timeout", json_real(timeout));
    if (isolate)
        json_object_set_new(p, "isolate", json_string("fork"));
    return json_pack("{s:o}", "pyc", p);
}

int
cli_run(const cli_args_t *a)
{
    double timeout = 0;
    bool isolate = a->value[CLI_RUN_ISOLATE] != NULL;
    int rc;
    if (a->value[CLI_RUN_TIMEOUT] != NULL && cli_seconds("--timeout", a->value[CLI_RUN_TIMEOUT], &timeout) < 0)
        return PYC_EXIT_USAGE;
    pyc_error_t err;
    if (pyc_session_name_check(a->pos[0], &err) < 0) {
        cli_err("%s", err.text);
        return PYC_EXIT_USAGE;
    }
    char *code = cli_read_code(a->pos[1]);
    if (code == NULL)
        return PYC_EXIT_NOINPUT;   /* a local file (or stdin) failed: printed */
    json_t *md = cli_cell_metadata(timeout, isolate);
    cli_catch_sigint();
    pyc_session_file_t sf;
    pyc_client_t *cl = cli_connect(a->pos[0], &sf, true, false, &rc);
    if (cl != NULL) {
        cli_output_t o = {.json = a->value[CLI_RUN_JSON] != NULL, .wrote_nl = true, .system_exit = true};
        rc = cli_execute(cl, code, md, false, &o, NULL);
        pyc_client_destroy(&cl);
        /* A kernel lost during the cell: recorded, unless it said how it ended (a crash).  A cell's own status
         * of the same number (sys.exit(70)) is no news about the session. */
        bool lost = rc == PYC_EXIT_LOST && !cli_exit_is_cells(rc);
        if ((rc == PYC_EXIT_CONNECTION || lost) && sf.pid > 0 && !pyc_proc_is(sf.pid, sf.pid_start))
            cli_notice_gone(a->pos[0], &sf);
        /* The session's work is not lost with it: its checkpoint brings it back. */
        char *cp = lost ? cli_checkpoint_of(a->pos[0], sf.pid) : NULL;
        if (cp != NULL)
            cli_checkpoint_hint(a->pos[0], cp);
        free(cp);
        pyc_session_file_clear(&sf);
    }
    json_decref(md);
    free(code);
    return rc;
}

/* Waits for the reply to request `id` on chan (no time limit, but the kernel's process is watched).  Returns
 * the reply, or NULL with *rc set (printed). */
static pyc_msg_t *
wait_reply(pyc_client_t *cl, int chan, const char *id, int *rc)
{
    pyc_error_t err;
    for (;;) {
        pyc_msg_t *m;
        int c;
        int r = pyc_client_recv(cl, -1, &m, &c, &err);
        if (r == PYC_RECV_MSG) {
            if (c == chan && pyc_client_is_child_of(m, id))
                return m;
            pyc_msg_destroy(&m);
            continue;
        }
        if (r == PYC_RECV_SIGNAL && cli_sigint_count == 0)
            continue;
        if (r == PYC_RECV_SIGNAL) {
            cli_err("interrupted");
            *rc = PYC_EXIT_INTERRUPTED;
        } else {
            *rc = cli_recv_failed(&err);
        }
        return NULL;
    }
}

/* A silent execute_request that evaluates user_expressions (may be NULL) and runs no code. */
static int
send_silent(pyc_client_t *cl, json_t *uexpr, char *id)
{
    pyc_error_t err;
    json_t *ue = uexpr != NULL ? json_incref(uexpr) : json_object();
    json_t *c = json_pack("{s:s, s:b, s:b, s:o, s:b, s:b}", "code", "", "silent", 1, "store_history", 0,
                          "user_expressions", ue, "allow_stdin", 0, "stop_on_error", 0);
    if (c == NULL) {
        cli_err("out of memory");
        return -1;
    }
    int r = pyc_client_send(cl, PYC_CHAN_SHELL, "execute_request", c, NULL, NULL, NULL, 0, id, &err);
    json_decref(c);
    if (r < 0)
        cli_err("%s", err.text);
    return r;
}

/* Waits until ms have passed since t0 (seconds, pyc_now_s) for the reply to `id` on chan; NULL when none came,
 * with *rc set when the wait failed (the kernel is gone, or Ctrl-C). */
static pyc_msg_t *
reply_within(pyc_client_t *cl, int chan, const char *id, double t0, int ms, int *rc)
{
    pyc_error_t err;
    for (;;) {
        double left = ms - (pyc_now_s() - t0) * 1000;
        pyc_msg_t *m;
        int c;
        if (left <= 0)
            return NULL;
        int r = pyc_client_recv(cl, (int)left + 1, &m, &c, &err);
        if (r == PYC_RECV_ERROR) {
            *rc = cli_recv_failed(&err);
            return NULL;
        }
        if (r == PYC_RECV_SIGNAL && cli_sigint_count > 0) {
            *rc = PYC_EXIT_INTERRUPTED;
            return NULL;
        }
        if (r != PYC_RECV_MSG)
            continue;
        if (c == chan && pyc_client_is_child_of(m, id))
            return m;
        pyc_msg_destroy(&m);
    }
}

/* The limits `status` shows: the kernel's (usage_reply's pyc.limits, which lists only those set, in seconds,
 * bytes and files), with null for each of the seven a session is made with (pyc new --idle ...) that is off,
 * so that "no limit" is said rather than left out.  A new reference. */
static json_t *
status_limits(json_t *kernel_limits)
{
    static const char *const shown[] = {"idle_timeout", "lifetime",     "cell_timeout", "cell_cpu",
                                        "output_limit", "memory_limit", "open_files"};
    json_t *l = json_object();
    for (size_t i = 0; l != NULL && i < sizeof shown / sizeof shown[0]; i++) {
        json_t *v = json_object_get(kernel_limits, shown[i]);
        json_object_set_new(l, shown[i], v != NULL ? json_incref(v) : json_null());
    }
    json_object_update_missing(l, kernel_limits);
    return l;
}

int
cli_status(const cli_args_t *a)
{
    int rc;
    pyc_session_file_t sf;
    const char *name = a->pos[0];
    cli_catch_sigint();
    pyc_client_t *cl = cli_connect(name, &sf, false, false, &rc);
    if (cl == NULL) {
        if (rc == PYC_EXIT_NOSESSION)
            cli_status_ended(name);   /* what is left of it: its checkpoint (checkpoints.c) */
        return rc;
    }
    pyc_error_t err;
    pyc_msg_t *usage = NULL, *probe = NULL;
    char id[PYC_MSG_ID_LEN + 1];
    json_t *out = NULL, *count = NULL, *uptime = NULL;
    const char *state = NULL;
    rc = PYC_EXIT_CONNECTION;

    /* 1) usage_request on control: pyc's reply says busy or idle and the execution count itself. */
    if (pyc_client_send(cl, PYC_CHAN_CONTROL, "usage_request", NULL, NULL, NULL, NULL, 0, id, &err) < 0) {
        cli_err("%s", err.text);
        goto done;
    }
    rc = PYC_EXIT_OK;
    usage = reply_within(cl, PYC_CHAN_CONTROL, id, pyc_now_s(), USAGE_WAIT_MS, &rc);
    if (rc != PYC_EXIT_OK)
        goto done;
    json_t *pm = usage != NULL ? json_object_get(usage->content, "pyc") : NULL;
    const pyc_connfile_t *cfs[1] = {&sf.cf};
    bool alive = true;
    if (usage == NULL && pyc_client_heartbeat(cfs, 1, cli_hb_ms() < LS_HB_MS ? cli_hb_ms() : LS_HB_MS, &alive,
                                              NULL) == 0 && !alive) {
        /* 0) A stopped or stuck kernel answers nothing, not even its heartbeat: unresponsive, as `ls` says. */
        state = "unresponsive";
    } else if (json_is_string(json_object_get(pm, "execution_state"))) {
        state = json_string_value(json_object_get(pm, "execution_state"));
        count = json_incref(json_object_get(pm, "execution_count"));
    } else {
        /* 2) Else the shell probe (see the top of this file), once kernel_info on control has shown that the
         * kernel hears us at all: a kernel that drops what we sign would look busy. */
        pyc_msg_t *info = NULL;
        int r = usage == NULL ? pyc_client_request(cl, PYC_CHAN_CONTROL, "kernel_info_request", NULL, cli_hb_ms(),
                                                   &info, &err)
                              : PYC_RECV_MSG;
        pyc_msg_destroy(&info);
        if (r == PYC_RECV_TIMEOUT) {
            cli_err("session %s: the kernel ignores our messages: the session file's key is probably not the "
                    "kernel's (its heartbeat answers, but not kernel_info within %g s)", name, cli_hb_ms() / 1e3);
            rc = PYC_EXIT_PROTOCOL;
            goto done;
        }
        if (r != PYC_RECV_MSG) {
            rc = r == PYC_RECV_SIGNAL ? PYC_EXIT_INTERRUPTED : cli_recv_failed(&err);
            goto done;
        }
        if (send_silent(cl, NULL, id) < 0) {
            rc = PYC_EXIT_CONNECTION;
            goto done;
        }
        probe = reply_within(cl, PYC_CHAN_SHELL, id, pyc_now_s(), BUSY_PROBE_MS, &rc);
        if (rc != PYC_EXIT_OK)
            goto done;
        state = probe != NULL ? "idle" : "busy";
        count = probe != NULL ? json_incref(json_object_get(probe->content, "execution_count")) : NULL;
    }
    if (json_is_number(json_object_get(pm, "uptime")))
        uptime = json_incref(json_object_get(pm, "uptime"));
    else if (sf.created > 0)
        uptime = json_real(pyc_wall_s() - sf.created);

    json_t *memory = json_object();
    unsigned long long rss, pss;
    if (memory != NULL && sf.pid > 0 && pyc_proc_memory((pid_t)sf.pid, &rss, &pss) == 0) {
        json_object_set_new(memory, "rss", json_integer((json_int_t)rss));
        json_object_set_new(memory, "pss", json_integer((json_int_t)pss));
    } else if (memory != NULL) {
        if (json_is_integer(json_object_get(pm, "rss")))
            json_object_set(memory, "rss", json_object_get(pm, "rss"));
        if (json_is_integer(json_object_get(pm, "pss")))
            json_object_set(memory, "pss", json_object_get(pm, "pss"));
    }
    if (memory != NULL && usage != NULL && json_is_number(json_object_get(usage->content, "kernel_memory")))
        json_object_set(memory, "kernel_memory", json_object_get(usage->content, "kernel_memory"));
    char path[4096];
    rc = PYC_EXIT_OSERR;
    if (memory == NULL || cli_session_path(path, sizeof path, name, ".json") < 0) {
        json_decref(memory);
        goto done;
    }
    out = json_pack("{s:s, s:o, s:s, s:O, s:O, s:o, s:s}", "name", name, "pid",
                    sf.pid > 0 ? json_integer(sf.pid) : json_null(), "state", state, "execution_count",
                    json_is_integer(count) ? count : json_null(), "uptime", uptime != NULL ? uptime : json_null(),
                    "memory", memory, "connection_file", path);
    if (out != NULL && json_is_object(json_object_get(pm, "limits")))
        json_object_set_new(out, "limits", status_limits(json_object_get(pm, "limits")));
    if (out != NULL && json_object_get(pm, "checkpoint") != NULL)
        json_object_set(out, "checkpoint", json_object_get(pm, "checkpoint"));
    if (out != NULL && json_is_object(json_object_get(pm, "environment")))
        json_object_set(out, "environment", json_object_get(pm, "environment"));
    if (out != NULL && usage != NULL)
        json_object_set(out, "usage", usage->content);
    if (out == NULL) {
        cli_err("out of memory");
        goto done;
    }
    char *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text != NULL) {
        puts(text);
        free(text);
    }
    rc = PYC_EXIT_OK;
    if (strcmp(state, "unresponsive") == 0) {
        cli_err("session %s: the kernel (pid %ld) does not answer its heartbeat: it is stopped or stuck (pyc kill "
                "%s ends it)", name, sf.pid, name);
        rc = PYC_EXIT_CONNECTION;
    }
done:
    json_decref(out);
    json_decref(count);
    json_decref(uptime);
    pyc_msg_destroy(&usage);
    pyc_msg_destroy(&probe);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
    return rc;
}

/* Undoes Python's repr() of a str made of printable ASCII: strips the quotes and the escapes \\ and \'.
 * Returns a new string, or NULL when text is not such a repr. */
static char *
unrepr(const char *text)
{
    size_t n = strlen(text);
    if (n < 2 || (text[0] != '\'' && text[0] != '"') || text[n - 1] != text[0])
        return NULL;
    char *out = malloc(n);
    if (out == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (text[i] == '\\') {
            if (i + 2 >= n || (text[i + 1] != '\\' && text[i + 1] != '\'')) {
                free(out);
                return NULL;
            }
            i++;
        }
        out[k++] = text[i];
    }
    out[k] = '\0';
    return out;
}

int
cli_vars(const cli_args_t *a)
{
    int rc;
    pyc_session_file_t sf;
    cli_catch_sigint();
    pyc_client_t *cl = cli_connect(a->pos[0], &sf, false, false, &rc);
    if (cl == NULL)
        return rc;
    char id[PYC_MSG_ID_LEN + 1];
    pyc_msg_t *reply = NULL;
    json_t *ue = json_pack("{s:s}", "vars", VARS_EXPR), *list = NULL;
    char *json_text = NULL;
    rc = PYC_EXIT_CONNECTION;
    if (ue == NULL || send_silent(cl, ue, id) < 0 || (reply = wait_reply(cl, PYC_CHAN_SHELL, id, &rc)) == NULL)
        goto out;
    json_t *v = json_object_get(json_object_get(reply->content, "user_expressions"), "vars");
    const char *status = json_string_value(json_object_get(v, "status"));
    if (status == NULL || strcmp(status, "ok") != 0) {
        cli_err("the kernel could not list its names: %s: %s",
                json_string_value(json_object_get(v, "ename")) ?: "no answer",
                json_string_value(json_object_get(v, "evalue")) ?: "");
        rc = PYC_EXIT_REFUSED;
        goto out;
    }
    const char *text = json_string_value(json_object_get(json_object_get(v, "data"), "text/plain"));
    json_error_t jerr;
    if (text == NULL || (json_text = unrepr(text)) == NULL || (list = json_loads(json_text, 0, &jerr)) == NULL ||
        !json_is_array(list)) {
        cli_err("the kernel's answer is not the list asked for");
        goto out;
    }
    char *s = json_dumps(list, JSON_COMPACT);
    if (s != NULL) {
        puts(s);
        free(s);
    }
    rc = PYC_EXIT_OK;
out:
    json_decref(ue);
    json_decref(list);
    free(json_text);
    pyc_msg_destroy(&reply);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
    return rc;
}

/* The number of code points in the UTF-8 text s: Jupyter's cursor_pos counts those. */
static long
codepoints(const char *s)
{
    long n = 0;
    for (; *s != '\0'; s++) {
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    }
    return n;
}

int
cli_complete(const cli_args_t *a)
{
    int rc;
    pyc_session_file_t sf;
    const char *text = a->pos[1];
    cli_catch_sigint();
    pyc_client_t *cl = cli_connect(a->pos[0], &sf, false, false, &rc);
    if (cl == NULL)
        return rc;
    pyc_error_t err;
    char id[PYC_MSG_ID_LEN + 1];
    pyc_msg_t *reply = NULL;
    rc = PYC_EXIT_CONNECTION;
    json_t *c = json_pack("{s:s, s:I}", "code", text, "cursor_pos", (json_int_t)codepoints(text));
    if (c == NULL) {
        cli_err("TEXT is not valid UTF-8");
        rc = PYC_EXIT_USAGE;
        goto out;
    }
    if (pyc_client_send(cl, PYC_CHAN_SHELL, "complete_request", c, NULL, NULL, NULL, 0, id, &err) < 0) {
        cli_err("%s", err.text);
        goto out;
    }
    if ((reply = wait_reply(cl, PYC_CHAN_SHELL, id, &rc)) == NULL)
        goto out;
    if (a->value[CLI_COMPLETE_JSON] != NULL) {
        cli_print_json_line(reply->content);
    } else {
        json_t *matches = json_object_get(reply->content, "matches"), *mv;
        size_t i;
        json_array_foreach(matches, i, mv) {
            if (json_is_string(mv))
                puts(json_string_value(mv));
        }
    }
    const char *status = json_string_value(json_object_get(reply->content, "status"));
    rc = status != NULL && strcmp(status, "ok") == 0 ? PYC_EXIT_OK : PYC_EXIT_REFUSED;
out:
    json_decref(c);
    pyc_msg_destroy(&reply);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
    return rc;
}

int
cli_int(const cli_args_t *a)
{
    int rc;
    pyc_session_file_t sf;
    pyc_client_t *cl = cli_connect(a->pos[0], &sf, false, false, &rc);
    if (cl == NULL)
        return rc;
    pyc_error_t err;
    pyc_msg_t *reply = NULL;
    int r = pyc_client_request(cl, PYC_CHAN_CONTROL, "interrupt_request", NULL, cli_connect_ms(), &reply, &err);
    if (r == PYC_RECV_MSG) {
        rc = PYC_EXIT_OK;
    } else if (r == PYC_RECV_ERROR) {
        rc = cli_recv_failed(&err);
    } else {
        cli_err("the kernel did not answer the interrupt_request");
        rc = PYC_EXIT_CONNECTION;
    }
    pyc_msg_destroy(&reply);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
    return rc;
}

int
cli_status_ended(const char *name)
{
    pyc_session_file_t sf;
    cli_state_t st = cli_session_state(name, &sf, 0, NULL);
    long pid = st == CLI_STALE ? sf.pid : 0;
    pyc_session_file_clear(&sf);
    if (st != CLI_STALE && st != CLI_MISSING)
        return 0;
    /* A stale session's own file; without one (no session file, or a session that ran no cell), the newest
     * of its name, which pyc new NAME --replay takes. */
    char *cp = pid > 0 ? cli_checkpoint_of(name, pid) : NULL;
    if (cp == NULL)
        cp = cli_checkpoint_newest(name, NULL);
    if (st == CLI_MISSING && cp == NULL)
        return 0;                /* nothing is left of it: no session, no checkpoint */
    json_t *closed = pid > 0 ? cli_event_closing(name, pid) : NULL;
    json_t *o = json_pack("{s:s, s:o, s:s}", "name", name, "pid", pid > 0 ? json_integer(pid) : json_null(), "state",
                          st == CLI_STALE ? "stale" : "none");
    if (o != NULL && closed != NULL) {
        json_object_set(o, "reason", json_object_get(closed, "reason"));
        if (json_object_get(closed, "signal") != NULL)
            json_object_set(o, "signal", json_object_get(closed, "signal"));
    }
    char replay[128];
    snprintf(replay, sizeof replay, "pyc new %s --replay", name);
    if (o != NULL) {
        json_object_set_new(o, "checkpoint", cp != NULL ? json_string(cp) : json_null());
        json_object_set_new(o, "replay", cp != NULL ? json_string(replay) : json_null());
        cli_print_json_line(o);
    }
    json_decref(o);
    json_decref(closed);
    free(cp);
    return 1;
}
